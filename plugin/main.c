/* SPDX-License-Identifier: Apache-2.0 */
/*
 * main.c - gpuqos-device-plugin: the restart loop and nothing else.
 *
 * One server per resource (server.c) is started, then registered with the
 * kubelet (register.c): serve first, so the kubelet's first calls find
 * the socket. The common loop (common/loop.c: a signalfd, an inotify
 * watch on the device-plugin directory and two timers) starts everything
 * again when the kubelet restarts (kubelet.sock created or replaced), when
 * one of our sockets is deleted (a new kubelet removes them; the events of
 * one restart are let settle for SETTLE_MS), when the directory appears
 * (late on a booting node, or deleted and made again by a kubelet
 * reinstall: while it is missing it is looked for every DIR_POLL_MS, since
 * a watch on a directory that is gone never fires), on SIGHUP, and after a
 * failure, with a backoff of 0.5 s doubling to 30 s. SIGTERM and SIGINT
 * stop it cleanly.
 */
#include "common/kubesock.h"
#include "common/log.h"
#include "common/loop.h"
#include "plugin/config.h"
#include "plugin/gpus.h"
#include "plugin/health.h"
#include "plugin/metrics.h"
#include "plugin/register.h"
#include "plugin/server.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#define BACKOFF_MIN_MS 500
#define BACKOFF_MAX_MS 30000
/* A kubelet restart is several directory events (our sockets removed,
 * kubelet.sock removed and made again) that may arrive in separate reads:
 * one cycle this long after the last of them, not one per read. */
#define SETTLE_MS 200
/* How often a missing device-plugin directory is looked for: registered
 * within a few seconds of it appearing, one failed syscall a second. */
#define DIR_POLL_MS 1000

struct plugin {
	struct plugin_config cfg;
	struct pshared sh;
	struct presource res[2];
	size_t n_res;
	struct pserver *srv[2];
	struct phealth *health;
	struct kubesock_watch watch;
	struct loop loop;
	struct loop_watch sig_w, dir_w;
	struct loop_timer cycle_t; /* the next cycle: settle or backoff */
	struct loop_timer dir_t;   /* looks for the directory while it is gone */
	int dir_polling;
	unsigned backoff_ms;
	const char *why_next; /* what the armed cycle_t is for */
	char kubelet_sock[PATH_MAX + 16];
	struct stat registered; /* the kubelet.sock all were registered on */
	int have_registered;
};

static void stop_servers(struct plugin *p)
{
	for (size_t i = 0; i < p->n_res; i++) {
		pserver_stop(p->srv[i]);
		p->srv[i] = NULL;
		pmetrics_unregistered(p->res[i].name);
	}
}

static void arm(struct plugin *p, unsigned ms, const char *why)
{
	loop_timer_after(&p->cycle_t, (uint64_t)ms * 1000u);
	p->why_next = why;
}

static void arm_retry(struct plugin *p, const char *why)
{
	log_warn("%s; trying again in %u ms", why, p->backoff_ms);
	arm(p, p->backoff_ms, "retry");
	p->backoff_ms = p->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : p->backoff_ms * 2;
}

/* 1 when the directory watch was lost and is back now, 0 while there is
 * no directory, -1 when it is there but cannot be watched (no inotify
 * watches left): served all the same, restarts then go unseen. While it
 * is not watched dir_t tries again every DIR_POLL_MS. */
static int rewatch(struct plugin *p)
{
	int e;

	if (p->watch.wd >= 0)
		return 0;
	if (kubesock_watch_retry(&p->watch)) {
		log_info("the device-plugin directory %s is there: watching it", p->watch.dir);
		if (p->dir_polling)
			loop_timer_disarm(&p->dir_t);
		p->dir_polling = 0;
		return 1;
	}
	e = errno;
	if (!p->dir_polling) {
		log_info("cannot watch the device-plugin directory %s (%s); trying every %d ms",
			 p->watch.dir, strerror(e), DIR_POLL_MS);
		loop_timer_every(&p->dir_t, (uint64_t)DIR_POLL_MS * 1000u);
		p->dir_polling = 1;
	}
	return e == ENOENT || e == ENOTDIR ? 0 : -1;
}

/* A directory back is a kubelet (re)installed: start at once. */
static void dir_appeared(struct plugin *p)
{
	p->backoff_ms = BACKOFF_MIN_MS;
	arm(p, SETTLE_MS, "the device-plugin directory appeared");
}

