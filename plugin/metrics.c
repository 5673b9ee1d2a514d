/* SPDX-License-Identifier: Apache-2.0 */
/*
 * metrics.c - the device plugin's Prometheus metrics and /healthz over
 * HTTP (libmicrohttpd's own thread), and /healthz again on a listener of
 * its own (--health-address) that clients of the metrics port cannot
 * fill. Counters are atomics the plugin's threads add to; a scrape renders
 * them, and the devices the kubelet is told about (pdev_list on a copy of
 * the GPU table, the same function ListAndWatch sends), into a buffer of
 * its own. Does not own the GPU table, the resources, when anything is
 * counted (main.c, server.c) or the configuration: it reads the values
 * main hands it and calls nothing in config.c.
 */
#include "plugin/metrics.h"

#include "common/httpd.h"
#include "common/log.h"
#include "common/utf8.h"
#include "plugin/config.h"
#include "plugin/devices.h"
#include "plugin/server.h"

#include <microhttpd.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#define PM_MAX_RES 2 /* pres_from_config's most */
#define PM_TEXT_MAX (64u << 10)

struct pm_res {
	const struct presource *res;
	atomic_uint_fast64_t reg_ok, reg_failed, reregistrations, alloc_ok, alloc_refused;
	atomic_uint streams;
	atomic_int registered; /* the last registration succeeded, server still up */
	atomic_int ever_registered;
};

static struct {
	struct httpd *d, *health;
	const char *mode;
	struct pshared *sh;
	struct pm_res r[PM_MAX_RES];
	size_t n;
	double start_wall;
} PM;

static struct pm_res *pm_find(const char *resource)
{
	for (size_t i = 0; resource && i < PM.n; i++)
		if (strcmp(PM.r[i].res->name, resource) == 0)
			return &PM.r[i];
	return NULL;
}

void pmetrics_registration(const char *resource, int ok)
{
	struct pm_res *r = pm_find(resource);

	if (!r)
		return;
	if (!ok) {
		atomic_fetch_add(&r->reg_failed, 1);
		atomic_store(&r->registered, 0);
		return;
	}
	atomic_fetch_add(&r->reg_ok, 1);
	if (atomic_exchange(&r->ever_registered, 1))
		atomic_fetch_add(&r->reregistrations, 1);
	atomic_store(&r->registered, 1);
}

void pmetrics_unregistered(const char *resource)
{
	struct pm_res *r = pm_find(resource);

	if (r)
		atomic_store(&r->registered, 0);
}

void pmetrics_allocation(const char *resource, int ok)
{
	struct pm_res *r = pm_find(resource);

	if (r)
		atomic_fetch_add(ok ? &r->alloc_ok : &r->alloc_refused, 1);
}

void pmetrics_streams(const char *resource, size_t open)
{
	struct pm_res *r = pm_find(resource);

	if (r)
		atomic_store(&r->streams, (unsigned)open);
}

/* ---- rendering (the HTTP thread) ---- */

struct pbuf {
	char *p;
	size_t len;
	int full;
};

static void __attribute__((format(printf, 2, 3))) pput(struct pbuf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (b->full)
		return;
	va_start(ap, fmt);
	n = vsnprintf(b->p + b->len, PM_TEXT_MAX - b->len, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= PM_TEXT_MAX - b->len)
		b->full = 1;
	else
		b->len += (size_t)n;
}

