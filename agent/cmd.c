/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cmd.c - commands sent to preempt agents and not yet answered: ids,
 * absolute deadlines, matching RESULTs, recording outcomes on the TSG
 * (backoff on failure) and marking a peer stalled when a deadline passes.
 * Does not own deciding which commands to send (reconcile.c, ctl.c).
 */
#include "agent/agent.h"
#include "agent/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *gq_op_name(uint32_t op)
{
	switch (op) {
	case GQ_OP_SET_TIMESLICE:
		return "SET_TIMESLICE";
	case GQ_OP_GET_TIMESLICE:
		return "GET_TIMESLICE";
	case GQ_OP_SET_INTERLEAVE:
		return "SET_INTERLEAVE";
	case GQ_OP_PREEMPT:
		return "PREEMPT";
	}
	return "?";
}

static const char *err_name(uint32_t err)
{
	switch (err) {
	case GQ_ERR_UNKNOWN_TSG:
		return "unknown TSG";
	case GQ_ERR_EXPIRED:
		return "deadline expired before the control started";
	case GQ_ERR_BAD_OP:
		return "bad op or argument";
	}
	return strerror((int)err);
}

/* The preempt agent drops a command not started within deadline_us; we
 * allow the same again for the control itself (RM round trips take
 * 100-450 us, but one once hung for minutes) before calling it lost. */
static uint64_t cmd_deadline(const struct agent *a)
{
	return now_us() + 2ull * a->cfg->control_deadline_ms * 1000u;
}

struct cmd *cmd_issue(struct agent *a, struct peer *p, struct tsg *t, uint32_t op, uint64_t arg,
		      struct ctl_conn *ctl)
{
	struct cmd *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	if (++a->next_seq == 0)
		a->next_seq = 1;
	c->seq = a->next_seq;
	c->peer = p;
	c->pid = t->pid;
	c->h_client = t->h_client;
	c->h_tsg = t->h_tsg;
	c->op = op;
	c->arg = arg;
	c->deadline = cmd_deadline(a);
	c->ctl = ctl;
	if (peer_send_command(a, p, c) != 0) {
		free(c);
		return NULL;
	}
	c->next = a->cmds;
	a->cmds = c;
	t->inflight++;
	a->n.commands++;
	log_debug("pid %d: COMMAND %u %s TSG 0x%x arg %llu", (int)t->pid, c->seq,
		  gq_op_name(op), t->h_tsg, (unsigned long long)arg);
	return c;
}

static void cmd_unlink(struct agent *a, struct cmd *c)
{
	for (struct cmd **pp = &a->cmds; *pp; pp = &(*pp)->next) {
		if (*pp == c) {
			*pp = c->next;
			return;
		}
	}
}

static void tsg_backoff(struct tsg *t)
{
	t->backoff_ms = t->backoff_ms ? t->backoff_ms * 2 : GQ_BACKOFF_MIN_MS;
	if (t->backoff_ms > GQ_BACKOFF_MAX_MS)
		t->backoff_ms = GQ_BACKOFF_MAX_MS;
	t->backoff_until = now_us() + (uint64_t)t->backoff_ms * 1000u;
}

/* Records the outcome on the TSG: observed value on success, backoff and
 * the error in words on failure. */
static void tsg_record(struct tsg *t, const struct cmd *c, const struct gq_result *r)
{
	int ok = r->err == 0 && r->rm_status == RM_OK;

	t->has_last = 1;
	t->last_op = c->op;
	t->last_status = r->rm_status;
	t->last_errno = r->err;
	t->last_timeout = 0;
	t->last_elapsed_us = r->elapsed_ns / 1000u;
	if (c->op == GQ_OP_PREEMPT || (c->op == GQ_OP_GET_TIMESLICE && !ok))
		return; /* changes no setting: says nothing of convergence */
	t->last_failed = !ok;
	if (ok) {
		t->error[0] = '\0';
		t->backoff_ms = 0;
		t->backoff_until = 0;
		if (c->op == GQ_OP_SET_TIMESLICE || c->op == GQ_OP_GET_TIMESLICE)
			t->applied_ts = (uint32_t)r->value;
		else if (c->op == GQ_OP_SET_INTERLEAVE)
			t->applied_il = (uint32_t)c->arg;
		return;
	}
	if (r->err)
		snprintf(t->error, sizeof(t->error), "%s: %s", gq_op_name(c->op), err_name(r->err));
	else
		snprintf(t->error, sizeof(t->error), "%s: %s", gq_op_name(c->op),
			 rm_status_name(r->rm_status));
	if (c->op == GQ_OP_SET_INTERLEAVE && r->err == 0 &&
	    r->rm_status == RM_ERR_INSUFFICIENT_PERMISSIONS) {
		/* Only CAP_SYS_NICE in the calling task helps; retrying cannot. */
		t->il_refused = (int32_t)c->arg;
		snprintf(t->error, sizeof(t->error),
			 "SET_INTERLEAVE: NV_ERR_INSUFFICIENT_PERMISSIONS: needs CAP_SYS_NICE");
		return;
	}
	tsg_backoff(t);
}

