/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kube_harness.h - what the agent/kube tests share: a tiny epoll driver
 * standing in for agent/loop.c (it also measures how long every call into
 * the client slept, to prove none blocks), the fake API server as a child
 * process, and blocking control calls to it. Test code only: blocking is
 * fine here.
 */
#ifndef GPUQOS_TESTS_KUBE_HARNESS_H
#define GPUQOS_TESTS_KUBE_HARNESS_H

#include <cjson/cJSON.h>
#include <stdint.h>
#include <sys/types.h>

#include "agent/kube/kube_client.h"

#define DRV_MAX_FD 4096

struct drv {
	int ep;
	int tfd;
	unsigned char watched[DRV_MAX_FD];
	struct kube_client *client;
	uint64_t max_call_us;    /* longest single call into the client, wall */
	uint64_t max_blocked_us; /* longest time one call slept (not on or
				  * waiting for a CPU): the client blocked */
	uint64_t calls;
};

struct fake_server {
	pid_t pid;
	int port;
	char url[128];
	char dir[256];   /* scratch folder of this test */
	char ca[300];    /* the server's certificate when TLS, else "" */
};

uint64_t h_now_ms(void);
int drv_init(struct drv *d);
void drv_fini(struct drv *d);
struct kube_io drv_io(struct drv *d);
/* One epoll_wait of at most ms, dispatching to d->client. */
void drv_turn(struct drv *d, int ms);

/* Starts fake_apiserver.py (path from $KUBE_FAKE_APISERVER) in a fresh
 * scratch folder; tls: generate a certificate with openssl first. */
int server_start(struct fake_server *s, const char *token, int tls);
void server_stop(struct fake_server *s);
/* Control calls; the answer is parsed JSON (caller deletes) or NULL. */
cJSON *ctl(struct fake_server *s, const char *method, const char *path, const char *body);
int ctl_ok(struct fake_server *s, const char *method, const char *path, const char *body);
/* API requests the server saw of one kind ("list", "watch", ...) with
 * status (0: any); times in ms of the server's monotonic clock if t. */
int count_reqs(struct fake_server *s, const char *kind, int status, double *t, int max_t);
/* The same for the requests naming one pod (GET, PATCH). */
int count_pod_reqs(struct fake_server *s, const char *kind, const char *pod, int status);
/* resourceVersion of the last request of that kind, "" if none. */
void last_req_rv(struct fake_server *s, const char *kind, char *out, size_t len);
int server_rv(struct fake_server *s);
int server_watchers(struct fake_server *s);
int put_pod(struct fake_server *s, const char *name, const char *node, const char *phase,
	    const char *annotations_json);
/* A pod whose "pad" annotation is pad bytes long: a large object. */
int put_pod_padded(struct fake_server *s, const char *name, const char *node, size_t pad);
int write_file(const char *path, const char *text);

/* Runs the driver until expr holds or ms pass; CHECKs expr. */
#define WAIT(d, ms, expr)                                                        \
	do {                                                                     \
		uint64_t wait_dl_ = h_now_ms() + (ms);                           \
		while (!(expr) && h_now_ms() < wait_dl_)                         \
			drv_turn((d), 20);                                       \
		CHECK(expr);                                                     \
	} while (0)

/* Runs the driver for ms regardless. */
#define SPIN(d, ms)                                                              \
	do {                                                                     \
		uint64_t spin_dl_ = h_now_ms() + (ms);                           \
		while (h_now_ms() < spin_dl_)                                    \
			drv_turn((d), 20);                                       \
	} while (0)

#endif
