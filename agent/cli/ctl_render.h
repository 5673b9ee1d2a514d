/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ctl_render.h - turns checked control-socket answers (docs/ctl.md) into
 * what gpuqosctl prints. Each function validates the whole answer before it
 * prints anything, so a malformed answer yields one error and no half
 * table. Does not talk to the agent or parse the command line.
 */
#ifndef GPUQOS_CLI_CTL_RENDER_H
#define GPUQOS_CLI_CTL_RENDER_H

#include <stdio.h>

#include "agent/cli/ctl_json.h"

/* Each returns 0 when printed, -1 when the answer is malformed (see e). */
int render_list(const cJSON *ans, FILE *out, struct jerr *e);
int render_show(const cJSON *ans, long long pid, FILE *out, struct jerr *e);
int render_results(const cJSON *ans, long long pid, FILE *out, struct jerr *e);
int render_status(const cJSON *ans, FILE *out, struct jerr *e);
int render_set_class(const cJSON *ans, FILE *out, struct jerr *e);

/* Words for an errno from the agent, including the preempt protocol's own
 * codes (docs/protocol.md). */
const char *ctl_errno_text(long long err, char *buf, size_t len);

#endif
