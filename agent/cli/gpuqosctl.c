/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpuqosctl.c - the operator's command line for gpuqos-agent: parses and
 * validates the command line, builds the one request of docs/ctl.md, and
 * maps the outcome to an exit status. The exchange itself is in
 * ctl_client.c, the checking and printing of answers in ctl_render.c.
 *
 * Exit status: 0 ok, 1 the agent said no or answered something unusable,
 * 2 usage error (nothing was sent), 3 the agent could not be reached.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#include <cjson/cJSON.h>

#include "cli_opt.h"
#include "agent/cli/cli_table.h"
#include "agent/cli/ctl_client.h"
#include "agent/cli/ctl_render.h"

/* gpuqos-agent's AGENT_DEFAULT_CTL_SOCKET (agent/agent.h): outside the
 * preempt socket's directory, which containers see. */
#define DEFAULT_SOCKET "/run/gpuqos-agent/ctl.sock"
#define DEFAULT_TIMEOUT_MS 10000

enum { EX_OK = 0, EX_AGENT = 1, EX_USAGE = 2, EX_UNREACHABLE = 3 };
#define EX_DONE (-1) /* --help/--version printed: exit 0 */

enum cmd { C_LIST, C_SHOW, C_SET_CLASS, C_PREEMPT, C_GET_TIMESLICE, C_STATUS };

static const struct {
	const char *name;
	int nargs;   /* positional arguments after the command */
	int has_pid; /* the first of them is a pid */
} cmds[] = {
	[C_LIST] = { "list", 0, 0 },
	[C_SHOW] = { "show", 1, 1 },
	[C_SET_CLASS] = { "set-class", 2, 1 },
	[C_PREEMPT] = { "preempt", 1, 1 },
	[C_GET_TIMESLICE] = { "get-timeslice", 1, 1 },
	[C_STATUS] = { "status", 0, 0 },
};

struct opts {
	const char *socket;
	int timeout_ms;
	int json;
	int no_wait;
	enum cmd cmd;
	long long pid;
	const char *cls; /* the spelling sent to the agent */
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: gpuqosctl [--socket PATH] [--timeout-ms N] [--json] COMMAND [ARGS]\n"
		"\n"
		"commands:\n"
		"  list                        every TSG the agent knows, then processes without TSGs\n"
		"  show PID                    the TSGs and process PID, with details\n"
		"  set-class PID CLASS         override the class: lc, be, unmanaged, or auto (drop the override)\n"
		"  preempt PID [--no-wait]     preempt the compute TSGs of PID\n"
		"  get-timeslice PID           read the timeslice back from every TSG of PID\n"
		"  status                      the agent itself\n"
		"\n"
		"options:\n"
		"  --socket PATH     control socket (env GPUQOS_CTL_SOCKET, default " DEFAULT_SOCKET ")\n"
		"  --timeout-ms N    give up waiting for the agent after N ms (default %d)\n"
		"  --json            print the agent's answer as it came\n"
		"\n"
		"exit status: 0 ok, 1 the agent refused or answered badly, 2 usage error,\n"
		"3 the agent cannot be reached\n",
		DEFAULT_TIMEOUT_MS);
}

__attribute__((format(printf, 1, 2)))
static int usage_error(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "gpuqosctl: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\ntry 'gpuqosctl --help'\n");
	return EX_USAGE;
}

/* A positive decimal integer up to INT_MAX, nothing else. */
static int parse_positive(const char *s, long long max, long long *out)
{
	char *end;
	long long v;

	if (!isdigit((unsigned char)s[0]))
		return -1;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno != 0 || *end != '\0' || v <= 0 || v > max)
		return -1;
	*out = v;
	return 0;
}

/* One option at argv[*i]; returns 0, EX_USAGE or EX_DONE. */
static int parse_opt(int argc, char **argv, int *i, struct opts *o)
{
	const char *a = argv[*i], *val = NULL;
	long long ms;
	int r;

	if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
		usage(stdout);
		return EX_DONE;
	}
	if (strcmp(a, "--version") == 0) {
		printf("gpuqosctl %s\n", GPUQOS_VERSION);
		return EX_DONE;
	}
	if (strcmp(a, "--json") == 0) {
		o->json = 1;
		return 0;
	}
	if (strcmp(a, "--no-wait") == 0) {
		o->no_wait = 1;
		return 0;
	}
	if ((r = cli_opt_value(argc, argv, i, "--socket", &val)) != 0) {
		if (r < 0)
			return usage_error("--socket needs a value");
		if (!*val)
			return usage_error("--socket needs a path");
		o->socket = val;
		return 0;
	}
	if ((r = cli_opt_value(argc, argv, i, "--timeout-ms", &val)) != 0) {
		if (r < 0)
			return usage_error("--timeout-ms needs a value");
		if (parse_positive(val, 3600000, &ms) != 0)
			return usage_error("--timeout-ms: '%s' is not a number of milliseconds "
					   "from 1 to 3600000", val);
		o->timeout_ms = (int)ms;
		return 0;
	}
	return usage_error("unknown option '%s'", a);
}

