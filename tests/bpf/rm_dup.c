// SPDX-License-Identifier: Apache-2.0
/*
 * rm_dup.c - the RM calls the tracer tests need and fakecuda does not make:
 * a client whose device and TSG are made on a dup()'d fd with paramsSize 0
 * (libcuda's NVOS64 habit), both TSG controls on the two fds, an explicit
 * TSG free, and a control issued from another process through
 * pidfd_getfd() (the node agent's direct path).
 *
 * Owns: the call sequence. Does not own: the expectations (test_tsgtrace.py).
 *
 *   rm_dup owner DEV WAITFILE     prints {"pid","fd","fd2","client","device","tsg"},
 *                                 holds until WAITFILE exists, frees, exits
 *   rm_dup foreign PID FD CLIENT TSG US
 *                                 SET_TIMESLICE US on PID's TSG through a duplicate
 *                                 of its fd FD; prints {"status"}
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "abi/rm_abi.h"

#define DEVICE_HANDLE 0x5c000001u
#define TSG_HANDLE 0x5c000010u

static void die(const char *what, int err, rm_u32 status)
{
	fprintf(stderr, "rm_dup: %s: %s, status 0x%02x %s\n", what, err ? strerror(err) : "ok",
		status, rm_status_name(status));
	exit(1);
}

static rm_handle alloc64(int fd, rm_handle root, rm_handle parent, rm_handle hnew, rm_u32 cls,
			 void *params)
{
	/* paramsSize 0: the RM (and the tracer) take the size from the class. */
	struct rm_alloc64_params p = { .hRoot = root, .hObjectParent = parent, .hObjectNew = hnew,
				       .hClass = cls, .pAllocParms = (rm_u64)(uintptr_t)params };

	if (ioctl(fd, RM_IOCTL_ALLOC64, &p) != 0)
		die("alloc", errno, 0);
	if (p.status != RM_OK)
		die("alloc", 0, p.status);
	return p.hObjectNew;
}

static rm_u32 control(int fd, rm_handle client, rm_handle obj, rm_u32 cmd, void *params,
		      rm_u32 size)
{
	struct rm_control_params p = { .hClient = client, .hObject = obj, .cmd = cmd,
				       .params = (rm_u64)(uintptr_t)params, .paramsSize = size };

	if (ioctl(fd, RM_IOCTL_CONTROL, &p) != 0)
		die("control", errno, 0);
	return p.status;
}

static void rm_free(int fd, rm_handle client, rm_handle parent, rm_handle obj)
{
	struct rm_free_params p = { .hRoot = client, .hObjectParent = parent, .hObjectOld = obj };

	if (ioctl(fd, RM_IOCTL_FREE, &p) != 0)
		die("free", errno, 0);
	if (p.status != RM_OK)
		die("free", 0, p.status);
}

static int owner(const char *dev, const char *waitfile)
{
	struct rm_device_alloc da = { .deviceId = 0 };
	struct rm_tsg_alloc ta = { .engineType = RM_ENGINE_GR0 };
	struct rm_tsg_timeslice ts = { .timesliceUs = 5000 };
	struct rm_tsg_interleave il = { .tsgInterleaveLevel = RM_INTERLEAVE_HIGH };
	struct timespec tick = { 0, 10 * 1000 * 1000 };
	rm_handle client;
	rm_u32 st;
	int fd, fd2;

	fd = open(dev, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		die(dev, errno, 0);
	client = alloc64(fd, 0, 0, 0, RM_CLASS_ROOT_CLIENT, NULL);
	fd2 = dup(fd);
	if (fd2 < 0)
		die("dup", errno, 0);
	alloc64(fd2, client, client, DEVICE_HANDLE, RM_CLASS_DEVICE, &da);
	alloc64(fd2, client, DEVICE_HANDLE, TSG_HANDLE, RM_CLASS_TSG, &ta);
	st = control(fd2, client, TSG_HANDLE, RM_CTRL_TSG_SET_TIMESLICE, &ts, sizeof(ts));
	if (st != RM_OK)
		die("SET_TIMESLICE", 0, st);
	st = control(fd, client, TSG_HANDLE, RM_CTRL_TSG_SET_INTERLEAVE, &il, sizeof(il));
	if (st != RM_OK)
		die("SET_INTERLEAVE_LEVEL", 0, st);
	printf("{\"pid\":%d,\"fd\":%d,\"fd2\":%d,\"client\":\"0x%08x\",\"device\":\"0x%08x\","
	       "\"tsg\":\"0x%08x\"}\n",
	       (int)getpid(), fd, fd2, client, DEVICE_HANDLE, TSG_HANDLE);
	fflush(stdout);
	while (access(waitfile, F_OK) != 0)
		nanosleep(&tick, NULL);
	rm_free(fd2, client, DEVICE_HANDLE, TSG_HANDLE);
	rm_free(fd, client, 0, client);
	close(fd2);
	close(fd);
	return 0;
}

static int foreign(pid_t pid, int tfd, rm_handle client, rm_handle tsg, rm_u64 us)
{
	struct rm_tsg_timeslice ts = { .timesliceUs = us };
	int pidfd, fd;
	rm_u32 st;

	pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pidfd < 0)
		die("pidfd_open", errno, 0);
	fd = (int)syscall(SYS_pidfd_getfd, pidfd, tfd, 0);
	if (fd < 0)
		die("pidfd_getfd", errno, 0);
	st = control(fd, client, tsg, RM_CTRL_TSG_SET_TIMESLICE, &ts, sizeof(ts));
	/* Close at once: the duplicate would keep the owner's client alive. */
	close(fd);
	close(pidfd);
	printf("{\"pid\":%d,\"status\":\"0x%02x\"}\n", (int)getpid(), st);
	return st == RM_OK ? 0 : 1;
}

int main(int argc, char **argv)
{
	if (argc == 4 && strcmp(argv[1], "owner") == 0)
		return owner(argv[2], argv[3]);
	if (argc == 7 && strcmp(argv[1], "foreign") == 0)
		return foreign((pid_t)atoi(argv[2]), atoi(argv[3]),
			       (rm_handle)strtoul(argv[4], NULL, 0),
			       (rm_handle)strtoul(argv[5], NULL, 0),
			       (rm_u64)strtoull(argv[6], NULL, 0));
	fprintf(stderr, "usage: rm_dup owner DEV WAITFILE | rm_dup foreign PID FD CLIENT TSG US\n");
	return 2;
}
