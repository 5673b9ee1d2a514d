/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cgroup.c - process -> pod from /proc/<pid>/cgroup (see cgroup.h).
 *
 * Owns the parser, the /proc reader and the cgroup v2 id of a path. The
 * parser works on (pointer, length) spans and never assumes a NUL: the text
 * comes from /proc, but the parser is also fed truncated and mutated input
 * by the tests and must refuse it without reading past the end.
 *
 * The shapes it knows (the kubelet names pod cgroups, the runtime names the
 * container cgroup below it):
 *   cgroupfs: .../kubepods[/burstable|/besteffort]/pod<uid>/<container>
 *   systemd:  .../kubepods[-burstable|-besteffort]-pod<uid_>.slice/<container>.scope
 *   container: <64hex> (containerd or Docker, cgroupfs), cri-containerd-<64hex>,
 *              crio-<64hex>, docker-<64hex>; crio-conmon-<64hex> is CRI-O's
 *              monitor process, in the pod but not a container.
 * Anything below the container cgroup (a runtime's sub-cgroup, a process
 * that made its own) belongs to that container.
 */
#include "common/cgroup.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif

struct span {
	const char *p;
	size_t n;
};

/* What one line's path says. */
struct ident {
	enum cgroup_kind kind;
	enum cgroup_runtime runtime;
	enum cgroup_qos qos;
	char uid[CGROUP_UID_LEN + 1];
	char cid[CGROUP_CID_LEN + 1];
	const char *why;
};

static int span_eq(struct span s, const char *lit)
{
	size_t n = strlen(lit);
	return s.n == n && memcmp(s.p, lit, n) == 0;
}

static int span_starts(struct span s, const char *lit)
{
	size_t n = strlen(lit);
	return s.n >= n && memcmp(s.p, lit, n) == 0;
}

static int span_ends(struct span s, const char *lit)
{
	size_t n = strlen(lit);
	return s.n >= n && memcmp(s.p + s.n - n, lit, n) == 0;
}

static struct span span_skip(struct span s, size_t k)
{
	struct span r = { s.p + k, s.n - k };
	return r;
}

