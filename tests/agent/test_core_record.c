/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_core_record.c - unit tests of the core's record.c and changes.c, on
 * the fake clock and recording hooks of core_fixture.h: the records a pass
 * keeps and the queue of what changed that the faces publish.
 */
#include "tests/agent/core_fixture.h"
#include "tests/check.h"

#include <string.h>
#include <stdio.h>

/* The faces publish what changed (record.c, changes.c): a pass that
 * changed nothing queues no record; a changed decision or a change of
 * what the RM holds queues exactly that TSG's record, once a batch, in the
 * order the records changed (not the table's); a TSG that goes is queued
 * as gone, with its pod. */
static void test_records_publish_changes(void)
{
	struct tsg *tb, *tl;
	struct agent *a = be_beside_lc(&tb, &tl);
	size_t n;

	snprintf(tl->proc->pod_uid, sizeof(tl->proc->pod_uid), "pod-lc");
	CHECK(a->changes.n >= 2); /* the first records */
	CHECK(tb->rec.ts == 50 && tb->rec.state == TSG_CONVERGED && tb->rec.cls == CLASS_BE);
	changes_clear(a);
	reconcile(a);
	reconcile(a);
	CHECK_EQ_U(a->changes.n, 0); /* nothing changed: nothing to publish */
	CHECK(!a->changes.overflow);
	/* Someone sets the BE back: the RM holds 2048, a SET goes. */
	tsg_observe_ts(tb, 2048, fake_now);
	n = nsent;
	reconcile(a);
	CHECK_EQ_U(a->changes.n, 1);
	CHECK(a->changes.v[0].pid == 1 && a->changes.v[0].h_tsg == tb->h_tsg && !a->changes.v[0].gone);
	CHECK(tb->rec.ts == 2048 && tb->rec.ts_desired == 50 && tb->rec.state == TSG_PENDING);
	/* The SET took, in the same batch: the record follows, queued once. */
	CHECK(last_sent(GQ_OP_SET_TIMESLICE, 1, n) < nsent);
	answer(a, last_sent(GQ_OP_SET_TIMESLICE, 1, n), RM_OK, 50);
	reconcile(a);
	CHECK_EQ_U(a->changes.n, 1);
	CHECK(tb->rec.ts == 50 && tb->rec.state == TSG_CONVERGED);
	changes_clear(a);
	reconcile(a);
	CHECK_EQ_U(a->changes.n, 0);
	/* Two changes in two passes of one batch, the later TSG of the table
	 * first: queued in the order they changed. */
	tsg_observe_ts(tb, 2048, fake_now);
	reconcile(a);
	tsg_observe_ts(tl, 2048, fake_now);
	reconcile(a);
	CHECK_EQ_U(a->changes.n, 2);
	CHECK(a->changes.v[0].h_tsg == tb->h_tsg && a->changes.v[0].pid == 1);
	CHECK(a->changes.v[1].h_tsg == tl->h_tsg && a->changes.v[1].pid == 2);
	CHECK(strcmp(a->changes.v[1].pod_uid, "pod-lc") == 0);
	changes_clear(a);
	/* The LC's TSG goes: queued as gone, with its pod. */
	tsg_drop(a, tl);
	CHECK_EQ_U(a->changes.n, 1);
	CHECK(a->changes.v[0].gone && a->changes.v[0].pid == 2 &&
	      strcmp(a->changes.v[0].pod_uid, "pod-lc") == 0);
	agent_free(a);
}

int main(void)
{
	core_fixture_start();
	test_records_publish_changes();
	CHECK_DONE();
}
