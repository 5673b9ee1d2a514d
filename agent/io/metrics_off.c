/* SPDX-License-Identifier: Apache-2.0 */
/*
 * metrics_off.c - the node agent built without libmicrohttpd: no HTTP
 * server, no /metrics, /healthz or /readyz. An address other than "off"
 * stops the start with an error rather than leave a scraper waiting for
 * an endpoint that will never come (metrics.h).
 */
#include "agent/io/metrics.h"

#include "common/log.h"

#include <stdio.h>
#include <string.h>

static char address[256] = METRICS_DEFAULT_ADDRESS;

void metrics_set_address(const char *addr)
{
	snprintf(address, sizeof(address), "%s", addr ? addr : "");
}

int metrics_start(struct agent *a)
{
	(void)a;
	if (!address[0] || strcmp(address, "off") == 0) {
		log_info("metrics: off (gpuqos-agent was built without libmicrohttpd)");
		return 0;
	}
	log_error("metrics: address \"%s\": gpuqos-agent was built without libmicrohttpd (no "
		  "metrics); use --metrics-address off",
		  address);
	return -1;
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
