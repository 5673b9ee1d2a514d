/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_kube.c - scenario tests of agent/kube against fake_apiserver.py,
 * one scenario per run (argv[1]). Every scenario also checks that no call
 * into the client took long: the client must never block the agent's loop.
 * Does not test the fake server itself (test_kubectl.py does, with kubectl).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/kube/kube_client.h"
#include "tests/check.h"
#include "tests/kube/kube_harness.h"

/* The longest a call into the client may sleep (kube_harness.c: wall time
 * less CPU time and the wait for a CPU, so a slow or busy machine does not
 * add to it). A call that waits for the server sleeps until the server
 * answers; one that does not sleeps only for the odd page fault or lock.
 * KUBE_TEST_MAX_CALL_US overrides it (the valgrind run, whose threads take
 * turns on one lock). */
#define MAX_CALL_US 100000u

static uint64_t max_call_us(void)
{
	const char *s = getenv("KUBE_TEST_MAX_CALL_US");

	return s && *s ? strtoull(s, NULL, 10) : MAX_CALL_US;
}
#define NODE "node-a"

struct rec {
	int added, updated, deleted, synced;
	char last_uid[64];
};

struct env {
	struct fake_server srv;
	struct kube_config cfg;
	struct drv drv;
	struct kube_client *c;
	struct rec rec;
	struct kube_client_opts o;
};

static void on_pod(void *arg, enum kube_pod_change ch, const struct kube_pod *p)
{
	struct rec *r = arg;

	if (ch == KUBE_POD_ADDED)
		r->added++;
	else if (ch == KUBE_POD_UPDATED)
		r->updated++;
	else
		r->deleted++;
	snprintf(r->last_uid, sizeof(r->last_uid), "%s", p->uid);
}

static void on_synced(void *arg)
{
	((struct rec *)arg)->synced++;
}

static const struct kube_pod *pod_named(struct env *e, const char *name)
{
	for (size_t i = 0; i < kube_client_pod_count(e->c); i++)
		if (strcmp(kube_client_pod_at(e->c, i)->name, name) == 0)
			return kube_client_pod_at(e->c, i);
	return NULL;
}

static const char *ann(struct env *e, const char *pod, const char *key)
{
	const struct kube_pod *p = pod_named(e, pod);

	return p ? kube_pod_annotation(p, key) : NULL;
}

static int ann_is(struct env *e, const char *pod, const char *key, const char *v)
{
	const char *a = ann(e, pod, key);

	return v ? a && strcmp(a, v) == 0 : a == NULL;
}

/* A kubeconfig with a tokenFile, as an operator would write it. */
static int write_kubeconfig(struct env *e, const char *token)
{
	char path[400], text[2048];

	snprintf(path, sizeof(path), "%s/token", e->srv.dir);
	if (write_file(path, token) != 0)
		return -1;
	snprintf(text, sizeof(text),
		 "apiVersion: v1\nkind: Config\ncurrent-context: test\n"
		 "clusters:\n- name: fake\n  cluster:\n    server: %s\n"
		 "contexts:\n- name: test\n  context:\n    cluster: fake\n    user: agent\n"
		 "users:\n- name: agent\n  user:\n    tokenFile: token\n",
		 e->srv.url);
	snprintf(path, sizeof(path), "%s/kubeconfig", e->srv.dir);
	return write_file(path, text);
}

static int env_server(struct env *e)
{
	memset(e, 0, sizeof(*e));
	if (server_start(&e->srv, "tok-1", 0) != 0)
		return -1;
	return write_kubeconfig(e, "tok-1\n");
}

/* Loads the kubeconfig and starts the client. */
static int env_client_start(struct env *e)
{
	char path[400], err[512];

	snprintf(path, sizeof(path), "%s/kubeconfig", e->srv.dir);
	if (!e->cfg.server && kube_config_kubeconfig(&e->cfg, path, NULL, err, sizeof(err)) != 0) {
		fprintf(stderr, "kubeconfig: %s\n", err);
		return -1;
	}
	if (drv_init(&e->drv) != 0)
		return -1;
	e->o.node = NODE;
	e->o.io = drv_io(&e->drv);
	e->o.on_pod = on_pod;
	e->o.on_synced = on_synced;
	e->o.cb_arg = &e->rec;
	if (!e->o.backoff_min_ms)
		e->o.backoff_min_ms = 200;
	e->c = kube_client_new(&e->cfg, &e->o);
	if (!e->c)
		return -1;
	e->drv.client = e->c;
	return kube_client_start(e->c);
}

/* Starts the client and waits for the first list. */
static int env_client(struct env *e)
{
	if (env_client_start(e) != 0)
		return -1;
	WAIT(&e->drv, 5000, e->rec.synced >= 1);
	WAIT(&e->drv, 5000, server_watchers(&e->srv) == 1);
	return e->rec.synced >= 1 ? 0 : -1;
}

static void env_stop(struct env *e)
{
	printf("calls into the client: %llu, longest %llu us, longest asleep %llu us\n",
	       (unsigned long long)e->drv.calls, (unsigned long long)e->drv.max_call_us,
	       (unsigned long long)e->drv.max_blocked_us);
	CHECK(e->drv.max_blocked_us < max_call_us());
	kube_client_free(e->c);
	drv_fini(&e->drv);
	kube_config_free(&e->cfg);
	server_stop(&e->srv);
}

static int lists(struct env *e)
{
	return count_reqs(&e->srv, "list", 200, NULL, 0);
}

/* ---- scenarios ---- */

static int pod_events(struct fake_server *s, const char *pod, const char *reason);

static void t_list_watch(void)
{
	struct env e;
	const struct kube_pod *p;
	struct kube_stats st;

	CHECK(env_server(&e) == 0);
	CHECK(put_pod(&e.srv, "p1", NODE, "Running", "{\"gpuqos.io/class\":\"latency\"}") == 0);
	CHECK(put_pod(&e.srv, "other", "node-b", "Running", NULL) == 0);
	CHECK(env_client(&e) == 0);
	CHECK(kube_client_pod_count(e.c) == 1);
	p = pod_named(&e, "p1");
	CHECK(p && strcmp(p->phase, "Running") == 0 && strcmp(p->node, NODE) == 0);
	CHECK(p && p->n_container_ids == 1 && strcmp(p->container_ids[0], "p1-c0ffee") == 0 &&
	      strcmp(p->container_names[0], "main") == 0);
	CHECK(ann_is(&e, "p1", "gpuqos.io/class", "latency"));
	CHECK(e.rec.added == 1);

	CHECK(put_pod(&e.srv, "p2", NODE, "Pending", NULL) == 0);
	WAIT(&e.drv, 3000, pod_named(&e, "p2") != NULL);
	CHECK(put_pod(&e.srv, "p2", NODE, "Running", NULL) == 0);
	WAIT(&e.drv, 3000, pod_named(&e, "p2") && !strcmp(pod_named(&e, "p2")->phase, "Running"));
	CHECK(e.rec.updated == 1);
	CHECK(put_pod(&e.srv, "p1", NODE, "Running", "{\"gpuqos.io/class\":\"batch\"}") == 0);
	WAIT(&e.drv, 3000, ann_is(&e, "p1", "gpuqos.io/class", "batch"));
	CHECK(ctl_ok(&e.srv, "DELETE", "/_test/pods/default/p2", NULL) == 0);
	WAIT(&e.drv, 3000, pod_named(&e, "p2") == NULL);
	CHECK(e.rec.deleted == 1);
	/* A change on another node is not ours. */
	CHECK(put_pod(&e.srv, "other", "node-b", "Failed", NULL) == 0);
	SPIN(&e.drv, 200);
	CHECK(kube_client_pod_count(e.c) == 1 && e.rec.added == 2);
	kube_client_stats(e.c, &st);
	CHECK(st.lists == 1 && st.watches == 1 && lists(&e) == 1);
	env_stop(&e);
}

static void t_paging(void)
{
	struct env e;
	char name[16];

	CHECK(env_server(&e) == 0);
	for (int i = 0; i < 7; i++) {
		snprintf(name, sizeof(name), "pg%d", i);
		CHECK(put_pod(&e.srv, name, NODE, "Running", NULL) == 0);
	}
	e.o.list_limit = 3;
	CHECK(env_client(&e) == 0);
	CHECK(kube_client_pod_count(e.c) == 7);
	CHECK(lists(&e) == 3);
	CHECK(e.rec.synced == 1);
	env_stop(&e);
}

static void t_bookmark(void)
{
	struct env e;
	char rv[32], want[32];
	struct kube_stats st;

	CHECK(env_server(&e) == 0);
	CHECK(put_pod(&e.srv, "p1", NODE, "Running", NULL) == 0);
	CHECK(env_client(&e) == 0);
	/* Churn elsewhere in the cluster moves the RV without events for us. */
	for (int i = 0; i < 5; i++)
		CHECK(put_pod(&e.srv, "far", "node-b", "Running", NULL) == 0);
	snprintf(want, sizeof(want), "%d", server_rv(&e.srv));
	CHECK(strcmp(kube_client_resource_version(e.c), want) != 0);
	CHECK(ctl_ok(&e.srv, "POST", "/_test/bookmark", NULL) == 0);
	WAIT(&e.drv, 3000, strcmp(kube_client_resource_version(e.c), want) == 0);
	/* Forget history up to now and cut the stream: the bookmark's RV is
	 * still valid, so the client re-watches with no 410 and no list. */
	CHECK(ctl_ok(&e.srv, "POST", "/_test/compact", NULL) == 0);
	CHECK(ctl_ok(&e.srv, "POST", "/_test/disconnect", NULL) == 0);
	WAIT(&e.drv, 5000, count_reqs(&e.srv, "watch", 200, NULL, 0) == 2);
	last_req_rv(&e.srv, "watch", rv, sizeof(rv));
	CHECK(strcmp(rv, want) == 0);
	SPIN(&e.drv, 300);
	kube_client_stats(e.c, &st);
	CHECK(st.bookmarks >= 1 && st.relists == 0 && lists(&e) == 1);
	env_stop(&e);
}

/* Updates the client cannot see (its watches fail), then compaction:
 * the next watch meets 410 and the re-list must deliver every change. */
