/* SPDX-License-Identifier: Apache-2.0 */
/*
 * preempt_libc.h - which C library the process runs on, and finding a
 * function in the process's other objects without libc's help
 * (preempt_libc.c).
 */
#ifndef GPUQOS_PREEMPT_LIBC_H
#define GPUQOS_PREEMPT_LIBC_H

/* Whether the process's C library is glibc. Elsewhere (musl, ...) the
 * library takes no part: RM calls and dlsym pass straight through. */
int pa_libc_is_glibc(void);

/* The first definition of the function name in a loaded object other
 * than this library, read from the objects' own dynamic symbol tables;
 * NULL if none. For dlsym itself where dlvsym does not exist. */
void *pa_elf_other_sym(const char *name);

#endif /* GPUQOS_PREEMPT_LIBC_H */
