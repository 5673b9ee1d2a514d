/* SPDX-License-Identifier: Apache-2.0 */
/*
 * config.c - validates and applies the standalone policy file.
 *
 * Owns: the JSON format of docs/policy.md (every key, type and limit), the
 * error sentences an operator sees, and classifying a process by rules.
 * Does not own: reading the file (agent/io/configfile.c) or when it is
 * (re)read, /proc, or the decision itself (policy.c). A file is accepted whole or not at all: it is
 * parsed into a scratch copy and only a valid result reaches the caller.
 */
#include "agent/core/config.h"

#include <cjson/cJSON.h>
#include <fnmatch.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "abi/rm_abi.h"

/* Where an error is reported: "policy file PATH" or "policy text". */
struct ctx {
	const char *name;
	char *err;
	size_t errlen;
};

/* What a parse builds; allow_unsafe is only needed until validation. */
struct state {
	struct agent_config cfg;
	int allow_unsafe;
};

__attribute__((format(printf, 3, 4))) static int fail(const struct ctx *x, const char *field,
						      const char *fmt, ...)
{
	va_list ap;
	int n;

	if (!x->err || !x->errlen)
		return -1;
	if (field)
		n = snprintf(x->err, x->errlen, "%s: field \"%s\" ", x->name, field);
	else
		n = snprintf(x->err, x->errlen, "%s: ", x->name);
	if (n < 0 || (size_t)n >= x->errlen)
		return -1;
	va_start(ap, fmt);
	vsnprintf(x->err + n, x->errlen - (size_t)n, fmt, ap);
	va_end(ap);
	return -1;
}

static const char *type_name(const cJSON *j)
{
	if (cJSON_IsString(j))
		return "a string";
	if (cJSON_IsNumber(j))
		return "a number";
	if (cJSON_IsBool(j))
		return "a boolean";
	if (cJSON_IsNull(j))
		return "null";
	if (cJSON_IsArray(j))
		return "an array";
	if (cJSON_IsObject(j))
		return "an object";
	return "an invalid value";
}

/* ------------------------------------------------------------------ */
/* Typed getters: each names the field and what it got                 */
/* ------------------------------------------------------------------ */

static int get_uint(const struct ctx *x, const char *field, const cJSON *j, uint32_t min,
		    uint32_t max, uint32_t *out)
{
	double d;

	if (!cJSON_IsNumber(j))
		return fail(x, field, "must be an integer from %u to %u, got %s", min, max,
			    type_name(j));
	d = j->valuedouble;
	/* The negated range test also catches NaN; the cast test catches
	 * fractions once d is known to fit. */
	if (!(d >= (double)min && d <= (double)max) || (double)(uint32_t)d != d)
		return fail(x, field, "must be an integer from %u to %u, got %.15g", min, max, d);
	*out = (uint32_t)d;
	return 0;
}

static int get_bool(const struct ctx *x, const char *field, const cJSON *j, int *out)
{
	if (!cJSON_IsBool(j))
		return fail(x, field, "must be true or false, got %s", type_name(j));
	*out = cJSON_IsTrue(j) ? 1 : 0;
	return 0;
}

static int get_string(const struct ctx *x, const char *field, const cJSON *j, const char **out)
{
	if (!cJSON_IsString(j) || !j->valuestring)
		return fail(x, field, "must be a string, got %s", type_name(j));
	*out = j->valuestring;
	return 0;
}

static int get_class(const struct ctx *x, const char *field, const cJSON *j, enum qos_class *out)
{
	const char *s = NULL;

	if (get_string(x, field, j, &s))
		return -1;
	if (class_parse(s, out))
		return fail(x, field,
			    "must be \"latency-critical\", \"best-effort\" or \"unmanaged\", got \"%s\"",
			    s);
	return 0;
}

static int get_interleave(const struct ctx *x, const char *field, const cJSON *j, int32_t *out)
{
	static const struct {
		const char *name;
		int32_t level;
	} levels[] = {
		{ "low", RM_INTERLEAVE_LOW },
		{ "medium", RM_INTERLEAVE_MEDIUM },
		{ "high", RM_INTERLEAVE_HIGH },
		{ "leave", POLICY_INTERLEAVE_LEAVE },
	};
	const char *s = NULL;

	if (get_string(x, field, j, &s))
		return -1;
	for (size_t i = 0; i < sizeof(levels) / sizeof(levels[0]); i++) {
		if (strcmp(s, levels[i].name) == 0) {
			*out = levels[i].level;
			return 0;
		}
	}
	return fail(x, field, "must be \"low\", \"medium\", \"high\" or \"leave\", got \"%s\"", s);
}

