/* SPDX-License-Identifier: Apache-2.0 */
/*
 * metrics_off.c - the node agent built without libmicrohttpd: no HTTP
 * server, no /metrics, /healthz or /readyz. An address other than "off"
 * (--metrics-address, --health-address) stops the start with an error
 * rather than leave a scraper or a probe waiting for an endpoint that
 * will never come (metrics.h).
 */
#include "agent/io/metrics.h"

#include "common/log.h"

#include <stdio.h>
#include <string.h>

static char address[256] = METRICS_DEFAULT_ADDRESS;
static char health_address[256] = METRICS_DEFAULT_HEALTH_ADDRESS;

void metrics_set_address(const char *addr)
{
	snprintf(address, sizeof(address), "%s", addr ? addr : "");
}

void metrics_set_health_address(const char *addr)
{
	snprintf(health_address, sizeof(health_address), "%s", addr ? addr : "");
}

static int refuse(const char *what, const char *addr, const char *flag)
{
	if (!addr[0] || strcmp(addr, "off") == 0)
		return 0;
	log_error("%s: address \"%s\": gpuqos-agent was built without libmicrohttpd (no "
		  "HTTP server); use %s off",
		  what, addr, flag);
	return -1;
}

int metrics_start(struct agent *a)
{
	(void)a;
	if (refuse("metrics", address, "--metrics-address") != 0 ||
	    refuse("health", health_address, "--health-address") != 0)
		return -1;
	log_info("metrics: off (gpuqos-agent was built without libmicrohttpd)");
	return 0;
}

void metrics_publish(struct agent *a)
{
	(void)a;
}

void metrics_control_ended(struct agent *a, const struct tsg *t, const struct cmd *c,
			   const struct cmd_outcome *o)
{
	(void)a;
	(void)t;
	(void)c;
	(void)o;
}

void metrics_stop(void) {}
