/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpuqos.c - the workload-side launcher: `gpuqos run --class C -- CMD`
 * marks CMD with its class (GPUQOS_RUN_CLASS, which gpuqos-agent reads from
 * /proc/<pid>/environ) and, with --windows, the windows an LC asks for
 * (GPUQOS_RUN_WINDOWS, read the same way), injects the preempt agent
 * through LD_PRELOAD, and then becomes CMD with execvp() so the pid the
 * node agent sees is the workload's own. Depends on libc only.
 *
 * Owns: finding libgpuqos-preempt.so, composing the environment, and
 * saying once when the node agent's socket has no one behind it. Does not
 * talk to gpuqos-agent (the preempt agent does) and does not decide the
 * class a pod gets in Kubernetes (its annotation does).
 *
 * Fails open: without the library or the node agent the command still
 * runs, only unmanaged.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "abi/gq_proto.h"
#include "abi/gq_run.h"
#include "cli_opt.h"

#ifndef GPUQOS_INSTALL_LIBDIR
#define GPUQOS_INSTALL_LIBDIR "/usr/local/lib/gpuqos"
#endif

#define PREEMPT_LIB "libgpuqos-preempt.so"

enum { EX_USAGE = 2, EX_CANNOT_EXEC = 126, EX_NOT_FOUND = 127 };

static void usage(FILE *f)
{
	fprintf(f,
		"usage: gpuqos run --class CLASS [--windows W] [--socket PATH] [--] CMD [ARGS...]\n"
		"       gpuqos ctl [GPUQOSCTL ARGS...]\n"
		"       gpuqos version\n"
		"\n"
		"run      runs CMD (same pid) as a CLASS workload with the gpuqos preempt agent\n"
		"         CLASS: lc | latency-critical | be | best-effort\n"
		"         --windows W    an LC's own windows (sets GPUQOS_RUN_WINDOWS):\n"
		"                        auto | off | US (0 .. 100000 us after each request)\n"
		"         --socket PATH  the node agent's preempt socket (sets GPUQOS_SOCKET;\n"
		"                        default $GPUQOS_SOCKET, else " GQ_DEFAULT_SOCKET ")\n"
		"         without a node agent there CMD still runs, without QoS (one warning)\n"
		"         the preempt library: $GPUQOS_PREEMPT_LIB, else beside this program\n"
		"         (installed: <prefix>/bin/../lib/gpuqos/; build tree: agent/preempt/),\n"
		"         else " GPUQOS_INSTALL_LIBDIR "/" PREEMPT_LIB "\n"
		"ctl      runs gpuqosctl with the remaining arguments\n"
		"version  prints the version\n"
		"\n"
		"exit status: that of CMD; 2 usage error; 126/127 CMD could not be run\n");
}

static int usage_error(const char *what, const char *arg)
{
	fprintf(stderr, "gpuqos: %s%s%s\ntry 'gpuqos --help'\n", what,
		arg ? ": " : "", arg ? arg : "");
	return EX_USAGE;
}

/* The canonical class name for what a user typed, NULL if unknown. */
static const char *canonical_class(const char *name)
{
	if (strcmp(name, "lc") == 0 || strcmp(name, "latency-critical") == 0)
		return "latency-critical";
	if (strcmp(name, "be") == 0 || strcmp(name, "best-effort") == 0)
		return "best-effort";
	return NULL;
}

/* The directory this program was started from, without a trailing slash. */
static int exe_dir(char *buf, size_t len)
{
	ssize_t n = readlink("/proc/self/exe", buf, len - 1);
	char *slash;

	if (n <= 0 || (size_t)n >= len - 1)
		return -1;
	buf[n] = '\0';
	slash = strrchr(buf, '/');
	if (!slash)
		return -1;
	*slash = '\0';
	return 0;
}

/* Why path cannot be preloaded, or NULL when it can. */
static const char *lib_problem(const char *path)
{
	struct stat st;

	if (stat(path, &st) != 0)
		return strerror(errno);
	if (!S_ISREG(st.st_mode))
		return "not a regular file";
	if (access(path, R_OK) != 0)
		return strerror(errno);
	return NULL;
}

/* Resolves path into lib (PATH_MAX bytes); 0 on success. */
static int resolve_lib(const char *path, char *lib, const char **why)
{
	*why = lib_problem(path);
	if (*why)
		return -1;
	if (!realpath(path, lib)) {
		*why = strerror(errno);
		return -1;
	}
	return 0;
}