/* Unknown keys are errors so that a typo never silently means "default";
 * a repeated key is one too, since only one of the values would count. */
static int check_keys(const struct ctx *x, const char *field, const cJSON *obj,
		      const char *const *known, size_t nknown)
{
	for (const cJSON *k = obj->child; k; k = k->next) {
		size_t i = 0;

		while (i < nknown && strcmp(k->string, known[i]) != 0)
			i++;
		if (i == nknown) {
			if (field)
				return fail(x, field, "has unknown key \"%s\"", k->string);
			return fail(x, NULL, "unknown key \"%s\" (see docs/policy.md)", k->string);
		}
		for (const cJSON *e = obj->child; e != k; e = e->next) {
			if (strcmp(e->string, k->string) != 0)
				continue;
			if (field)
				return fail(x, field, "has key \"%s\" twice", k->string);
			return fail(x, k->string, "appears twice");
		}
	}
	return 0;
}

static int want_object(const struct ctx *x, const char *field, const cJSON *j)
{
	if (!cJSON_IsObject(j))
		return fail(x, field, "must be an object, got %s", type_name(j));
	return 0;
}

/* ------------------------------------------------------------------ */
/* Sections                                                            */
/* ------------------------------------------------------------------ */

/* fnmatch(3) takes any text and quietly reads a broken bracket as plain
 * characters, so a typo would match nothing. The grammar it implements,
 * flags 0: `\\` quotes the next character; `[` opens a set closed by a
 * later `]` (one right after `[`, `[!` or `[^` is a member), which may
 * hold `[:class:]`, `[.x.]` and `[=x=]`. */
static int glob_bracket_end(const char *p, const char **end, char *why, size_t n)
{
	static const char *const classes[] = { "alnum", "alpha", "blank", "cntrl", "digit", "graph",
					       "lower", "print", "punct", "space", "upper", "xdigit" };

	p++; /* the [ */
	if (*p == '!' || *p == '^')
		p++;
	if (*p == ']')
		p++;
	for (; *p && *p != ']'; p++) {
		if (*p == '\\' && p[1]) {
			p++;
			continue;
		}
		if (*p != '[' || (p[1] != ':' && p[1] != '.' && p[1] != '='))
			continue;
		{
			char kind = p[1];
			const char *close = p + 2;
			size_t len, i = 0;

			while (*close && !(close[0] == kind && close[1] == ']'))
				close++;
			if (!*close) {
				snprintf(why, n, "\"[%c\" has no closing \"%c]\"", kind, kind);
				return -1;
			}
			len = (size_t)(close - (p + 2));
			if (kind == ':') {
				while (i < sizeof(classes) / sizeof(classes[0]) &&
				       (strlen(classes[i]) != len || strncmp(classes[i], p + 2, len) != 0))
					i++;
				if (i == sizeof(classes) / sizeof(classes[0])) {
					snprintf(why, n, "unknown character class \"[:%.*s:]\"", (int)len, p + 2);
					return -1;
				}
			}
			p = close + 1;
		}
	}
	if (!*p) {
		snprintf(why, n, "\"[\" has no closing \"]\"");
		return -1;
	}
	*end = p;
	return 0;
}

static int glob_check(const char *pat, char *why, size_t n)
{
	for (const char *p = pat; *p; p++) {
		if (*p == '\\') {
			if (!p[1]) {
				snprintf(why, n, "it ends in a lone \"\\\"");
				return -1;
			}
			p++;
		} else if (*p == '[' && glob_bracket_end(p, &p, why, n)) {
			return -1;
		}
	}
	return 0;
}