static void gone_case(const char *mode)
{
	struct env e;
	char body[64];
	struct kube_stats st;

	CHECK(env_server(&e) == 0);
	snprintf(body, sizeof(body), "{\"mode\":\"%s\"}", mode);
	CHECK(ctl_ok(&e.srv, "POST", "/_test/gone_mode", body) == 0);
	CHECK(put_pod(&e.srv, "p1", NODE, "Running", "{\"k\":\"1\"}") == 0);
	CHECK(put_pod(&e.srv, "p2", NODE, "Running", NULL) == 0);
	CHECK(env_client(&e) == 0);
	CHECK(ctl_ok(&e.srv, "POST", "/_test/fault", "{\"kind\":\"watch\",\"status\":500,"
		     "\"count\":2}") == 0);
	CHECK(ctl_ok(&e.srv, "POST", "/_test/disconnect", NULL) == 0);
	CHECK(put_pod(&e.srv, "p1", NODE, "Running", "{\"k\":\"2\"}") == 0);
	CHECK(put_pod(&e.srv, "p3", NODE, "Running", NULL) == 0);
	CHECK(ctl_ok(&e.srv, "DELETE", "/_test/pods/default/p2", NULL) == 0);
	CHECK(ctl_ok(&e.srv, "POST", "/_test/compact", NULL) == 0);
	WAIT(&e.drv, 8000, ann_is(&e, "p1", "k", "2") && pod_named(&e, "p3") &&
			   !pod_named(&e, "p2"));
	kube_client_stats(e.c, &st);
	CHECK(st.relists == 1 && lists(&e) == 2);
	CHECK(e.rec.deleted == 1 && e.rec.synced == 2);
	if (strcmp(mode, "http") == 0)
		CHECK(count_reqs(&e.srv, "watch", 410, NULL, 0) == 1);
	/* Then a live stream that reports 410 as an ERROR event. */
	WAIT(&e.drv, 5000, server_watchers(&e.srv) == 1);
	CHECK(ctl_ok(&e.srv, "POST", "/_test/expire", NULL) == 0);
	WAIT(&e.drv, 5000, lists(&e) == 3);
	kube_client_stats(e.c, &st);
	CHECK(st.relists == 2);
	env_stop(&e);
}

static void t_gone_event(void)
{
	gone_case("event");
}

static void t_gone_http(void)
{
	gone_case("http");
}

static void t_disconnect(void)
{
	struct env e;
	char rv_before[32], rv[32];

	CHECK(env_server(&e) == 0);
	CHECK(put_pod(&e.srv, "p1", NODE, "Running", NULL) == 0);
	CHECK(env_client(&e) == 0);
	snprintf(rv_before, sizeof(rv_before), "%s", kube_client_resource_version(e.c));
	CHECK(ctl_ok(&e.srv, "POST", "/_test/disconnect", NULL) == 0);
	/* Changed while the client is reconnecting: replayed, not lost. */
	CHECK(put_pod(&e.srv, "p1", NODE, "Running", "{\"k\":\"gap\"}") == 0);
	WAIT(&e.drv, 5000, ann_is(&e, "p1", "k", "gap"));
	last_req_rv(&e.srv, "watch", rv, sizeof(rv));
	CHECK(strcmp(rv, rv_before) == 0);
	CHECK(lists(&e) == 1 && count_reqs(&e.srv, "watch", 200, NULL, 0) == 2);
	CHECK(put_pod(&e.srv, "p1", NODE, "Running", "{\"k\":\"after\"}") == 0);
	WAIT(&e.drv, 3000, ann_is(&e, "p1", "k", "after"));
	env_stop(&e);
}

static void t_server_timeout(void)
{
	struct env e;

	CHECK(env_server(&e) == 0);
	CHECK(put_pod(&e.srv, "p1", NODE, "Running", NULL) == 0);
	e.o.watch_timeout_s = 1;
	CHECK(env_client(&e) == 0);
	WAIT(&e.drv, 6000, count_reqs(&e.srv, "watch", 200, NULL, 0) >= 3);
	CHECK(lists(&e) == 1);
	CHECK(put_pod(&e.srv, "p1", NODE, "Running", "{\"k\":\"v\"}") == 0);
	WAIT(&e.drv, 3000, ann_is(&e, "p1", "k", "v"));
	env_stop(&e);
}

static void t_token_rotation(void)
{
	struct env e;
	char path[400];
	struct kube_stats st;

	CHECK(env_server(&e) == 0);
	CHECK(put_pod(&e.srv, "p1", NODE, "Running", NULL) == 0);
	CHECK(env_client(&e) == 0);
	/* The kubelet rotates the projected token; the old one dies at once
	 * here, well before the 60 s re-read would pick the new one up. */
	snprintf(path, sizeof(path), "%s/token", e.srv.dir);
	CHECK(write_file(path, "tok-2\n") == 0);
	CHECK(ctl_ok(&e.srv, "POST", "/_test/token", "{\"token\":\"tok-2\"}") == 0);
	CHECK(ctl_ok(&e.srv, "POST", "/_test/disconnect", NULL) == 0);
	WAIT(&e.drv, 5000, count_reqs(&e.srv, "watch", 200, NULL, 0) == 2);
	CHECK(count_reqs(&e.srv, "watch", 401, NULL, 0) == 1);
	kube_client_stats(e.c, &st);
	CHECK(st.unauthorized == 1 && lists(&e) == 1);
	CHECK(strcmp(e.cfg.token, "tok-2") == 0);
	CHECK(put_pod(&e.srv, "p1", NODE, "Running", "{\"k\":\"v\"}") == 0);
	WAIT(&e.drv, 3000, ann_is(&e, "p1", "k", "v"));
	env_stop(&e);
}

/* In-cluster configuration over TLS: service-account files, the CA
 * checked, KUBERNETES_SERVICE_HOST/PORT. */
static void t_in_cluster_tls(void)
{
	struct env e;
	char sa[300], path[350], port[16], err[512], cmd[1200];

	memset(&e, 0, sizeof(e));
	if (access("/usr/bin/openssl", X_OK) != 0) {
		printf("SKIP: /usr/bin/openssl is missing\n");
		exit(77);
	}
	CHECK(server_start(&e.srv, "sa-token", 1) == 0);
	snprintf(sa, sizeof(sa), "%s/sa", e.srv.dir);
	snprintf(cmd, sizeof(cmd), "mkdir -p %s && cp %s %s/ca.crt", sa, e.srv.ca, sa);
	CHECK(system(cmd) == 0);
	snprintf(path, sizeof(path), "%s/token", sa);
	CHECK(write_file(path, "sa-token\n") == 0);
	snprintf(path, sizeof(path), "%s/namespace", sa);
	CHECK(write_file(path, "gpuqos-system\n") == 0);
	snprintf(port, sizeof(port), "%d", e.srv.port);
	setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1", 1);
	setenv("KUBERNETES_SERVICE_PORT", port, 1);
	CHECK(kube_config_in_cluster(&e.cfg, sa, err, sizeof(err)) == 0);
	CHECK(e.cfg.namespace && strcmp(e.cfg.namespace, "gpuqos-system") == 0);
	CHECK(put_pod(&e.srv, "p1", NODE, "Running", NULL) == 0);
	CHECK(env_client(&e) == 0);
	CHECK(pod_named(&e, "p1") != NULL);
	CHECK(kube_client_annotate(e.c, pod_named(&e, "p1")->uid, "k", "tls") == 0);
	WAIT(&e.drv, 3000, ann_is(&e, "p1", "k", "tls"));
	env_stop(&e);
}

static void t_patch(void)
{
	struct env e;
	const char *uid;

	CHECK(env_server(&e) == 0);
	CHECK(put_pod(&e.srv, "p1", NODE, "Running", "{\"gpuqos.io/tsgs\":\"0\"}") == 0);
	CHECK(env_client(&e) == 0);
	uid = pod_named(&e, "p1")->uid;
	/* The pod already says so: no request. */
	CHECK(kube_client_annotate(e.c, uid, "gpuqos.io/tsgs", "0") == 1);
	CHECK(kube_client_annotate(e.c, "no-such-uid", "k", "v") == -1);
	CHECK(kube_client_annotate(e.c, uid, "gpuqos.io/tsgs", "1") == 0);
	/* Queued now: same value again is a no-op, newer values coalesce. */
	CHECK(kube_client_annotate(e.c, uid, "gpuqos.io/tsgs", "1") == 1);
	CHECK(kube_client_annotate(e.c, uid, "gpuqos.io/tsgs", "2") == 0);
	CHECK(kube_client_annotate(e.c, uid, "gpuqos.io/tsgs", "3") == 0);
	CHECK(kube_client_annotate(e.c, uid, "gpuqos.io/state", "ok") == 0);
	WAIT(&e.drv, 3000, ann_is(&e, "p1", "gpuqos.io/tsgs", "3") &&
			   ann_is(&e, "p1", "gpuqos.io/state", "ok"));
	SPIN(&e.drv, 200);
	CHECK(count_reqs(&e.srv, "patch", 200, NULL, 0) == 1);
	CHECK(kube_client_annotate(e.c, uid, "gpuqos.io/tsgs", "3") == 1);
	/* Removal is a merge-patch null. */
	CHECK(kube_client_annotate(e.c, uid, "gpuqos.io/state", NULL) == 0);
	WAIT(&e.drv, 3000, ann_is(&e, "p1", "gpuqos.io/state", NULL));
	CHECK(kube_client_annotate(e.c, uid, "gpuqos.io/state", NULL) == 1);
	CHECK(count_reqs(&e.srv, "patch", 200, NULL, 0) == 2);
	/* A transient failure is retried with the same value. */
	CHECK(ctl_ok(&e.srv, "POST", "/_test/fault", "{\"kind\":\"patch\",\"status\":503}") == 0);
	CHECK(kube_client_annotate(e.c, uid, "gpuqos.io/tsgs", "4") == 0);
	WAIT(&e.drv, 5000, ann_is(&e, "p1", "gpuqos.io/tsgs", "4"));
	CHECK(count_reqs(&e.srv, "patch", 503, NULL, 0) == 1);
	env_stop(&e);
}

/* The answer to our PATCH comes after another writer's change (already
 * delivered by the watch): the stale answer must not bring the old
 * annotations back into the cache. */
