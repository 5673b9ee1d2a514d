/* SPDX-License-Identifier: Apache-2.0 */
/*
 * main.c - gpuqos-agent: options (each also from the environment), the
 * configuration (load at start, reload on SIGHUP keeping the old one when
 * the new one is invalid), signals, start-up and an orderly exit that
 * removes the sockets it bound (only while they are still its own) and
 * frees everything, the checks that keep two agents off each other's
 * sockets and the control socket and state out of the directory the
 * device plugin mounts into containers, and the capability check at
 * start that decides whether the direct path runs, and whether the eBPF
 * tracker is wanted (--bpf; tracker.c opens it), and the choice between
 * standalone and Kubernetes mode (kube_mode.c). Does not own any
 * subsystem's work; it wires them into the one loop.
 */
#include "agent/agent.h"
#include "agent/io/gpuinfo.h"
#include "agent/io/gpuprocs.h"
#include "agent/io/kube_mode.h"
#include "agent/io/metrics.h"
#include "agent/kubenode/podres.h"
#include "agent/io/procinfo.h"
#include "common/log.h"
#include "common/preemptlib.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

static void usage(FILE *f)
{
	fprintf(f,
		"usage: gpuqos-agent [--standalone | --node-name NODE] [options]\n"
		"  --standalone        classify processes from the config file (GPUQOS_STANDALONE=1);\n"
		"                      without it the agent runs in Kubernetes mode:\n"
		"  --node-name NODE    this node, spec.nodeName of its pods (NODE_NAME; required)\n"
		"  --kubeconfig PATH   API server and credentials (KUBECONFIG; else in-cluster)\n"
		"  --service-account-dir DIR  in-cluster token, ca.crt, namespace\n"
		"                      (GPUQOS_SERVICE_ACCOUNT_DIR, " KUBE_SA_DIR ")\n"
		"  --pod-resources-socket PATH  kubelet pod-resources API (GPUQOS_POD_RESOURCES_SOCKET,\n"
		"                      " PODRES_DEFAULT_SOCKET ")\n"
		"  --config PATH       config file (GPUQOS_CONFIG); it must exist and be valid;\n"
		"                      without one, the defaults\n"
		"  --socket PATH       preempt-agent socket (GPUQOS_SOCKET, " GQ_DEFAULT_SOCKET ")\n"
		"  --ctl-socket PATH   control socket, root only (GPUQOS_CTL_SOCKET,\n"
		"                      " AGENT_DEFAULT_CTL_SOCKET ")\n"
		"  --state-dir DIR     state directory (GPUQOS_STATE_DIR, " AGENT_DEFAULT_STATE_DIR ")\n"
		"                      neither may be in the preempt socket's directory, which the\n"
		"                      device plugin mounts into GPU containers (refused in\n"
		"                      Kubernetes mode for " GQ_DEFAULT_SOCKET_DIR ")\n"
		"  --nvidiactl PATH    control device a reported fd must be (GPUQOS_NVIDIACTL, "
		AGENT_DEFAULT_NVIDIACTL ")\n"
		"  --bpf auto|on|off   the eBPF tracker (GPUQOS_BPF, auto: use it when it can be\n"
		"                      opened, say why not otherwise)\n"
		"  --bpf-pin-dir DIR   its pins, on bpffs (GPUQOS_BPF_PIN_DIR, /sys/fs/bpf/gpuqos)\n"
		"  --metrics-address ADDR:PORT  Prometheus /metrics, /healthz, /readyz\n"
		"                      (GPUQOS_METRICS_ADDRESS, " METRICS_DEFAULT_ADDRESS "; off: none)\n"
		"  --health-address ADDR:PORT  /healthz, /readyz alone, for the kubelet's probes\n"
		"                      (GPUQOS_HEALTH_ADDRESS, " METRICS_DEFAULT_HEALTH_ADDRESS "; off: none)\n"
		"  --log-level LEVEL   error, warn, info, debug (GPUQOS_LOG_LEVEL, info)\n"
		"  --install-preempt-lib SRC  install SRC as the preempt library the device plugin\n"
		"                      mounts into containers (a new versioned directory, `current`\n"
		"                      switched by rename), then exit\n"
		"  --preempt-lib-dir DIR  where (GPUQOS_PREEMPT_LIB_DIR, " PREEMPTLIB_DEFAULT_DIR ")\n"
		"  --check-config PATH  validate a config file as the agent would load it, then\n"
		"                      exit: 0 and \"ok\", or 1 and the error\n"
		"  --help, --version\n");
}

