/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kube_harness.c - the epoll driver, the fake API server process and the
 * control calls the agent/kube tests use. Does not own any scenario.
 */
#include "tests/kube/kube_harness.h"

#include <curl/curl.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

uint64_t h_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static uint64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static int drv_watch_fd(void *arg, int fd, unsigned events)
{
	struct drv *d = arg;
	struct epoll_event ev = { 0 };
	int op;

	if (fd < 0 || fd >= DRV_MAX_FD)
		return -1;
	if (!events) {
		if (d->watched[fd] && epoll_ctl(d->ep, EPOLL_CTL_DEL, fd, NULL) != 0)
			fprintf(stderr, "drv: epoll del %d: %s\n", fd, strerror(errno));
		d->watched[fd] = 0;
		return 0;
	}
	ev.events = ((events & KUBE_IO_IN) ? EPOLLIN : 0) | ((events & KUBE_IO_OUT) ? EPOLLOUT : 0);
	ev.data.fd = fd;
	op = d->watched[fd] ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
	if (epoll_ctl(d->ep, op, fd, &ev) != 0) {
		fprintf(stderr, "drv: epoll %s %d: %s\n", op == EPOLL_CTL_ADD ? "add" : "mod", fd,
			strerror(errno));
		return -1;
	}
	d->watched[fd] = 1;
	return 0;
}

static int drv_arm_timer(void *arg, long delay_ms)
{
	struct drv *d = arg;
	struct itimerspec its = { 0 };

	if (delay_ms >= 0) {
		its.it_value.tv_sec = delay_ms / 1000;
		/* 0 would disarm a timerfd: "now" is 1 ns. */
		its.it_value.tv_nsec = (delay_ms % 1000) * 1000000L + 1;
	}
	return timerfd_settime(d->tfd, 0, &its, NULL);
}

int drv_init(struct drv *d)
{
	struct epoll_event ev = { .events = EPOLLIN };

	memset(d, 0, sizeof(*d));
	d->ep = epoll_create1(EPOLL_CLOEXEC);
	d->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (d->ep < 0 || d->tfd < 0)
		return -1;
	ev.data.fd = d->tfd;
	return epoll_ctl(d->ep, EPOLL_CTL_ADD, d->tfd, &ev);
}

void drv_fini(struct drv *d)
{
	close(d->tfd);
	close(d->ep);
}

struct kube_io drv_io(struct drv *d)
{
	return (struct kube_io){ .watch_fd = drv_watch_fd, .arm_timer = drv_arm_timer, .arg = d };
}

static uint64_t thread_cpu_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* How long this thread has waited runnable for a CPU (the scheduler's
 * run_delay, /proc/thread-self/schedstat), in us; 0 where the kernel
 * does not keep it. */
static uint64_t thread_runq_us(void)
{
	unsigned long long on_cpu, delay = 0;
	FILE *f = fopen("/proc/thread-self/schedstat", "re");

	if (!f)
		return 0;
	if (fscanf(f, "%llu %llu", &on_cpu, &delay) != 2)
		delay = 0;
	fclose(f);
	return delay / 1000u;
}

/* A call's wall time is its CPU time, its wait for a CPU and its sleeps.
 * Only the sleeps say it blocked: a busy machine stretches the first two
 * but never makes a call that does not wait for I/O sleep. */
static void timed(struct drv *d, int fd, unsigned events)
{
	uint64_t t0 = now_us(), c0 = thread_cpu_us(), r0 = thread_runq_us(), dt, busy;

	if (fd < 0)
		kube_client_on_timer(d->client);
	else
		kube_client_on_fd(d->client, fd, events);
	dt = now_us() - t0;
	busy = (thread_cpu_us() - c0) + (thread_runq_us() - r0);
	d->calls++;
	if (dt > d->max_call_us)
		d->max_call_us = dt;
	if (dt > busy && dt - busy > d->max_blocked_us)
		d->max_blocked_us = dt - busy;
}

void drv_turn(struct drv *d, int ms)
{
	struct epoll_event evs[16];
	int n = epoll_wait(d->ep, evs, 16, ms);

	for (int i = 0; i < n; i++) {
		int fd = evs[i].data.fd;
		unsigned ev = 0;
		uint64_t exp;

		if (fd == d->tfd) {
			if (read(d->tfd, &exp, sizeof(exp)) == (ssize_t)sizeof(exp) && d->client)
				timed(d, -1, 0);
			continue;
		}
		if (!d->client || !d->watched[fd])
			continue; /* removed earlier in this batch */
		if (evs[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP))
			ev |= KUBE_IO_IN;
		if (evs[i].events & (EPOLLOUT | EPOLLERR | EPOLLHUP))
			ev |= KUBE_IO_OUT;
		timed(d, fd, ev);
	}
}

