/* SPDX-License-Identifier: Apache-2.0 */
/*
 * preempt_gate.c - gating and rotation leases: making one TSG of this
 * process unschedulable on the node agent's GATE, letting it run again on
 * UNGATE, and making sure both end when the node agent stops renewing
 * them.
 *
 * Owns: issuing DISABLE_CHANNELS (disable or enable) and the PREEMPT that
 * follows a disable, for a gate and for a window (preempt_window.c says
 * when one opens and closes; a TSG is off while either holds it); the
 * rotation lease of every TSG; when a lease lapses
 * or the connection ends, enabling the TSG and putting back the timeslice
 * the application chose; after a longer outage of the node agent, putting
 * back every TSG's timeslice. Does not own: the tables (preempt_track.c),
 * the connection and the RESULT message (preempt_conn.c), the RM control
 * call (preempt_core.c), the timeslice record (preempt_timeslice.c).
 *
 * Why the library ends leases itself: a disabled channel is not scheduled
 * at all, so the application stalls on its next wait until it is enabled
 * again; and a BE left at a rotation's short timeslice beside other BEs
 * that are no longer gated loses nearly all its time (three BEs at 50 us,
 * all schedulable: 4 kernels/s each against 184 alone, docs/perf-log). So
 * a rotation never outlives the node agent's renewals by more than one
 * lease. Runs on the library's own thread, and the window thread
 * (pa_gate_window); pa_chan_lock keeps their controls of one TSG in order.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "preempt.h"
#include "preempt_gate.h"
#include "preempt_timeslice.h"

/* An enable that failed for a reason other than the TSG being gone is
 * retried this often until it succeeds. */
#define PA_GATE_RETRY_NS (20ull * 1000000ull)
/* How long the PREEMPT after a disable may wait for the TSG to leave the
 * engine (the measured preempt takes 0.26-0.4 ms). */
#define PA_GATE_PREEMPT_TIMEOUT_US 100000u
/* Without the node agent for this long, every TSG gets the timeslice the
 * application chose back (GPUQOS_RESTORE_GRACE_MS). Long enough for the
 * agent to restart (its preempt agents reconnect within about 2 s). */
#define PA_RESTORE_GRACE_MS_DEFAULT 10000u
#define PA_RESTORE_GRACE_MS_MAX 3600000u

/* Held across the disable or enable of a TSG and the record of it, by
 * the library's thread and the window thread: a gate and a window never
 * interleave their controls of one TSG. Taken before pa.lock. */
static pthread_mutex_t pa_chan_lock = PTHREAD_MUTEX_INITIALIZER;

static unsigned long pa_gate_lapses; /* leases that ended without renewal */
/* This connection's lease page (docs/protocol.md, "Lease page"), or
 * NULL; set and read on the library's own thread only. */
static const struct gq_lease_word *pa_lease_word;
static rm_u64 pa_down_since_ns;       /* the connection ended then; 0: up */
static int pa_restored;               /* this outage's restore is done */

/* What acting on one TSG needs, copied out under the lock. */
struct pa_gate_job {
	int fd;
	rm_handle h_client, h_tsg, h_subdevice;
	int gated, leased, gateable;
	int windowed; /* a window holds its channels disabled */
	rm_u32 timeslice_us, app_timeslice_us;
	struct rm_disable_channels params;
};

/* The TSG is gone from RM (client, object or its channels freed): there
 * is nothing left to enable. */
static int pa_gate_gone(rm_u32 status)
{
	return status == RM_ERR_INVALID_CLIENT || status == RM_ERR_INVALID_OBJECT_HANDLE ||
	       status == RM_ERR_INVALID_OBJECT_PARENT || status == RM_ERR_OBJECT_NOT_FOUND;
}

/* Copy what acting on (h_client, h_tsg) needs. Returns 0 or
 * GQ_ERR_UNKNOWN_TSG. */
static rm_u32 pa_gate_prepare(rm_handle h_client, rm_handle h_tsg, struct pa_gate_job *j)
{
	struct pa_tsg *g;

	pa_lock();
	g = pa_track_tsg_find(&pa.track, h_client, h_tsg);
	if (g == NULL) {
		pa_unlock();
		return GQ_ERR_UNKNOWN_TSG;
	}
	j->gateable = pa_gate_params(g, 1, &j->params) == 0;
	j->fd = g->fd;
	j->h_client = h_client;
	j->h_tsg = h_tsg;
	j->h_subdevice = g->h_subdevice;
	j->gated = g->gated;
	j->leased = g->leased;
	j->windowed = g->windowed;
	j->timeslice_us = g->timeslice_us;
	j->app_timeslice_us = g->app_timeslice_us;
	pa_unlock();
	return 0;
}

