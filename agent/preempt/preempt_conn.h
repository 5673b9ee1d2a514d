/* SPDX-License-Identifier: Apache-2.0 */
/*
 * preempt_conn.h - the library's thread and its connection to the node
 * agent (preempt_conn.c), started and forgotten by the interposer.
 */
#ifndef GPUQOS_PREEMPT_CONN_H
#define GPUQOS_PREEMPT_CONN_H

void pa_conn_start(void);       /* idempotent; on the first RM client */
void pa_conn_child_reset(void); /* in a forked child: forget thread and fds */

#endif /* GPUQOS_PREEMPT_CONN_H */
