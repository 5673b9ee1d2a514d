/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_core_pod.c - unit tests of the core's pod.c, on the fake clock and
 * recording hooks of core_fixture.h: Kubernetes mode's facts per pod and
 * the classes they give.
 */
#include "tests/agent/core_fixture.h"
#include "tests/check.h"

#include <errno.h>
#include <stdio.h>

/* Kubernetes mode: classes come from the facts pushed in for each pod,
 * each change once; a pod that goes leaves its processes pod-unknown, an
 * override stays, the table has a bound. */
static void test_pod_facts(void)
{
	struct agent *a = agent_new();
	struct proc *lc = proc_with_peer(a, 2, "latency-critical");
	struct proc *be = proc_with_peer(a, 3, "best-effort");
	struct proc *nopod = proc_with_peer(a, 4, "best-effort");
	struct pod_facts f = { .cls = CLASS_LC, .cls_source = CLS_SRC_ANNOTATION };
	char uid[40];

	a->mode = AGENT_MODE_KUBE;
	snprintf(lc->pod_uid, sizeof(lc->pod_uid), "uid-lc");
	snprintf(be->pod_uid, sizeof(be->pod_uid), "uid-be");
	/* Not listed yet: unmanaged, pod-unknown; in no pod: no-pod. */
	CHECK_EQ_U(pod_reclassify(a, NULL, NULL), 3);
	CHECK(lc->cls == CLASS_UNMANAGED && lc->cls_source == CLS_SRC_POD_UNKNOWN);
	CHECK(nopod->cls == CLASS_UNMANAGED && nopod->cls_source == CLS_SRC_NO_POD);
	CHECK_EQ_U(pod_set(a, "uid-lc", &f), 1);
	CHECK_EQ_U(pod_set(a, "uid-lc", &f), 0); /* the same facts: no change */
	f.cls = CLASS_BE;
	f.cls_source = CLS_SRC_DEFAULT;
	f.cls_invalid = 1;
	CHECK_EQ_U(pod_set(a, "uid-be", &f), 1);
	CHECK_EQ_U(pod_reclassify(a, "uid-lc", NULL), 1);
	CHECK(lc->cls == CLASS_LC && lc->cls_source == CLS_SRC_ANNOTATION);
	CHECK(be->cls == CLASS_UNMANAGED); /* only the pod asked for */
	CHECK_EQ_U(pod_reclassify(a, "uid-be", NULL), 1);
	CHECK(be->cls == CLASS_BE && be->cls_source == CLS_SRC_DEFAULT);
	CHECK(pod_find(a, "uid-be") && pod_find(a, "uid-be")->cls_invalid);
	/* An override wins over the pod, and outlives it. */
	CHECK(state_set(a, lc->pid, lc->starttime, 0, CLASS_BE) == 0);
	proc_classify(a, lc);
	CHECK(lc->cls == CLASS_BE && lc->cls_source == CLS_SRC_OVERRIDE);
	CHECK_EQ_U(pod_forget(a, "uid-lc"), 1);
	CHECK_EQ_U(pod_forget(a, "uid-lc"), 0);
	CHECK_EQ_U(pod_forget(a, "uid-be"), 1);
	pod_reclassify(a, NULL, NULL);
	CHECK(lc->cls == CLASS_BE && lc->cls_source == CLS_SRC_OVERRIDE);
	CHECK(be->cls == CLASS_UNMANAGED && be->cls_source == CLS_SRC_POD_UNKNOWN);
	/* Bad uids and the bound. */
	errno = 0;
	CHECK(pod_set(a, "", &f) == -1 && errno == EINVAL);
	CHECK(pod_set(a, "0123456789012345678901234567890123456789", &f) == -1 && errno == EINVAL);
	for (unsigned i = 0; i < AGENT_PODS_MAX; i++) {
		snprintf(uid, sizeof(uid), "p%u", i);
		CHECK(pod_set(a, uid, &f) == 1);
	}
	errno = 0;
	CHECK(pod_set(a, "one-more", &f) == -1 && errno == EDQUOT);
	CHECK(pod_set(a, "p7", &f) == 0); /* a known one still updates */
	CHECK(pod_find(a, "p16383") != NULL && pod_find(a, "one-more") == NULL);
	agent_free(a);
}

int main(void)
{
	core_fixture_start();
	test_pod_facts();
	CHECK_DONE();
}