static int parse_rule(const struct ctx *x, int idx, const cJSON *j, struct config_rule *r)
{
	static const char *const keys[] = { "cgroup", "exe", "class" };
	const cJSON *cg, *exe, *cls, *pat;
	char field[32], sub[48], why[96];
	const char *s = NULL;
	size_t len;

	snprintf(field, sizeof(field), "rules[%d]", idx);
	if (want_object(x, field, j) || check_keys(x, field, j, keys, 3))
		return -1;
	cg = cJSON_GetObjectItemCaseSensitive(j, "cgroup");
	exe = cJSON_GetObjectItemCaseSensitive(j, "exe");
	cls = cJSON_GetObjectItemCaseSensitive(j, "class");
	if (cg && exe)
		return fail(x, field, "has both \"cgroup\" and \"exe\"; a rule matches one of them");
	if (!cg && !exe)
		return fail(x, field, "has neither \"cgroup\" nor \"exe\"; a rule needs one");
	pat = cg ? cg : exe;
	snprintf(sub, sizeof(sub), "%s.%s", field, cg ? "cgroup" : "exe");
	if (get_string(x, sub, pat, &s))
		return -1;
	len = strlen(s);
	if (len == 0)
		return fail(x, sub, "must not be empty");
	if (len >= sizeof(r->pattern))
		return fail(x, sub, "is %zu bytes long; at most %zu are allowed", len,
			    sizeof(r->pattern) - 1);
	if (glob_check(s, why, sizeof(why)))
		return fail(x, sub, "\"%s\" is not a valid glob: %s", s, why);
	snprintf(sub, sizeof(sub), "%s.class", field);
	if (!cls)
		return fail(x, sub, "is missing");
	if (get_class(x, sub, cls, &r->cls))
		return -1;
	r->kind = cg ? MATCH_CGROUP : MATCH_EXE;
	memcpy(r->pattern, s, len + 1);
	return 0;
}

static int parse_rules(const struct ctx *x, const cJSON *j, struct state *st)
{
	int n, i = 0;
	const cJSON *el;

	if (!cJSON_IsArray(j))
		return fail(x, "rules", "must be an array, got %s", type_name(j));
	n = cJSON_GetArraySize(j);
	if (n > CONFIG_MAX_RULES)
		return fail(x, "rules", "has %d rules; at most %d are allowed", n, CONFIG_MAX_RULES);
	cJSON_ArrayForEach(el, j)
	{
		if (parse_rule(x, i, el, &st->cfg.rules[i]))
			return -1;
		i++;
	}
	st->cfg.nrules = (size_t)i;
	return 0;
}

/* One optional whole-number member of an object, its range and where it
 * goes. */
struct uint_member {
	const char *key;
	uint32_t min, max;
	uint32_t *dst;
};

#define UINT_MEMBERS_MAX 4

/* An object of optional whole-number members, and of the other keys in
 * extra[0..nextra) that the caller reads itself; an error names the
 * member as "name.key". */
static int get_uint_members(const struct ctx *x, const char *name, const cJSON *j,
			    const struct uint_member *m, size_t n, const char *const *extra,
			    size_t nextra)
{
	const char *keys[UINT_MEMBERS_MAX];
	char field[48];

	if (n + nextra > UINT_MEMBERS_MAX)
		return fail(x, name, "has more members than the parser holds");
	for (size_t i = 0; i < n; i++)
		keys[i] = m[i].key;
	for (size_t i = 0; i < nextra; i++)
		keys[n + i] = extra[i];
	if (want_object(x, name, j) || check_keys(x, name, j, keys, n + nextra))
		return -1;
	for (size_t i = 0; i < n; i++) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, m[i].key);

		snprintf(field, sizeof(field), "%s.%s", name, m[i].key);
		if (v && get_uint(x, field, v, m[i].min, m[i].max, m[i].dst))
			return -1;
	}
	return 0;
}

/* An object of optional whole-number members only. */
static int get_uint_object(const struct ctx *x, const char *name, const cJSON *j,
			   const struct uint_member *m, size_t n)
{
	return get_uint_members(x, name, j, m, n, NULL, 0);
}

static int parse_timeslices(const struct ctx *x, const cJSON *j, struct state *st)
{
	struct policy_config *p = &st->cfg.policy;
	const struct uint_member m[] = {
		{ "lcUs", POLICY_TIMESLICE_MIN_US, POLICY_TIMESLICE_MAX_US, &p->lc_timeslice_us },
		{ "beUs", POLICY_TIMESLICE_MIN_US, POLICY_TIMESLICE_MAX_US, &p->be_timeslice_us },
		{ "severalBeUs", POLICY_TIMESLICE_MIN_US, POLICY_TIMESLICE_MAX_US,
		  &p->several_be_timeslice_us },
	};

	return get_uint_object(x, "timeslices", j, m, sizeof(m) / sizeof(m[0]));
}

static int parse_interleave(const struct ctx *x, const cJSON *j, struct state *st)
{
	static const char *const keys[] = { "lc", "be" };
	const cJSON *lc, *be;

	if (want_object(x, "interleave", j) || check_keys(x, "interleave", j, keys, 2))
		return -1;
	lc = cJSON_GetObjectItemCaseSensitive(j, "lc");
	be = cJSON_GetObjectItemCaseSensitive(j, "be");
	if (lc && get_interleave(x, "interleave.lc", lc, &st->cfg.policy.lc_interleave))
		return -1;
	if (be && get_interleave(x, "interleave.be", be, &st->cfg.policy.be_interleave))
		return -1;
	return 0;
}

