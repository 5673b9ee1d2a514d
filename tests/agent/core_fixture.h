/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core_fixture.h - what every unit test of the node agent's core
 * (tests/agent/test_core_*.c) stands on: a fake clock installed as the
 * core's clock, an agent with hooks that record what the core submits,
 * processes with connected preempt agents, their TSG reports and the
 * RESULTs they answer. Checks stay in the test files (tests/check.h
 * counts failures per file): nothing here asserts.
 */
#ifndef GPUQOS_TESTS_AGENT_CORE_FIXTURE_H
#define GPUQOS_TESTS_AGENT_CORE_FIXTURE_H

#include "agent/core/core.h"

#include <stddef.h>
#include <stdint.h>

/* The core's time (core_now_us) in every test: moved on by the tests. */
extern uint64_t fake_now;

/* What the core submitted, in order; agent_new empties it. */
#define MAX_SENT 65536
struct sent {
	enum path path;
	pid_t pid;
	rm_handle h_tsg;
	uint32_t op, seq;
	uint64_t arg;
};
extern struct sent sent[MAX_SENT];
extern size_t nsent;
/* POLICY messages sent, and for pids 1..7 the last one's values. */
extern size_t npolicy;
extern uint32_t last_gr[8], last_wake[8];
extern size_t policy_nsent[8]; /* commands submitted when pid's last POLICY went */

/* Logs only errors and installs the fake clock: first thing in main. */
void core_fixture_start(void);

/* An agent whose control paths record into sent[] (the in-process path;
 * a test that wants the direct one sets hooks.submit_direct itself), with
 * the configuration's defaults, run classes trusted and no state file,
 * started long before fake_now (past any restart grace). */
struct agent *agent_new(void);
void agent_free(struct agent *a);
int submit_direct(struct agent *a, const struct tsg *t, struct cmd *c);

/* A process with a connected preempt agent of the given class. */
struct proc *proc_with_peer(struct agent *a, pid_t pid, const char *cls);
/* The preempt agent's report of a TSG of p on GPU 0 at timeslice ts
 * (report_flags: with these GQ_TSG_F_* flags). */
struct tsg *report_flags(struct agent *a, struct proc *p, rm_handle h_tsg, uint32_t engine,
			 uint32_t ts, uint32_t flags);
struct tsg *report(struct agent *a, struct proc *p, rm_handle h_tsg, uint32_t engine,
		   uint32_t ts);

/* Answers submitted command i (a RESULT from its preempt agent). */
void answer(struct agent *a, size_t i, uint32_t rm_status, uint64_t value);
/* Answers every GET_TIMESLICE sent from index from on with NV_OK. */
void confirm_all(struct agent *a, size_t from);
/* Answers every command sent from index from on with NV_OK. */
void answer_all(struct agent *a, size_t from);
/* The commands of op with arg sent for pid. */
size_t count(uint32_t op, pid_t pid, uint64_t arg);
/* The index of the last command of op sent for pid, or nsent if none
 * since `from`. */
size_t last_sent(uint32_t op, pid_t pid, size_t from);

/* A BE (pid 1, TSG 0x10) and an LC (pid 2, TSG 0x20), both confirmed and
 * converged at the policy's values; reads back every verify_s seconds. */
struct agent *be_beside_lc_verify(struct tsg **tb, struct tsg **tl, uint32_t verify_s);
struct agent *be_beside_lc(struct tsg **tb, struct tsg **tl);

#endif
