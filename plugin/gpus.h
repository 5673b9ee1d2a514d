/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpus.h - the device plugin's GPU table from the host: the RM's list
 * (common/rmgpus.c: UUID and PCI bus id from our own RM client), the NUMA
 * node from sysfs and the device minor from the driver's procfs.
 *
 * Owns: reading and converting those. Does not own health (health.c) or
 * what is advertised (devices.c).
 */
#ifndef GPUQOS_PLUGIN_GPUS_H
#define GPUQOS_PLUGIN_GPUS_H

#include <stddef.h>

#include "plugin/config.h"
#include "plugin/devices.h"

/* "00000000:3b:00.0" (the RM's spelling) -> "0000:3b:00.0" (sysfs's);
 * -1 when it is not a bus id. */
int pgpus_sysfs_bus_id(const char *rm, char *out, size_t len);

/* The minor from a /proc/driver/nvidia/gpus/<id>/information text
 * ("Device Minor: 3"), or -1. */
int pgpus_parse_minor(const char *text);

/* Fills g (every GPU healthy). 0, or -1 with err filled (the RM could
 * not be asked). GPUs without a UUID are left out with a warning. */
int pgpus_discover(const struct plugin_config *c, struct pgpus *g, char *err, size_t errlen);

#endif