static int register_all(struct plugin *p, char *err, size_t errlen)
{
	for (size_t i = 0; i < p->n_res; i++) {
		int rc;

		/* The kubelet may open its stream before Register returns. */
		pserver_expect_kubelet(p->srv[i]);
		rc = preg_register(p->kubelet_sock, pserver_endpoint(p->srv[i]), p->res[i].name,
				   p->res[i].kind != PRES_INJECT, err, errlen);

		pmetrics_registration(p->res[i].name, rc == 0);
		if (rc < 0)
			return -1;
		log_info("%s: registered with the kubelet as %s", p->res[i].name,
			 pserver_endpoint(p->srv[i]));
	}
	return 0;
}

/* Serve every resource, then register each. Any failure: all again later. */
static void cycle(struct plugin *p, const char *why)
{
	char err[512];
	struct stat st;

	loop_timer_disarm(&p->cycle_t);
	if (p->watch.wd < 0) {
		/* no directory, nothing to serve in: dir_t starts the cycle that
		 * finds it back (a start here would race its appearance) */
		int back = rewatch(p);
		if (back == 0) {
			log_debug("%s: no device-plugin directory yet", why);
			return;
		}
		if (back > 0)
			why = "the device-plugin directory appeared";
	}
	log_info("starting the plugin servers (%s)", why);
	stop_servers(p);
	p->have_registered = 0;
	for (size_t i = 0; i < p->n_res; i++) {
		p->srv[i] = pserver_start(&p->cfg, &p->res[i], &p->sh, err, sizeof(err));
		if (!p->srv[i]) {
			arm_retry(p, err);
			return;
		}
	}
	if (stat(p->kubelet_sock, &st) < 0) {
		/* no kubelet yet: its socket's creation starts the next cycle */
		log_info("waiting for %s to appear", p->kubelet_sock);
		return;
	}
	if (register_all(p, err, sizeof(err)) < 0) {
		arm_retry(p, err);
		return;
	}
	p->backoff_ms = BACKOFF_MIN_MS;
	p->registered = st;
	p->have_registered = 1;
}

/* 1 when kubelet.sock is still the one every resource was registered on
 * (the creation an event reports may be the one a cycle already saw: a
 * kubelet that made its socket just after the watch was added). The
 * change time tells a new socket that got the old one's inode. */
static int same_kubelet(const struct plugin *p)
{
	struct stat st;

	return p->have_registered && stat(p->kubelet_sock, &st) == 0 &&
	       st.st_dev == p->registered.st_dev && st.st_ino == p->registered.st_ino &&
	       st.st_ctim.tv_sec == p->registered.st_ctim.tv_sec &&
	       st.st_ctim.tv_nsec == p->registered.st_ctim.tv_nsec;
}

static void on_cycle_timer(struct loop_timer *t)
{
	struct plugin *p = t->ctx;

	cycle(p, p->why_next ? p->why_next : "retry");
}

static void on_dir_timer(struct loop_timer *t)
{
	struct plugin *p = t->ctx;

	if (rewatch(p) > 0)
		dir_appeared(p);
}

/* A kubelet restart shows as kubelet.sock created, or our socket gone;
 * a kubelet reinstall as the directory itself gone (and made again). */
static void on_inotify(struct loop_watch *w, uint32_t events)
{
	struct plugin *p = w->ctx;
	const char *names[3] = { "kubelet.sock" };
	unsigned bits[3];
	int again = 0;

	(void)events;
	for (size_t i = 0; i < p->n_res; i++)
		names[i + 1] = p->srv[i] ? pserver_endpoint(p->srv[i]) : "";
	kubesock_watch_drain(&p->watch, names, p->n_res + 1, bits);
	if (p->watch.wd < 0) {
		/* nothing to serve in until it is back: rewatch() looks for it */
		log_warn("the device-plugin directory %s went away", p->watch.dir);
		if (rewatch(p) > 0) /* made again already */
			dir_appeared(p);
		return;
	}
	if ((bits[0] & KUBESOCK_CREATED) && same_kubelet(p)) {
		log_debug("kubelet.sock created: the one already registered on");
	} else if (bits[0] & KUBESOCK_CREATED) {
		p->backoff_ms = BACKOFF_MIN_MS; /* a new kubelet: no reason to wait longer */
		arm(p, SETTLE_MS, "the kubelet (re)started");
		return;
	}
	for (size_t i = 0; i < p->n_res; i++)
		if (p->srv[i] && (bits[i + 1] & KUBESOCK_DELETED) &&
		    access(pserver_socket(p->srv[i]), F_OK) < 0)
			again = 1;
	if (again)
		arm(p, SETTLE_MS, "our socket was removed");
}