/* Kubernetes mode only: the class of a GPU pod whose gpu.qos annotation is
 * missing or invalid. */
static int parse_kubernetes(const struct ctx *x, const cJSON *j, struct state *st)
{
	static const char *const keys[] = { "defaultClass" };
	const cJSON *v;

	if (want_object(x, "kubernetes", j) || check_keys(x, "kubernetes", j, keys, 1))
		return -1;
	v = cJSON_GetObjectItemCaseSensitive(j, "defaultClass");
	return v ? get_class(x, "kubernetes.defaultClass", v, &st->cfg.k8s_default_class) : 0;
}

void mem_config_defaults(struct mem_config *m)
{
	memset(m, 0, sizeof(*m));
	for (size_t i = 0; i < sizeof(m->default_budget) / sizeof(m->default_budget[0]); i++)
		m->default_budget[i] = GQ_MEM_UNLIMITED;
}

/* A size (common/quantity.c) as a string, or whole bytes as a number. */
static int get_quantity(const struct ctx *x, const char *field, const cJSON *j, uint64_t *out)
{
	char why[160], num[32];

	if (cJSON_IsNumber(j)) {
		double d = j->valuedouble;

		if (!(d >= 0 && d <= (double)QUANTITY_MAX) || (double)(uint64_t)d != d)
			return fail(x, field, "must be a size such as \"16Gi\" or whole bytes, got %.15g",
				    d);
		snprintf(num, sizeof(num), "%llu", (unsigned long long)d);
		if (quantity_parse(num, out, why, sizeof(why)))
			return fail(x, field, "%s", why);
		return 0;
	}
	if (!cJSON_IsString(j) || !j->valuestring)
		return fail(x, field, "must be a size such as \"16Gi\", got %s", type_name(j));
	if (quantity_parse(j->valuestring, out, why, sizeof(why)))
		return fail(x, field, "%s", why);
	return 0;
}

/* "memory": the LC reserve per GPU (a size or "N%" of the GPU) and each
 * class's default budget per pod and GPU. */
static int parse_memory(const struct ctx *x, const cJSON *j, struct state *st)
{
	static const char *const keys[] = { "lcReserve", "defaults" };
	static const char *const classes[] = { "best-effort", "latency-critical" };
	struct mem_config *m = &st->cfg.memory;
	const cJSON *v, *d;

	if (want_object(x, "memory", j) || check_keys(x, "memory", j, keys, 2))
		return -1;
	v = cJSON_GetObjectItemCaseSensitive(j, "lcReserve");
	if (v && cJSON_IsString(v) && v->valuestring && strchr(v->valuestring, '%')) {
		const char *s = v->valuestring;
		char *end = NULL;
		unsigned long pct = strtoul(s, &end, 10);

		if (s[0] < '0' || s[0] > '9' || !end || strcmp(end, "%") != 0 || pct < 1 || pct > 100)
			return fail(x, "memory.lcReserve",
				    "must be a size such as \"16Gi\" or a whole percent of the GPU "
				    "from 1%% to 100%%, got \"%s\"", s);
		m->lc_reserve_percent = (uint32_t)pct;
		m->lc_reserve = 0;
	} else if (v) {
		if (get_quantity(x, "memory.lcReserve", v, &m->lc_reserve))
			return -1;
		m->lc_reserve_percent = 0;
	}
	d = cJSON_GetObjectItemCaseSensitive(j, "defaults");
	if (!d)
		return 0;
	if (want_object(x, "memory.defaults", d) || check_keys(x, "memory.defaults", d, classes, 2))
		return -1;
	for (size_t i = 0; i < 2; i++) {
		char field[64];
		enum qos_class c;

		v = cJSON_GetObjectItemCaseSensitive(d, classes[i]);
		if (!v || class_parse(classes[i], &c))
			continue;
		snprintf(field, sizeof(field), "memory.defaults.%s", classes[i]);
		if (get_quantity(x, field, v, &m->default_budget[c]))
			return -1;
	}
	return 0;
}

static int parse_version(const struct ctx *x, const cJSON *j, struct state *st)
{
	if (!cJSON_IsNumber(j) || j->valuedouble != (double)CONFIG_VERSION) {
		if (cJSON_IsNumber(j))
			return fail(x, "version", "must be %d (the only format this agent reads), got %.15g",
				    CONFIG_VERSION, j->valuedouble);
		return fail(x, "version", "must be the number %d, got %s", CONFIG_VERSION,
			    type_name(j));
	}
	st->cfg.version = CONFIG_VERSION;
	return 0;
}

