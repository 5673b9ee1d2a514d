/* SPDX-License-Identifier: Apache-2.0 */
/*
 * preemptlib.c - installs and resolves the preempt agent's library on the
 * host (preemptlib.h). Every step that others can observe is a rename: a
 * versioned directory appears complete or not at all, and `current`
 * switches from one complete directory to another.
 */
#include "common/preemptlib.h"
#include "common/sha256.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

__attribute__((format(printf, 3, 4))) static int fail(char *err, size_t errlen, const char *fmt,
						       ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -1;
}

/* The whole source file, at most PREEMPTLIB_MAX_BYTES. */
static uint8_t *read_src(const char *src, size_t *len, char *err, size_t errlen)
{
	int fd = open(src, O_RDONLY | O_CLOEXEC);
	struct stat st;
	uint8_t *buf = NULL;
	size_t got = 0;

	if (fd < 0) {
		fail(err, errlen, "open %s: %s", src, strerror(errno));
		return NULL;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size <= 0 ||
	    (uint64_t)st.st_size > PREEMPTLIB_MAX_BYTES) {
		fail(err, errlen, "%s: not a regular file of 1 to %u bytes", src, PREEMPTLIB_MAX_BYTES);
		goto out;
	}
	buf = malloc((size_t)st.st_size);
	if (!buf) {
		fail(err, errlen, "%s: out of memory", src);
		goto out;
	}
	while (got < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);
		if (n <= 0) {
			fail(err, errlen, "read %s: %s", src, n ? strerror(errno) : "file shrank");
			free(buf);
			buf = NULL;
			goto out;
		}
		got += (size_t)n;
	}
	*len = got;
out:
	close(fd);
	return buf;
}

