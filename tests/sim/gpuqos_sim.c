/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpuqos_sim.c - gpuqos-sim, a FUSE file system that stands in for an
 * NVIDIA GPU in tests: `nvidiactl` answers the RM ioctls gpuqos and libcuda
 * use, `state` and `log` show the simulator's truth as JSON, `control`
 * takes injections.
 *
 *   gpuqos-sim MOUNTPOINT [--gpus N] [--foreground] [--max-threads N] [--fb-mib N]
 *              [--log-capacity N] [--unsupported CMD-HEX]...
 *
 * Owns: the mount, its five inodes, command-line parsing and the FUSE
 * loop. Does not own: the ioctl path (sim_ioctl.c), the RM model
 * (sim_rm.c), injections (sim_inject.c) or the call log (sim_log.c).
 * See docs/simulator.md.
 */
#include "sim_ioctl.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

enum sim_ino {
	SIM_INO_ROOT = FUSE_ROOT_ID,
	SIM_INO_NVIDIACTL,
	SIM_INO_STATE,
	SIM_INO_LOG,
	SIM_INO_CONTROL,
	SIM_INO_SLOW,
	SIM_INO_END,
};

struct sim_node {
	const char *name;
	mode_t mode;
};

/* The kernel enforces these modes (default_permissions): anyone may use
 * nvidiactl like the real device node; only root changes injections. */
static const struct sim_node sim_nodes[SIM_INO_END] = {
	[SIM_INO_ROOT] = { ".", S_IFDIR | 0755 },
	[SIM_INO_NVIDIACTL] = { "nvidiactl", S_IFREG | 0666 },
	[SIM_INO_STATE] = { "state", S_IFREG | 0444 },
	[SIM_INO_LOG] = { "log", S_IFREG | 0444 },
	[SIM_INO_CONTROL] = { "control", S_IFREG | 0644 },
	[SIM_INO_SLOW] = { "slow", S_IFREG | 0444 },
};

/* `slow`: one page a test maps into a process. While "hold-reads" is in
 * force its reads are not answered until "release-reads", so whoever
 * touches the mapping (a fault, or another process reading it through
 * /proc/<pid>/environ placed there) waits on that process. */
#define SIM_SLOW_SIZE 4096u

struct sim_parked {
	struct sim_parked *next;
	fuse_req_t req;
	size_t size;
	off_t off;
};

static pthread_mutex_t sim_slow_lock = PTHREAD_MUTEX_INITIALIZER;
static int sim_slow_hold;
static struct sim_parked *sim_slow_parked;

static struct sim_ctx sim;

static void sim_stat(fuse_ino_t ino, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	st->st_mode = sim_nodes[ino].mode;
	st->st_nlink = S_ISDIR(st->st_mode) ? 2 : 1;
	if (ino == SIM_INO_SLOW)
		st->st_size = SIM_SLOW_SIZE;
}

static int sim_ino_valid(fuse_ino_t ino)
{
	return ino >= SIM_INO_ROOT && ino < SIM_INO_END;
}

static void sim_op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fuse_entry_param e;

	if (parent != SIM_INO_ROOT)
		goto missing;
	for (fuse_ino_t ino = SIM_INO_NVIDIACTL; ino < SIM_INO_END; ino++) {
		if (strcmp(name, sim_nodes[ino].name) != 0)
			continue;
		memset(&e, 0, sizeof(e));
		e.ino = ino;
		e.attr_timeout = 1.0;
		e.entry_timeout = 1.0;
		sim_stat(ino, &e.attr);
		fuse_reply_entry(req, &e);
		return;
	}
missing:
	fuse_reply_err(req, ENOENT);
}

static void sim_op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct stat st;

	if (!sim_ino_valid(ino)) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	sim_stat(ino, &st);
	fuse_reply_attr(req, &st, 1.0);
}

static void sim_op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			   struct fuse_file_info *fi)
{
	char buf[1024];
	size_t len = 0;
	struct stat st;

	if (ino != SIM_INO_ROOT) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	/* Entry i of the listing has offset i+1; "." and ".." are the root. */
	static const fuse_ino_t order[] = { SIM_INO_ROOT, SIM_INO_ROOT, SIM_INO_NVIDIACTL,
					    SIM_INO_STATE, SIM_INO_LOG, SIM_INO_CONTROL,
					    SIM_INO_SLOW };
	for (off_t i = off; i < (off_t)(sizeof(order) / sizeof(order[0])); i++) {
		const char *name = i == 0 ? "." : i == 1 ? ".." : sim_nodes[order[i]].name;
		sim_stat(order[i], &st);
		size_t n = fuse_add_direntry(req, buf + len, sizeof(buf) - len, name, &st, i + 1);
		if (n > sizeof(buf) - len || len + n > size)
			break;
		len += n;
	}
	fuse_reply_buf(req, buf, len);
}