/* Record a TSG's new gate state and report it when it changed. */
static void pa_gate_note(rm_handle h_client, rm_handle h_tsg, int gated, int leased,
			 rm_u64 lease_end_ns)
{
	struct pa_tsg *g;
	int wake = 0;

	pa_lock();
	g = pa_track_tsg_find(&pa.track, h_client, h_tsg);
	if (g != NULL) {
		int changed = g->gated != gated || g->leased != leased;

		g->gated = gated;
		g->leased = leased;
		g->lease_end_ns = lease_end_ns;
		if (changed)
			pa_emit(&wake, &(struct pa_event){ .type = PA_EV_TSG, .tsg = *g });
	}
	pa_unlock();
	pa_wake(wake);
}

/* Enable the job's TSG (under pa_chan_lock). On failure it stays gated
 * with a short lease, so the lapse path tries again. Returns 0 once
 * enabled (or gone). A TSG a window holds only stops being gated: the
 * window's end enables it. */
static rm_u32 pa_gate_enable(struct pa_gate_job *j, int leased, rm_u64 lease_end_ns,
			     rm_u32 *status, rm_u64 *elapsed_ns)
{
	rm_u32 err;

	if (j->windowed) {
		pa_gate_note(j->h_client, j->h_tsg, 0, leased, lease_end_ns);
		return 0;
	}
	j->params.bDisable = 0;
	err = pa_rm_control(j->fd, j->h_client, j->h_subdevice, RM_CTRL_FIFO_DISABLE_CHANNELS,
			    &j->params, sizeof(j->params), status, elapsed_ns);
	if (err == 0 && (*status == RM_OK || pa_gate_gone(*status))) {
		pa_gate_note(j->h_client, j->h_tsg, 0, leased, lease_end_ns);
		return 0;
	}
	pa_info("enabling TSG 0x%x of client 0x%x failed (err %u, %s); retrying", j->h_tsg,
		j->h_client, err, rm_status_name(*status));
	pa_gate_note(j->h_client, j->h_tsg, 1, 1, pa_now_ns() + PA_GATE_RETRY_NS);
	return err != 0 ? err : EIO;
}

/* Put back the timeslice the application chose (RM's creation value, 1024,
 * when it never chose one), and report it. */
static void pa_restore_timeslice(const struct pa_gate_job *j)
{
	rm_u32 want = j->app_timeslice_us != GQ_UNKNOWN ? j->app_timeslice_us
							: RM_DEFAULT_TIMESLICE_COPY_US;
	struct rm_tsg_timeslice ts = { .timesliceUs = want };
	rm_u32 err, status = 0;
	rm_u64 elapsed = 0;
	unsigned seq;
	int locked;

	if (j->timeslice_us == GQ_UNKNOWN || j->timeslice_us == want)
		return;
	locked = pa_ts_lock();
	seq = pa_ts_seq(j->h_client, j->h_tsg);
	err = pa_rm_control(j->fd, j->h_client, j->h_tsg, RM_CTRL_TSG_SET_TIMESLICE, &ts,
			    sizeof(ts), &status, &elapsed);
	pa_info("TSG 0x%x of client 0x%x back to %u us (was %u): err %u, %s", j->h_tsg, j->h_client,
		want, j->timeslice_us, err, rm_status_name(status));
	if (err == 0 && status == RM_OK)
		pa_ts_accepted(j->fd, j->h_client, j->h_tsg, seq, want, 1);
	pa_ts_unlock(locked);
}

