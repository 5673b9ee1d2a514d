/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kubesock.c - kubelet socket plumbing shared by the pod-resources client
 * and the device plugin (kubesock.h).
 */
#include "common/kubesock.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <grpc/grpc.h>
#include <grpc/grpc_security.h>

grpc_channel *kubesock_channel(const char *sock, int max_recv)
{
	grpc_arg arg[3];
	grpc_channel_args args = { 3, arg };
	grpc_channel_credentials *creds;
	grpc_channel *ch;
	char target[PATH_MAX + 8];

	if ((size_t)snprintf(target, sizeof(target), "unix://%s", sock) >= sizeof(target))
		return NULL;
	arg[0].type = arg[1].type = arg[2].type = GRPC_ARG_INTEGER;
	arg[0].key = (char *)GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH;
	arg[0].value.integer = max_recv;
	arg[1].key = (char *)GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS;
	arg[1].value.integer = 100;
	arg[2].key = (char *)GRPC_ARG_MAX_RECONNECT_BACKOFF_MS;
	arg[2].value.integer = 1000;
	creds = grpc_insecure_credentials_create();
	if (!creds)
		return NULL;
	ch = grpc_channel_create(target, creds, &args);
	grpc_channel_credentials_release(creds);
	return ch;
}

const char *kubesock_status_name(int code)
{
	static const char *const names[] = {
		"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED",
		"NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED",
		"FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL",
		"UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED",
	};

	if (code < 0 || (size_t)code >= sizeof(names) / sizeof(names[0]))
		return "UNKNOWN_STATUS";
	return names[code];
}

int kubesock_watch_init(struct kubesock_watch *w, const char *dir)
{
	w->wd = -1;
	if (snprintf(w->dir, sizeof(w->dir), "%s", dir) >= (int)sizeof(w->dir)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	w->fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (w->fd < 0)
		return -1;
	kubesock_watch_retry(w);
	return 0;
}

int kubesock_watch_retry(struct kubesock_watch *w)
{
	if (w->wd >= 0)
		return 0;
	/* ENOENT: no kubelet has run here yet */
	w->wd = inotify_add_watch(w->fd, w->dir,
				  IN_CREATE | IN_DELETE | IN_MOVED_TO | IN_MOVED_FROM |
					  IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR);
	return w->wd >= 0;
}

/* One event folded into bits; 1 when the directory itself went away. */
static int one_event(struct kubesock_watch *w, const struct inotify_event *ev,
		     const char *const *names, size_t n, unsigned *bits)
{
	if (ev->wd != w->wd)
		return 0;
	if (ev->mask & (IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF)) {
		if (!(ev->mask & IN_IGNORED)) /* EINVAL: the kernel removed it already */
			(void)inotify_rm_watch(w->fd, w->wd);
		w->wd = -1;
		for (size_t i = 0; i < n; i++)
			bits[i] |= KUBESOCK_DELETED;
		return 1;
	}
	for (size_t i = 0; ev->len && i < n; i++) {
		if (strcmp(ev->name, names[i]) != 0)
			continue;
		if (ev->mask & (IN_CREATE | IN_MOVED_TO))
			bits[i] |= KUBESOCK_CREATED;
		if (ev->mask & (IN_DELETE | IN_MOVED_FROM))
			bits[i] |= KUBESOCK_DELETED;
	}
	return 0;
}

unsigned kubesock_watch_drain(struct kubesock_watch *w, const char *const *names, size_t n,
			      unsigned *bits)
{
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	unsigned all = 0;
	ssize_t got;

	for (size_t i = 0; i < n; i++)
		bits[i] = 0;
	while ((got = read(w->fd, buf, sizeof(buf))) > 0) {
		char *at = buf;
		while (at + sizeof(struct inotify_event) <= buf + got) {
			const struct inotify_event *ev = (const struct inotify_event *)at;
			one_event(w, ev, names, n, bits);
			at += sizeof(*ev) + ev->len;
		}
	}
	for (size_t i = 0; i < n; i++)
		all |= bits[i];
	return all;
}

void kubesock_watch_close(struct kubesock_watch *w)
{
	if (w->fd >= 0)
		close(w->fd);
	w->fd = w->wd = -1;
}

void kubesock_post(int efd)
{
	uint64_t one = 1;

	/* the counter only overflows after 2^64 - 2 unread posts: cannot fail */
	if (write(efd, &one, sizeof(one)) != sizeof(one))
		perror("gpuqos: eventfd write");
}

void kubesock_drain(int efd)
{
	uint64_t v;

	/* EAGAIN: nothing posted since the last read */
	if (read(efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		perror("gpuqos: eventfd read");
}
