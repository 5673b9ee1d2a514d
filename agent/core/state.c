/* SPDX-License-Identifier: Apache-2.0 */
/*
 * state.c - what the agent persists, as a model: run-time class overrides
 * (`gpuqosctl set-class`), keyed by pid + start time so a reused pid never
 * inherits one, and the processes whose preempt agents were connected, so a
 * restarted agent knows whom to wait for before it changes anything (see
 * state_grace_advance); their JSON text (state_serialize, state_parse).
 *
 * Writing the text is agent/io/statefile.c's, behind two hooks: a change
 * (agent_hooks.on_state_changed, written after a coalescing delay) and a
 * set-class that answers "persisted" only once the file holds it
 * (agent_hooks.on_state_flush). Does not own applying a class (tsg.c,
 * reconcile.c), the file, its lock or its timer.
 */
#include "agent/core/core.h"
#include "common/log.h"
#include "common/utf8.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

char *state_serialize(struct agent *a)
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
	utf8_json_sanitize(root); /* state.json is read back as JSON */
	s = cJSON_PrintUnformatted(root);
out:
	cJSON_Delete(root);
	return s;
}

/* What state.json holds changed: the adapter writes it later. */
static void state_changed_note(struct agent *a)
{
	if (a->hooks.on_state_changed)
		a->hooks.on_state_changed(a);
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
	return a->hooks.on_state_flush ? a->hooks.on_state_flush(a) : 0;
}

/* Entries whose process is gone (or whose pid now names another process)
 * are dropped: an override belongs to one process's lifetime. */
static void state_load_entry(struct agent *a, const cJSON *o, const char *path)
{
	const cJSON *pid = cJSON_GetObjectItemCaseSensitive(o, "pid");
	const cJSON *st = cJSON_GetObjectItemCaseSensitive(o, "starttime");
	const cJSON *cls = cJSON_GetObjectItemCaseSensitive(o, "class");
	enum qos_class c;
	uint64_t now_st;

	if (!cJSON_IsNumber(pid) || !cJSON_IsNumber(st) || !cJSON_IsString(cls) ||
	    class_parse(cls->valuestring, &c) != 0) {
		log_warn("%s: malformed override entry skipped", path);
		return;
	}
	now_st = (uint64_t)st->valuedouble;
	if (!proc_alive(a, (pid_t)pid->valuedouble, now_st)) {
		log_info("%s: override for pid %d dropped: process gone", path,
			 (int)pid->valuedouble);
		return;
	}
	if (state_add(a, (pid_t)pid->valuedouble, now_st, c) != 0)
		log_error("%s: out of memory", path);
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

		if (!cJSON_IsNumber(pid) || !cJSON_IsNumber(st))
			continue;
		now_st = (uint64_t)st->valuedouble;
		if (!proc_alive(a, (pid_t)pid->valuedouble, now_st))
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
			state_changed_note(a);
			return;
		}
	}
}

/* After a restart, the first peers to come back would otherwise see a
 * node without their neighbours and be set to baseline, then back again a
 * moment later. Commands wait until every peer connected before the
 * restart has re-synced, or the grace period ends (peers that never come
 * back must not block the node). */
int state_grace_advance(struct agent *a, uint64_t now)
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
	state_changed_note(a);
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

int state_parse(struct agent *a, const char *text, const char *path)
{
	cJSON *root = cJSON_Parse(text), *arr, *o;

	arr = root ? cJSON_GetObjectItemCaseSensitive(root, "overrides") : NULL;
	if (!cJSON_IsArray(arr)) {
		cJSON_Delete(root);
		return -1;
	}
	cJSON_ArrayForEach(o, arr)
		state_load_entry(a, o, path);
	state_load_peers(a, cJSON_GetObjectItemCaseSensitive(root, "peers"));
	cJSON_Delete(root);
	/* In the file's order, so an unchanged state serializes to the same
	 * text and is not written again. */
	a->overrides = state_reverse(a->overrides);
	a->expected = state_reverse(a->expected);
	return 0;
}

/* Overrides of processes that exited are dropped as the process goes. */
void state_gc(struct agent *a)
{
	struct state_entry **pp = &a->overrides;
	int changed = 0;

	while (*pp) {
		struct state_entry *e = *pp;
		if (!proc_alive(a, e->pid, e->starttime)) {
			log_info("override for pid %d dropped: process gone", (int)e->pid);
			*pp = e->next;
			free(e);
			changed = 1;
			continue;
		}
		pp = &e->next;
	}
	if (changed)
		state_changed_note(a);
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
