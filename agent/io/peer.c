/* SPDX-License-Identifier: Apache-2.0 */
/*
 * peer.c - the SEQPACKET socket the injected preempt agents connect to:
 * accept, identity (SO_PEERCRED only), receiving and checking every
 * datagram, sending POLICY and COMMAND, and the limits on peers
 * (AGENT_PEERS_*). Does not own what a command or a POLICY should be
 * (reconcile.c) nor matching results to commands (cmd.c).
 */
#include "agent/io/peer.h"
#include "agent/io/io.h"
#include "agent/io/procinfo.h"
#include "agent/io/statefile.h"
#include "agent/io/tracker.h"
#include "common/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

/* mkdir -p with mode for each missing component. */
int mkdir_parents(const char *path, mode_t mode)
{
	char buf[4096];
	size_t n = strlen(path);

	if (n >= sizeof(buf))
		return -1;
	memcpy(buf, path, n + 1);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, mode) != 0 && errno != EEXIST) {
			log_error("mkdir %s: %s", buf, strerror(errno));
			return -1;
		}
		*p = '/';
	}
	return 0;
}

/* Binds a unix socket of the given type at path with the given mode,
 * replacing a stale socket file from an earlier run. */
int unix_listen(const char *path, int type, mode_t mode)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		log_error("socket path %s: too long", path);
		return -1;
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);
	if (mkdir_parents(path, 0755) != 0)
		return -1;
	fd = socket(AF_UNIX, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		log_error("socket for %s: %s", path, strerror(errno));
		return -1;
	}
	if (unlink(path) != 0 && errno != ENOENT)
		log_warn("unlink stale %s: %s", path, strerror(errno));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || chmod(path, mode) != 0 ||
	    listen(fd, 128) != 0) {
		log_error("listen on %s: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

#ifndef F_SEAL_FUTURE_WRITE
#define F_SEAL_FUTURE_WRITE 0x0010 /* Linux 5.1 */
#endif

/* A peer and its socket's watch, in one allocation: the model's struct
 * peer first, so freeing the peer frees both; and the lease page offered
 * to it, mapped (NULL: none). */
struct peer_conn {
	struct peer p;
	struct loop_watch w;
	struct gq_lease_word *lease;
};

static struct peer_conn *peer_conn_of(struct peer *p)
{
	return (struct peer_conn *)p;
}

static struct loop_watch *peer_watch(struct peer *p)
{
	return &peer_conn_of(p)->w;
}

static int peer_send(struct agent *a, struct peer *p, void *msg, const char *what)
{
	struct gq_hdr *h = msg;

	if (p->broken)
		return -1;
	if (send(peer_watch(p)->fd, msg, h->length, MSG_DONTWAIT | MSG_NOSIGNAL) == (ssize_t)h->length)
		return 0;
	if (errno == EAGAIN || errno == EWOULDBLOCK) {
		/* The peer is not reading; the caller retries on a later tick. */
		proc_log(a, p->proc, LOG_LEVEL_WARN, "pid %d: %s not sent: socket buffer full",
			 (int)p->pid, what);
		return -1;
	}
	proc_log(a, p->proc, LOG_LEVEL_WARN, "pid %d: send %s: %s", (int)p->pid, what, strerror(errno));
	/* Closed after this batch: callers may be walking the peer and TSG
	 * lists right now. */
	p->broken = 1;
	a->npeers_broken++;
	return -1;
}

int peer_send_policy(struct agent *a, struct peer *p, uint32_t gr, uint32_t copy, uint32_t wake)
{
	struct gq_policy m;

	memset(&m, 0, sizeof(m));
	gq_hdr_init(&m.hdr, GQ_POLICY, ++p->send_seq);
	m.gr_timeslice_us = gr;
	m.copy_timeslice_us = copy;
	/* Every process's launches are read (ctl, metrics); only an LC's
	 * change anything (lcbusy.c). */
	m.flags = GQ_POLICY_F_ACTIVITY | (wake ? GQ_POLICY_F_WAKE : 0) |
		  (p->wake_stats ? GQ_POLICY_F_WAKE_STATS : 0) |
		  (p->wake_stats && p->phase ? GQ_POLICY_F_PHASE : 0) |
		  (p->wake_stats && p->phase && p->span ? GQ_POLICY_F_SPAN : 0);
	m.wake = wake;
	if (peer_send(a, p, &m, "POLICY") != 0)
		return -1;
	p->policy_valid = 1;
	p->policy_gr = gr;
	p->policy_copy = copy;
	p->policy_wake = wake;
	log_debug("pid %d: POLICY gr %u copy %u wake %u/%u us", (int)p->pid, gr, copy,
		  GQ_WAKE_LEAD(wake), GQ_WAKE_HOLD(wake));
	return 0;
}

int peer_send_window(struct agent *a, struct peer *p)
{
	struct gq_window m;

	memset(&m, 0, sizeof(m));
	gq_hdr_init(&m.hdr, GQ_WINDOW, ++p->send_seq);
	m.flags = (p->win.on ? GQ_WINDOW_F_ON : 0) | (p->window_state ? GQ_WINDOW_F_STATE : 0);
	m.device_instance = p->win.gpu;
	m.period_ns = p->win.period_ns;
	m.start_ns = p->win.start_us * 1000u;
	m.sent_ns = now_us() * 1000u;
	m.before_us = p->win.before_us;
	m.after_us = p->win.after_us;
	m.lease_ms = WINDOW_LEASE_MS;
	return peer_send(a, p, &m, "WINDOW");
}

int peer_send_memory(struct agent *a, struct peer *p, const struct mem_gpu *e)
{
	struct gq_memory m;

	memset(&m, 0, sizeof(m));
	gq_hdr_init(&m.hdr, GQ_MEMORY, ++p->send_seq);
	m.device_instance = e->gpu;
	m.flags = e->limit != GQ_MEM_UNLIMITED ? GQ_MEMORY_F_REPORT : 0;
	m.limit = e->limit;
	m.reported_total = e->total;
	if (peer_send(a, p, &m, "MEMORY") != 0)
		return -1;
	log_debug("pid %d: MEMORY gpu %u limit %llu total %llu", (int)p->pid, e->gpu,
		  (unsigned long long)e->limit, (unsigned long long)e->total);
	return 0;
}

int peer_send_command(struct agent *a, struct peer *p, struct cmd *c)
{
	struct gq_command m;

	memset(&m, 0, sizeof(m));
	gq_hdr_init(&m.hdr, GQ_COMMAND, c->seq);
	m.op = c->op;
	m.h_client = c->h_client;
	m.h_tsg = c->h_tsg;
	m.deadline_us = a->cfg->control_deadline_ms * 1000u;
	m.arg = c->arg;
	return peer_send(a, p, &m, "COMMAND");
}

/* A memfd of one page that the peer can map but never write, shrink or
 * grow: mapped here, the descriptor closed once it is sent (the mapping
 * keeps the file). Returns the descriptor, or -1 with the reason in *why. */
static int lease_page_make(struct gq_lease_word **map, const char **why)
{
	const int seals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE | F_SEAL_SEAL;
	int fd = memfd_create("gpuqos-lease", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	void *m;

	*why = "memfd_create";
	if (fd < 0)
		return -1;
	*why = "ftruncate";
	if (ftruncate(fd, GQ_LEASE_PAGE_SIZE) != 0)
		goto fail;
	*why = "mmap";
	m = mmap(NULL, GQ_LEASE_PAGE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED)
		goto fail;
	*map = m;
	(*map)->magic = GQ_LEASE_PAGE_MAGIC;
	(*map)->version = GQ_PROTO_VERSION;
	(*map)->until_ns = 0;
	/* Sealed after our own writable mapping exists: later ones fail. */
	*why = "sealing (a kernel before 5.1?)";
	if (fcntl(fd, F_ADD_SEALS, seals) != 0) {
		munmap(m, GQ_LEASE_PAGE_SIZE);
		*map = NULL;
		goto fail;
	}
	return fd;
fail:
	close(fd);
	return -1;
}

/* Offer a peer whose HELLO takes one a lease page (docs/protocol.md,
 * "Lease page"). Without one (any step failed) its leases are renewed by
 * COMMAND, as for a library that does not take one. */
static void lease_page_offer(struct agent *a, struct peer *p)
{
	struct peer_conn *pc = peer_conn_of(p);
	static int said;
	struct gq_lease_page m;
	const char *why;
	union {
		char b[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = { .iov_base = &m, .iov_len = sizeof(m) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.b,
			     .msg_controllen = sizeof(ctl.b) };
	struct cmsghdr *c;
	int fd;

	if (pc->lease != NULL)
		return;
	fd = lease_page_make(&pc->lease, &why);
	if (fd < 0) {
		if (!said)
			log_warn("no lease pages (%s: %s): leases are renewed by COMMAND", why,
				 strerror(errno));
		said = 1;
		return;
	}
	memset(&m, 0, sizeof(m));
	memset(&ctl, 0, sizeof(ctl));
	gq_hdr_init(&m.hdr, GQ_LEASE_PAGE, ++p->send_seq);
	m.size = GQ_LEASE_PAGE_SIZE;
	m.sent_ns = now_us() * 1000u;
	c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	if (sendmsg(peer_watch(p)->fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)sizeof(m)) {
		proc_log(a, p->proc, LOG_LEVEL_INFO, "pid %d: lease page not sent: %s", (int)p->pid,
			 strerror(errno));
		munmap(pc->lease, GQ_LEASE_PAGE_SIZE);
		pc->lease = NULL;
	}
	close(fd);
}

void peer_renew_leases(struct agent *a, struct peer *p, uint64_t until_us)
{
	struct peer_conn *pc = peer_conn_of(p);

	(void)a;
	if (pc->lease != NULL)
		__atomic_store_n(&pc->lease->until_ns, until_us * 1000u, __ATOMIC_RELEASE);
}

static void on_lease_state(struct agent *a, struct peer *p, const struct gq_lease_page_state *m)
{
	int on = (m->flags & GQ_LEASE_PAGE_F_ON) != 0;

	if (peer_conn_of(p)->lease == NULL || (m->flags & ~GQ_LEASE_PAGE_F_ON) || m->reserved) {
		a->n.malformed++;
		proc_log(a, p->proc, LOG_LEVEL_WARN,
			 "pid %d: LEASE_PAGE_STATE ignored: no page offered, or reserved bits set",
			 (int)p->pid);
		return;
	}
	if (on != p->lease_page)
		proc_log(a, p->proc, LOG_LEVEL_DEBUG, "pid %d: lease page %s", (int)p->pid,
			 on ? "taken" : "refused (its log says why); renewals by COMMAND");
	p->lease_page = on;
	p->lease_until_us = 0;
}

void peer_close(struct agent *a, struct peer *p, const char *why)
{
	struct peer_conn *pc = peer_conn_of(p);

	if (pc->w.dead)
		return;
	proc_log(a, p->proc, LOG_LEVEL_INFO, "pid %d: preempt agent disconnected (%s)", (int)p->pid, why);
	if (pc->lease != NULL)
		munmap(pc->lease, GQ_LEASE_PAGE_SIZE);
	pc->lease = NULL;
	p->lease_page = 0;
	cmd_fail_peer(a, p);
	/* Its preempt agent enables every channel it gated when the
	 * connection ends (docs/protocol.md, "Gating"). */
	for (struct tsg *t = a->tsgs; t; t = t->next)
		if (t->pid == p->pid) {
			tsg_gate_note(t, 0, now_us());
			t->gate = (struct tsg_gate){ .no_gate = 1, .last_turn = t->gate.last_turn,
						     .count = t->gate.count,
						     .total_us = t->gate.total_us,
						     .longest_us = t->gate.longest_us };
		}
	a->npeers--;
	if (p->broken)
		a->npeers_broken--;
	if (p->proc->uid)
		p->proc->uid->peers--;
	/* What only it reported is unknown until it reconnects and re-reports;
	 * what the eBPF tracker sees stays. The process (and its class) is kept. */
	tsg_drop_pid(a, p->pid, 0, 0, TSG_SRC_PREEMPT);
	if (p->proc->peer == p)
		p->proc->peer = NULL;
	loop_close(&a->io->loop, peer_watch(p));
	for (struct peer **pp = &a->peers; *pp; pp = &(*pp)->next) {
		if (*pp == p) {
			*pp = p->next;
			break;
		}
	}
	p->next = a->dead_peers;
	a->dead_peers = p;
	a->dirty = 1;
	/* On exit the file keeps the peers, for the next start to wait for. */
	if (!a->exiting)
		state_changed(a);
}

void peer_close_broken(struct agent *a)
{
	struct peer *p = a->npeers_broken ? a->peers : NULL; /* most batches: none */

	while (p) {
		struct peer *next = p->next;

		if (p->broken)
			peer_close(a, p, "send failed");
		p = next;
	}
}

void peer_reap(struct agent *a)
{
	while (a->dead_peers) {
		struct peer *p = a->dead_peers;

		a->dead_peers = p->next;
		free(p);
	}
}

void peer_free_all(struct agent *a)
{
	a->exiting = 1;
	while (a->peers)
		peer_close(a, a->peers, "agent exiting");
	peer_reap(a);
	if (a->io->listen_w.fd >= 0 && a->spare_fd >= 0)
		close(a->spare_fd);
}

static void on_hello(struct agent *a, struct peer *p, const struct gq_hello *m)
{
	char comm[GQ_COMM_LEN + 1];

	memcpy(comm, m->comm, GQ_COMM_LEN);
	comm[GQ_COMM_LEN] = '\0';
	if ((pid_t)m->pid != p->pid)
		proc_log(a, p->proc, LOG_LEVEL_INFO, "pid %d: HELLO claims pid %u (%s); SO_PEERCRED wins",
			 (int)p->pid, m->pid, comm);
	p->hello = 1;
	p->syncing = 1;
	p->gen = ++a->next_gen;
	p->stalled = 0;
	p->can_gate = (m->flags & GQ_HELLO_F_GATE) != 0;
	p->wake_stats = (m->flags & GQ_HELLO_F_WAKE_STATS) != 0;
	p->activity = (m->flags & GQ_HELLO_F_ACTIVITY) != 0;
	p->phase = (m->flags & GQ_HELLO_F_PHASE) != 0;
	p->can_window = (m->flags & GQ_HELLO_F_WINDOW) != 0;
	p->span = (m->flags & GQ_HELLO_F_SPAN) != 0;
	p->window_state = (m->flags & GQ_HELLO_F_WINDOW_STATE) != 0;
	p->memory = (m->flags & GQ_HELLO_F_MEMORY) != 0;
	memory_hello(a, p);
	if (m->flags & GQ_HELLO_F_LEASE_PAGE)
		lease_page_offer(a, p);
	memset(&p->win_state, 0, sizeof(p->win_state));
	/* A new connection has no schedule: the library ended it with the
	 * last one. */
	memset(&p->win, 0, sizeof(p->win));
	p->proc->phase.have = 0;
	proc_log(a, p->proc, LOG_LEVEL_INFO, "pid %d (%s): HELLO lib %u, %u TSGs%s%s%s", (int)p->pid,
		 p->proc->comm, m->lib_version, m->ntsg,
		 (m->flags & GQ_HELLO_F_RECONNECT) ? ", reconnect" : "",
		 p->can_gate ? ", gating" : "",
		 p->activity ? ", counting launches" : "");
	/* Answered right after this batch (reconcile), before the loop waits
	 * again, so TSGs created from here on get the right value at once. */
	p->policy_valid = 0;
	a->dirty = 1;
}

static void on_tsg(struct agent *a, struct peer *p, const struct gq_tsg *m)
{
	if (!procinfo_fd_is(p->pid, m->fd, a->nvidiactl)) {
		a->n.refused_tsg++;
		proc_log(a, p->proc, LOG_LEVEL_WARN, "pid %d: TSG 0x%x/0x%x refused: fd %u is not %s",
			 (int)p->pid, m->h_client, m->h_tsg, m->fd, a->nvidiactl);
		return;
	}
	if (tsg_upsert(a, p->proc, m, p->gen))
		return;
	if (errno != EDQUOT) {
		proc_log(a, p->proc, LOG_LEVEL_ERROR, "pid %d: TSG 0x%x: out of memory", (int)p->pid,
			 m->h_tsg);
		return;
	}
	a->n.claims_refused_limit++;
	proc_log(a, p->proc, LOG_LEVEL_WARN,
		 "pid %d: TSG 0x%x/0x%x refused: over a limit (pid %u of %u claims, uid %u %u of %u, "
		 "agent %zu of %u TSGs); it runs as the driver sets it",
		 (int)p->pid, m->h_client, m->h_tsg, p->proc->claims, AGENT_CLAIMS_PER_PROC,
		 p->proc->uid ? (unsigned)p->proc->uid->uid : 0u,
		 p->proc->uid ? p->proc->uid->claims : 0u, AGENT_CLAIMS_PER_UID, a->ntsgs, AGENT_TSGS_MAX);
}

static void on_tsg_gone(struct agent *a, struct peer *p, const struct gq_tsg_gone *m)
{
	struct tsg *t = tsg_find(a, p->pid, m->h_client, m->h_tsg);

	if (!t) {
		a->n.unknown_tsg_gone++;
		proc_log(a, p->proc, LOG_LEVEL_DEBUG, "pid %d: TSG_GONE for unknown TSG 0x%x", (int)p->pid,
			 m->h_tsg);
		return;
	}
	tsg_drop(a, t);
}

static void on_synced(struct agent *a, struct peer *p, const struct gq_synced *m)
{
	proc_log(a, p->proc, LOG_LEVEL_DEBUG, "pid %d: SYNCED after %u TSGs", (int)p->pid, m->ntsg);
	p->syncing = 0;
	tsg_drop_pid(a, p->pid, 1, p->gen, TSG_SRC_PREEMPT);
	state_peer_synced(a, p->pid);
	a->dirty = 1;
}

#define WAKE_COUNT_MAX (1ull << 53)

/* Why a WAKE cannot be the counts of one library, or NULL. `prev`: the
 * report before it from the same process, or NULL. */
static const char *wake_bad(const struct gq_wake *m, const struct proc *prev)
{
	if ((m->flags & ~GQ_WAKE_F_STOPPED) != 0 || m->reserved != 0)
		return "reserved bits set";
	/* Shown as JSON numbers (doubles): whole up to 2^53. The requests
	 * bound the rest once the checks below passed. */
	if (m->requests > WAKE_COUNT_MAX || m->stops > WAKE_COUNT_MAX || m->wakes > WAKE_COUNT_MAX ||
	    m->not_issued > WAKE_COUNT_MAX)
		return "counts beyond 2^53";
	/* Each judged wake was issued; each wake and each wake not issued
	 * was for a request seen or the one to come. Written so that no sum
	 * overflows. */
	if (m->hits > m->wakes || m->wasted > m->wakes - m->hits ||
	    m->beaten > m->wakes - m->hits - m->wasted)
		return "more wakes judged than issued";
	if (m->wakes > m->requests && m->wakes - m->requests > 1)
		return "more wakes than requests";
	if (m->wakes > m->requests ? m->not_issued != 0
				   : m->not_issued > m->requests - m->wakes &&
					     m->not_issued - (m->requests - m->wakes) > 1)
		return "more wakes not issued than requests";
	if (prev && prev->wake.have &&
	    (m->at_ns < prev->wake.at_ns || m->requests < prev->wake.requests ||
	     m->wakes < prev->wake.wakes || m->hits < prev->wake.hits ||
	     m->wasted < prev->wake.wasted || m->beaten < prev->wake.beaten ||
	     m->not_issued < prev->wake.not_issued || m->stops < prev->wake.stops))
		return "counts went back";
	return NULL;
}

/* A WAKE: kept for ctl and metrics, or dropped and counted; the
 * connection stays either way (docs/protocol.md, "Wake"). */
static void on_wake_report(struct agent *a, struct peer *p, const struct gq_wake *m)
{
	struct proc *pr = p->proc;
	/* Asked only of a peer whose HELLO offered it (peer_send_policy). */
	const char *why = p->wake_stats ? wake_bad(m, pr)
					: "not asked for (no WAKE_STATS in its HELLO)";

	if (why) {
		a->n.bad_wake++;
		proc_log(a, pr, LOG_LEVEL_WARN, "pid %d: WAKE ignored: %s", (int)p->pid, why);
		/* The next report is read on its own. */
		pr->wake.have = 0;
		return;
	}
	pr->wake.have = 1;
	pr->wake.stopped = (m->flags & GQ_WAKE_F_STOPPED) != 0;
	pr->wake.requests = m->requests;
	pr->wake.wakes = m->wakes;
	pr->wake.hits = m->hits;
	pr->wake.wasted = m->wasted;
	pr->wake.beaten = m->beaten;
	pr->wake.not_issued = m->not_issued;
	pr->wake.stops = m->stops;
	pr->wake.at_ns = m->at_ns;
}

/* How far the library's clock may read from ours when its PHASE is read:
 * more, and it is not the same CLOCK_MONOTONIC (a time namespace) or the
 * report sat in the socket too long to place a gap by. */
#define PHASE_CLOCK_SLACK_NS 100000000ull

/* Why a PHASE cannot place the process's requests on our clock, or NULL.
 * span: its POLICY asked for the span (GQ_POLICY_F_SPAN). */
static const char *phase_bad(const struct gq_phase *m, uint64_t now_ns, int span)
{
	if ((m->flags & ~(span ? GQ_PHASE_F_SPAN : 0u)) != 0)
		return "reserved bits set";
	if (!(m->flags & GQ_PHASE_F_SPAN) && m->span_us != 0)
		return "a span without its flag";
	if (m->period_ns < GQ_PHASE_PERIOD_MIN_NS || m->period_ns > GQ_PHASE_PERIOD_MAX_NS)
		return "period out of range (1 ms .. 1 s)";
	if ((m->flags & GQ_PHASE_F_SPAN) &&
	    (m->span_us == 0 || (uint64_t)m->span_us * 1000u > m->period_ns))
		return "span out of range (1 us .. the period)";
	if (m->last_start_ns == 0 || m->last_start_ns > m->at_ns)
		return "no latest start, or one after the report";
	if (m->at_ns - m->last_start_ns > GQ_PHASE_STALE_NS)
		return "latest start more than 2 s before the report";
	if (m->last_start_ns > now_ns + 1000u) /* now_ns is in whole us */
		return "latest start after our clock (in the future)";
	if (m->at_ns > now_ns ? m->at_ns - now_ns > PHASE_CLOCK_SLACK_NS
			      : now_ns - m->at_ns > PHASE_CLOCK_SLACK_NS)
		return "its clock is not ours (more than 100 ms apart)";
	return NULL;
}

/* A PHASE: kept for the rotation (rotate.c), or dropped and counted; the
 * connection stays either way (docs/protocol.md, "Phase"). */
static void on_phase(struct agent *a, struct peer *p, const struct gq_phase *m)
{
	struct proc *pr = p->proc;
	uint64_t now = now_us();
	const char *why = p->phase ? phase_bad(m, now * 1000u, p->wake_stats && p->span)
				   : "not asked for (no PHASE in its HELLO)";

	if (why) {
		a->n.bad_phase++;
		proc_log(a, pr, LOG_LEVEL_WARN, "pid %d: PHASE ignored: %s", (int)p->pid, why);
		pr->phase.have = 0;
		return;
	}
	pr->phase.have = 1;
	pr->phase.period_us = m->period_ns / 1000u;
	pr->phase.period_ns = m->period_ns;
	pr->phase.last_start_us = m->last_start_ns / 1000u;
	pr->phase.span_us = (m->flags & GQ_PHASE_F_SPAN) ? m->span_us : 0;
	pr->phase.rx_us = now;
}

/* A WINDOW_STATE: what the BE's library runs of the schedule it was sent
 * (docs/protocol.md, "Windows"). A bad one is logged and changes nothing;
 * the connection stays. */
static void on_window_state(struct agent *a, struct peer *p, const struct gq_window_state *m)
{
	const char *why = NULL;

	if (!p->window_state)
		why = "not asked for (no WINDOW_STATE in its HELLO)";
	else if ((m->flags & ~(GQ_WINDOW_STATE_F_ON | GQ_WINDOW_STATE_F_REFUSED)) != 0 ||
		 m->reserved != 0)
		why = "reserved bits set";
	else if ((m->flags & GQ_WINDOW_STATE_F_ON) && (m->flags & GQ_WINDOW_STATE_F_REFUSED))
		why = "both running and refused";
	else if (p->win_state.known &&
		 (m->opened < p->win_state.opened || m->skipped < p->win_state.skipped))
		why = "its counts went back";
	if (why) {
		proc_log(a, p->proc, LOG_LEVEL_WARN, "pid %d: WINDOW_STATE ignored: %s", (int)p->pid,
			 why);
		return;
	}
	if ((m->flags & GQ_WINDOW_STATE_F_REFUSED) && !p->win_state.refused)
		proc_log(a, p->proc, LOG_LEVEL_WARN,
			 "pid %d: its preempt agent refused the window schedule (its log says why)",
			 (int)p->pid);
	p->win_state.known = 1;
	p->win_state.on = (m->flags & GQ_WINDOW_STATE_F_ON) != 0;
	p->win_state.refused = (m->flags & GQ_WINDOW_STATE_F_REFUSED) != 0;
	p->win_state.opened = m->opened;
	p->win_state.skipped = m->skipped;
	p->win_state.rx_us = now_us();
}


/* Returns 0, or -1 when the message breaks the protocol. */
static int peer_dispatch(struct agent *a, struct peer *p, const void *buf, size_t n)
{
	const struct gq_hdr *h = buf;
	enum gq_check c = gq_msg_check(buf, n);

	if (c != GQ_CHECK_OK) {
		proc_log(a, p->proc, LOG_LEVEL_WARN, "pid %d: malformed message: %s", (int)p->pid,
			 gq_check_name(c));
		return -1;
	}
	if (!p->hello && h->type != GQ_HELLO) {
		proc_log(a, p->proc, LOG_LEVEL_WARN, "pid %d: message type %u before HELLO", (int)p->pid,
			 h->type);
		return -1;
	}
	switch (h->type) {
	case GQ_HELLO:
		on_hello(a, p, buf);
		return 0;
	case GQ_TSG:
		on_tsg(a, p, buf);
		return 0;
	case GQ_TSG_GONE:
		on_tsg_gone(a, p, buf);
		return 0;
	case GQ_RESULT:
		cmd_result(a, p, buf);
		return 0;
	case GQ_SYNCED:
		on_synced(a, p, buf);
		return 0;
	case GQ_ACTIVITY:
		if (!p->activity) {
			/* A P counts launches only if its HELLO says so. */
			a->n.bad_activity++;
			proc_log(a, p->proc, LOG_LEVEL_WARN,
				 "pid %d: ACTIVITY ignored: not counted (no ACTIVITY in its HELLO)",
				 (int)p->pid);
			return 0;
		}
		lcbusy_report(a, p->proc, buf);
		return 0;
	case GQ_WAKE:
		on_wake_report(a, p, buf);
		return 0;
	case GQ_PHASE:
		on_phase(a, p, buf);
		return 0;
	case GQ_WINDOW_STATE:
		on_window_state(a, p, buf);
		return 0;
	case GQ_MEM_USAGE:
		memory_report(a, p, buf);
		return 0;
	case GQ_LEASE_PAGE_STATE:
		on_lease_state(a, p, buf);
		return 0;
	default: /* POLICY and COMMAND only travel from us to them */
		proc_log(a, p->proc, LOG_LEVEL_WARN,
			 "pid %d: malformed message: type %u is sent by the node agent only",
			 (int)p->pid, h->type);
		return -1;
	}
}

static void on_peer(struct loop_watch *w, uint32_t events)
{
	struct peer *p = &((struct peer_conn *)((char *)w - offsetof(struct peer_conn, w)))->p;
	struct agent *a = w->ctx;
	/* Messages hold 8-byte fields (RM_ALIGN8): read them in place. */
	_Alignas(8) unsigned char buf[GQ_MSG_MAX];

	/* Drain what is queued; stop at EAGAIN. A peer that keeps sending is
	 * bounded by the batch of 64 datagrams per wake-up. */
	for (int i = 0; i < 64 && !w->dead; i++) {
		ssize_t n = recv(w->fd, buf, sizeof(buf), MSG_DONTWAIT | MSG_TRUNC);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			peer_close(a, p, strerror(errno));
			return;
		}
		if (n == 0) {
			peer_close(a, p, "end of stream");
			return;
		}
		/* MSG_TRUNC reports the real size: a longer datagram fails the
		 * length check instead of being read as a short one. */
		if (peer_dispatch(a, p, buf, (size_t)n) != 0) {
			a->n.malformed++;
			peer_close(a, p, "malformed message");
			return;
		}
	}
	if (!w->dead && (events & (EPOLLHUP | EPOLLERR)) && !(events & EPOLLIN))
		peer_close(a, p, "hang-up");
}

/* A refusal by a limit, said at most AGENT_PROC_LOG_BURST times per window
 * for all refused peers together (they have no process entry yet). */
static void refuse_log(struct agent *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void refuse_log(struct agent *a, const char *fmt, ...)
{
	unsigned long dropped;
	char line[384];
	va_list ap;

	a->n.peers_refused++;
	if (!ratelimit_allow(&a->refuse_log, now_us(), AGENT_PROC_LOG_BURST,
			     AGENT_PROC_LOG_WINDOW_MS * 1000ull, &dropped)) {
		a->n.log_suppressed++;
		return;
	}
	if (dropped)
		log_warn("%lu more preempt agent(s) refused by a limit (lines suppressed)", dropped);
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	log_warn("%s", line);
}

/* Tells a connection it is not admitted, then closes it. Its preempt
 * agent may still be sending its greeting: shut for reading first (its
 * sends fail from here on), then drop what it sent, since closing with
 * unread data would reset the connection before REFUSED is read. */
static void peer_refuse(int fd, uint32_t reason)
{
	_Alignas(8) unsigned char drain[GQ_MSG_MAX];
	struct gq_refused m;

	memset(&m, 0, sizeof(m));
	gq_hdr_init(&m.hdr, GQ_REFUSED, 0);
	m.reason = reason;
	m.retry_after_ms = AGENT_REFUSED_RETRY_MS;
	if (send(fd, &m, sizeof(m), MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)sizeof(m))
		log_debug("REFUSED not sent: %s", strerror(errno));
	(void)shutdown(fd, SHUT_RD);
	while (recv(fd, drain, sizeof(drain), MSG_DONTWAIT) > 0)
		;
	close(fd);
}

/* What one class may take of a limit: an LC all of it, any other class
 * all but an eighth, kept for LCs (docs/protocol.md, "Admission"). */
static unsigned limit_for(unsigned max, int lc)
{
	return lc ? max : max - max / 8u;
}

/* Before its /proc is read (class and pod unknown): the agent's total,
 * and standalone its uid's share, LCs' room included. */
static int peer_admit_early(struct agent *a, pid_t pid, const struct uid_use *u)
{
	if (a->npeers >= a->peers_max) {
		refuse_log(a, "pid %d: preempt agent refused: %u preempt agents connected, the limit; "
			      "it runs without gpuqos", (int)pid, a->peers_max);
		return GQ_REFUSED_FULL;
	}
	if (!a->kube && u->peers >= AGENT_PEERS_PER_KEY) {
		refuse_log(a, "pid %d: preempt agent refused: uid %u has %u preempt agents connected, "
			      "the limit per uid; it runs without gpuqos", (int)pid, (unsigned)u->uid,
			   AGENT_PEERS_PER_KEY);
		return GQ_REFUSED_SHARE;
	}
	return 0;
}

/* Connected peers that share p's key: its pod's in Kubernetes mode (a
 * process in no pod: its uid's), its uid's standalone; p's own earlier
 * connection, which p replaces, not counted. */
static unsigned peers_of_key(const struct agent *a, const struct proc *p, const struct uid_use *u)
{
	unsigned n = 0;

	if (!a->kube || !p->pod_uid[0])
		return u->peers - (p->peer && p->uid == u);
	for (const struct peer *q = a->peers; q; q = q->next)
		n += q->proc != p && strcmp(q->proc->pod_uid, p->pod_uid) == 0;
	return n;
}

/* Once its class is known: 0 if p may connect; else the GQ_REFUSED_*
 * reason, said in words. */
static int peer_admit(struct agent *a, const struct proc *p, const struct uid_use *u)
{
	int lc = p->cls == CLASS_LC;
	unsigned total = a->npeers - (p->peer != NULL), key = peers_of_key(a, p, u);
	unsigned max = limit_for(a->peers_max, lc), key_max = limit_for(AGENT_PEERS_PER_KEY, lc);

	if (total >= max) {
		refuse_log(a, "pid %d: preempt agent refused: %u preempt agents connected, the limit "
			      "for class %s (%u of %u are kept for LCs); it runs without gpuqos",
			   (int)p->pid, total, class_name(p->cls), a->peers_max - limit_for(a->peers_max, 0),
			   a->peers_max);
		return GQ_REFUSED_FULL;
	}
	if (key >= key_max) {
		if (a->kube && p->pod_uid[0])
			refuse_log(a, "pid %d: preempt agent refused: pod %s has %u preempt agents "
				      "connected, the limit per pod for class %s; it runs without gpuqos",
				   (int)p->pid, p->pod_uid, key, class_name(p->cls));
		else
			refuse_log(a, "pid %d: preempt agent refused: uid %u has %u preempt agents "
				      "connected, the limit per uid for class %s; it runs without gpuqos",
				   (int)p->pid, (unsigned)u->uid, key, class_name(p->cls));
		return GQ_REFUSED_SHARE;
	}
	return 0;
}

static void peer_identified(struct agent *a, pid_t pid, const struct procinfo *pi, const char *why,
			    void *arg);

/* The connection and its place in accept order, through procinfo's one
 * pointer: its reads end in any order, so two connections of one process
 * (a reconnect) can be identified the other way round. */
_Static_assert(sizeof(uintptr_t) >= 8, "fd and accept order in one pointer");
static void *accept_arg(int fd, uint32_t seq)
{
	return (void *)(((uintptr_t)seq << 32) | (uint32_t)fd);
}

/* A peer whose process we cannot read in /proc cannot be classified or
 * checked: refuse it (fail open: the workload runs untouched). */
static void peer_accept_one(struct agent *a, int fd)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);
	struct uid_use *u;
	int reason;

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || cred.pid <= 0) {
		log_warn("peer without credentials refused: %s", strerror(errno));
		close(fd);
		return;
	}
	u = uid_use_get(a, cred.uid);
	if (!u) {
		close(fd);
		return;
	}
	reason = peer_admit_early(a, cred.pid, u);
	if (reason) {
		peer_refuse(fd, (uint32_t)reason);
		return;
	}
	/* ---- procinfo hook: the facts of its process are read off the loop
	 * (procinfo.h); the rest of the accept waits for them in
	 * peer_identified. The connection is not watched until then. */
	if (procinfo_read_async(a, cred.pid, peer_identified, accept_arg(fd, ++a->peer_accepts)) !=
	    0) {
		log_warn("pid %d: preempt agent refused: its /proc cannot be read now (%s)",
			 (int)cred.pid, procinfo_refusal(errno));
		peer_refuse(fd, GQ_REFUSED_UNREAD);
	}
}

/* The rest of the accept, once procinfo has read the facts of its process. */
static void peer_identified(struct agent *a, pid_t pid, const struct procinfo *pi, const char *why,
			    void *arg)
{
	int fd = (int)(uint32_t)(uintptr_t)arg;
	uint32_t seq = (uint32_t)((uintptr_t)arg >> 32);
	struct ucred cred;
	socklen_t len = sizeof(cred);
	struct uid_use *u;
	struct proc *old;
	struct peer_conn *conn;
	struct peer *p;
	int reason;

	if (!pi) {
		/* Its process exited, /proc is not ours to read, or it holds it. */
		log_warn("pid %d: preempt agent refused: %s", (int)pid, why);
		peer_refuse(fd, GQ_REFUSED_UNREAD);
		return;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 ||
	    !(u = uid_use_get(a, cred.uid))) {
		close(fd);
		return;
	}
	/* ---- end of the procinfo hook */
	conn = calloc(1, sizeof(*conn));
	if (!conn) {
		close(fd);
		return;
	}
	p = &conn->p;
	p->pid = pid;
	conn->w.fd = fd;
	conn->w.fn = on_peer;
	conn->w.ctx = a;
	p->accept_seq = seq;
	/* Identified after a connection its pid made later: stale. Checked
	 * before proc_attach, which would take this one's /proc facts. */
	old = proc_find(a, pid);
	if (old && old->peer && (int32_t)(old->peer->accept_seq - seq) > 0) {
		log_info("pid %d: an older connection of its preempt agent closed (a newer one is "
			 "connected)", (int)pid);
		close(fd);
		free(p);
		return;
	}
	p->proc = proc_attach(a, pid, pi);
	if (!p->proc) {
		close(fd);
		free(p);
		return;
	}
	/* Admitted again, now by its class and pod: others may have been
	 * accepted while it waited. The process stays known either way. */
	reason = peer_admit(a, p->proc, u);
	if (reason) {
		peer_refuse(fd, (uint32_t)reason);
		free(p);
		return;
	}
	if (loop_add(&a->io->loop, &conn->w, EPOLLIN | EPOLLRDHUP) != 0) {
		close(fd);
		free(p);
		return;
	}
	/* A newer connection from the same process supersedes the old one. */
	if (p->proc->peer)
		peer_close(a, p->proc->peer, "superseded by a new connection");
	p->proc->peer = p;
	p->proc->uid = u;
	u->peers++;
	a->npeers++;
	p->next = a->peers;
	a->peers = p;
	a->n.peers_accepted++;
	state_changed(a);
	proc_log(a, p->proc, LOG_LEVEL_INFO, "pid %d (%s): preempt agent connected, class %s (%s)",
		 (int)p->pid, p->proc->comm, class_name(p->proc->cls),
		 class_source_name(p->proc->cls_source));
	/* procinfo hook: what it sent while its facts were read (HELLO, its
	 * TSGs) is taken now, before anything is decided for its process. */
	on_peer(&conn->w, EPOLLIN);
	/* Then what the tracker saw of it while it was read (tracked_proc
	 * left that to this attach): the claims just taken are confirmed. */
	tracker_take_proc(a, pid);
}

/* Out of fds: accept with the spare one freed, close at once, keep a
 * spare again; a pending connection left queued would wake the loop
 * forever. */
static void accept_drop(struct agent *a, int lfd)
{
	int fd;

	if (a->spare_fd >= 0)
		close(a->spare_fd);
	fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	if (fd >= 0)
		close(fd);
	a->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	refuse_log(a, "preempt agent refused: the node agent is out of file descriptors");
}

static void on_listen(struct loop_watch *w, uint32_t events)
{
	struct agent *a = w->ctx;

	(void)events;
	for (;;) {
		int fd = accept4(w->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE) {
				accept_drop(a, w->fd);
				continue;
			}
			if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
				log_warn("accept on %s: %s", a->opt.socket, strerror(errno));
			return;
		}
		peer_accept_one(a, fd);
	}
}

/* AGENT_PEERS_MAX, held below the fd limit so that accepting one more peer
 * never starves the rest of the agent of descriptors. */
static unsigned peers_limit(void)
{
	struct rlimit rl;
	unsigned max = AGENT_PEERS_MAX;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
		rlim_t room = rl.rlim_cur > AGENT_FD_RESERVE ? rl.rlim_cur - AGENT_FD_RESERVE : 1;

		if (room < max)
			max = (unsigned)room;
	}
	return max;
}

int peer_listen(struct agent *a)
{
	int fd;

	a->spare_fd = -1;
	fd = unix_listen(a->opt.socket, SOCK_SEQPACKET, 0666);
	if (fd < 0)
		return -1;
	a->io->listen_w.fd = fd;
	a->io->listen_w.fn = on_listen;
	a->io->listen_w.ctx = a;
	if (loop_add(&a->io->loop, &a->io->listen_w, EPOLLIN) != 0)
		return -1;
	a->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	a->peers_max = peers_limit();
	log_info("preempt agents: listening on %s (at most %u, %u per %s; %u and %u of them kept "
		 "for LCs)", a->opt.socket, a->peers_max, AGENT_PEERS_PER_KEY, a->kube ? "pod" : "uid",
		 a->peers_max - limit_for(a->peers_max, 0),
		 AGENT_PEERS_PER_KEY - limit_for(AGENT_PEERS_PER_KEY, 0));
	return 0;
}