/* ---- the fake API server ---- */

static int gen_cert(struct fake_server *s)
{
	char cmd[1024];

	snprintf(cmd, sizeof(cmd),
		 "openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=fake-apiserver "
		 "-addext subjectAltName=IP:127.0.0.1,DNS:localhost -keyout %s/key.pem "
		 "-out %s/cert.pem >/dev/null 2>&1",
		 s->dir, s->dir);
	if (system(cmd) != 0)
		return -1;
	snprintf(s->ca, sizeof(s->ca), "%s/cert.pem", s->dir);
	return 0;
}

static void server_exec(struct fake_server *s, const char *script, const char *token)
{
	char port_file[300], cert[300], key[300];
	const char *argv[12];
	int n = 0;

	snprintf(port_file, sizeof(port_file), "%s/port", s->dir);
	snprintf(cert, sizeof(cert), "%s/cert.pem", s->dir);
	snprintf(key, sizeof(key), "%s/key.pem", s->dir);
	argv[n++] = "/usr/bin/python3";
	argv[n++] = script;
	argv[n++] = "--port-file";
	argv[n++] = port_file;
	if (token) {
		argv[n++] = "--token";
		argv[n++] = token;
	}
	if (s->ca[0]) {
		argv[n++] = "--tls-cert";
		argv[n++] = cert;
		argv[n++] = "--tls-key";
		argv[n++] = key;
	}
	argv[n] = NULL;
	execv(argv[0], (char *const *)argv);
	_exit(127);
}

int server_start(struct fake_server *s, const char *token, int tls)
{
	const char *script = getenv("KUBE_FAKE_APISERVER");
	char port_file[300];
	FILE *f;

	memset(s, 0, sizeof(*s));
	snprintf(s->dir, sizeof(s->dir), "/tmp/gpuqos-kube-test.XXXXXX");
	if (!script || !mkdtemp(s->dir)) {
		fprintf(stderr, "harness: set KUBE_FAKE_APISERVER (and /tmp must be writable)\n");
		return -1;
	}
	if (tls && gen_cert(s) != 0) {
		fprintf(stderr, "harness: openssl could not make a test certificate\n");
		return -1;
	}
	s->pid = fork();
	if (s->pid < 0)
		return -1;
	if (s->pid == 0) {
		/* A test that crashes must not leave its server behind (and
		 * ctest waiting on the server's copy of its stdout). */
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		server_exec(s, script, token);
	}
	snprintf(port_file, sizeof(port_file), "%s/port", s->dir);
	for (int i = 0; i < 200 && !s->port; i++) {
		f = fopen(port_file, "r");
		if (f) {
			if (fscanf(f, "%d", &s->port) != 1)
				s->port = 0;
			fclose(f);
		}
		if (!s->port)
			usleep(25000);
	}
	snprintf(s->url, sizeof(s->url), "%s://127.0.0.1:%d", s->ca[0] ? "https" : "http",
		 s->port);
	return s->port ? 0 : -1;
}

void server_stop(struct fake_server *s)
{
	char cmd[400];

	if (s->pid > 0) {
		kill(s->pid, SIGTERM);
		waitpid(s->pid, NULL, 0);
		s->pid = 0;
	}
	if (s->dir[0] && strncmp(s->dir, "/tmp/gpuqos-kube-test.", 22) == 0) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", s->dir);
		if (system(cmd) != 0)
			fprintf(stderr, "harness: could not remove %s\n", s->dir);
	}
}

static size_t collect(char *p, size_t size, size_t n, void *arg)
{
	char **buf = arg;
	size_t old = *buf ? strlen(*buf) : 0;
	char *nb = realloc(*buf, old + size * n + 1);

	if (!nb)
		return 0;
	memcpy(nb + old, p, size * n);
	nb[old + size * n] = '\0';
	*buf = nb;
	return size * n;
}

cJSON *ctl(struct fake_server *s, const char *method, const char *path, const char *body)
{
	CURL *e = curl_easy_init();
	char url[512], *buf = NULL;
	cJSON *out = NULL;
	CURLcode rc;

	if (!e)
		return NULL;
	snprintf(url, sizeof(url), "%s%s", s->url, path);
	curl_easy_setopt(e, CURLOPT_URL, url);
	curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, collect);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, &buf);
	curl_easy_setopt(e, CURLOPT_TIMEOUT, 10L);
	if (body)
		curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
	if (s->ca[0])
		curl_easy_setopt(e, CURLOPT_CAINFO, s->ca);
	rc = curl_easy_perform(e);
	if (rc != CURLE_OK)
		fprintf(stderr, "harness: %s %s: %s\n", method, url, curl_easy_strerror(rc));
	else if (buf)
		out = cJSON_Parse(buf);
	free(buf);
	curl_easy_cleanup(e);
	return out;
}

