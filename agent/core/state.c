/* SPDX-License-Identifier: Apache-2.0 */
/*
 * state.c - the state directory and what it persists. Run-time class
 * overrides (`gpuqosctl set-class`), keyed by pid + start time so a reused
 * pid never inherits one, are kept as JSON in <state-dir>/state.json with
 * write-to-temp + rename so a crash leaves the old or the new file, never
 * half of one. The same file lists the processes whose preempt agents were
 * connected, so a restarted agent knows whom to wait for before it changes
 * anything (see state_holding).
 *
 * The file is rewritten only when its text changes, and peers coming and
 * going are written after a short coalescing delay (AGENT_STATE_COALESCE_MS),
 * never on the accept or close path; an override is written before
 * set-class answers. <state-dir>/lock is held for the agent's lifetime, so
 * one state directory has one agent. Does not own applying a class (tsg.c,
 * reconcile.c) nor the sockets.
 */
#include "agent/agent.h"
#include "common/log.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/timerfd.h>
#include <unistd.h>

#define STATE_MAX (1u << 20)

const struct state_entry *state_find(const struct agent *a, pid_t pid, uint64_t starttime)
{
	for (const struct state_entry *e = a->overrides; e; e = e->next)
		if (e->pid == pid && e->starttime == starttime)
			return e;
	return NULL;
}

static int state_add_peer(cJSON *arr, pid_t pid, uint64_t starttime)
{
	cJSON *o = cJSON_CreateObject();

	if (!o)
		return -1;
	cJSON_AddItemToArray(arr, o);
	if (!cJSON_AddNumberToObject(o, "pid", pid) ||
	    !cJSON_AddNumberToObject(o, "starttime", (double)starttime))
		return -1;
	return 0;
}

static int state_serialize_peers(struct agent *a, cJSON *root)
{
	cJSON *arr = cJSON_AddArrayToObject(root, "peers");

	if (!arr)
		return -1;
	for (const struct peer *p = a->peers; p; p = p->next)
		if (state_add_peer(arr, p->pid, p->proc->starttime) != 0)
			return -1;
	/* Still awaited after a restart: a second restart waits for them too. */
	for (const struct state_entry *e = a->expected; e; e = e->next) {
		const struct peer *p = a->peers;

		while (p && p->pid != e->pid)
			p = p->next;
		if (!p && state_add_peer(arr, e->pid, e->starttime) != 0)
			return -1;
	}
	return 0;
}

static char *state_serialize(struct agent *a)
{
	cJSON *root = cJSON_CreateObject(), *arr;
	char *s = NULL;

	if (!root)
		return NULL;
	arr = cJSON_AddArrayToObject(root, "overrides");
	if (!cJSON_AddNumberToObject(root, "version", 1) || !arr)
		goto out;
	for (const struct state_entry *e = a->overrides; e; e = e->next) {
		cJSON *o = cJSON_CreateObject();

		if (!o)
			goto out;
		cJSON_AddItemToArray(arr, o);
		if (!cJSON_AddNumberToObject(o, "pid", e->pid) ||
		    !cJSON_AddNumberToObject(o, "starttime", (double)e->starttime) ||
		    !cJSON_AddStringToObject(o, "class", class_name(e->cls)))
			goto out;
	}
	if (state_serialize_peers(a, root) != 0)
		goto out;
	s = cJSON_PrintUnformatted(root);
out:
	cJSON_Delete(root);
	return s;
}

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
	struct itimerspec its = { .it_value = { .tv_sec = ms / 1000u,
						.tv_nsec = (long)(ms % 1000u) * 1000000L } };

	if (!a->sd.loaded || a->sd.timer.fd < 0)
		return; /* nothing to write before state_load */
	if (timerfd_settime(a->sd.timer.fd, 0, &its, NULL) != 0) {
		log_error("state file timer: %s", strerror(errno));
		return;
	}
	a->sd.armed = 1;
}

int state_flush(struct agent *a)
{
	char *s;

	if (!a->sd.loaded)
		return 0; /* a start that failed early must not empty the file */
	s = state_serialize(a);
	if (!s) {
		log_error("%s: cannot serialize state: out of memory", a->state_path);
		return -1;
	}
	if (a->sd.written && strcmp(s, a->sd.written) == 0) {
		free(s);
		return 0;
	}
	if (state_write(a, s) != 0) {
		a->sd.write_errors++;
		free(s);
		state_arm(a, AGENT_STATE_RETRY_MS);
		return -1;
	}
	a->sd.writes++;
	free(a->sd.written);
	a->sd.written = s;
	return 0;
}

