/* SPDX-License-Identifier: Apache-2.0 */
/*
 * procstat.c - /proc/<pid>/stat's start time and comm (procstat.h).
 */
#include "common/procstat.h"
#include "common/fileio.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* stat: "pid (comm) state ppid ..."; comm may hold spaces and ')', so
 * fields are counted from the last ')'. starttime is field 22. */
int procstat_parse(const char *s, uint64_t *starttime, char *comm, size_t commlen)
{
	const char *open = strchr(s, '('), *close = strrchr(s, ')');
	const char *p;
	int field = 3;

	if (!open || !close || close < open)
		return -1;
	if (comm && commlen) {
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

int procstat_starttime(pid_t pid, uint64_t *starttime)
{
	char path[64], *s;
	size_t len;
	int rc;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	s = fileio_read_head(path, 4096, &len);
	if (!s)
		return -1;
	rc = procstat_parse(s, starttime, NULL, 0);
	free(s);
	if (rc)
		errno = EPROTO;
	return rc;
}
