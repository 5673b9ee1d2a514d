/* SPDX-License-Identifier: Apache-2.0 */
/*
 * loop.h - the one epoll event loop of a gpuqos daemon, and the owner of
 * its time. Every source of work is one of three kinds:
 *   a watch  - a file descriptor and a handler (signals, sockets, eventfds)
 *   a timer  - a handler at a moment or every period (CLOCK_MONOTONIC, the
 *              now_us() clock), one timerfd each, armed only through here
 *   a post   - a handler run after every batch of events, in the order the
 *              posts were added (what a batch changed is acted on once)
 * Does not own what the handlers do, nor any source's memory.
 */
#ifndef GPUQOS_COMMON_LOOP_H
#define GPUQOS_COMMON_LOOP_H

#include <stdint.h>

struct loop_watch;
typedef void (*loop_fn)(struct loop_watch *w, uint32_t events);

struct loop_watch {
	int fd;
	loop_fn fn;
	void *ctx;
	int dead; /* closed during this batch: its pending events are skipped */
};

struct loop_timer;
typedef void (*loop_timer_fn)(struct loop_timer *t);

/* A timer: fn(t) runs on the loop when it is due (t->ctx for the caller). */
struct loop_timer {
	struct loop_watch w; /* its timerfd (private) */
	struct loop *loop;
	loop_timer_fn fn;
	void *ctx;
	const char *name; /* in log lines */
};

struct loop_post;
typedef void (*loop_post_fn)(void *ctx);

struct loop_post {
	struct loop_post *next;
	loop_post_fn fn;
	void *ctx;
};

struct loop {
	int epfd;
	int stop;
	struct loop_post *posts; /* in the order added */
};

int loop_init(struct loop *l);
void loop_fini(struct loop *l);
int loop_add(struct loop *l, struct loop_watch *w, uint32_t events);
int loop_mod(struct loop *l, struct loop_watch *w, uint32_t events);
/* Removes the watch and closes its fd; the caller frees the watch only
 * after the current batch (a post is the place). */
void loop_close(struct loop *l, struct loop_watch *w);
/* Removes the watch without closing its fd, for an fd another part owns. */
void loop_del(struct loop *l, struct loop_watch *w);
int loop_run(struct loop *l);

/* A timer on l, disarmed until loop_timer_at/after/every. 0, or -1 with
 * errno (logged). */
int loop_timer_add(struct loop *l, struct loop_timer *t, const char *name, loop_timer_fn fn,
		   void *ctx);
/* One shot at `at` (now_us() clock; a moment already past fires on the
 * next turn of the loop); 0 disarms. Replaces whatever was armed. */
int loop_timer_at(struct loop_timer *t, uint64_t at);
/* One shot us from now (0 disarms). */
int loop_timer_after(struct loop_timer *t, uint64_t us);
/* Every period_us, the first one period_us from now (0 disarms). */
int loop_timer_every(struct loop_timer *t, uint64_t period_us);
int loop_timer_disarm(struct loop_timer *t);
/* Removes the timer and closes its timerfd; like loop_close, its memory
 * is freed only after the current batch. */
void loop_timer_del(struct loop_timer *t);

/* Adds p: fn(ctx) runs after every batch of events, after the posts added
 * before it. p stays until the loop ends (no removal: posts are wiring). */
void loop_post_add(struct loop *l, struct loop_post *p, loop_post_fn fn, void *ctx);

/* CLOCK_MONOTONIC in microseconds: the clock of every deadline. */
uint64_t now_us(void);

#endif