static void t_patch_stale_answer(void)
{
	struct env e;
	const char *uid;

	CHECK(env_server(&e) == 0);
	CHECK(put_pod(&e.srv, "p1", NODE, "Running", "{\"gpu.qos\":\"latency-critical\"}") == 0);
	CHECK(env_client(&e) == 0);
	uid = pod_named(&e, "p1")->uid;
	CHECK(ctl_ok(&e.srv, "POST", "/_test/patch_answer_delay", "{\"seconds\":0.5}") == 0);
	CHECK(kube_client_annotate(e.c, uid, "gpuqos.io/class", "latency-critical") == 0);
	/* The watch shows our write while its answer is still held back. */
	WAIT(&e.drv, 3000, ann_is(&e, "p1", "gpuqos.io/class", "latency-critical"));
	CHECK(count_reqs(&e.srv, "patch", 200, NULL, 0) == 0);
	/* Another writer changes the pod meanwhile: */
	CHECK(put_pod(&e.srv, "p1", NODE, "Running",
		      "{\"gpu.qos\":\"best-effort\",\"gpuqos.io/class\":\"latency-critical\"}") == 0);
	WAIT(&e.drv, 3000, ann_is(&e, "p1", "gpu.qos", "best-effort"));
	WAIT(&e.drv, 3000, count_reqs(&e.srv, "patch", 200, NULL, 0) == 1); /* the late answer */
	SPIN(&e.drv, 200);
	CHECK(ann_is(&e, "p1", "gpu.qos", "best-effort"));
	env_stop(&e);
}

/* A PATCH fails slowly (an API server that hangs, a token rotated away)
 * while a newer value waits behind it: the newer value must still be
 * sent, and later ones too. */
static void t_patch_requeue(void)
{
	static const int statuses[] = { 503, 401 };
	struct env e;
	char fault[128], v[16];
	const char *uid;

	CHECK(env_server(&e) == 0);
	CHECK(put_pod(&e.srv, "p1", NODE, "Running", NULL) == 0);
	CHECK(env_client(&e) == 0);
	uid = pod_named(&e, "p1")->uid;
	for (int i = 0; i < 2; i++) {
		int before = count_reqs(&e.srv, "patch", 0, NULL, 0);

		snprintf(fault, sizeof(fault),
			 "{\"kind\":\"patch\",\"status\":%d,\"delay\":0.4}", statuses[i]);
		CHECK(ctl_ok(&e.srv, "POST", "/_test/fault", fault) == 0);
		snprintf(v, sizeof(v), "c%d", i);
		CHECK(kube_client_annotate(e.c, uid, "gpuqos.io/class", v) == 0);
		WAIT(&e.drv, 3000, count_reqs(&e.srv, "patch", 0, NULL, 0) == before + 1);
		/* Queued behind the PATCH that is about to fail. */
		snprintf(v, sizeof(v), "s%d", i);
		CHECK(kube_client_annotate(e.c, uid, "gpuqos.io/state", v) == 0);
		WAIT(&e.drv, 6000, ann_is(&e, "p1", "gpuqos.io/state", v));
		snprintf(v, sizeof(v), "c%d", i);
		CHECK(ann_is(&e, "p1", "gpuqos.io/class", v));
		CHECK(count_reqs(&e.srv, "patch", statuses[i], NULL, 0) == 1);
	}
	/* And the pod is still written to afterwards. */
	CHECK(kube_client_annotate(e.c, uid, "gpuqos.io/state", "after") == 0);
	WAIT(&e.drv, 3000, ann_is(&e, "p1", "gpuqos.io/state", "after"));
	env_stop(&e);
}

/* What one pass of the agent queues for a pod (class, then state) goes
 * out as one PATCH; so do values queued behind a PATCH in flight. */
static void t_patch_coalesce(void)
{
	struct env e;
	const char *uid;

	CHECK(env_server(&e) == 0);
	CHECK(put_pod(&e.srv, "p1", NODE, "Running", NULL) == 0);
	CHECK(env_client(&e) == 0);
	uid = pod_named(&e, "p1")->uid;
	CHECK(kube_client_annotate(e.c, uid, "gpuqos.io/class", "latency-critical") == 0);
	CHECK(kube_client_annotate(e.c, uid, "gpuqos.io/state", "pending") == 0);
	WAIT(&e.drv, 3000, ann_is(&e, "p1", "gpuqos.io/class", "latency-critical") &&
			   ann_is(&e, "p1", "gpuqos.io/state", "pending"));
	SPIN(&e.drv, 200);
	CHECK(count_reqs(&e.srv, "patch", 200, NULL, 0) == 1);

	CHECK(ctl_ok(&e.srv, "POST", "/_test/patch_answer_delay", "{\"seconds\":0.4}") == 0);
	CHECK(kube_client_annotate(e.c, uid, "gpuqos.io/state", "converged") == 0);
	WAIT(&e.drv, 3000, count_reqs(&e.srv, "patch", 0, NULL, 0) == 2);
	/* A flip while that PATCH is in flight: both values wait, together. */
	CHECK(kube_client_annotate(e.c, uid, "gpuqos.io/class", "best-effort") == 0);
	CHECK(kube_client_annotate(e.c, uid, "gpuqos.io/state", "pending") == 0);
	WAIT(&e.drv, 5000, ann_is(&e, "p1", "gpuqos.io/class", "best-effort") &&
			   ann_is(&e, "p1", "gpuqos.io/state", "pending"));
	SPIN(&e.drv, 600);
	CHECK(count_reqs(&e.srv, "patch", 0, NULL, 0) == 3);
	env_stop(&e);
}

/* Every watch right after a list meets 410 for a while: the re-lists back
 * off. A genuine 410 later, on a watch that had been running, must re-list
 * at once, not wait out the earlier streak's backoff. */
static void t_gone_streak(void)
{
	struct env e;
	double t[16];

	CHECK(env_server(&e) == 0);
	CHECK(put_pod(&e.srv, "p1", NODE, "Running", NULL) == 0);
	CHECK(ctl_ok(&e.srv, "POST", "/_test/fault", "{\"kind\":\"watch\",\"status\":410,"
		     "\"count\":4}") == 0);
	e.o.backoff_min_ms = 400;
	CHECK(env_client(&e) == 0);
	CHECK(lists(&e) == 5);
	if (count_reqs(&e.srv, "list", 200, t, 16) == 5) {
		/* The fourth 410 in a row waited [800, 1600] ms. */
		printf("list gaps %.0f %.0f %.0f %.0f ms\n", t[1] - t[0], t[2] - t[1], t[3] - t[2],
		       t[4] - t[3]);
		CHECK(t[4] - t[3] >= 795);
	}
	SPIN(&e.drv, 1500);
	CHECK(put_pod(&e.srv, "far", "node-b", "Running", NULL) == 0);
	CHECK(ctl_ok(&e.srv, "POST", "/_test/compact", NULL) == 0);
	CHECK(ctl_ok(&e.srv, "POST", "/_test/expire", NULL) == 0);
	/* Before the fix it waited the streak's backoff, [1600, 3200] ms. */
	WAIT(&e.drv, 1500, lists(&e) == 6);
	WAIT(&e.drv, 3000, server_watchers(&e.srv) == 1);
	env_stop(&e);
}

/* The watch is down: only PATCH answers can update the cache. */
static void watch_down(struct env *e)
{
	CHECK(ctl_ok(&e->srv, "POST", "/_test/fault", "{\"kind\":\"watch\",\"status\":500,"
		     "\"count\":100000}") == 0);
	CHECK(ctl_ok(&e->srv, "POST", "/_test/disconnect", NULL) == 0);
	WAIT(&e->drv, 3000, server_watchers(&e->srv) == 0 &&
			    count_reqs(&e->srv, "watch", 500, NULL, 0) >= 1);
}

/* A real pod can be far over 64 KiB (long annotations, many containers):
 * its PATCH answer is cached like any other. One over the client's limit
 * is not, but the value is known written: no second PATCH of it. */
static void t_patch_large_answer(void)
{
	struct env e;
	struct kube_stats st;

	CHECK(env_server(&e) == 0);
	CHECK(put_pod_padded(&e.srv, "big", NODE, 200 * 1024) == 0);
	CHECK(put_pod_padded(&e.srv, "huge", NODE, 600 * 1024) == 0);
	e.o.max_object_bytes = 512 * 1024;
	CHECK(env_client(&e) == 0);
	watch_down(&e);
	/* Within the limit: the answer is the pod, cached as it comes. */
	CHECK(kube_client_annotate(e.c, pod_named(&e, "big")->uid, "k", "v") == 0);
	WAIT(&e.drv, 15000, ann_is(&e, "big", "k", "v"));
	CHECK(count_reqs(&e.srv, "patch", 200, NULL, 0) == 1);
	kube_client_stats(e.c, &st);
	CHECK(st.patch_answers_too_large == 0 && st.patches_sent == 1);

	/* Over it: applied by the server, the answer read to its end and
	 * dropped (the client's own count says when), nothing cached. The
	 * waits end as soon as it happened; their bound is only how long a
	 * loaded machine may take. */
	CHECK(kube_client_annotate(e.c, pod_named(&e, "huge")->uid, "k", "v") == 0);
	WAIT(&e.drv, 15000, (kube_client_stats(e.c, &st), st.patch_answers_too_large == 1));
	CHECK(count_reqs(&e.srv, "patch", 200, NULL, 0) == 2);
	CHECK(ann_is(&e, "huge", "k", NULL));
	/* What it wrote counts as the pod's meanwhile: not sent again. */
	CHECK(kube_client_annotate(e.c, pod_named(&e, "huge")->uid, "k", "v") == 1);
	SPIN(&e.drv, 300);
	kube_client_stats(e.c, &st);
	CHECK(count_reqs(&e.srv, "patch", 0, NULL, 0) == 2 && st.patches_sent == 2);

	/* The watch comes back and brings the written pod. */
	CHECK(ctl_ok(&e.srv, "POST", "/_test/clear_faults", NULL) == 0);
	WAIT(&e.drv, 15000, ann_is(&e, "huge", "k", "v"));
	CHECK(kube_client_annotate(e.c, pod_named(&e, "huge")->uid, "k", "v") == 1);
	CHECK(kube_client_annotate(e.c, pod_named(&e, "huge")->uid, "k", "w") == 0);
	WAIT(&e.drv, 15000, (kube_client_stats(e.c, &st), st.patch_answers_too_large == 2));
	CHECK(count_reqs(&e.srv, "patch", 200, NULL, 0) == 3 && st.patches_sent == 3);
	env_stop(&e);
}

