/* SPDX-License-Identifier: Apache-2.0 */
/*
 * preempt_conn.c - the preempt agent's own thread: the connection to the
 * node agent (docs/protocol.md) and the COMMANDs it executes.
 *
 * Owns: starting the thread, connect/greet/serve/reconnect with backoff,
 * draining the event queue onto the socket, validating every datagram,
 * issuing COMMANDs on libcuda's fd with the real ioctl. Does not own: the
 * tables or the queue's producers (preempt_ioctl.c), message layouts
 * (preempt_msg.c), which control a COMMAND is (abi/rm_plan.h), the
 * timeslice record (preempt_timeslice.c), the queue itself and thread
 * creation (preempt_core.c).
 *
 * Application threads never wait on this thread: they append to the queue
 * under the lock and poke the eventfd. Everything blocking happens here.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "abi/rm_plan.h"
#include "preempt.h"
#include "preempt_conn.h"
#include "preempt_cuda.h"
#include "preempt_gate.h"
#include "preempt_window.h"
#include "preempt_launch.h"
#include "preempt_msg.h"
#include "preempt_timeslice.h"
#include "preempt_wake.h"

#define PA_BACKOFF_MIN_MS 50u
#define PA_BACKOFF_MAX_MS 2000u /* no agent, or one that closed before POLICY */
/* Refused (GQ_REFUSED): from the agent's retry-after, doubling to this. */
#define PA_REFUSED_BACKOFF_MAX_MS GQ_REFUSED_RETRY_MAX_MS
#define PA_SEND_TIMEOUT_S 1     /* a stuck agent must not stall us forever */
#define PA_RECV_BATCH 64        /* then flush our own queue before reading on */
#define PA_THREAD_STACK (128u * 1024u)

/* The thread's own state; a forked child resets it (pa_conn_child_reset). */
static rm_u32 pa_seq;
static unsigned pa_greetings;  /* HELLOs sent by this process */
static unsigned long pa_bad_msgs;
static rm_u64 pa_rand;
static char pa_comm_fallback[GQ_COMM_LEN];
static struct pa_tsg pa_snap[PA_MAX_TSGS];
static struct pa_event pa_batch[PA_QUEUE_LEN];
/* ACTIVITY: asked for by this connection's POLICY; when the next is due. */
static int pa_act_on;
static rm_u64 pa_act_next_ns;
/* WAKE: asked for by this connection's POLICY; the counts last sent on it. */
static int pa_wake_on;
/* PHASE: asked for by this connection's POLICY; sent with each WAKE. */
static int pa_phase_on;
/* ... with the requests' span in it (GQ_POLICY_F_SPAN). */
static int pa_span_on;
static int pa_wake_sent;
static struct pa_wake_counts pa_wake_last;
/* This connection's answer: a POLICY (admitted), or a REFUSED and the
 * wait it asked for. Only an admitted connection resets the backoff. */
static int pa_admitted, pa_refused;
static unsigned pa_retry_after_ms;
/* This connection's lease page (docs/protocol.md, "Lease page"), mapped
 * read-only, or NULL. */
static void *pa_lease_map;

#ifndef F_GET_SEALS
#define F_GET_SEALS 1034 /* F_LINUX_SPECIFIC_BASE + 10 */
#endif
#ifndef F_SEAL_SHRINK
#define F_SEAL_SHRINK 0x0002
#endif

/* ---- small helpers ---- */

static int pa_send(int s, const void *msg, size_t len)
{
	ssize_t n;

	do
		n = send(s, msg, len, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n == (ssize_t)len)
		return 0;
	pa_info("send to the node agent: %m; reconnecting");
	return -1;
}

