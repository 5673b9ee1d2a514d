/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sim_inject.c - injection table and control-file grammar (see sim_inject.h).
 *
 * Grammar, one command per line:
 *   latency <cmd-hex|all> <us>        add us microseconds to matching controls
 *   fail <cmd-hex|all> <status-hex> [count]
 *                                     answer status instead of running them
 *   unsupported <cmd-hex>             answer NV_ERR_NOT_SUPPORTED
 *   drop <cmd-hex> [count]            answer NV_OK without running them (a
 *                                     control the RM did not keep)
 *   clear                             drop every injection
 *   reset-log                         empty the call log
 */
#include "sim_inject.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define SIM_INJECT_MAX 64
#define SIM_LATENCY_MAX_US 3600000000ull /* an hour: "does not return" */
#define SIM_LINE_MAX 256

enum sim_inject_kind { SIM_INJ_LATENCY, SIM_INJ_FAIL, SIM_INJ_UNSUPPORTED, SIM_INJ_DROP };

struct sim_inject_entry {
	enum sim_inject_kind kind;
	int all;          /* matches every command */
	rm_u32 cmd;
	uint64_t value;   /* latency us, or status */
	long count;       /* failures left; -1 = unlimited */
};

struct sim_inject {
	pthread_mutex_t lock;
	struct sim_inject_entry e[SIM_INJECT_MAX];
	size_t n;
};

/* One parsed line. */
struct sim_inject_op {
	enum { SIM_OP_ADD, SIM_OP_CLEAR, SIM_OP_RESET_LOG } op;
	struct sim_inject_entry entry;
};

struct sim_inject *sim_inject_new(void)
{
	struct sim_inject *inj = calloc(1, sizeof(*inj));
	if (inj && pthread_mutex_init(&inj->lock, NULL) != 0) {
		free(inj);
		return NULL;
	}
	return inj;
}

void sim_inject_destroy(struct sim_inject *inj)
{
	if (!inj)
		return;
	pthread_mutex_destroy(&inj->lock);
	free(inj);
}

/* Parse an unsigned number in base; the whole token, within max. */
static int sim_parse_u64(const char *tok, int base, uint64_t max, uint64_t *out)
{
	char *end;

	if (!tok || !*tok || *tok == '-' || *tok == '+')
		return -1;
	errno = 0;
	unsigned long long v = strtoull(tok, &end, base);
	if (errno || *end || v > max)
		return -1;
	*out = v;
	return 0;
}

/* "<cmd-hex>" or "all" (when allow_all). */
static int sim_parse_cmd(const char *tok, int allow_all, struct sim_inject_entry *e)
{
	uint64_t v;

	if (allow_all && tok && strcmp(tok, "all") == 0) {
		e->all = 1;
		return 0;
	}
	if (sim_parse_u64(tok, 16, 0xffffffffu, &v) || v == 0)
		return -1;
	e->cmd = (rm_u32)v;
	return 0;
}

/* An optional use count: tok NULL (none given) leaves -1, unlimited. */
static int sim_parse_count(const char *tok, struct sim_inject_entry *e)
{
	uint64_t count;

	if (tok == NULL)
		return 0;
	if (sim_parse_u64(tok, 10, 1000000, &count) || count == 0)
		return -1;
	e->count = (long)count;
	return 0;
}

static int sim_parse_add(char *verb, char **tok, int ntok, struct sim_inject_entry *e)
{
	memset(e, 0, sizeof(*e));
	e->count = -1;
	if (strcmp(verb, "latency") == 0 && ntok == 2) {
		e->kind = SIM_INJ_LATENCY;
		return sim_parse_cmd(tok[0], 1, e) ||
		       sim_parse_u64(tok[1], 10, SIM_LATENCY_MAX_US, &e->value) ? -1 : 0;
	}
	if (strcmp(verb, "fail") == 0 && (ntok == 2 || ntok == 3)) {
		e->kind = SIM_INJ_FAIL;
		return sim_parse_cmd(tok[0], 1, e) ||
		       sim_parse_u64(tok[1], 16, 0xffffffffu, &e->value) || e->value == 0 ||
		       sim_parse_count(ntok == 3 ? tok[2] : NULL, e) ? -1 : 0;
	}
	if (strcmp(verb, "unsupported") == 0 && ntok == 1) {
		e->kind = SIM_INJ_UNSUPPORTED;
		return sim_parse_cmd(tok[0], 0, e);
	}
	if (strcmp(verb, "drop") == 0 && (ntok == 1 || ntok == 2)) {
		e->kind = SIM_INJ_DROP;
		return sim_parse_cmd(tok[0], 0, e) ||
		       sim_parse_count(ntok == 2 ? tok[1] : NULL, e) ? -1 : 0;
	}
	return -1;
}

/* Parse one line (NUL-terminated, modified in place). 1 = blank. */
static int sim_parse_line(char *line, struct sim_inject_op *op)
{
	char *save = NULL, *tok[4];
	char *verb = strtok_r(line, " \t\r", &save);
	int ntok = 0;

	if (!verb)
		return 1;
	while (ntok < 4 && (tok[ntok] = strtok_r(NULL, " \t\r", &save)) != NULL)
		ntok++;
	if (ntok == 4)
		return -1;
	if (strcmp(verb, "clear") == 0 || strcmp(verb, "reset-log") == 0) {
		op->op = verb[0] == 'c' ? SIM_OP_CLEAR : SIM_OP_RESET_LOG;
		return ntok == 0 ? 0 : -1;
	}
	op->op = SIM_OP_ADD;
	return sim_parse_add(verb, tok, ntok, &op->entry);
}

