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
/* The budget on the time the channels are really off (docs/protocol.md,
 * "Windows"): over the last PA_WINDOW_BUDGET_PERIODS periods, at most
 * that many windows and one more, counted from the off intervals kept
 * (PA_WINDOW_OFF_KEPT of them). Whatever the node agent sends (a PHASE
 * that lies moved the schedule at every report, and each new schedule
 * opened a window at once), the BE is off at most its schedule's share
 * and a thirty-second of it. */
#define PA_WINDOW_BUDGET_PERIODS 32u
#define PA_WINDOW_OFF_KEPT 128u

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
	/* The off intervals (a disable that returned to the enable that
	 * ended it), the last PA_WINDOW_OFF_KEPT in a ring, the one open now
	 * (open_ns 0: none), and when the last ended. */
	rm_u64 off_start[PA_WINDOW_OFF_KEPT], off_end[PA_WINDOW_OFF_KEPT];
	unsigned off_next, off_n;
	rm_u64 open_ns, last_end_ns;
	unsigned long budget_skipped; /* of skipped: over the budget */
} win = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void win_cv_init(void)
{
	pthread_condattr_t a;

	if (win.cv_ready)
		return;
	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(&win.cv, &a);
	pthread_condattr_destroy(&a);
	win.cv_ready = 1;
}

/* Wait (win.lock held) until t on CLOCK_MONOTONIC or a change. */
static void win_wait_until(rm_u64 t)
{
	struct timespec ts = { .tv_sec = (time_t)(t / 1000000000u),
			       .tv_nsec = (long)(t % 1000000000u) };

	(void)pthread_cond_timedwait(&win.cv, &win.lock, &ts);
}

/* The off interval open since win.open_ns ends at end (win.lock held). */
static void win_off_end(rm_u64 end)
{
	if (!win.open_ns)
		return;
	win.off_start[win.off_next] = win.open_ns;
	win.off_end[win.off_next] = end > win.open_ns ? end : win.open_ns;
	win.off_next = (win.off_next + 1u) % PA_WINDOW_OFF_KEPT;
	if (win.off_n < PA_WINDOW_OFF_KEPT)
		win.off_n++;
	win.last_end_ns = end;
	win.open_ns = 0;
}

/* A window from now to close fits the budget (win.lock held): the time
 * off over the last PA_WINDOW_BUDGET_PERIODS periods up to close, this
 * window included, is at most that many windows and one more, and it
 * opens no sooner than half the schedule's gap after the last ended. */
static int win_budget_allows(rm_u64 now, rm_u64 close)
{
	rm_u64 w = win.before_ns + win.after_ns, h = win.period_ns * PA_WINDOW_BUDGET_PERIODS;
	rm_u64 lo = close > h ? close - h : 0, off = close - now;
	unsigned oldest = (win.off_next + PA_WINDOW_OFF_KEPT - win.off_n) % PA_WINDOW_OFF_KEPT;

	if (win.last_end_ns && w < win.period_ns && now < win.last_end_ns + (win.period_ns - w) / 2)
		return 0;
	/* The intervals kept no longer reach back to lo: one dropped may lie
	 * within the stretch, so nothing opens until they do. */
	if (win.off_n == PA_WINDOW_OFF_KEPT && win.off_start[oldest] > lo)
		return 0;
	for (unsigned i = 0; i < win.off_n; i++) {
		rm_u64 s = win.off_start[i] > lo ? win.off_start[i] : lo;

		if (win.off_end[i] > s)
			off += win.off_end[i] - s;
	}
	return off <= (rm_u64)(PA_WINDOW_BUDGET_PERIODS + 1u) * w;
}

/* Open one window (win.lock not held): every TSG of the GPU off; the
 * time off counts from when the disable returned. */
static void win_open(rm_u32 dev)
{
	rm_u64 elapsed = 0;
	unsigned n = pa_gate_window(dev, 1, &elapsed);
	rm_u64 at = pa_now_ns();

	pthread_mutex_lock(&win.lock);
	win.opened++;
	win.held_tsgs += n;
	win.off_ns += elapsed;
	if (n && !win.open_ns)
		win.open_ns = at;
	pthread_mutex_unlock(&win.lock);
}

/* Close any open window (win.lock not held): every TSG it holds back on;
 * the time off ends as the enable is issued. */
static void win_close(void)
{
	rm_u64 elapsed = 0;

	if (pa_gate_windowed() > 0) {
		rm_u64 at = pa_now_ns();

		pthread_mutex_lock(&win.lock);
		win_off_end(at);
		pthread_mutex_unlock(&win.lock);
		(void)pa_gate_window(0, 0, &elapsed);
	}
}

static void win_log_counts(const char *why)
{
	pa_info("windows %s: %lu opened (%lu TSG holds, %llu us in controls), %lu skipped (%lu of "
		"them over the budget on time off)",
		why, win.opened, win.held_tsgs, (unsigned long long)(win.off_ns / 1000u), win.skipped,
		win.budget_skipped);
}

/* The schedule has ended (win.lock held): say so once, with the counts. */
static void win_end(const char *why)
{
	if (!win.on)
		return;
	win.on = 0;
	win.gen++;
	win_log_counts(why);
}