static void pa_sleep_ms(unsigned ms)
{
	struct timespec ts = { .tv_sec = ms / 1000u, .tv_nsec = (long)(ms % 1000u) * 1000000L };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* Sleep between connection attempts, still ending leases on time (a gate
 * whose enable failed is retried even while no agent is there). */
static void pa_sleep_gated(unsigned ms)
{
	rm_u64 end = pa_now_ns() + (rm_u64)ms * 1000000u;

	for (;;) {
		rm_u64 now = pa_now_ns();
		int next = pa_gate_expire();
		unsigned left;

		if (now >= end)
			return;
		left = (unsigned)((end - now + 999999u) / 1000000u);
		pa_sleep_ms(next >= 0 && (unsigned)next < left ? (unsigned)next + 1u : left);
	}
}

/* Spreads reconnects of many processes after an agent restart. */
static unsigned pa_jitter(unsigned ms)
{
	pa_rand ^= pa_rand << 13;
	pa_rand ^= pa_rand >> 7;
	pa_rand ^= pa_rand << 17;
	return (unsigned)(pa_rand % (ms / 4u + 1u));
}

static void pa_read_comm(char out[GQ_COMM_LEN])
{
	ssize_t n = -1;
	int fd;

	memset(out, 0, GQ_COMM_LEN);
	pa_own_fd_begin();
	fd = open("/proc/self/comm", O_RDONLY | O_CLOEXEC);
	atomic_store(&pa.tmpfd, fd);
	pa_own_fd_end(fd);
	if (fd >= 0) {
		n = read(fd, out, GQ_COMM_LEN - 1);
		pa_lock();
		atomic_store(&pa.tmpfd, -1);
		pa_fd_unmark(fd);
		pa_unlock();
		pa_real_close(fd);
	}
	if (n <= 0) {
		memcpy(out, pa_comm_fallback, GQ_COMM_LEN);
		return;
	}
	out[GQ_COMM_LEN - 1] = '\0';
	out[strcspn(out, "\n")] = '\0';
}

/* ---- connecting ---- */

static void pa_forget_sock(int s)
{
	pa_lock();
	atomic_store(&pa.sock, -1);
	pa_fd_unmark(s);
	pa_unlock();
	pa_real_close(s);
}

static int pa_new_socket(void)
{
	struct timeval tv = { .tv_sec = PA_SEND_TIMEOUT_S };
	int s;

	pa_own_fd_begin();
	s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (s >= 0)
		atomic_store(&pa.sock, s);
	pa_own_fd_end(s);
	if (s < 0) {
		pa_info("socket: %m");
		return -1;
	}
	/* On AF_UNIX the send timeout also bounds connect(). */
	if (setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) != 0)
		pa_debug("SO_SNDTIMEO: %m");
	return s;
}

/* A socket whose connect() found no agent is kept for the next attempt:
 * while no agent listens, the library creates one fd, not one per try. */
static int pa_open(void)
{
	int s = atomic_load(&pa.sock);

	if (s < 0 && (s = pa_new_socket()) < 0)
		return -1;
	if (connect(s, (const struct sockaddr *)&pa.addr, sizeof(pa.addr)) == 0)
		return s;
	pa_debug("connect %s: %m", pa.addr.sun_path);
	if (errno != ENOENT && errno != ECONNREFUSED)
		pa_forget_sock(s);
	return -1;
}

/* HELLO, every live TSG, SYNCED. The snapshot and the switch to "connected"
 * happen under one lock, so an event is either in the snapshot or queued
 * after it, never lost. */
static int pa_greet(int s)
{
	struct gq_hello hello;
	struct gq_synced synced;
	struct gq_tsg msg;
	char comm[GQ_COMM_LEN];
	unsigned n;

	pa_lock();
	n = pa_track_snapshot(&pa.track, pa_snap, PA_MAX_TSGS);
	pa.connected = 1;
	pa.mem_on = 0;
	pa.mem_wake_pending = 0;
	pa.qhead = 0;
	pa.qlen = 0;
	pa.q_overflow = 0;
	pa.wake_pending = 0;
	pa_unlock();
	pa_read_comm(comm);
	pa_act_on = 0;
	pa_wake_on = 0;
	pa_phase_on = 0;
	pa_span_on = 0;
	pa_wake_sent = 0;
	pa_msg_hello(&hello, pa_seq++, (rm_u32)getpid(),
		     GQ_HELLO_F_GATE | GQ_HELLO_F_WAKE_STATS | GQ_HELLO_F_PHASE |
			     GQ_HELLO_F_WINDOW | GQ_HELLO_F_WINDOW_STATE | GQ_HELLO_F_MEMORY |
			     GQ_HELLO_F_LEASE_PAGE |
			     (pa_launch_counting() ? GQ_HELLO_F_ACTIVITY | GQ_HELLO_F_SPAN : 0) |
			     (pa_greetings > 0 ? GQ_HELLO_F_RECONNECT : 0),
		     n, comm);
	if (pa_send(s, &hello, sizeof(hello)) != 0)
		return -1;
	pa_greetings++;
	for (unsigned i = 0; i < n; i++) {
		pa_msg_tsg(&msg, pa_seq++, &pa_snap[i]);
		if (pa_send(s, &msg, sizeof(msg)) != 0)
			return -1;
	}
	pa_msg_synced(&synced, pa_seq++, n);
	if (pa_send(s, &synced, sizeof(synced)) != 0)
		return -1;
	pa_info("connected to %s, reported %u TSGs", pa.addr.sun_path, n);
	return 0;
}

