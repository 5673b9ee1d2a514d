/* SPDX-License-Identifier: Apache-2.0 */
/*
 * procstat.h - /proc/<pid>/stat read once for every gpuqos reader: the
 * process's start time (field 22, clock ticks since boot: with the pid, a
 * process's identity that pid reuse cannot fake) and its comm. Does not
 * own what a process is for (agent/io/procinfo.c, bpf/tsgtrace.c).
 */
#ifndef GPUQOS_COMMON_PROCSTAT_H
#define GPUQOS_COMMON_PROCSTAT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* s: the text of a stat file, NUL-terminated. comm (may be NULL) gets the
 * name between the first '(' and the last ')', cut to commlen - 1. 0, or
 * -1 when s is not a stat line. */
int procstat_parse(const char *s, uint64_t *starttime, char *comm, size_t commlen);

/* pid's start time. 0, or -1 with errno (ENOENT: no such process). */
int procstat_starttime(pid_t pid, uint64_t *starttime);

#endif