/*
 * Finds the preempt library; fills lib (PATH_MAX bytes) with its absolute
 * path, so that LD_PRELOAD works from any working directory. Returns -1
 * after warning when there is none.
 */
static int find_preempt_lib(char *lib)
{
	const char *env = getenv("GPUQOS_PREEMPT_LIB"), *why = NULL;
	char dir[PATH_MAX], cand[3][PATH_MAX + 64];
	int i, n = 0;

	if (env && *env) {
		if (resolve_lib(env, lib, &why) == 0)
			return 0;
		fprintf(stderr, "gpuqos: warning: GPUQOS_PREEMPT_LIB=%s: %s; "
			"the workload runs without the gpuqos preempt agent\n", env, why);
		return -1;
	}
	if (exe_dir(dir, sizeof(dir)) == 0) {
		/* installed: <prefix>/bin and <prefix>/lib/gpuqos; build tree:
		 * <build>/agent/cli and <build>/agent/preempt */
		snprintf(cand[n++], sizeof(cand[0]), "%s/../lib/gpuqos/" PREEMPT_LIB, dir);
		snprintf(cand[n++], sizeof(cand[0]), "%s/../preempt/" PREEMPT_LIB, dir);
	}
	snprintf(cand[n++], sizeof(cand[0]), "%s/" PREEMPT_LIB, GPUQOS_INSTALL_LIBDIR);
	for (i = 0; i < n; i++)
		if (resolve_lib(cand[i], lib, &why) == 0)
			return 0;
	fprintf(stderr, "gpuqos: warning: %s not found (looked in:", PREEMPT_LIB);
	for (i = 0; i < n; i++)
		fprintf(stderr, " %s", cand[i]);
	fprintf(stderr, "); the workload runs without the gpuqos preempt agent\n");
	return -1;
}

/* Whether an LD_PRELOAD entry names the library at `lib` (resolved). */
static int same_lib(const char *entry, const char *lib)
{
	char buf[PATH_MAX];

	return strcmp(entry, lib) == 0 || (realpath(entry, buf) && strcmp(buf, lib) == 0);
}

/* lib, then every entry of old that is not lib, ':'-separated; NULL on OOM. */
static char *preload_with(const char *lib, const char *old)
{
	size_t cap = strlen(lib) + (old ? strlen(old) : 0) + 2;
	char *out = malloc(cap), *copy, *tok, *save = NULL;

	if (!out)
		return NULL;
	snprintf(out, cap, "%s", lib);
	if (!old)
		return out;
	copy = strdup(old);
	if (!copy) {
		free(out);
		return NULL;
	}
	/* ld.so separates LD_PRELOAD entries by spaces or colons. */
	for (tok = strtok_r(copy, " :", &save); tok; tok = strtok_r(NULL, " :", &save)) {
		if (same_lib(tok, lib))
			continue;
		strcat(out, ":");
		strcat(out, tok);
	}
	free(copy);
	return out;
}

/* Puts the preempt library first in LD_PRELOAD; every failure fails open. */
static void inject_preempt(void)
{
	char lib[PATH_MAX], *preload;

	if (find_preempt_lib(lib) != 0)
		return;
	preload = preload_with(lib, getenv("LD_PRELOAD"));
	if (!preload || setenv("LD_PRELOAD", preload, 1) != 0)
		fprintf(stderr, "gpuqos: warning: cannot set LD_PRELOAD: %s; "
			"the workload runs without the gpuqos preempt agent\n", strerror(errno));
	free(preload);
}

/*
 * Why no node agent answers at path, or NULL when one is there. A datagram
 * connect() names the socket without opening a connection: the node
 * agent's SEQPACKET socket answers EPROTOTYPE, so it never sees (nor
 * counts) this probe. A socket file nobody is bound to says
 * ECONNREFUSED; one this user may not write to, EACCES, and then the
 * preempt agent could not connect either. One system call, no waiting.
 */
