/* SPDX-License-Identifier: Apache-2.0 */
/*
 * agent.h - the node agent's wiring (main.c, hooks.c): what main.c starts
 * and hooks.c installs. It includes the core (agent/core/core.h) and every
 * adapter's header (agent/io/), so the wiring sees all of them; a core
 * file includes core.h alone, an adapter the headers it uses.
 */
#ifndef GPUQOS_AGENT_AGENT_H
#define GPUQOS_AGENT_AGENT_H

#include "agent/core/core.h"
#include "agent/io/configfile.h"
#include "agent/io/ctl.h"
#include "agent/io/direct.h"
#include "agent/io/io.h"
#include "agent/io/peer.h"
#include "agent/io/procinfo.h"
#include "agent/io/statefile.h"
#include "agent/io/tracker.h"
#include "common/loop.h"

/* The state file and the root-only control socket live apart from the
 * preempt socket's directory (GQ_DEFAULT_SOCKET_DIR), which the device
 * plugin mounts into every GPU container; the chart's host.stateDir. */
#define AGENT_DEFAULT_STATE_DIR "/run/gpuqos-agent"
#define AGENT_DEFAULT_CTL_SOCKET AGENT_DEFAULT_STATE_DIR "/ctl.sock"
#define AGENT_DEFAULT_NVIDIACTL "/dev/nvidiactl"

/* hooks.c: the wiring between core and adapters. hooks_install fills
 * struct agent_hooks, adds the periodic tick and the wake-up timer and the
 * after-batch posts to the loop: main.c calls it after Kubernetes mode and
 * the direct path started, before any peer or tracker event. */
int hooks_install(struct agent *a);
/* The wake-up follows the earliest deadline of the core and the tracker. */
void hooks_wake_rearm(struct agent *a);
/* The tick follows the config's interval (also after a reload). */
void hooks_tick_rearm(struct agent *a);

#endif