/* A MEMORY: the budget on one GPU. The first on a connection also says
 * that the agent takes MEM_USAGE, so every GPU is reported from then on. */
static void pa_memory(const struct gq_memory *m)
{
	int rc;

	pa_lock();
	rc = pa_mem_set_limit(&pa.mem, m);
	if (rc == 0 && !pa.mem_on) {
		pa.mem_on = 1;
		pa_mem_mark_all(&pa.mem);
	}
	pa_unlock();
	if (rc != 0) {
		pa_bad_msgs++;
		pa_info("ignored a MEMORY for device %u with flags 0x%x (%lu so far)",
			m->device_instance, m->flags, pa_bad_msgs);
		return;
	}
	if (m->limit == GQ_MEM_UNLIMITED)
		pa_debug("video memory on device %u: no budget", m->device_instance);
	else
		pa_info("video memory on device %u: budget %llu MiB", m->device_instance,
			(unsigned long long)(m->limit >> 20));
}

/* Sends the MEM_USAGE reports due; returns the wait until the next one
 * (ms, -1: none pending), or -2 if a send failed. */
static int pa_mem_send(int s)
{
	struct gq_mem_usage m;
	int next = -1, more;

	for (int i = 0; i < PA_MEM_GPUS; i++) {
		pa_lock();
		pa.mem_wake_pending = 0;
		more = pa.mem_on && pa_mem_take_report(&pa.mem, pa_now_ns(), &m, &next);
		if (!pa.mem_on)
			next = -1;
		pa_unlock();
		if (!more)
			return next;
		gq_hdr_init(&m.hdr, GQ_MEM_USAGE, pa_seq++);
		if (pa_send(s, &m, sizeof(m)) != 0)
			return -2;
	}
	return 0;
}

/* The agent is gone: fail open. libcuda's values stand until it is back. */
static void pa_drop(int s)
{
	pa_lock();
	pa.connected = 0;
	pa.mem_on = 0;
	pa.qhead = 0;
	pa.qlen = 0;
	pa.q_overflow = 0;
	pa.wake_pending = 0;
	pa_unlock();
	atomic_store(&pa.policy_gr_us, 0);
	atomic_store(&pa.policy_copy_us, 0);
	pa_policy_phase_set(PA_POLICY_DOWN);
	/* The node agent asked for wakes while its BEs were cut short; without
	 * it nobody says whether that still holds. */
	pa_wake_policy(0, 0);
	pa_forget_sock(s);
}

/* ---- sending queued events ---- */

static int pa_send_event(int s, const struct pa_event *ev)
{
	struct gq_tsg_gone gone;
	struct gq_tsg tsg;

	if (ev->type == PA_EV_TSG_GONE) {
		pa_msg_tsg_gone(&gone, pa_seq++, &ev->tsg);
		return pa_send(s, &gone, sizeof(gone));
	}
	pa_msg_tsg(&tsg, pa_seq++, &ev->tsg);
	return pa_send(s, &tsg, sizeof(tsg));
}

static void pa_apply_event(const struct pa_event *ev);

static int pa_flush(int s)
{
	unsigned long overflows;
	unsigned n;

	pa_lock();
	if (pa.q_overflow) {
		overflows = pa.ctr_queue_overflow;
		pa_unlock();
		pa_info("event queue overflowed (%lu times); reconnecting to re-report",
			overflows);
		return -1;
	}
	n = pa.qlen;
	for (unsigned i = 0; i < n; i++)
		pa_batch[i] = pa.queue[(pa.qhead + i) % PA_QUEUE_LEN];
	pa.qhead = 0;
	pa.qlen = 0;
	pa.wake_pending = 0;
	pa_unlock();
	for (unsigned i = 0; i < n; i++) {
		if (pa_batch[i].type == PA_EV_TSG_APPLY)
			pa_apply_event(&pa_batch[i]);
		else if (pa_send_event(s, &pa_batch[i]) != 0)
			return -1;
	}
	return 0;
}

