/* SPDX-License-Identifier: Apache-2.0 */
/*
 * preempt_glibc.h - the oldest glibc the preempt library runs on.
 *
 * Included before everything in each of the library's files (the build
 * passes it with -include). The library is loaded into other people's
 * images, built on glibcs from 2.17 up, so it may reference no symbol
 * version newer than GLIBC_2.17. A build on a newer glibc binds each
 * function that moved into libc.so.6 (2.34: dlopen, pthread_create, ...;
 * 2.32: pthread_sigmask) to its first version instead, which every glibc
 * since still exports; the library also names libdl.so.2 and
 * libpthread.so.0, where those versions lived before 2.34 (later glibcs
 * keep both files as empty stubs). tests/preempt/check_glibc_floor.py
 * checks the built library's symbol table.
 *
 * gettid (2.30) is not used at all (syscall(SYS_gettid)), nor is
 * pthread_atfork, which glibc implements in libc_nonshared.a by a call to
 * __register_atfork, a symbol only glibc has.
 */
#ifndef GPUQOS_PREEMPT_GLIBC_H
#define GPUQOS_PREEMPT_GLIBC_H

#if defined(__x86_64__)
#define PA_GLIBC_BASE "GLIBC_2.2.5"
#define PA_GLIBC_2_3_3 "GLIBC_2.3.3"
#define PA_GLIBC_2_12 "GLIBC_2.12"
#elif defined(__aarch64__)
/* aarch64's first glibc was 2.17: every symbol's first version. */
#define PA_GLIBC_BASE "GLIBC_2.17"
#define PA_GLIBC_2_3_3 "GLIBC_2.17"
#define PA_GLIBC_2_12 "GLIBC_2.17"
#endif

#ifdef PA_GLIBC_BASE
#define PA_GLIBC_SYMVER(sym, ver) __asm__(".symver " #sym "," #sym "@" ver)
PA_GLIBC_SYMVER(dlopen, PA_GLIBC_BASE);
PA_GLIBC_SYMVER(dlclose, PA_GLIBC_BASE);
PA_GLIBC_SYMVER(dladdr, PA_GLIBC_BASE);
PA_GLIBC_SYMVER(dlvsym, PA_GLIBC_BASE);
PA_GLIBC_SYMVER(pthread_create, PA_GLIBC_BASE);
PA_GLIBC_SYMVER(pthread_once, PA_GLIBC_BASE);
PA_GLIBC_SYMVER(pthread_sigmask, PA_GLIBC_BASE);
PA_GLIBC_SYMVER(pthread_attr_setstacksize, PA_GLIBC_BASE);
PA_GLIBC_SYMVER(pthread_mutex_timedlock, PA_GLIBC_BASE);
PA_GLIBC_SYMVER(pthread_condattr_setclock, PA_GLIBC_2_3_3);
PA_GLIBC_SYMVER(pthread_setname_np, PA_GLIBC_2_12);
#endif

#endif /* GPUQOS_PREEMPT_GLIBC_H */
