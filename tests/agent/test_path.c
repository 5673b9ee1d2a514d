/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_path.c - unit tests of the pure parts of control-path selection:
 * path_select() (agent/path.c), the capability table (agent/caps.c) and
 * the "controlPath" key of the policy file (agent/config.c). No sockets,
 * no threads, no GPU.
 */
#include <linux/capability.h>
#include <string.h>

#include "abi/gq_proto.h"
#include "agent/core/caps.h"
#include "agent/core/config.h"
#include "agent/core/path.h"
#include "tests/check.h"

#define BIT(c) (1ull << (c))

/* Everything available: the in-process path for timeslice and preempt, the
 * direct path for interleave. */
static struct path_in all_up(enum path_mode mode, enum path_action act)
{
	return (struct path_in){ .mode = mode, .action = act, .peer = 1, .peer_stalled = 0,
				 .direct_caps = 1, .interleave_caps = 1, .direct_running = 1,
				 .direct_stalled = 0, .fd_known = 1 };
}

static void test_auto(void)
{
	struct path_in in = all_up(PATH_MODE_AUTO, ACTION_TIMESLICE);
	struct path_choice ch = path_select(&in);

	CHECK_EQ_U(ch.path, PATH_IN_PROCESS);
	in.action = ACTION_PREEMPT;
	CHECK_EQ_U(path_select(&in).path, PATH_IN_PROCESS);
	/* A non-root workload cannot set interleave itself. */
	in.action = ACTION_INTERLEAVE;
	CHECK_EQ_U(path_select(&in).path, PATH_DIRECT);
	/* ... but without CAP_SYS_NICE the agent cannot either: its own
	 * preempt agent is the only chance (a root workload). */
	in.interleave_caps = 0;
	CHECK_EQ_U(path_select(&in).path, PATH_IN_PROCESS);
	/* No preempt agent: direct. */
	in = all_up(PATH_MODE_AUTO, ACTION_TIMESLICE);
	in.peer = 0;
	CHECK_EQ_U(path_select(&in).path, PATH_DIRECT);
	/* A stalled preempt agent: direct. */
	in.peer = 1;
	in.peer_stalled = 1;
	CHECK_EQ_U(path_select(&in).path, PATH_DIRECT);
	/* Both stalled: none, and it says stalled. */
	in.direct_stalled = 1;
	ch = path_select(&in);
	CHECK_EQ_U(ch.path, PATH_NONE);
	CHECK(ch.stalled && ch.why && strstr(ch.why, "stalled"));
	/* No preempt agent and no CAP_SYS_PTRACE: the capability is named. */
	in = all_up(PATH_MODE_AUTO, ACTION_PREEMPT);
	in.peer = 0;
	in.direct_caps = 0;
	ch = path_select(&in);
	CHECK_EQ_U(ch.path, PATH_NONE);
	CHECK(!ch.stalled && strcmp(ch.why, "direct path needs CAP_SYS_PTRACE") == 0);
	/* fd unknown (the eBPF tracker did not see it): no direct. */
	in = all_up(PATH_MODE_AUTO, ACTION_INTERLEAVE);
	in.fd_known = 0;
	CHECK_EQ_U(path_select(&in).path, PATH_IN_PROCESS);
}

static void test_forced(void)
{
	struct path_in in = all_up(PATH_MODE_IN_PROCESS, ACTION_INTERLEAVE);
	struct path_choice ch;

	CHECK_EQ_U(path_select(&in).path, PATH_IN_PROCESS);
	in.peer_stalled = 1;
	ch = path_select(&in);
	CHECK(ch.path == PATH_NONE && ch.stalled);
	in.peer = 0;
	ch = path_select(&in);
	CHECK(ch.path == PATH_NONE && !ch.stalled &&
	      strcmp(ch.why, "no connected preempt agent") == 0);

	in = all_up(PATH_MODE_DIRECT, ACTION_TIMESLICE);
	CHECK_EQ_U(path_select(&in).path, PATH_DIRECT);
	in.direct_caps = 0;
	ch = path_select(&in);
	CHECK(ch.path == PATH_NONE && strstr(ch.why, "CAP_SYS_PTRACE"));
	in = all_up(PATH_MODE_DIRECT, ACTION_INTERLEAVE);
	in.interleave_caps = 0;
	ch = path_select(&in);
	CHECK(ch.path == PATH_NONE && strstr(ch.why, "CAP_SYS_NICE"));
	/* CAP_SYS_NICE matters for interleave only. */
	in.action = ACTION_PREEMPT;
	CHECK_EQ_U(path_select(&in).path, PATH_DIRECT);
	in.direct_stalled = 1;
	ch = path_select(&in);
	CHECK(ch.path == PATH_NONE && ch.stalled);
	in = all_up(PATH_MODE_DIRECT, ACTION_PREEMPT);
	in.direct_running = 0;
	CHECK_EQ_U(path_select(&in).path, PATH_NONE);
}

static void test_ops(void)
{
	CHECK_EQ_U(op_action(GQ_OP_SET_TIMESLICE), ACTION_TIMESLICE);
	CHECK_EQ_U(op_action(GQ_OP_GET_TIMESLICE), ACTION_TIMESLICE);
	CHECK_EQ_U(op_action(GQ_OP_SET_INTERLEAVE), ACTION_INTERLEAVE);
	CHECK_EQ_U(op_action(GQ_OP_PREEMPT), ACTION_PREEMPT);
	CHECK(strcmp(path_name(PATH_DIRECT), "direct") == 0);
	CHECK(strcmp(path_name(PATH_IN_PROCESS), "in-process") == 0);
	CHECK(strcmp(path_name(PATH_NONE), "none") == 0);
}

