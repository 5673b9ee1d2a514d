// SPDX-License-Identifier: Apache-2.0
/*
 * tsgtrace.c - user space of gpuqos's RM tracer: loads the generated
 * skeleton, pins its maps and links under bpffs, re-uses what a previous
 * agent left there, and hands events and the live tables to the caller.
 *
 * Owns: attach-mode choice, pin life cycle (reuse, layout check, recreate,
 * link hand-over), the ring buffer consumer, table dumps, counters. Does not
 * own: the event loop, policy, or anything about RM semantics beyond what
 * tsgtrace.h says.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "bpf/tsgtrace_api.h"
#include "common/procstat.h"
#include "tsgtrace.skel.h"

#define BPF_FS_MAGIC_NR 0xcafe4a11
#define PROC_PID_INIT_INO_NR 0xeffffffcu  /* the initial pid namespace */
#define PROC_TIME_INIT_INO_NR 0xeffffffau /* the initial time namespace */
#define VERIFIER_LOG_BYTES (1u << 20)

/* Maps that outlive the agent. tt_scratch and .rodata are per load. */
static const char *const pinned_maps[] = {
	"tt_inflight", "tt_tsgs",   "tt_channels", "tt_tsg_chans", "tt_devices", "tt_clients",
	"tt_owners",   "tt_procs",  "tt_starts",   "tt_events",    "tt_counters", "tt_meta",
};
#define N_PINNED_MAPS (sizeof(pinned_maps) / sizeof(pinned_maps[0]))

/* One pin per attached program, whichever set: the set may change between
 * two agent versions and each new link replaces the old one by name. */
static const char *const link_pins[] = { "link_ioctl_enter", "link_ioctl_exit",
					 "link_process_exit" };
#define N_LINKS 3

struct tsgtrace {
	struct tsgtrace_bpf *skel; /* NULL when dump_only */
	struct ring_buffer *rb;
	struct bpf_link *links[N_LINKS];
	char pin_dir[PATH_MAX - 64];
	const char *mode;
	unsigned int inherited;
	bool detach_on_close;
	/* Borrowed from skel, or owned when dump_only. */
	int tsgs_fd, chans_fd, clients_fd, counters_fd;
	tsgtrace_event_fn ev_fn;
	void *ev_ctx;
	unsigned long long bad_records;
	void (*log)(void *ctx, const char *line);
	void *log_ctx;
};

