/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_workq.c - the worker pool's admission by key (common/workq.h,
 * workq_job_key) with a fake reader that blocks until the test lets it
 * go: one key's stuck job holds one worker and its key, never the other
 * keys' turn; its next job waits in the queue (or is dropped there at its
 * deadline) and runs only once the stuck one returns.
 */
#include "common/workq.h"
#include "tests/check.h"

#include <poll.h>
#include <pthread.h>
#include <string.h>

#define KEY_A 1ull
#define KEY_B 2ull

struct job {
	struct workq_job j; /* first */
	const char *name;
	unsigned long long key;
	int blocks; /* waits for `released` once past workq_job_key */
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int released, inside_blocking;
/* The order jobs got past workq_job_key, and how often one was held. */
static const char *order[16];
static unsigned norder, nheld;

static void run(struct workq_job *wj, void *ctx)
{
	struct job *j = (struct job *)(void *)wj;

	(void)ctx;
	if (workq_job_key(wj, j->key) != 0) {
		pthread_mutex_lock(&mu);
		nheld++;
		pthread_mutex_unlock(&mu);
		return;
	}
	pthread_mutex_lock(&mu);
	if (norder < sizeof(order) / sizeof(order[0]))
		order[norder++] = j->name;
	if (j->blocks) {
		inside_blocking++;
		pthread_cond_broadcast(&cv);
		while (!released)
			pthread_cond_wait(&cv, &mu);
	}
	pthread_mutex_unlock(&mu);
}

static void free_job(struct workq_job *j)
{
	(void)j;
}

/* Takes finished jobs until `want` is among them (1) or 10 s pass (0);
 * every job taken is flagged in done[]. */
static int take_until(struct workq *q, struct job *want, struct job **all, int *done, size_t n)
{
	for (int round = 0; round < 1000; round++) {
		struct pollfd p = { .fd = workq_fd(q), .events = POLLIN };
		struct workq_job *js[8];
		size_t got;

		(void)poll(&p, 1, 10);
		got = workq_take(q, js, 8);
		for (size_t i = 0; i < got; i++)
			for (size_t k = 0; k < n; k++)
				if (js[i] == &all[k]->j)
					done[k] = 1;
		for (size_t k = 0; k < n; k++)
			if (all[k] == want && done[k])
				return 1;
	}
	return 0;
}

/* Waits until jobs have been held more than `before` times and `queued`
 * wait in the queue (1), or 10 s pass (0): no worker is inside the one
 * just held. */
static int wait_requeued(struct workq *q, unsigned before, unsigned queued)
{
	for (int round = 0; round < 1000; round++) {
		struct workq_stats st;
		unsigned held;

		pthread_mutex_lock(&mu);
		held = nheld;
		pthread_mutex_unlock(&mu);
		workq_get_stats(q, &st);
		if (held > before && st.queued == queued)
			return 1;
		(void)poll(NULL, 0, 10);
	}
	return 0;
}

static int is_job(const struct workq_job *j, const void *key)
{
	return (const void *)j == key;
}

static int position(const char *name)
{
	for (unsigned i = 0; i < norder; i++)
		if (strcmp(order[i], name) == 0)
			return (int)i;
	return -1;
}

int main(void)
{
	struct job a1 = { .name = "a1", .key = KEY_A, .blocks = 1 }, a2 = { .name = "a2", .key = KEY_A },
		   a3 = { .name = "a3", .key = KEY_A }, b1 = { .name = "b1", .key = KEY_B },
		   b2 = { .name = "b2", .key = KEY_B }, b3 = { .name = "b3", .key = KEY_B };
	struct job *all[] = { &a1, &a2, &a3, &b1, &b2, &b3 };
	int done[6] = { 0 };
	struct workq_cfg cfg = { "test", 2, 4, 16, run, NULL, free_job, 1 };
	struct workq *q = workq_start(&cfg);
	struct workq_stats st;
	struct workq_job *dropped;
	unsigned held_before;

	CHECK(q != NULL);
	if (!q)
		CHECK_DONE();
	CHECK(workq_submit(q, &a1.j) == 0);
	pthread_mutex_lock(&mu);
	while (!inside_blocking)
		pthread_cond_wait(&cv, &mu);
	pthread_mutex_unlock(&mu);
	/* a1 holds key A and one worker: a2 waits, b1 and b2 take the other. */
	CHECK(workq_submit(q, &a2.j) == 0);
	CHECK(workq_submit(q, &b1.j) == 0);
	CHECK(workq_submit(q, &b2.j) == 0);
	CHECK(take_until(q, &b2, all, done, 6));
	CHECK(done[3] && done[4] && !done[1]);
	CHECK(position("b1") >= 0 && position("b1") < position("b2"));
	CHECK(position("a2") < 0);
	workq_get_stats(q, &st);
	CHECK_EQ_U(st.queued, 1); /* a2, held for its key */

	/* a1's deadline passes: its worker is lost and replaced, its key
	 * still held by it. Key B is served; a2 still waits. */
	CHECK(workq_expire(q, is_job, &a1.j, &dropped) == 1);
	workq_get_stats(q, &st);
	CHECK_EQ_U(st.stuck, 1);
	CHECK_EQ_U(st.workers, 2);
	CHECK(!st.stalled && !workq_stalled(q));
	CHECK(workq_submit(q, &b3.j) == 0);
	CHECK(take_until(q, &b3, all, done, 6));
	CHECK(position("a2") < 0);
	/* A held job's deadline drops it from the queue. */
	pthread_mutex_lock(&mu);
	held_before = nheld;
	pthread_mutex_unlock(&mu);
	CHECK(workq_submit(q, &a3.j) == 0);
	/* A worker takes it first (not yet keyed) and hands it back: a2 and
	 * a3 wait. */
	CHECK(wait_requeued(q, held_before, 2));
	CHECK(workq_expire(q, is_job, &a3.j, &dropped) == 0 && dropped == &a3.j);

	/* a1 returns (late): key A has room, and a2 runs after it. */
	pthread_mutex_lock(&mu);
	released = 1;
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
	CHECK(take_until(q, &a2, all, done, 6));
	CHECK(done[0] && a1.j.late);
	CHECK(position("a2") > position("a1"));
	CHECK(position("a3") < 0);
	CHECK(nheld >= 1);
	workq_get_stats(q, &st);
	CHECK_EQ_U(st.stuck, 0);
	CHECK_EQ_U(workq_stop(q), 0);
	CHECK_DONE();
}
