/* SPDX-License-Identifier: Apache-2.0 */
/*
 * io.h - what the node agent's adapters (agent/io/) share beside the
 * model: the event loop and every watch and timer the agent holds, the
 * state file's descriptor and timer, the /proc worker pool. struct agent
 * points at one of these (a->io); the core never looks inside. Each
 * adapter's functions are declared in its own header (peer.h, ctl.h,
 * statefile.h, procinfo.h, tracker.h, direct.h, gpuinfo.h, kube_mode.h,
 * metrics.h).
 */
#ifndef GPUQOS_AGENT_IO_IO_H
#define GPUQOS_AGENT_IO_IO_H

#include "agent/core/core.h"
#include "agent/io/statefile.h"
#include "common/loop.h"

struct procinfo_pool;

struct agent_io {
	struct loop loop;
	struct loop_watch sig_w, listen_w, ctl_w, direct_w, trk_w;
	/* hooks.c: the periodic tick and the wake-up at the next deadline */
	struct loop_timer tick, wake;
	/* hooks.c: the passes after every batch of events, in this order */
	struct loop_post post_reconcile, post_reap, post_publish;
	struct state_file sf;          /* its lock and state.json writes (statefile.h) */
	struct procinfo_pool *pi_pool; /* /proc reads off the loop (procinfo.h) */
};

/* capsread.c: the effective capability set (capget(2)) and the ptrace
 * scope; what each action needs is the core's table (caps.h). 0, or -1
 * with errno (c->known stays 0). */
int caps_read(struct caps *c);

#endif