/* The class names set-class accepts, and what is sent for each. */
static const char *class_request(const char *name)
{
	static const char *const map[][2] = {
		{ "lc", "lc" }, { "latency-critical", "lc" },
		{ "be", "be" }, { "best-effort", "be" },
		{ "unmanaged", "unmanaged" }, { "auto", "auto" },
	};
	size_t i;

	for (i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (strcmp(name, map[i][0]) == 0)
			return map[i][1];
	return NULL;
}

/* Checks the command and its arguments; returns 0 or EX_USAGE. */
static int parse_command(const char *const *pos, int npos, struct opts *o)
{
	size_t c;

	if (npos == 0)
		return usage_error("no command given");
	for (c = 0; c < sizeof(cmds) / sizeof(cmds[0]); c++)
		if (strcmp(pos[0], cmds[c].name) == 0)
			break;
	if (c == sizeof(cmds) / sizeof(cmds[0]))
		return usage_error("unknown command '%s'", pos[0]);
	o->cmd = (enum cmd)c;
	if (npos - 1 != cmds[c].nargs)
		return usage_error("%s takes %d argument%s, got %d", cmds[c].name,
				   cmds[c].nargs, cmds[c].nargs == 1 ? "" : "s", npos - 1);
	if (cmds[c].has_pid && parse_positive(pos[1], INT_MAX, &o->pid) != 0)
		return usage_error("%s: not a pid: %s (a pid is a positive integer)", cmds[c].name,
				   pos[1]);
	if (o->cmd == C_SET_CLASS && !(o->cls = class_request(pos[2])))
		return usage_error("set-class: unknown class '%s' (use lc, be, unmanaged or auto)",
				   pos[2]);
	if (o->no_wait && o->cmd != C_PREEMPT)
		return usage_error("--no-wait only applies to preempt");
	return 0;
}

/* Returns 0 with o filled, EX_USAGE, or EX_DONE. */
static int parse_args(int argc, char **argv, struct opts *o)
{
	const char *pos[4];
	int i, r, npos = 0, only_pos = 0;

	memset(o, 0, sizeof(*o));
	o->timeout_ms = DEFAULT_TIMEOUT_MS;
	for (i = 1; i < argc; i++) {
		const char *a = argv[i];

		/* No option begins with a digit: "-5" is a (bad) pid, and is
		 * refused as one rather than as an unknown option. */
		if (!only_pos && strcmp(a, "--") == 0) {
			only_pos = 1;
		} else if (!only_pos && a[0] == '-' && a[1] != '\0' && !isdigit((unsigned char)a[1])) {
			if ((r = parse_opt(argc, argv, &i, o)) != 0)
				return r;
		} else if (npos == (int)(sizeof(pos) / sizeof(pos[0]))) {
			return usage_error("too many arguments");
		} else {
			pos[npos++] = a;
		}
	}
	if ((r = parse_command(pos, npos, o)) != 0)
		return r;
	if (!o->socket)
		o->socket = getenv("GPUQOS_CTL_SOCKET");
	if (!o->socket || !*o->socket)
		o->socket = DEFAULT_SOCKET;
	if (strlen(o->socket) >= sizeof(((struct sockaddr_un *)0)->sun_path))
		return usage_error("socket path is too long (at most %zu bytes): %s",
				   sizeof(((struct sockaddr_un *)0)->sun_path) - 1, o->socket);
	return 0;
}

/* The request line for o, newline included; NULL when out of memory. */
static char *build_request(const struct opts *o)
{
	const char *name = cmds[o->cmd].name;
	cJSON *r = cJSON_CreateObject();
	char *body = NULL, *line = NULL;
	int ok = r && cJSON_AddStringToObject(r, "cmd", name);

	if (ok && cmds[o->cmd].has_pid)
		ok = cJSON_AddNumberToObject(r, "pid", (double)o->pid) != NULL;
	if (ok && o->cmd == C_SET_CLASS)
		ok = cJSON_AddStringToObject(r, "class", o->cls) != NULL;
	if (ok && o->cmd == C_PREEMPT)
		ok = cJSON_AddBoolToObject(r, "wait", !o->no_wait) != NULL;
	if (ok)
		body = cJSON_PrintUnformatted(r);
	cJSON_Delete(r);
	if (body && (line = malloc(strlen(body) + 2)))
		sprintf(line, "%s\n", body);
	cJSON_free(body);
	return line;
}

static int unreachable(const char *err, int err_no)
{
	fprintf(stderr, "gpuqosctl: %s\n", err);
	if (err_no == EACCES || err_no == EPERM)
		fprintf(stderr, "gpuqosctl: the control socket is for root only (mode 0600): "
			"run gpuqosctl as root, e.g. with sudo\n");
	else
		fprintf(stderr, "gpuqosctl: is gpuqos-agent running? start it with: "
			"sudo gpuqos-agent --standalone\n"
			"gpuqosctl: (if it listens elsewhere: --socket PATH or GPUQOS_CTL_SOCKET)\n");
	return EX_UNREACHABLE;
}

/* Says what was wrong with the answer, with its start for context. */
static int malformed(const struct opts *o, const char *what, const char *line)
{
	fprintf(stderr, "gpuqosctl: malformed answer from the agent at %s: %s\n", o->socket, what);
	if (line && *line) {
		char head[121];

		snprintf(head, sizeof(head), "%s", line);
		fprintf(stderr, "gpuqosctl: the answer begins: ");
		put_safe(stderr, head);
		fputc('\n', stderr);
	}
	return EX_AGENT;
}

/* The answer as a JSON object with a boolean "ok", or NULL (reported). */
static cJSON *parse_answer(const struct opts *o, const struct ctl_answer *a, int *okp)
{
	struct jerr e = { { 0 } };
	cJSON *j;

	if (memchr(a->line, '\0', a->len)) {
		malformed(o, "it contains a NUL byte", a->line);
		return NULL;
	}
	j = cJSON_ParseWithOpts(a->line, NULL, 1);
	if (!j) {
		malformed(o, a->complete ? "not valid JSON" :
			  "it ended without a newline and is not valid JSON (truncated?)", a->line);
		return NULL;
	}
	if (!cJSON_IsObject(j))
		j_fail(&e, "not a JSON object");
	else
		j_bool(&e, j, "answer", "ok", J_REQ, okp);
	if (e.msg[0]) {
		malformed(o, e.msg, a->line);
		cJSON_Delete(j);
		return NULL;
	}
	return j;
}

static int render(const struct opts *o, const cJSON *j, struct jerr *e)
{
	switch (o->cmd) {
	case C_LIST: return render_list(j, stdout, e);
	case C_SHOW: return render_show(j, o->pid, stdout, e);
	case C_SET_CLASS: return render_set_class(j, stdout, e);
	case C_PREEMPT:
	case C_GET_TIMESLICE: return render_results(j, o->pid, stdout, e);
	case C_STATUS: return render_status(j, stdout, e);
	}
	j_fail(e, "no printer for this command");
	return -1;
}

static int handle_answer(const struct opts *o, const struct ctl_answer *a)
{
	struct jerr e = { { 0 } };
	const char *msg = NULL;
	int ok = 0, rc = EX_OK;
	cJSON *j = parse_answer(o, a, &ok);

	if (!j)
		return EX_AGENT;
	if (o->json)
		printf("%s\n", a->line);
	if (!ok) {
		j_str(&e, j, "answer", "error", J_ANY, &msg);
		fprintf(stderr, "gpuqosctl: the agent refused: ");
		put_safe(stderr, msg ? msg : "(no error message)");
		fputc('\n', stderr);
		rc = EX_AGENT;
	} else if (!o->json && render(o, j, &e) != 0) {
		rc = malformed(o, e.msg, NULL);
	}
	cJSON_Delete(j);
	return rc;
}

int main(int argc, char **argv)
{
	struct ctl_answer ans;
	struct opts o;
	char err[512], *req;
	int rc, err_no;

	rc = parse_args(argc, argv, &o);
	if (rc != 0)
		return rc == EX_DONE ? EX_OK : rc;
	req = build_request(&o);
	if (!req) {
		fprintf(stderr, "gpuqosctl: out of memory\n");
		return EX_AGENT;
	}
	switch (ctl_exchange(o.socket, req, o.timeout_ms, &ans, err, sizeof(err), &err_no)) {
	case CTL_OK:
		rc = handle_answer(&o, &ans);
		free(ans.line);
		break;
	case CTL_UNREACHABLE:
		rc = unreachable(err, err_no);
		break;
	case CTL_FAILED:
		fprintf(stderr, "gpuqosctl: agent at %s: %s\n", o.socket, err);
		rc = EX_AGENT;
		break;
	}
	free(req);
	if (fflush(stdout) != 0 || ferror(stdout)) {
		fprintf(stderr, "gpuqosctl: writing the output: %s\n", strerror(errno));
		return EX_AGENT;
	}
	return rc;
}