/* Same kind and key: a new entry replaces the old one. */
static void sim_inject_add(struct sim_inject *inj, const struct sim_inject_entry *e)
{
	for (size_t i = 0; i < inj->n; i++) {
		struct sim_inject_entry *o = &inj->e[i];
		if (o->kind == e->kind && o->all == e->all && o->cmd == e->cmd) {
			*o = *e;
			return;
		}
	}
	inj->e[inj->n++] = *e;
}

static int sim_inject_parse_all(const char *text, size_t len, struct sim_inject_op *ops,
				size_t *nops)
{
	char line[SIM_LINE_MAX];
	size_t start = 0;

	*nops = 0;
	while (start < len) {
		size_t end = start;
		while (end < len && text[end] != '\n')
			end++;
		if (end - start >= sizeof(line) || memchr(text + start, '\0', end - start))
			return -EINVAL;
		memcpy(line, text + start, end - start);
		line[end - start] = '\0';
		int r = sim_parse_line(line, &ops[*nops]);
		if (r < 0 || (r == 0 && ++*nops > SIM_INJECT_MAX))
			return -EINVAL;
		start = end + 1;
	}
	return *nops ? 0 : -EINVAL;
}

int sim_inject_apply(struct sim_inject *inj, const char *text, size_t len, int *reset_log)
{
	struct sim_inject_op ops[SIM_INJECT_MAX + 1];
	size_t nops;

	*reset_log = 0;
	if (sim_inject_parse_all(text, len, ops, &nops) != 0)
		return -EINVAL;
	pthread_mutex_lock(&inj->lock);
	size_t adds = inj->n;
	for (size_t i = 0; i < nops; i++)
		adds = ops[i].op == SIM_OP_CLEAR ? 0 : adds + (ops[i].op == SIM_OP_ADD);
	if (adds > SIM_INJECT_MAX) { /* could overflow the table: refuse it all */
		pthread_mutex_unlock(&inj->lock);
		return -EINVAL;
	}
	for (size_t i = 0; i < nops; i++) {
		if (ops[i].op == SIM_OP_CLEAR)
			inj->n = 0;
		else if (ops[i].op == SIM_OP_RESET_LOG)
			*reset_log = 1;
		else
			sim_inject_add(inj, &ops[i].entry);
	}
	pthread_mutex_unlock(&inj->lock);
	return 0;
}

/* The entry of kind for cmd: an exact one wins over "all". */
static struct sim_inject_entry *sim_inject_find(struct sim_inject *inj,
						enum sim_inject_kind kind, rm_u32 cmd)
{
	struct sim_inject_entry *any = NULL;
	for (size_t i = 0; i < inj->n; i++) {
		struct sim_inject_entry *e = &inj->e[i];
		if (e->kind != kind)
			continue;
		if (!e->all && e->cmd == cmd)
			return e;
		if (e->all)
			any = e;
	}
	return any;
}

void sim_inject_lookup(struct sim_inject *inj, rm_u32 cmd, uint64_t *latency_us,
		       struct sim_ctrl_inject *out)
{
	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&inj->lock);
	struct sim_inject_entry *e = sim_inject_find(inj, SIM_INJ_LATENCY, cmd);
	*latency_us = e ? e->value : 0;
	out->unsupported = sim_inject_find(inj, SIM_INJ_UNSUPPORTED, cmd) != NULL;
	e = sim_inject_find(inj, SIM_INJ_FAIL, cmd);
	if (e == NULL)
		e = sim_inject_find(inj, SIM_INJ_DROP, cmd);
	if (e) {
		/* A drop is a "failure" whose status is NV_OK (value 0). */
		out->fail = 1;
		out->fail_status = (rm_u32)e->value;
		if (e->count > 0 && --e->count == 0) {
			*e = inj->e[inj->n - 1];
			inj->n--;
		}
	}
	pthread_mutex_unlock(&inj->lock);
}

void sim_inject_json(struct sim_inject *inj, struct sim_buf *b)
{
	static const char *const kinds[] = { "latency", "fail", "unsupported", "drop" };

	pthread_mutex_lock(&inj->lock);
	sim_buf_printf(b, "[");
	for (size_t i = 0; i < inj->n; i++) {
		const struct sim_inject_entry *e = &inj->e[i];
		sim_buf_printf(b, "%s{\"kind\":\"%s\",", i ? "," : "", kinds[e->kind]);
		if (e->all)
			sim_buf_printf(b, "\"cmd\":\"all\"");
		else
			sim_buf_printf(b, "\"cmd\":\"0x%08x\"", e->cmd);
		if (e->kind == SIM_INJ_LATENCY)
			sim_buf_printf(b, ",\"us\":%llu", (unsigned long long)e->value);
		if (e->kind == SIM_INJ_FAIL)
			sim_buf_printf(b, ",\"status\":\"0x%02llx\",\"count\":%ld",
				       (unsigned long long)e->value, e->count);
		if (e->kind == SIM_INJ_DROP)
			sim_buf_printf(b, ",\"count\":%ld", e->count);
		sim_buf_printf(b, "}");
	}
	sim_buf_printf(b, "]");
	pthread_mutex_unlock(&inj->lock);
}
