/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kubesock.h - the kubelet's unix-socket gRPC plumbing that the node
 * agent's pod-resources client and the device plugin share: a channel to a
 * kubelet socket that reconnects quickly, the gRPC status codes in words,
 * an inotify watch on a kubelet directory that reports when named sockets
 * are created or deleted (a new kubelet deletes and recreates them), and
 * the eventfd through which a worker thread hands a result to an event
 * loop.
 *
 * Owns none of the calls made on the channel and no thread; needs gRPC C
 * core only for kubesock_channel.
 */
#ifndef GPUQOS_COMMON_KUBESOCK_H
#define GPUQOS_COMMON_KUBESOCK_H

#include <limits.h>
#include <stddef.h>

typedef struct grpc_channel grpc_channel;

/* An insecure channel to unix://sock whose reconnect backoff is 100 ms
 * to 1 s (gRPC's default grows to minutes, far too slow after a kubelet
 * restart). max_recv: the largest message accepted. NULL on failure. */
grpc_channel *kubesock_channel(const char *sock, int max_recv);

/* "DEADLINE_EXCEEDED" for 4. */
const char *kubesock_status_name(int code);

#define KUBESOCK_CREATED 1u
#define KUBESOCK_DELETED 2u
#define KUBESOCK_MAX_NAMES 8

struct kubesock_watch {
	int fd, wd;
	char dir[PATH_MAX];
};

/* inotify on dir. A missing directory is no error: kubesock_watch_retry
 * adds the watch once it exists. 0, or -1 with errno. */
int kubesock_watch_init(struct kubesock_watch *w, const char *dir);
/* 1 when a watch was newly added (the directory appeared), else 0. */
int kubesock_watch_retry(struct kubesock_watch *w);
/* Reads every pending event; bits[i] gets KUBESOCK_* for names[i]. The
 * directory itself going away deletes them all and ends the watch (wd is
 * -1 then): no event comes again until kubesock_watch_retry adds it anew,
 * which the caller tries until the directory is back. Returns the OR. */
unsigned kubesock_watch_drain(struct kubesock_watch *w, const char *const *names, size_t n,
			      unsigned *bits);
void kubesock_watch_close(struct kubesock_watch *w);

/* A worker's "result ready" on an eventfd, and the loop's read of it. */
void kubesock_post(int efd);
void kubesock_drain(int efd);

#endif