void state_changed(struct agent *a)
{
	if (!a->sd.armed)
		state_arm(a, AGENT_STATE_COALESCE_MS);
}

static void on_state_timer(struct loop_watch *w, uint32_t events)
{
	struct agent *a = w->ctx;
	uint64_t n;

	(void)events;
	if (read(w->fd, &n, sizeof(n)) < 0 && errno != EAGAIN)
		log_warn("state file timer: %s", strerror(errno));
	a->sd.armed = 0;
	state_flush(a);
}

static int state_add(struct agent *a, pid_t pid, uint64_t starttime, enum qos_class cls)
{
	struct state_entry *e;

	for (e = a->overrides; e; e = e->next)
		if (e->pid == pid)
			break;
	if (!e) {
		e = calloc(1, sizeof(*e));
		if (!e)
			return -1;
		e->next = a->overrides;
		a->overrides = e;
	}
	e->pid = pid;
	e->starttime = starttime;
	e->cls = cls;
	return 0;
}

static void state_remove(struct agent *a, pid_t pid)
{
	for (struct state_entry **pp = &a->overrides; *pp; pp = &(*pp)->next) {
		if ((*pp)->pid == pid) {
			struct state_entry *e = *pp;

			*pp = e->next;
			free(e);
			return;
		}
	}
}

int state_set(struct agent *a, pid_t pid, uint64_t starttime, int remove, enum qos_class cls)
{
	if (remove)
		state_remove(a, pid);
	else if (state_add(a, pid, starttime, cls) != 0)
		return -1;
	/* set-class answers "persisted": the file holds it before the answer. */
	return state_flush(a);
}

/* Entries whose process is gone (or whose pid now names another process)
 * are dropped: an override belongs to one process's lifetime. */
static void state_load_entry(struct agent *a, const cJSON *o)
{
	const cJSON *pid = cJSON_GetObjectItemCaseSensitive(o, "pid");
	const cJSON *st = cJSON_GetObjectItemCaseSensitive(o, "starttime");
	const cJSON *cls = cJSON_GetObjectItemCaseSensitive(o, "class");
	enum qos_class c;
	uint64_t now_st;

	if (!cJSON_IsNumber(pid) || !cJSON_IsNumber(st) || !cJSON_IsString(cls) ||
	    class_parse(cls->valuestring, &c) != 0) {
		log_warn("%s: malformed override entry skipped", a->state_path);
		return;
	}
	if (procinfo_starttime((pid_t)pid->valuedouble, &now_st) != 0 ||
	    now_st != (uint64_t)st->valuedouble) {
		log_info("%s: override for pid %d dropped: process gone", a->state_path,
			 (int)pid->valuedouble);
		return;
	}
	if (state_add(a, (pid_t)pid->valuedouble, now_st, c) != 0)
		log_error("%s: out of memory", a->state_path);
}

/* Processes still alive whose preempt agents were connected before. */
static void state_load_peers(struct agent *a, const cJSON *arr)
{
	const cJSON *o;

	cJSON_ArrayForEach(o, arr) {
		const cJSON *pid = cJSON_GetObjectItemCaseSensitive(o, "pid");
		const cJSON *st = cJSON_GetObjectItemCaseSensitive(o, "starttime");
		struct state_entry *e;
		uint64_t now_st;

		if (!cJSON_IsNumber(pid) || !cJSON_IsNumber(st) ||
		    procinfo_starttime((pid_t)pid->valuedouble, &now_st) != 0 ||
		    now_st != (uint64_t)st->valuedouble)
			continue;
		e = calloc(1, sizeof(*e));
		if (!e)
			return;
		e->pid = (pid_t)pid->valuedouble;
		e->starttime = now_st;
		e->next = a->expected;
		a->expected = e;
	}
}

/* The process's preempt agent reported all its TSGs: no longer awaited. */
void state_peer_synced(struct agent *a, pid_t pid)
{
	for (struct state_entry **pp = &a->expected; *pp; pp = &(*pp)->next) {
		if ((*pp)->pid == pid) {
			struct state_entry *e = *pp;

			*pp = e->next;
			free(e);
			if (!a->expected)
				log_info("every earlier preempt agent is back: reconciling");
			state_changed(a);
			return;
		}
	}
}