static const char *agent_problem(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd, e;

	if (strlen(path) >= sizeof(sa.sun_path))
		return "the path is too long for a socket";
	memcpy(sa.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return NULL; /* cannot tell: say nothing rather than something wrong */
	e = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 ? 0 : errno;
	close(fd);
	return e == 0 || e == EPROTOTYPE ? NULL : strerror(e);
}

/* One line on stderr when the workload will run without QoS for want of a
 * node agent; stdout is the workload's alone. */
static void check_agent(const char *sock, const char *cmd)
{
	const char *path = sock ? sock : getenv("GPUQOS_SOCKET"), *why;

	if (!path || !*path)
		path = GQ_DEFAULT_SOCKET;
	why = agent_problem(path);
	if (why)
		fprintf(stderr, "gpuqos: warning: %s runs without QoS: the node agent is not reachable "
			"at %s (%s); start it with 'sudo gpuqos-agent --standalone', or name its "
			"socket with --socket or GPUQOS_SOCKET\n", cmd, path, why);
}

/* Parses run's options; returns the index of CMD, or -EX_USAGE / 0 for --help. */
static int run_opts(int argc, char **argv, const char **cls, const char **win,
		    const char **sock)
{
	int i, r;

	for (i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (strcmp(a, "--") == 0)
			return i + 1;
		if (a[0] != '-')
			return i;
		if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			usage(stdout);
			return 0;
		}
		if ((r = cli_opt_value(argc, argv, &i, "--class", cls)) == 0 &&
		    (r = cli_opt_value(argc, argv, &i, "--windows", win)) == 0)
			r = cli_opt_value(argc, argv, &i, "--socket", sock);
		if (r < 0)
			return -usage_error("option needs a value", a);
		if (r == 0)
			return -usage_error("unknown option", a);
	}
	return i;
}

static int cmd_run(int argc, char **argv)
{
	const char *cls = NULL, *win = NULL, *sock = NULL, *canon;
	int i = run_opts(argc, argv, &cls, &win, &sock), e;
	struct window_req ask;

	if (i <= 0)
		return -i;
	if (!cls)
		return usage_error("run needs --class lc|be", NULL);
	canon = canonical_class(cls);
	if (!canon)
		return usage_error("unknown class (use lc, latency-critical, be or best-effort)", cls);
	/* Refused here as the agent would refuse it, where the user sees it. */
	if (win && policy_window_ask_parse(win, &ask) != 0)
		return usage_error("--windows is auto, off or a number of us from 0 to 100000, not", win);
	if (win && strcmp(canon, "latency-critical") != 0)
		return usage_error("--windows is for --class lc, not", cls);
	if (sock && !*sock)
		return usage_error("--socket needs a path", NULL);
	if (i >= argc)
		return usage_error("run needs a command to run", NULL);
	/* The class is what gpuqos-agent acts on; without it nothing is gained. */
	/* Without --windows, none inherited from an outer gpuqos run either. */
	if (setenv("GPUQOS_RUN_CLASS", canon, 1) != 0 ||
	    (win ? setenv("GPUQOS_RUN_WINDOWS", win, 1) : unsetenv("GPUQOS_RUN_WINDOWS")) != 0 ||
	    (sock && setenv("GPUQOS_SOCKET", sock, 1) != 0)) {
		fprintf(stderr, "gpuqos: cannot set the environment: %s\n", strerror(errno));
		return EX_CANNOT_EXEC;
	}
	inject_preempt();
	check_agent(sock, argv[i]);
	execvp(argv[i], argv + i);
	e = errno;
	fprintf(stderr, "gpuqos: cannot run %s: %s\n", argv[i], strerror(e));
	return e == ENOENT ? EX_NOT_FOUND : EX_CANNOT_EXEC;
}

/* Becomes gpuqosctl: the one next to this program first, else from PATH. */
static int cmd_ctl(char **argv)
{
	char dir[PATH_MAX], path[PATH_MAX + 16];
	int e;

	argv[0] = "gpuqosctl";
	if (exe_dir(dir, sizeof(dir)) == 0) {
		snprintf(path, sizeof(path), "%s/gpuqosctl", dir);
		if (access(path, X_OK) == 0)
			execv(path, argv);
	}
	execvp("gpuqosctl", argv);
	e = errno;
	fprintf(stderr, "gpuqos: cannot run gpuqosctl: %s\n", strerror(e));
	return e == ENOENT ? EX_NOT_FOUND : EX_CANNOT_EXEC;
}

int main(int argc, char **argv)
{
	const char *c = argc > 1 ? argv[1] : NULL;

	if (!c) {
		usage(stderr);
		return EX_USAGE;
	}
	if (strcmp(c, "run") == 0)
		return cmd_run(argc - 1, argv + 1);
	if (strcmp(c, "ctl") == 0)
		return cmd_ctl(argv + 1);
	if (strcmp(c, "version") == 0 || strcmp(c, "--version") == 0) {
		printf("gpuqos %s\n", GPUQOS_VERSION);
		return fflush(stdout) == 0 ? 0 : 1;
	}
	if (strcmp(c, "help") == 0 || strcmp(c, "--help") == 0 || strcmp(c, "-h") == 0) {
		usage(stdout);
		return 0;
	}
	return usage_error("unknown command", c);
}