/* --install-preempt-lib runs instead of the agent (the chart's init
 * container); --preempt-lib-dir is accepted in every mode so one set of
 * arguments fits both. */

/* parse_options: the options asked for something that ended the run
 * successfully (--help, --version, --install-preempt-lib); main exits 0
 * without starting the agent. Any other non-zero value is an exit status. */
#define OPTIONS_DONE 100

static const char *preempt_lib_src;
static const char *preempt_lib_dir;

static int install_preempt_lib(void)
{
	char name[128], err[512];

	if (preemptlib_install(preempt_lib_src, preempt_lib_dir, GPUQOS_VERSION, name, sizeof(name),
			       err, sizeof(err)) != 0) {
		log_error("install preempt library: %s", err);
		return 1;
	}
	log_info("preempt library %s installed as %s/%s (current)", preempt_lib_src, preempt_lib_dir,
		 name);
	return OPTIONS_DONE;
}

/* --check-config: the agent's own validation of a file, alone (the
 * chart's tests run it on every policy the chart renders). */
static const char *check_config_path;

static int check_config(void)
{
	struct agent_config *c = calloc(1, sizeof(*c));
	char err[512];
	int rc;

	if (!c) {
		fprintf(stderr, "gpuqos-agent: out of memory\n");
		return 1;
	}
	config_defaults(c);
	rc = config_load(check_config_path, c, err, sizeof(err));
	free(c);
	if (rc != 0) {
		fprintf(stderr, "gpuqos-agent: %s\n", err);
		return 1;
	}
	printf("gpuqos-agent: config %s: ok\n", check_config_path);
	return fflush(stdout) == 0 ? OPTIONS_DONE : 1;
}

static const char *env_or(const char *name, const char *def)
{
	const char *v = getenv(name);

	return v && *v ? v : def;
}

/* A value from an option or its variable, and which one it came from, so
 * that an error names what the user wrote. */
struct optval {
	const char *v;
	const char *from;
};

static struct optval env_val(const char *env, const char *def)
{
	const char *v = getenv(env);

	return v && *v ? (struct optval){ v, env } : (struct optval){ def, env };
}

__attribute__((format(printf, 1, 2))) static int usage_error(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "gpuqos-agent: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\ntry 'gpuqos-agent --help'\n");
	return 2;
}

static int not_one_of(const struct optval *o, const char *choices)
{
	return usage_error("%s: '%s' is not one of %s", o->from, o->v, choices);
}

/* getopt's own messages are off (opterr 0): these name the argument. */
static int option_error(int c, char **argv)
{
	const char *arg = argv[optind - 1];

	if (c == ':')
		return usage_error("option '%s' needs a value", arg);
	if (optopt && strncmp(arg, "--", 2) == 0)
		return usage_error("option '%s' takes no value", arg);
	if (optopt && arg[0] == '-' && arg[1] != '-') {
		char shortopt[3] = { '-', (char)optopt, 0 };

		return usage_error("unknown option '%s'", shortopt);
	}
	return usage_error("unknown option '%s'", arg);
}