static int write_file(const char *path, const void *data, size_t len, mode_t mode, char *err,
		      size_t errlen)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
	size_t done = 0;

	if (fd < 0)
		return fail(err, errlen, "create %s: %s", path, strerror(errno));
	while (done < len) {
		ssize_t n = write(fd, (const char *)data + done, len - done);
		if (n < 0) {
			fail(err, errlen, "write %s: %s", path, strerror(errno));
			close(fd);
			return -1;
		}
		done += (size_t)n;
	}
	/* the mode without the umask: containers of any uid read it */
	if (fchmod(fd, mode) < 0 || fsync(fd) < 0) {
		fail(err, errlen, "fsync %s: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	if (close(fd) < 0)
		return fail(err, errlen, "close %s: %s", path, strerror(errno));
	return 0;
}

static int sync_dir(const char *dir, char *err, size_t errlen)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		return fail(err, errlen, "open %s: %s", dir, strerror(errno));
	if (fsync(fd) < 0) {
		fail(err, errlen, "fsync %s: %s", dir, strerror(errno));
		close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

static void remove_tmp(const char *tmp)
{
	char p[PATH_MAX + 64];

	snprintf(p, sizeof(p), "%s/%s", tmp, PREEMPTLIB_LIB_NAME);
	unlink(p);
	snprintf(p, sizeof(p), "%s/ld.so.preload", tmp);
	unlink(p);
	rmdir(tmp);
}

/* A complete versioned directory named name, made under a temporary name
 * and renamed into place. An existing one with that name is the same
 * content (the name carries its hash) and is kept. */
static int make_version(const char *dir, const char *name, const uint8_t *data, size_t len,
			char *err, size_t errlen)
{
	char tmp[PATH_MAX], final[PATH_MAX], p[PATH_MAX + 64];
	static const char preload[] = PREEMPTLIB_CONTAINER_LIB "\n";
	struct stat st;

	snprintf(final, sizeof(final), "%s/%s", dir, name);
	if (stat(final, &st) == 0 && S_ISDIR(st.st_mode))
		return 0;
	snprintf(tmp, sizeof(tmp), "%s/.tmp-%s-%ld", dir, name, (long)getpid());
	remove_tmp(tmp); /* a leftover of an earlier crash with our pid */
	if (mkdir(tmp, 0755) < 0)
		return fail(err, errlen, "mkdir %s: %s", tmp, strerror(errno));
	if (chmod(tmp, 0755) < 0) {
		fail(err, errlen, "chmod %s: %s", tmp, strerror(errno));
		goto bad;
	}
	snprintf(p, sizeof(p), "%s/%s", tmp, PREEMPTLIB_LIB_NAME);
	if (write_file(p, data, len, 0755, err, errlen) < 0)
		goto bad;
	snprintf(p, sizeof(p), "%s/ld.so.preload", tmp);
	if (write_file(p, preload, sizeof(preload) - 1, 0644, err, errlen) < 0 ||
	    sync_dir(tmp, err, errlen) < 0)
		goto bad;
	if (rename(tmp, final) < 0) {
		if ((errno == EEXIST || errno == ENOTEMPTY) && stat(final, &st) == 0) {
			remove_tmp(tmp); /* another installer won the race with the same content */
			return 0;
		}
		fail(err, errlen, "rename %s to %s: %s", tmp, final, strerror(errno));
		goto bad;
	}
	return sync_dir(dir, err, errlen);
bad:
	remove_tmp(tmp);
	return -1;
}

static int switch_current(const char *dir, const char *name, char *err, size_t errlen)
{
	char tmp[PATH_MAX], cur[PATH_MAX];

	snprintf(tmp, sizeof(tmp), "%s/.current-%ld", dir, (long)getpid());
	snprintf(cur, sizeof(cur), "%s/current", dir);
	unlink(tmp);
	if (symlink(name, tmp) < 0)
		return fail(err, errlen, "symlink %s: %s", tmp, strerror(errno));
	if (rename(tmp, cur) < 0) {
		fail(err, errlen, "rename %s to %s: %s", tmp, cur, strerror(errno));
		unlink(tmp);
		return -1;
	}
	return sync_dir(dir, err, errlen);
}

static int valid_version(const char *v)
{
	if (!v[0] || strlen(v) > 64 || v[0] == '.')
		return 0;
	for (; *v; v++)
		if (!((*v >= 'a' && *v <= 'z') || (*v >= 'A' && *v <= 'Z') || (*v >= '0' && *v <= '9') ||
		      *v == '.' || *v == '-' || *v == '_' || *v == '+'))
			return 0;
	return 1;
}

int preemptlib_install(const char *src, const char *dir, const char *version, char *name,
		       size_t namelen, char *err, size_t errlen)
{
	uint8_t sum[32];
	char vname[128];
	uint8_t *data;
	size_t len = 0;
	int rc;

	if (!valid_version(version))
		return fail(err, errlen, "version \"%s\": want 1 to 64 of [A-Za-z0-9._+-]", version);
	if (dir[0] != '/' || strlen(dir) > PATH_MAX - 128)
		return fail(err, errlen, "%s: want an absolute directory path", dir);
	if (mkdir(dir, 0755) < 0 && errno != EEXIST)
		return fail(err, errlen, "mkdir %s: %s", dir, strerror(errno));
	data = read_src(src, &len, err, errlen);
	if (!data)
		return -1;
	sha256_digest(data, len, sum);
	snprintf(vname, sizeof(vname), "%s-%02x%02x%02x%02x%02x%02x", version, sum[0], sum[1], sum[2],
		 sum[3], sum[4], sum[5]);
	rc = make_version(dir, vname, data, len, err, errlen);
	free(data);
	if (rc == 0)
		rc = switch_current(dir, vname, err, errlen);
	if (rc == 0 && name)
		snprintf(name, namelen, "%s", vname);
	return rc;
}

int preemptlib_resolve(const char *dir, char *out, size_t outlen, int *have_preload)
{
	char cur[PATH_MAX], target[NAME_MAX + 1], p[PATH_MAX + NAME_MAX + 32];
	struct stat st;
	ssize_t n;

	snprintf(cur, sizeof(cur), "%s/current", dir);
	n = readlink(cur, target, sizeof(target) - 1);
	if (n <= 0)
		return -1;
	target[n] = '\0';
	/* only a sibling directory we made: never a path out of dir */
	if (strchr(target, '/') || target[0] == '.')
		return -1;
	snprintf(p, sizeof(p), "%s/%s/%s", dir, target, PREEMPTLIB_LIB_NAME);
	if (stat(p, &st) < 0 || !S_ISREG(st.st_mode))
		return -1;
	if ((size_t)snprintf(out, outlen, "%s/%s", dir, target) >= outlen)
		return -1;
	snprintf(p, sizeof(p), "%s/%s/ld.so.preload", dir, target);
	*have_preload = stat(p, &st) == 0 && S_ISREG(st.st_mode);
	return 0;
}
