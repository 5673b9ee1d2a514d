/* SPDX-License-Identifier: Apache-2.0 */
/*
 * caps.c - the one table of which capability each privileged action needs
 * (see caps.h and docs/privileges.md) and the words for what is missing.
 * Pure: reading the effective set is agent/io/capsread.c's. Does not own
 * any action.
 */
#include "agent/core/caps.h"

#include <linux/capability.h>
#include <stdio.h>
#include <string.h>

#ifndef CAP_PERFMON
#define CAP_PERFMON 38
#endif
#ifndef CAP_BPF
#define CAP_BPF 39
#endif

#define BIT(c) (1ull << (c))

/* Why each row says what it says (kernel sources, Linux 6.x):
 * - pidfd_getfd: ptrace_may_access(PTRACE_MODE_ATTACH_REALCREDS); for a
 *   process of another user or with more capabilities only CAP_SYS_PTRACE
 *   passes, and Yama scope 2 asks for it even for our own children.
 * - SET_INTERLEAVE_LEVEL: the RM checks CAP_SYS_NICE or CAP_SYS_ADMIN in
 *   the calling task (measured: status 0x1b without them).
 * - /proc/<pid>/fd and environ: PTRACE_MODE_READ_FSCREDS; environ is also
 *   mode 0400 of its owner, so DAC_READ_SEARCH or DAC_OVERRIDE is needed
 *   for another user's process.
 * - BPF: CAP_BPF to load, CAP_PERFMON for the tracing helpers and attach. */
static const struct caps_need table[CAPS_NACTIONS] = {
	{ CAPS_DIRECT, "direct", "duplicate a process's control-device fd (pidfd_getfd)",
	  BIT(CAP_SYS_PTRACE), 0 },
	{ CAPS_INTERLEAVE, "interleave", "SET_INTERLEAVE_LEVEL issued by the node agent", 0,
	  BIT(CAP_SYS_NICE) | BIT(CAP_SYS_ADMIN) },
	{ CAPS_PROC_FD, "procFd", "check another user's /proc/<pid>/fd links",
	  BIT(CAP_SYS_PTRACE), 0 },
	{ CAPS_ENVIRON, "environ", "read another user's /proc/<pid>/environ",
	  BIT(CAP_SYS_PTRACE), BIT(CAP_DAC_READ_SEARCH) | BIT(CAP_DAC_OVERRIDE) },
	{ CAPS_BPF, "bpf", "load and attach the eBPF tracker", BIT(CAP_BPF) | BIT(CAP_PERFMON), 0 },
};

const struct caps_need *caps_table(size_t *n)
{
	*n = CAPS_NACTIONS;
	return table;
}

int caps_allows(const struct caps *c, enum caps_action a)
{
	const struct caps_need *n;

	if ((unsigned)a >= CAPS_NACTIONS || !c->known)
		return 0;
	n = &table[a];
	if (a == CAPS_DIRECT && c->ptrace_scope == 3)
		return 0;
	if ((c->eff & n->all) != n->all)
		return 0;
	return n->any == 0 || (c->eff & n->any) != 0;
}

static const char *const names[] = {
	[CAP_CHOWN] = "CAP_CHOWN", [CAP_DAC_OVERRIDE] = "CAP_DAC_OVERRIDE",
	[CAP_DAC_READ_SEARCH] = "CAP_DAC_READ_SEARCH", [CAP_SYS_PTRACE] = "CAP_SYS_PTRACE",
	[CAP_SYS_ADMIN] = "CAP_SYS_ADMIN", [CAP_SYS_NICE] = "CAP_SYS_NICE",
	[CAP_PERFMON] = "CAP_PERFMON", [CAP_BPF] = "CAP_BPF",
};

const char *caps_name(unsigned cap, char *buf, size_t n)
{
	if (cap < sizeof(names) / sizeof(names[0]) && names[cap])
		snprintf(buf, n, "%s", names[cap]);
	else
		snprintf(buf, n, "CAP_%u", cap);
	return buf;
}

/* Appends the names of the bits in mask to buf, joined by sep. */
static void append_caps(char *buf, size_t n, uint64_t mask, const char *sep)
{
	char one[32];
	int first = 1;

	for (unsigned cap = 0; cap < 64; cap++) {
		size_t used = strlen(buf);

		if (!(mask & BIT(cap)))
			continue;
		snprintf(buf + used, n - used, "%s%s", first ? "" : sep,
			 caps_name(cap, one, sizeof(one)));
		first = 0;
	}
}

const char *caps_missing(const struct caps *c, enum caps_action a, char *buf, size_t n)
{
	const struct caps_need *need;
	uint64_t lack;

	if (!n)
		return buf;
	buf[0] = '\0';
	if ((unsigned)a >= CAPS_NACTIONS || caps_allows(c, a))
		return buf;
	need = &table[a];
	if (a == CAPS_DIRECT && c->ptrace_scope == 3) {
		snprintf(buf, n, "kernel.yama.ptrace_scope below 3 (it is 3: no process may attach)");
		return buf;
	}
	lack = c->known ? need->all & ~c->eff : need->all;
	append_caps(buf, n, lack, " and ");
	if (need->any && (!c->known || !(c->eff & need->any))) {
		size_t used = strlen(buf);

		if (used)
			snprintf(buf + used, n - used, " and ");
		append_caps(buf, n, need->any, " or ");
	}
	return buf;
}