static rm_u32 pa_gate_on(const struct gq_command *c, rm_u32 *status, rm_u64 *elapsed_ns)
{
	rm_u64 lease_end = pa_now_ns() + c->arg * 1000000ull;
	struct rm_tsg_preempt pr = { .bWait = 1, .bManualTimeout = 1,
				     .timeoutUs = PA_GATE_PREEMPT_TIMEOUT_US };
	struct pa_gate_job j;
	rm_u32 err, pst = 0;

	err = pa_gate_prepare(c->h_client, c->h_tsg, &j);
	if (err != 0)
		return err;
	if (!j.gateable)
		return GQ_ERR_NOT_GATEABLE;
	if (j.gated || j.windowed) {
		/* A renewal, or a window already took it off: the channels are
		 * disabled. */
		pa_gate_note(c->h_client, c->h_tsg, 1, 1, lease_end);
		return 0;
	}
	err = pa_rm_control(j.fd, j.h_client, j.h_subdevice, RM_CTRL_FIFO_DISABLE_CHANNELS,
			    &j.params, sizeof(j.params), status, elapsed_ns);
	if (err != 0 || *status != RM_OK)
		return err;
	pa_gate_note(c->h_client, c->h_tsg, 1, 1, lease_end);
	/* Disabling does not take a TSG that is running off the engine. */
	if (pa_rm_control(j.fd, j.h_client, j.h_tsg, RM_CTRL_TSG_PREEMPT, &pr, sizeof(pr), &pst,
			  elapsed_ns) != 0 ||
	    pst != RM_OK)
		pa_debug("preempt after gating TSG 0x%x: %s", j.h_tsg, rm_status_name(pst));
	return 0;
}

/* Its turn (a lease) or out of the rotation (arg 0). */
static rm_u32 pa_gate_off(const struct gq_command *c, rm_u32 *status, rm_u64 *elapsed_ns)
{
	int leased = c->arg > 0;
	rm_u64 lease_end = leased ? pa_now_ns() + c->arg * 1000000ull : 0;
	struct pa_gate_job j;
	rm_u32 err = pa_gate_prepare(c->h_client, c->h_tsg, &j);

	if (err != 0)
		return err;
	if (j.gated)
		return pa_gate_enable(&j, leased, lease_end, status, elapsed_ns);
	pa_gate_note(c->h_client, c->h_tsg, 0, leased, lease_end);
	return 0;
}

rm_u32 pa_gate_command(const struct gq_command *c, rm_u32 *status, rm_u64 *elapsed_ns)
{
	rm_u32 err;

	*status = 0;
	*elapsed_ns = 0;
	pthread_mutex_lock(&pa_chan_lock);
	if (c->op == GQ_OP_GATE)
		err = pa_gate_on(c, status, elapsed_ns);
	else
		err = pa_gate_off(c, status, elapsed_ns);
	pthread_mutex_unlock(&pa_chan_lock);
	return err;
}

/* The earliest lease end among leased TSGs, 0 if none is leased. */
static rm_u64 pa_gate_next(void)
{
	rm_u64 next = 0;

	pa_lock();
	for (unsigned i = 0; i < pa.track.tsg_hi; i++) {
		const struct pa_tsg *g = &pa.track.tsgs[i];

		if (g->used && g->leased && (next == 0 || g->lease_end_ns < next))
			next = g->lease_end_ns;
	}
	pa_unlock();
	return next;
}

/* Which TSGs a pass over the table acts on. */
struct pa_due {
	rm_u64 until; /* a lapse pass: leases ending by then ... */
	int all;      /* ... or, with all, every TSG */
	int window;   /* a window pass ... */
	int off;      /* ... taking TSGs off (else putting back on) */
	rm_u32 dev;   /* ... of this GPU */
};

static int pa_is_due(const struct pa_tsg *g, const struct pa_due *d)
{
	struct rm_disable_channels params;

	if (!g->used)
		return 0;
	if (!d->window)
		return d->all || (g->leased && g->lease_end_ns <= d->until);
	if (!d->off)
		return g->windowed;
	return !g->gated && !g->windowed && g->device_instance == d->dev &&
	       rm_engine_is_gr(g->engine_type) && pa_gate_params(g, 1, &params) == 0;
}

/* Slot i's handles, and whether the pass d acts on it. Returns -1 past
 * the end of the table. */
static int pa_gate_due(unsigned i, const struct pa_due *d, rm_handle *h_client, rm_handle *h_tsg)
{
	const struct pa_tsg *g;
	int due;

	pa_lock();
	if (i >= pa.track.tsg_hi) {
		pa_unlock();
		return -1;
	}
	g = &pa.track.tsgs[i];
	due = pa_is_due(g, d);
	*h_client = g->h_client;
	*h_tsg = g->h;
	pa_unlock();
	return due;
}