static int parse_default_class(const struct ctx *x, const cJSON *j, struct state *st)
{
	return get_class(x, "defaultClass", j, &st->cfg.default_class);
}

static int parse_trust(const struct ctx *x, const cJSON *j, struct state *st)
{
	return get_bool(x, "trustRunClass", j, &st->cfg.trust_run_class);
}

static int parse_several_be(const struct ctx *x, const cJSON *j, struct state *st)
{
	const char *s = NULL;

	if (get_string(x, "severalBe", j, &s))
		return -1;
	if (strcmp(s, "floor") == 0)
		st->cfg.policy.several_be = POLICY_SEVERAL_BE_FLOOR;
	else if (strcmp(s, "leave") == 0)
		st->cfg.policy.several_be = POLICY_SEVERAL_BE_LEAVE;
	else if (strcmp(s, "rotate") == 0)
		st->cfg.policy.several_be = POLICY_SEVERAL_BE_ROTATE;
	else
		return fail(x, "severalBe", "must be \"rotate\", \"floor\" or \"leave\", got \"%s\"",
			    s);
	return 0;
}

static int parse_rotation(const struct ctx *x, const cJSON *j, struct state *st)
{
	struct policy_config *p = &st->cfg.policy;
	const struct uint_member m[] = {
		{ "periodMs", POLICY_ROTATE_PERIOD_MIN_MS, POLICY_ROTATE_PERIOD_MAX_MS,
		  &p->rotate_period_ms },
		{ "leaseMs", POLICY_GATE_LEASE_MIN_MS, POLICY_GATE_LEASE_MAX_MS, &p->gate_lease_ms },
	};

	static const char *const other[] = { "inGap" };
	const cJSON *gap;

	if (get_uint_members(x, "rotation", j, m, sizeof(m) / sizeof(m[0]), other, 1))
		return -1;
	gap = cJSON_GetObjectItemCaseSensitive(j, "inGap");
	if (gap && get_bool(x, "rotation.inGap", gap, &p->rotate_in_gap))
		return -1;
	/* A file that sets only the lease, valid under the former 100 ms
	 * default turn, stays valid: the turn defaults to half the lease
	 * where 250 ms would be more. */
	if (!cJSON_GetObjectItemCaseSensitive(j, "periodMs") &&
	    cJSON_GetObjectItemCaseSensitive(j, "leaseMs") &&
	    p->gate_lease_ms < 2u * p->rotate_period_ms)
		p->rotate_period_ms = p->gate_lease_ms / 2u;
	return 0;
}

static int parse_busy_lc(const struct ctx *x, const cJSON *j, struct state *st)
{
	return get_uint(x, "busyLcPercent", j, 0, POLICY_BUSY_LC_PERCENT_MAX,
			&st->cfg.policy.busy_lc_percent);
}

static int parse_wake(const struct ctx *x, const cJSON *j, struct state *st)
{
	struct policy_config *p = &st->cfg.policy;
	const struct uint_member m[] = {
		{ "leadUs", 0, POLICY_WAKE_MAX_US, &p->wake_lead_us },
		{ "holdUs", 0, POLICY_WAKE_MAX_US, &p->wake_hold_us },
	};

	return get_uint_object(x, "wake", j, m, sizeof(m) / sizeof(m[0]));
}

static int parse_windows(const struct ctx *x, const cJSON *j, struct state *st)
{
	struct policy_config *p = &st->cfg.policy;
	const struct uint_member m[] = {
		{ "beforeUs", 0, POLICY_WINDOW_BEFORE_MAX_US, &p->window_before_us },
		{ "maxOffPercent", 1, POLICY_WINDOW_OFF_PERCENT_MAX, &p->window_max_off_percent },
		{ "podMaxOffPercent", 0, POLICY_WINDOW_OFF_PERCENT_MAX,
		  &p->window_pod_max_off_percent },
	};
	static const char *const other[] = { "afterUs" };
	const cJSON *after;

	if (get_uint_members(x, "windows", j, m, sizeof(m) / sizeof(m[0]), other, 1))
		return -1;
	after = cJSON_GetObjectItemCaseSensitive(j, "afterUs");
	if (!after)
		return 0;
	/* A number of us, or "auto": each LC's own span (window.c). */
	if (cJSON_IsString(after)) {
		if (strcmp(after->valuestring, "auto") != 0)
			return fail(x, "windows.afterUs",
				    "must be a number of us (0 .. %u) or \"auto\", got \"%s\"",
				    POLICY_WINDOW_AFTER_MAX_US, after->valuestring);
		p->window_after_us = 0;
		p->window_after_auto = 1;
		return 0;
	}
	if (!cJSON_IsNumber(after))
		return fail(x, "windows.afterUs", "must be a number of us (0 .. %u) or \"auto\", got %s",
			    POLICY_WINDOW_AFTER_MAX_US, type_name(after));
	p->window_after_auto = 0;
	return get_uint(x, "windows.afterUs", after, 0, POLICY_WINDOW_AFTER_MAX_US,
			&p->window_after_us);
}

