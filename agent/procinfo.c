/* SPDX-License-Identifier: Apache-2.0 */
/*
 * procinfo.c - facts about a host process read from /proc/<pid>: start
 * time, comm, exe, cgroup path (and the pod UID and container id it
 * names), GPUQOS_RUN_CLASS, and where an fd points.
 * Owns no state; does not decide what the facts mean (tsg.c classifies).
 */
#include "agent/agent.h"
#include "agent/kubenode/cgroup.h"
#include "common/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ENVIRON_MAX (1u << 20)

/* Reads a whole small /proc file into a malloc'd, NUL-terminated buffer. */
static char *read_file(const char *path, size_t max, size_t *len)
{
	size_t cap = 4096, n = 0;
	char *buf = malloc(cap + 1);
	int fd;

	if (!buf)
		return NULL;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		free(buf);
		return NULL;
	}
	for (;;) {
		ssize_t r;

		if (n == cap) {
			char *nb = cap >= max ? NULL : realloc(buf, cap * 2 + 1);

			if (!nb)
				break; /* truncated: enough for what we look for */
			buf = nb;
			cap *= 2;
		}
		r = read(fd, buf + n, cap - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	buf[n] = '\0';
	*len = n;
	return buf;
}

/* stat: "pid (comm) state ppid ..."; comm may hold spaces and ')', so
 * fields are counted from the last ')'. starttime is field 22. */
static int parse_stat(const char *s, uint64_t *starttime, char *comm, size_t commlen)
{
	const char *open = strchr(s, '('), *close = strrchr(s, ')');
	const char *p;
	int field = 3;

	if (!open || !close || close < open)
		return -1;
	if (comm) {
		size_t n = (size_t)(close - open - 1);

		if (n >= commlen)
			n = commlen - 1;
		memcpy(comm, open + 1, n);
		comm[n] = '\0';
	}
	p = close + 2;
	while (field < 22 && (p = strchr(p, ' ')) != NULL) {
		p++;
		field++;
	}
	if (!p)
		return -1;
	*starttime = strtoull(p, NULL, 10);
	return 0;
}

int procinfo_starttime(pid_t pid, uint64_t *starttime)
{
	char path[64], *s;
	size_t len;
	int rc;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	s = read_file(path, 4096, &len);
	if (!s)
		return -1;
	rc = parse_stat(s, starttime, NULL, 0);
	free(s);
	return rc;
}

/* The pod and container of a process, from the same text the cgroup
 * path came from (cgroup.h parses every spelling and refuses ambiguity). */
static void cgroup_identity(const char *text, size_t len, struct procinfo *pi)
{
	struct cgroup_info ci;

	if (cgroup_parse(text, len, &ci) < CGROUP_POD_ONLY)
		return;
	snprintf(pi->pod_uid, sizeof(pi->pod_uid), "%s", ci.pod_uid);
	if (ci.kind == CGROUP_CONTAINER)
		snprintf(pi->container_id, sizeof(pi->container_id), "%s", ci.container_id);
}

/* cgroup v2 has one "0::/path" line; on v1 (or hybrid hosts without the
 * process in the v2 tree) the first line's path is as good as any. */
static void read_cgroup(pid_t pid, struct procinfo *pi)
{
	char path[64], *s, *line, *save = NULL, *first = NULL;
	char *out = pi->cgroup;
	size_t len, outlen = sizeof(pi->cgroup);

	out[0] = '\0';
	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
	s = read_file(path, CGROUP_TEXT_MAX, &len);
	if (!s)
		return;
	cgroup_identity(s, len, pi);
	for (line = strtok_r(s, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (!first)
			first = line;
		if (strncmp(line, "0::", 3) == 0) {
			snprintf(out, outlen, "%s", line + 3);
			free(s);
			return;
		}
	}
	if (first) {
		char *p = strchr(first, ':');

		p = p ? strchr(p + 1, ':') : NULL;
		snprintf(out, outlen, "%s", p ? p + 1 : "");
	}
	free(s);
}

static void read_run_class(pid_t pid, char *out, size_t outlen)
{
	static const char key[] = "GPUQOS_RUN_CLASS=";
	char path[64], *s;
	size_t len, i = 0;

	out[0] = '\0';
	snprintf(path, sizeof(path), "/proc/%d/environ", (int)pid);
	s = read_file(path, ENVIRON_MAX, &len);
	if (!s)
		return;
	while (i < len) {
		const char *e = s + i;
		size_t elen = strnlen(e, len - i);

		if (strncmp(e, key, sizeof(key) - 1) == 0)
			snprintf(out, outlen, "%s", e + sizeof(key) - 1);
		i += elen + 1;
	}
	free(s);
}

int procinfo_read(pid_t pid, struct procinfo *pi)
{
	char path[64], *s;
	size_t len;
	ssize_t n;
	int rc;

	memset(pi, 0, sizeof(*pi));
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	s = read_file(path, 4096, &len);
	if (!s)
		return -1;
	rc = parse_stat(s, &pi->starttime, pi->comm, sizeof(pi->comm));
	free(s);
	if (rc != 0)
		return -1;
	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
	n = readlink(path, pi->exe, sizeof(pi->exe) - 1);
	pi->exe[n > 0 ? n : 0] = '\0';
	read_cgroup(pid, pi);
	read_run_class(pid, pi->run_class, sizeof(pi->run_class));
	return 0;
}

int procinfo_fd_is(pid_t pid, uint32_t fd, const char *want)
{
	char path[64], target[4096];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/fd/%u", (int)pid, fd);
	n = readlink(path, target, sizeof(target) - 1);
	if (n < 0)
		return 0;
	target[n] = '\0';
	return strcmp(target, want) == 0;
}
