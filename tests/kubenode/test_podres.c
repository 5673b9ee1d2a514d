/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_podres.c - the pod-resources client (agent/kubenode/podres.c)
 * against an independent peer: a grpc-go test kubelet (podres_server/)
 * built from Debian's packages. Also podres_decode on its own.
 *
 * Usage: test_podres <scenario> <build script> <server out dir> <response dir>
 * Scenarios: decode list restart no_server garbage oversize hang error.
 * Exits 77 when the Go toolchain or the Go gRPC packages are missing.
 *
 * The server is built with system() before the client calls grpc_init, and
 * started afterwards with posix_spawn (no fork() after grpc_init).
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/kubenode/podres.h"
#include "podresources_v1.pb-c.h"
#include "tests/check.h"

extern char **environ;

static const char *server_bin;
static const char *resp_dir;
static char tmp[64] = "/tmp/gpuqos-podres-XXXXXX";
static char sock[512];

static uint64_t mono_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static pid_t spawn_server_late(const char *mode, const char *response, int listen_delay_ms)
{
	char resp[512], late[64], *argv[10];
	int n = 0;
	pid_t pid;
	int rc;

	argv[n++] = (char *)server_bin;
	argv[n++] = (char *)"-socket";
	argv[n++] = sock;
	argv[n++] = (char *)"-mode";
	argv[n++] = (char *)mode;
	if (response) {
		snprintf(resp, sizeof(resp), "-response=%s/%s", resp_dir, response);
		argv[n++] = resp;
	}
	if (listen_delay_ms) {
		snprintf(late, sizeof(late), "-listen-delay=%d", listen_delay_ms);
		argv[n++] = late;
	}
	argv[n] = NULL;
	rc = posix_spawn(&pid, server_bin, NULL, NULL, argv, environ);
	if (rc != 0) {
		fprintf(stderr, "posix_spawn %s: %s\n", server_bin, strerror(rc));
		exit(1);
	}
	return pid;
}

static pid_t spawn_server(const char *mode, const char *response)
{
	return spawn_server_late(mode, response, 0);
}

static void kill_server(pid_t pid)
{
	int st;

	if (kill(pid, SIGKILL) < 0)
		perror("kill");
	if (waitpid(pid, &st, 0) < 0)
		perror("waitpid");
}

/* Waits for the inotify fd to report `want` bits on the socket. */
static unsigned wait_socket(struct podres *p, unsigned want, int timeout_ms)
{
	struct pollfd pfd = { podres_inotify_fd(p), POLLIN, 0 };
	uint64_t end = mono_us() + (uint64_t)timeout_ms * 1000;
	unsigned bits = 0;

	while ((bits & want) != want && mono_us() < end) {
		if (poll(&pfd, 1, 100) > 0)
			bits |= podres_on_inotify(p);
	}
	return bits;
}

static int wait_result(struct podres *p, int timeout_ms, struct podres_result *r)
{
	struct pollfd pfd = { podres_result_fd(p), POLLIN, 0 };

	memset(r, 0, sizeof(*r));
	if (poll(&pfd, 1, timeout_ms) <= 0)
		return 0;
	return podres_take(p, r);
}

static struct podres *start(unsigned deadline_ms, size_t max_msg)
{
	struct podres_config cfg;
	char err[256];
	struct podres *p;

	memset(&cfg, 0, sizeof(cfg));
	cfg.socket_path = sock;
	cfg.resources[0] = "nvidia.com/gpu";
	cfg.resources[1] = "gpuqos.io/gpu";
	cfg.min_interval_ms = 60000;
	cfg.deadline_ms = deadline_ms;
	cfg.max_msg_bytes = max_msg;
	p = podres_start(&cfg, err, sizeof(err));
	if (!p) {
		fprintf(stderr, "podres_start: %s\n", err);
		exit(1);
	}
	return p;
}

/* One forced List; returns the result (the caller frees its list). */
static struct podres_result list_now(struct podres *p, int timeout_ms)
{
	struct podres_result r;

	CHECK(podres_request(p, mono_us(), 1) == 0);
	CHECK(wait_result(p, timeout_ms, &r) == 1);
	printf("List: err %d status %s, %zu rows, %llu us%s%s\n", r.err,
	       podres_status_name(r.grpc_status), r.list.n, (unsigned long long)r.elapsed_us,
	       r.why[0] ? ": " : "", r.why);
	return r;
}

static const struct podres_row *find_row(const struct podres_list *l, const char *pod)
{
	size_t i;

	for (i = 0; i < l->n; i++)
		if (strcmp(l->rows[i].pod, pod) == 0)
			return &l->rows[i];
	return NULL;
}

