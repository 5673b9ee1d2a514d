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
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
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


int state_load(struct agent *a)
{
	char *s = fileio_read(a->state_path, STATE_MAX, NULL);

	a->io->sf.loaded = 1;
	if (!s) {
		if (errno != ENOENT)
			log_warn("%s: %s; starting without overrides", a->state_path, strerror(errno));
		return 0;
	}
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
	int fd, n;

	snprintf(path, sizeof(path), "%s/lock", a->opt.state_dir);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		log_error("state dir lock %s: %s", path, strerror(errno));
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