/* metadata.annotations that is not an object (only a non-conforming
 * server sends one) is reported, not taken for "no annotations". */
static void t_malformed_annotations(void)
{
	struct env e;
	const struct kube_pod *p;

	CHECK(env_server(&e) == 0);
	CHECK(put_pod(&e.srv, "p1", NODE, "Running", "[\"gpu.qos\",\"latency-critical\"]") == 0);
	CHECK(env_client(&e) == 0);
	p = pod_named(&e, "p1");
	CHECK(p && p->annotations_malformed && p->annotations && !p->annotations->child);
	CHECK(put_pod(&e.srv, "p1", NODE, "Running", "{}") == 0);
	WAIT(&e.drv, 3000, pod_named(&e, "p1") && !pod_named(&e, "p1")->annotations_malformed);
	CHECK(e.rec.updated == 1);
	CHECK(put_pod(&e.srv, "p1", NODE, "Running", "\"gpu.qos\"") == 0);
	WAIT(&e.drv, 3000, pod_named(&e, "p1") && pod_named(&e, "p1")->annotations_malformed);
	CHECK(e.rec.updated == 2);
	env_stop(&e);
}

static void t_rate_limit(void)
{
	struct env e;
	char name[16];
	double t[16];
	int n;

	CHECK(env_server(&e) == 0);
	for (int i = 0; i < 8; i++) {
		snprintf(name, sizeof(name), "r%d", i);
		CHECK(put_pod(&e.srv, name, NODE, "Running", NULL) == 0);
	}
	e.o.patch_qps = 4;
	e.o.patch_burst = 2;
	CHECK(env_client(&e) == 0);
	for (size_t i = 0; i < kube_client_pod_count(e.c); i++)
		CHECK(kube_client_annotate(e.c, kube_client_pod_at(e.c, i)->uid, "k", "v") == 0);
	WAIT(&e.drv, 6000, count_reqs(&e.srv, "patch", 200, NULL, 0) == 8);
	n = count_reqs(&e.srv, "patch", 200, t, 16);
	CHECK(n == 8);
	if (n == 8) {
		/* Burst of 2, then 4/s: the last starts >= 1.5 s after the first. */
		printf("patch span %.0f ms, first gap %.0f ms\n", t[7] - t[0], t[1] - t[0]);
		CHECK(t[1] - t[0] < 200);
		CHECK(t[7] - t[0] >= 1400 && t[7] - t[0] < 3000);
		/* The bucket bounds when each PATCH may start: the i-th no sooner
		 * than (i - 1) * 250 ms after the first two. The server's clock
		 * sees them with some delay each, so gaps between neighbours say
		 * nothing on a loaded machine; the delay of the first is small. */
		for (int i = 2; i < 8; i++)
			CHECK(t[i] - t[0] >= (i - 1) * 250.0 - 100);
	}
	env_stop(&e);
}

static void check_event_shape(cJSON *ev, const char *uid)
{
	cJSON *reg = cJSON_GetObjectItem(ev, "regarding");
	const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(
		cJSON_GetObjectItem(ev, "metadata"), "name"));
	const char *t = cJSON_GetStringValue(cJSON_GetObjectItem(ev, "eventTime"));

#define FIELD_IS(o, k, v) CHECK(cJSON_GetStringValue(cJSON_GetObjectItem((o), (k))) && \
				strcmp(cJSON_GetStringValue(cJSON_GetObjectItem((o), (k))), (v)) == 0)
	FIELD_IS(ev, "apiVersion", "events.k8s.io/v1");
	FIELD_IS(ev, "kind", "Event");
	FIELD_IS(ev, "type", "Warning");
	FIELD_IS(ev, "reason", "BadAnnotation");
	FIELD_IS(ev, "action", "Classify");
	FIELD_IS(ev, "reportingController", "gpuqos.io/node-agent");
	FIELD_IS(ev, "reportingInstance", NODE);
	FIELD_IS(reg, "kind", "Pod");
	FIELD_IS(reg, "apiVersion", "v1");
	FIELD_IS(reg, "name", "p1");
	FIELD_IS(reg, "namespace", "default");
	FIELD_IS(reg, "uid", uid);
	CHECK(name && strncmp(name, "p1.", 3) == 0);
	CHECK(t && strlen(t) == 27 && t[26] == 'Z');
#undef FIELD_IS
}

static void t_events(void)
{
	struct env e;
	const char *uid;
	char note[2000];
	cJSON *evs;
	struct kube_stats st;

	CHECK(env_server(&e) == 0);
	CHECK(put_pod(&e.srv, "p1", NODE, "Running", NULL) == 0);
	CHECK(env_client(&e) == 0);
	uid = pod_named(&e, "p1")->uid;
	CHECK(kube_client_event(e.c, uid, KUBE_EVENT_WARNING, "BadAnnotation", "Classify",
				"gpuqos.io/class \"fastest\" is not a class") == 0);
	CHECK(kube_client_event(e.c, uid, KUBE_EVENT_WARNING, "BadAnnotation", "Classify",
				"gpuqos.io/class \"fastest\" is not a class") == 1);
	memset(note, 'x', sizeof(note) - 1);
	note[sizeof(note) - 1] = '\0';
	/* Over the API's 1 kB note limit: truncated, not refused. */
	CHECK(kube_client_event(e.c, uid, KUBE_EVENT_WARNING, "BadAnnotation", "Classify",
				note) == 0);
	CHECK(kube_client_event(e.c, "nope", KUBE_EVENT_NORMAL, "R", "A", "n") == -1);
	WAIT(&e.drv, 3000, (kube_client_stats(e.c, &st), st.events_sent == 2));
	CHECK(count_reqs(&e.srv, "event", 0, NULL, 0) == 2);
	evs = ctl(&e.srv, "GET", "/_test/events", NULL);
	CHECK(cJSON_GetArraySize(evs) == 2);
	if (cJSON_GetArraySize(evs) == 2)
		check_event_shape(cJSON_GetArrayItem(evs, 0), uid);
	cJSON_Delete(evs);
	kube_client_stats(e.c, &st);
	CHECK(st.events_sent == 2 && st.events_suppressed == 1);
	env_stop(&e);
}

static void t_backoff(void)
{
	struct env e;
	double t[8];

	CHECK(env_server(&e) == 0);
	CHECK(put_pod(&e.srv, "p1", NODE, "Running", NULL) == 0);
	CHECK(ctl_ok(&e.srv, "POST", "/_test/fault", "{\"kind\":\"list\",\"status\":500,"
		     "\"count\":3}") == 0);
	e.o.backoff_min_ms = 200;
	CHECK(env_client(&e) == 0);
	CHECK(count_reqs(&e.srv, "list", 0, t, 8) == 4);
	/* Equal jitter: failure n waits within [d/2, d], d = 200 * 2^(n-1). */
	for (int i = 1; i < 4; i++) {
		double d = 200.0 * (1 << (i - 1)), gap = t[i] - t[i - 1];

		printf("retry %d after %.0f ms (window %.0f..%.0f)\n", i, gap, d / 2, d);
		CHECK(gap >= d / 2 - 5 && gap <= d + 150);
	}
	CHECK(pod_named(&e, "p1") != NULL);
	env_stop(&e);
}

/* A list answer without a usable metadata.resourceVersion (a number, "",
 * null) cannot start a watch: it is a failed list, retried with backoff,
 * never listed again at once. */
static void t_list_bad_rv(void)
{
	static const char *const bad[] = { "123", "\"\"", "null" };

	for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
		struct env e;
		char body[64];
		double t[8];
		int n;

		CHECK(env_server(&e) == 0);
		CHECK(put_pod(&e.srv, "p1", NODE, "Running", NULL) == 0);
		snprintf(body, sizeof(body), "{\"value\":%s}", bad[k]);
		CHECK(ctl_ok(&e.srv, "POST", "/_test/list_rv", body) == 0);
		e.o.backoff_min_ms = 200;
		CHECK(env_client_start(&e) == 0);
		WAIT(&e.drv, 5000, lists(&e) >= 3);
		CHECK(e.rec.synced == 0 && !kube_client_synced(e.c));
		CHECK(count_reqs(&e.srv, "watch", 0, NULL, 0) == 0);
		n = count_reqs(&e.srv, "list", 200, t, 8);
		/* Equal jitter: failure i waits at least half of 200 * 2^(i-1). */
		for (int i = 1; i < n && i < 3; i++) {
			printf("resourceVersion %s: list %d after %.0f ms\n", bad[k], i, t[i] - t[i - 1]);
			CHECK(t[i] - t[i - 1] >= 100.0 * (1 << (i - 1)) - 5);
		}
		/* The server mends: the client lists, syncs and watches. */
		CHECK(ctl_ok(&e.srv, "POST", "/_test/list_rv", "{}") == 0);
		WAIT(&e.drv, 8000, e.rec.synced == 1);
		WAIT(&e.drv, 5000, server_watchers(&e.srv) == 1);
		CHECK(pod_named(&e, "p1") != NULL);
		env_stop(&e);
	}
}

static int has_uid(const char **uids, size_t n, const char *uid)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(uids[i], uid) == 0)
			return 1;
	return 0;
}

/* A server that ignores the fieldSelector sends every pod of the cluster:
 * only this node's are cached or told to the caller. */