static void on_signal(struct loop_watch *w, uint32_t events)
{
	struct plugin *p = w->ctx;
	struct signalfd_siginfo si;

	(void)events;
	while (read(w->fd, &si, sizeof(si)) == sizeof(si)) {
		if (si.ssi_signo == SIGHUP) {
			cycle(p, "SIGHUP");
			continue;
		}
		log_info("signal %u: stopping", si.ssi_signo);
		p->loop.stop = 1;
		return;
	}
}

static int run(struct plugin *p)
{
	p->sig_w.fn = on_signal;
	p->sig_w.ctx = p;
	p->dir_w.fn = on_inotify;
	p->dir_w.ctx = p;
	if (loop_add(&p->loop, &p->sig_w, EPOLLIN) < 0 || loop_add(&p->loop, &p->dir_w, EPOLLIN) < 0 ||
	    loop_timer_add(&p->loop, &p->cycle_t, "plugin cycle", on_cycle_timer, p) < 0 ||
	    loop_timer_add(&p->loop, &p->dir_t, "device-plugin directory", on_dir_timer, p) < 0)
		return 1;
	cycle(p, "start");
	return loop_run(&p->loop) < 0 ? 1 : 0;
}

/* The socket directory is mounted into every container: anything in it
 * besides the preempt agents' socket (say, the node agent's root-only
 * control socket) would be reachable from every pod. */
static void check_socket_dir(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;

	if (!d) {
		log_warn("node agent socket directory %s: %s (containers get an empty mount)", dir,
			 strerror(errno));
		return;
	}
	while ((e = readdir(d)))
		if (e->d_type == DT_SOCK && strcmp(e->d_name, "agent.sock") != 0)
			log_warn("%s/%s: a socket other than agent.sock in the directory mounted into "
				 "every container; keep it elsewhere (gpuqos-agent --ctl-socket)",
				 dir, e->d_name);
	closedir(d);
}

static int setup(struct plugin *p, char *err, size_t errlen)
{
	sigset_t set;

	pthread_mutex_init(&p->sh.mu, NULL);
	p->n_res = pres_from_config(&p->cfg, p->res);
	snprintf(p->kubelet_sock, sizeof(p->kubelet_sock), "%s/kubelet.sock",
		 p->cfg.device_plugin_dir);
	if (p->cfg.mode == PCFG_SHARES && pgpus_discover(&p->cfg, &p->sh.gpus, err, errlen) < 0)
		return -1;
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	sigprocmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
	p->sig_w.fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	if (p->sig_w.fd < 0 || kubesock_watch_init(&p->watch, p->cfg.device_plugin_dir) < 0 ||
	    loop_init(&p->loop) < 0) {
		snprintf(err, errlen, "signalfd/inotify/epoll: %s", strerror(errno));
		return -1;
	}
	p->dir_w.fd = p->watch.fd; /* kubesock_watch_close closes it */
	p->backoff_ms = BACKOFF_MIN_MS;
	if (p->cfg.injection != PCFG_INJ_NONE)
		check_socket_dir(p->cfg.node_agent_socket_dir);
	if (p->cfg.mode == PCFG_SHARES)
		p->health = phealth_start(p->cfg.nvml_lib, &p->sh);
	return pmetrics_start(&p->cfg, p->res, p->n_res, &p->sh, err, errlen);
}

int main(int argc, char **argv)
{
	static struct plugin p;
	char err[1024];
	int rc;

	p.sig_w.fd = p.dir_w.fd = p.watch.fd = p.loop.epfd = -1;
	p.cycle_t.w.fd = p.dir_t.w.fd = -1;
	rc = pcfg_load(&p.cfg, argc, argv, err, sizeof(err));
	if (rc != 0) {
		if (rc < 0)
			fprintf(stderr, "gpuqos-device-plugin: %s\n", err);
		return rc < 0 ? 2 : 0;
	}
	log_set_level(p.cfg.log_level);
	log_info("gpuqos-device-plugin: mode %s, directory %s", pcfg_mode_name(p.cfg.mode),
		 p.cfg.device_plugin_dir);
	if (setup(&p, err, sizeof(err)) < 0) {
		log_error("%s", err);
		rc = 1;
	} else {
		rc = run(&p);
	}
	pmetrics_stop(); /* first: a scrape reads the GPU table and resources */
	stop_servers(&p);
	phealth_stop(p.health);
	if (p.cycle_t.loop)
		loop_timer_del(&p.cycle_t);
	if (p.dir_t.loop)
		loop_timer_del(&p.dir_t);
	loop_fini(&p.loop);
	kubesock_watch_close(&p.watch);
	if (p.sig_w.fd >= 0)
		close(p.sig_w.fd);
	pthread_mutex_destroy(&p.sh.mu);
	return rc;
}