static int parse_allow_unsafe(const struct ctx *x, const cJSON *j, struct state *st)
{
	return get_bool(x, "allowUnsafeSeveralBe", j, &st->allow_unsafe);
}

static int parse_manage_copy(const struct ctx *x, const cJSON *j, struct state *st)
{
	return get_bool(x, "manageCopyEngines", j, &st->cfg.policy.manage_copy);
}

static int parse_deadline(const struct ctx *x, const cJSON *j, struct state *st)
{
	return get_uint(x, "controlDeadlineMs", j, AGENT_CONTROL_DEADLINE_MIN_MS,
			AGENT_CONTROL_DEADLINE_MAX_MS, &st->cfg.control_deadline_ms);
}

static int parse_interval(const struct ctx *x, const cJSON *j, struct state *st)
{
	return get_uint(x, "reconcileIntervalMs", j, AGENT_RECONCILE_INTERVAL_MIN_MS,
			AGENT_RECONCILE_INTERVAL_MAX_MS, &st->cfg.reconcile_interval_ms);
}

static const char *const path_modes[] = { "auto", "in-process", "direct" };
static const char *const actions[NACTIONS] = { "timeslice", "interleave", "preempt" };

const char *path_mode_name(enum path_mode m)
{
	return (unsigned)m < 3 ? path_modes[m] : "?";
}

const char *action_name(enum path_action a)
{
	return (unsigned)a < NACTIONS ? actions[a] : "?";
}

static int get_path_mode(const struct ctx *x, const char *field, const cJSON *j,
			 enum path_mode *out)
{
	const char *s = NULL;

	if (get_string(x, field, j, &s))
		return -1;
	for (size_t i = 0; i < 3; i++) {
		if (strcmp(s, path_modes[i]) == 0) {
			*out = (enum path_mode)i;
			return 0;
		}
	}
	/* "agent" was this mode's name until 2026-11-23; it now means only the
	 * node agent, and an old file must say what it meant. */
	if (strcmp(s, "agent") == 0)
		return fail(x, field, "must be \"auto\", \"in-process\" or \"direct\": "
			    "\"agent\" is now called \"in-process\" (the preempt agent "
			    "inside the workload issues the control)");
	return fail(x, field, "must be \"auto\", \"in-process\" or \"direct\", got \"%s\"", s);
}

/* One string for every action, or an object naming some of them (the
 * others stay "auto"). */
static int parse_control_path(const struct ctx *x, const cJSON *j, struct state *st)
{
	enum path_mode m = PATH_MODE_AUTO;
	char field[48];

	if (cJSON_IsString(j)) {
		if (get_path_mode(x, "controlPath", j, &m))
			return -1;
		for (size_t i = 0; i < NACTIONS; i++)
			st->cfg.control_path[i] = m;
		return 0;
	}
	if (!cJSON_IsObject(j))
		return fail(x, "controlPath",
			    "must be a string (\"auto\", \"agent\", \"direct\") or an object by "
			    "action, got %s", type_name(j));
	if (check_keys(x, "controlPath", j, actions, NACTIONS))
		return -1;
	for (size_t i = 0; i < NACTIONS; i++) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, actions[i]);

		snprintf(field, sizeof(field), "controlPath.%s", actions[i]);
		if (v && get_path_mode(x, field, v, &st->cfg.control_path[i]))
			return -1;
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* The document                                                        */
/* ------------------------------------------------------------------ */

static int parse_verify(const struct ctx *x, const cJSON *j, struct state *st)
{
	return get_uint(x, "verifyIntervalS", j, 0, AGENT_VERIFY_INTERVAL_MAX_S,
			&st->cfg.verify_interval_s);
}

