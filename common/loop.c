/* SPDX-License-Identifier: Apache-2.0 */
/*
 * loop.c - epoll wrapper, timers and after-batch posts (loop.h). Owns the
 * epoll fd, every timerfd, and the dispatch of ready watches, due timers
 * and posts; does not own any source's memory. Nothing here sleeps except
 * epoll_wait itself.
 */
#include "common/loop.h"
#include "common/log.h"

#include <errno.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#define LOOP_BATCH 64

uint64_t now_us(void)
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
	l->posts = NULL;
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

/* ---- timers ---- */

static void on_timerfd(struct loop_watch *w, uint32_t events)
{
	struct loop_timer *t = w->ctx;
	uint64_t expirations;

	(void)events;
	/* EAGAIN: re-armed by another handler of this batch after it fired */
	if (read(w->fd, &expirations, sizeof(expirations)) < 0) {
		if (errno != EAGAIN && errno != EINTR)
			log_warn("%s timer: read: %s", t->name, strerror(errno));
		return;
	}
	t->fn(t);
}

int loop_timer_add(struct loop *l, struct loop_timer *t, const char *name, loop_timer_fn fn,
		   void *ctx)
{
	t->loop = l;
	t->fn = fn;
	t->ctx = ctx;
	t->name = name ? name : "a";
	t->w.fn = on_timerfd;
	t->w.ctx = t;
	t->w.fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (t->w.fd < 0) {
		log_error("%s timer: timerfd_create: %s", t->name, strerror(errno));
		return -1;
	}
	if (loop_add(l, &t->w, EPOLLIN) != 0) {
		int e = errno;

		close(t->w.fd);
		t->w.fd = -1;
		errno = e;
		return -1;
	}
	return 0;
}

static void us_to_ts(uint64_t us, struct timespec *ts)
{
	ts->tv_sec = (time_t)(us / 1000000u);
	ts->tv_nsec = (long)(us % 1000000u) * 1000;
}

static int timer_set(struct loop_timer *t, int flags, uint64_t value_us, uint64_t interval_us)
{
	struct itimerspec its;

	if (t->w.fd < 0) {
		errno = EBADF;
		return -1;
	}
	memset(&its, 0, sizeof(its));
	us_to_ts(value_us, &its.it_value);
	us_to_ts(interval_us, &its.it_interval);
	if (timerfd_settime(t->w.fd, flags, &its, NULL) != 0) {
		log_warn("%s timer: timerfd_settime: %s", t->name, strerror(errno));
		return -1;
	}
	return 0;
}

int loop_timer_at(struct loop_timer *t, uint64_t at)
{
	if (at == 0)
		return timer_set(t, 0, 0, 0);
	/* a moment past (or now) is 1 us ahead: an all-zero value disarms */
	uint64_t now = now_us();

	return timer_set(t, TFD_TIMER_ABSTIME, at > now ? at : now + 1, 0);
}

int loop_timer_after(struct loop_timer *t, uint64_t us)
{
	return timer_set(t, 0, us, 0);
}

int loop_timer_every(struct loop_timer *t, uint64_t period_us)
{
	return timer_set(t, 0, period_us, period_us);
}

int loop_timer_disarm(struct loop_timer *t)
{
	return timer_set(t, 0, 0, 0);
}

void loop_timer_del(struct loop_timer *t)
{
	if (t->loop)
		loop_close(t->loop, &t->w);
}

/* ---- posts ---- */

void loop_post_add(struct loop *l, struct loop_post *p, loop_post_fn fn, void *ctx)
{
	struct loop_post **pp = &l->posts;

	while (*pp)
		pp = &(*pp)->next;
	p->next = NULL;
	p->fn = fn;
	p->ctx = ctx;
	*pp = p;
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
		for (struct loop_post *p = l->posts; p; p = p->next)
			p->fn(p->ctx);
	}
	return 0;
}
