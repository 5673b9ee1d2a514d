/* SPDX-License-Identifier: Apache-2.0 */
/*
 * preempt_gate.c - gating: making one TSG of this process unschedulable
 * for a lease, on the node agent's GATE, and making sure it ends.
 *
 * Owns: issuing DISABLE_CHANNELS (disable or enable) and the PREEMPT that
 * follows a disable, the lease of every gated TSG, enabling a TSG again
 * when its lease lapses, when the node agent asks, or when the connection
 * to it ends. Does not own: the tables (preempt_track.c), the connection
 * and the RESULT message (preempt_conn.c).
 *
 * A disabled channel is not scheduled at all: the application stalls on
 * its next wait until the channel is enabled again. So the library never
 * relies on the node agent to end a gate: every gate has a lease of at
 * most GQ_GATE_LEASE_MAX_MS, and only this thread issues the controls.
 * Runs on the library's own thread only.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "preempt.h"
#include "preempt_gate.h"

/* An enable that failed for a reason other than the TSG being gone is
 * retried this often until it succeeds. */
#define PA_GATE_RETRY_NS (20ull * 1000000ull)
/* How long the PREEMPT after a disable may wait for the TSG to leave the
 * engine (the measured preempt takes 0.26-0.4 ms). */
#define PA_GATE_PREEMPT_TIMEOUT_US 100000u

static unsigned long pa_gate_lapses; /* leases that ended without renewal */

/* One control on the subdevice, with the real ioctl. */
static rm_u32 pa_gate_issue(int fd, rm_handle h_client, rm_handle h_object, rm_u32 cmd,
			    void *params, rm_u32 size, rm_u32 *status, rm_u64 *elapsed_ns)
{
	struct rm_control_params p;
	rm_u64 t0 = pa_now_ns();
	int ret, err;

	memset(&p, 0, sizeof(p));
	p.hClient = h_client;
	p.hObject = h_object;
	p.cmd = cmd;
	p.params = (rm_u64)(uintptr_t)params;
	p.paramsSize = size;
	ret = pa_real_ioctl()(fd, RM_IOCTL_CONTROL, &p);
	err = errno;
	*elapsed_ns += pa_now_ns() - t0;
	*status = p.status;
	if (ret != 0)
		return err != 0 ? (rm_u32)err : EIO;
	return 0;
}

/* What one gate or ungate needs, copied out under the lock. */
struct pa_gate_job {
	int fd;
	rm_handle h_client, h_tsg, h_subdevice;
	struct rm_disable_channels params;
};

/* The TSG is gone from RM (client, object or its channels freed): there
 * is nothing left to enable. */
static int pa_gate_gone(rm_u32 status)
{
	return status == RM_ERR_INVALID_CLIENT || status == RM_ERR_INVALID_OBJECT_HANDLE ||
	       status == RM_ERR_INVALID_OBJECT_PARENT || status == RM_ERR_OBJECT_NOT_FOUND;
}

/* Record the new state of a TSG and report it; under no lock on entry. */
static void pa_gate_note(rm_handle h_client, rm_handle h_tsg, int gated, rm_u64 lease_end_ns)
{
	struct pa_tsg *g;
	int wake = 0;

	pa_lock();
	g = pa_track_tsg_find(&pa.track, h_client, h_tsg);
	if (g != NULL) {
		int changed = g->gated != gated;

		g->gated = gated;
		g->lease_end_ns = lease_end_ns;
		if (changed)
			pa_emit(&wake, &(struct pa_event){ .type = PA_EV_TSG, .tsg = *g });
	}
	pa_unlock();
	pa_wake(wake);
}

/* Enable the channels of the job's TSG. On failure the TSG stays gated
 * with a short lease, so the lapse path tries again. */
static rm_u32 pa_gate_enable(struct pa_gate_job *j, rm_u32 *status, rm_u64 *elapsed_ns)
{
	rm_u32 err;

	j->params.bDisable = 0;
	err = pa_gate_issue(j->fd, j->h_client, j->h_subdevice, RM_CTRL_FIFO_DISABLE_CHANNELS,
			    &j->params, sizeof(j->params), status, elapsed_ns);
	if (err == 0 && (*status == RM_OK || pa_gate_gone(*status))) {
		pa_gate_note(j->h_client, j->h_tsg, 0, 0);
		return 0;
	}
	pa_info("enabling TSG 0x%x of client 0x%x failed (err %u, %s); retrying", j->h_tsg,
		j->h_client, err, rm_status_name(*status));
	pa_gate_note(j->h_client, j->h_tsg, 1, pa_now_ns() + PA_GATE_RETRY_NS);
	return err;
}

/* Copy what a gate or ungate of (h_client, h_tsg) needs. Returns 0, or
 * GQ_ERR_UNKNOWN_TSG / GQ_ERR_NOT_GATEABLE. Sets *gated to its state. */
static rm_u32 pa_gate_prepare(rm_handle h_client, rm_handle h_tsg, struct pa_gate_job *j,
			      int *gated)
{
	struct pa_tsg *g;
	rm_u32 err;

	pa_lock();
	g = pa_track_tsg_find(&pa.track, h_client, h_tsg);
	if (g == NULL) {
		pa_unlock();
		return GQ_ERR_UNKNOWN_TSG;
	}
	err = pa_gate_params(g, 1, &j->params);
	j->fd = g->fd;
	j->h_client = h_client;
	j->h_tsg = h_tsg;
	j->h_subdevice = g->h_subdevice;
	*gated = g->gated;
	pa_unlock();
	return err;
}