/* Returns 0 to run, or the exit status. */
static int parse_options(struct agent *a, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "standalone", no_argument, NULL, 'S' }, { "config", required_argument, NULL, 'c' },
		{ "socket", required_argument, NULL, 's' }, { "ctl-socket", required_argument, NULL, 'C' },
		{ "state-dir", required_argument, NULL, 'd' }, { "nvidiactl", required_argument, NULL, 'n' },
		{ "log-level", required_argument, NULL, 'l' }, { "help", no_argument, NULL, 'h' },
		{ "bpf", required_argument, NULL, 'B' }, { "bpf-pin-dir", required_argument, NULL, 'P' },
		{ "node-name", required_argument, NULL, 'N' }, { "kubeconfig", required_argument, NULL, 'K' },
		{ "pod-resources-socket", required_argument, NULL, 'R' },
		{ "service-account-dir", required_argument, NULL, 'A' },
		{ "install-preempt-lib", required_argument, NULL, 'I' },
		{ "preempt-lib-dir", required_argument, NULL, 'L' },
		{ "metrics-address", required_argument, NULL, 'M' },
		{ "health-address", required_argument, NULL, 'H' },
		{ "version", no_argument, NULL, 'V' },
		{ "check-config", required_argument, NULL, 'k' },
		{ NULL, 0, NULL, 0 },
	};
	struct optval level = env_val("GPUQOS_LOG_LEVEL", "info");
	struct optval bpf = env_val("GPUQOS_BPF", "auto");
	const char *sa = getenv("GPUQOS_STANDALONE");
	enum log_level lv;
	int c;

	a->opt.standalone = sa && *sa && strcmp(sa, "0") != 0;
	a->opt.config = env_or("GPUQOS_CONFIG", NULL);
	a->opt.socket = env_or("GPUQOS_SOCKET", GQ_DEFAULT_SOCKET);
	a->opt.ctl_socket = env_or("GPUQOS_CTL_SOCKET", AGENT_DEFAULT_CTL_SOCKET);
	a->opt.state_dir = env_or("GPUQOS_STATE_DIR", AGENT_DEFAULT_STATE_DIR);
	a->opt.nvidiactl = env_or("GPUQOS_NVIDIACTL", AGENT_DEFAULT_NVIDIACTL);
	a->opt.bpf_pin_dir = env_or("GPUQOS_BPF_PIN_DIR", NULL);
	a->opt.node_name = env_or("NODE_NAME", NULL);
	a->opt.kubeconfig = env_or("KUBECONFIG", NULL);
	a->opt.podres_socket = env_or("GPUQOS_POD_RESOURCES_SOCKET", NULL);
	a->opt.sa_dir = env_or("GPUQOS_SERVICE_ACCOUNT_DIR", NULL);
	metrics_set_address(env_or("GPUQOS_METRICS_ADDRESS", METRICS_DEFAULT_ADDRESS));
	metrics_set_health_address(env_or("GPUQOS_HEALTH_ADDRESS", METRICS_DEFAULT_HEALTH_ADDRESS));
	preempt_lib_dir = env_or("GPUQOS_PREEMPT_LIB_DIR", PREEMPTLIB_DEFAULT_DIR);
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
		switch (c) {
		case 'S': a->opt.standalone = 1; break;
		case 'c': a->opt.config = optarg; break;
		case 's': a->opt.socket = optarg; break;
		case 'C': a->opt.ctl_socket = optarg; break;
		case 'd': a->opt.state_dir = optarg; break;
		case 'n': a->opt.nvidiactl = optarg; break;
		case 'l': level = (struct optval){ optarg, "--log-level" }; break;
		case 'B': bpf = (struct optval){ optarg, "--bpf" }; break;
		case 'P': a->opt.bpf_pin_dir = optarg; break;
		case 'N': a->opt.node_name = optarg; break;
		case 'K': a->opt.kubeconfig = optarg; break;
		case 'R': a->opt.podres_socket = optarg; break;
		case 'A': a->opt.sa_dir = optarg; break;
		case 'M': metrics_set_address(optarg); break;
		case 'H': metrics_set_health_address(optarg); break;
		case 'I': preempt_lib_src = optarg; break;
		case 'L': preempt_lib_dir = optarg; break;
		case 'k': check_config_path = optarg; break;
		case 'h': usage(stdout); return OPTIONS_DONE;
		case 'V':
			printf("gpuqos-agent %s\n", GPUQOS_VERSION);
			return fflush(stdout) == 0 ? OPTIONS_DONE : 1;
		default: return option_error(c, argv);
		}
	}
	if (optind < argc)
		return usage_error("unexpected argument '%s'", argv[optind]);
	if (tracker_parse_setting(bpf.v, &a->opt.bpf) != 0)
		return usage_error("%s: '%s': want auto, on or off", bpf.from, bpf.v);
	if (log_parse_level(level.v, &lv) != 0)
		return not_one_of(&level, "error, warn, info, debug");
	log_set_level(lv);
	if (check_config_path)
		return check_config();
	if (preempt_lib_src)
		return install_preempt_lib();
	if (!a->opt.standalone && !a->opt.node_name) {
		fprintf(stderr, "gpuqos-agent: Kubernetes mode needs --node-name (or NODE_NAME); "
				"--standalone runs without Kubernetes\n");
		return 2;
	}
	return 0;
}