static void check_answer_a(const struct podres_result *r)
{
	const struct podres_row *lc = find_row(&r->list, "resnet-lc-0");
	const struct podres_row *be = find_row(&r->list, "train-be-1");

	CHECK(r->err == PODRES_OK);
	CHECK(r->list.n == 2); /* the fpga, the sidecar and the web pod are not kept */
	CHECK(lc && be);
	if (!lc || !be)
		return;
	CHECK(strcmp(lc->namespace_, "inference") == 0 && strcmp(lc->container, "server") == 0);
	CHECK(strcmp(lc->resource, "nvidia.com/gpu") == 0 && lc->n_ids == 1);
	CHECK(lc->n_ids == 1 && strcmp(lc->device_ids[0], "GPU-fef8089b-4820-abfc-e83e-94318197576e") == 0);
	CHECK(strcmp(be->namespace_, "batch") == 0 && strcmp(be->container, "trainer") == 0);
	CHECK(strcmp(be->resource, "gpuqos.io/gpu") == 0 && be->n_ids == 2);
}

static void check_answer_b(const struct podres_result *r)
{
	const struct podres_row *llm = find_row(&r->list, "llm-lc-7");

	CHECK(r->err == PODRES_OK);
	CHECK(r->list.n == 2);
	CHECK(llm && strcmp(llm->container, "vllm") == 0 && llm->n_ids == 1);
	CHECK(!find_row(&r->list, "train-be-1"));
}

static void scenario_list(void)
{
	struct podres *p = start(5000, 0);
	pid_t srv = spawn_server("ok", "response_a.json");
	struct podres_result r;
	uint64_t now;

	CHECK(wait_socket(p, PODRES_SOCKET_CREATED, 10000) & PODRES_SOCKET_CREATED);
	r = list_now(p, 10000);
	check_answer_a(&r);
	podres_list_free(&r.list);
	/* the rate limit: a second unforced List within the interval waits */
	now = mono_us();
	errno = 0;
	CHECK(podres_request(p, now, 0) == -1 && errno == EAGAIN);
	CHECK(podres_next_us(p) > now && podres_next_us(p) <= now + 60000000ull);
	CHECK(podres_request(p, podres_next_us(p), 0) == 0); /* allowed once due */
	errno = 0;
	CHECK(podres_request(p, mono_us(), 1) == -1 && errno == EBUSY); /* one in flight */
	CHECK(wait_result(p, 10000, &r) == 1);
	check_answer_a(&r);
	podres_list_free(&r.list);
	CHECK(podres_take(p, &r) == 0);
	podres_stop(p);
	kill_server(srv);
}

/* A kubelet restart: the old one dies (its socket stays behind), calls
 * fail; the new one deletes the stale socket and creates its own. */
static void scenario_restart(void)
{
	struct podres *p = start(3000, 0);
	pid_t a = spawn_server("ok", "response_a.json"), b;
	struct podres_result r;
	unsigned bits;

	CHECK(wait_socket(p, PODRES_SOCKET_CREATED, 10000) & PODRES_SOCKET_CREATED);
	r = list_now(p, 10000);
	check_answer_a(&r);
	podres_list_free(&r.list);

	kill_server(a);
	r = list_now(p, 10000);
	CHECK(r.err == PODRES_ERR_RPC && r.grpc_status == 14 /* UNAVAILABLE */);
	CHECK(strstr(r.why, sock) && strstr(r.why, "UNAVAILABLE"));
	podres_list_free(&r.list);

	b = spawn_server("ok", "response_b.json");
	bits = wait_socket(p, PODRES_SOCKET_DELETED | PODRES_SOCKET_CREATED, 10000);
	CHECK(bits == (PODRES_SOCKET_DELETED | PODRES_SOCKET_CREATED));
	r = list_now(p, 10000);
	check_answer_b(&r);
	CHECK(r.elapsed_us < 1000000); /* a fresh channel: no reconnect backoff */
	podres_list_free(&r.list);

	/* once more, without a failed call in between, and with a kubelet
	 * that listens 400 ms after its socket file appears: the first call
	 * after the create waits for it instead of being refused */
	kill_server(b);
	b = spawn_server_late("ok", "response_a.json", 400);
	CHECK(wait_socket(p, PODRES_SOCKET_CREATED, 10000) & PODRES_SOCKET_CREATED);
	r = list_now(p, 10000);
	check_answer_a(&r);
	CHECK(r.elapsed_us < 3000000); /* within the deadline */
	podres_list_free(&r.list);
	podres_stop(p);
	kill_server(b);
}

/* No kubelet yet, not even its directory: a clear, fast error; the
 * client works once the directory and the socket appear. */
