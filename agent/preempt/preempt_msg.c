/* SPDX-License-Identifier: Apache-2.0 */
/*
 * preempt_msg.c - filling the messages the preempt agent sends and checking
 * the ones it receives.
 *
 * Owns: byte layouts (through abi/gq_proto.h), GATE/UNGATE and WINDOW
 * validation, the deadline rule. Does not own: sending, receiving or
 * issuing anything, or which RM control a COMMAND becomes (abi/rm_plan.h).
 */
#include <string.h>

#include "preempt_msg.h"

void pa_msg_hello(struct gq_hello *m, rm_u32 seq, rm_u32 pid, rm_u32 flags, rm_u32 ntsg,
		  const char *comm)
{
	memset(m, 0, sizeof(*m));
	gq_hdr_init(&m->hdr, GQ_HELLO, seq);
	m->pid = pid;
	m->flags = flags;
	m->lib_version = GQ_PROTO_VERSION;
	m->ntsg = ntsg;
	/* comm stays NUL-terminated: at most GQ_COMM_LEN - 1 characters. */
	memcpy(m->comm, comm, strnlen(comm, GQ_COMM_LEN - 1));
}

void pa_msg_tsg(struct gq_tsg *m, rm_u32 seq, const struct pa_tsg *g)
{
	memset(m, 0, sizeof(*m));
	gq_hdr_init(&m->hdr, GQ_TSG, seq);
	m->h_client = g->h_client;
	m->h_tsg = g->h;
	m->h_device = g->h_device;
	m->device_instance = g->device_instance;
	m->engine_type = g->engine_type;
	m->fd = (rm_u32)g->fd;
	m->timeslice_us = g->timeslice_us;
	m->app_timeslice_us = g->app_timeslice_us;
	m->interleave = g->interleave;
	m->flags = pa_tsg_flags(g);
}

void pa_msg_tsg_gone(struct gq_tsg_gone *m, rm_u32 seq, const struct pa_tsg *g)
{
	memset(m, 0, sizeof(*m));
	gq_hdr_init(&m->hdr, GQ_TSG_GONE, seq);
	m->h_client = g->h_client;
	m->h_tsg = g->h;
}

void pa_msg_synced(struct gq_synced *m, rm_u32 seq, rm_u32 ntsg)
{
	memset(m, 0, sizeof(*m));
	gq_hdr_init(&m->hdr, GQ_SYNCED, seq);
	m->ntsg = ntsg;
}

void pa_msg_activity(struct gq_activity *m, rm_u32 seq, rm_u64 launches, rm_u64 bursts,
		     rm_u64 active_ns, rm_u64 at_ns)
{
	memset(m, 0, sizeof(*m));
	gq_hdr_init(&m->hdr, GQ_ACTIVITY, seq);
	m->launches = launches;
	m->bursts = bursts;
	m->active_ns = active_ns;
	m->at_ns = at_ns;
}

void pa_msg_wake(struct gq_wake *m, rm_u32 seq, const struct pa_wake_counts *c)
{
	memset(m, 0, sizeof(*m));
	gq_hdr_init(&m->hdr, GQ_WAKE, seq);
	m->flags = c->stopped ? GQ_WAKE_F_STOPPED : 0;
	m->requests = c->requests;
	m->wakes = c->wakes;
	m->hits = c->hits;
	m->wasted = c->wasted;
	m->beaten = c->beaten;
	m->not_issued = c->not_issued;
	m->stops = c->stops;
	m->at_ns = c->at_ns;
}

int pa_msg_phase(struct gq_phase *m, rm_u32 seq, const struct pa_wake_counts *c, int span)
{
	memset(m, 0, sizeof(*m));
	if (c->period_ns < GQ_PHASE_PERIOD_MIN_NS || c->period_ns > GQ_PHASE_PERIOD_MAX_NS ||
	    !c->last_start_ns || c->last_start_ns > c->at_ns ||
	    c->at_ns - c->last_start_ns > GQ_PHASE_STALE_NS)
		return -1;
	gq_hdr_init(&m->hdr, GQ_PHASE, seq);
	m->period_ns = c->period_ns;
	m->last_start_ns = c->last_start_ns;
	m->at_ns = c->at_ns;
	if (span && c->span_us && (rm_u64)c->span_us * 1000u <= c->period_ns) {
		m->flags = GQ_PHASE_F_SPAN;
		m->span_us = c->span_us;
	}
	return 0;
}

rm_u32 pa_gate_check(const struct gq_command *c)
{
	if (c->op == GQ_OP_GATE)
		return c->arg >= 1 && c->arg <= GQ_GATE_LEASE_MAX_MS ? 0 : GQ_ERR_BAD_OP;
	if (c->op == GQ_OP_UNGATE)
		return c->arg <= GQ_GATE_LEASE_MAX_MS ? 0 : GQ_ERR_BAD_OP;
	return GQ_ERR_BAD_OP;
}

int pa_deadline_passed(rm_u64 received_ns, rm_u64 now_ns, rm_u32 deadline_us)
{
	return now_ns - received_ns >= (rm_u64)deadline_us * 1000u;
}

const char *pa_window_bad(const struct gq_window *w, rm_u64 now_ns)
{
	rm_u64 span = ((rm_u64)w->before_us + w->after_us) * 1000u;

	if ((w->flags & ~(GQ_WINDOW_F_ON | GQ_WINDOW_F_STATE)) != 0 || w->reserved != 0)
		return "reserved bits set";
	if (w->period_ns < GQ_PHASE_PERIOD_MIN_NS || w->period_ns > GQ_PHASE_PERIOD_MAX_NS)
		return "period out of range (1 ms .. 1 s)";
	if (w->before_us > GQ_WINDOW_BEFORE_MAX_US || w->after_us > GQ_WINDOW_AFTER_MAX_US)
		return "window reaches too far (before at most 10 ms, after at most 100 ms)";
	if (span == 0 || span * 100u > w->period_ns * (100u - GQ_WINDOW_ON_MIN_PERCENT))
		return "window empty, or longer than 90 % of the period";
	if (w->lease_ms == 0 || w->lease_ms > GQ_WINDOW_LEASE_MAX_MS)
		return "lease out of range (1 .. 2000 ms)";
	if (w->sent_ns > now_ns ? w->sent_ns - now_ns > GQ_WINDOW_CLOCK_SLACK_NS
				: now_ns - w->sent_ns > GQ_WINDOW_CLOCK_SLACK_NS)
		return "its clock is not ours (more than 50 ms apart)";
	if (w->start_ns == 0 || (w->start_ns > now_ns ? w->start_ns - now_ns : now_ns - w->start_ns) >
					GQ_WINDOW_START_SLACK_NS)
		return "start more than 10 s from now";
	return NULL;
}

rm_u64 pa_window_next_start(rm_u64 now_ns, rm_u64 start_ns, rm_u64 period_ns)
{
	if (start_ns > now_ns)
		return start_ns - (start_ns - now_ns - 1) / period_ns * period_ns;
	return start_ns + ((now_ns - start_ns) / period_ns + 1) * period_ns;
}

void pa_msg_result(struct gq_result *m, const struct gq_command *c, rm_u32 rm_status, rm_u32 err,
		   rm_u64 value, rm_u64 elapsed_ns)
{
	memset(m, 0, sizeof(*m));
	gq_hdr_init(&m->hdr, GQ_RESULT, c->hdr.seq);
	m->op = c->op;
	m->h_client = c->h_client;
	m->h_tsg = c->h_tsg;
	m->rm_status = rm_status;
	m->err = err;
	m->value = value;
	m->elapsed_ns = elapsed_ns;
}