static void t_foreign_pods(void)
{
	struct env e;
	char name[16], uid1[64];
	const char *uids[8];
	uint64_t g0;

	CHECK(env_server(&e) == 0);
	CHECK(ctl_ok(&e.srv, "POST", "/_test/ignore_field_selector", "{\"on\":true}") == 0);
	CHECK(put_pod(&e.srv, "p1", NODE, "Running", NULL) == 0);
	CHECK(put_pod(&e.srv, "unscheduled", "", "Pending", NULL) == 0);
	for (int i = 0; i < 5; i++) {
		snprintf(name, sizeof(name), "far%d", i);
		CHECK(put_pod(&e.srv, name, "node-b", "Running", NULL) == 0);
	}
	CHECK(env_client(&e) == 0);
	CHECK(kube_client_pod_count(e.c) == 1 && e.rec.added == 1);
	CHECK(pod_named(&e, "p1") && !pod_named(&e, "far0") && !pod_named(&e, "unscheduled"));
	snprintf(uid1, sizeof(uid1), "%s", pod_named(&e, "p1")->uid);
	/* Watch events of other nodes' pods are not ours either. */
	CHECK(put_pod(&e.srv, "far0", "node-b", "Failed", NULL) == 0);
	CHECK(ctl_ok(&e.srv, "DELETE", "/_test/pods/default/far1", NULL) == 0);
	CHECK(put_pod(&e.srv, "p2", NODE, "Running", NULL) == 0);
	WAIT(&e.drv, 3000, pod_named(&e, "p2") != NULL);
	CHECK(kube_client_pod_count(e.c) == 2 && e.rec.added == 2 && e.rec.updated == 0 &&
	      e.rec.deleted == 0);

	/* What changed since a generation: only what the callbacks told. */
	g0 = kube_client_change_gen(e.c);
	CHECK(kube_client_changed(e.c, g0, uids, 8) == 0);
	CHECK(put_pod(&e.srv, "p1", NODE, "Running", "{\"k\":\"v\"}") == 0);
	WAIT(&e.drv, 3000, ann_is(&e, "p1", "k", "v"));
	CHECK(kube_client_changed(e.c, g0, uids, 8) == 1 && strcmp(uids[0], uid1) == 0);
	CHECK(kube_client_pod(e.c, uid1)->change_gen > g0);
	/* Nothing the agent acts on differs: not a change. */
	CHECK(put_pod(&e.srv, "p1", NODE, "Running", "{\"k\":\"v\"}") == 0);
	CHECK(put_pod(&e.srv, "p3", NODE, "Running", NULL) == 0);
	WAIT(&e.drv, 3000, pod_named(&e, "p3") != NULL);
	CHECK(kube_client_changed(e.c, g0, uids, 8) == 2);
	CHECK(has_uid(uids, 2, uid1) && has_uid(uids, 2, pod_named(&e, "p3")->uid));
	CHECK(strcmp(uids[0], pod_named(&e, "p3")->uid) == 0); /* newest first */
	CHECK(kube_client_changed(e.c, kube_client_change_gen(e.c), uids, 8) == 0);
	env_stop(&e);
}

/* Lookups by uid stay right through many additions and deletions. */
static void t_many_pods(void)
{
	struct env e;
	char name[16];
	char (*uid)[64] = calloc(120, sizeof(*uid));
	int gone[120] = { 0 };

	CHECK(uid != NULL && env_server(&e) == 0);
	for (int i = 0; i < 120; i++) {
		snprintf(name, sizeof(name), "m%d", i);
		CHECK(put_pod(&e.srv, name, NODE, "Running", NULL) == 0);
	}
	e.o.list_limit = 50;
	CHECK(env_client(&e) == 0);
	CHECK(kube_client_pod_count(e.c) == 120);
	for (int i = 0; i < 120; i++) {
		snprintf(name, sizeof(name), "m%d", i);
		CHECK(pod_named(&e, name) != NULL);
		if (pod_named(&e, name))
			snprintf(uid[i], sizeof(uid[i]), "%s", pod_named(&e, name)->uid);
	}
	for (int i = 0; i < 120; i += 3) {
		char path[64];

		snprintf(path, sizeof(path), "/_test/pods/default/m%d", i);
		CHECK(ctl_ok(&e.srv, "DELETE", path, NULL) == 0);
		gone[i] = 1;
	}
	WAIT(&e.drv, 5000, kube_client_pod_count(e.c) == 80);
	for (int i = 0; i < 120; i++) {
		const struct kube_pod *p = kube_client_pod(e.c, uid[i]);

		CHECK(gone[i] ? p == NULL : p && strcmp(p->uid, uid[i]) == 0);
	}
	/* A re-list (410) sweeps and re-inserts through the same index. */
	CHECK(ctl_ok(&e.srv, "POST", "/_test/compact", NULL) == 0);
	CHECK(ctl_ok(&e.srv, "POST", "/_test/expire", NULL) == 0);
	WAIT(&e.drv, 5000, e.rec.synced == 2);
	for (int i = 0; i < 120; i++)
		CHECK(gone[i] ? kube_client_pod(e.c, uid[i]) == NULL
			      : kube_client_pod(e.c, uid[i]) != NULL);
	free(uid);
	env_stop(&e);
}

/* "latency-critical\u0000junk" must not read as "latency-critical": the
 * client never hands out a string cut short by an escaped NUL. */
static void t_nul_annotation(void)
{
	struct env e;

	CHECK(env_server(&e) == 0);
	CHECK(put_pod(&e.srv, "p1", NODE, "Running",
		      "{\"gpu.qos\":\"latency-critical\\u0000junk\"}") == 0);
	CHECK(env_client(&e) == 0);
	CHECK(!ann_is(&e, "p1", "gpu.qos", "latency-critical"));
	CHECK(ann_is(&e, "p1", "gpu.qos", "latency-critical\xef\xbf\xbdjunk"));
	/* From the watch as well. */
	CHECK(put_pod(&e.srv, "p2", NODE, "Running", "{\"gpu.qos\":\"\\u0000\"}") == 0);
	WAIT(&e.drv, 3000, pod_named(&e, "p2") != NULL);
	CHECK(ann_is(&e, "p2", "gpu.qos", "\xef\xbf\xbd"));
	env_stop(&e);
}

/* The watch delivers an older version of a pod after the answer of our
 * PATCH (a lagging watch cache): the cache never goes back. */
static void t_patch_stale_watch(void)
{
	struct env e;
	const char *uid;
	int regressed = 0;
	uint64_t dl;

	CHECK(env_server(&e) == 0);
	CHECK(put_pod(&e.srv, "p1", NODE, "Running", NULL) == 0);
	CHECK(env_client(&e) == 0);
	uid = pod_named(&e, "p1")->uid;
	CHECK(ctl_ok(&e.srv, "POST", "/_test/watch_delay", "{\"seconds\":1.0}") == 0);
	/* Another writer first: its version reaches the client late. */
	CHECK(put_pod(&e.srv, "p1", NODE, "Running", "{\"other\":\"x\"}") == 0);
	CHECK(kube_client_annotate(e.c, uid, "k", "v") == 0);
	WAIT(&e.drv, 3000, ann_is(&e, "p1", "k", "v")); /* the PATCH answer */
	dl = h_now_ms() + 2500;
	while (h_now_ms() < dl) {
		drv_turn(&e.drv, 20);
		regressed |= !ann_is(&e, "p1", "k", "v");
	}
	CHECK(!regressed);
	CHECK(ann_is(&e, "p1", "other", "x") && ann_is(&e, "p1", "k", "v"));
	env_stop(&e);
}

/* A value queued and then put back to what the pod holds sends nothing. */
static void t_patch_revert(void)
{
	struct env e;
	const char *uid;

	CHECK(env_server(&e) == 0);
	CHECK(put_pod(&e.srv, "p1", NODE, "Running", "{\"k\":\"a\"}") == 0);
	CHECK(env_client(&e) == 0);
	uid = pod_named(&e, "p1")->uid;
	CHECK(kube_client_annotate(e.c, uid, "k", "b") == 0);
	CHECK(kube_client_annotate(e.c, uid, "k", "a") == 1);
	CHECK(kube_client_annotate(e.c, uid, "gone", "x") == 0);
	CHECK(kube_client_annotate(e.c, uid, "gone", NULL) == 1);
	SPIN(&e.drv, 400);
	CHECK(count_reqs(&e.srv, "patch", 0, NULL, 0) == 0);
	/* Reverted behind a failing PATCH: the requeued value is the pod's. */
	CHECK(ctl_ok(&e.srv, "POST", "/_test/fault",
		     "{\"kind\":\"patch\",\"status\":503,\"delay\":0.4}") == 0);
	CHECK(kube_client_annotate(e.c, uid, "k", "b") == 0);
	WAIT(&e.drv, 3000, count_reqs(&e.srv, "patch", 0, NULL, 0) == 1);
	CHECK(kube_client_annotate(e.c, uid, "k", "a") == 0); /* b is in flight */
	WAIT(&e.drv, 3000, count_reqs(&e.srv, "patch", 503, NULL, 0) == 1);
	SPIN(&e.drv, 1200);
	CHECK(count_reqs(&e.srv, "patch", 0, NULL, 0) == 1);
	CHECK(ann_is(&e, "p1", "k", "a"));
	env_stop(&e);
}

/* A 429 with Retry-After: the next try waits that long (within a cap),
 * not the first backoff step. */
static void t_retry_after(void)
{
	struct env e;
	double t[4];

	CHECK(env_server(&e) == 0);
	CHECK(put_pod(&e.srv, "p1", NODE, "Running", NULL) == 0);
	CHECK(ctl_ok(&e.srv, "POST", "/_test/fault", "{\"kind\":\"list\",\"status\":429,"
		     "\"retry_after\":2}") == 0);
	e.o.backoff_min_ms = 200;
	CHECK(env_client_start(&e) == 0);
	WAIT(&e.drv, 6000, e.rec.synced == 1);
	CHECK(count_reqs(&e.srv, "list", 0, t, 4) == 2);
	printf("list retried after %.0f ms\n", t[1] - t[0]);
	CHECK(t[1] - t[0] >= 1995);
	/* A PATCH too. */
	CHECK(ctl_ok(&e.srv, "POST", "/_test/fault", "{\"kind\":\"patch\",\"status\":503,"
		     "\"retry_after\":1}") == 0);
	CHECK(kube_client_annotate(e.c, pod_named(&e, "p1")->uid, "k", "v") == 0);
	WAIT(&e.drv, 5000, ann_is(&e, "p1", "k", "v"));
	CHECK(count_reqs(&e.srv, "patch", 0, t, 4) == 2);
	printf("PATCH retried after %.0f ms\n", t[1] - t[0]);
	CHECK(t[1] - t[0] >= 995);
	env_stop(&e);
}

/* Watches that failed raised the backoff; a watch that then stayed open
 * (quiet: no event) proves the server healthy, so when it is cut the
 * next one starts after the first backoff step, not the raised one. */
