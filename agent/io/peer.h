/* SPDX-License-Identifier: Apache-2.0 */
/*
 * peer.h - the preempt agents' socket (peer.c): listening, accepting,
 * reading their messages into the model, sending COMMAND, POLICY and
 * WINDOW, closing and freeing connections.
 */
#ifndef GPUQOS_AGENT_IO_PEER_H
#define GPUQOS_AGENT_IO_PEER_H

#include <sys/types.h>

#include "agent/core/core.h"

int mkdir_parents(const char *path, mode_t mode);
int unix_listen(const char *path, int type, mode_t mode);
int peer_listen(struct agent *a);
int peer_send_command(struct agent *a, struct peer *p, struct cmd *c);
int peer_send_policy(struct agent *a, struct peer *p, uint32_t gr, uint32_t copy, uint32_t wake);
int peer_send_window(struct agent *a, struct peer *p);
int peer_send_memory(struct agent *a, struct peer *p, const struct mem_gpu *e);
/* Store until_us in p's lease page (hooks.renew_leases). */
void peer_renew_leases(struct agent *a, struct peer *p, uint64_t until_us);
void peer_close(struct agent *a, struct peer *p, const char *why);
void peer_close_broken(struct agent *a);
void peer_reap(struct agent *a);
void peer_free_all(struct agent *a);

#endif
