/* SPDX-License-Identifier: Apache-2.0 */
/*
 * configfile.c - reads the standalone policy file and hands its text to
 * the core's parser (config_parse_file(), agent/core/config.c).
 *
 * Owns: the open and the read, what the file may be (a regular file, at
 * most CONFIG_MAX_BYTES), and the sentences for a file that cannot be read.
 * Does not own what the text means, nor when the file is (re)read
 * (main.c: at start and on SIGHUP).
 */
#include "agent/io/configfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fileio.h"

__attribute__((format(printf, 4, 5))) static int fail(char *err, size_t errlen, const char *path,
						      const char *fmt, ...)
{
	va_list ap;
	int n;

	if (!err || !errlen)
		return -1;
	n = snprintf(err, errlen, "policy file %s: ", path);
	if (n < 0 || (size_t)n >= errlen)
		return -1;
	va_start(ap, fmt);
	vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
	va_end(ap);
	return -1;
}

int config_load(const char *path, struct agent_config *out, char *err, size_t errlen)
{
	struct stat sb;
	size_t len = 0;
	char *text;
	int fd, rc;

	if (!path || !*path || strlen(path) >= sizeof(out->path))
		return config_parse_file(path, "", 0, out, err, errlen); /* its sentence */
	/* O_NONBLOCK: a FIFO planted at the path must not hold the open. */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return fail(err, errlen, path, "cannot be opened: %s", strerror(errno));
	if (fstat(fd, &sb) < 0) {
		int e = errno;

		close(fd);
		return fail(err, errlen, path, "cannot be examined: %s", strerror(e));
	}
	if (!S_ISREG(sb.st_mode)) {
		close(fd);
		return fail(err, errlen, path, "is not a regular file");
	}
	text = fileio_read_fd(fd, CONFIG_MAX_BYTES, &len);
	if (!text) {
		int e = errno;

		close(fd);
		if (e == EFBIG)
			return fail(err, errlen, path, "is larger than %d bytes", CONFIG_MAX_BYTES);
		return fail(err, errlen, path, "cannot be read: %s", strerror(e));
	}
	close(fd);
	rc = config_parse_file(path, text, len, out, err, errlen);
	free(text);
	return rc;
}
