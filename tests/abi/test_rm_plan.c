/* SPDX-License-Identifier: Apache-2.0 */
/* The op -> RM control plan (abi/rm_plan.h) both command paths issue:
 * each op's control code and parameter block against the RM facts of
 * abi/rm_abi.h (ctrla06c.h, driver 580), every byte of the block, the
 * ranges of each arg, and the value a RESULT carries. */
#include <string.h>

#include "abi/rm_plan.h"
#include "tests/check.h"

/* A plan whose every byte is garbage: rm_plan_of must leave none of it. */
static void dirty(struct rm_plan *p)
{
	memset(p, 0xa5, sizeof(*p));
}

static int block_is_zero_after(const struct rm_plan *p, size_t from)
{
	const unsigned char *b = (const unsigned char *)&p->params;

	for (size_t i = from; i < sizeof(p->params); i++)
		if (b[i] != 0)
			return 0;
	return 1;
}

static void test_set_timeslice(void)
{
	struct rm_plan p;

	dirty(&p);
	CHECK_EQ_U(rm_plan_of(GQ_OP_SET_TIMESLICE, 50, &p), 0);
	CHECK_EQ_U(p.cmd, RM_CTRL_TSG_SET_TIMESLICE);
	CHECK_EQ_U(p.cmd, 0xa06c0103u); /* NVA06C_CTRL_CMD_SET_TIMESLICE */
	CHECK_EQ_U(p.params_size, sizeof(struct rm_tsg_timeslice));
	CHECK_EQ_U(p.params_size, 8);
	CHECK_EQ_U(p.params.timeslice.timesliceUs, 50);
	CHECK(block_is_zero_after(&p, sizeof(struct rm_tsg_timeslice)));
	CHECK_EQ_U(rm_plan_value(GQ_OP_SET_TIMESLICE, 50, &p), 50);
	/* The largest a RESULT can report: GQ_UNKNOWN is reserved. */
	CHECK_EQ_U(rm_plan_of(GQ_OP_SET_TIMESLICE, GQ_UNKNOWN - 1, &p), 0);
	CHECK_EQ_U(p.params.timeslice.timesliceUs, GQ_UNKNOWN - 1);
	CHECK_EQ_U(rm_plan_of(GQ_OP_SET_TIMESLICE, GQ_UNKNOWN, &p), GQ_ERR_BAD_OP);
	CHECK_EQ_U(rm_plan_of(GQ_OP_SET_TIMESLICE, 1ull << 40, &p), GQ_ERR_BAD_OP);
	CHECK_EQ_U(rm_plan_of(GQ_OP_SET_TIMESLICE, 0, &p), 0);
	CHECK_EQ_U(p.params.timeslice.timesliceUs, 0);
}

static void test_get_timeslice(void)
{
	struct rm_plan p;

	dirty(&p);
	/* The arg is unused: any value plans the same read. */
	CHECK_EQ_U(rm_plan_of(GQ_OP_GET_TIMESLICE, 12345, &p), 0);
	CHECK_EQ_U(p.cmd, RM_CTRL_TSG_GET_TIMESLICE);
	CHECK_EQ_U(p.cmd, 0xa06c0104u); /* NVA06C_CTRL_CMD_GET_TIMESLICE */
	CHECK_EQ_U(p.params_size, 8);
	CHECK(block_is_zero_after(&p, 0));
	p.params.timeslice.timesliceUs = 777; /* as RM writes it back */
	CHECK_EQ_U(rm_plan_value(GQ_OP_GET_TIMESLICE, 12345, &p), 777);
}

