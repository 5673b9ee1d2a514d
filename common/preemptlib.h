/* SPDX-License-Identifier: Apache-2.0 */
/*
 * preemptlib.h - the preempt agent's library on the host, installed so that
 * a running container never sees its file change: every version goes into
 * a directory of its own, <dir>/<version>-<sha256 prefix>/, and the
 * `current` symlink is switched by rename. Nothing is ever overwritten in
 * place (an in-place overwrite of a mapped library crashes the processes
 * that map it).
 *
 * The node agent installs (gpuqos-agent --install-preempt-lib); the device
 * plugin resolves `current` at each Allocate and mounts the directory it
 * names, so a later switch does not touch a container already started.
 *
 * Owns: the layout of <dir> and the install steps. Does not own what the
 * library does or who mounts it. libc only.
 */
#ifndef GPUQOS_COMMON_PREEMPTLIB_H
#define GPUQOS_COMMON_PREEMPTLIB_H

#include <stddef.h>

#define PREEMPTLIB_LIB_NAME "libgpuqos-preempt.so"
#define PREEMPTLIB_DEFAULT_DIR "/var/lib/gpuqos/lib"
/* Where a container sees the versioned directory, and the library in it. */
#define PREEMPTLIB_CONTAINER_DIR "/opt/gpuqos/lib"
#define PREEMPTLIB_CONTAINER_LIB PREEMPTLIB_CONTAINER_DIR "/" PREEMPTLIB_LIB_NAME
#define PREEMPTLIB_MAX_BYTES (64u << 20)

/* Copies src into <dir>/<version>-<12 hex of its sha256>/ (with an
 * ld.so.preload naming PREEMPTLIB_CONTAINER_LIB beside it) unless that
 * directory already exists, then points <dir>/current at it. Writes the
 * versioned directory's name to name (may be NULL). 0, or -1 with err
 * filled; on failure `current` is unchanged. */
int preemptlib_install(const char *src, const char *dir, const char *version, char *name,
		       size_t namelen, char *err, size_t errlen);

/* The directory <dir>/current names, as "<dir>/<versioned name>", when it
 * holds the library; *have_preload tells whether ld.so.preload is there.
 * 0, or -1 (nothing installed, or `current` is not one of ours). */
int preemptlib_resolve(const char *dir, char *out, size_t outlen, int *have_preload);

#endif