void cmd_result(struct agent *a, struct peer *p, const struct gq_result *r)
{
	struct cmd *c;
	struct tsg *t;

	for (c = a->cmds; c; c = c->next)
		if (c->seq == r->hdr.seq && c->peer == p)
			break;
	if (!c || c->op != r->op || c->h_client != r->h_client || c->h_tsg != r->h_tsg) {
		a->n.unknown_result++;
		log_debug("pid %d: RESULT %u matches no command", (int)p->pid, r->hdr.seq);
		return;
	}
	cmd_unlink(a, c);
	a->n.results++;
	t = tsg_find(a, c->pid, c->h_client, c->h_tsg);
	if (c->timed_out) {
		log_info("pid %d: late RESULT %u: control path works again", (int)p->pid, c->seq);
		p->stalled = 0;
	} else if (t && t->inflight) {
		t->inflight--;
	}
	if (r->err || r->rm_status) {
		a->n.failures++;
		log_warn("pid %d: %s on TSG 0x%x failed: %s, errno %u (%s)", (int)p->pid,
			 gq_op_name(c->op), c->h_tsg, rm_status_name(r->rm_status), r->err,
			 r->err ? err_name(r->err) : "none");
	}
	if (t)
		tsg_record(t, c, r);
	if (c->ctl)
		ctl_cmd_done(a, c->ctl, c, r->rm_status, r->err, NULL, r->value, r->elapsed_ns);
	free(c);
	a->dirty = 1;
}

static void cmd_timeout(struct agent *a, struct cmd *c)
{
	struct tsg *t = tsg_find(a, c->pid, c->h_client, c->h_tsg);

	c->timed_out = 1;
	a->n.timeouts++;
	log_warn("pid %d: %s on TSG 0x%x: no RESULT within its deadline, control path stalled",
		 (int)c->pid, gq_op_name(c->op), c->h_tsg);
	c->peer->stalled = 1;
	if (t) {
		if (t->inflight)
			t->inflight--;
		t->has_last = 1;
		t->last_op = c->op;
		t->last_timeout = 1;
		snprintf(t->error, sizeof(t->error), "%s: no result within the deadline",
			 gq_op_name(c->op));
	}
	if (c->ctl) {
		struct ctl_conn *ctl = c->ctl;

		c->ctl = NULL;
		ctl_cmd_done(a, ctl, c, 0, 0, "timeout", 0, 0);
	}
	a->dirty = 1;
}

void cmd_expire(struct agent *a)
{
	uint64_t now = now_us();

	for (struct cmd *c = a->cmds; c; c = c->next)
		if (!c->timed_out && c->deadline <= now)
			cmd_timeout(a, c);
}

uint64_t cmd_next_deadline(const struct agent *a)
{
	uint64_t next = 0;

	for (const struct cmd *c = a->cmds; c; c = c->next)
		if (!c->timed_out && (next == 0 || c->deadline < next))
			next = c->deadline;
	return next;
}

/* The peer went away: its commands will never be answered. */
void cmd_fail_peer(struct agent *a, struct peer *p)
{
	struct cmd **pp = &a->cmds;

	while (*pp) {
		struct cmd *c = *pp;

		if (c->peer != p) {
			pp = &c->next;
			continue;
		}
		*pp = c->next;
		if (c->ctl)
			ctl_cmd_done(a, c->ctl, c, 0, ECONNRESET, NULL, 0, 0);
		free(c);
	}
}

void cmd_detach_ctl(struct agent *a, struct ctl_conn *ctl)
{
	for (struct cmd *c = a->cmds; c; c = c->next)
		if (c->ctl == ctl)
			c->ctl = NULL;
}

void cmd_free_all(struct agent *a)
{
	while (a->cmds) {
		struct cmd *c = a->cmds;

		a->cmds = c->next;
		free(c);
	}
}