/* End the rotation of every TSG whose lease ends by `until` (with all,
 * every TSG's): enable it, put its timeslice back. An enable that fails is
 * retried PA_GATE_RETRY_NS later. */
static void pa_gate_sweep(rm_u64 until, int all, const char *why)
{
	const struct pa_due d = { .until = until, .all = all };
	rm_handle h_client, h_tsg;
	int due;

	for (unsigned i = 0; (due = pa_gate_due(i, &d, &h_client, &h_tsg)) >= 0; i++) {
		struct pa_gate_job j;
		rm_u64 elapsed = 0;
		rm_u32 status = 0;

		if (!due)
			continue;
		pthread_mutex_lock(&pa_chan_lock);
		if (pa_gate_prepare(h_client, h_tsg, &j) != 0) {
			pthread_mutex_unlock(&pa_chan_lock);
			continue;
		}
		if (j.leased) {
			pa_gate_lapses++;
			pa_info("TSG 0x%x of client 0x%x: %s; ending its rotation (%lu so far)", h_tsg,
				h_client, why, pa_gate_lapses);
		}
		if (j.gated && pa_gate_enable(&j, 0, 0, &status, &elapsed) != 0) {
			pthread_mutex_unlock(&pa_chan_lock);
			continue;
		}
		if (!j.gated)
			pa_gate_note(h_client, h_tsg, 0, 0, 0);
		pthread_mutex_unlock(&pa_chan_lock);
		if (j.leased || all)
			pa_restore_timeslice(&j);
	}
}

static void pa_window_note(rm_handle h_client, rm_handle h_tsg, int windowed)
{
	struct pa_tsg *g;

	pa_lock();
	g = pa_track_tsg_find(&pa.track, h_client, h_tsg);
	if (g != NULL)
		g->windowed = windowed;
	pa_unlock();
}

/* Take one TSG off for a window (under pa_chan_lock): disable, then
 * preempt it off the engine. Returns 1 if it was taken off. */
static int pa_window_off(struct pa_gate_job *j, rm_u64 *elapsed_ns)
{
	struct rm_tsg_preempt pr = { .bWait = 1, .bManualTimeout = 1,
				     .timeoutUs = PA_GATE_PREEMPT_TIMEOUT_US };
	rm_u32 status = 0, pst = 0;

	if (j->gated || j->windowed || !j->gateable)
		return 0;
	if (pa_rm_control(j->fd, j->h_client, j->h_subdevice, RM_CTRL_FIFO_DISABLE_CHANNELS,
			  &j->params, sizeof(j->params), &status, elapsed_ns) != 0 ||
	    status != RM_OK) {
		pa_debug("window: disabling TSG 0x%x failed: %s", j->h_tsg, rm_status_name(status));
		return 0;
	}
	pa_window_note(j->h_client, j->h_tsg, 1);
	if (pa_rm_control(j->fd, j->h_client, j->h_tsg, RM_CTRL_TSG_PREEMPT, &pr, sizeof(pr), &pst,
			  elapsed_ns) != 0 ||
	    pst != RM_OK)
		pa_debug("window: preempt of TSG 0x%x: %s", j->h_tsg, rm_status_name(pst));
	return 1;
}

/* Put one TSG a window holds back on (under pa_chan_lock): enabled unless
 * a gate holds it now. An enable that fails leaves it held, for the next
 * close to try again. Returns 1 if it is no longer held. */
static int pa_window_on(struct pa_gate_job *j, rm_u64 *elapsed_ns)
{
	rm_u32 status = 0;

	if (!j->windowed)
		return 0;
	if (!j->gated) {
		j->params.bDisable = 0;
		if (pa_rm_control(j->fd, j->h_client, j->h_subdevice,
				  RM_CTRL_FIFO_DISABLE_CHANNELS, &j->params, sizeof(j->params),
				  &status, elapsed_ns) != 0 ||
		    (status != RM_OK && !pa_gate_gone(status))) {
			pa_info("window: enabling TSG 0x%x of client 0x%x failed (%s); retrying",
				j->h_tsg, j->h_client, rm_status_name(status));
			return 0;
		}
	}
	pa_window_note(j->h_client, j->h_tsg, 0);
	return 1;
}