/* Snapshots are open files of the simulator's own: each is freed by its
 * RELEASE, but the kernel drops the RELEASEs still queued when the
 * connection ends (an unmount right after a reader closed, an abort), and
 * an open whose reply finds the opener gone never gets one. So every live
 * snapshot is on this list too, and whatever is left when the FUSE loop
 * has ended is freed at teardown. */
struct sim_snap {
	struct sim_snap *prev, *next;
	struct sim_buf buf;
};

static pthread_mutex_t sim_snaps_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sim_snap sim_snaps = { &sim_snaps, &sim_snaps, { 0 } };

static void sim_snap_free(struct sim_buf *b)
{
	struct sim_snap *s = (struct sim_snap *)((char *)b - offsetof(struct sim_snap, buf));

	pthread_mutex_lock(&sim_snaps_lock);
	s->prev->next = s->next;
	s->next->prev = s->prev;
	pthread_mutex_unlock(&sim_snaps_lock);
	sim_buf_free(&s->buf);
	free(s);
}

/* After the FUSE loop: no request can reach a snapshot any more. */
static void sim_snap_free_all(void)
{
	while (sim_snaps.next != &sim_snaps)
		sim_snap_free(&sim_snaps.next->buf);
}

/* A snapshot taken at open, so one reader sees one consistent text. */
static struct sim_buf *sim_snapshot(fuse_ino_t ino)
{
	struct sim_snap *s = calloc(1, sizeof(*s));
	struct sim_buf *b;

	if (!s)
		return NULL;
	pthread_mutex_lock(&sim_snaps_lock);
	s->next = sim_snaps.next;
	s->prev = &sim_snaps;
	sim_snaps.next->prev = s;
	sim_snaps.next = s;
	pthread_mutex_unlock(&sim_snaps_lock);
	b = &s->buf;
	if (ino == SIM_INO_STATE)
		sim_rm_state_json(sim.rm, b, sim_mono_us() - sim.start_us);
	else if (ino == SIM_INO_LOG)
		sim_log_json(sim.log, b);
	else {
		sim_inject_json(sim.inj, b);
		sim_buf_printf(b, "\n");
	}
	if (b->failed) {
		sim_snap_free(b);
		return NULL;
	}
	return b;
}

static void sim_op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	pid_t tgid;
	int privileged;

	fi->direct_io = 1; /* sizes are not known up front */
	fi->nonseekable = ino == SIM_INO_NVIDIACTL;
	if (ino == SIM_INO_NVIDIACTL) {
		(void)sim_task_info(fuse_req_ctx(req)->pid, &tgid, &privileged); /* gone: tid */
		fi->fh = sim_rm_file_open(sim.rm, tgid);
		if (fi->fh == 0) {
			fuse_reply_err(req, ENOMEM);
			return;
		}
	} else if (ino == SIM_INO_STATE || ino == SIM_INO_LOG ||
		   (ino == SIM_INO_CONTROL && (fi->flags & O_ACCMODE) == O_RDONLY)) {
		struct sim_buf *b = sim_snapshot(ino);
		if (!b) {
			fuse_reply_err(req, ENOMEM);
			return;
		}
		fi->fh = (uint64_t)(uintptr_t)b;
	} else if (ino == SIM_INO_SLOW) {
		fi->direct_io = 0; /* through the page cache: it can be mapped */
	} else if (ino != SIM_INO_CONTROL) {
		fuse_reply_err(req, EISDIR);
		return;
	}
	/* -ENOENT: the open was interrupted (the opener died); the kernel
	 * will send no RELEASE for it. */
	if (fuse_reply_open(req, fi) == -ENOENT) {
		if (ino == SIM_INO_NVIDIACTL)
			sim_rm_file_release(sim.rm, fi->fh);
		else if (fi->fh)
			sim_snap_free((struct sim_buf *)(uintptr_t)fi->fh);
	}
}

/* An environment block: NUL-separated, then zeros. */
static void sim_slow_reply(fuse_req_t req, size_t size, off_t off)
{
	static const char env[] = "GPUQOS_SIM_SLOW=1";
	char page[SIM_SLOW_SIZE];
	size_t n;

	memset(page, 0, sizeof(page));
	memcpy(page, env, sizeof(env));
	if (off < 0 || (size_t)off >= sizeof(page)) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	n = sizeof(page) - (size_t)off < size ? sizeof(page) - (size_t)off : size;
	fuse_reply_buf(req, page + off, n);
}

