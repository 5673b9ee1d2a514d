/* SPDX-License-Identifier: Apache-2.0 */
/*
 * config.h - the device plugin's one configuration structure: the
 * versioned JSON file, then the environment, then the flags (each wins over
 * the one before), validated in one place (docs/device-plugin.md).
 *
 * Owns: defaults, parsing and range checks. Does not own what the values
 * mean at run time (devices.c, server.c, main.c).
 */
#ifndef GPUQOS_PLUGIN_CONFIG_H
#define GPUQOS_PLUGIN_CONFIG_H

#include <limits.h>
#include <stddef.h>

#include "common/log.h"

#define PCFG_VERSION 1
#define PCFG_NAME_MAX 128      /* a resource name, "domain/name" */
#define PCFG_MAX_REPLICAS 64   /* shares of one GPU, each a device id */
#define PCFG_MAX_INJECT 1000   /* devices of the inject resource */
#define PCFG_MAX_FILE (64u << 10)

enum pcfg_mode { PCFG_SHARES, PCFG_INJECT };
enum pcfg_visibility { PCFG_VIS_ENVVAR, PCFG_VIS_CDI, PCFG_VIS_DEVICES };
enum pcfg_injection { PCFG_INJ_LD_PRELOAD, PCFG_INJ_LD_SO_PRELOAD, PCFG_INJ_NONE };
enum pcfg_preferred { PCFG_PREF_SPREAD, PCFG_PREF_PACK };

struct plugin_config {
	enum pcfg_mode mode;
	char resource[PCFG_NAME_MAX];        /* BE shares (shares mode) */
	char lc_resource[PCFG_NAME_MAX];     /* LC shares (shares mode) */
	char inject_resource[PCFG_NAME_MAX]; /* inject mode */
	unsigned replicas, lc_replicas, inject_devices;
	enum pcfg_visibility visibility;
	enum pcfg_injection injection;
	enum pcfg_preferred preferred;

	char device_plugin_dir[PATH_MAX];
	char node_agent_socket_dir[PATH_MAX];
	char preempt_lib_dir[PATH_MAX];
	char nvidiactl[PATH_MAX];
	char sysfs_root[PATH_MAX];  /* /sys; tests point it at a fixture */
	char procfs_root[PATH_MAX]; /* /proc; the driver's per-GPU minor numbers */
	char nvml_lib[PATH_MAX];    /* libnvidia-ml.so.1; "" or "none": no health events */
	char metrics_address[256];  /* HOST:PORT of /metrics; "off": none (metrics.c) */
	char health_address[256];   /* HOST:PORT of /healthz alone; "off": none */
	enum log_level log_level;
};

void pcfg_defaults(struct plugin_config *c);

/* Applies a JSON document (the config file's text). 0, or -1 with err
 * filled and c unchanged. */
int pcfg_apply_json(struct plugin_config *c, const char *text, size_t len, char *err,
		    size_t errlen);

/* The whole chain: defaults, --config/GPUQOS_PLUGIN_CONFIG file,
 * environment, flags. Returns 0 to run, 1 when --help/--version was
 * printed (exit 0), -1 with err filled (exit 2). */
int pcfg_load(struct plugin_config *c, int argc, char **argv, char *err, size_t errlen);

/* "shares" / "inject", ... for logs, docs and the metrics' mode label.
 * Inline: what reads the configuration (metrics.c) calls nothing in
 * config.c, which calls metrics.c to check its addresses. */
static inline const char *pcfg_mode_name(enum pcfg_mode m)
{
	return m == PCFG_INJECT ? "inject" : "shares";
}

#endif
