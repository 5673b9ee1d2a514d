/* SPDX-License-Identifier: Apache-2.0 */
/*
 * metrics_off.c - the device plugin built without libmicrohttpd: no
 * metrics or health endpoint, and an address other than "off" is refused
 * at start so nobody waits for a scrape or a probe that cannot come
 * (metrics.h).
 */
#include "plugin/metrics.h"

#include "plugin/config.h"

#include <stdio.h>
#include <string.h>

int pmetrics_check_address(const char *what, const char *addr, char *err, size_t errlen)
{
	if (!addr[0] || strcmp(addr, "off") == 0)
		return 0;
	snprintf(err, errlen,
		 "%s address \"%s\": gpuqos-device-plugin was built without libmicrohttpd "
		 "(no HTTP server); use off",
		 what, addr);
	return -1;
}

int pmetrics_start(const struct plugin_config *cfg, const struct presource *res, size_t n,
		   struct pshared *sh, char *err, size_t errlen)
{
	(void)res;
	(void)n;
	(void)sh;
	if (pmetrics_check_address("metrics", cfg->metrics_address, err, errlen) != 0)
		return -1;
	return pmetrics_check_address("health", cfg->health_address, err, errlen);
}

void pmetrics_stop(void) {}
void pmetrics_registration(const char *resource, int ok) { (void)resource; (void)ok; }
void pmetrics_unregistered(const char *resource) { (void)resource; }
void pmetrics_allocation(const char *resource, int ok) { (void)resource; (void)ok; }
void pmetrics_streams(const char *resource, size_t open) { (void)resource; (void)open; }
