/* SPDX-License-Identifier: Apache-2.0 */
/*
 * jsonnum.h - numbers in the JSON the agent answers (ctl): a whole
 * number is written with its digits, anything else as cJSON writes it.
 * cJSON prints every number with snprintf("%1.15g") and reads it back with
 * sscanf to check it, a few microseconds each: a list of 256 processes
 * carries over ten thousand numbers, and that was most of its cost.
 * The tree built this way is for printing only: a whole number added
 * here has no valuedouble to read back.
 */
#ifndef GPUQOS_AGENT_IO_JSONNUM_H
#define GPUQOS_AGENT_IO_JSONNUM_H

#include <cjson/cJSON.h>

/* Like cJSON_AddNumberToObject (NULL when out of memory). */
cJSON *json_add_num(cJSON *o, const char *key, double v);

#endif
