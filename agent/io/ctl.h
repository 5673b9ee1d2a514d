/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ctl.h - the root-only control socket (ctl.c): gpuqosctl's requests and
 * their answers.
 */
#ifndef GPUQOS_AGENT_IO_CTL_H
#define GPUQOS_AGENT_IO_CTL_H

#include "agent/core/core.h"

int ctl_listen(struct agent *a);
/* A command issued for a ctl request finished (or timed out: err_word
 * "timeout"); why is the failure in words, or NULL. */
void ctl_cmd_done(struct agent *a, struct ctl_conn *c, struct cmd *cmd, uint32_t rm_status,
		  uint32_t err, const char *err_word, uint64_t value, uint64_t elapsed_ns,
		  const char *why);
void ctl_reap(struct agent *a);
void ctl_free_all(struct agent *a);

#endif
