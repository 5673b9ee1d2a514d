/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_loop.c - common/loop.c on its own: what runs in what order in a
 * batch (watches, then the posts in the order added), a watch closed in
 * the batch loses its pending event, timers past due fire on the next
 * turn and a disarmed one does not, loop_del leaves the fd open and
 * loop_close closes it.
 */
#include "common/log.h"
#include "common/loop.h"
#include "tests/check.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

/* What ran, in order: one letter each. */
static char trace[64];
static size_t ntrace;

static void note(char c)
{
	if (ntrace < sizeof(trace) - 1)
		trace[ntrace++] = c;
	trace[ntrace] = '\0';
}

static void reset(void)
{
	ntrace = 0;
	trace[0] = '\0';
}

static void drain(int fd)
{
	uint64_t v;

	if (read(fd, &v, sizeof(v)) != sizeof(v))
		note('!');
}

static void on_event(struct loop_watch *w, uint32_t events)
{
	(void)events;
	drain(w->fd);
	note(*(const char *)w->ctx);
}

static void post_note(void *ctx)
{
	note(*(const char *)ctx);
}

static void post_stop(void *ctx)
{
	((struct loop *)ctx)->stop = 1;
}

static int kick(int fd)
{
	uint64_t one = 1;

	return write(fd, &one, sizeof(one)) == sizeof(one) ? 0 : -1;
}

/* Posts run after each batch, in the order added, once per batch. */
static void test_posts(void)
{
	struct loop l;
	struct loop_watch w = { 0 };
	struct loop_post p1, p2, stop;
	static const char cw = 'w', c1 = '1', c2 = '2';

	reset();
	CHECK(loop_init(&l) == 0);
	w.fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	w.fn = on_event;
	w.ctx = (void *)&cw;
	CHECK(w.fd >= 0 && loop_add(&l, &w, EPOLLIN) == 0);
	loop_post_add(&l, &p1, post_note, (void *)&c1);
	loop_post_add(&l, &p2, post_note, (void *)&c2);
	loop_post_add(&l, &stop, post_stop, &l);
	CHECK(kick(w.fd) == 0);
	CHECK(loop_run(&l) == 0);
	CHECK(strcmp(trace, "w12") == 0);
	loop_close(&l, &w);
	loop_fini(&l);
}

/* Two watches ready in one batch, each closing the other when it runs:
 * the one that runs second was closed, so its event is skipped. */
static struct loop *close_loop;
static struct loop_watch *pair[2];

static void on_close_other(struct loop_watch *w, uint32_t events)
{
	(void)events;
	drain(w->fd);
	note(*(const char *)w->ctx);
	loop_close(close_loop, pair[w == pair[0]]);
}

static void test_closed_in_batch(void)
{
	struct loop l;
	struct loop_watch a = { 0 }, b = { 0 };
	struct loop_post stop;
	static const char ca = 'a', cb = 'b';

	reset();
	CHECK(loop_init(&l) == 0);
	close_loop = &l;
	pair[0] = &a;
	pair[1] = &b;
	a.fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	b.fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	a.fn = b.fn = on_close_other;
	a.ctx = (void *)&ca;
	b.ctx = (void *)&cb;
	CHECK(loop_add(&l, &a, EPOLLIN) == 0 && loop_add(&l, &b, EPOLLIN) == 0);
	loop_post_add(&l, &stop, post_stop, &l);
	CHECK(kick(a.fd) == 0 && kick(b.fd) == 0);
	CHECK(loop_run(&l) == 0);
	/* Exactly one ran; the other was closed before its turn. */
	CHECK(strcmp(trace, "a") == 0 || strcmp(trace, "b") == 0);
	CHECK(a.dead != b.dead);
	loop_close(&l, a.dead ? &b : &a);
	loop_fini(&l);
}

static void on_timer(struct loop_timer *t)
{
	note(*(const char *)t->ctx);
}

/* A moment already past fires on the next turn; a disarmed timer never
 * does; a one-shot fires once. */
static void test_timers(void)
{
	struct loop l;
	struct loop_timer past, off;
	struct loop_watch w = { 0 };
	struct loop_post stop;
	static const char cp = 'p', co = 'o', cw = 'w';

	reset();
	CHECK(loop_init(&l) == 0);
	CHECK(loop_timer_add(&l, &past, "past", on_timer, (void *)&cp) == 0);
	CHECK(loop_timer_add(&l, &off, "off", on_timer, (void *)&co) == 0);
	CHECK(loop_timer_at(&past, 1) == 0); /* long past: due at once */
	CHECK(loop_timer_at(&off, 1) == 0);
	CHECK(loop_timer_disarm(&off) == 0);
	loop_post_add(&l, &stop, post_stop, &l);
	CHECK(loop_run(&l) == 0);
	CHECK(strcmp(trace, "p") == 0);
	/* Another batch, from an event: neither timer fires again. */
	w.fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	w.fn = on_event;
	w.ctx = (void *)&cw;
	CHECK(loop_add(&l, &w, EPOLLIN) == 0 && kick(w.fd) == 0);
	l.stop = 0;
	CHECK(loop_run(&l) == 0);
	CHECK(strcmp(trace, "pw") == 0);
	/* Arming with 0 disarms too. */
	CHECK(loop_timer_at(&past, 1) == 0 && loop_timer_at(&past, 0) == 0);
	CHECK(kick(w.fd) == 0);
	l.stop = 0;
	CHECK(loop_run(&l) == 0);
	CHECK(strcmp(trace, "pww") == 0);
	loop_timer_del(&past);
	loop_timer_del(&off);
	loop_close(&l, &w);
	loop_fini(&l);
}

/* loop_del hands the fd back open; loop_close closes it. */
static void test_del_and_close(void)
{
	struct loop l;
	struct loop_watch a = { 0 }, b = { 0 };
	int afd, bfd;

	CHECK(loop_init(&l) == 0);
	a.fd = eventfd(0, EFD_CLOEXEC);
	b.fd = eventfd(0, EFD_CLOEXEC);
	a.fn = b.fn = on_event;
	CHECK(loop_add(&l, &a, EPOLLIN) == 0 && loop_add(&l, &b, EPOLLIN) == 0);
	afd = a.fd;
	loop_del(&l, &a);
	CHECK(a.fd == -1 && a.dead);
	CHECK(fcntl(afd, F_GETFD) >= 0);
	bfd = b.fd;
	loop_close(&l, &b);
	CHECK(b.fd == -1);
	errno = 0;
	CHECK(fcntl(bfd, F_GETFD) == -1 && errno == EBADF);
	close(afd);
	loop_fini(&l);
}

int main(void)
{
	uint64_t t0 = now_us(), t1;

	log_set_level(LOG_LEVEL_ERROR);
	test_posts();
	test_closed_in_batch();
	test_timers();
	test_del_and_close();
	t1 = now_us();
	CHECK(t1 >= t0);
	CHECK_DONE();
}
