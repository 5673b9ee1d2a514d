/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nonrm_ioctls.c - a program that issues many ioctls that are not NVIDIA RM
 * calls (TCGETS on a pipe fails with ENOTTY; FIONREAD on a pipe succeeds),
 * for checking that the preempt agent adds no system call to them.
 */
#include <stdio.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

int main(void)
{
	struct termios t;
	int p[2], n, ok = 0;

	if (pipe(p) != 0)
		return 1;
	for (int i = 0; i < 5000; i++) {
		ok += ioctl(p[0], FIONREAD, &n) == 0;
		ok += ioctl(p[0], TCGETS, &t) == 0;
	}
	printf("%d\n", ok);
	return ok == 5000 ? 0 : 1;
}
