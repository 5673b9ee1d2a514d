/* SPDX-License-Identifier: Apache-2.0 */
/*
 * configfile.h - reading the standalone policy file (docs/policy.md) for
 * the core's parser (agent/core/config.c).
 */
#ifndef GPUQOS_AGENT_IO_CONFIGFILE_H
#define GPUQOS_AGENT_IO_CONFIGFILE_H

#include <stddef.h>

#include "agent/core/config.h"

/* The policy file at path, read whole (a regular file of at most
 * CONFIG_MAX_BYTES) and parsed: 0 on success. On any error: -1, err holds
 * one sentence naming the file and what is wrong, and *out is left
 * untouched. */
int config_load(const char *path, struct agent_config *out, char *err, size_t errlen);

#endif