/* ---- commands ---- */

static rm_u32 pa_issue(int fd, const struct gq_command *c, struct rm_plan *plan, rm_u32 *status,
		       rm_u64 *elapsed_ns)
{
	*elapsed_ns = 0;
	return pa_rm_control(fd, c->h_client, c->h_tsg, plan->cmd, &plan->params,
			     plan->params_size, status, elapsed_ns);
}

/* A command RM accepted; seq: the TSG's set_seq before it was issued. A
 * read or a level that an application call overtook is not recorded:
 * that call's value is as new as ours or newer. */
static void pa_record(int fd, const struct gq_command *c, const struct rm_plan *plan,
		      unsigned seq)
{
	struct pa_tsg *g;
	rm_u64 v = rm_plan_value(c->op, c->arg, plan);

	if (c->op == GQ_OP_SET_TIMESLICE) {
		pa_ts_accepted(fd, c->h_client, c->h_tsg, seq, v, 0);
		return;
	}
	pa_lock();
	g = pa_track_tsg_find(&pa.track, c->h_client, c->h_tsg);
	if (g != NULL && g->set_seq == seq && c->op == GQ_OP_GET_TIMESLICE)
		g->timeslice_us = v >= GQ_UNKNOWN ? GQ_UNKNOWN - 1 : (rm_u32)v;
	else if (g != NULL && g->set_seq == seq && c->op == GQ_OP_SET_INTERLEAVE)
		g->interleave = (rm_u32)v;
	pa_unlock();
}

static int pa_command(int s, const struct gq_command *c, rm_u64 received_ns)
{
	struct gq_result r;
	struct rm_plan plan;
	struct pa_tsg *g;
	rm_u32 err, status = 0;
	rm_u64 value = c->arg, elapsed = 0;
	unsigned seq = 0;
	int fd = -1, locked;

	if (c->op == GQ_OP_GATE || c->op == GQ_OP_UNGATE) {
		err = pa_gate_check(c);
		if (err == 0 && pa_deadline_passed(received_ns, pa_now_ns(), c->deadline_us))
			err = GQ_ERR_EXPIRED;
		if (err == 0)
			err = pa_gate_command(c, &status, &elapsed);
		pa_debug("command %u op %u client 0x%x tsg 0x%x: err %u, %s", c->hdr.seq, c->op,
			 c->h_client, c->h_tsg, err, rm_status_name(status));
		pa_msg_result(&r, c, status, err, value, elapsed);
		return pa_send(s, &r, sizeof(r));
	}
	err = rm_plan_of(c->op, c->arg, &plan);
	locked = pa_ts_lock();
	if (err == 0) {
		pa_lock();
		g = pa_track_tsg_find(&pa.track, c->h_client, c->h_tsg);
		if (g != NULL) {
			fd = g->fd;
			seq = g->set_seq;
		}
		pa_unlock();
		if (fd < 0)
			err = GQ_ERR_UNKNOWN_TSG;
	}
	if (err == 0 && pa_deadline_passed(received_ns, pa_now_ns(), c->deadline_us))
		err = GQ_ERR_EXPIRED;
	if (err == 0)
		err = pa_issue(fd, c, &plan, &status, &elapsed);
	if (err == 0) {
		value = rm_plan_value(c->op, c->arg, &plan);
		if (status == RM_OK)
			pa_record(fd, c, &plan, seq);
	}
	pa_ts_unlock(locked);
	pa_debug("command %u op %u client 0x%x tsg 0x%x: err %u, %s", c->hdr.seq, c->op,
		 c->h_client, c->h_tsg, err, rm_status_name(status));
	pa_msg_result(&r, c, status, err, value, elapsed);
	return pa_send(s, &r, sizeof(r));
}

/* Set a TSG the application just created to the policy's value (see
 * pa_apply_new_tsg), then release the application thread waiting for it.
 * The resulting TSG report goes out with the next flush. */