static const struct {
	const char *key;
	int (*parse)(const struct ctx *x, const cJSON *j, struct state *st);
} top[] = {
	{ "version", parse_version },
	{ "defaultClass", parse_default_class },
	{ "trustRunClass", parse_trust },
	{ "rules", parse_rules },
	{ "timeslices", parse_timeslices },
	{ "severalBe", parse_several_be },
	{ "rotation", parse_rotation },
	{ "busyLcPercent", parse_busy_lc },
	{ "wake", parse_wake },
	{ "windows", parse_windows },
	{ "allowUnsafeSeveralBe", parse_allow_unsafe },
	{ "interleave", parse_interleave },
	{ "manageCopyEngines", parse_manage_copy },
	{ "controlDeadlineMs", parse_deadline },
	{ "reconcileIntervalMs", parse_interval },
	{ "verifyIntervalS", parse_verify },
	{ "controlPath", parse_control_path },
	{ "kubernetes", parse_kubernetes },
	{ "memory", parse_memory },
};
#define NTOP (sizeof(top) / sizeof(top[0]))

/* Checks that need several fields, after every field is read. */
static int validate(const struct ctx *x, struct state *st)
{
	char why[160];

	if (st->cfg.policy.several_be_timeslice_us < POLICY_SEVERAL_BE_SAFE_MIN_US &&
	    !st->allow_unsafe)
		return fail(x, "timeslices.severalBeUs",
			    "is %u us, below the safe floor of %u us: several BEs with short "
			    "timeslices starved a BE and once stalled the RM control path; set "
			    "\"allowUnsafeSeveralBe\": true to use it anyway",
			    st->cfg.policy.several_be_timeslice_us, POLICY_SEVERAL_BE_SAFE_MIN_US);
	if (st->cfg.policy.lc_timeslice_us < st->cfg.policy.be_timeslice_us)
		return fail(x, "timeslices.lcUs",
			    "is %u us, below timeslices.beUs (%u us): an LC would run in shorter slices "
			    "than the BE beside it",
			    st->cfg.policy.lc_timeslice_us, st->cfg.policy.be_timeslice_us);
	if (st->cfg.policy.gate_lease_ms < 2u * st->cfg.policy.rotate_period_ms)
		return fail(x, "rotation.leaseMs",
			    "is %u ms, below twice rotation.periodMs (%u ms): a gated BE's lease "
			    "would lapse between two renewals",
			    st->cfg.policy.gate_lease_ms, st->cfg.policy.rotate_period_ms);
	if (st->cfg.policy.wake_hold_us && !st->cfg.policy.wake_lead_us)
		return fail(x, "wake.holdUs",
			    "is %u us without a wake.leadUs: a hold only keeps a woken context in",
			    st->cfg.policy.wake_hold_us);
	/* Cannot fail after the checks above; kept so the file can never
	 * hold something the agent's own validation would refuse. */
	if (policy_config_validate(&st->cfg.policy, st->allow_unsafe, why, sizeof(why)))
		return fail(x, NULL, "%s", why);
	return 0;
}

static int parse_root(const struct ctx *x, const cJSON *root, struct state *st)
{
	const char *keys[NTOP];
	const cJSON *v;

	if (!cJSON_IsObject(root))
		return fail(x, NULL, "must hold one JSON object, got %s", type_name(root));
	/* The version decides how the rest reads, so it comes first. */
	v = cJSON_GetObjectItemCaseSensitive(root, "version");
	if (!v)
		return fail(x, "version", "is missing; it must be %d", CONFIG_VERSION);
	if (parse_version(x, v, st))
		return -1;
	for (size_t i = 0; i < NTOP; i++)
		keys[i] = top[i].key;
	if (check_keys(x, NULL, root, keys, NTOP))
		return -1;
	for (size_t i = 0; i < NTOP; i++) {
		v = cJSON_GetObjectItemCaseSensitive(root, top[i].key);
		if (v && top[i].parse(x, v, st))
			return -1;
	}
	return validate(x, st);
}

static int not_json(const struct ctx *x, const char *text, const char *at)
{
	unsigned line = 1, col = 1;

	if (!at)
		return fail(x, NULL, "is not valid JSON");
	for (const char *p = text; *p && p < at; p++) {
		if (*p == '\n') {
			line++;
			col = 1;
		} else {
			col++;
		}
	}
	return fail(x, NULL, "is not valid JSON (error at line %u, column %u)", line, col);
}

static int parse_text(const struct ctx *x, const char *text, const char *path,
		      struct agent_config *out)
{
	struct state *st;
	const char *end = NULL;
	cJSON *root;
	int rc;