static rm_u32 pa_gate_on(const struct gq_command *c, rm_u32 *status, rm_u64 *elapsed_ns)
{
	rm_u64 lease_ns = c->arg * 1000000ull;
	struct rm_tsg_preempt pr = { .bWait = 1, .bManualTimeout = 1,
				     .timeoutUs = PA_GATE_PREEMPT_TIMEOUT_US };
	struct pa_gate_job j;
	rm_u32 err, pst = 0;
	int gated = 0;

	err = pa_gate_prepare(c->h_client, c->h_tsg, &j, &gated);
	if (err != 0)
		return err;
	if (gated) {
		/* A renewal: the channels are already disabled. */
		pa_gate_note(c->h_client, c->h_tsg, 1, pa_now_ns() + lease_ns);
		return 0;
	}
	err = pa_gate_issue(j.fd, j.h_client, j.h_subdevice, RM_CTRL_FIFO_DISABLE_CHANNELS,
			    &j.params, sizeof(j.params), status, elapsed_ns);
	if (err != 0 || *status != RM_OK)
		return err;
	pa_gate_note(c->h_client, c->h_tsg, 1, pa_now_ns() + lease_ns);
	/* Disabling does not take a TSG that is running off the engine. */
	if (pa_gate_issue(j.fd, j.h_client, j.h_tsg, RM_CTRL_TSG_PREEMPT, &pr, sizeof(pr), &pst,
			  elapsed_ns) != 0 ||
	    pst != RM_OK)
		pa_debug("preempt after gating TSG 0x%x: %s", j.h_tsg, rm_status_name(pst));
	return 0;
}

static rm_u32 pa_gate_off(const struct gq_command *c, rm_u32 *status, rm_u64 *elapsed_ns)
{
	struct pa_gate_job j;
	int gated = 0;
	rm_u32 err = pa_gate_prepare(c->h_client, c->h_tsg, &j, &gated);

	if (err != 0 || !gated)
		return err == GQ_ERR_NOT_GATEABLE ? 0 : err;
	return pa_gate_enable(&j, status, elapsed_ns);
}

rm_u32 pa_gate_command(const struct gq_command *c, rm_u32 *status, rm_u64 *elapsed_ns)
{
	*status = 0;
	*elapsed_ns = 0;
	if (c->op == GQ_OP_GATE)
		return pa_gate_on(c, status, elapsed_ns);
	return pa_gate_off(c, status, elapsed_ns);
}

/* The earliest lease end among gated TSGs, 0 if none is gated. */
static rm_u64 pa_gate_next(void)
{
	rm_u64 next = 0;

	pa_lock();
	for (unsigned i = 0; i < pa.track.tsg_hi; i++) {
		const struct pa_tsg *g = &pa.track.tsgs[i];

		if (g->used && g->gated && (next == 0 || g->lease_end_ns < next))
			next = g->lease_end_ns;
	}
	pa_unlock();
	return next;
}

/* Whether slot i holds a gated TSG whose lease ends by `until`; copies
 * its handles. Returns -1 past the end of the table. */
static int pa_gate_due(unsigned i, rm_u64 until, rm_handle *h_client, rm_handle *h_tsg)
{
	const struct pa_tsg *g;
	int due;

	pa_lock();
	if (i >= pa.track.tsg_hi) {
		pa_unlock();
		return -1;
	}
	g = &pa.track.tsgs[i];
	due = g->used && g->gated && g->lease_end_ns <= until;
	*h_client = g->h_client;
	*h_tsg = g->h;
	pa_unlock();
	return due;
}

/* Enable every gated TSG whose lease ends by `until` (every gated TSG when
 * until is UINT64_MAX), once each. Returns the earliest lease end left
 * (an enable that failed is retried PA_GATE_RETRY_NS later), or 0. */
static rm_u64 pa_gate_sweep(rm_u64 until, const char *why)
{
	rm_handle h_client, h_tsg;
	int due;

	for (unsigned i = 0; (due = pa_gate_due(i, until, &h_client, &h_tsg)) >= 0; i++) {
		struct pa_gate_job j;
		rm_u64 elapsed = 0;
		rm_u32 status = 0;
		int gated = 0;

		if (!due)
			continue;
		if (pa_gate_prepare(h_client, h_tsg, &j, &gated) != 0 || !gated) {
			pa_gate_note(h_client, h_tsg, 0, 0);
			continue;
		}
		pa_gate_lapses++;
		pa_info("TSG 0x%x of client 0x%x: %s; enabling it (%lu so far)", h_tsg, h_client,
			why, pa_gate_lapses);
		pa_gate_enable(&j, &status, &elapsed);
	}
	return pa_gate_next();
}

int pa_gate_expire(void)
{
	rm_u64 now = pa_now_ns();
	rm_u64 next = pa_gate_sweep(now, "lease lapsed");
	rm_u64 ms;

	if (next == 0)
		return -1;
	now = pa_now_ns();
	ms = next > now ? (next - now + 999999u) / 1000000u : 0;
	return ms > GQ_GATE_LEASE_MAX_MS ? (int)GQ_GATE_LEASE_MAX_MS : (int)ms;
}

void pa_gate_release_all(void)
{
	pa_gate_sweep(UINT64_MAX, "node agent gone");
}