static void sim_slow_read(fuse_req_t req, size_t size, off_t off)
{
	struct sim_parked *p = NULL;

	pthread_mutex_lock(&sim_slow_lock);
	if (sim_slow_hold && (p = calloc(1, sizeof(*p))) != NULL) {
		p->req = req;
		p->size = size;
		p->off = off;
		p->next = sim_slow_parked;
		sim_slow_parked = p;
	}
	pthread_mutex_unlock(&sim_slow_lock);
	if (!p)
		sim_slow_reply(req, size, off);
}

/* release-reads, or the end of the session (then with EIO: the reader is
 * being unmounted under). */
static void sim_slow_release(int err)
{
	struct sim_parked *p;

	pthread_mutex_lock(&sim_slow_lock);
	p = sim_slow_parked;
	sim_slow_parked = NULL;
	sim_slow_hold = 0;
	pthread_mutex_unlock(&sim_slow_lock);
	while (p) {
		struct sim_parked *next = p->next;

		if (err)
			fuse_reply_err(p->req, err);
		else
			sim_slow_reply(p->req, p->size, p->off);
		free(p);
		p = next;
	}
}

/* "hold-reads" or "release-reads", alone in one write; 1 if it was one. */
static int sim_slow_command(const char *data, size_t size)
{
	size_t n = size;

	while (n && (data[n - 1] == '\n' || data[n - 1] == ' '))
		n--;
	if (n == 10 && memcmp(data, "hold-reads", 10) == 0) {
		pthread_mutex_lock(&sim_slow_lock);
		sim_slow_hold = 1;
		pthread_mutex_unlock(&sim_slow_lock);
		return 1;
	}
	if (n == 13 && memcmp(data, "release-reads", 13) == 0) {
		sim_slow_release(0);
		return 1;
	}
	return 0;
}

static void sim_op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			struct fuse_file_info *fi)
{
	struct sim_buf *b = (struct sim_buf *)(uintptr_t)fi->fh;

	if (ino == SIM_INO_SLOW) {
		sim_slow_read(req, size, off);
		return;
	}

	if (ino == SIM_INO_NVIDIACTL || !b) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if (off < 0 || (size_t)off >= b->len) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	size_t n = b->len - (size_t)off < size ? b->len - (size_t)off : size;
	/* Reply from a private copy: once the reader has its bytes it may close
	 * and the release may free the snapshot while fuse_reply_buf returns. */
	char *copy = malloc(n);
	if (!copy) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	memcpy(copy, b->data + off, n);
	fuse_reply_buf(req, copy, n);
	free(copy);
}

static void sim_op_write(fuse_req_t req, fuse_ino_t ino, const char *data, size_t size,
			 off_t off, struct fuse_file_info *fi)
{
	int reset_log;

	if (ino != SIM_INO_CONTROL) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if (sim_slow_command(data, size)) {
		fuse_reply_write(req, size);
		return;
	}
	int r = sim_inject_apply(sim.inj, data, size, &reset_log);
	if (r) {
		fuse_reply_err(req, -r);
		return;
	}
	if (reset_log)
		sim_log_reset(sim.log);
	fuse_reply_write(req, size);
}

/* The last reference to an open file description is gone: like the RM on
 * close of nvidiactl, free every client allocated through it. */
static void sim_op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	if (ino == SIM_INO_NVIDIACTL) {
		sim_rm_file_release(sim.rm, fi->fh);
	} else if (fi->fh) {
		sim_snap_free((struct sim_buf *)(uintptr_t)fi->fh);
	}
	fuse_reply_err(req, 0);
}

static void sim_op_ioctl(fuse_req_t req, fuse_ino_t ino, unsigned int cmd, void *arg,
			 struct fuse_file_info *fi, unsigned flags, const void *in_buf,
			 size_t in_bufsz, size_t out_bufsz)
{
	if (ino != SIM_INO_NVIDIACTL) {
		fuse_reply_err(req, ENOTTY);
		return;
	}
	if (flags & FUSE_IOCTL_COMPAT) {
		fuse_reply_err(req, ENOSYS); /* 32-bit callers are not modelled */
		return;
	}
	sim_ioctl_handle(&sim, req, fi->fh, cmd, in_buf, in_bufsz, out_bufsz);
}