static void scenario_no_server(void)
{
	char dir[256];
	struct podres *p;
	struct podres_result r;
	pid_t srv;

	snprintf(dir, sizeof(dir), "%s/late", tmp);
	snprintf(sock, sizeof(sock), "%s/kubelet.sock", dir);
	p = start(5000, 0);
	r = list_now(p, 10000);
	CHECK(r.err == PODRES_ERR_RPC && r.grpc_status == 14);
	CHECK(strstr(r.why, sock) != NULL);
	CHECK(r.elapsed_us < 5000000);
	podres_list_free(&r.list);
	CHECK(mkdir(dir, 0755) == 0);
	srv = spawn_server("ok", "response_b.json");
	for (int i = 0; i < 100 && access(sock, F_OK) != 0; i++)
		usleep(50000);
	r = list_now(p, 10000);
	check_answer_b(&r);
	podres_list_free(&r.list);
	podres_stop(p);
	kill_server(srv);
}

static void scenario_garbage(void)
{
	struct podres *p = start(5000, 0);
	pid_t srv = spawn_server("garbage", "response_a.json");
	struct podres_result r;

	CHECK(wait_socket(p, PODRES_SOCKET_CREATED, 10000) & PODRES_SOCKET_CREATED);
	r = list_now(p, 10000);
	CHECK(r.err == PODRES_ERR_DECODE && r.list.n == 0);
	CHECK(strstr(r.why, sock) && strstr(r.why, "malformed ListPodResourcesResponse"));
	podres_stop(p);
	kill_server(srv);
}

static void scenario_oversize(void)
{
	struct podres *p = start(5000, 64 * 1024);
	pid_t srv = spawn_server("big", NULL);
	struct podres_result r;

	CHECK(wait_socket(p, PODRES_SOCKET_CREATED, 10000) & PODRES_SOCKET_CREATED);
	r = list_now(p, 10000);
	CHECK(r.err == PODRES_ERR_RPC && r.grpc_status == 8 /* RESOURCE_EXHAUSTED */);
	CHECK(strstr(r.why, sock) && strstr(r.why, "RESOURCE_EXHAUSTED"));
	podres_stop(p);
	/* the same answer within the default limit (16 MiB) is fine */
	p = start(5000, 0);
	r = list_now(p, 10000);
	CHECK(r.err == PODRES_OK && r.list.n > 3000);
	podres_list_free(&r.list);
	podres_stop(p);
	kill_server(srv);
}

/* A kubelet that accepts the call and never answers: the deadline ends
 * it, and stopping the client cancels a call in flight at once. */
static void scenario_hang(void)
{
	struct podres *p = start(500, 0);
	pid_t srv = spawn_server("hang", NULL);
	struct podres_result r;
	uint64_t t0;

	CHECK(wait_socket(p, PODRES_SOCKET_CREATED, 10000) & PODRES_SOCKET_CREATED);
	t0 = mono_us();
	r = list_now(p, 10000);
	CHECK(r.err == PODRES_ERR_RPC && r.grpc_status == 4 /* DEADLINE_EXCEEDED */);
	CHECK(strstr(r.why, sock) && strstr(r.why, "DEADLINE_EXCEEDED"));
	CHECK(mono_us() - t0 >= 450000 && mono_us() - t0 < 1500000);
	podres_stop(p);

	p = start(30000, 0);
	CHECK(podres_request(p, mono_us(), 1) == 0);
	usleep(300000);
	t0 = mono_us();
	podres_stop(p);
	printf("stop with a call in flight: %llu us\n", (unsigned long long)(mono_us() - t0));
	CHECK(mono_us() - t0 < 1000000);
	kill_server(srv);
}

static void scenario_error(void)
{
	struct podres *p = start(5000, 0);
	pid_t srv = spawn_server("error", NULL);
	struct podres_result r;

	CHECK(wait_socket(p, PODRES_SOCKET_CREATED, 10000) & PODRES_SOCKET_CREATED);
	r = list_now(p, 10000);
	CHECK(r.err == PODRES_ERR_RPC && r.grpc_status == 7);
	CHECK(strstr(r.why, "PERMISSION_DENIED") && strstr(r.why, "test kubelet refuses List"));
	podres_stop(p);
	kill_server(srv);
}

/* podres_decode alone: filtering, every truncation of a real message and
 * a few junk buffers, each an exact-size heap copy (ASan sees overreads). */