static void seterr(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void seterr(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

static void logf_(const struct tsgtrace *t, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void logf_(const struct tsgtrace *t, const char *fmt, ...)
{
	char line[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (t->log)
		t->log(t->log_ctx, line);
	else
		fprintf(stderr, "gpuqos-tsgtrace: %s\n", line);
}

static int pin_path(char *buf, size_t len, const char *dir, const char *name)
{
	int n = snprintf(buf, len, "%s/%s", dir, name);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* ------------------------------------------------------------------ */
/* bpffs                                                               */
/* ------------------------------------------------------------------ */

static bool on_bpffs(const char *path)
{
	struct statfs st;

	return statfs(path, &st) == 0 && (unsigned long)st.f_type == BPF_FS_MAGIC_NR;
}

/* Make pin_dir exist on bpffs, mounting bpffs at /sys/fs/bpf if the
 * directory lives there and nothing is mounted (a bare node). */
static int ensure_pin_dir(const char *dir, char *err, size_t errlen)
{
	char parent[PATH_MAX];
	char *slash;

	if (snprintf(parent, sizeof(parent), "%s", dir) >= (int)sizeof(parent)) {
		seterr(err, errlen, "pin directory %s: name too long", dir);
		return -ENAMETOOLONG;
	}
	slash = strrchr(parent, '/');
	if (!slash || slash == parent) {
		seterr(err, errlen, "pin directory %s: must be a subdirectory of a bpffs mount",
		       dir);
		return -EINVAL;
	}
	*slash = '\0';
	if (!on_bpffs(parent) && strcmp(parent, "/sys/fs/bpf") == 0) {
		if (mount("bpf", "/sys/fs/bpf", "bpf", 0, "mode=0700") != 0) {
			int e = errno;

			seterr(err, errlen, "mount bpffs on /sys/fs/bpf: %s", strerror(e));
			return -e;
		}
	}
	if (!on_bpffs(parent)) {
		seterr(err, errlen, "pin directory %s: %s is not on bpffs", dir, parent);
		return -ENOTSUP;
	}
	if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
		int e = errno;

		seterr(err, errlen, "mkdir %s: %s", dir, strerror(e));
		return -e;
	}
	return 0;
}

int tsgtrace_unpin(const char *pin_dir, char *err, size_t errlen)
{
	char path[PATH_MAX];
	size_t i;
	int rc = 0;

	if (!pin_dir)
		pin_dir = TSGTRACE_DEFAULT_PIN_DIR;
	/* Links first: the programs stop before their maps go. */
	for (i = 0; i < N_LINKS + N_PINNED_MAPS; i++) {
		const char *name = i < N_LINKS ? link_pins[i] : pinned_maps[i - N_LINKS];

		if (pin_path(path, sizeof(path), pin_dir, name))
			return -ENAMETOOLONG;
		if (unlink(path) != 0 && errno != ENOENT) {
			rc = -errno;
			seterr(err, errlen, "unlink %s: %s", path, strerror(errno));
		}
	}
	if (rmdir(pin_dir) != 0 && errno != ENOENT && errno != ENOTEMPTY) {
		rc = -errno;
		seterr(err, errlen, "rmdir %s: %s", pin_dir, strerror(errno));
	}
	return rc;
}

/* ------------------------------------------------------------------ */
/* Pinned map compatibility                                            */
/* ------------------------------------------------------------------ */

/* The layout version a tt_meta pin holds is this build's, or one it
 * upgrades in place (TT_LAYOUT_VERSION_UPGRADABLE: only maps were added). */
static bool layout_usable(const struct tt_meta *meta)
{
	return (meta->layout_version == TT_LAYOUT_VERSION ||
		meta->layout_version == TT_LAYOUT_VERSION_UPGRADABLE) &&
	       meta->event_size == sizeof(struct tt_event);
}

/* Why a pinned map cannot be re-used by this build, or NULL if it can;
 * *version gets tt_meta's layout version. */
static const char *pin_mismatch(int fd, const struct bpf_map *m, const char *name,
				unsigned int *version, char *why, size_t whylen)
{
	struct bpf_map_info info;
	__u32 len = sizeof(info);

	memset(&info, 0, sizeof(info));
	if (bpf_obj_get_info_by_fd(fd, &info, &len) != 0) {
		snprintf(why, whylen, "not a map (%s)", strerror(errno));
		return why;
	}
	if (info.type != (__u32)bpf_map__type(m) || info.key_size != bpf_map__key_size(m) ||
	    info.value_size != bpf_map__value_size(m) ||
	    info.max_entries != bpf_map__max_entries(m) ||
	    info.map_flags != bpf_map__map_flags(m)) {
		snprintf(why, whylen,
			 "type/key/value/entries/flags %u/%u/%u/%u/0x%x, this build wants "
			 "%u/%u/%u/%u/0x%x",
			 info.type, info.key_size, info.value_size, info.max_entries,
			 info.map_flags, (unsigned)bpf_map__type(m), bpf_map__key_size(m),
			 bpf_map__value_size(m), bpf_map__max_entries(m), bpf_map__map_flags(m));
		return why;
	}
	if (strcmp(name, "tt_meta") == 0) {
		struct tt_meta meta;
		__u32 zero = 0;

		if (bpf_map_lookup_elem(fd, &zero, &meta) != 0) {
			snprintf(why, whylen, "unreadable (%s)", strerror(errno));
			return why;
		}
		*version = meta.layout_version;
		if (!layout_usable(&meta)) {
			snprintf(why, whylen, "layout version %u (event %u bytes), this build has %u (%zu)",
				 meta.layout_version, meta.event_size, TT_LAYOUT_VERSION,
				 sizeof(struct tt_event));
			return why;
		}
	}
	return NULL;
}

/* Check every pin a previous agent left. If any cannot be re-used, remove
 * them all: half-old tables would contradict each other. */
static int check_pins(struct tsgtrace *t, char *err, size_t errlen)
{
	char path[PATH_MAX], why[256];
	bool any = false, meta = false, bad = false;
	unsigned int version = TT_LAYOUT_VERSION;
	size_t i;

	for (i = 0; i < N_PINNED_MAPS && !bad; i++) {
		const struct bpf_map *m =
			bpf_object__find_map_by_name(t->skel->obj, pinned_maps[i]);
		int fd;

		if (!m) {
			seterr(err, errlen, "map %s missing from the BPF object", pinned_maps[i]);
			return -ENOENT;
		}
		if (pin_path(path, sizeof(path), t->pin_dir, pinned_maps[i]))
			return -ENAMETOOLONG;
		fd = bpf_obj_get(path);
		if (fd < 0) {
			if (errno == ENOENT)
				continue;
			snprintf(why, sizeof(why), "cannot open (%s)", strerror(errno));
			bad = true;
			break;
		}
		any = true;
		if (strcmp(pinned_maps[i], "tt_meta") == 0)
			meta = true;
		if (pin_mismatch(fd, m, pinned_maps[i], &version, why, sizeof(why)))
			bad = true;
		close(fd);
	}
	if (!bad && any && !meta) {
		snprintf(path, sizeof(path), "%s", t->pin_dir);
		snprintf(why, sizeof(why), "no tt_meta pin: unknown layout");
		bad = true;
	}
	if (!bad) {
		if (any)
			t->inherited |= TSGTRACE_INHERITED_TABLES;
		if (any && version != TT_LAYOUT_VERSION)
			logf_(t, "pinned tables of layout version %u under %s kept and upgraded to %u: "
			      "channels made before now are not known (their TSGs' gates are their "
			      "preempt agents' word), nor when the processes that made them started",
			      version, t->pin_dir, TT_LAYOUT_VERSION);
		return 0;
	}
	logf_(t, "pinned map %s does not match this build: %s; removing every pin under %s "
	      "and starting with empty live tables (TSGs created before now are not known "
	      "until they are used)", path, why, t->pin_dir);
	if (tsgtrace_unpin(t->pin_dir, err, errlen) != 0)
		return -EIO;
	if (mkdir(t->pin_dir, 0700) != 0 && errno != EEXIST) {
		seterr(err, errlen, "mkdir %s: %s", t->pin_dir, strerror(errno));
		return -errno;
	}
	t->inherited |= TSGTRACE_RECREATED;
	return 0;
}

/* Walk a hash map's keys, each visited with its next key already in hand,
 * so that fn may delete it. At most limit steps: a walk whose key was
 * deleted by someone else starts again from the first (a hash map
 * property), and must still end. The steps taken. */
static unsigned int walk_keys(int fd, size_t ksz, unsigned int limit,
			      void (*fn)(void *ctx, int fd, const void *key), void *ctx)
{
	unsigned char key[64], next[64];
	unsigned int steps = 0;
	bool more;

	if (fd < 0 || ksz > sizeof(key))
		return 0;
	more = bpf_map_get_next_key(fd, NULL, key) == 0;
	while (more && steps < limit) {
		steps++;
		more = bpf_map_get_next_key(fd, key, next) == 0;
		fn(ctx, fd, key);
		memcpy(key, next, ksz);
	}
	return steps;
}

/* What the dead-process sweep learnt of each tgid of tt_procs. */
struct fate {
	__u32 tgid;
	bool gone;
};

struct sweep {
	struct fate *fates; /* sorted by tgid once tt_procs is read */
	size_t n, cap;
	long tick_ns;       /* ns per clock tick; 0: start times not compared */
	int starts_fd, tsgs_fd;
	unsigned int removed, reused, orphans;
};

static int fate_cmp(const void *a, const void *b)
{
	const struct fate *x = a, *y = b;

	return x->tgid < y->tgid ? -1 : x->tgid > y->tgid;
}

/* tgid is no longer the process the tables knew: it exited, or its pid
 * now names another process (a start time other than the one recorded). */
static bool tgid_gone(struct sweep *w, __u32 tgid, __u64 start_ns)
{
	uint64_t st;

	if (tgid == 0 || (kill((pid_t)tgid, 0) != 0 && errno == ESRCH))
		return true;
	if (start_ns == 0 || w->tick_ns <= 0)
		return false;
	if (procstat_starttime((pid_t)tgid, &st) != 0)
		return errno == ENOENT;
	if (st == start_ns / (uint64_t)w->tick_ns)
		return false;
	w->reused++;
	return true;
}

static void sweep_proc(void *ctx, int fd, const void *key)
{
	struct sweep *w = ctx;
	__u64 start = 0; /* none recorded (pins of an older layout): exit alone */
	__u32 tgid;

	memcpy(&tgid, key, sizeof(tgid));
	if (w->n == w->cap)
		return;
	if (bpf_map_lookup_elem(w->starts_fd, key, &start) != 0)
		start = 0;
	w->fates[w->n].tgid = tgid;
	w->fates[w->n].gone = tgid_gone(w, tgid, start);
	if (w->fates[w->n].gone && bpf_map_delete_elem(fd, key) == 0)
		w->removed++;
	w->n++;
}

/* A tgid tt_procs does not hold (its client insert failed): alive is all
 * that can be told. */
static bool fate_of(struct sweep *w, __u32 tgid)
{
	struct fate k = { .tgid = tgid }, *f;

	f = w->n ? bsearch(&k, w->fates, w->n, sizeof(*f), fate_cmp) : NULL;
	return f ? f->gone : tgid_gone(w, tgid, 0);
}

/* Entries keyed by tgid first (tt_obj_key, tt_client_key). */
static void sweep_entry(void *ctx, int fd, const void *key)
{
	struct sweep *w = ctx;
	__u32 tgid;

	memcpy(&tgid, key, sizeof(tgid));
	if (fate_of(w, tgid) && bpf_map_delete_elem(fd, key) == 0)
		w->removed++;
}

/* tt_owners: client handle -> owner tgid. */
static void sweep_owner(void *ctx, int fd, const void *key)
{
	struct sweep *w = ctx;
	__u32 owner;

	if (bpf_map_lookup_elem(fd, key, &owner) == 0 && fate_of(w, owner) &&
	    bpf_map_delete_elem(fd, key) == 0)
		w->removed++;
}

/* A channel whose TSG the table no longer holds (a free another program
 * set handled during a hand-over, a sweep that raced an insert): never
 * reported. */
static void sweep_orphan_chan(void *ctx, int fd, const void *key)
{
	struct sweep *w = ctx;
	struct tt_obj_key k;
	struct tt_chan_val v;
	struct tt_tsg_val tv;

	memcpy(&k, key, sizeof(k));
	if (bpf_map_lookup_elem(fd, key, &v) != 0)
		return;
	k.handle = v.hTsg;
	if (bpf_map_lookup_elem(w->tsgs_fd, &k, &tv) != 0 && errno == ENOENT &&
	    bpf_map_delete_elem(fd, key) == 0)
		w->orphans++;
}

/* A channel count (tt_tsg_chans) of a TSG the table no longer holds. */
static void sweep_orphan_count(void *ctx, int fd, const void *key)
{
	struct sweep *w = ctx;
	struct tt_tsg_val tv;

	if (bpf_map_lookup_elem(w->tsgs_fd, key, &tv) != 0 && errno == ENOENT &&
	    bpf_map_delete_elem(fd, key) == 0)
		w->orphans++;
}

/* The tick /proc's start times count in, when they compare with the
 * kernel's own: not in a time namespace of its own, whose boot time is
 * shifted. 0: not comparable. */
static long start_tick_ns(void)
{
	struct stat st;
	long hz = sysconf(_SC_CLK_TCK);

	if (hz <= 0 || 1000000000L % hz != 0)
		return 0;
	if (stat("/proc/self/ns/time", &st) == 0 && st.st_ino != PROC_TIME_INIT_INO_NR)
		return 0;
	return 1000000000L / hz;
}

/* Forget processes that are gone while no program watched
 * (detach_on_close, a node where the tracer ran before, an exit the ring
 * or a table missed): exited, or their tgid reused by another process
 * (tt_starts records each one's start). Channels whose TSG is gone go
 * too, wherever the agent runs. Only in the initial pid namespace:
 * the tables hold host tgids. Every walk is bounded by its map's size. */
static void sweep_dead(struct tsgtrace *t)
{
	static const char *const keyed[] = { "tt_tsgs",    "tt_channels", "tt_tsg_chans",
					     "tt_devices", "tt_clients",  "tt_starts" };
	struct sweep w = { .tick_ns = start_tick_ns(),
			   .starts_fd = bpf_map__fd(t->skel->maps.tt_starts),
			   .tsgs_fd = bpf_map__fd(t->skel->maps.tt_tsgs) };
	const struct bpf_map *m;
	struct stat st;
	size_t i;

	m = t->skel->maps.tt_channels;
	walk_keys(bpf_map__fd(m), bpf_map__key_size(m), 2 * bpf_map__max_entries(m),
		  sweep_orphan_chan, &w);
	m = t->skel->maps.tt_tsg_chans;
	walk_keys(bpf_map__fd(m), bpf_map__key_size(m), 2 * bpf_map__max_entries(m),
		  sweep_orphan_count, &w);
	if (w.orphans)
		logf_(t, "forgot %u channel entries whose TSG the table no longer holds", w.orphans);
	if (stat("/proc/self/ns/pid", &st) != 0 || st.st_ino != PROC_PID_INIT_INO_NR)
		return;
	m = t->skel->maps.tt_procs;
	w.cap = bpf_map__max_entries(m);
	w.fates = calloc(w.cap, sizeof(*w.fates));
	if (!w.fates) {
		logf_(t, "no memory to sweep the tables of processes gone while detached");
		return;
	}
	walk_keys(bpf_map__fd(m), bpf_map__key_size(m), 2 * w.cap, sweep_proc, &w);
	qsort(w.fates, w.n, sizeof(*w.fates), fate_cmp);
	for (i = 0; i < sizeof(keyed) / sizeof(keyed[0]); i++) {
		m = bpf_object__find_map_by_name(t->skel->obj, keyed[i]);
		if (m)
			walk_keys(bpf_map__fd(m), bpf_map__key_size(m), 2 * bpf_map__max_entries(m),
				  sweep_entry, &w);
	}
	m = t->skel->maps.tt_owners;
	walk_keys(bpf_map__fd(m), bpf_map__key_size(m), 2 * bpf_map__max_entries(m), sweep_owner,
		  &w);
	if (w.removed)
		logf_(t, "forgot %u table entries of processes gone while detached (%u tgid(s) "
		      "reused by another process)", w.removed, w.reused);
	free(w.fates);
}

/* ------------------------------------------------------------------ */
/* Attach                                                              */
/* ------------------------------------------------------------------ */

static bool tracefs_has_ioctl(void)
{
	return access("/sys/kernel/tracing/events/syscalls/sys_enter_ioctl/id", R_OK) == 0 ||
	       access("/sys/kernel/debug/tracing/events/syscalls/sys_enter_ioctl/id", R_OK) == 0;
}

/* The verifier's last lines, cut at a line start, for an error message. */
static void verifier_tail(const char *log, char *out, size_t outlen)
{
	size_t n = strlen(log);
	const char *p = log;

	while (n && log[n - 1] == '\n')
		n--;
	if (n + 1 > outlen) {
		p = log + n - (outlen - 1);
		while (*p && *p != '\n' && p < log + n)
			p++;
		if (*p == '\n')
			p++;
	}
	snprintf(out, outlen, "%.*s", (int)(log + n - p), p);
}

static int pin_link(struct tsgtrace *t, struct bpf_link *l, const char *name, char *err,
		    size_t errlen)
{
	char path[PATH_MAX], tmp[PATH_MAX];
	int rc;

	if (pin_path(path, sizeof(path), t->pin_dir, name) ||
	    snprintf(tmp, sizeof(tmp), "%s_new", path) /* bpffs refuses dots */ >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	if (unlink(tmp) != 0 && errno != ENOENT) {
		seterr(err, errlen, "unlink %s: %s", tmp, strerror(errno));
		return -errno;
	}
	rc = bpf_link__pin(l, tmp);
	if (rc) {
		seterr(err, errlen, "pin link %s: %s", tmp, strerror(-rc));
		return rc;
	}
	/* Atomic hand-over: the old link loses its last reference here and
	 * detaches, after the new one is attached. Between the two both run;
	 * the shared in-flight map makes each call reported once. */
	if (rename(tmp, path) != 0) {
		rc = -errno;
		seterr(err, errlen, "rename %s to %s: %s", tmp, path, strerror(errno));
		return rc;
	}
	return 0;
}

static int load_and_attach(struct tsgtrace *t, const struct tsgtrace_opts *o, bool tracepoint,
			   char *err, size_t errlen)
{
	LIBBPF_OPTS(bpf_object_open_opts, oo);
	struct bpf_program *progs[N_LINKS];
	char path[PATH_MAX], *vlog;
	size_t i;
	int rc;

	vlog = calloc(1, VERIFIER_LOG_BYTES);
	if (!vlog) {
		seterr(err, errlen, "out of memory");
		return -ENOMEM;
	}
	oo.kernel_log_buf = vlog;
	oo.kernel_log_size = VERIFIER_LOG_BYTES;
	t->skel = tsgtrace_bpf__open_opts(&oo);
	if (!t->skel) {
		rc = -errno;
		seterr(err, errlen, "open BPF object: %s", strerror(errno));
		goto out;
	}
	t->skel->rodata->targ_tgid = o->target_tgid;
	t->skel->rodata->ioctl_nr = SYS_ioctl;
	t->skel->rodata->report_failures = o->report_failures;
	t->skel->rodata->test_verifier_reject = o->test_verifier_reject;

	if (o->test_ring_bytes) {
		rc = bpf_map__set_max_entries(t->skel->maps.tt_events, o->test_ring_bytes);
		if (rc) {
			seterr(err, errlen, "ring size %u: %s", o->test_ring_bytes, strerror(-rc));
			goto out;
		}
	}
	bpf_program__set_autoload(t->skel->progs.tp_enter_ioctl, tracepoint);
	bpf_program__set_autoload(t->skel->progs.tp_exit_ioctl, tracepoint);
	bpf_program__set_autoload(t->skel->progs.tp_process_exit, tracepoint);
	bpf_program__set_autoload(t->skel->progs.btf_sys_enter, !tracepoint);
	bpf_program__set_autoload(t->skel->progs.btf_sys_exit, !tracepoint);
	bpf_program__set_autoload(t->skel->progs.btf_process_exit, !tracepoint);

	rc = check_pins(t, err, errlen);
	if (rc)
		goto out;
	for (i = 0; i < N_PINNED_MAPS; i++) {
		struct bpf_map *m = bpf_object__find_map_by_name(t->skel->obj, pinned_maps[i]);

		if (pin_path(path, sizeof(path), t->pin_dir, pinned_maps[i]) || !m) {
			rc = -EINVAL;
			goto out;
		}
		rc = bpf_map__set_pin_path(m, path);
		if (rc) {
			seterr(err, errlen, "set pin path %s: %s", path, strerror(-rc));
			goto out;
		}
	}

	rc = tsgtrace_bpf__load(t->skel);
	if (rc) {
		char tail[1024];

		verifier_tail(vlog, tail, sizeof(tail));
		seterr(err, errlen, "load BPF programs (%s set): %s%s%s",
		       tracepoint ? "tracepoint" : "tp_btf", strerror(-rc),
		       tail[0] ? "; verifier says:\n" : "", tail);
		/* libbpf pinned fresh maps before the programs failed; their
		 * tt_meta is still empty. Leave no half-made pin set behind. */
		if (!(t->inherited & TSGTRACE_INHERITED_TABLES))
			(void)tsgtrace_unpin(t->pin_dir, NULL, 0);
		goto out;
	}
	{
		struct tt_meta meta = { .layout_version = TT_LAYOUT_VERSION,
					.event_size = sizeof(struct tt_event) };
		__u32 zero = 0;

		if (bpf_map_update_elem(bpf_map__fd(t->skel->maps.tt_meta), &zero, &meta,
					BPF_ANY) != 0) {
			rc = -errno;
			seterr(err, errlen, "write tt_meta: %s", strerror(errno));
			goto out;
		}
	}

	for (i = 0; i < N_LINKS; i++) {
		if (pin_path(path, sizeof(path), t->pin_dir, link_pins[i]))
			continue;
		if (access(path, F_OK) == 0)
			t->inherited |= TSGTRACE_INHERITED_LINKS;
	}
	progs[0] = tracepoint ? t->skel->progs.tp_enter_ioctl : t->skel->progs.btf_sys_enter;
	progs[1] = tracepoint ? t->skel->progs.tp_exit_ioctl : t->skel->progs.btf_sys_exit;
	progs[2] = tracepoint ? t->skel->progs.tp_process_exit : t->skel->progs.btf_process_exit;
	/* Exit hooks first: an enter recorded before its exit hook exists
	 * would sit in the in-flight map until the thread's next ioctl. */
	for (i = N_LINKS; i-- > 0;) {
		t->links[i] = bpf_program__attach(progs[i]);
		if (!t->links[i]) {
			rc = -errno;
			seterr(err, errlen, "attach %s: %s%s", bpf_program__name(progs[i]),
			       strerror(errno),
			       tracepoint ? " (is tracefs mounted on /sys/kernel/tracing?)" : "");
			goto out;
		}
	}
	for (i = 0; i < N_LINKS; i++) {
		rc = pin_link(t, t->links[i], link_pins[i], err, errlen);
		if (rc)
			goto out;
	}
	rc = 0;
out:
	free(vlog);
	return rc;
}

static void drop_skel(struct tsgtrace *t)
{
	size_t i;

	for (i = 0; i < N_LINKS; i++) {
		bpf_link__destroy(t->links[i]); /* a pinned link stays attached */
		t->links[i] = NULL;
	}
	tsgtrace_bpf__destroy(t->skel);
	t->skel = NULL;
}

static int ring_cb(void *ctx, void *data, size_t size)
{
	struct tsgtrace *t = ctx;

	if (size != sizeof(struct tt_event)) {
		t->bad_records++;
		return 0;
	}
	return t->ev_fn ? t->ev_fn(t->ev_ctx, data) : 0;
}

static int open_dump_only(struct tsgtrace *t, char *err, size_t errlen)
{
	/* tt_channels is absent from the pins of an older layout. */
	const char *names[] = { "tt_tsgs", "tt_channels", "tt_clients", "tt_counters", "tt_meta" };
	int *fds[] = { &t->tsgs_fd, &t->chans_fd, &t->clients_fd, &t->counters_fd, NULL };
	char path[PATH_MAX];
	size_t i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		int fd;

		if (pin_path(path, sizeof(path), t->pin_dir, names[i]))
			return -ENAMETOOLONG;
		fd = bpf_obj_get(path);
		if (fd < 0 && errno == ENOENT && fds[i] == &t->chans_fd)
			continue;
		if (fd < 0) {
			int e = errno;

			seterr(err, errlen, "open %s: %s%s", path, strerror(e),
			       e == ENOENT ? " (no tracer has run with this pin directory)" : "");
			return -e;
		}
		if (fds[i]) {
			*fds[i] = fd;
		} else {
			struct tt_meta meta;
			__u32 zero = 0;
			int rc = bpf_map_lookup_elem(fd, &zero, &meta);

			close(fd);
			if (rc != 0 || !layout_usable(&meta)) {
				seterr(err, errlen, "%s: pinned tables have another layout than "
				       "this build (%u, want %u)", path,
				       rc ? 0 : meta.layout_version, TT_LAYOUT_VERSION);
				return -EPROTO;
			}
		}
	}
	t->inherited |= TSGTRACE_INHERITED_TABLES;
	return 0;
}

struct tsgtrace *tsgtrace_open(const struct tsgtrace_opts *o, char *err, size_t errlen)
{
	struct tsgtrace_opts defaults;
	struct tsgtrace *t;
	bool tracepoint;
	int rc;

	if (!o) {
		memset(&defaults, 0, sizeof(defaults));
		o = &defaults;
	}
	t = calloc(1, sizeof(*t));
	if (!t) {
		seterr(err, errlen, "out of memory");
		return NULL;
	}
	t->tsgs_fd = t->chans_fd = t->clients_fd = t->counters_fd = -1;
	t->log = o->log;
	t->log_ctx = o->log_ctx;
	t->detach_on_close = o->detach_on_close;
	t->mode = "none";
	if (snprintf(t->pin_dir, sizeof(t->pin_dir), "%s",
		     o->pin_dir ? o->pin_dir : TSGTRACE_DEFAULT_PIN_DIR) >= (int)sizeof(t->pin_dir)) {
		seterr(err, errlen, "pin directory name too long");
		goto fail;
	}
	if (o->dump_only) {
		if (open_dump_only(t, err, errlen))
			goto fail;
		return t;
	}
	if (ensure_pin_dir(t->pin_dir, err, errlen))
		goto fail;

	tracepoint = o->mode == TSGTRACE_MODE_TRACEPOINT ||
		     (o->mode == TSGTRACE_MODE_AUTO && tracefs_has_ioctl());
	rc = load_and_attach(t, o, tracepoint, err, errlen);
	if (rc && tracepoint && o->mode == TSGTRACE_MODE_AUTO) {
		logf_(t, "syscall tracepoints failed (%s); falling back to tp_btf", err);
		drop_skel(t);
		t->inherited = 0;
		tracepoint = false;
		rc = load_and_attach(t, o, tracepoint, err, errlen);
	}
	if (rc)
		goto fail;
	t->mode = tracepoint ? "tracepoint" : "tp_btf";
	t->tsgs_fd = bpf_map__fd(t->skel->maps.tt_tsgs);
	t->chans_fd = bpf_map__fd(t->skel->maps.tt_channels);
	t->clients_fd = bpf_map__fd(t->skel->maps.tt_clients);
	t->counters_fd = bpf_map__fd(t->skel->maps.tt_counters);
	sweep_dead(t);

	t->rb = ring_buffer__new(bpf_map__fd(t->skel->maps.tt_events), ring_cb, t, NULL);
	if (!t->rb) {
		seterr(err, errlen, "ring buffer: %s", strerror(errno));
		goto fail;
	}
	return t;
fail:
	tsgtrace_close(t);
	return NULL;
}

int tsgtrace_fd(const struct tsgtrace *t)
{
	return t && t->rb ? ring_buffer__epoll_fd(t->rb) : -1;
}

int tsgtrace_consume(struct tsgtrace *t, tsgtrace_event_fn fn, void *ctx)
{
	int n;

	if (!t || !t->rb)
		return -EINVAL;
	t->ev_fn = fn;
	t->ev_ctx = ctx;
	n = ring_buffer__consume(t->rb);
	t->ev_fn = NULL;
	t->ev_ctx = NULL;
	return n;
}

/* Walk a hash map by key; an entry deleted under us is skipped. At most
 * limit entries (the map's capacity): a walk that a concurrent delete
 * sent back to the first key still ends. */
static int walk(int fd, size_t ksz, size_t vsz, unsigned int limit,
		int (*fn)(void *, const void *, const void *), void *ctx)
{
	unsigned char key[64], next[64], val[64];
	bool first = true;
	unsigned int n = 0;
	int rc;

	if (fd < 0 || ksz > sizeof(key) || vsz > sizeof(val))
		return -EINVAL;
	while (n < limit && bpf_map_get_next_key(fd, first ? NULL : key, next) == 0) {
		first = false;
		memcpy(key, next, ksz);
		if (bpf_map_lookup_elem(fd, key, val) != 0)
			continue;
		n++;
		rc = fn(ctx, key, val);
		if (rc < 0)
			return rc;
	}
	return n == limit || errno == ENOENT || first ? (int)n : -errno;
}

/* The callbacks take typed keys and values; walk() hands out bytes. */
struct walk_fn {
	union {
		tsgtrace_tsg_fn tsg;
		tsgtrace_chan_fn chan;
		tsgtrace_client_fn client;
	} fn;
	void *ctx;
};

static int walk_tsg_cb(void *c, const void *k, const void *v)
{
	const struct walk_fn *w = c;

	return w->fn.tsg(w->ctx, k, v);
}

static int walk_chan_cb(void *c, const void *k, const void *v)
{
	const struct walk_fn *w = c;

	return w->fn.chan(w->ctx, k, v);
}

static int walk_client_cb(void *c, const void *k, const void *v)
{
	const struct walk_fn *w = c;

	return w->fn.client(w->ctx, k, v);
}

int tsgtrace_dump(struct tsgtrace *t, tsgtrace_tsg_fn fn, void *ctx)
{
	struct walk_fn w = { .fn.tsg = fn, .ctx = ctx };

	if (!t || !fn)
		return -EINVAL;
	return walk(t->tsgs_fd, sizeof(struct tt_obj_key), sizeof(struct tt_tsg_val), TT_MAX_TSGS,
		    walk_tsg_cb, &w);
}

int tsgtrace_dump_channels(struct tsgtrace *t, tsgtrace_chan_fn fn, void *ctx)
{
	struct walk_fn w = { .fn.chan = fn, .ctx = ctx };

	if (!t || !fn)
		return -EINVAL;
	if (t->chans_fd < 0 && !t->skel)
		return 0; /* dump_only on pins of an older layout: no channel table */
	return walk(t->chans_fd, sizeof(struct tt_obj_key), sizeof(struct tt_chan_val),
		    TT_MAX_CHANNELS, walk_chan_cb, &w);
}

int tsgtrace_dump_clients(struct tsgtrace *t, tsgtrace_client_fn fn, void *ctx)
{
	struct walk_fn w = { .fn.client = fn, .ctx = ctx };

	if (!t || !fn)
		return -EINVAL;
	return walk(t->clients_fd, sizeof(struct tt_client_key), sizeof(struct tt_client_val),
		    TT_MAX_CLIENTS, walk_client_cb, &w);
}

int tsgtrace_counters(const struct tsgtrace *t, struct tsgtrace_counters *c)
{
	int ncpu = libbpf_num_possible_cpus();
	__u64 *vals;
	__u32 i;
	int cpu;

	if (!t || !c || t->counters_fd < 0)
		return -EINVAL;
	if (ncpu <= 0)
		return ncpu < 0 ? ncpu : -EINVAL;
	vals = calloc((size_t)ncpu, sizeof(*vals));
	if (!vals)
		return -ENOMEM;
	memset(c, 0, sizeof(*c));
	for (i = 0; i < TT_CNT_MAX; i++) {
		if (bpf_map_lookup_elem(t->counters_fd, &i, vals) != 0) {
			int e = errno;

			free(vals);
			return -e;
		}
		for (cpu = 0; cpu < ncpu; cpu++)
			c->v[i] += vals[cpu];
	}
	c->bad_records = t->bad_records;
	free(vals);
	return 0;
}

const char *tsgtrace_counter_name(unsigned int which)
{
	static const char *const names[TT_CNT_MAX] = {
		[TT_CNT_RINGBUF_FULL] = "ringbuf_full",
		[TT_CNT_READ_FAULT] = "read_fault",
		[TT_CNT_ALLOC_PARAMS_FAULT] = "params_fault",
		[TT_CNT_INFLIGHT_FULL] = "inflight_full",
		[TT_CNT_LIVE_FULL] = "live_table_full",
		[TT_CNT_RM_CALLS] = "rm_calls",
		[TT_CNT_EVENTS] = "events",
		[TT_CNT_XFER_OTHER] = "xfer_other",
	};

	return which < TT_CNT_MAX && names[which] ? names[which] : "unknown";
}

const char *tsgtrace_attach_mode(const struct tsgtrace *t)
{
	return t ? t->mode : "none";
}

unsigned int tsgtrace_inherited(const struct tsgtrace *t)
{
	return t ? t->inherited : 0;
}

void tsgtrace_close(struct tsgtrace *t)
{
	char path[PATH_MAX];
	size_t i;

	if (!t)
		return;
	ring_buffer__free(t->rb);
	if (t->detach_on_close && t->skel) {
		for (i = 0; i < N_LINKS; i++) {
			if (!t->links[i] || pin_path(path, sizeof(path), t->pin_dir, link_pins[i]))
				continue;
			if (unlink(path) != 0 && errno != ENOENT)
				logf_(t, "unlink %s: %s", path, strerror(errno));
		}
	}
	if (t->skel) {
		drop_skel(t);
	} else {
		if (t->tsgs_fd >= 0)
			close(t->tsgs_fd);
		if (t->chans_fd >= 0)
			close(t->chans_fd);
		if (t->clients_fd >= 0)
			close(t->clients_fd);
		if (t->counters_fd >= 0)
			close(t->counters_fd);
	}
	free(t);
}