static void pa_apply_event(const struct pa_event *ev)
{
	struct gq_command c;
	struct rm_plan plan;
	rm_u32 err, status = 0;
	rm_u64 elapsed = 0;
	unsigned seq;
	int locked;

	memset(&c, 0, sizeof(c));
	c.op = GQ_OP_SET_TIMESLICE;
	c.h_client = ev->tsg.h_client;
	c.h_tsg = ev->tsg.h;
	c.arg = ev->value_us;
	err = rm_plan_of(c.op, c.arg, &plan);
	locked = pa_ts_lock();
	seq = pa_ts_seq(c.h_client, c.h_tsg);
	if (err == 0)
		err = pa_issue(ev->tsg.fd, &c, &plan, &status, &elapsed);
	pa_debug("new TSG 0x%x of client 0x%x set to %u us: err %u, %s, %llu ns", c.h_tsg, c.h_client,
		 ev->value_us, err, rm_status_name(status), (unsigned long long)elapsed);
	if (err == 0 && status == RM_OK)
		pa_ts_accepted(ev->tsg.fd, c.h_client, c.h_tsg, seq, ev->value_us, 1);
	pa_ts_unlock(locked);
	pa_lock();
	if (pa.apply_done < ev->seq)
		pa.apply_done = ev->seq;
	pthread_cond_broadcast(&pa.policy_cv);
	pa_unlock();
}

/* ---- receiving ---- */

/* POLICY's wake: off without GQ_POLICY_F_WAKE; a lead or hold out of
 * range turns wakes off, said once until a valid one arrives. */
static void pa_policy_wake(const struct gq_policy *p)
{
	static int said;
	unsigned lead = GQ_WAKE_LEAD(p->wake), hold = GQ_WAKE_HOLD(p->wake);

	if (!(p->flags & GQ_POLICY_F_WAKE)) {
		pa_wake_policy(0, 0);
		return;
	}
	if (lead == 0 || lead > GQ_WAKE_MAX_US || hold > GQ_WAKE_MAX_US) {
		if (!said)
			pa_info("ignored the wake of a POLICY (lead %u us, hold %u us): "
				"the lead must be 1..%u and the hold 0..%u; no wakes",
				lead, hold, GQ_WAKE_MAX_US, GQ_WAKE_MAX_US);
		said = 1;
		pa_wake_policy(0, 0);
		return;
	}
	said = 0;
	pa_wake_policy(lead, hold);
}

static const char *pa_refused_why(rm_u32 reason)
{
	switch (reason) {
	case GQ_REFUSED_FULL:
		return "it holds as many connections as it takes";
	case GQ_REFUSED_SHARE:
		return "this pod or user holds its share of connections";
	case GQ_REFUSED_UNREAD:
		return "it could not read this process's /proc now";
	default:
		return "no reason it names";
	}
}

/* Why the page of a LEASE_PAGE cannot be used, or NULL with *map set.
 * A page that could shrink would fault this process on a read (SIGBUS):
 * only a memfd sealed against it is taken. fcntl() by its system call: a
 * build on a newer glibc would bind fcntl64 (GLIBC_2.28). */
