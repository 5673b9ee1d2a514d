/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fileio.h - reading a whole file, once for every gpuqos reader: opened
 * O_CLOEXEC, read to its end across short reads and EINTR, bounded in
 * size, failures as -1/NULL with errno (the caller words them). Does not
 * own what a file means.
 */
#ifndef GPUQOS_COMMON_FILEIO_H
#define GPUQOS_COMMON_FILEIO_H

#include <stddef.h>
#include <sys/types.h>

/* The whole file at path in a malloc'd buffer with a NUL after its end
 * (*len, when not NULL: its length without the NUL). NULL with errno: the
 * open's or read's, EFBIG when it holds more than max bytes, ENOMEM. */
char *fileio_read(const char *path, size_t max, size_t *len);

/* The same from an open fd (the caller opened and checked it, and closes
 * it), read from its current offset. */
char *fileio_read_fd(int fd, size_t max, size_t *len);

/* The same, but a file longer than max is cut at max bytes: for files
 * (/proc's environ, cgroup) where what is looked for comes first. */
char *fileio_read_head(const char *path, size_t max, size_t *len);

/* At most n - 1 bytes of path into buf, NUL-terminated (a longer file is
 * cut, as /proc files that only matter at their start are). The bytes
 * read, or -1 with errno. */
ssize_t fileio_read_buf(const char *path, char *buf, size_t n);

#endif
