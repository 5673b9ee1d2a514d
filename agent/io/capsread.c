/* SPDX-License-Identifier: Apache-2.0 */
/*
 * capsread.c - what the agent holds: the calling thread's effective
 * capability set (capget(2)) and the Yama ptrace scope, read once at start
 * (caps_read, io.h). What each action needs is the core's table (caps.c).
 */
#include "agent/io/io.h"
#include "common/fileio.h"

#include <linux/capability.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static int read_ptrace_scope(void)
{
	char buf[16];

	if (fileio_read_buf("/proc/sys/kernel/yama/ptrace_scope", buf, sizeof(buf)) <= 0)
		return -1; /* no Yama */
	return buf[0] >= '0' && buf[0] <= '3' ? buf[0] - '0' : -1;
}

int caps_read(struct caps *c)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];

	memset(c, 0, sizeof(*c));
	memset(data, 0, sizeof(data));
	c->ptrace_scope = read_ptrace_scope();
	if (syscall(SYS_capget, &hdr, data) != 0)
		return -1;
	c->eff = (uint64_t)data[0].effective | ((uint64_t)data[1].effective << 32);
	c->known = 1;
	return 0;
}

