/* SPDX-License-Identifier: Apache-2.0 */
/*
 * preempt_window.c - windows: keeping this BE process off one GPU around
 * each request of a periodic LC, on the schedule the node agent's WINDOW
 * gives (docs/protocol.md, "Windows"; docs/policy.md, "Windows").
 *
 * Owns: the schedule (period, a predicted LC start, how long before and
 * after it, the lease), the thread that opens and closes each window on
 * the library's CLOCK_MONOTONIC, and ending the schedule when its lease
 * lapses or the connection ends. Does not own: the channel controls and
 * how they combine with a rotation's gate (pa_gate_window in
 * preempt_gate.c), checking the message (pa_window_bad, preempt_msg.c).
 *
 * Why a thread of its own: a window opens a disable and a preempt (about
 * 1.2 ms at the p99) ahead of a request due every few ms, which the
 * library's thread, waiting on its socket in whole milliseconds and busy
 * with commands, cannot time. Why the library ends the schedule itself: a
 * schedule nobody renews would keep taking the BE off for an LC that may
 * have gone, so it never outlives the node agent's renewals by more than
 * its lease (at most GQ_WINDOW_LEASE_MAX_MS).
 */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

#include "preempt.h"
#include "preempt_gate.h"
#include "preempt_msg.h"
#include "preempt_window.h"

/* A window whose start is nearer than this when the thread gets to it is
 * skipped: the BE could not be off by then (disabling alone takes
 * 0.4-0.9 ms), and taking it off mid-request only costs the BE. */
#define PA_WINDOW_LATE_NS 200000ull
/* The counts are logged (GPUQOS_LOG=info) this often while windows run. */
#define PA_WINDOW_LOG_NS (5ull * 1000000000ull)

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cv; /* on CLOCK_MONOTONIC; signalled on every change */
	int cv_ready;
	int started, dead;
	/* The schedule; on 0: none. */
	int on;
	rm_u32 device;
	rm_u64 period_ns, start_ns, before_ns, after_ns, lease_end_ns;
	unsigned gen; /* bumped on every change */
	int refused;  /* the latest WINDOW failed pa_window_bad */
	/* Counts since the library was loaded (logged). */
	unsigned long opened, skipped, held_tsgs;
	rm_u64 off_ns;  /* time in ioctl() taking TSGs off */
	rm_u64 logged_ns;
} pw = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void pw_cv_init(void)
{
	pthread_condattr_t a;

	if (pw.cv_ready)
		return;
	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(&pw.cv, &a);
	pthread_condattr_destroy(&a);
	pw.cv_ready = 1;
}

/* Wait (pw.lock held) until t on CLOCK_MONOTONIC or a change. */
static void pw_wait_until(rm_u64 t)
{
	struct timespec ts = { .tv_sec = (time_t)(t / 1000000000u),
			       .tv_nsec = (long)(t % 1000000000u) };

	(void)pthread_cond_timedwait(&pw.cv, &pw.lock, &ts);
}

/* Open one window (pw.lock not held): every TSG of the GPU off. */
static void pw_open(rm_u32 dev)
{
	rm_u64 elapsed = 0;
	unsigned n = pa_gate_window(dev, 1, &elapsed);

	pthread_mutex_lock(&pw.lock);
	pw.opened++;
	pw.held_tsgs += n;
	pw.off_ns += elapsed;
	pthread_mutex_unlock(&pw.lock);
}

/* Close any open window (pw.lock not held): every TSG it holds back on. */
static void pw_close(void)
{
	rm_u64 elapsed = 0;

	if (pa_gate_windowed() > 0)
		(void)pa_gate_window(0, 0, &elapsed);
}

static void pw_log_counts(const char *why)
{
	pa_info("windows %s: %lu opened (%lu TSG holds, %llu us in controls), %lu skipped as late",
		why, pw.opened, pw.held_tsgs, (unsigned long long)(pw.off_ns / 1000u), pw.skipped);
}

/* The schedule has ended (pw.lock held): say so once, with the counts. */
static void pw_end(const char *why)
{
	if (!pw.on)
		return;
	pw.on = 0;
	pw.gen++;
	pw_log_counts(why);
}