static void test_caps(void)
{
	struct caps c = { .known = 1, .eff = BIT(CAP_SYS_PTRACE) | BIT(CAP_SYS_NICE),
			  .ptrace_scope = -1 };
	const struct caps_need *tab;
	char buf[128];
	size_t n;

	tab = caps_table(&n);
	CHECK_EQ_U(n, CAPS_NACTIONS);
	for (size_t i = 0; i < n; i++)
		CHECK_EQ_U(tab[i].action, i); /* rows in enum order */
	CHECK(caps_allows(&c, CAPS_DIRECT));
	CHECK(caps_allows(&c, CAPS_INTERLEAVE));
	CHECK(caps_allows(&c, CAPS_PROC_FD));
	CHECK(!caps_allows(&c, CAPS_ENVIRON)); /* needs a DAC override too */
	CHECK(!caps_allows(&c, CAPS_BPF));
	CHECK(strcmp(caps_missing(&c, CAPS_DIRECT, buf, sizeof(buf)), "") == 0);
	CHECK(strcmp(caps_missing(&c, CAPS_ENVIRON, buf, sizeof(buf)),
		     "CAP_DAC_OVERRIDE or CAP_DAC_READ_SEARCH") == 0);
	CHECK(strcmp(caps_missing(&c, CAPS_BPF, buf, sizeof(buf)), "CAP_PERFMON and CAP_BPF") == 0);
	c.eff = BIT(CAP_SYS_ADMIN);
	CHECK(caps_allows(&c, CAPS_INTERLEAVE)); /* either one */
	CHECK(strcmp(caps_missing(&c, CAPS_DIRECT, buf, sizeof(buf)), "CAP_SYS_PTRACE") == 0);
	c.eff = 0;
	CHECK(strcmp(caps_missing(&c, CAPS_INTERLEAVE, buf, sizeof(buf)),
		     "CAP_SYS_ADMIN or CAP_SYS_NICE") == 0);
	CHECK(strcmp(caps_missing(&c, CAPS_ENVIRON, buf, sizeof(buf)),
		     "CAP_SYS_PTRACE and CAP_DAC_OVERRIDE or CAP_DAC_READ_SEARCH") == 0);
	/* Yama scope 3: nobody may attach, capabilities or not. */
	c.eff = ~0ull;
	c.ptrace_scope = 3;
	CHECK(!caps_allows(&c, CAPS_DIRECT));
	CHECK(strstr(caps_missing(&c, CAPS_DIRECT, buf, sizeof(buf)), "ptrace_scope") != NULL);
	/* An unread set allows nothing. */
	c.known = 0;
	c.ptrace_scope = -1;
	CHECK(!caps_allows(&c, CAPS_INTERLEAVE));
	CHECK(strcmp(caps_name(CAP_SYS_PTRACE, buf, sizeof(buf)), "CAP_SYS_PTRACE") == 0);
	CHECK(strcmp(caps_name(63, buf, sizeof(buf)), "CAP_63") == 0);
}

static void test_config(void)
{
	struct agent_config c;
	char err[512];

	config_defaults(&c);
	for (int i = 0; i < NACTIONS; i++)
		CHECK_EQ_U(c.control_path[i], PATH_MODE_AUTO);
	CHECK(config_parse("{\"version\":1}", &c, err, sizeof(err)) == 0);
	CHECK_EQ_U(c.control_path[ACTION_INTERLEAVE], PATH_MODE_AUTO);
	CHECK(config_parse("{\"version\":1,\"controlPath\":\"direct\"}", &c, err, sizeof(err)) == 0);
	for (int i = 0; i < NACTIONS; i++)
		CHECK_EQ_U(c.control_path[i], PATH_MODE_DIRECT);
	CHECK(config_parse("{\"version\":1,\"controlPath\":{\"interleave\":\"direct\","
			      "\"preempt\":\"in-process\"}}", &c, err, sizeof(err)) == 0);
	CHECK_EQ_U(c.control_path[ACTION_TIMESLICE], PATH_MODE_AUTO);
	CHECK_EQ_U(c.control_path[ACTION_INTERLEAVE], PATH_MODE_DIRECT);
	CHECK_EQ_U(c.control_path[ACTION_PREEMPT], PATH_MODE_IN_PROCESS);
	CHECK(config_parse("{\"version\":1,\"controlPath\":\"both\"}", &c, err, sizeof(err)) != 0);
	CHECK(strstr(err, "field \"controlPath\" must be \"auto\", \"in-process\" or \"direct\", got \"both\""));
	/* The in-process path's old name is refused with its new one. */
	CHECK(config_parse("{\"version\":1,\"controlPath\":\"agent\"}", &c, err, sizeof(err)) != 0);
	CHECK(strstr(err, "\"agent\" is now called \"in-process\""));
	CHECK(config_parse("{\"version\":1,\"controlPath\":{\"timeslise\":\"in-process\"}}", &c, err,
			      sizeof(err)) != 0);
	CHECK(strstr(err, "field \"controlPath\" has unknown key \"timeslise\""));
	CHECK(config_parse("{\"version\":1,\"controlPath\":{\"preempt\":1}}", &c, err,
			      sizeof(err)) != 0);
	CHECK(strstr(err, "field \"controlPath.preempt\" must be a string"));
	CHECK(config_parse("{\"version\":1,\"controlPath\":[]}", &c, err, sizeof(err)) != 0);
	CHECK(strstr(err, "field \"controlPath\" must be a string"));
	CHECK(strcmp(path_mode_name(PATH_MODE_DIRECT), "direct") == 0);
	CHECK(strcmp(action_name(ACTION_INTERLEAVE), "interleave") == 0);
}

int main(void)
{
	test_auto();
	test_forced();
	test_ops();
	test_caps();
	test_config();
	CHECK_DONE();
}