/* After a restart, the first peers to come back would otherwise see a
 * node without their neighbours and be set to baseline, then back again a
 * moment later. Commands wait until every peer connected before the
 * restart has re-synced, or the grace period ends (peers that never come
 * back must not block the node). */
int state_holding(struct agent *a, uint64_t now)
{
	if (!a->expected)
		return 0;
	if (now < a->started_us + AGENT_RESTART_GRACE_MS * 1000ull)
		return 1;
	log_info("restart grace over; %s", "not every earlier preempt agent came back");
	while (a->expected) {
		struct state_entry *e = a->expected;

		a->expected = e->next;
		free(e);
	}
	state_changed(a);
	return 0;
}

static struct state_entry *state_reverse(struct state_entry *e)
{
	struct state_entry *out = NULL;

	while (e) {
		struct state_entry *next = e->next;

		e->next = out;
		out = e;
		e = next;
	}
	return out;
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "re");
	char *buf;
	size_t n;

	if (!f)
		return NULL;
	buf = malloc(STATE_MAX + 1);
	if (!buf) {
		fclose(f);
		return NULL;
	}
	n = fread(buf, 1, STATE_MAX, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

int state_load(struct agent *a)
{
	char *s = slurp(a->state_path);
	cJSON *root, *arr, *o;

	a->sd.loaded = 1;
	if (!s) {
		if (errno != ENOENT)
			log_warn("%s: %s; starting without overrides", a->state_path, strerror(errno));
		return 0;
	}
	root = cJSON_Parse(s);
	arr = root ? cJSON_GetObjectItemCaseSensitive(root, "overrides") : NULL;
	if (!cJSON_IsArray(arr)) {
		log_warn("%s: not a gpuqos state file; starting without overrides", a->state_path);
		cJSON_Delete(root);
		free(s);
		return 0;
	}
	cJSON_ArrayForEach(o, arr)
		state_load_entry(a, o);
	state_load_peers(a, cJSON_GetObjectItemCaseSensitive(root, "peers"));
	cJSON_Delete(root);
	/* In the file's order, so an unchanged state serializes to the same
	 * text and is not written again. */
	a->overrides = state_reverse(a->overrides);
	a->expected = state_reverse(a->expected);
	s[strcspn(s, "\n")] = '\0';
	a->sd.written = s;
	/* Rewritten only without entries of processes that are gone. */
	return state_flush(a);
}

/* Overrides of processes that exited are dropped as the process goes. */
void state_gc(struct agent *a)
{
	struct state_entry **pp = &a->overrides;
	int changed = 0;

	while (*pp) {
		struct state_entry *e = *pp;
		uint64_t st;

		if (procinfo_starttime(e->pid, &st) != 0 || st != e->starttime) {
			log_info("override for pid %d dropped: process gone", (int)e->pid);
			*pp = e->next;
			free(e);
			changed = 1;
			continue;
		}
		pp = &e->next;
	}
	if (changed)
		state_changed(a);
}

void state_free_all(struct agent *a)
{
	while (a->expected) {
		struct state_entry *e = a->expected;

		a->expected = e->next;
		free(e);
	}
	while (a->overrides) {
		struct state_entry *e = a->overrides;

		a->overrides = e->next;
		free(e);
	}
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
	a->sd.lock_fd = fd;
	return 0;
}

int state_open(struct agent *a)
{
	if (state_dir_check(a->opt.state_dir) != 0 || state_lock(a) != 0)
		return -1;
	a->sd.timer.fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (a->sd.timer.fd < 0) {
		log_error("state file timer: timerfd_create: %s", strerror(errno));
		return -1;
	}
	a->sd.timer.fn = on_state_timer;
	a->sd.timer.ctx = a;
	return loop_add(&a->loop, &a->sd.timer, EPOLLIN);
}

void state_close(struct agent *a)
{
	if (a->sd.timer.fd >= 0)
		loop_close(&a->loop, &a->sd.timer);
	a->sd.armed = 0;
	free(a->sd.written);
	a->sd.written = NULL;
	/* The lock goes last, with the process: nothing of ours is written
	 * after it. The file stays (removing it would race a starting agent). */
	if (a->sd.lock_fd >= 0)
		close(a->sd.lock_fd);
	a->sd.lock_fd = -1;
}