unsigned pa_gate_window(rm_u32 dev, int off, rm_u64 *elapsed_ns)
{
	const struct pa_due d = { .window = 1, .off = off, .dev = dev };
	rm_handle h_client, h_tsg;
	unsigned n = 0;
	int due;

	for (unsigned i = 0; (due = pa_gate_due(i, &d, &h_client, &h_tsg)) >= 0; i++) {
		struct pa_gate_job j;

		if (!due)
			continue;
		pthread_mutex_lock(&pa_chan_lock);
		if (pa_gate_prepare(h_client, h_tsg, &j) == 0)
			n += (unsigned)(off ? pa_window_off(&j, elapsed_ns)
					    : pa_window_on(&j, elapsed_ns));
		pthread_mutex_unlock(&pa_chan_lock);
	}
	return n;
}

unsigned pa_gate_windowed(void)
{
	unsigned n = 0;

	pa_lock();
	for (unsigned i = 0; i < pa.track.tsg_hi; i++)
		n += pa.track.tsgs[i].used && pa.track.tsgs[i].windowed;
	pa_unlock();
	return n;
}

void pa_gate_child_reset(void)
{
	pthread_mutex_init(&pa_chan_lock, NULL);
}

static unsigned pa_restore_grace_ms(void)
{
	static unsigned grace = UINT32_MAX;
	const char *s;
	char *end;
	unsigned long v;

	if (grace != UINT32_MAX)
		return grace;
	grace = PA_RESTORE_GRACE_MS_DEFAULT;
	s = getenv("GPUQOS_RESTORE_GRACE_MS");
	if (s == NULL || *s == '\0')
		return grace;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno != 0 || *end != '\0' || v > PA_RESTORE_GRACE_MS_MAX)
		pa_info("GPUQOS_RESTORE_GRACE_MS=%s is not 0..%u; using %u", s, PA_RESTORE_GRACE_MS_MAX,
			grace);
	else
		grace = (unsigned)v;
	return grace;
}

void pa_gate_lease_word(const struct gq_lease_word *w)
{
	pa_lease_word = w;
}

/* A lease ends: first extend every lease to what the node agent stored in
 * the page, if later (bounded by the longest lease it may give). */
static void pa_gate_extend(rm_u64 now)
{
	rm_u64 until, max = now + (rm_u64)GQ_GATE_LEASE_MAX_MS * 1000000u;

	if (pa_lease_word == NULL)
		return;
	until = __atomic_load_n(&pa_lease_word->until_ns, __ATOMIC_ACQUIRE);
	if (until <= now)
		return;
	if (until > max)
		until = max;
	pa_lock();
	for (unsigned i = 0; i < pa.track.tsg_hi; i++) {
		struct pa_tsg *g = &pa.track.tsgs[i];

		if (g->used && g->leased && g->lease_end_ns < until)
			g->lease_end_ns = until;
	}
	pa_unlock();
}

int pa_gate_expire(void)
{
	rm_u64 now = pa_now_ns(), next = pa_gate_next(), ms;
	rm_u64 restore_at = pa_down_since_ns + (rm_u64)pa_restore_grace_ms() * 1000000u;

	/* Runs before every poll of the library's thread: one pass over the
	 * table under the lock unless a lease is due. */
	if (next != 0 && next <= now) {
		pa_gate_extend(now);
		pa_gate_sweep(now, 0, "lease lapsed");
	}
	if (pa_down_since_ns && !pa_restored && now >= restore_at) {
		pa_restored = 1;
		pa_info("no node agent for %u ms: putting back the timeslices the application chose",
			pa_restore_grace_ms());
		pa_gate_sweep(UINT64_MAX, 1, "node agent gone");
	}
	next = pa_gate_next();
	if (pa_down_since_ns && !pa_restored && (next == 0 || restore_at < next))
		next = restore_at;
	if (next == 0)
		return -1;
	now = pa_now_ns();
	ms = next > now ? (next - now + 999999u) / 1000000u : 0;
	return ms > GQ_GATE_LEASE_MAX_MS ? (int)GQ_GATE_LEASE_MAX_MS : (int)ms;
}

void pa_gate_conn_down(void)
{
	/* The outage began at the first connection that ended, not at the
	 * last failed attempt. */
	if (pa_down_since_ns == 0)
		pa_down_since_ns = pa_now_ns();
	pa_gate_sweep(UINT64_MAX, 0, "node agent gone");
}

void pa_gate_conn_up(void)
{
	pa_down_since_ns = 0;
	pa_restored = 0;
}