static void test_set_interleave(void)
{
	struct rm_plan p;

	for (rm_u64 a = RM_INTERLEAVE_LOW; a <= RM_INTERLEAVE_HIGH; a++) {
		dirty(&p);
		CHECK_EQ_U(rm_plan_of(GQ_OP_SET_INTERLEAVE, a, &p), 0);
		CHECK_EQ_U(p.cmd, RM_CTRL_TSG_SET_INTERLEAVE);
		CHECK_EQ_U(p.cmd, 0xa06c0107u); /* NVA06C_CTRL_CMD_SET_INTERLEAVE_LEVEL */
		CHECK_EQ_U(p.params_size, sizeof(struct rm_tsg_interleave));
		CHECK_EQ_U(p.params_size, 4);
		CHECK_EQ_U(p.params.interleave.tsgInterleaveLevel, a);
		CHECK(block_is_zero_after(&p, sizeof(struct rm_tsg_interleave)));
		CHECK_EQ_U(rm_plan_value(GQ_OP_SET_INTERLEAVE, a, &p), a);
	}
	CHECK_EQ_U(rm_plan_of(GQ_OP_SET_INTERLEAVE, RM_INTERLEAVE_HIGH + 1, &p), GQ_ERR_BAD_OP);
	CHECK_EQ_U(rm_plan_of(GQ_OP_SET_INTERLEAVE, 1ull << 32, &p), GQ_ERR_BAD_OP);
}

static void test_preempt(void)
{
	const unsigned char *b;
	struct rm_plan p;

	for (rm_u64 a = 0; a <= 1; a++) {
		dirty(&p);
		CHECK_EQ_U(rm_plan_of(GQ_OP_PREEMPT, a, &p), 0);
		CHECK_EQ_U(p.cmd, RM_CTRL_TSG_PREEMPT);
		CHECK_EQ_U(p.cmd, 0xa06c0105u); /* NVA06C_CTRL_CMD_PREEMPT */
		CHECK_EQ_U(p.params_size, sizeof(struct rm_tsg_preempt));
		CHECK_EQ_U(p.params_size, 8);
		/* bWait from bit 0; no manual timeout: RM's own. Every other
		 * byte (the padding before timeoutUs included) is zero. */
		b = (const unsigned char *)&p.params;
		CHECK_EQ_U(b[0], a);
		CHECK_EQ_U(p.params.preempt.bWait, a);
		CHECK_EQ_U(p.params.preempt.bManualTimeout, 0);
		CHECK_EQ_U(p.params.preempt.timeoutUs, 0);
		CHECK(block_is_zero_after(&p, 1));
		CHECK_EQ_U(rm_plan_value(GQ_OP_PREEMPT, a, &p), a);
	}
	CHECK_EQ_U(rm_plan_of(GQ_OP_PREEMPT, 2, &p), GQ_ERR_BAD_OP);
	CHECK_EQ_U(rm_plan_of(GQ_OP_PREEMPT, 3, &p), GQ_ERR_BAD_OP);
}

static void test_refused(void)
{
	const rm_u32 ops[] = { 0, GQ_OP_GATE, GQ_OP_UNGATE, GQ_OP_MAX + 1, 0xffffffffu };
	struct rm_plan p;

	/* GATE and UNGATE are two controls on two objects (preempt_gate.c):
	 * no single plan; unknown ops have none either. Nothing is left to
	 * issue by mistake: the plan is all zero. */
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		dirty(&p);
		CHECK_EQ_U(rm_plan_of(ops[i], 1, &p), GQ_ERR_BAD_OP);
		CHECK_EQ_U(p.cmd, 0);
		CHECK_EQ_U(p.params_size, 0);
		CHECK(block_is_zero_after(&p, 0));
	}
}

/* Every control planned is one rm_tsg_ctrl_params_size knows, and its
 * block fits the union. */
static void test_sizes_agree(void)
{
	struct rm_plan p;

	for (rm_u32 op = 1; op <= GQ_OP_MAX; op++) {
		if (rm_plan_of(op, 0, &p) != 0)
			continue;
		CHECK(p.params_size != 0);
		CHECK_EQ_U(p.params_size, rm_tsg_ctrl_params_size(p.cmd));
		CHECK(p.params_size <= sizeof(p.params));
		CHECK_EQ_U(p.cmd >> 16, 0xa06cu); /* a TSG (KEPLER_CHANNEL_GROUP_A) control */
	}
}

int main(void)
{
	test_set_timeslice();
	test_get_timeslice();
	test_set_interleave();
	test_preempt();
	test_refused();
	test_sizes_agree();
	CHECK_DONE();
}