static void family(struct pbuf *b, const char *name, const char *type, const char *help)
{
	pput(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void pput_bytes(void *b, const char *p, size_t n)
{
	pput(b, "%.*s", (int)n, p);
}

/* `name{label="value"` with the value escaped as valid UTF-8: the config
 * checks resource names, but no label value relies on a check elsewhere. */
static void sample(struct pbuf *b, const char *name, const char *label, const char *v)
{
	pput(b, "%s{%s=\"", name, label);
	utf8_prom_label(v, pput_bytes, b);
	pput(b, "\"");
}

static void per_res(struct pbuf *b, const char *name, const char *extra, size_t off)
{
	for (size_t i = 0; i < PM.n; i++) {
		const atomic_uint_fast64_t *v =
			(const atomic_uint_fast64_t *)((const char *)&PM.r[i] + off);

		sample(b, name, "resource", PM.r[i].res->name);
		pput(b, "%s} %llu\n", extra, (unsigned long long)atomic_load(v));
	}
}

/* What ListAndWatch would send now: its devices by health. */
static void devices_of(const struct presource *r, size_t *healthy, size_t *unhealthy)
{
	struct pgpus g;
	struct parena a = { 0 };
	V1beta1__ListAndWatchResponse *m;

	pthread_mutex_lock(&PM.sh->mu);
	g = PM.sh->gpus;
	pthread_mutex_unlock(&PM.sh->mu);
	*healthy = *unhealthy = 0;
	m = pdev_list(r, &g, &a);
	for (size_t i = 0; m && i < m->n_devices; i++)
		if (strcmp(m->devices[i]->health, "Healthy") == 0)
			(*healthy)++;
		else
			(*unhealthy)++;
	parena_free(&a);
}

static void render_devices(struct pbuf *b)
{
	size_t ok, bad;

	family(b, "gpuqos_device_plugin_devices", "gauge",
	       "Devices ListAndWatch advertises for the resource, by health.");
	for (size_t i = 0; i < PM.n; i++) {
		devices_of(PM.r[i].res, &ok, &bad);
		sample(b, "gpuqos_device_plugin_devices", "resource", PM.r[i].res->name);
		pput(b, ",health=\"Healthy\"} %zu\n", ok);
		sample(b, "gpuqos_device_plugin_devices", "resource", PM.r[i].res->name);
		pput(b, ",health=\"Unhealthy\"} %zu\n", bad);
	}
}

static void render(struct pbuf *b)
{
	family(b, "gpuqos_device_plugin_info", "gauge", "The device plugin (value 1).");
	sample(b, "gpuqos_device_plugin_info", "version", GPUQOS_VERSION);
	pput(b, ",mode=\"");
	utf8_prom_label(PM.mode, pput_bytes, b);
	pput(b, "\"} 1\n");
	family(b, "gpuqos_device_plugin_start_time_seconds", "gauge",
	       "When the device plugin started (Unix time).");
	pput(b, "gpuqos_device_plugin_start_time_seconds %.3f\n", PM.start_wall);
	family(b, "gpuqos_device_plugin_registrations_total", "counter",
	       "Registrations with the kubelet, by resource and result.");
	per_res(b, "gpuqos_device_plugin_registrations_total", ",result=\"ok\"",
		offsetof(struct pm_res, reg_ok));
	per_res(b, "gpuqos_device_plugin_registrations_total", ",result=\"failed\"",
		offsetof(struct pm_res, reg_failed));
	family(b, "gpuqos_device_plugin_reregistrations_total", "counter",
	       "Registrations that succeeded after the first (kubelet restarts, SIGHUP, retries).");
	per_res(b, "gpuqos_device_plugin_reregistrations_total", "",
		offsetof(struct pm_res, reregistrations));
	family(b, "gpuqos_device_plugin_registered", "gauge",
	       "1 while the resource's last registration succeeded and its server runs.");
	for (size_t i = 0; i < PM.n; i++) {
		sample(b, "gpuqos_device_plugin_registered", "resource", PM.r[i].res->name);
		pput(b, "} %d\n", atomic_load(&PM.r[i].registered));
	}
	family(b, "gpuqos_device_plugin_allocations_total", "counter",
	       "Allocate calls answered, by resource and result (ok or refused).");
	per_res(b, "gpuqos_device_plugin_allocations_total", ",result=\"ok\"",
		offsetof(struct pm_res, alloc_ok));
	per_res(b, "gpuqos_device_plugin_allocations_total", ",result=\"refused\"",
		offsetof(struct pm_res, alloc_refused));
	family(b, "gpuqos_device_plugin_list_and_watch_streams", "gauge",
	       "ListAndWatch streams open, by resource.");
	for (size_t i = 0; i < PM.n; i++) {
		sample(b, "gpuqos_device_plugin_list_and_watch_streams", "resource",
		       PM.r[i].res->name);
		pput(b, "} %u\n", atomic_load(&PM.r[i].streams));
	}
	render_devices(b);
}

/* ---- HTTP ---- */

static enum MHD_Result reply_metrics(struct MHD_Connection *conn)
{
	struct pbuf b = { malloc(PM_TEXT_MAX), 0, 0 };

	if (!b.p)
		return httpd_reply_text(conn, MHD_HTTP_SERVICE_UNAVAILABLE, "out of memory\n");
	render(&b);
	if (b.full) {
		free(b.p);
		return httpd_reply_text(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "metrics too large\n");
	}
	return httpd_reply(conn, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8", b.p, b.len,
			   MHD_RESPMEM_MUST_FREE);
}

static enum MHD_Result reply_health(struct MHD_Connection *conn)
{
	return httpd_reply_text(conn, MHD_HTTP_OK, "ok\n");
}

/* The metrics port keeps /healthz for what probes it already; the health
 * listener is the one that stays free. */
static const struct httpd_route routes[] = {
	{ "/metrics", reply_metrics },
	{ "/healthz", reply_health },
	{ NULL, NULL },
};

static const struct httpd_route health_routes[] = {
	{ "/healthz", reply_health },
	{ NULL, NULL },
};
/* ---- start and stop ---- */

int pmetrics_check_address(const char *what, const char *addr, char *err, size_t errlen)
{
	char host[200];
	unsigned port;

	if (httpd_address_off(addr) || httpd_split_address(addr, host, sizeof(host), &port) == 0)
		return 0;
	snprintf(err, errlen, "%s address \"%s\": " HTTPD_ADDRESS_WANT, what, addr);
	return -1;
}

static double wall_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int pmetrics_start(const struct plugin_config *cfg, const struct presource *res, size_t n,
		   struct pshared *sh, char *err, size_t errlen)
{
	const struct httpd_listener l[] = {
		{ "metrics", cfg->metrics_address, routes, &httpd_metrics_limits },
		{ "health", cfg->health_address, health_routes, &httpd_health_limits },
	};
	struct httpd *h[2];

	PM.n = n < PM_MAX_RES ? n : PM_MAX_RES;
	for (size_t i = 0; i < PM.n; i++)
		PM.r[i].res = &res[i];
	PM.sh = sh;
	PM.mode = pcfg_mode_name(cfg->mode);
	PM.start_wall = wall_now();
	if (httpd_listen(l, 2, h, err, errlen) != 0)
		return -1;
	PM.d = h[0];
	PM.health = h[1];
	return 0;
}

void pmetrics_stop(void)
{
	httpd_stop(PM.health);
	httpd_stop(PM.d); /* joins its threads: no scrape runs after */
	PM.d = PM.health = NULL;
}