/* Valid settings the measurements advise against: a warning each, at load
 * and reload (docs/policy.md, "Waking a periodic LC"). */
static void config_advise(const struct agent_config *c)
{
	if (c->policy.wake_lead_us > POLICY_WAKE_REACH_US)
		log_warn("config: wake.leadUs %u us is longer than the %u us a wake reaches: "
			 "the preempt agents will judge these wakes wasted and stop them",
			 c->policy.wake_lead_us, POLICY_WAKE_REACH_US);
	if (c->policy.wake_hold_us)
		log_warn("config: wake.holdUs %u us: a hold was measured not to help "
			 "(docs/policy.md, \"Waking a periodic LC\"); 0 is the default",
			 c->policy.wake_hold_us);
}

/* No file named: the defaults. A file named (--config, GPUQOS_CONFIG) is
 * what the operator meant to run with, so one that cannot be read or is
 * invalid stops the start; the error names the file and why. */
static int config_initial(struct agent *a)
{
	char err[512];

	config_defaults(a->cfg);
	if (!a->opt.config)
		return 0;
	if (config_load(a->opt.config, a->cfg, err, sizeof(err)) != 0) {
		log_error("%s", err);
		return -1;
	}
	log_info("config %s loaded", a->opt.config);
	config_advise(a->cfg);
	return 0;
}

static void config_reload(struct agent *a)
{
	struct agent_config *next;
	char err[512];

	if (!a->opt.config) {
		log_info("SIGHUP: no config file configured; nothing to reload");
		return;
	}
	next = malloc(sizeof(*next));
	if (!next) {
		log_error("config %s: out of memory; keeping the old one", a->opt.config);
		return;
	}
	config_defaults(next);
	if (config_load(a->opt.config, next, err, sizeof(err)) != 0) {
		a->n.config_errors++;
		log_error("config %s: %s; keeping the old one", a->opt.config, err);
		free(next);
		return;
	}
	free(a->cfg);
	a->cfg = next;
	a->n.config_reloads++;
	log_info("config %s reloaded", a->opt.config);
	config_advise(a->cfg);
	hooks_tick_rearm(a);
	proc_reclassify_all(a);
}

static void on_signal(struct loop_watch *w, uint32_t events)
{
	struct agent *a = w->ctx;
	struct signalfd_siginfo si;

	(void)events;
	while (read(w->fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		if (si.ssi_signo == SIGHUP) {
			config_reload(a);
			gpuinfo_refresh("SIGHUP");
		} else {
			log_info("signal %u: exiting", si.ssi_signo);
			a->io->loop.stop = 1;
		}
	}
}

static int signals_init(struct agent *a)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	if (sigprocmask(SIG_BLOCK, &set, NULL) != 0) {
		log_error("sigprocmask: %s", strerror(errno));
		return -1;
	}
	/* Sends use MSG_NOSIGNAL; this guards any other write to a closed peer. */
	if (signal(SIGPIPE, SIG_IGN) == SIG_ERR)
		log_warn("ignoring SIGPIPE: %s", strerror(errno));
	a->io->sig_w.fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	if (a->io->sig_w.fd < 0) {
		log_error("signalfd: %s", strerror(errno));
		return -1;
	}
	a->io->sig_w.fn = on_signal;
	a->io->sig_w.ctx = a;
	return loop_add(&a->io->loop, &a->io->sig_w, EPOLLIN);
}

static void on_direct(struct loop_watch *w, uint32_t events)
{
	struct agent *a = w->ctx;
	struct direct_res res[32];
	size_t n;

	(void)events;
	n = direct_take(a->direct, res, sizeof(res) / sizeof(res[0]));
	for (size_t i = 0; i < n; i++) {
		struct cmd_outcome o = { res[i].rm_status, res[i].err, res[i].value, res[i].elapsed_ns,
					 res[i].why, NULL };

		cmd_direct_result(a, res[i].seq, &o);
	}
	a->dirty = 1; /* a replaced worker or a late result may free a path */
}

/* What the agent may do is what its effective set allows (caps.h). The
 * direct path runs only with CAP_SYS_PTRACE; without it every action that
 * would take it says so instead of failing inside pidfd_getfd. */