static const struct fuse_lowlevel_ops sim_ops = {
	.lookup = sim_op_lookup,
	.getattr = sim_op_getattr,
	.readdir = sim_op_readdir,
	.open = sim_op_open,
	.read = sim_op_read,
	.write = sim_op_write,
	.release = sim_op_release,
	.ioctl = sim_op_ioctl,
};

/* ---------------- command line ---------------- */

#define SIM_MAX_UNSUPPORTED 16

struct sim_opts {
	const char *mountpoint;
	unsigned gpus;
	int foreground;
	unsigned max_threads;
	unsigned log_capacity;
	unsigned fb_mib; /* 0: SIM_FB_TOTAL_DEFAULT */
	const char *unsupported[SIM_MAX_UNSUPPORTED];
	unsigned nunsupported;
};

static void sim_usage(FILE *f)
{
	fprintf(f, "usage: gpuqos-sim MOUNTPOINT [--gpus N] [--foreground] [--max-threads N]\n"
		   "                  [--log-capacity N] [--fb-mib N] [--unsupported CMD-HEX]...\n");
}

static int sim_parse_uint(const char *s, unsigned min, unsigned max, unsigned *out)
{
	char *end;
	if (!s || !*s || *s == '-')
		return -1;
	errno = 0;
	unsigned long v = strtoul(s, &end, 10);
	if (errno || *end || v < min || v > max)
		return -1;
	*out = (unsigned)v;
	return 0;
}

static int sim_parse_args(int argc, char **argv, struct sim_opts *o)
{
	*o = (struct sim_opts){ .gpus = 1, .max_threads = 64, .log_capacity = 65536 };
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (strcmp(a, "--foreground") == 0 || strcmp(a, "-f") == 0) {
			o->foreground = 1;
			continue;
		}
		if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			sim_usage(stdout);
			exit(0);
		}
		int bad = 0;
		if (strcmp(a, "--gpus") == 0)
			bad = sim_parse_uint(v, 1, 64, &o->gpus);
		else if (strcmp(a, "--max-threads") == 0)
			bad = sim_parse_uint(v, 2, 1024, &o->max_threads);
		else if (strcmp(a, "--fb-mib") == 0)
			bad = sim_parse_uint(v, 1, 1u << 24, &o->fb_mib);
		else if (strcmp(a, "--log-capacity") == 0)
			bad = sim_parse_uint(v, 16, 1u << 22, &o->log_capacity);
		else if (strcmp(a, "--unsupported") == 0 && v && o->nunsupported < SIM_MAX_UNSUPPORTED)
			o->unsupported[o->nunsupported++] = v;
		else if (a[0] != '-' && !o->mountpoint) {
			o->mountpoint = a;
			continue;
		} else
			bad = 1;
		if (bad) {
			fprintf(stderr, "gpuqos-sim: bad argument %s%s%s\n", a, v ? " " : "", v ? v : "");
			return -1;
		}
		i++; /* the option's value */
	}
	if (!o->mountpoint) {
		fprintf(stderr, "gpuqos-sim: no mount point given\n");
		return -1;
	}
	return 0;
}

/* Client handles unique on the machine, as one RM's are: each running
 * simulator takes a block of SIM_CLIENT_BLOCK handles of the RM's range,
 * held by a lock on a file for its life (the kernel drops the lock when
 * the simulator exits), so that simulators of parallel tests never hand
 * out the same client handle. The eBPF tracker keys a client's owner by
 * its handle alone; with two simulators giving out 0xc1d00000 at once, a
 * free in one test removed a client of another's. The block is a number
 * 0..SIM_CLIENT_BLOCKS-1, or -1 (errno set) when none could be taken. */
#define SIM_CLIENT_BLOCK 0x1000u
#define SIM_CLIENT_BLOCKS (0x100000u / SIM_CLIENT_BLOCK)
#define SIM_CLIENT_BLOCK_DIR "/tmp/gpuqos-sim-client-blocks"

static int sim_claim_client_block(void)
{
	unsigned start = (unsigned)getpid() % SIM_CLIENT_BLOCKS;
	char path[sizeof(SIM_CLIENT_BLOCK_DIR) + 16];

	if (mkdir(SIM_CLIENT_BLOCK_DIR, 0700) != 0 && errno != EEXIST)
		return -1;
	for (unsigned i = 0; i < SIM_CLIENT_BLOCKS; i++) {
		unsigned b = (start + i) % SIM_CLIENT_BLOCKS;
		int fd;

		snprintf(path, sizeof(path), SIM_CLIENT_BLOCK_DIR "/%u", b);
		fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (fd < 0)
			return -1;
		if (flock(fd, LOCK_EX | LOCK_NB) == 0)
			return (int)b; /* fd stays open: the lock lasts the process */
		close(fd);
	}
	errno = EBUSY;
	return -1;
}

