/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_fileio.c - common/fileio.c on its own: whole files read exactly
 * (across the buffer's growth, from pipes' short reads, from an fd's
 * offset), a file over the bound refused with EFBIG or cut where asked,
 * and failures as -1/NULL with the errno the caller words.
 */
#include "common/fileio.h"
#include "tests/check.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[] = "/tmp/gpuqos-fileio-XXXXXX";

static void put(const char *name, const char *data, size_t n, char *path)
{
	int fd;

	snprintf(path, 256, "%s/%s", dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	CHECK(fd >= 0);
	CHECK(write(fd, data, n) == (ssize_t)n);
	close(fd);
}

/* n bytes that differ along the file: a misplaced chunk shows. */
static char *pattern(size_t n)
{
	char *p = malloc(n);

	for (size_t i = 0; p && i < n; i++)
		p[i] = (char)('a' + (i * 7 + i / 4096) % 26);
	return p;
}

static void test_read(void)
{
	char path[256], *s;
	size_t len = 0, big = 100000;
	char *data = pattern(big);

	put("small", "hello\n", 6, path);
	s = fileio_read(path, 64, &len);
	CHECK(s && len == 6 && memcmp(s, "hello\n", 7) == 0); /* NUL after its end */
	free(s);
	/* Past the first 4 KiB, the buffer grows and the bytes stay in place. */
	put("big", data, big, path);
	s = fileio_read(path, big, &len);
	CHECK(s && len == big && memcmp(s, data, big) == 0 && s[big] == '\0');
	free(s);
	/* One byte over the bound: refused whole, or cut where asked. */
	errno = 0;
	CHECK(fileio_read(path, big - 1, &len) == NULL && errno == EFBIG);
	s = fileio_read_head(path, 5000, &len);
	CHECK(s && len == 5000 && memcmp(s, data, 5000) == 0 && s[5000] == '\0');
	free(s);
	/* An empty file is an empty string. */
	put("empty", "", 0, path);
	s = fileio_read(path, 16, &len);
	CHECK(s && len == 0 && s[0] == '\0');
	free(s);
	errno = 0;
	snprintf(path, sizeof(path), "%s/none", dir);
	CHECK(fileio_read(path, 16, &len) == NULL && errno == ENOENT);
	free(data);
}

static void test_read_buf(void)
{
	char path[256], buf[8];

	put("buf", "0123456789", 10, path);
	CHECK(fileio_read_buf(path, buf, sizeof(buf)) == 7 && strcmp(buf, "0123456") == 0);
	errno = 0;
	CHECK(fileio_read_buf(path, buf, 0) == -1 && errno == EINVAL);
	snprintf(path, sizeof(path), "%s/none", dir);
	buf[0] = 'x';
	CHECK(fileio_read_buf(path, buf, sizeof(buf)) == -1 && errno == ENOENT);
}

/* From where the fd stands, to its end; and a pipe whose writer sends in
 * small pieces is read to its close. */
static void test_read_fd(void)
{
	char path[256], *s;
	size_t len = 0;
	int fd, p[2];
	pid_t child;

	put("fd", "skip:rest", 9, path);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	CHECK(fd >= 0 && lseek(fd, 5, SEEK_SET) == 5);
	s = fileio_read_fd(fd, 64, &len);
	CHECK(s && len == 4 && strcmp(s, "rest") == 0);
	free(s);
	close(fd);
	CHECK(pipe(p) == 0);
	child = fork();
	if (child == 0) {
		close(p[0]);
		for (int i = 0; i < 300; i++)
			if (write(p[1], "0123456789abcdef", 16) != 16)
				_exit(1);
		_exit(0);
	}
	close(p[1]);
	s = fileio_read_fd(p[0], 1 << 20, &len);
	CHECK(s && len == 300 * 16);
	for (size_t i = 0; s && i < len; i += 16)
		CHECK(memcmp(s + i, "0123456789abcdef", 16) == 0);
	free(s);
	close(p[0]);
	CHECK(child > 0 && waitpid(child, NULL, 0) == child);
}

int main(void)
{
	char path[256];

	CHECK(mkdtemp(dir) != NULL);
	test_read();
	test_read_buf();
	test_read_fd();
	for (const char *const *n = (const char *const[]){ "small", "big", "empty", "buf", "fd",
							   NULL };
	     *n; n++) {
		snprintf(path, sizeof(path), "%s/%s", dir, *n);
		unlink(path);
	}
	rmdir(dir);
	CHECK_DONE();
}