static int direct_init(struct agent *a)
{
	char missing[128], err[160];

	if (caps_read(&a->caps) != 0)
		log_warn("capget: %s; assuming no capabilities", strerror(errno));
	if (!caps_allows(&a->caps, CAPS_INTERLEAVE))
		log_warn("no CAP_SYS_NICE or CAP_SYS_ADMIN: SET_INTERLEAVE only through root workloads' "
			 "own preempt agents");
	if (!caps_allows(&a->caps, CAPS_DIRECT)) {
		snprintf(a->direct_off, sizeof(a->direct_off), "direct path needs %s",
			 caps_missing(&a->caps, CAPS_DIRECT, missing, sizeof(missing)));
		log_warn("%s: it is off", a->direct_off);
		return 0;
	}
	a->direct = direct_start(a->nvidiactl, DIRECT_WORKERS, DIRECT_MAX_LOST, err, sizeof(err));
	if (!a->direct) {
		snprintf(a->direct_off, sizeof(a->direct_off), "%s", err);
		log_error("%s: the direct path is off", err);
		return 0;
	}
	a->io->direct_w.fd = direct_fd(a->direct);
	a->io->direct_w.fn = on_direct;
	a->io->direct_w.ctx = a;
	if (loop_add(&a->io->loop, &a->io->direct_w, EPOLLIN) != 0)
		return -1;
	log_info("direct path: %u workers", DIRECT_WORKERS);
	return 0;
}

/* The sockets this agent bound, as files: at exit it removes a path only
 * while it still names the socket it bound, never one a newer agent made. */
struct bound {
	const char *path;
	int made;
	dev_t dev;
	ino_t ino;
};
static struct bound bound_sock, bound_ctl;

static void bound_record(struct bound *b, const char *path)
{
	struct stat st;

	b->path = path;
	if (stat(path, &st) != 0) {
		log_warn("%s: %s; it will not be removed at exit", path, strerror(errno));
		return;
	}
	b->made = 1;
	b->dev = st.st_dev;
	b->ino = st.st_ino;
}

static void bound_remove(const struct bound *b)
{
	struct stat st;

	if (!b->made)
		return;
	if (lstat(b->path, &st) != 0) {
		if (errno != ENOENT)
			log_warn("%s: %s", b->path, strerror(errno));
		return;
	}
	if (!S_ISSOCK(st.st_mode) || st.st_dev != b->dev || st.st_ino != b->ino) {
		log_info("%s: left in place: no longer the socket this agent bound", b->path);
		return;
	}
	if (unlink(b->path) != 0)
		log_warn("unlink %s: %s", b->path, strerror(errno));
}

/* The path with its directory resolved (it exists: mkdir_parents made it). */
static void canonical(const char *path, char *out, size_t n)
{
	const char *slash = strrchr(path, '/');
	char dir[4096], *real;

	snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".");
	real = realpath(dir[0] ? dir : "/", NULL);
	if (real)
		snprintf(out, n, "%s/%s", real, slash ? slash + 1 : path);
	else
		snprintf(out, n, "%s", path);
	free(real);
}

/* 1 when a live listener accepts connections at path: a running agent's
 * socket, which binding here would take from it. */
static int socket_live(const char *path, int type)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd, live;

	if (strlen(path) >= sizeof(sa.sun_path))
		return 0; /* unix_listen says why */
	memcpy(sa.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return 0;
	live = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 || errno == EAGAIN;
	close(fd);
	return live;
}

/* Paths that cannot work together are refused before anything is made. */
static int check_sockets(struct agent *a)
{
	char s1[4200], s2[4200];

	if (mkdir_parents(a->opt.socket, 0755) != 0 || mkdir_parents(a->opt.ctl_socket, 0755) != 0)
		return -1;
	canonical(a->opt.socket, s1, sizeof(s1));
	canonical(a->opt.ctl_socket, s2, sizeof(s2));
	if (strcmp(s1, s2) == 0) {
		log_error("--socket and --ctl-socket are both %s: the preempt agents and gpuqosctl "
			  "need a socket each", s1);
		return -1;
	}
	if (socket_live(a->opt.socket, SOCK_SEQPACKET) || socket_live(a->opt.ctl_socket, SOCK_STREAM)) {
		log_error("another agent is listening on %s or %s: refusing to take its sockets",
			  a->opt.socket, a->opt.ctl_socket);
		return -1;
	}
	return 0;
}

