/* SPDX-License-Identifier: Apache-2.0 */
/*
 * podres.h - device -> pod: a client of the kubelet pod-resources API v1
 * (PodResourcesLister.List over the kubelet's unix socket), reduced to the
 * rows gpuqos needs: for each pod (namespace, name) and container, the
 * device ids of the resources gpuqos cares about (nvidia.com/gpu,
 * gpuqos.io/gpu, ...).
 *
 * Owns: the gRPC channel, one worker thread that runs List with a deadline,
 * the rate limit, the inotify watch on the socket's directory (a new
 * kubelet deletes and recreates its socket) and the decoding of the
 * answer. Does not own what the rows mean (which pod is latency-critical),
 * the event loop (the caller adds the two fds below to it) or retries (the
 * caller decides when to ask again).
 *
 * Why a thread: gRPC C core exposes no file descriptor, and its I/O only
 * makes progress while some thread waits on a completion queue. The worker
 * blocks in grpc_completion_queue_next (never polls) for at most the call's
 * deadline and reports through an eventfd the loop watches, so the loop
 * never blocks on the kubelet and needs no timer to drive gRPC.
 *
 * Threads: every function here is for the loop thread; the worker touches
 * only the channel and the result slot. gRPC must not see a fork() after
 * podres_start (spawn children with posix_spawn or before it).
 */
#ifndef GPUQOS_KUBENODE_PODRES_H
#define GPUQOS_KUBENODE_PODRES_H

#include <stddef.h>
#include <stdint.h>

#define PODRES_DEFAULT_SOCKET "/var/lib/kubelet/pod-resources/kubelet.sock"
#define PODRES_DEFAULT_INTERVAL_MS 10000
#define PODRES_DEFAULT_DEADLINE_MS 5000
#define PODRES_DEFAULT_MAX_MSG (16u << 20) /* the kubelet's own client limit */
#define PODRES_MAX_RESOURCES 8

struct podres_config {
	const char *socket_path;                      /* NULL: PODRES_DEFAULT_SOCKET */
	const char *resources[PODRES_MAX_RESOURCES];  /* kept resource names; none: all */
	unsigned min_interval_ms;                     /* 0: the default */
	unsigned deadline_ms;                         /* 0: the default */
	size_t max_msg_bytes;                         /* 0: the default */
};

/* One container's devices of one resource. */
struct podres_row {
	char *namespace_;
	char *pod;
	char *container;
	char *resource;
	char **device_ids;
	size_t n_ids;
};

struct podres_list {
	struct podres_row *rows;
	size_t n;
};

enum podres_err {
	PODRES_OK = 0,
	PODRES_ERR_RPC,     /* the call ended with a gRPC status other than OK */
	PODRES_ERR_DECODE,  /* the answer is not a ListPodResourcesResponse */
	PODRES_ERR_NOMEM,
};

struct podres_result {
	enum podres_err err;
	int grpc_status;     /* grpc_status_code; 0 with PODRES_OK */
	char why[512];       /* names the socket and the status in words */
	struct podres_list list; /* owned by the caller after podres_take */
	uint64_t elapsed_us; /* the call, start to end */
};

struct podres;

/* Starts the worker and the inotify watch. NULL with err filled on
 * failure. A missing socket directory is not an error: the watch is
 * retried on every request. */
struct podres *podres_start(const struct podres_config *cfg, char *err, size_t errlen);

/* Cancels a call in flight, joins the worker, frees everything. */
void podres_stop(struct podres *p);

/* Readable when a result is ready: call podres_take. */
int podres_result_fd(const struct podres *p);

/* Readable when the socket directory changed: call podres_on_inotify.
 * Always valid; while the directory does not exist it stays quiet (the
 * watch is retried on every request and inotify event). */
int podres_inotify_fd(const struct podres *p);

/* Asks for one List. 0 when started; -1 with errno EBUSY (one is in
 * flight: its result will come) or EAGAIN (rate limit: at most one List
 * per min_interval_ms unless force; podres_next_us says when). */
int podres_request(struct podres *p, uint64_t now_us, int force);
uint64_t podres_next_us(const struct podres *p);

#define PODRES_SOCKET_CREATED 1u /* the socket appeared (kubelet (re)started) */
#define PODRES_SOCKET_DELETED 2u
/* Drains the inotify fd. Returns PODRES_SOCKET_* bits; on CREATED the
 * next call uses a fresh channel, and the caller should force a List. */
unsigned podres_on_inotify(struct podres *p);

/* Moves a finished result to out (1), or 0 when none is ready. */
int podres_take(struct podres *p, struct podres_result *out);

/* Pure: decodes a serialized ListPodResourcesResponse into rows, keeping
 * only the configured resources (all when resources[0] is NULL). 0, or -1
 * with why filled (malformed message, out of memory). */
int podres_decode(const uint8_t *buf, size_t len, const char *const *resources, size_t n_res,
		  struct podres_list *out, char *why, size_t whylen);

void podres_list_free(struct podres_list *l);

/* "DEADLINE_EXCEEDED" for 4: the gRPC status codes in words. */
const char *podres_status_name(int code);

#endif