static void *window_thread_main(void *arg)
{
	(void)arg;
	/* Timer slack: the default 50 us would move every window. */
	(void)prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
	pthread_mutex_lock(&pw.lock);
	for (;;) {
		rm_u64 now = pa_now_ns(), start, open, close;
		rm_u32 dev;

		if (pw.on && now >= pw.lease_end_ns)
			pw_end("ended (lease lapsed)");
		if (!pw.on) {
			pthread_mutex_unlock(&pw.lock);
			pw_close();
			pthread_mutex_lock(&pw.lock);
			if (!pw.on)
				pthread_cond_wait(&pw.cv, &pw.lock);
			continue;
		}
		if (now - pw.logged_ns >= PA_WINDOW_LOG_NS) {
			pw.logged_ns = now;
			pw_log_counts("running");
		}
		start = pa_window_next_start(now, pw.start_ns, pw.period_ns);
		open = start - pw.before_ns;
		close = start + pw.after_ns;
		dev = pw.device;
		if (now < open) {
			pw_wait_until(open < pw.lease_end_ns ? open : pw.lease_end_ns);
			continue; /* a change, or the time: look again */
		}
		if (start - now < PA_WINDOW_LATE_NS) {
			pw.skipped++;
			pw_wait_until(start);
			continue;
		}
		pthread_mutex_unlock(&pw.lock);
		pw_open(dev);
		pthread_mutex_lock(&pw.lock);
		/* The window lasts to its end even when a renewal moves the
		 * schedule meanwhile; it ends early only with the schedule. */
		while (pw.on && pw.device == dev && (now = pa_now_ns()) < close &&
		       now < pw.lease_end_ns)
			pw_wait_until(close < pw.lease_end_ns ? close : pw.lease_end_ns);
		pthread_mutex_unlock(&pw.lock);
		pw_close();
		pthread_mutex_lock(&pw.lock);
	}
	return NULL;
}

/* Start the thread on the first schedule (pw.lock held). 0, or -1 when
 * it cannot run: no windows in this process. */
static int pw_spawn(void)
{
	if (pw.started)
		return pw.dead ? -1 : 0;
	pw.started = 1;
	if (pa_thread_spawn(window_thread_main, "gpuqos-window", 0) != 0) {
		pa_info("windows: pthread_create: %m; no windows in this process");
		pw.dead = 1;
		return -1;
	}
	return 0;
}

void pa_window_set(const struct gq_window *w, rm_u64 received_ns)
{
	const char *why = NULL;

	pthread_mutex_lock(&pw.lock);
	pw_cv_init();
	if (w->flags & GQ_WINDOW_F_ON)
		why = pa_window_bad(w, received_ns);
	pw.refused = why != NULL;
	if (!(w->flags & GQ_WINDOW_F_ON) || why != NULL) {
		if (why != NULL)
			pa_info("ignored a WINDOW: %s; no windows", why);
		pw_end(why != NULL ? "ended (a bad WINDOW)" : "ended (the node agent's word)");
		pthread_cond_signal(&pw.cv);
		pthread_mutex_unlock(&pw.lock);
		return;
	}
	if (pw_spawn() != 0) {
		pthread_mutex_unlock(&pw.lock);
		return;
	}
	/* Said when it starts or changes shape; not for the few µs a
	 * period estimate moves by between renewals. */
	if (!pw.on || pw.device != w->device_instance ||
	    (pw.period_ns > w->period_ns ? pw.period_ns - w->period_ns
					 : w->period_ns - pw.period_ns) * 100u > pw.period_ns ||
	    pw.before_ns != (rm_u64)w->before_us * 1000u ||
	    pw.after_ns != (rm_u64)w->after_us * 1000u)
		pa_info("windows on GPU %u: every %llu us, from %u us before each request to %u us "
			"after it",
			w->device_instance, (unsigned long long)(w->period_ns / 1000u), w->before_us,
			w->after_us);
	if (!pw.on)
		pw.logged_ns = received_ns; /* the counts first PA_WINDOW_LOG_NS in */
	pw.on = 1;
	pw.device = w->device_instance;
	pw.period_ns = w->period_ns;
	pw.start_ns = w->start_ns;
	pw.before_ns = (rm_u64)w->before_us * 1000u;
	pw.after_ns = (rm_u64)w->after_us * 1000u;
	pw.lease_end_ns = received_ns + (rm_u64)w->lease_ms * 1000000u;
	pw.gen++;
	pthread_cond_signal(&pw.cv);
	pthread_mutex_unlock(&pw.lock);
}

void pa_window_state(struct gq_window_state *m, rm_u32 seq, rm_u64 now_ns)
{
	memset(m, 0, sizeof(*m));
	gq_hdr_init(&m->hdr, GQ_WINDOW_STATE, seq);
	pthread_mutex_lock(&pw.lock);
	m->flags = (pw.on ? GQ_WINDOW_STATE_F_ON : 0) | (pw.refused ? GQ_WINDOW_STATE_F_REFUSED : 0);
	m->opened = pw.opened;
	m->skipped = pw.skipped;
	pthread_mutex_unlock(&pw.lock);
	m->at_ns = now_ns;
}

void pa_window_stop(const char *why)
{
	pthread_mutex_lock(&pw.lock);
	pw_cv_init();
	pw_end(why);
	pthread_cond_signal(&pw.cv);
	pthread_mutex_unlock(&pw.lock);
}

void pa_window_child_reset(void)
{
	/* The child has no window thread, and its tables start empty. */
	pthread_mutex_init(&pw.lock, NULL);
	pw.cv_ready = 0;
	pw.started = 0;
	pw.dead = 0;
	pw.on = 0;
	pw.refused = 0;
	pw.gen = 0;
	pw.opened = pw.skipped = pw.held_tsgs = 0;
	pw.off_ns = 0;
	pw.logged_ns = 0;
}