static const char *pa_lease_check(const struct gq_lease_page *m, int fd, rm_u64 now, void **map)
{
	const struct gq_lease_word *w;
	long seals;
	void *p;

	if (fd < 0)
		return "no page came with it";
	if (m->flags != 0 || m->size != GQ_LEASE_PAGE_SIZE)
		return "reserved flags set, or not a page's size";
	if (m->sent_ns > now + GQ_WINDOW_CLOCK_SLACK_NS || now - m->sent_ns >= GQ_WINDOW_CLOCK_SLACK_NS)
		return "its clock is not this process's (another time namespace?)";
	if (lseek(fd, 0, SEEK_END) != (off_t)GQ_LEASE_PAGE_SIZE)
		return "the file is not one page";
	seals = syscall(SYS_fcntl, fd, F_GET_SEALS);
	if (seals < 0 || !(seals & F_SEAL_SHRINK))
		return "the file may shrink (not a sealed memfd)";
	p = mmap(NULL, GQ_LEASE_PAGE_SIZE, PROT_READ, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return "mmap failed";
	w = p;
	if (w->magic != GQ_LEASE_PAGE_MAGIC || w->version != GQ_PROTO_VERSION) {
		munmap(p, GQ_LEASE_PAGE_SIZE);
		return "not a lease page of this protocol";
	}
	*map = p;
	return NULL;
}

static void pa_lease_drop(void)
{
	pa_gate_lease_word(NULL);
	if (pa_lease_map != NULL)
		munmap(pa_lease_map, GQ_LEASE_PAGE_SIZE);
	pa_lease_map = NULL;
}

/* LEASE_PAGE: take the page (or refuse it) and say which. */
static int pa_lease_page(int s, const struct gq_lease_page *m, int fd, rm_u64 now)
{
	struct gq_lease_page_state st;
	void *map = NULL;
	const char *why = pa_lease_check(m, fd, now, &map);

	memset(&st, 0, sizeof(st));
	gq_hdr_init(&st.hdr, GQ_LEASE_PAGE_STATE, pa_seq++);
	pa_lease_drop();
	if (why != NULL) {
		pa_info("refused the node agent's lease page: %s; leases renewed by COMMAND", why);
	} else {
		pa_lease_map = map;
		pa_gate_lease_word(map);
		st.flags = GQ_LEASE_PAGE_F_ON;
		pa_debug("leases renewed through the node agent's page");
	}
	return pa_send(s, &st, sizeof(st));
}

static int pa_handle(int s, const void *buf, size_t n, rm_u64 received_ns, int fd)
{
	const struct gq_hdr *h = buf;
	const struct gq_policy *p = buf;
	const struct gq_refused *rf = buf;
	enum gq_check ck = gq_msg_check(buf, n);

	if (ck != GQ_CHECK_OK) {
		pa_bad_msgs++;
		pa_info("ignored a %zu-byte datagram from the node agent: %s (%lu so far)", n,
			gq_check_name(ck), pa_bad_msgs);
		return 0;
	}
	switch (h->type) {
	case GQ_REFUSED:
		pa_refused = 1;
		pa_retry_after_ms = rf->retry_after_ms;
		pa_info("the node agent refused this connection (%s); running without it",
			pa_refused_why(rf->reason));
		return -1;
	case GQ_POLICY:
		pa_admitted = 1;
		atomic_store(&pa.policy_gr_us, p->gr_timeslice_us);
		atomic_store(&pa.policy_copy_us, p->copy_timeslice_us);
		if (atomic_load(&pa.policy_phase) != PA_POLICY_READY)
			pa_policy_phase_set(PA_POLICY_READY);
		if (!pa_act_on && (p->flags & GQ_POLICY_F_ACTIVITY) && pa_launch_counting())
			pa_act_next_ns = received_ns; /* the first one at once */
		pa_act_on = (p->flags & GQ_POLICY_F_ACTIVITY) && pa_launch_counting();
		pa_wake_on = (p->flags & GQ_POLICY_F_WAKE_STATS) != 0;
		pa_phase_on = pa_wake_on && (p->flags & GQ_POLICY_F_PHASE) != 0;
		pa_span_on = pa_phase_on && (p->flags & GQ_POLICY_F_SPAN) && pa_launch_counting();
		pa_debug("policy: gr %u us, copy %u us, flags 0x%x, wake 0x%x", p->gr_timeslice_us,
			 p->copy_timeslice_us, p->flags, p->wake);
		pa_policy_wake(p);
		return 0;
	case GQ_COMMAND:
		return pa_command(s, buf, received_ns);
	case GQ_MEMORY:
		pa_memory(buf);
		return 0;
	case GQ_LEASE_PAGE:
		return pa_lease_page(s, buf, fd, received_ns);
	case GQ_WINDOW: {
		struct gq_window_state st;

		pa_window_set(buf, received_ns);
		if (!(((const struct gq_window *)buf)->flags & GQ_WINDOW_F_STATE))
			return 0;
		pa_window_state(&st, pa_seq++, pa_now_ns());
		return pa_send(s, &st, sizeof(st));
	}
	default:
		pa_bad_msgs++;
		pa_info("ignored a message of type %u: not one the node agent sends (%lu so far)",
			h->type, pa_bad_msgs);
		return 0;
	}
}

/* recv() returns 0 both at end of stream and for an empty datagram. */
static int pa_peer_gone(int s)
{
	struct pollfd p = { .fd = s, .events = POLLIN | POLLRDHUP };

	if (poll(&p, 1, 0) < 0)
		return 1;
	return (p.revents & (POLLHUP | POLLRDHUP | POLLERR | POLLNVAL)) != 0;
}

static int pa_receive(int s)
{
	/* One byte more than any message: an oversized one fails the check. */
	union {
		unsigned char b[GQ_MSG_MAX + 1];
		rm_u64 align;
	} buf;

	union {
		char b[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} ctl;

	for (int i = 0; i < PA_RECV_BATCH; i++) {
		struct iovec iov = { .iov_base = buf.b, .iov_len = sizeof(buf.b) };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.b,
				     .msg_controllen = sizeof(ctl.b) };
		ssize_t n = recvmsg(s, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		rm_u64 now = pa_now_ns();
		struct cmsghdr *cm;
		int fd = -1, rc;

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
		/* At most one descriptor is taken (a LEASE_PAGE's): the buffer
		 * holds one, and the kernel closes those that did not fit
		 * (MSG_CTRUNC). Not CMSG_NXTHDR: it calls __cmsg_nxthdr, which
		 * only glibc has. */
		cm = CMSG_FIRSTHDR(&mh);
		if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS &&
		    cm->cmsg_len >= CMSG_LEN(sizeof(int)))
			memcpy(&fd, CMSG_DATA(cm), sizeof(int));
		if (n == 0 && pa_peer_gone(s)) {
			if (fd >= 0)
				pa_real_close(fd);
			return -1;
		}
		rc = pa_handle(s, buf.b, (size_t)n, now, fd);
		if (fd >= 0)
			pa_real_close(fd);
		if (rc != 0)
			return -1;
	}
	return 0;
}

/* Sends WAKE if it is asked for and the counts changed since the last
 * one on this connection, and PHASE after it if that is asked for and a
 * period is agreed with a recent start; 0, or -1 if a send failed. */
static int pa_wake_send(int s)
{
	struct pa_wake_counts c;
	struct gq_wake m;
	struct gq_phase ph;

	if (!pa_wake_on || !pa_wake_counts(&c))
		return 0;
	if (pa_wake_sent && c.requests == pa_wake_last.requests &&
	    c.wakes == pa_wake_last.wakes && c.not_issued == pa_wake_last.not_issued &&
	    c.hits == pa_wake_last.hits && c.wasted == pa_wake_last.wasted &&
	    c.beaten == pa_wake_last.beaten && c.stops == pa_wake_last.stops &&
	    c.stopped == pa_wake_last.stopped)
		return 0;
	pa_msg_wake(&m, pa_seq++, &c);
	if (pa_send(s, &m, sizeof(m)) != 0)
		return -1;
	pa_wake_last = c;
	pa_wake_sent = 1;
	if (!pa_phase_on || pa_msg_phase(&ph, pa_seq, &c, pa_span_on) != 0)
		return 0;
	pa_seq++;
	return pa_send(s, &ph, sizeof(ph));
}

/* Sends ACTIVITY (and WAKE, "Wake" in docs/protocol.md) if one is due;
 * returns how long until the next (ms, -1: none asked for), or -2 if a
 * send failed. */
static int pa_activity(int s)
{
	struct pa_launch_counts c;
	struct gq_activity m;
	rm_u64 now;

	if (!pa_act_on && !pa_wake_on)
		return -1;
	now = pa_now_ns();
	if (now >= pa_act_next_ns) {
		if (pa_act_on) {
			pa_launch_read(&c);
			pa_msg_activity(&m, pa_seq++, c.launches, c.bursts, c.active_ns, c.at_ns);
			if (pa_send(s, &m, sizeof(m)) != 0)
				return -2;
		}
		if (pa_wake_send(s) != 0)
			return -2;
		pa_act_next_ns = now + (rm_u64)GQ_ACTIVITY_PERIOD_MS * 1000000u;
		return (int)GQ_ACTIVITY_PERIOD_MS;
	}
	return (int)((pa_act_next_ns - now + 999999u) / 1000000u);
}

static void pa_serve(int s)
{
	int efd = atomic_load(&pa.evfd);
	struct pollfd p[2];
	int wait, act;
	rm_u64 v;

	for (;;) {
		if (pa_flush(s) != 0)
			return;
		act = pa_activity(s);
		if (act == -2)
			return;
		wait = pa_gate_expire();
		if (act >= 0 && (wait < 0 || act < wait))
			wait = act;
		act = pa_mem_send(s);
		if (act == -2)
			return;
		if (act >= 0 && (wait < 0 || act < wait))
			wait = act;
		p[0] = (struct pollfd){ .fd = s, .events = POLLIN };
		p[1] = (struct pollfd){ .fd = efd, .events = POLLIN };
		if (poll(p, 2, wait) < 0) {
			if (errno == EINTR)
				continue;
			pa_info("poll: %m");
			return;
		}
		if ((p[1].revents & POLLIN) && read(efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
			pa_debug("eventfd read: %m");
		if (p[0].revents != 0 && pa_receive(s) != 0) {
			pa_info("node agent went away");
			return;
		}
	}
}

/* The wait before the next attempt, from the one before (docs/protocol.md,
 * "Admission"): the shortest after a connection the agent admitted; after
 * a refusal at least what the agent asked, and twice the last wait while
 * refusals go on; otherwise (no agent, or a close before POLICY) doubling
 * to PA_BACKOFF_MAX_MS. A greeting that went out no longer resets it. */
static unsigned pa_next_backoff(unsigned backoff)
{
	unsigned max = pa_refused ? PA_REFUSED_BACKOFF_MAX_MS : PA_BACKOFF_MAX_MS;

	if (pa_admitted)
		return PA_BACKOFF_MIN_MS;
	if (pa_refused && backoff < pa_retry_after_ms)
		backoff = pa_retry_after_ms;
	return backoff > max ? max : backoff;
}

static void *conn_thread_main(void *unused)
{
	unsigned backoff = PA_BACKOFF_MIN_MS, wait;
	int s;

	(void)unused;
	pa_rand = pa_now_ns() ^ ((rm_u64)getpid() << 32) ^ 0x9e3779b97f4a7c15ull;
	for (;;) {
		pa_admitted = 0;
		pa_refused = 0;
		s = pa_open();
		if (s < 0)
			pa_policy_phase_set(PA_POLICY_DOWN);
		if (s >= 0) {
			pa_policy_phase_set(PA_POLICY_PENDING);
			if (pa_greet(s) == 0) {
				pa_gate_conn_up();
				pa_serve(s);
			} else {
				/* A refusal may wait in the socket behind the
				 * greeting's failed send. */
				(void)pa_receive(s);
			}
			pa_window_stop("ended (the node agent went away)");
			pa_lease_drop();
			pa_gate_conn_down();
			pa_drop(s);
		}
		wait = pa_next_backoff(backoff);
		if (pa_refused)
			pa_info("next try in %u ms (refused)", wait);
		else
			pa_debug("next try in %u ms", wait);
		pa_sleep_gated(wait + pa_jitter(wait));
		backoff = wait * 2;
	}
	return NULL;
}

/* ---- starting and forgetting the thread ---- */

void pa_conn_start(void)
{
	int efd;

	if (atomic_load(&pa.thread_started) || atomic_exchange(&pa.thread_started, 1))
		return;
	if (!pa.addr_ok)
		return;
	atomic_store(&pa.policy_phase, PA_POLICY_PENDING);
	if (prctl(PR_GET_NAME, pa_comm_fallback) != 0)
		memcpy(pa_comm_fallback, "?", 2);
	pa_comm_fallback[GQ_COMM_LEN - 1] = '\0';
	pa_own_fd_begin();
	efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (efd >= 0)
		atomic_store(&pa.evfd, efd);
	pa_own_fd_end(efd);
	if (efd < 0) {
		pa_info("eventfd: %m; not connecting to the node agent");
		atomic_store(&pa.policy_phase, PA_POLICY_DOWN);
		atomic_store(&pa.thread_started, 0);
		return;
	}
	if (pa_thread_spawn(conn_thread_main, "gpuqos-preempt", PA_THREAD_STACK) == 0)
		return;
	pa_info("pthread_create: %m; not connecting to the node agent");
	pa_lock();
	atomic_store(&pa.evfd, -1);
	pa_fd_unmark(efd);
	pa_unlock();
	pa_real_close(efd);
	atomic_store(&pa.policy_phase, PA_POLICY_DOWN);
	atomic_store(&pa.thread_started, 0);
}

/* In a forked child: the thread does not exist there, and the socket and
 * eventfd are the parent's. The caller has reset the lock. */
void pa_conn_child_reset(void)
{
	int s = atomic_exchange(&pa.sock, -1);
	int e = atomic_exchange(&pa.evfd, -1);
	int t = atomic_exchange(&pa.tmpfd, -1);

	if (s >= 0)
		pa_real_close(s);
	if (e >= 0)
		pa_real_close(e);
	if (t >= 0)
		pa_real_close(t);
	pa_seq = 0;
	pa_greetings = 0;
	pa_act_on = 0;
	pa_lease_drop();
	pa_gate_conn_up();
	pa_gate_child_reset();
	pa_window_child_reset();
	pa_bad_msgs = 0;
	atomic_store(&pa.thread_started, 0);
}
