/* SPDX-License-Identifier: Apache-2.0 */
/*
 * main.c - gpuqos-device-plugin: the restart loop and nothing else.
 *
 * One server per resource (server.c) is started, then registered with the
 * kubelet (register.c): serve first, so the kubelet's first calls find
 * the socket. The loop (epoll on a signalfd, an inotify watch on the
 * device-plugin directory and a backoff timer) starts everything again
 * when the kubelet restarts (kubelet.sock created), when one of our sockets
 * is deleted (a new kubelet removes them; the events of one restart are
 * let settle for SETTLE_MS), on SIGHUP, and after a failure, with a backoff
 * of 0.5 s doubling to 30 s. SIGTERM and SIGINT stop it
 * cleanly.
 */
#include "common/kubesock.h"
#include "common/log.h"
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
#include <sys/timerfd.h>
#include <unistd.h>

#define BACKOFF_MIN_MS 500
#define BACKOFF_MAX_MS 30000
/* A kubelet restart is several directory events (our sockets removed,
 * kubelet.sock removed and made again) that may arrive in separate reads:
 * one cycle this long after the last of them, not one per read. */
#define SETTLE_MS 200

struct plugin {
	struct plugin_config cfg;
	struct pshared sh;
	struct presource res[2];
	size_t n_res;
	struct pserver *srv[2];
	struct phealth *health;
	struct kubesock_watch watch;
	int sfd, tfd;
	unsigned backoff_ms;
	const char *why_next; /* what the armed timer's cycle is for */
	char kubelet_sock[PATH_MAX + 16];
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
	struct itimerspec it = { 0 };

	it.it_value.tv_sec = ms / 1000;
	it.it_value.tv_nsec = (long)(ms % 1000) * 1000000L;
	timerfd_settime(p->tfd, 0, &it, NULL);
	p->why_next = why;
}

static void arm_retry(struct plugin *p, const char *why)
{
	log_warn("%s; trying again in %u ms", why, p->backoff_ms);
	arm(p, p->backoff_ms, "retry");
	p->backoff_ms = p->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : p->backoff_ms * 2;
}

/* Serve every resource, then register each. Any failure: all again later. */
static void cycle(struct plugin *p, const char *why)
{
	struct itimerspec off = { 0 };
	char err[512];

	log_info("starting the plugin servers (%s)", why);
	timerfd_settime(p->tfd, 0, &off, NULL);
	stop_servers(p);
	for (size_t i = 0; i < p->n_res; i++) {
		p->srv[i] = pserver_start(&p->cfg, &p->res[i], &p->sh, err, sizeof(err));
		if (!p->srv[i]) {
			arm_retry(p, err);
			return;
		}
	}
	if (access(p->kubelet_sock, F_OK) < 0) {
		/* no kubelet yet: its socket's creation starts the next cycle */
		log_info("waiting for %s to appear", p->kubelet_sock);
		return;
	}
	for (size_t i = 0; i < p->n_res; i++) {
		int rc = preg_register(p->kubelet_sock, pserver_endpoint(p->srv[i]), p->res[i].name,
				       p->res[i].kind != PRES_INJECT, err, sizeof(err));

		pmetrics_registration(p->res[i].name, rc == 0);
		if (rc < 0) {
			arm_retry(p, err);
			return;
		}
		log_info("%s: registered with the kubelet as %s", p->res[i].name,
			 pserver_endpoint(p->srv[i]));
	}
	p->backoff_ms = BACKOFF_MIN_MS;
}

/* A kubelet restart shows as kubelet.sock created, or our socket gone. */
static void on_inotify(struct plugin *p)
{
	const char *names[3] = { "kubelet.sock" };
	unsigned bits[3];
	int again = 0;

	for (size_t i = 0; i < p->n_res; i++)
		names[i + 1] = p->srv[i] ? pserver_endpoint(p->srv[i]) : "";
	kubesock_watch_drain(&p->watch, names, p->n_res + 1, bits);
	if (kubesock_watch_retry(&p->watch)) {
		arm(p, SETTLE_MS, "the device-plugin directory appeared");
		return;
	}
	if (bits[0] & KUBESOCK_CREATED) {
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

/* 1 to keep running. */
static int on_signal(struct plugin *p)
{
	struct signalfd_siginfo si;

	while (read(p->sfd, &si, sizeof(si)) == sizeof(si)) {
		if (si.ssi_signo == SIGHUP) {
			cycle(p, "SIGHUP");
			continue;
		}
		log_info("signal %u: stopping", si.ssi_signo);
		return 0;
	}
	return 1;
}

static int add_fd(int ep, int fd)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = fd };

	return epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
}

static int run(struct plugin *p)
{
	struct epoll_event evs[4];
	int ep = epoll_create1(EPOLL_CLOEXEC);

	if (ep < 0 || add_fd(ep, p->sfd) < 0 || add_fd(ep, p->tfd) < 0 ||
	    add_fd(ep, p->watch.fd) < 0) {
		log_error("epoll: %s", strerror(errno));
		if (ep >= 0)
			close(ep);
		return 1;
	}
	cycle(p, "start");
	for (;;) {
		int n = epoll_wait(ep, evs, 4, -1);
		if (n < 0 && errno != EINTR)
			break;
		for (int i = 0; i < n; i++) {
			int fd = evs[i].data.fd;
			if (fd == p->sfd && !on_signal(p)) {
				close(ep);
				return 0;
			}
			if (fd == p->tfd) {
				uint64_t v;
				if (read(p->tfd, &v, sizeof(v)) == sizeof(v))
					cycle(p, p->why_next ? p->why_next : "retry");
			}
			if (fd == p->watch.fd)
				on_inotify(p);
		}
	}
	log_error("epoll_wait: %s", strerror(errno));
	close(ep);
	return 1;
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
	p->sfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	p->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (p->sfd < 0 || p->tfd < 0 || kubesock_watch_init(&p->watch, p->cfg.device_plugin_dir) < 0) {
		snprintf(err, errlen, "signalfd/timerfd/inotify: %s", strerror(errno));
		return -1;
	}
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

	p.sfd = p.tfd = p.watch.fd = -1;
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
	kubesock_watch_close(&p.watch);
	if (p.sfd >= 0)
		close(p.sfd);
	if (p.tfd >= 0)
		close(p.tfd);
	pthread_mutex_destroy(&p.sh.mu);
	return rc;
}
