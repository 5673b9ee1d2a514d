/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core_fixture.c - the fixture of the core's unit tests (core_fixture.h):
 * the fake clock, the recording hooks, and the agent, processes, reports
 * and answers the tests build their cases from.
 */
#include "tests/agent/core_fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint64_t fake_now = 1000000000ull;

static uint64_t fake_clock(void)
{
	return fake_now;
}

struct sent sent[MAX_SENT];
size_t nsent;
size_t npolicy;
uint32_t last_gr[8], last_wake[8];
size_t policy_nsent[8];

void core_fixture_start(void)
{
	log_set_level(LOG_LEVEL_ERROR);
	core_clock_install(fake_clock);
}

static int submit_in_process(struct agent *a, struct cmd *c)
{
	(void)a;
	if (nsent < MAX_SENT)
		sent[nsent++] = (struct sent){ PATH_IN_PROCESS, c->pid, c->h_tsg, c->op, c->seq, c->arg };
	return 0;
}

int submit_direct(struct agent *a, const struct tsg *t, struct cmd *c)
{
	(void)a;
	(void)t;
	if (nsent < MAX_SENT)
		sent[nsent++] = (struct sent){ PATH_DIRECT, c->pid, c->h_tsg, c->op, c->seq, c->arg };
	return 0;
}

static int send_policy(struct agent *a, struct peer *p, uint32_t gr, uint32_t copy, uint32_t wake)
{
	(void)a;
	p->policy_valid = 1;
	p->policy_gr = gr;
	p->policy_copy = copy;
	npolicy++;
	p->policy_wake = wake;
	if (p->pid >= 1 && p->pid < 8) {
		last_gr[p->pid] = gr;
		last_wake[p->pid] = wake;
		policy_nsent[p->pid] = nsent;
	}
	return 0;
}

struct agent *agent_new(void)
{
	struct agent *a = calloc(1, sizeof(*a));

	a->cfg = calloc(1, sizeof(*a->cfg));
	config_defaults(a->cfg);
	a->cfg->trust_run_class = 1;
	a->cfg->default_class = CLASS_UNMANAGED;
	a->cfg->control_deadline_ms = 1000;
	a->cfg->verify_interval_s = 0; /* test_verify turns the read-backs on */
	/* no state file: without the state hooks state.c writes nothing */
	a->hooks.submit_in_process = submit_in_process;
	a->hooks.send_policy = send_policy;
	a->started_us = fake_now - 10000000ull; /* long after any restart grace */
	nsent = 0;
	npolicy = 0;
	memset(last_gr, 0, sizeof(last_gr));
	memset(last_wake, 0, sizeof(last_wake));
	memset(policy_nsent, 0, sizeof(policy_nsent));
	return a;
}

void agent_free(struct agent *a)
{
	cmd_free_all(a);
	while (a->peers) {
		struct peer *p = a->peers;

		a->peers = p->next;
		free(p);
	}
	proc_free_all(a);
	state_free_all(a);
	pods_free(a);
	free(a->cfg);
	free(a);
}

struct proc *proc_with_peer(struct agent *a, pid_t pid, const char *cls)
{
	struct procinfo pi;
	struct peer *p = calloc(1, sizeof(*p));
	struct proc *pr;

	memset(&pi, 0, sizeof(pi));
	pi.starttime = 100 + (uint64_t)pid;
	snprintf(pi.comm, sizeof(pi.comm), "w%d", (int)pid);
	snprintf(pi.run_class, sizeof(pi.run_class), "%s", cls);
	pr = proc_attach(a, pid, &pi);
	p->pid = pid;
	p->proc = pr;
	p->hello = 1;
	p->next = a->peers;
	a->peers = p;
	pr->peer = p;
	pr->uid = uid_use_get(a, 1000);
	return pr;
}

struct tsg *report(struct agent *a, struct proc *p, rm_handle h_tsg, uint32_t engine, uint32_t ts)
{
	return report_flags(a, p, h_tsg, engine, ts, 0);
}

struct tsg *report_flags(struct agent *a, struct proc *p, rm_handle h_tsg, uint32_t engine,
			 uint32_t ts, uint32_t flags)
{
	struct gq_tsg m;

	memset(&m, 0, sizeof(m));
	m.h_client = 0xc1d00000u + (uint32_t)p->pid;
	m.h_tsg = h_tsg;
	m.h_device = 0x5c000001;
	m.device_instance = 0;
	m.engine_type = engine;
	m.fd = 3;
	m.timeslice_us = ts;
	m.app_timeslice_us = 2048;
	m.interleave = GQ_UNKNOWN;
	m.flags = flags;
	return tsg_upsert(a, p, &m, 1);
}

void answer(struct agent *a, size_t i, uint32_t rm_status, uint64_t value)
{
	struct gq_result r;
	struct proc *p = proc_find(a, sent[i].pid);

	memset(&r, 0, sizeof(r));
	r.hdr.seq = sent[i].seq;
	r.op = sent[i].op;
	r.h_client = 0xc1d00000u + (uint32_t)sent[i].pid;
	r.h_tsg = sent[i].h_tsg;
	r.rm_status = rm_status;
	r.value = value;
	cmd_result(a, p->peer, &r);
}

void confirm_all(struct agent *a, size_t from)
{
	for (size_t i = from; i < nsent; i++)
		if (sent[i].op == GQ_OP_GET_TIMESLICE)
			answer(a, i, RM_OK, 2048);
}

size_t count(uint32_t op, pid_t pid, uint64_t arg)
{
	size_t n = 0;

	for (size_t i = 0; i < nsent; i++)
		n += sent[i].op == op && sent[i].pid == pid && sent[i].arg == arg;
	return n;
}

struct agent *be_beside_lc_verify(struct tsg **tb, struct tsg **tl, uint32_t verify_s)
{
	struct agent *a = agent_new();
	struct proc *be = proc_with_peer(a, 1, "best-effort");
	struct proc *lc = proc_with_peer(a, 2, "latency-critical");

	a->cfg->verify_interval_s = verify_s;
	*tb = report(a, be, 0x10, RM_ENGINE_GR0, 2048);
	*tl = report(a, lc, 0x20, RM_ENGINE_GR0, 2048);
	reconcile(a);
	confirm_all(a, 0);
	reconcile(a);
	for (size_t i = 0; i < nsent; i++)
		if (sent[i].op == GQ_OP_SET_TIMESLICE)
			answer(a, i, RM_OK, sent[i].arg);
	reconcile(a);
	return a;
}

struct agent *be_beside_lc(struct tsg **tb, struct tsg **tl)
{
	return be_beside_lc_verify(tb, tl, 0);
}

size_t last_sent(uint32_t op, pid_t pid, size_t from)
{
	size_t at = nsent;

	for (size_t i = from; i < nsent; i++)
		if (sent[i].op == op && sent[i].pid == pid)
			at = i;
	return at;
}

void answer_all(struct agent *a, size_t from)
{
	for (size_t i = from; i < nsent; i++)
		answer(a, i, RM_OK, sent[i].op == GQ_OP_GET_TIMESLICE ? 2048 : sent[i].arg);
}

