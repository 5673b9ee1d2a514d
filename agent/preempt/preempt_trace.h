/* SPDX-License-Identifier: Apache-2.0 */
/*
 * preempt_trace.h - GPUQOS_TRACE, the record of every RM ioctl
 * (preempt_trace.c), driven by the interposed ioctl().
 */
#ifndef GPUQOS_PREEMPT_TRACE_H
#define GPUQOS_PREEMPT_TRACE_H

#include "abi/rm_abi.h"

extern int pa_trace_on;
struct pa_trace_call;
void pa_trace_init(const char *path_template);
void pa_trace_child_reset(void);
int pa_trace_owns(int fd);
struct pa_trace_call *pa_trace_begin(int fd, unsigned long request, enum rm_call_kind kind,
				     void *arg);
void pa_trace_end(struct pa_trace_call *tc, int ret, int err);

#endif /* GPUQOS_PREEMPT_TRACE_H */