static void t_quiet_watch(void)
{
	struct env e;
	uint64_t cut;

	CHECK(env_server(&e) == 0);
	CHECK(put_pod(&e.srv, "p1", NODE, "Running", NULL) == 0);
	e.o.backoff_min_ms = 300;
	e.o.backoff_max_ms = 2400;
	CHECK(env_client(&e) == 0);
	CHECK(ctl_ok(&e.srv, "POST", "/_test/fault", "{\"kind\":\"watch\",\"status\":500,"
		     "\"count\":3}") == 0);
	CHECK(ctl_ok(&e.srv, "POST", "/_test/disconnect", NULL) == 0);
	WAIT(&e.drv, 6000, count_reqs(&e.srv, "watch", 200, NULL, 0) == 2 &&
			   server_watchers(&e.srv) == 1);
	CHECK(count_reqs(&e.srv, "watch", 500, NULL, 0) == 3);
	SPIN(&e.drv, 2600); /* open and quiet longer than backoff_max_ms */
	cut = h_now_ms();
	CHECK(ctl_ok(&e.srv, "POST", "/_test/disconnect", NULL) == 0);
	/* Before: the fifth failure in a row, [1200, 2400] ms. */
	WAIT(&e.drv, 1100, count_reqs(&e.srv, "watch", 200, NULL, 0) == 3);
	printf("re-watched %llu ms after the cut\n", (unsigned long long)(h_now_ms() - cut));
	env_stop(&e);
}

/* More Events at once than the queue holds: each is still posted. */
static void t_events_owed(void)
{
	enum { N = 100 };
	struct env e;
	char name[16], note[64];
	struct kube_stats st;
	cJSON *evs, *ev;
	int seen[N] = { 0 }, n = 0;

	CHECK(env_server(&e) == 0);
	for (int i = 0; i < N; i++) {
		snprintf(name, sizeof(name), "ev%d", i);
		CHECK(put_pod(&e.srv, name, NODE, "Running", "{\"gpu.qos\":\"fastest\"}") == 0);
	}
	e.o.event_qps = 200;
	e.o.event_burst = 20;
	CHECK(env_client(&e) == 0);
	CHECK(kube_client_pod_count(e.c) == N);
	for (size_t i = 0; i < kube_client_pod_count(e.c); i++) {
		const struct kube_pod *p = kube_client_pod_at(e.c, i);

		snprintf(note, sizeof(note), "bad class on %s", p->name);
		CHECK(kube_client_event(e.c, p->uid, KUBE_EVENT_WARNING, "InvalidQoSClass",
					"Classify", note) == 0);
	}
	WAIT(&e.drv, 15000, count_reqs(&e.srv, "event", 201, NULL, 0) == N);
	SPIN(&e.drv, 200);
	CHECK(count_reqs(&e.srv, "event", 0, NULL, 0) == N);
	evs = ctl(&e.srv, "GET", "/_test/events", NULL);
	cJSON_ArrayForEach(ev, evs) {
		const char *reg = cJSON_GetStringValue(
			cJSON_GetObjectItem(cJSON_GetObjectItem(ev, "regarding"), "name"));
		int i = reg && strncmp(reg, "ev", 2) == 0 ? atoi(reg + 2) : -1;

		if (i >= 0 && i < N && !seen[i]++)
			n++;
	}
	cJSON_Delete(evs);
	CHECK(n == N);
	kube_client_stats(e.c, &st);
	CHECK(st.events_sent == N);
	env_stop(&e);
}

/* A lone UTF-16 surrogate escape is not valid JSON for cJSON: it becomes
 * U+FFFD and the rest of the object (and of the watch) is kept. */
static void t_lone_surrogate(void)
{
	struct env e;

	int rv;

	CHECK(env_server(&e) == 0);
	/* put_pod() itself reads the server's answer, which has the same
	 * escape, with plain cJSON: it says "failed"; the server's RV says
	 * whether the pod was written. */
	rv = server_rv(&e.srv);
	put_pod(&e.srv, "p1", NODE, "Running", "{\"k\":\"a\\ud800b\"}");
	CHECK(server_rv(&e.srv) == rv + 1);
	CHECK(env_client(&e) == 0);
	CHECK(ann_is(&e, "p1", "k", "a\xef\xbf\xbd" "b"));
	put_pod(&e.srv, "p2", NODE, "Running", "{\"k\":\"\\udc00\\ud83d\\ude00\\ud800\"}");
	CHECK(put_pod(&e.srv, "p3", NODE, "Running", NULL) == 0);
	CHECK(server_rv(&e.srv) == rv + 3);
	WAIT(&e.drv, 3000, pod_named(&e, "p3") != NULL);
	/* A valid pair stays the character it encodes (U+1F600). */
	CHECK(ann_is(&e, "p2", "k", "\xef\xbf\xbd\xf0\x9f\x98\x80\xef\xbf\xbd"));
	CHECK(lists(&e) == 1 && count_reqs(&e.srv, "watch", 0, NULL, 0) == 1);
	env_stop(&e);
}

/* etcd restored from an older backup: every watch from the client's
 * version is answered 504 "Too large resource version". The client lists
 * again, takes the list's (older-numbered) versions as the pods' own, and
 * sees the changes that follow. Then the same refusal as an ERROR event
 * inside a 200 stream, a bare Expired reason, and a run of plain failures
 * that no rule names: each ends in a list, not in watching from the same
 * version for ever. */
static void t_too_large(void)
{
	struct env e;
	struct kube_stats st;
	char body[64];
	int rv;

	CHECK(env_server(&e) == 0);
	CHECK(put_pod(&e.srv, "p1", NODE, "Running", "{\"k\":\"1\"}") == 0);
	rv = server_rv(&e.srv);
	CHECK(env_client(&e) == 0);
	CHECK(put_pod(&e.srv, "p1", NODE, "Running", "{\"k\":\"2\"}") == 0);
	CHECK(put_pod(&e.srv, "p1", NODE, "Running", "{\"k\":\"3\"}") == 0);
	WAIT(&e.drv, 3000, ann_is(&e, "p1", "k", "3"));
	snprintf(body, sizeof(body), "{\"rv\":%d}", rv);
	CHECK(ctl_ok(&e.srv, "POST", "/_test/restore", body) == 0);
	CHECK(ctl_ok(&e.srv, "POST", "/_test/disconnect", NULL) == 0);
	WAIT(&e.drv, 5000, lists(&e) == 2);
	CHECK(count_reqs(&e.srv, "watch", 504, NULL, 0) == 1);
	WAIT(&e.drv, 5000, server_watchers(&e.srv) == 1);
	/* Numbered below what the client had seen of p1, and still news. */
	CHECK(put_pod(&e.srv, "p1", NODE, "Running", "{\"k\":\"4\"}") == 0);
	WAIT(&e.drv, 3000, ann_is(&e, "p1", "k", "4"));
	kube_client_stats(e.c, &st);
	CHECK(st.relists == 1);

	CHECK(ctl_ok(&e.srv, "POST", "/_test/fault",
		     "{\"kind\":\"watch\",\"status\":504,\"stream\":true,\"reason\":\"Timeout\","
		     "\"message\":\"Too large resource version: 900, current: 120\"}") == 0);
	CHECK(ctl_ok(&e.srv, "POST", "/_test/close", NULL) == 0);
	WAIT(&e.drv, 5000, lists(&e) == 3);
	WAIT(&e.drv, 5000, server_watchers(&e.srv) == 1);
	CHECK(ctl_ok(&e.srv, "POST", "/_test/fault",
		     "{\"kind\":\"watch\",\"status\":500,\"stream\":true,\"reason\":\"Expired\"}") ==
	      0);
	CHECK(ctl_ok(&e.srv, "POST", "/_test/close", NULL) == 0);
	WAIT(&e.drv, 5000, lists(&e) == 4);
	WAIT(&e.drv, 5000, server_watchers(&e.srv) == 1);
	kube_client_stats(e.c, &st);
	CHECK(st.relists == 3);

	/* Five plain 504s (a proxy's gateway timeout says nothing of
	 * versions): the watch is tried again from the same version until
	 * five failed in a row, then the client lists. The watch they follow
	 * ends cleanly after a second: no failure of its own. */
	CHECK(ctl_ok(&e.srv, "POST", "/_test/fault", "{\"kind\":\"watch\",\"status\":504,"
		     "\"count\":5}") == 0);
	SPIN(&e.drv, 1100);
	CHECK(ctl_ok(&e.srv, "POST", "/_test/close", NULL) == 0);
	WAIT(&e.drv, 15000, lists(&e) == 5);
	CHECK(count_reqs(&e.srv, "watch", 504, NULL, 0) == 6);
	WAIT(&e.drv, 5000, server_watchers(&e.srv) == 1);
	CHECK(put_pod(&e.srv, "p1", NODE, "Running", "{\"k\":\"5\"}") == 0);
	WAIT(&e.drv, 3000, ann_is(&e, "p1", "k", "5"));
	env_stop(&e);
}

/* Bodies within bounds: a list page over max_list_bytes is asked for
 * again in halves; a pod over the bound alone is refused and the list
 * goes on past it; only the annotations asked for are kept, one too long
 * as a note of its length; a watch line over the bound is a re-list. */
