/* SPDX-License-Identifier: Apache-2.0 */
/*
 * state.c - run-time class overrides (`gpuqosctl set-class`), keyed by
 * pid + start time so a reused pid never inherits one, persisted as JSON in
 * <state-dir>/state.json with write-to-temp + rename so a crash leaves the
 * old or the new file, never half of one. The same file lists the processes
 * whose preempt agents were connected, so a restarted agent knows whom to
 * wait for before it changes anything (see state_holding). Does not own
 * applying a class (tsg.c, reconcile.c).
 */
#include "agent/agent.h"
#include "common/log.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define STATE_MAX (1u << 20)

const struct state_entry *state_find(const struct agent *a, pid_t pid, uint64_t starttime)
{
	for (const struct state_entry *e = a->overrides; e; e = e->next)
		if (e->pid == pid && e->starttime == starttime)
			return e;
	return NULL;
}

static int state_serialize_peers(const struct agent *a, cJSON *root)
{
	cJSON *arr = cJSON_AddArrayToObject(root, "peers");

	if (!arr)
		return -1;
	for (const struct peer *p = a->peers; p; p = p->next) {
		cJSON *o = cJSON_CreateObject();

		if (!o)
			return -1;
		cJSON_AddItemToArray(arr, o);
		if (!cJSON_AddNumberToObject(o, "pid", p->pid) ||
		    !cJSON_AddNumberToObject(o, "starttime", (double)p->proc->starttime))
			return -1;
	}
	return 0;
}

static char *state_serialize(const struct agent *a)
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
		    !cJSON_AddStringToObject(o, "class", gq_class_name(e->cls)))
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

int state_save(const struct agent *a)
{
	char tmp[4200], *s = state_serialize(a);
	int fd, rc = -1;

	if (!s) {
		log_error("%s: cannot serialize state: out of memory", a->state_path);
		return -1;
	}
	snprintf(tmp, sizeof(tmp), "%s.tmp", a->state_path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		log_error("%s: %s", tmp, strerror(errno));
		free(s);
		return -1;
	}
	if (write_all(fd, s, strlen(s)) == 0 && write_all(fd, "\n", 1) == 0 && fsync(fd) == 0)
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
	free(s);
	return rc;
}

static int state_add(struct agent *a, pid_t pid, uint64_t starttime, enum gq_class cls)
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

int state_set(struct agent *a, pid_t pid, uint64_t starttime, int remove, enum gq_class cls)
{
	if (remove)
		state_remove(a, pid);
	else if (state_add(a, pid, starttime, cls) != 0)
		return -1;
	return state_save(a);
}

/* Entries whose process is gone (or whose pid now names another process)
 * are dropped: an override belongs to one process's lifetime. */
static void state_load_entry(struct agent *a, const cJSON *o)
{
	const cJSON *pid = cJSON_GetObjectItemCaseSensitive(o, "pid");
	const cJSON *st = cJSON_GetObjectItemCaseSensitive(o, "starttime");
	const cJSON *cls = cJSON_GetObjectItemCaseSensitive(o, "class");
	enum gq_class c;
	uint64_t now_st;

	if (!cJSON_IsNumber(pid) || !cJSON_IsNumber(st) || !cJSON_IsString(cls) ||
	    gq_class_parse(cls->valuestring, &c) != 0) {
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
	if (now < a->started_us + GQ_RESTART_GRACE_MS * 1000ull)
		return 1;
	log_info("restart grace over; %s", "not every earlier preempt agent came back");
	while (a->expected) {
		struct state_entry *e = a->expected;

		a->expected = e->next;
		free(e);
	}
	return 0;
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

	if (!s) {
		if (errno != ENOENT)
			log_warn("%s: %s; starting without overrides", a->state_path, strerror(errno));
		return 0;
	}
	root = cJSON_Parse(s);
	free(s);
	arr = root ? cJSON_GetObjectItemCaseSensitive(root, "overrides") : NULL;
	if (!cJSON_IsArray(arr)) {
		log_warn("%s: not a gpuqos state file; starting without overrides", a->state_path);
		cJSON_Delete(root);
		return 0;
	}
	cJSON_ArrayForEach(o, arr)
		state_load_entry(a, o);
	state_load_peers(a, cJSON_GetObjectItemCaseSensitive(root, "peers"));
	cJSON_Delete(root);
	/* Rewrite without the stale entries. */
	return state_save(a);
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
	if (changed && state_save(a) != 0)
		log_error("%s: stale overrides stay on disk until the next change", a->state_path);
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
