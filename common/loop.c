/* SPDX-License-Identifier: Apache-2.0 */
/*
 * loop.c - epoll wrapper. Owns the epoll fd and the dispatch of ready
 * watches; does not own any watch's memory. Nothing here sleeps except
 * epoll_wait itself.
 */
#include "common/loop.h"
#include "common/log.h"

#include <errno.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#define LOOP_BATCH 64

/* Weak: the core's unit tests (tests/agent/test_core.c) link a fake clock. */
__attribute__((weak)) uint64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

int loop_init(struct loop *l)
{
	memset(l, 0, sizeof(*l));
	l->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (l->epfd < 0) {
		log_error("epoll_create1: %s", strerror(errno));
		return -1;
	}
	return 0;
}

void loop_fini(struct loop *l)
{
	if (l->epfd >= 0)
		close(l->epfd);
	l->epfd = -1;
}

int loop_add(struct loop *l, struct loop_watch *w, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = w };

	w->dead = 0;
	if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, w->fd, &ev) != 0) {
		log_error("epoll_ctl add fd %d: %s", w->fd, strerror(errno));
		return -1;
	}
	return 0;
}

int loop_mod(struct loop *l, struct loop_watch *w, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = w };

	if (epoll_ctl(l->epfd, EPOLL_CTL_MOD, w->fd, &ev) != 0) {
		log_error("epoll_ctl mod fd %d: %s", w->fd, strerror(errno));
		return -1;
	}
	return 0;
}

void loop_close(struct loop *l, struct loop_watch *w)
{
	if (w->fd >= 0) {
		if (epoll_ctl(l->epfd, EPOLL_CTL_DEL, w->fd, NULL) != 0)
			log_warn("epoll_ctl del fd %d: %s", w->fd, strerror(errno));
		close(w->fd);
	}
	w->fd = -1;
	w->dead = 1;
}

void loop_del(struct loop *l, struct loop_watch *w)
{
	if (w->fd >= 0 && epoll_ctl(l->epfd, EPOLL_CTL_DEL, w->fd, NULL) != 0)
		log_warn("epoll_ctl del fd %d: %s", w->fd, strerror(errno));
	w->fd = -1;
	w->dead = 1;
}

int loop_run(struct loop *l)
{
	struct epoll_event evs[LOOP_BATCH];

	while (!l->stop) {
		int n = epoll_wait(l->epfd, evs, LOOP_BATCH, -1);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			log_error("epoll_wait: %s", strerror(errno));
			return -1;
		}
		for (int i = 0; i < n; i++) {
			struct loop_watch *w = evs[i].data.ptr;

			if (!w->dead)
				w->fn(w, evs[i].events);
		}
		if (l->after_batch)
			l->after_batch(l->after_arg);
	}
	return 0;
}