static void t_list_bound(void)
{
	static const char *const keys[] = { "gpu.qos", "gpuqos.io/state", NULL };
	struct env e;
	struct kube_stats st;
	char *body = NULL, *pad = calloc(5001, 1);
	const char *state;

	CHECK(pad && env_server(&e) == 0);
	CHECK(ctl_ok(&e.srv, "POST", "/_test/pods_bulk",
		     "{\"count\":30,\"node\":\"" NODE "\",\"prefix\":\"big\",\"pad\":102400,"
		     "\"annotations\":{\"gpu.qos\":\"latency-critical\"}}") == 0);
	CHECK(put_pod_padded(&e.srv, "huge", NODE, 600 * 1024) == 0);
	memset(pad, 's', 5000);
	CHECK(asprintf(&body, "{\"count\":1,\"node\":\"" NODE "\",\"prefix\":\"small\","
		       "\"annotations\":{\"gpu.qos\":\"best-effort\",\"gpuqos.io/state\":\"%s\"}}",
		       pad) > 0);
	CHECK(ctl_ok(&e.srv, "POST", "/_test/pods_bulk", body) == 0);
	e.o.max_list_bytes = 512 * 1024;
	e.o.annotation_keys = keys;
	CHECK(env_client(&e) == 0);
	kube_client_stats(e.c, &st);
	CHECK(kube_client_pod_count(e.c) == 31 && pod_named(&e, "huge") == NULL);
	CHECK(pod_named(&e, "big-29") != NULL && pod_named(&e, "small-0") != NULL);
	CHECK(st.pods_refused == 1 && st.lists_too_large >= 2);
	CHECK(ann_is(&e, "big-0", "gpu.qos", "latency-critical"));
	CHECK(ann_is(&e, "big-0", "pad", NULL));
	state = ann(&e, "small-0", "gpuqos.io/state");
	CHECK(state && strcmp(state, "(a value of 5000 bytes, over the 4096 read)") == 0);
	CHECK(kube_client_annotate(e.c, pod_named(&e, "small-0")->uid, "pad", "x") == -1);
	/* Watched on, and written to. */
	CHECK(put_pod(&e.srv, "big-3", NODE, "Running", "{\"gpu.qos\":\"best-effort\"}") == 0);
	WAIT(&e.drv, 3000, ann_is(&e, "big-3", "gpu.qos", "best-effort"));
	CHECK(kube_client_annotate(e.c, pod_named(&e, "small-0")->uid, "gpuqos.io/state",
				   "converged") == 0);
	WAIT(&e.drv, 3000, ann_is(&e, "small-0", "gpuqos.io/state", "converged"));
	/* A pod grown past the bound: its watch line is a re-list, which
	 * refuses it, and the next change is seen. */
	CHECK(put_pod_padded(&e.srv, "big-4", NODE, 600 * 1024) == 0);
	WAIT(&e.drv, 5000, pod_named(&e, "big-4") == NULL);
	kube_client_stats(e.c, &st);
	/* huge again, and big-4 */
	CHECK(st.relists == 1 && st.pods_refused == 3);
	WAIT(&e.drv, 5000, server_watchers(&e.srv) == 1);
	CHECK(put_pod(&e.srv, "late", NODE, "Running", NULL) == 0);
	WAIT(&e.drv, 3000, pod_named(&e, "late") != NULL);
	free(body);
	free(pad);
	env_stop(&e);
}

static long vm_kib(const char *field)
{
	char line[256];
	long v = -1;
	FILE *f = fopen("/proc/self/status", "re");

	while (f && fgets(line, sizeof(line), f))
		if (strncmp(line, field, strlen(field)) == 0)
			v = strtol(line + strlen(field), NULL, 10);
	if (f)
		fclose(f);
	return v;
}

/* On demand, not in ctest (it prints, it does not judge): 5000 pods of
 * this node with a 1 MiB annotation each, listed with the agent's kept
 * annotations and the default bounds; prints the client's peak and
 * resident memory. `test_kube_plain bench_big_list` (no sanitizer). */
static void t_bench_big_list(void)
{
	static const char *const keys[] = { "gpu.qos", "gpuqos.io/windows", "gpuqos.io/class",
					    "gpuqos.io/state", NULL };
	struct env e;
	struct kube_stats st;
	long before;
	uint64_t t0;

	CHECK(env_server(&e) == 0);
	CHECK(ctl_ok(&e.srv, "POST", "/_test/pods_bulk",
		     "{\"count\":5000,\"node\":\"" NODE "\",\"prefix\":\"m\",\"pad\":1048576,"
		     "\"annotations\":{\"gpu.qos\":\"best-effort\"}}") == 0);
	e.o.annotation_keys = keys;
	before = vm_kib("VmRSS:");
	t0 = h_now_ms();
	if (env_client_start(&e) != 0) {
		CHECK(0);
		return;
	}
	WAIT(&e.drv, 900000, e.rec.synced >= 1);
	kube_client_stats(e.c, &st);
	printf("5000 pods x 1 MiB: listed in %.1f s, %llu list requests (%llu over the bound); "
	       "RSS before %ld KiB, peak %ld KiB, after %ld KiB\n",
	       (double)(h_now_ms() - t0) / 1000.0, (unsigned long long)st.lists,
	       (unsigned long long)st.lists_too_large, before, vm_kib("VmHWM:"), vm_kib("VmRSS:"));
	CHECK(kube_client_pod_count(e.c) == 5000);
	env_stop(&e);
}

/* The client's log goes to path until stderr_back(): returns the saved
 * stderr. */
static int stderr_to(const char *path)
{
	int saved = dup(2), fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	if (saved < 0 || fd < 0 || dup2(fd, 2) < 0) {
		fprintf(stderr, "cannot send the log to %s\n", path);
		exit(1);
	}
	close(fd);
	return saved;
}

static void stderr_back(int saved)
{
	dup2(saved, 2);
	close(saved);
}

/* How many lines of the file hold needle. */
static int lines_with(const char *path, const char *needle)
{
	char line[4096];
	int n = 0;
	FILE *f = fopen(path, "re");

	while (f && fgets(line, sizeof(line), f))
		n += strstr(line, needle) != NULL;
	if (f)
		fclose(f);
	return n;
}

/* A node name no pod has: one warning that says so, after the list, and
 * none once a pod of the node is listed. */
static void t_no_pods(void)
{
	struct env e;
	struct kube_stats st;
	char log[400];
	int saved;

	CHECK(env_server(&e) == 0);
	CHECK(put_pod(&e.srv, "elsewhere", "node-b", "Running", NULL) == 0);
	snprintf(log, sizeof(log), "%s/client.log", e.srv.dir);
	saved = stderr_to(log);
	CHECK(env_client(&e) == 0);
	CHECK(put_pod(&e.srv, "p1", NODE, "Running", NULL) == 0);
	WAIT(&e.drv, 3000, pod_named(&e, "p1") != NULL);
	CHECK(ctl_ok(&e.srv, "POST", "/_test/compact", NULL) == 0);
	CHECK(ctl_ok(&e.srv, "POST", "/_test/expire", NULL) == 0);
	WAIT(&e.drv, 5000, e.rec.synced == 2);
	stderr_back(saved);
	kube_client_stats(e.c, &st);
	CHECK(st.no_pods_warnings == 1);
	CHECK(lines_with(log, "warn  kube: no pod runs on node \"" NODE "\"") == 1);
	env_stop(&e);
}

/* Events wait behind a slow bucket (one token every 5 s) for ten pods;
 * eight of the pods are deleted meanwhile: their Events are never posted,
 * and the last pod's goes out with the next token, not eight later. */
static void t_events_churn(void)
{
	struct env e;
	char name[16], path[64];
	struct kube_stats st;

	CHECK(env_server(&e) == 0);
	for (int i = 0; i < 10; i++) {
		snprintf(name, sizeof(name), "ch%d", i);
		CHECK(put_pod(&e.srv, name, NODE, "Running", NULL) == 0);
	}
	e.o.event_qps = 0.2;
	e.o.event_burst = 1;
	CHECK(env_client(&e) == 0);
	for (int i = 0; i < 10; i++) {
		snprintf(name, sizeof(name), "ch%d", i);
		CHECK(kube_client_event(e.c, pod_named(&e, name)->uid, KUBE_EVENT_WARNING,
					"InvalidQoSClass", "Classify", "bad class") == 0);
	}
	WAIT(&e.drv, 3000, count_reqs(&e.srv, "event", 201, NULL, 0) == 1);
	for (int i = 1; i < 9; i++) {
		snprintf(path, sizeof(path), "/_test/pods/default/ch%d", i);
		CHECK(ctl_ok(&e.srv, "DELETE", path, NULL) == 0);
	}
	WAIT(&e.drv, 3000, kube_client_pod_count(e.c) == 2);
	WAIT(&e.drv, 8000, count_reqs(&e.srv, "event", 201, NULL, 0) == 2);
	CHECK(pod_events(&e.srv, "ch0", "InvalidQoSClass") == 1);
	CHECK(pod_events(&e.srv, "ch9", "InvalidQoSClass") == 1);
	SPIN(&e.drv, 300);
	CHECK(count_reqs(&e.srv, "event", 0, NULL, 0) == 2);
	kube_client_stats(e.c, &st);
	CHECK(st.events_dropped == 8 && st.events_sent == 2);
	env_stop(&e);
}

/* De-duplication that other pods cannot push out: 130 pods' Events after
 * one pod's, and that pod's is still a duplicate. Across a restart of the
 * client (nothing remembered) the server refuses the same Event by its
 * name: the pod keeps one. */
static void t_events_dedup(void)
{
	enum { N = 130 };
	struct env e;
	char name[16], uid0[64], note[64];
	struct kube_stats st;

	CHECK(env_server(&e) == 0);
	for (int i = 0; i < N; i++) {
		snprintf(name, sizeof(name), "dd%d", i);
		CHECK(put_pod(&e.srv, name, NODE, "Running", NULL) == 0);
	}
	e.o.event_qps = 500;
	e.o.event_burst = 200;
	CHECK(env_client(&e) == 0);
	snprintf(uid0, sizeof(uid0), "%s", pod_named(&e, "dd0")->uid);
	CHECK(kube_client_event(e.c, uid0, KUBE_EVENT_WARNING, "InvalidQoSClass", "Classify",
				"gpu.qos: \"fast\" is not a class") == 0);
	for (int i = 0; i < N; i++) {
		snprintf(name, sizeof(name), "dd%d", i);
		snprintf(note, sizeof(note), "note %d", i);
		CHECK(kube_client_event(e.c, pod_named(&e, name)->uid, KUBE_EVENT_WARNING,
					"ControlRefused", "Control", note) == 0);
	}
	CHECK(kube_client_event(e.c, uid0, KUBE_EVENT_WARNING, "InvalidQoSClass", "Classify",
				"gpu.qos: \"fast\" is not a class") == 1);
	WAIT(&e.drv, 40000, count_reqs(&e.srv, "event", 201, NULL, 0) == N + 1);
	kube_client_free(e.c);
	memset(&e.rec, 0, sizeof(e.rec));
	e.c = kube_client_new(&e.cfg, &e.o);
	CHECK(e.c != NULL);
	e.drv.client = e.c;
	CHECK(e.c && kube_client_start(e.c) == 0);
	WAIT(&e.drv, 5000, e.rec.synced == 1);
	CHECK(kube_client_event(e.c, uid0, KUBE_EVENT_WARNING, "InvalidQoSClass", "Classify",
				"gpu.qos: \"fast\" is not a class") == 0);
	WAIT(&e.drv, 5000, (kube_client_stats(e.c, &st), st.events_existing == 1));
	CHECK(count_reqs(&e.srv, "event", 409, NULL, 0) == 1);
	CHECK(pod_events(&e.srv, "dd0", "InvalidQoSClass") == 1);
	env_stop(&e);
}

