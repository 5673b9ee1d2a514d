/* SPDX-License-Identifier: Apache-2.0 */
/*
 * changes.c - the records changed since the faces last published (struct
 * record_queue): a TSG whose record changed (record.c), a TSG that went,
 * a process that came or went, each once a batch, in the order they
 * changed. After the batch the faces (agent/io/) publish what is queued
 * and clear it. Does not own the records (record.c) or the faces.
 */
#include "agent/core/core.h"

#include <stdio.h>
#include <string.h>

static void changes_add(struct agent *a, pid_t pid, rm_handle h_client, rm_handle h_tsg, int gone,
		  const char *pod_uid)
{
	struct record_queue *q = &a->changes;
	struct record_change *c;

	if (q->n == RECORD_CHANGES_MAX) {
		q->overflow = 1; /* the faces take every record as changed */
		return;
	}
	c = &q->v[q->n++];
	memset(c, 0, sizeof(*c));
	c->pid = pid;
	c->h_client = h_client;
	c->h_tsg = h_tsg;
	c->gone = gone;
	snprintf(c->pod_uid, sizeof(c->pod_uid), "%s", pod_uid ? pod_uid : "");
}

void changes_tsg(struct agent *a, struct tsg *t, int gone)
{
	uint64_t mark = a->changes.batch + 1;

	if (gone && !t->rec_queued)
		return; /* never recorded: no face showed it */
	if (!gone) {
		if (t->rec_queued == mark)
			return; /* queued already in this batch */
		t->rec_queued = mark;
	}
	changes_add(a, t->pid, t->h_client, t->h_tsg, gone, t->proc->pod_uid);
}

void changes_proc(struct agent *a, const struct proc *p)
{
	changes_add(a, p->pid, 0, 0, 0, p->pod_uid);
}

void changes_clear(struct agent *a)
{
	a->changes.n = 0;
	a->changes.overflow = 0;
	a->changes.batch++;
}
