/* SPDX-License-Identifier: Apache-2.0 */
/*
 * musl_probe.c - a program built against musl (musl-gcc), run with the
 * preempt library preloaded by test_libc.py: what it prints must not
 * change. It uses what the library interposes: dlsym (RTLD_DEFAULT and
 * RTLD_NEXT), ioctl and close.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <unistd.h>

int main(void)
{
	void *def = dlsym(RTLD_DEFAULT, "strlen");
	void *next = dlsym(RTLD_NEXT, "strlen");
	size_t (*len)(const char *) = (size_t (*)(const char *))def;
	int fd = open("/dev/null", O_RDONLY);
	int n = -1, rc;

	/* FIONREAD on /dev/null: the kernel's answer (an error), passed on. */
	rc = fd >= 0 ? ioctl(fd, FIONREAD, &n) : -2;
	printf("dlsym default %s next %s strlen %zu\n", def ? "found" : "missing",
	       next ? "found" : "missing", len ? len("gpuqos") : (size_t)0);
	printf("ioctl %d close %d\n", rc < 0 ? -1 : 0, fd >= 0 ? close(fd) : -2);
	return def && next ? 0 : 3;
}