/* path with its longest existing leading part resolved and the rest
 * normalized as text ("." and empty parts dropped, ".." taking one back;
 * nothing there exists to be a link): the place a path names before
 * anything on it is made. */
static void resolve_existing(const char *path, char *out, size_t n)
{
	char head[4096], *real, *slash, *save = NULL, *part;
	size_t len = strlen(path);

	if (len >= sizeof(head) || n < 2) {
		snprintf(out, n, "%s", path);
		return;
	}
	memcpy(head, path, len + 1);
	while (!(real = realpath(len ? head : path[0] == '/' ? "/" : ".", NULL)) && len) {
		slash = memrchr(head, '/', len);
		len = slash ? (size_t)(slash - head) : 0;
		head[len] = '\0';
	}
	if (!real) {
		snprintf(out, n, "%s", path);
		return;
	}
	snprintf(out, n, "%s", strcmp(real, "/") == 0 ? "" : real);
	free(real);
	memcpy(head, path + len, strlen(path + len) + 1);
	for (part = strtok_r(head, "/", &save); part; part = strtok_r(NULL, "/", &save)) {
		if (strcmp(part, ".") == 0)
			continue;
		if (strcmp(part, "..") == 0) {
			slash = strrchr(out, '/');
			if (slash)
				*slash = '\0';
			continue;
		}
		snprintf(out + strlen(out), n - strlen(out), "/%s", part);
	}
	if (!out[0])
		snprintf(out, n, "/");
}

/* 1 when path is dir or lies below it (both as resolve_existing gives). */
static int path_inside(const char *dir, const char *path)
{
	size_t n = strlen(dir);

	if (strcmp(dir, "/") == 0)
		return 1;
	return strncmp(path, dir, n) == 0 && (path[n] == '/' || path[n] == '\0');
}

/* The preempt socket's directory is what the device plugin mounts into
 * every GPU container: the root-only control socket or the state file
 * there would be reachable from every pod. Kubernetes mode with the
 * plugin's own default directory is refused; any other such layout (test
 * set-ups in a scratch directory, a standalone node) is warned about. */
static int check_layout(const struct agent *a)
{
	char sock[4200], ctl[4200], state[4200], dflt[4200], *slash;
	int ctl_in, state_in;
	const char *what;

	resolve_existing(a->opt.socket, sock, sizeof(sock));
	slash = strrchr(sock, '/');
	if (slash)
		slash[slash == sock ? 1 : 0] = '\0';
	resolve_existing(a->opt.ctl_socket, ctl, sizeof(ctl));
	resolve_existing(a->opt.state_dir, state, sizeof(state));
	ctl_in = path_inside(sock, ctl);
	state_in = path_inside(sock, state);
	if (!ctl_in && !state_in)
		return 0;
	what = ctl_in && state_in ? "the control socket and the state file are" :
	       ctl_in ? "the control socket is" : "the state file is";
	resolve_existing(GQ_DEFAULT_SOCKET_DIR, dflt, sizeof(dflt));
	if (!a->opt.standalone && strcmp(sock, dflt) == 0) {
		log_error("%s in %s, the preempt socket's directory, which the device plugin mounts "
			  "into every GPU container: refusing to start; keep them elsewhere (the "
			  "defaults: --ctl-socket " AGENT_DEFAULT_CTL_SOCKET
			  ", --state-dir " AGENT_DEFAULT_STATE_DIR ")", what, sock);
		return -1;
	}
	log_warn("%s in %s, the preempt socket's directory: wherever that is mounted into "
		 "containers they can reach it (the defaults keep them in " AGENT_DEFAULT_STATE_DIR ")",
		 what, sock);
	return 0;
}

static int resolve_paths(struct agent *a)
{
	char *real;

	/* Before anything is made on these paths. */
	if (check_layout(a) != 0)
		return -1;
	real = realpath(a->opt.nvidiactl, NULL);
	/* /proc/<pid>/fd links name the canonical path. */
	snprintf(a->nvidiactl, sizeof(a->nvidiactl), "%s", real ? real : a->opt.nvidiactl);
	free(real);
	if (snprintf(a->state_path, sizeof(a->state_path), "%s/state.json", a->opt.state_dir) >=
	    (int)sizeof(a->state_path)) {
		log_error("state dir %s: path too long", a->opt.state_dir);
		return -1;
	}
	if (mkdir_parents(a->state_path, 0755) != 0)
		return -1;
	/* The state dir's lock first: a second agent stops here, before it
	 * touches the first one's sockets. */
	return state_open(a) == 0 && check_sockets(a) == 0 ? 0 : -1;
}