static void *window_thread_main(void *arg)
{
	(void)arg;
	/* Timer slack: the default 50 us would move every window. */
	(void)prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
	pthread_mutex_lock(&win.lock);
	for (;;) {
		rm_u64 now = pa_now_ns(), start, open, close;
		rm_u32 dev;

		if (win.on && now >= win.lease_end_ns)
			win_end("ended (lease lapsed)");
		if (!win.on) {
			pthread_mutex_unlock(&win.lock);
			win_close();
			pthread_mutex_lock(&win.lock);
			if (!win.on)
				pthread_cond_wait(&win.cv, &win.lock);
			continue;
		}
		if (now - win.logged_ns >= PA_WINDOW_LOG_NS) {
			win.logged_ns = now;
			win_log_counts("running");
		}
		start = pa_window_next_start(now, win.start_ns, win.period_ns);
		open = start - win.before_ns;
		close = start + win.after_ns;
		dev = win.device;
		if (now < open) {
			win_wait_until(open < win.lease_end_ns ? open : win.lease_end_ns);
			continue; /* a change, or the time: look again */
		}
		if (start - now < PA_WINDOW_LATE_NS) {
			win.skipped++;
			win_wait_until(start);
			continue;
		}
		if (!win_budget_allows(now, close)) {
			win.skipped++;
			win.budget_skipped++;
			win_wait_until(start);
			continue;
		}
		pthread_mutex_unlock(&win.lock);
		win_open(dev);
		pthread_mutex_lock(&win.lock);
		/* The window lasts to its end even when a renewal moves the
		 * schedule meanwhile; it ends early only with the schedule. */
		while (win.on && win.device == dev && (now = pa_now_ns()) < close &&
		       now < win.lease_end_ns)
			win_wait_until(close < win.lease_end_ns ? close : win.lease_end_ns);
		pthread_mutex_unlock(&win.lock);
		win_close();
		pthread_mutex_lock(&win.lock);
	}
	return NULL;
}

/* Start the thread on the first schedule (win.lock held). 0, or -1 when
 * it cannot run: no windows in this process. */
static int win_spawn(void)
{
	if (win.started)
		return win.dead ? -1 : 0;
	win.started = 1;
	if (pa_thread_spawn(window_thread_main, "gpuqos-window", 0) != 0) {
		pa_info("windows: pthread_create: %m; no windows in this process");
		win.dead = 1;
		return -1;
	}
	return 0;
}

void pa_window_set(const struct gq_window *w, rm_u64 received_ns)
{
	const char *why = NULL;

	pthread_mutex_lock(&win.lock);
	win_cv_init();
	if (w->flags & GQ_WINDOW_F_ON)
		why = pa_window_bad(w, received_ns);
	win.refused = why != NULL;
	if (!(w->flags & GQ_WINDOW_F_ON) || why != NULL) {
		if (why != NULL)
			pa_info("ignored a WINDOW: %s; no windows", why);
		win_end(why != NULL ? "ended (a bad WINDOW)" : "ended (the node agent's word)");
		pthread_cond_signal(&win.cv);
		pthread_mutex_unlock(&win.lock);
		return;
	}
	if (win_spawn() != 0) {
		pthread_mutex_unlock(&win.lock);
		return;
	}
	/* Said when it starts or changes shape; not for the few µs a
	 * period estimate moves by between renewals. */
	if (!win.on || win.device != w->device_instance ||
	    (win.period_ns > w->period_ns ? win.period_ns - w->period_ns
					 : w->period_ns - win.period_ns) * 100u > win.period_ns ||
	    win.before_ns != (rm_u64)w->before_us * 1000u ||
	    win.after_ns != (rm_u64)w->after_us * 1000u)
		pa_info("windows on GPU %u: every %llu us, from %u us before each request to %u us "
			"after it",
			w->device_instance, (unsigned long long)(w->period_ns / 1000u), w->before_us,
			w->after_us);
	if (!win.on)
		win.logged_ns = received_ns; /* the counts first PA_WINDOW_LOG_NS in */
	win.on = 1;
	win.device = w->device_instance;
	win.period_ns = w->period_ns;
	win.start_ns = w->start_ns;
	win.before_ns = (rm_u64)w->before_us * 1000u;
	win.after_ns = (rm_u64)w->after_us * 1000u;
	win.lease_end_ns = received_ns + (rm_u64)w->lease_ms * 1000000u;
	win.gen++;
	pthread_cond_signal(&win.cv);
	pthread_mutex_unlock(&win.lock);
}

void pa_window_state(struct gq_window_state *m, rm_u32 seq, rm_u64 now_ns)
{
	memset(m, 0, sizeof(*m));
	gq_hdr_init(&m->hdr, GQ_WINDOW_STATE, seq);
	pthread_mutex_lock(&win.lock);
	m->flags = (win.on ? GQ_WINDOW_STATE_F_ON : 0) | (win.refused ? GQ_WINDOW_STATE_F_REFUSED : 0);
	m->opened = win.opened;
	m->skipped = win.skipped;
	pthread_mutex_unlock(&win.lock);
	m->at_ns = now_ns;
}

void pa_window_stop(const char *why)
{
	pthread_mutex_lock(&win.lock);
	win_cv_init();
	win_end(why);
	pthread_cond_signal(&win.cv);
	pthread_mutex_unlock(&win.lock);
}

void pa_window_child_reset(void)
{
	/* The child has no window thread, and its tables start empty. */
	pthread_mutex_init(&win.lock, NULL);
	win.cv_ready = 0;
	win.started = 0;
	win.dead = 0;
	win.on = 0;
	win.refused = 0;
	win.gen = 0;
	win.opened = win.skipped = win.held_tsgs = 0;
	win.off_ns = 0;
	win.logged_ns = 0;
	win.off_next = win.off_n = 0;
	win.open_ns = win.last_end_ns = 0;
	win.budget_skipped = 0;
}
