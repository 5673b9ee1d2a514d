/* SPDX-License-Identifier: Apache-2.0 */
/*
 * metrics.h - Prometheus metrics of the node agent over HTTP
 * (libmicrohttpd), plus /healthz and /readyz, on the metrics port and on a
 * listener of their own that slow clients of the metrics port cannot fill
 * (docs/metrics.md).
 *
 * The loop owns every table; the HTTP server runs on libmicrohttpd's own
 * thread and never touches them. After a batch the loop renders the
 * whole text exposition into a new buffer (at most every
 * METRICS_RENDER_MS, and at most 5 % of the loop's time with a large
 * table) and swaps it in under a mutex held only for the pointer swap; a scrape takes a reference to the buffer it serves. So a
 * scrape never waits for the loop, and the loop never waits for a scrape.
 *
 * Owns: the HTTP server, the snapshot, what the metrics keep per TSG that
 * the agent's tables do not (control outcomes, creation time, how long a
 * TSG has been unconverged) and the control latency histogram. Does not
 * own any table it reads (agent.h), nor the values (reconcile.c, cmd.c).
 */
#ifndef GPUQOS_AGENT_METRICS_H
#define GPUQOS_AGENT_METRICS_H

#include <stdint.h>

struct agent;
struct cmd;
struct cmd_outcome;
struct tsg;

/* Built without libmicrohttpd (metrics_off.c) the default is off, and
 * any other address stops the start with an error. */
#ifdef GPUQOS_HAVE_MHD
#define METRICS_DEFAULT_ADDRESS ":9402"
#define METRICS_DEFAULT_HEALTH_ADDRESS "127.0.0.1:9404"
#else
#define METRICS_DEFAULT_ADDRESS "off"
#define METRICS_DEFAULT_HEALTH_ADDRESS "off"
#endif
/* The snapshot is rendered at most this often (and the reconcile tick
 * guarantees a pass every second or so). */
#define METRICS_RENDER_MS 200u

/* --metrics-address (GPUQOS_METRICS_ADDRESS): "HOST:PORT", ":PORT" (every
 * address), "[V6]:PORT", or "off"/"" (no HTTP server). Before start. */
void metrics_set_address(const char *addr);
/* --health-address (GPUQOS_HEALTH_ADDRESS): where /healthz and /readyz
 * are served on their own, same forms; loopback by default. Before start. */
void metrics_set_health_address(const char *addr);
/* Starts the HTTP servers. One that cannot start is logged and the agent
 * runs without it (workloads come first); -1 only for an address that
 * cannot be parsed. */
int metrics_start(struct agent *a);
/* After every batch: readiness, liveness, and a new snapshot when due. */
void metrics_publish(struct agent *a);
/* The agent_hooks.control_ended hook (cron.c installs it): a control
 * ended, with a result or at its deadline; t NULL when its TSG is gone. */
void metrics_control_ended(struct agent *a, const struct tsg *t, const struct cmd *c,
			   const struct cmd_outcome *o);
void metrics_stop(void);

#endif