/* More pods than max_pods: the cache holds max_pods, refuses the rest
 * (counted), and a deleted pod's place goes to the next one listed. */
static void t_pods_bound(void)
{
	struct env e;
	struct kube_stats st;

	CHECK(env_server(&e) == 0);
	CHECK(ctl_ok(&e.srv, "POST", "/_test/pods_bulk",
		     "{\"count\":12,\"node\":\"" NODE "\",\"prefix\":\"b\"}") == 0);
	e.o.max_pods = 10;
	e.o.list_limit = 5;
	CHECK(env_client(&e) == 0);
	kube_client_stats(e.c, &st);
	CHECK(kube_client_pod_count(e.c) == 10 && st.pods_refused == 2);
	CHECK(ctl_ok(&e.srv, "DELETE", "/_test/pods/default/b-0", NULL) == 0);
	WAIT(&e.drv, 3000, kube_client_pod_count(e.c) == 9);
	/* Listed in name order, b-8 and b-9 were refused: a change of one
	 * finds room now. */
	CHECK(pod_named(&e, "b-9") == NULL);
	CHECK(put_pod(&e.srv, "b-9", NODE, "Running", NULL) == 0);
	WAIT(&e.drv, 3000, pod_named(&e, "b-9") != NULL);
	CHECK(kube_client_pod_count(e.c) == 10);
	env_stop(&e);
}

static int pod_events(struct fake_server *s, const char *pod, const char *reason)
{
	cJSON *evs = ctl(s, "GET", "/_test/events", NULL), *ev;
	int n = 0;

	cJSON_ArrayForEach(ev, evs) {
		const char *reg = cJSON_GetStringValue(
			cJSON_GetObjectItem(cJSON_GetObjectItem(ev, "regarding"), "name"));
		const char *why = cJSON_GetStringValue(cJSON_GetObjectItem(ev, "reason"));

		n += reg && why && strcmp(reg, pod) == 0 && strcmp(why, reason) == 0;
	}
	cJSON_Delete(evs);
	return n;
}

/* One pod's PATCHes are refused for good (403, then 422) while it flips
 * class: each change of what it should say costs one PATCH, the passes in
 * between send nothing, and the other pod's writes go on. */
static void t_patch_refused(void)
{
	static const int statuses[] = { 403, 422 };
	static const char *const cls[] = { "best-effort", "latency-critical" };
	struct env e;
	char fault[160], state[32], p1[64], p2[64];
	struct kube_stats st;
	int changes = 0;

	CHECK(env_server(&e) == 0);
	CHECK(put_pod(&e.srv, "p1", NODE, "Running", NULL) == 0);
	CHECK(put_pod(&e.srv, "p2", NODE, "Running", NULL) == 0);
	e.o.patch_qps = 100;
	e.o.patch_burst = 100;
	CHECK(env_client(&e) == 0);
	snprintf(p1, sizeof(p1), "%s", pod_named(&e, "p1")->uid);
	snprintf(p2, sizeof(p2), "%s", pod_named(&e, "p2")->uid);
	for (int k = 0; k < 2; k++) {
		CHECK(ctl_ok(&e.srv, "POST", "/_test/clear_faults", NULL) == 0);
		snprintf(fault, sizeof(fault), "{\"kind\":\"patch\",\"status\":%d,\"count\":1000,"
			 "\"name\":\"p1\"}", statuses[k]);
		CHECK(ctl_ok(&e.srv, "POST", "/_test/fault", fault) == 0);
		for (int flip = 0; flip < 3; flip++) {
			const char *c = cls[(k * 3 + flip) % 2];

			snprintf(state, sizeof(state), "s%d-%d", k, flip);
			changes++;
			/* Five passes of the agent asking for the same values. */
			for (int pass = 0; pass < 5; pass++) {
				CHECK(kube_client_annotate(e.c, p1, "gpuqos.io/class", c) >= 0);
				CHECK(kube_client_annotate(e.c, p1, "gpuqos.io/state", state) >= 0);
				CHECK(kube_client_annotate(e.c, p2, "gpuqos.io/class", c) >= 0);
				CHECK(kube_client_annotate(e.c, p2, "gpuqos.io/state", state) >= 0);
				SPIN(&e.drv, 40);
			}
			WAIT(&e.drv, 3000, ann_is(&e, "p2", "gpuqos.io/state", state));
			WAIT(&e.drv, 3000, (kube_client_stats(e.c, &st), st.patches_refused ==
								      (uint64_t)changes));
			/* Refused as asked: asking again sends nothing. */
			CHECK(kube_client_annotate(e.c, p1, "gpuqos.io/class", c) == 2);
			CHECK(kube_client_annotate(e.c, p1, "gpuqos.io/state", state) == 2);
			CHECK(ann_is(&e, "p1", "gpuqos.io/state", NULL));
		}
		CHECK(count_pod_reqs(&e.srv, "patch", "p1", statuses[k]) == 3);
	}
	SPIN(&e.drv, 200);
	CHECK(count_pod_reqs(&e.srv, "patch", "p1", 0) == changes);
	CHECK(count_pod_reqs(&e.srv, "patch", "p2", 200) == changes);
	CHECK(count_pod_reqs(&e.srv, "patch", "p2", 0) == changes);
	kube_client_stats(e.c, &st);
	CHECK(st.patches_refused == (uint64_t)changes && st.patches_withheld >= 2u * changes);
	/* One Event per refusal that says something new: the 403, the 422. */
	WAIT(&e.drv, 8000, pod_events(&e.srv, "p1", "AnnotationRefused") == 2);
	CHECK(pod_events(&e.srv, "p2", "AnnotationRefused") == 0);
	/* The policy lets it through: the next change is written. */
	CHECK(ctl_ok(&e.srv, "POST", "/_test/clear_faults", NULL) == 0);
	CHECK(kube_client_annotate(e.c, p1, "gpuqos.io/state", "after") == 0);
	WAIT(&e.drv, 3000, ann_is(&e, "p1", "gpuqos.io/state", "after"));
	CHECK(count_pod_reqs(&e.srv, "patch", "p1", 200) == 1);
	/* Back to a refused value is a change too. */
	CHECK(kube_client_annotate(e.c, p1, "gpuqos.io/state", "s1-2") == 0);
	WAIT(&e.drv, 3000, ann_is(&e, "p1", "gpuqos.io/state", "s1-2"));
	env_stop(&e);
}

/* Everything at once, for the valgrind run. */
static void t_all(void)
{
	struct env e;
	const char *uid;

	CHECK(env_server(&e) == 0);
	CHECK(put_pod(&e.srv, "p1", NODE, "Running", NULL) == 0);
	CHECK(put_pod(&e.srv, "p2", NODE, "Running", NULL) == 0);
	CHECK(env_client(&e) == 0);
	uid = pod_named(&e, "p1")->uid;
	CHECK(kube_client_annotate(e.c, uid, "k", "1") == 0);
	CHECK(kube_client_event(e.c, uid, KUBE_EVENT_NORMAL, "Classified", "Classify", "ok") == 0);
	WAIT(&e.drv, 5000, ann_is(&e, "p1", "k", "1"));
	CHECK(ctl_ok(&e.srv, "POST", "/_test/disconnect", NULL) == 0);
	CHECK(ctl_ok(&e.srv, "DELETE", "/_test/pods/default/p2", NULL) == 0);
	WAIT(&e.drv, 5000, pod_named(&e, "p2") == NULL);
	CHECK(ctl_ok(&e.srv, "POST", "/_test/expire", NULL) == 0);
	WAIT(&e.drv, 5000, lists(&e) == 2);
	WAIT(&e.drv, 5000, count_reqs(&e.srv, "event", 201, NULL, 0) == 1);
	/* Leave work in flight and queued: free must release it all. */
	CHECK(kube_client_annotate(e.c, uid, "k", "2") == 0);
	CHECK(kube_client_event(e.c, uid, KUBE_EVENT_WARNING, "ControlRefused", "Apply",
				"refused") == 0);
	env_stop(&e);
}

static const struct {
	const char *name;
	void (*fn)(void);
} scenarios[] = {
	{ "list_watch", t_list_watch },     { "paging", t_paging },
	{ "bookmark", t_bookmark },         { "gone_event", t_gone_event },
	{ "gone_http", t_gone_http },       { "disconnect", t_disconnect },
	{ "server_timeout", t_server_timeout }, { "token_rotation", t_token_rotation },
	{ "in_cluster_tls", t_in_cluster_tls }, { "patch", t_patch },
	{ "patch_stale_answer", t_patch_stale_answer },
	{ "patch_requeue", t_patch_requeue }, { "patch_coalesce", t_patch_coalesce },
	{ "gone_streak", t_gone_streak },   { "patch_large_answer", t_patch_large_answer },
	{ "malformed_annotations", t_malformed_annotations },
	{ "rate_limit", t_rate_limit },     { "events", t_events },
	{ "backoff", t_backoff },           { "all", t_all },
	{ "list_bad_rv", t_list_bad_rv },   { "foreign_pods", t_foreign_pods },
	{ "many_pods", t_many_pods },       { "nul_annotation", t_nul_annotation },
	{ "patch_stale_watch", t_patch_stale_watch }, { "patch_revert", t_patch_revert },
	{ "retry_after", t_retry_after },   { "quiet_watch", t_quiet_watch },
	{ "events_owed", t_events_owed },   { "lone_surrogate", t_lone_surrogate },
	{ "patch_refused", t_patch_refused }, { "pods_bound", t_pods_bound },
	{ "too_large", t_too_large },       { "list_bound", t_list_bound },
	{ "bench_big_list", t_bench_big_list }, { "no_pods", t_no_pods },
	{ "events_churn", t_events_churn }, { "events_dedup", t_events_dedup },
};

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s SCENARIO\n", argv[0]);
		return 2;
	}
	for (size_t i = 0; i < sizeof(scenarios) / sizeof(scenarios[0]); i++) {
		if (strcmp(argv[1], scenarios[i].name) == 0) {
			scenarios[i].fn();
			CHECK_DONE();
		}
	}
	fprintf(stderr, "unknown scenario %s\n", argv[1]);
	return 2;
}
