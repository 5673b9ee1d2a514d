// SPDX-License-Identifier: Apache-2.0
/*
 * rm_latency.c - the cost of one RM ioctl, for measuring what the eBPF
 * tracer adds to every RM call on the node. Opens the control device,
 * allocates its own RM client and times two calls: the RM's no-op control
 * (NV0000_CTRL_CMD_NULL on the client) and a client alloc + free pair (the
 * tracer's heaviest path: decode, live-table insert and delete).
 *
 * Usage: rm_latency [--dev /dev/nvidiactl] [--iters 20000]
 * Prints one JSON line: medians and p99 in nanoseconds.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "abi/rm_abi.h"

static unsigned long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

static int cmp_ull(const void *a, const void *b)
{
	unsigned long long x = *(const unsigned long long *)a, y = *(const unsigned long long *)b;

	return x < y ? -1 : x > y;
}

static rm_handle alloc_client(int fd)
{
	struct rm_alloc64_params p;

	memset(&p, 0, sizeof(p));
	p.hClass = RM_CLASS_ROOT_CLIENT;
	if (ioctl(fd, RM_IOCTL_ALLOC64, &p) != 0 || p.status != RM_OK) {
		fprintf(stderr, "rm_latency: client alloc: %s, status 0x%x\n", strerror(errno), p.status);
		return 0;
	}
	return p.hObjectNew;
}

static int free_client(int fd, rm_handle h)
{
	struct rm_free_params f = {.hRoot = h, .hObjectParent = h, .hObjectOld = h};

	return ioctl(fd, RM_IOCTL_FREE, &f) == 0 && f.status == RM_OK ? 0 : -1;
}

static void report(const char *name, unsigned long long *v, int n, int last)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_ull);
	printf("\"%s_p50_ns\":%llu,\"%s_p99_ns\":%llu%s", name, v[n / 2], name, v[(n * 99) / 100],
	       last ? "" : ",");
}

int main(int argc, char **argv)
{
	const char *dev = "/dev/nvidiactl";
	int iters = 20000, fd, fails = 0;
	unsigned long long *ctl, *pair;
	rm_handle client;

	for (int i = 1; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "--dev") == 0)
			dev = argv[i + 1];
		else if (strcmp(argv[i], "--iters") == 0)
			iters = atoi(argv[i + 1]);
	}
	if (iters < 100)
		iters = 100;
	fd = open(dev, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "rm_latency: open %s: %s\n", dev, strerror(errno));
		return 1;
	}
	client = alloc_client(fd);
	ctl = calloc((size_t)iters, sizeof(*ctl));
	pair = calloc((size_t)iters / 10, sizeof(*pair));
	if (!client || !ctl || !pair)
		return 1;
	for (int i = 0; i < iters; i++) {
		struct rm_control_params c = {.hClient = client, .hObject = client, .cmd = 0};
		unsigned long long t0 = now_ns();

		if (ioctl(fd, RM_IOCTL_CONTROL, &c) != 0 || c.status != RM_OK)
			fails++;
		ctl[i] = now_ns() - t0;
	}
	for (int i = 0; i < iters / 10; i++) {
		unsigned long long t0 = now_ns();
		rm_handle h = alloc_client(fd);

		if (!h || free_client(fd, h) != 0)
			fails++;
		pair[i] = now_ns() - t0;
	}
	printf("{\"workload\":\"rm_latency\",\"iters\":%d,\"failed\":%d,", iters, fails);
	report("null_control", ctl, iters, 0);
	report("client_alloc_free", pair, iters / 10, 1);
	printf("}\n");
	free_client(fd, client);
	close(fd);
	return fails ? 1 : 0;
}
