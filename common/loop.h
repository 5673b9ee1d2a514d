/* SPDX-License-Identifier: Apache-2.0 */
/*
 * loop.h - the one epoll event loop of the node agent. Every source of work
 * (signals, timers, sockets) is a watch: a file descriptor and a handler.
 * Does not own what the handlers do.
 */
#ifndef GPUQOS_AGENT_LOOP_H
#define GPUQOS_AGENT_LOOP_H

#include <stdint.h>

struct loop_watch;
typedef void (*loop_fn)(struct loop_watch *w, uint32_t events);

struct loop_watch {
	int fd;
	loop_fn fn;
	void *ctx;
	int dead; /* closed during this batch: its pending events are skipped */
};

struct loop {
	int epfd;
	int stop;
	void (*after_batch)(void *arg); /* runs once per epoll_wait batch */
	void *after_arg;
};

int loop_init(struct loop *l);
void loop_fini(struct loop *l);
int loop_add(struct loop *l, struct loop_watch *w, uint32_t events);
int loop_mod(struct loop *l, struct loop_watch *w, uint32_t events);
/* Removes the watch and closes its fd; the caller frees the watch only
 * after the current batch (after_batch is the place). */
void loop_close(struct loop *l, struct loop_watch *w);
/* Removes the watch without closing its fd, for an fd another part owns. */
void loop_del(struct loop *l, struct loop_watch *w);
int loop_run(struct loop *l);

/* CLOCK_MONOTONIC in microseconds: the clock of every deadline. */
uint64_t now_us(void);

#endif
