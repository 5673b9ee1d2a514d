/* SPDX-License-Identifier: Apache-2.0 */
/*
 * record.c - what reconcile decided, recorded once a pass for the faces
 * to render (struct tsg_record): class and its source, the timeslice and
 * interleave level the RM holds and the ones wanted, the control path,
 * where the settings stand, the process's window decision, a problem an
 * operator must see. A record that changed is queued (changes.c) once a
 * batch, so a pass that changed nothing publishes nothing. Does not
 * own the decisions (reconcile.c, window.c, rotate.c) or the faces
 * (agent/io/).
 */
#include "agent/core/core.h"

#include <stdio.h>
#include <string.h>

/* The path that carried t's timeslice, or would carry it before any
 * control: how it is controlled. */
static enum path timeslice_path(struct agent *a, const struct tsg *t)
{
	if (t->sent.action_path[ACTION_TIMESLICE] != PATH_NONE)
		return t->sent.action_path[ACTION_TIMESLICE];
	return tsg_path(a, t, ACTION_TIMESLICE).path;
}

/* A capability missing for its next control, or a control the RM refused
 * (not one that timed out): static text, so a repeat compares equal. */
static void problem_of(const struct tsg *t, struct tsg_record *r)
{
	if ((t->sent.blocked && strstr(t->sent.blocked, "CAP_")) ||
	    (t->want.desired_il >= 0 && t->want.desired_il == t->sent.il_refused))
		r->problem = RECORD_PROBLEM_CAPABILITY;
	else if (t->sent.has_last && t->sent.last_failed && !t->sent.last_timeout &&
		 t->sent.error[0])
		r->problem = RECORD_PROBLEM_REFUSED;
	if (r->problem)
		snprintf(r->problem_text, sizeof(r->problem_text), "%s", t->sent.error);
}

static void record_of(struct agent *a, const struct tsg *t, struct tsg_record *r)
{
	const struct proc *p = t->proc;

	memset(r, 0, sizeof(*r));
	r->cls = p->cls;
	r->cls_source = p->cls_source;
	r->gpu = t->gpu;
	r->ts = tsg_effective_ts(t);
	r->ts_applied = t->obs.applied_ts;
	r->ts_desired = t->want.desired_ts;
	r->il = tsg_effective_il(t);
	r->il_applied = t->obs.applied_il;
	r->il_desired = t->want.desired_il;
	r->path = timeslice_path(a, t);
	r->state = tsg_state_of(t);
	r->counted = !tsg_unverified(t);
	r->rotating = t->gate.rotate;
	r->launch_bound = p->busy.always != 0;
	r->wake_lead_us = proc_wake_lead_us(p);
	r->win_decided = p->win.decided;
	if (p->win.decided) {
		r->win_why = p->win.why;
		r->win_ask = p->win.ask;
		r->win_ask_us = p->win.ask_us;
		r->win_after_us = p->win.after_us;
	}
	problem_of(t, r);
}

/* A TSG without a record yet (rec_queued 0) changed by being new. */
void record_pass(struct agent *a)
{
	struct tsg_record r;

	for (struct tsg *t = a->tsgs; t; t = t->next) {
		record_of(a, t, &r);
		if (t->rec_queued && memcmp(&r, &t->rec, sizeof(r)) == 0)
			continue;
		t->rec = r;
		changes_tsg(a, t, 0);
	}
}

