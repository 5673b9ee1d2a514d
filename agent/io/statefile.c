/* SPDX-License-Identifier: Apache-2.0 */
/*
 * statefile.c - the state directory and <state-dir>/state.json: what the
 * core's model (state.c) serializes is written with write-to-temp +
 * rename, so a crash leaves the old or the new file, never half of one.
 *
 * The file is rewritten only when its text changes, and peers coming and
 * going are written after a short coalescing delay (AGENT_STATE_COALESCE_MS,
 * a loop timer), never on the accept or close path; an override is
 * written before set-class answers (state_flush). <state-dir>/lock is held
 * for the agent's lifetime, so one state directory has one agent. Does not
 * own what the file says (state.c).
 *
 * The directory is refused unless only root (or the agent's own user) can
 * write in it, and nothing in it is opened through a symbolic link or
 * read unless it is a regular file (docs/privileges.md, "State files").
 */
#include "agent/io/statefile.h"
#include "agent/io/io.h"
#include "common/fileio.h"
#include "common/log.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#define STATE_MAX (1u << 20)

static int write_all(int fd, const char *s, size_t n)
{
	while (n) {
		ssize_t w = write(fd, s, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		s += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Writes text (and a newline) to the state file through a temp file. */
static int state_write(const struct agent *a, const char *text)
{
	char tmp[4200];
	int fd, rc = -1;

	snprintf(tmp, sizeof(tmp), "%s.tmp", a->state_path);
	/* A temp file left by a crash (or anything else at that name: a
	 * symlink, a FIFO) goes; the new one is ours alone, never a file
	 * reached through a link. */
	if (unlink(tmp) != 0 && errno != ENOENT)
		log_warn("%s: cannot remove it: %s", tmp, strerror(errno));
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		log_error("%s: %s", tmp, strerror(errno));
		return -1;
	}
	if (write_all(fd, text, strlen(text)) == 0 && write_all(fd, "\n", 1) == 0 && fsync(fd) == 0)
		rc = 0;
	else
		log_error("%s: write: %s", tmp, strerror(errno));
	if (close(fd) != 0)
		rc = -1;
	if (rc == 0 && rename(tmp, a->state_path) != 0) {
		log_error("rename %s to %s: %s", tmp, a->state_path, strerror(errno));
		rc = -1;
	}
	if (rc != 0)
		unlink(tmp);
	return rc;
}

static void state_arm(struct agent *a, unsigned ms)
{
	if (!a->io->sf.loaded || !a->io->sf.timer_on)
		return; /* nothing to write before state_load */
	if (loop_timer_after(&a->io->sf.timer, (uint64_t)ms * 1000u) != 0)
		return;
	a->io->sf.armed = 1;
}

int state_flush(struct agent *a)
{
	char *s;

	if (!a->io->sf.loaded)
		return 0; /* a start that failed early must not empty the file */
	s = state_serialize(a);
	if (!s) {
		log_error("%s: cannot serialize state: out of memory", a->state_path);
		return -1;
	}
	if (a->io->sf.written && strcmp(s, a->io->sf.written) == 0) {
		free(s);
		return 0;
	}
	if (state_write(a, s) != 0) {
		a->io->sf.write_errors++;
		free(s);
		state_arm(a, AGENT_STATE_RETRY_MS);
		return -1;
	}
	a->io->sf.writes++;
	free(a->io->sf.written);
	a->io->sf.written = s;
	return 0;
}

void state_changed(struct agent *a)
{
	if (!a->io->sf.armed)
		state_arm(a, AGENT_STATE_COALESCE_MS);
}

static void on_state_timer(struct loop_timer *t)
{
	struct agent *a = t->ctx;

	a->io->sf.armed = 0;
	state_flush(a);
}


/* The state file's text, or NULL with errno (ENOENT: none yet) after
 * saying why it cannot be read. Opened without following a link and
 * without blocking (a FIFO would wait for a writer for ever), and read
 * only if it is a regular file. */
static char *state_read(const char *path)
{
	struct stat st;
	char *s;
	int fd;

	do
		fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	while (fd < 0 && errno == EINTR);
	if (fd < 0) {
		if (errno == ELOOP)
			log_warn("%s: a symbolic link, not read; starting without overrides", path);
		else if (errno != ENOENT)
			log_warn("%s: %s; starting without overrides", path, strerror(errno));
		return NULL;
	}
	if (fstat(fd, &st) != 0) {
		log_warn("%s: fstat: %s; starting without overrides", path, strerror(errno));
		close(fd);
		return NULL;
	}
	if (!S_ISREG(st.st_mode)) {
		log_warn("%s: not a regular file (mode 0%o), not read; starting without overrides",
			 path, (unsigned)st.st_mode);
		close(fd);
		return NULL;
	}
	s = fileio_read_fd(fd, STATE_MAX, NULL);
	if (!s)
		log_warn("%s: %s; starting without overrides", path, strerror(errno));
	close(fd);
	return s;
}

int state_load(struct agent *a)
{
	char *s = state_read(a->state_path);

	a->io->sf.loaded = 1;
	if (!s)
		return 0;
	if (state_parse(a, s, a->state_path) != 0) {
		log_warn("%s: not a gpuqos state file; starting without overrides", a->state_path);
		free(s);
		return 0;
	}
	s[strcspn(s, "\n")] = '\0';
	a->io->sf.written = s;
	/* Rewritten only without entries of processes that are gone. */
	return state_flush(a);
}

/* Kernel file systems that hold no files of ours: a state directory there
 * would take writes that vanish or fail. */
static const struct {
	unsigned long magic;
	const char *name;
} pseudo_fs[] = {
	{ PROC_SUPER_MAGIC, "procfs" },	  { SYSFS_MAGIC, "sysfs" },
	{ CGROUP_SUPER_MAGIC, "cgroupfs" }, { CGROUP2_SUPER_MAGIC, "cgroup2fs" },
	{ DEBUGFS_MAGIC, "debugfs" },	  { TRACEFS_MAGIC, "tracefs" },
	{ SECURITYFS_MAGIC, "securityfs" }, { BPF_FS_MAGIC, "bpffs" },
	{ DEVPTS_SUPER_MAGIC, "devpts" },	  { PSTOREFS_MAGIC, "pstore" },
	{ EFIVARFS_MAGIC, "efivarfs" },	  { SELINUX_MAGIC, "selinuxfs" },
	{ NSFS_MAGIC, "nsfs" },		  { 0x62656570 /* CONFIGFS_MAGIC */, "configfs" },
	{ 0x65735543 /* FUSECTL_SUPER_MAGIC */, "fusectl" },
	{ HUGETLBFS_MAGIC, "hugetlbfs" },	  { 0x19800202 /* MQUEUE_MAGIC */, "mqueue" },
	{ BINFMTFS_MAGIC, "binfmt_misc" },
};

static int state_dir_check(const char *dir)
{
	struct statfs sfs;
	struct stat st;

	if (stat(dir, &st) != 0) {
		log_error("state dir %s: %s", dir, strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		log_error("state dir %s: not a directory", dir);
		return -1;
	}
	/* Whoever may write in it may plant the files the agent opens as
	 * root: only root (or the agent's own user) may. */
	if (st.st_uid != 0 && st.st_uid != geteuid()) {
		log_error("state dir %s: owned by uid %u; it must be owned by root (or by the "
			  "agent's own uid %u)", dir, (unsigned)st.st_uid, (unsigned)geteuid());
		return -1;
	}
	if (st.st_mode & (S_IWGRP | S_IWOTH)) {
		log_error("state dir %s: writable by %s (mode 0%03o); it must be writable by its "
			  "owner only (chmod go-w %s)", dir,
			  (st.st_mode & S_IWOTH) ? "others" : "its group",
			  (unsigned)(st.st_mode & 07777), dir);
		return -1;
	}
	if (statfs(dir, &sfs) != 0) {
		log_error("state dir %s: statfs: %s", dir, strerror(errno));
		return -1;
	}
	for (size_t i = 0; i < sizeof(pseudo_fs) / sizeof(pseudo_fs[0]); i++) {
		if ((unsigned long)sfs.f_type == pseudo_fs[i].magic) {
			log_error("state dir %s: on %s, a kernel file system; it must be a directory on a "
				  "real file system (tmpfs, ext4, ...)", dir, pseudo_fs[i].name);
			return -1;
		}
	}
	if (access(dir, W_OK | X_OK) != 0) {
		log_error("state dir %s: not writable: %s", dir, strerror(errno));
		return -1;
	}
	return 0;
}

/* The pid in a held lock file, for the error message; 0 if unreadable. */
static long state_lock_holder(int fd)
{
	char buf[32];
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);

	if (n <= 0)
		return 0;
	buf[n] = '\0';
	return strtol(buf, NULL, 10);
}

static int state_lock(struct agent *a)
{
	char path[4200], pid[32];
	struct stat st;
	int fd, n;

	snprintf(path, sizeof(path), "%s/lock", a->opt.state_dir);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY, 0600);
	if (fd < 0) {
		log_error("state dir lock %s: %s", path, strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		log_error("state dir lock %s: not a regular file; remove it", path);
		close(fd);
		return -1;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
		long holder = errno == EWOULDBLOCK ? state_lock_holder(fd) : 0;

		if (errno == EWOULDBLOCK)
			log_error("state dir %s is in use by another gpuqos-agent (pid %ld): two agents "
				  "must not share one; give this one its own --state-dir, --socket and "
				  "--ctl-socket", a->opt.state_dir, holder);
		else
			log_error("state dir lock %s: flock: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	/* For the error message of the next agent that finds it taken. */
	n = snprintf(pid, sizeof(pid), "%d\n", (int)getpid());
	if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)n, 0) != n)
		log_warn("state dir lock %s: cannot record our pid: %s", path, strerror(errno));
	a->io->sf.lock_fd = fd;
	return 0;
}

int state_open(struct agent *a)
{
	if (state_dir_check(a->opt.state_dir) != 0 || state_lock(a) != 0)
		return -1;
	if (loop_timer_add(&a->io->loop, &a->io->sf.timer, "state file", on_state_timer, a) != 0)
		return -1;
	a->io->sf.timer_on = 1;
	return 0;
}

void state_close(struct agent *a)
{
	if (a->io->sf.timer_on)
		loop_timer_del(&a->io->sf.timer);
	a->io->sf.timer_on = 0;
	a->io->sf.armed = 0;
	free(a->io->sf.written);
	a->io->sf.written = NULL;
	/* The lock goes last, with the process: nothing of ours is written
	 * after it. The file stays (removing it would race a starting agent). */
	if (a->io->sf.lock_fd >= 0)
		close(a->io->sf.lock_fd);
	a->io->sf.lock_fd = -1;
}