static int listen_all(struct agent *a)
{
	if (peer_listen(a) != 0)
		return -1;
	bound_record(&bound_sock, a->opt.socket);
	if (ctl_listen(a) != 0)
		return -1;
	bound_record(&bound_ctl, a->opt.ctl_socket);
	return 0;
}

static int agent_start(struct agent *a)
{
	/* Kubernetes mode before anything that classifies a process. */
	if (loop_init(&a->io->loop) != 0 || signals_init(a) != 0 || procinfo_async_start(a) != 0 ||
	    config_initial(a) != 0 ||
	    resolve_paths(a) != 0 || (!a->opt.standalone && kmode_start(a) != 0) ||
	    direct_init(a) != 0 || state_load(a) != 0 || hooks_install(a) != 0 ||
	    tracker_init(a) != 0 || listen_all(a) != 0 ||
	    gpuinfo_init(a, &a->io->loop, a->nvidiactl) != 0 ||
	    gpuprocs_init(a, &a->io->loop, a->nvidiactl) != 0 || metrics_start(a) != 0)
		return -1;
	log_info("gpuqos-agent %s (%s) running, pid %d, control device %s", GPUQOS_VERSION,
		 a->opt.standalone ? "standalone" : "kubernetes", (int)getpid(), a->nvidiactl);
	return 0;
}

static void close_watch(struct agent *a, struct loop_watch *w)
{
	if (w->fd >= 0)
		loop_close(&a->io->loop, w);
}

static void agent_stop(struct agent *a)
{
	metrics_stop(); /* first: its server thread ends before the tables go */
	/* While the peers are still listed: the next start waits for them. */
	if (a->io->sf.lock_fd >= 0)
		state_flush(a);
	procinfo_async_stop(a); /* peers still being identified are refused */
	kmode_stop(a);
	ctl_free_all(a);
	peer_free_all(a);
	if (a->direct) {
		loop_del(&a->io->loop, &a->io->direct_w);
		direct_stop(a->direct);
		a->direct = NULL;
	}
	cmd_free_all(a);
	tracker_stop(a);
	proc_free_all(a);
	state_free_all(a);
	bound_remove(&bound_sock);
	bound_remove(&bound_ctl);
	close_watch(a, &a->io->listen_w);
	close_watch(a, &a->io->ctl_w);
	loop_timer_del(&a->io->tick);
	loop_timer_del(&a->io->wake);
	close_watch(a, &a->io->sig_w);
	gpuprocs_fini();
	gpuinfo_fini();
	state_close(a); /* the lock last: the sockets are gone by now */
	loop_fini(&a->io->loop);
	free(a->cfg);
}

int main(int argc, char **argv)
{
	static struct agent agent;
	static struct agent_io io;
	struct agent *a = &agent;
	int rc;

	a->io = &io;
	core_clock_install(now_us);
	a->io->loop.epfd = -1;
	a->io->sig_w.fd = a->io->listen_w.fd = a->io->ctl_w.fd = -1;
	a->io->tick.w.fd = a->io->wake.w.fd = -1;
	a->io->direct_w.fd = -1;
	a->io->trk_w.fd = -1;
	a->io->sf.lock_fd = a->io->sf.timer.w.fd = -1;
	rc = parse_options(a, argc, argv);
	if (rc != 0)
		return rc == OPTIONS_DONE ? 0 : rc;
	a->trk.setting = a->opt.bpf;
	a->trk.pin_dir = a->opt.bpf_pin_dir;
	a->started_us = now_us();
	a->cfg = calloc(1, sizeof(*a->cfg));
	if (!a->cfg) {
		log_error("out of memory");
		return 1;
	}
	rc = agent_start(a) == 0 && loop_run(&a->io->loop) == 0 ? 0 : 1;
	agent_stop(a);
	log_info("gpuqos-agent exited");
	return rc;
}
