/* SPDX-License-Identifier: Apache-2.0 */
/*
 * metrics.h - the device plugin's Prometheus endpoint (libmicrohttpd):
 * registrations, re-registrations, allocations, ListAndWatch streams and
 * the devices advertised, by resource (docs/metrics.md, "The device
 * plugin"), and /healthz on a listener of its own.
 *
 * The plugin's threads (main's restart loop, each server's completion
 * queue thread) only add to atomic counters here; the HTTP thread renders
 * a scrape from those atomics and from the shared GPU table, read under
 * its mutex like any server thread reads it. A stuck scraper holds no
 * lock and delays no gRPC call.
 *
 * Owns: the HTTP server and the counters. Does not own the GPU table
 * (struct pshared) or what counts as an allocation (server.c decides).
 */
#ifndef GPUQOS_PLUGIN_METRICS_H
#define GPUQOS_PLUGIN_METRICS_H

#include <stddef.h>

struct plugin_config;
struct presource;
struct pshared;

/* Without libmicrohttpd the plugin is built without metrics and the
 * defaults are off (an address given then is an error). */
#ifdef GPUQOS_HAVE_MHD
#define PMETRICS_DEFAULT_ADDRESS ":9403"
#define PMETRICS_DEFAULT_HEALTH_ADDRESS "127.0.0.1:9405"
#else
#define PMETRICS_DEFAULT_ADDRESS "off"
#define PMETRICS_DEFAULT_HEALTH_ADDRESS "off"
#endif
#define PMETRICS_ADDRESS_MAX 256

/* 0 when addr is one pmetrics_start can serve ("off" included), else -1
 * with err naming it as what ("metrics", "health") (config.c checks the
 * flags and the environment). */
int pmetrics_check_address(const char *what, const char *addr, char *err, size_t errlen);

/* Serves cfg->metrics_address (/metrics and /healthz) and
 * cfg->health_address (/healthz alone): "HOST:PORT", ":PORT", "[V6]:PORT";
 * "off" or "": nothing. For the n resources of res, whose names and table
 * stay valid until pmetrics_stop. -1 with err filled for an address that
 * cannot be parsed (or any address in a build without metrics); an
 * address that cannot be bound is logged and the plugin runs without that
 * listener (0). Reads cfg, calls nothing in config.c. */
int pmetrics_start(const struct plugin_config *cfg, const struct presource *res, size_t n,
		   struct pshared *sh, char *err, size_t errlen);
void pmetrics_stop(void);

/* Any thread. resource is a presource name; unknown names are ignored. */
void pmetrics_registration(const char *resource, int ok);
void pmetrics_unregistered(const char *resource); /* its server stopped */
void pmetrics_allocation(const char *resource, int ok);
void pmetrics_streams(const char *resource, size_t open);

#endif