static void scenario_decode(void)
{
	char *ids[] = { "GPU-0", "GPU-1" };
	V1__ContainerDevices d0 = V1__CONTAINER_DEVICES__INIT, d1 = V1__CONTAINER_DEVICES__INIT;
	V1__ContainerDevices *devs[] = { &d0, &d1 };
	V1__ContainerResources c = V1__CONTAINER_RESOURCES__INIT;
	V1__ContainerResources *cs[] = { &c };
	V1__PodResources pod = V1__POD_RESOURCES__INIT;
	V1__PodResources *pods[] = { &pod };
	V1__ListPodResourcesResponse m = V1__LIST_POD_RESOURCES_RESPONSE__INIT;
	const char *keep[] = { "nvidia.com/gpu" };
	static const uint8_t junk[][4] = { { 0x0a, 0x05, 0x01 }, { 0xff, 0xff, 0xff, 0xff }, { 0x08 } };
	struct podres_list l;
	char why[128];
	uint8_t *buf;
	size_t len, i;

	d0.resource_name = "nvidia.com/gpu";
	d0.n_device_ids = 2;
	d0.device_ids = ids;
	d1.resource_name = "example.com/nic";
	c.name = "main";
	c.n_devices = 2;
	c.devices = devs;
	pod.name = "p";
	pod.namespace_ = "ns";
	pod.n_containers = 1;
	pod.containers = cs;
	m.n_pod_resources = 1;
	m.pod_resources = pods;
	len = v1__list_pod_resources_response__get_packed_size(&m);
	buf = malloc(len);
	CHECK(buf && v1__list_pod_resources_response__pack(&m, buf) == len);
	CHECK(podres_decode(buf, len, keep, 1, &l, why, sizeof(why)) == 0 && l.n == 1);
	CHECK(l.n == 1 && l.rows[0].n_ids == 2 && strcmp(l.rows[0].device_ids[1], "GPU-1") == 0);
	podres_list_free(&l);
	CHECK(podres_decode(buf, len, NULL, 0, &l, why, sizeof(why)) == 0 && l.n == 2);
	podres_list_free(&l);
	CHECK(podres_decode(buf, 0, NULL, 0, &l, why, sizeof(why)) == 0 && l.n == 0);
	for (i = 1; i < len; i++) {
		uint8_t *t = malloc(i);
		CHECK(t != NULL);
		memcpy(t, buf, i);
		if (podres_decode(t, i, NULL, 0, &l, why, sizeof(why)) == 0)
			podres_list_free(&l);
		else
			CHECK(strstr(why, "malformed") && l.n == 0);
		free(t);
	}
	for (i = 0; i < sizeof(junk) / sizeof(junk[0]); i++)
		CHECK(podres_decode(junk[i], 4, NULL, 0, &l, why, sizeof(why)) == -1);
	free(buf);
	CHECK(strcmp(podres_status_name(14), "UNAVAILABLE") == 0);
	CHECK(strcmp(podres_status_name(99), "UNKNOWN_STATUS") == 0);
}

static const struct {
	const char *name;
	void (*fn)(void);
	int needs_server;
} scenarios[] = {
	{ "decode", scenario_decode, 0 },	  { "list", scenario_list, 1 },
	{ "restart", scenario_restart, 1 },	  { "no_server", scenario_no_server, 1 },
	{ "garbage", scenario_garbage, 1 },	  { "oversize", scenario_oversize, 1 },
	{ "hang", scenario_hang, 1 },		  { "error", scenario_error, 1 },
};

/* Builds the test kubelet; 77 (skip) when Go or its gRPC packages are missing. */
static int build_server(const char *script, const char *out)
{
	static char bin[512];
	char cmd[1200];
	int st;

	snprintf(cmd, sizeof(cmd), "'%s' '%s'", script, out);
	st = system(cmd);
	if (st == -1 || !WIFEXITED(st)) {
		fprintf(stderr, "cannot run %s\n", script);
		return 1;
	}
	if (WEXITSTATUS(st) != 0)
		return WEXITSTATUS(st) == 77 ? 77 : 1;
	snprintf(bin, sizeof(bin), "%s/podres_server", out);
	server_bin = bin;
	return 0;
}

static void cleanup(void)
{
	char p[300];

	unlink(sock);
	snprintf(p, sizeof(p), "%s/late", tmp);
	rmdir(p);
	rmdir(tmp);
}

int main(int argc, char **argv)
{
	size_t i;
	int rc;

	if (argc != 5) {
		fprintf(stderr, "usage: %s <scenario> <build script> <server out dir> <response dir>\n",
			argv[0]);
		return 2;
	}
	resp_dir = argv[4];
	for (i = 0; i < sizeof(scenarios) / sizeof(scenarios[0]); i++)
		if (strcmp(argv[1], scenarios[i].name) == 0)
			break;
	if (i == sizeof(scenarios) / sizeof(scenarios[0])) {
		fprintf(stderr, "unknown scenario %s\n", argv[1]);
		return 2;
	}
	if (scenarios[i].needs_server && (rc = build_server(argv[2], argv[3])) != 0)
		return rc;
	signal(SIGPIPE, SIG_IGN);
	if (!mkdtemp(tmp)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(sock, sizeof(sock), "%s/kubelet.sock", tmp);
	scenarios[i].fn();
	cleanup();
	CHECK_DONE();
}