static int is_hex(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static char lower(char c)
{
	return (c >= 'A' && c <= 'F') ? (char)(c - 'A' + 'a') : c;
}

/* A pod UID: 8-4-4-4-12 hex with '-' (cgroupfs) or '_' (systemd escapes
 * '-', its hierarchy separator) - one separator throughout - or the 32 hex
 * digits of a static pod's UID (a hash). Written out lower case with '-'. */
static int parse_uid(struct span s, char out[CGROUP_UID_LEN + 1])
{
	static const size_t dash[] = { 8, 13, 18, 23 };
	char sep = 0;
	size_t i, d = 0;

	if (s.n != 32 && s.n != 36)
		return -1;
	for (i = 0; i < s.n; i++) {
		char c = s.p[i];
		if (s.n == 36 && d < 4 && i == dash[d]) {
			if ((c != '-' && c != '_') || (sep && c != sep))
				return -1;
			sep = c;
			out[i] = '-';
			d++;
			continue;
		}
		if (!is_hex(c))
			return -1;
		out[i] = lower(c);
	}
	out[s.n] = '\0';
	return 0;
}

/* Container ids are 64 lower-case hex digits for every runtime we name. */
static int parse_cid(struct span s, char out[CGROUP_CID_LEN + 1])
{
	size_t i;

	if (s.n != CGROUP_CID_LEN)
		return -1;
	for (i = 0; i < s.n; i++) {
		if (!is_hex(s.p[i]) || (s.p[i] >= 'A' && s.p[i] <= 'F'))
			return -1;
	}
	memcpy(out, s.p, s.n);
	out[s.n] = '\0';
	return 0;
}

/* 1 when c is a systemd pod slice (its UID and QoS filled), 0 when it is
 * not one, -1 when it claims to be one but its UID is not valid. The slice
 * name may carry a cgroup-root prefix ("kubelet-kubepods-pod...slice"). */
static int systemd_pod(struct span c, struct ident *id)
{
	static const struct {
		const char *tail;
		enum cgroup_qos qos;
	} forms[] = {
		{ "kubepods-burstable-pod", CGROUP_QOS_BURSTABLE },
		{ "kubepods-besteffort-pod", CGROUP_QOS_BESTEFFORT },
		{ "kubepods-pod", CGROUP_QOS_GUARANTEED },
	};
	struct span stem = { c.p, 0 };
	size_t f;

	if (!span_ends(c, ".slice"))
		return 0;
	stem.n = c.n - strlen(".slice");
	for (f = 0; f < sizeof(forms) / sizeof(forms[0]); f++) {
		const char *t = forms[f].tail;
		size_t tl = strlen(t);
		const char *hit = NULL;
		size_t i;

		/* the UID follows the last occurrence of the form's tail */
		for (i = 0; i + tl <= stem.n; i++)
			if (memcmp(stem.p + i, t, tl) == 0 && (i == 0 || stem.p[i - 1] == '-'))
				hit = stem.p + i;
		if (!hit)
			continue;
		struct span u = { hit + tl, (size_t)(stem.p + stem.n - (hit + tl)) };
		if (parse_uid(u, id->uid) < 0)
			return -1;
		id->qos = forms[f].qos;
		return 1;
	}
	return 0;
}

/* Same for the cgroupfs spelling: "pod<uid>" right below "kubepods" or
 * below its "burstable"/"besteffort" child. */
static int cgroupfs_pod(struct span c, struct span prev, struct span prev2, struct ident *id)
{
	enum cgroup_qos qos;

	if (!span_starts(c, "pod"))
		return 0;
	if (span_eq(prev, "kubepods"))
		qos = CGROUP_QOS_GUARANTEED;
	else if (span_eq(prev2, "kubepods") && span_eq(prev, "burstable"))
		qos = CGROUP_QOS_BURSTABLE;
	else if (span_eq(prev2, "kubepods") && span_eq(prev, "besteffort"))
		qos = CGROUP_QOS_BESTEFFORT;
	else
		return 0;
	if (parse_uid(span_skip(c, 3), id->uid) < 0)
		return -1;
	id->qos = qos;
	return 1;
}

/* The cgroup right below the pod's. Fills kind, runtime and cid. */
static void container_of(struct span c, struct ident *id)
{
	static const struct {
		const char *prefix;
		enum cgroup_runtime rt;
	} forms[] = {
		{ "cri-containerd-", CGROUP_RT_CONTAINERD },
		{ "crio-", CGROUP_RT_CRIO },
		{ "docker-", CGROUP_RT_DOCKER },
		{ "", CGROUP_RT_UNKNOWN },
	};
	size_t f;

	if (span_ends(c, ".scope"))
		c.n -= strlen(".scope");
	id->kind = CGROUP_POD_ONLY;
	if (span_starts(c, "crio-conmon-")) {
		id->why = "CRI-O conmon: in the pod, not a container";
		return;
	}
	for (f = 0; f < sizeof(forms) / sizeof(forms[0]); f++) {
		if (!span_starts(c, forms[f].prefix))
			continue;
		if (parse_cid(span_skip(c, strlen(forms[f].prefix)), id->cid) == 0) {
			id->kind = CGROUP_CONTAINER;
			id->runtime = forms[f].rt;
			id->why = NULL;
			return;
		}
	}
	id->why = "cgroup below the pod is not a container this parser knows";
}

/* Next '/'-separated component of *rest; 0 when none is left. */
static int next_component(struct span *rest, struct span *c)
{
	while (rest->n && rest->p[0] == '/')
		*rest = span_skip(*rest, 1);
	if (!rest->n)
		return 0;
	c->p = rest->p;
	c->n = 0;
	while (c->n < rest->n && rest->p[c->n] != '/')
		c->n++;
	*rest = span_skip(*rest, c->n);
	return 1;
}

static void classify_path(struct span path, struct ident *id)
{
	struct span rest = path, c, prev = { "", 0 }, prev2 = { "", 0 };
	int r;

	memset(id, 0, sizeof(*id));
	id->kind = CGROUP_NOT_POD;
	id->why = "not below a kubepods cgroup";
	while (next_component(&rest, &c)) {
		r = systemd_pod(c, id);
		if (r == 0)
			r = cgroupfs_pod(c, prev, prev2, id);
		if (r < 0) {
			memset(id, 0, sizeof(*id));
			id->kind = CGROUP_MALFORMED;
			id->why = "pod cgroup with an invalid pod UID";
			return;
		}
		if (r > 0) {
			if (next_component(&rest, &c)) {
				container_of(c, id);
			} else {
				id->kind = CGROUP_POD_ONLY;
				id->why = "in the pod's own cgroup, not a container's";
			}
			return;
		}
		prev2 = prev;
		prev = c;
	}
}

/* Splits "id:controllers:path". -1 when the line does not have the kernel's
 * shape: a decimal id, "0" with no controllers for v2, and an absolute path. */
static int split_line(struct span line, unsigned long *hier, struct span *ctrl, struct span *path)
{
	size_t i = 0;
	unsigned long h = 0;

	if (!line.n || line.p[0] < '0' || line.p[0] > '9')
		return -1;
	for (; i < line.n && line.p[i] >= '0' && line.p[i] <= '9'; i++) {
		h = h * 10 + (unsigned long)(line.p[i] - '0');
		if (h > 1000000)
			return -1;
	}
	if (i >= line.n || line.p[i] != ':')
		return -1;
	line = span_skip(line, i + 1);
	ctrl->p = line.p;
	for (ctrl->n = 0; ctrl->n < line.n && line.p[ctrl->n] != ':'; ctrl->n++)
		;
	if (ctrl->n >= line.n)
		return -1;
	*path = span_skip(line, ctrl->n + 1);
	if (!path->n || path->p[0] != '/')
		return -1;
	if ((h == 0) != (ctrl->n == 0))
		return -1;
	/* a removed cgroup still shows, with this suffix, for a dying process */
	if (span_ends(*path, " (deleted)"))
		path->n -= strlen(" (deleted)");
	*hier = h;
	return 0;
}

static enum cgroup_kind refuse(struct cgroup_info *out, const char *why)
{
	enum cgroup_mode mode = out->mode;

	memset(out, 0, sizeof(*out));
	out->kind = CGROUP_MALFORMED;
	out->mode = mode;
	out->why = why;
	return out->kind;
}

/* Folds one line's identity into the result. The v2 line wins over v1
 * lines, a container over a bare pod; lines must not disagree. */
static const char *merge(struct cgroup_info *out, const struct ident *id, int version)
{
	if (id->kind <= CGROUP_NOT_POD)
		return NULL;
	if (out->kind >= CGROUP_POD_ONLY && strcmp(out->pod_uid, id->uid) != 0)
		return "lines name different pods";
	if (out->kind == CGROUP_CONTAINER && id->kind == CGROUP_CONTAINER &&
	    strcmp(out->container_id, id->cid) != 0)
		return "lines name different containers";
	if (out->kind > id->kind || (out->kind == id->kind && out->from_version == 2))
		return NULL;
	out->kind = id->kind;
	out->runtime = id->runtime;
	out->qos = id->qos;
	out->from_version = version;
	out->why = id->why;
	memcpy(out->pod_uid, id->uid, sizeof(out->pod_uid));
	memcpy(out->container_id, id->cid, sizeof(out->container_id));
	return NULL;
}

static void keep_unified(struct cgroup_info *out, struct span path)
{
	if (path.n < sizeof(out->unified_path)) {
		memcpy(out->unified_path, path.p, path.n);
		out->unified_path[path.n] = '\0';
	}
}

enum cgroup_kind cgroup_parse(const char *text, size_t len, struct cgroup_info *out)
{
	struct span rest = { text, len };
	int v1 = 0, v2 = 0;

	memset(out, 0, sizeof(*out));
	out->kind = CGROUP_NOT_POD;
	if (!text || !len)
		return refuse(out, "empty cgroup text");
	if (memchr(text, '\0', len))
		return refuse(out, "NUL byte in cgroup text");
	while (rest.n) {
		const char *nl = memchr(rest.p, '\n', rest.n);
		struct span line = { rest.p, nl ? (size_t)(nl - rest.p) : rest.n }, ctrl, path;
		unsigned long hier;
		struct ident id;
		const char *err;

		rest = span_skip(rest, line.n + (nl ? 1 : 0));
		if (split_line(line, &hier, &ctrl, &path) < 0)
			return refuse(out, "line is not id:controllers:/path");
		if (hier == 0 && v2++)
			return refuse(out, "two cgroup v2 lines");
		v1 += hier != 0;
		out->mode = v1 && v2 ? CGROUP_MODE_HYBRID : v2 ? CGROUP_MODE_V2 : CGROUP_MODE_V1;
		if (hier == 0)
			keep_unified(out, path);
		classify_path(path, &id);
		if (id.kind == CGROUP_MALFORMED)
			return refuse(out, id.why);
		if ((err = merge(out, &id, hier == 0 ? 2 : 1)) != NULL)
			return refuse(out, err);
		if (out->kind == CGROUP_NOT_POD)
			out->why = id.why;
	}
	return out->kind;
}

/* ---- I/O: the only part of this file that touches the system ---- */

/* Reads the whole file into buf (cap bytes); -1 with errno, EFBIG when
 * the file does not fit. /proc files report size 0: read until EOF. */
static ssize_t read_all(const char *path, char *buf, size_t cap)
{
	size_t have = 0;
	ssize_t n;
	int fd, saved;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	while ((n = read(fd, buf + have, cap - have)) > 0 && have + (size_t)n < cap)
		have += (size_t)n;
	saved = errno;
	close(fd);
	if (n < 0) {
		errno = saved;
		return -1;
	}
	if (n > 0) {
		errno = EFBIG;
		return -1;
	}
	return (ssize_t)have;
}

int cgroup_read_file(const char *path, struct cgroup_info *out)
{
	size_t cap = CGROUP_TEXT_MAX + 1; /* one more: a full buffer means too long */
	char *buf = malloc(cap);          /* any thread may call this: no static buffer */
	ssize_t n;
	int saved;

	memset(out, 0, sizeof(*out));
	out->kind = CGROUP_MALFORMED;
	if (!buf) {
		out->why = "out of memory";
		errno = ENOMEM;
		return -1;
	}
	n = read_all(path, buf, cap);
	if (n < 0) {
		saved = errno;
		/* a pid that exited between readdir and open, or mid-read */
		if ((saved == ENOENT && strncmp(path, "/proc/", 6) == 0) || saved == ESRCH)
			saved = ESRCH;
		out->why = saved == ESRCH  ? "process is gone"
			   : saved == EFBIG ? "cgroup text longer than CGROUP_TEXT_MAX"
					    : "cannot read the cgroup file";
		free(buf);
		errno = saved;
		return -1;
	}
	cgroup_parse(buf, (size_t)n, out);
	free(buf);
	return out->kind;
}

int cgroup_read_pid(pid_t pid, struct cgroup_info *out)
{
	char path[64];

	if (pid <= 0) {
		memset(out, 0, sizeof(*out));
		out->kind = CGROUP_MALFORMED;
		out->why = "not a pid";
		errno = EINVAL;
		return -1;
	}
	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
	return cgroup_read_file(path, out);
}

static int is_cgroup2(const char *dir)
{
	struct statfs fs;

	return statfs(dir, &fs) == 0 && (unsigned long)fs.f_type == CGROUP2_SUPER_MAGIC;
}

int cgroup_v2_root(char *buf, size_t len)
{
	static const char *const where[] = { "/sys/fs/cgroup", "/sys/fs/cgroup/unified" };
	size_t i;

	for (i = 0; i < sizeof(where) / sizeof(where[0]); i++) {
		if (!is_cgroup2(where[i]))
			continue;
		if (strlen(where[i]) >= len) {
			errno = ENAMETOOLONG;
			return -1;
		}
		strcpy(buf, where[i]);
		return 0;
	}
	errno = ENOENT;
	return -1;
}

/* Refuses "." and ".." components: the path comes from another process's
 * /proc entry and must not walk out of the cgroup mount. */
static int safe_cgroup_path(const char *path)
{
	struct span rest = { path, strlen(path) }, c;

	if (path[0] != '/')
		return 0;
	while (next_component(&rest, &c))
		if (span_eq(c, ".") || span_eq(c, ".."))
			return 0;
	return 1;
}

int cgroup_inode_of_path(const char *root, const char *path, uint64_t *id)
{
	char full[CGROUP_PATH_MAX + 256];
	struct stat st;
	int n;

	if (!root || !path || !safe_cgroup_path(path)) {
		errno = EINVAL;
		return -1;
	}
	if (!is_cgroup2(root)) {
		errno = EXDEV;
		return -1;
	}
	n = snprintf(full, sizeof(full), "%s%s", root, path);
	if (n < 0 || (size_t)n >= sizeof(full)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	if (stat(full, &st) < 0)
		return -1;
	if (!S_ISDIR(st.st_mode)) {
		errno = ENOTDIR;
		return -1;
	}
	*id = (uint64_t)st.st_ino;
	return 0;
}

const char *cgroup_kind_name(enum cgroup_kind k)
{
	switch (k) {
	case CGROUP_MALFORMED: return "malformed";
	case CGROUP_NOT_POD: return "not-pod";
	case CGROUP_POD_ONLY: return "pod-only";
	case CGROUP_CONTAINER: return "container";
	}
	return "?";
}

const char *cgroup_runtime_name(enum cgroup_runtime r)
{
	switch (r) {
	case CGROUP_RT_UNKNOWN: return "unknown";
	case CGROUP_RT_CONTAINERD: return "containerd";
	case CGROUP_RT_CRIO: return "cri-o";
	case CGROUP_RT_DOCKER: return "docker";
	}
	return "?";
}

const char *cgroup_qos_name(enum cgroup_qos q)
{
	switch (q) {
	case CGROUP_QOS_NONE: return "none";
	case CGROUP_QOS_GUARANTEED: return "guaranteed";
	case CGROUP_QOS_BURSTABLE: return "burstable";
	case CGROUP_QOS_BESTEFFORT: return "besteffort";
	}
	return "?";
}

const char *cgroup_mode_name(enum cgroup_mode m)
{
	switch (m) {
	case CGROUP_MODE_V1: return "v1";
	case CGROUP_MODE_V2: return "v2";
	case CGROUP_MODE_HYBRID: return "hybrid";
	}
	return "?";
}