int ctl_ok(struct fake_server *s, const char *method, const char *path, const char *body)
{
	cJSON *r = ctl(s, method, path, body);
	int ok = r != NULL;

	cJSON_Delete(r);
	return ok ? 0 : -1;
}

int count_reqs(struct fake_server *s, const char *kind, int status, double *t, int max_t)
{
	cJSON *all = ctl(s, "GET", "/_test/requests", NULL), *r;
	int n = 0;

	cJSON_ArrayForEach(r, all) {
		cJSON *k = cJSON_GetObjectItem(r, "kind"), *st = cJSON_GetObjectItem(r, "status");

		if (!cJSON_IsString(k) || strcmp(k->valuestring, kind) != 0)
			continue;
		if (status && (!cJSON_IsNumber(st) || st->valueint != status))
			continue;
		if (t && n < max_t)
			t[n] = cJSON_GetObjectItem(r, "t")->valuedouble * 1000.0;
		n++;
	}
	cJSON_Delete(all);
	return n;
}

int count_pod_reqs(struct fake_server *s, const char *kind, const char *pod, int status)
{
	cJSON *all = ctl(s, "GET", "/_test/requests", NULL), *r;
	int n = 0;

	cJSON_ArrayForEach(r, all) {
		const char *k = cJSON_GetStringValue(cJSON_GetObjectItem(r, "kind"));
		const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(r, "name"));
		cJSON *st = cJSON_GetObjectItem(r, "status");

		if (!k || !name || strcmp(k, kind) != 0 || strcmp(name, pod) != 0)
			continue;
		if (status && (!cJSON_IsNumber(st) || st->valueint != status))
			continue;
		n++;
	}
	cJSON_Delete(all);
	return n;
}

void last_req_rv(struct fake_server *s, const char *kind, char *out, size_t len)
{
	cJSON *all = ctl(s, "GET", "/_test/requests", NULL), *r;

	snprintf(out, len, "%s", "");
	cJSON_ArrayForEach(r, all) {
		cJSON *k = cJSON_GetObjectItem(r, "kind"), *rv = cJSON_GetObjectItem(r, "rv");

		if (cJSON_IsString(k) && strcmp(k->valuestring, kind) == 0)
			snprintf(out, len, "%s", cJSON_IsString(rv) ? rv->valuestring : "");
	}
	cJSON_Delete(all);
}

static int state_field(struct fake_server *s, const char *name)
{
	cJSON *st = ctl(s, "GET", "/_test/state", NULL);
	cJSON *v = cJSON_GetObjectItem(st, name);
	int n = cJSON_IsNumber(v) ? v->valueint : -1;

	cJSON_Delete(st);
	return n;
}

int server_rv(struct fake_server *s)
{
	return state_field(s, "rv");
}

int server_watchers(struct fake_server *s)
{
	return state_field(s, "watchers");
}

int put_pod(struct fake_server *s, const char *name, const char *node, const char *phase,
	    const char *annotations_json)
{
	char body[2048];

	snprintf(body, sizeof(body),
		 "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"default\",\"annotations\":%s},"
		 "\"spec\":{\"nodeName\":\"%s\",\"containers\":[{\"name\":\"main\"}]},"
		 "\"status\":{\"phase\":\"%s\",\"containerStatuses\":[{\"name\":\"main\","
		 "\"containerID\":\"containerd://%s-c0ffee\"}]}}",
		 name, annotations_json ? annotations_json : "{}", node, phase, name);
	return ctl_ok(s, "POST", "/_test/pods", body);
}

int put_pod_padded(struct fake_server *s, const char *name, const char *node, size_t pad)
{
	char *pad_s = malloc(pad + 1), *body = NULL;
	int rc = -1;

	if (!pad_s)
		return -1;
	memset(pad_s, 'x', pad);
	pad_s[pad] = '\0';
	if (asprintf(&body,
		     "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"default\","
		     "\"annotations\":{\"pad\":\"%s\"}},"
		     "\"spec\":{\"nodeName\":\"%s\",\"containers\":[{\"name\":\"main\"}]},"
		     "\"status\":{\"phase\":\"Running\"}}",
		     name, pad_s, node) >= 0)
		rc = ctl_ok(s, "POST", "/_test/pods", body);
	free(pad_s);
	free(body);
	return rc;
}

int write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	int rc;

	if (!f)
		return -1;
	rc = fputs(text, f) < 0;
	rc |= fclose(f) != 0;
	return rc ? -1 : 0;
}
