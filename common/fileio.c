/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fileio.c - whole-file reads (fileio.h). Owns the open/read/close and the
 * size bound; nothing is logged here, the caller says what failed.
 */
#include "common/fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

/* Up to n bytes from fd until its end: the count, or -1 with errno. */
static ssize_t read_full(int fd, char *buf, size_t n)
{
	size_t got = 0;

	while (got < n) {
		ssize_t r = read(fd, buf + got, n - got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -1;
		if (r == 0)
			break;
		got += (size_t)r;
	}
	return (ssize_t)got;
}

static int open_ro(const char *path)
{
	int fd;

	do
		fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	while (fd < 0 && errno == EINTR);
	return fd;
}

static void close_keep_errno(int fd)
{
	int e = errno;

	close(fd);
	errno = e;
}

ssize_t fileio_read_buf(const char *path, char *buf, size_t n)
{
	int fd;
	ssize_t r;

	if (n == 0) {
		errno = EINVAL;
		return -1;
	}
	fd = open_ro(path);
	if (fd < 0)
		return -1;
	r = read_full(fd, buf, n - 1);
	close_keep_errno(fd);
	buf[r < 0 ? 0 : r] = '\0';
	return r;
}

/* The buffer grows from 4 KiB as the file does: most files read here are
 * small, a few (a process's environ) may be large. fd is left open. */
static char *read_grow_fd(int fd, size_t max, int cut, size_t *len)
{
	size_t cap = max < 4096 ? max : 4096, n = 0;
	char *buf = malloc(cap + 2);

	if (!buf)
		return NULL;
	for (;;) {
		ssize_t r;

		if (n == cap + 1) { /* one byte past cap tells a full file from a longer one */
			char *nb = cap >= max ? NULL : realloc(buf, (cap * 2 < max ? cap * 2 : max) + 2);

			if (!nb && cap < max) {
				free(buf);
				errno = ENOMEM;
				return NULL;
			}
			if (!nb) {
				if (!cut) {
					free(buf);
					errno = EFBIG;
					return NULL;
				}
				n = cap; /* cut at max */
				break;
			}
			buf = nb;
			cap = cap * 2 < max ? cap * 2 : max;
		}
		r = read_full(fd, buf + n, cap + 1 - n);
		if (r < 0) {
			int e = errno;

			free(buf);
			errno = e;
			return NULL;
		}
		n += (size_t)r;
		if (n < cap + 1)
			break; /* its end */
	}
	buf[n] = '\0';
	if (len)
		*len = n;
	return buf;
}

static char *read_grow(const char *path, size_t max, int cut, size_t *len)
{
	int fd = open_ro(path);
	char *buf;

	if (fd < 0)
		return NULL;
	buf = read_grow_fd(fd, max, cut, len);
	close_keep_errno(fd);
	return buf;
}

char *fileio_read_fd(int fd, size_t max, size_t *len)
{
	return read_grow_fd(fd, max, 0, len);
}

char *fileio_read(const char *path, size_t max, size_t *len)
{
	return read_grow(path, max, 0, len);
}

char *fileio_read_head(const char *path, size_t max, size_t *len)
{
	return read_grow(path, max, 1, len);
}