	if (text[strspn(text, " \t\r\n")] == '\0')
		return fail(x, NULL, "is empty; it must hold at least {\"version\": %d}",
			    CONFIG_VERSION);
	root = cJSON_ParseWithOpts(text, &end, 1);
	if (!root)
		return not_json(x, text, end);
	/* ~21 KiB: on the heap so callers with small stacks are safe. */
	st = calloc(1, sizeof(*st));
	if (!st) {
		cJSON_Delete(root);
		return fail(x, NULL, "cannot be parsed: out of memory");
	}
	config_defaults(&st->cfg);
	rc = parse_root(x, root, st);
	cJSON_Delete(root);
	if (rc == 0) {
		snprintf(st->cfg.path, sizeof(st->cfg.path), "%s", path);
		*out = st->cfg;
	}
	free(st);
	return rc;
}

/* ------------------------------------------------------------------ */
/* Public                                                              */
/* ------------------------------------------------------------------ */

void config_defaults(struct agent_config *c)
{
	memset(c, 0, sizeof(*c));
	c->version = CONFIG_VERSION;
	c->default_class = CLASS_UNMANAGED;
	c->trust_run_class = 1;
	/* A GPU pod that says nothing shares the GPU as best-effort: only an
	 * explicit annotation may shorten its neighbours. */
	c->k8s_default_class = CLASS_BE;
	c->nrules = 0;
	policy_config_defaults(&c->policy);
	mem_config_defaults(&c->memory);
	c->control_deadline_ms = 1000;
	c->reconcile_interval_ms = 200;
	c->verify_interval_s = 60;
}

int config_parse(const char *json_text, struct agent_config *out, char *err, size_t errlen)
{
	const struct ctx x = { "policy text", err, errlen };

	if (!json_text)
		return fail(&x, NULL, "is missing (NULL)");
	return parse_text(&x, json_text, "", out);
}

int config_parse_file(const char *path, const char *text, size_t len, struct agent_config *out,
		      char *err, size_t errlen)
{
	char name[sizeof(out->path) + 16];
	struct ctx x = { "policy file", err, errlen };

	if (!path || !*path)
		return fail(&x, NULL, "path is empty");
	if (strlen(path) >= sizeof(out->path))
		return fail(&x, NULL, "path is longer than %zu bytes", sizeof(out->path) - 1);
	snprintf(name, sizeof(name), "policy file %s", path);
	x.name = name;
	if (len > CONFIG_MAX_BYTES)
		return fail(&x, NULL, "is larger than %d bytes", CONFIG_MAX_BYTES);
	/* cJSON would stop at a NUL and judge only the text before it. */
	if (!text || memchr(text, '\0', len) || text[len] != '\0')
		return fail(&x, NULL, "contains a NUL byte; it must be JSON text");
	return parse_text(&x, text, path, out);
}

static int rule_matches(const struct config_rule *r, const char *cgroup, const char *exe)
{
	const char *subject = r->kind == MATCH_CGROUP ? cgroup : exe;

	/* Flags 0: `*` spans `/`, so one pattern covers a whole subtree. */
	return subject && fnmatch(r->pattern, subject, 0) == 0;
}

const char *class_source_name(enum class_source s)
{
	switch (s) {
	case CLS_SRC_DEFAULT:
		return "default";
	case CLS_SRC_OVERRIDE:
		return "override";
	case CLS_SRC_GPUQOS_RUN:
		return "gpuqos-run";
	case CLS_SRC_RULE:
		return "rule";
	case CLS_SRC_ANNOTATION:
		return "annotation";
	case CLS_SRC_NO_POD:
		return "no-pod";
	case CLS_SRC_POD_UNKNOWN:
		return "pod-unknown";
	}
	return "?";
}

enum qos_class config_classify(const struct agent_config *c, const char *cgroup, const char *exe,
				 const char *run_class, enum class_source *source)
{
	enum class_source src = CLS_SRC_DEFAULT;
	enum qos_class cls;

	if (c->trust_run_class && run_class && class_parse(run_class, &cls) == 0) {
		src = CLS_SRC_GPUQOS_RUN;
		goto out;
	}
	for (size_t i = 0; i < c->nrules && i < CONFIG_MAX_RULES; i++) {
		if (rule_matches(&c->rules[i], cgroup, exe)) {
			cls = c->rules[i].cls;
			src = CLS_SRC_RULE;
			goto out;
		}
	}
	cls = c->default_class;
out:
	if (source)
		*source = src;
	return cls;
}