static int sim_setup(const struct sim_opts *o)
{
	char line[64];
	int reset_log;

	sim.start_us = sim_mono_us();
	sim.rm = sim_rm_new(o->gpus);
	if (sim.rm && o->fb_mib)
		sim_rm_set_fb_total(sim.rm, (rm_u64)o->fb_mib << 20);
	sim.inj = sim_inject_new();
	sim.log = sim_log_new(o->log_capacity);
	if (!sim.rm || !sim.inj || !sim.log) {
		fprintf(stderr, "gpuqos-sim: out of memory setting up the RM model\n");
		return -1;
	}
	int block = sim_claim_client_block();
	if (block < 0) {
		fprintf(stderr, "gpuqos-sim: no block of client handles of its own in %s (%s): "
				"its client handles may repeat another simulator's\n",
			SIM_CLIENT_BLOCK_DIR, strerror(errno));
	} else {
		rm_handle lo = RM_CLIENT_HANDLE_BASE + (rm_handle)block * SIM_CLIENT_BLOCK;

		sim_rm_set_client_range(sim.rm, lo, lo + SIM_CLIENT_BLOCK);
	}
	for (unsigned i = 0; i < o->nunsupported; i++) {
		int n = snprintf(line, sizeof(line), "unsupported %s", o->unsupported[i]);
		if (n < 0 || (size_t)n >= sizeof(line) ||
		    sim_inject_apply(sim.inj, line, (size_t)n, &reset_log)) {
			fprintf(stderr, "gpuqos-sim: bad --unsupported command %s\n", o->unsupported[i]);
			return -1;
		}
	}
	return 0;
}

static void sim_teardown(void)
{
	sim_snap_free_all();
	sim_log_destroy(sim.log);
	sim_inject_destroy(sim.inj);
	sim_rm_destroy(sim.rm);
}

static int sim_serve(const struct sim_opts *o, struct fuse_args *args)
{
	int rc = 1;
	struct fuse_session *se = fuse_session_new(args, &sim_ops, sizeof(sim_ops), NULL);
	if (!se) {
		fprintf(stderr, "gpuqos-sim: cannot create the FUSE session\n");
		return 1;
	}
	sim.se = se;
	if (fuse_set_signal_handlers(se) != 0) {
		fprintf(stderr, "gpuqos-sim: cannot install signal handlers\n");
		goto out_destroy;
	}
	if (fuse_session_mount(se, o->mountpoint) != 0) {
		fprintf(stderr, "gpuqos-sim: cannot mount on %s\n", o->mountpoint);
		goto out_signals;
	}
	if (fuse_daemonize(o->foreground) != 0) {
		fprintf(stderr, "gpuqos-sim: cannot daemonize\n");
		goto out_unmount;
	}
	struct fuse_loop_config *cfg = fuse_loop_cfg_create();
	if (!cfg) {
		fprintf(stderr, "gpuqos-sim: out of memory for the loop configuration\n");
		goto out_unmount;
	}
	/* Enough workers that a control held back by injected latency never
	 * stalls calls from other processes. */
	fuse_loop_cfg_set_max_threads(cfg, o->max_threads);
	rc = fuse_session_loop_mt(se, cfg) < 0 ? 1 : 0;
	fuse_loop_cfg_destroy(cfg);
	sim_slow_release(EIO); /* a parked request is libfuse's memory until answered */
out_unmount:
	fuse_session_unmount(se);
out_signals:
	fuse_remove_signal_handlers(se);
out_destroy:
	fuse_session_destroy(se);
	return rc;
}

int main(int argc, char **argv)
{
	struct sim_opts o;

	if (sim_parse_args(argc, argv, &o) != 0) {
		sim_usage(stderr);
		return 2;
	}
	if (sim_setup(&o) != 0) {
		sim_teardown();
		return 1;
	}
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	if (fuse_opt_add_arg(&args, argv[0]) || fuse_opt_add_arg(&args, "-o") ||
	    fuse_opt_add_arg(&args, "allow_other,default_permissions,fsname=gpuqos-sim,"
				    "subtype=gpuqos-sim")) {
		fprintf(stderr, "gpuqos-sim: out of memory building FUSE arguments\n");
		sim_teardown();
		return 1;
	}
	int rc = sim_serve(&o, &args);
	fuse_opt_free_args(&args);
	sim_teardown();
	return rc;
}
