/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_policy.c - policy_decide() and its defaults, limits and class names,
 * checked against the rules of docs/policy.md. No GPU, no I/O.
 */
#include <string.h>

#include "abi/rm_abi.h"
#include "agent/core/policy.h"
#include "tests/check.h"

#define GR RM_ENGINE_GR0
#define CE 11u /* a copy engine type a CUDA context uses on an H200 */

static struct policy_tsg_in tsg(uint32_t gpu, uint32_t engine, enum qos_class cls,
				uint32_t baseline)
{
	struct policy_tsg_in t = { .gpu = gpu, .engine_type = engine, .cls = cls,
				   .baseline_timeslice_us = baseline };
	return t;
}

static void decide(const struct policy_config *cfg, const struct policy_tsg_in *in, size_t n,
		   struct policy_tsg_out *out)
{
	/* Poison so a TSG the policy forgot to decide shows up. */
	memset(out, 0xa5, n * sizeof(*out));
	policy_decide(cfg, in, n, out);
}

static void test_defaults(void)
{
	struct policy_config c;
	char err[160];

	policy_config_defaults(&c);
	CHECK_EQ_U(c.lc_timeslice_us, 100000);
	CHECK_EQ_U(c.be_timeslice_us, 50);
	CHECK_EQ_U(c.several_be_timeslice_us, 1000);
	CHECK(c.several_be_timeslice_us >= POLICY_SEVERAL_BE_SAFE_MIN_US);
	CHECK_EQ_U(c.several_be, POLICY_SEVERAL_BE_ROTATE);
	CHECK_EQ_U(c.rotate_period_ms, 250);
	CHECK_EQ_U(c.gate_lease_ms, 500);
	CHECK(c.lc_interleave == POLICY_INTERLEAVE_LEAVE);
	CHECK(c.be_interleave == POLICY_INTERLEAVE_LEAVE);
	CHECK_EQ_U(c.manage_copy, 0);
	CHECK(policy_config_validate(&c, 0, err, sizeof(err)) == 0);
}

static void test_validate(void)
{
	struct policy_config d, c;
	char err[160];

	policy_config_defaults(&d);
	c = d;
	c.be_timeslice_us = 0;
	CHECK(policy_config_validate(&c, 0, err, sizeof(err)) == -1);
	CHECK(strstr(err, "be_timeslice_us") != NULL);
	c = d;
	c.lc_timeslice_us = POLICY_TIMESLICE_MAX_US + 1;
	CHECK(policy_config_validate(&c, 1, err, sizeof(err)) == -1);
	c.lc_timeslice_us = POLICY_TIMESLICE_MAX_US;
	CHECK(policy_config_validate(&c, 0, err, sizeof(err)) == 0);
	c = d;
	c.several_be_timeslice_us = 499;
	CHECK(policy_config_validate(&c, 0, err, sizeof(err)) == -1);
	CHECK(strstr(err, "several_be_timeslice_us") != NULL);
	CHECK(policy_config_validate(&c, 1, err, sizeof(err)) == 0);
	c.several_be_timeslice_us = 500;
	CHECK(policy_config_validate(&c, 0, err, sizeof(err)) == 0);
	c = d;
	c.be_timeslice_us = 20; /* operators may choose the measured 20 us */
	CHECK(policy_config_validate(&c, 0, err, sizeof(err)) == 0);
	c.be_interleave = 3;
	CHECK(policy_config_validate(&c, 0, err, sizeof(err)) == -1);
	CHECK(strstr(err, "be_interleave") != NULL);
	c = d;
	c.lc_interleave = -2;
	CHECK(policy_config_validate(&c, 0, err, sizeof(err)) == -1);
	c = d;
	c.several_be = (enum policy_several_be)7;
	CHECK(policy_config_validate(&c, 0, err, sizeof(err)) == -1);
	c = d;
	c.rotate_period_ms = POLICY_ROTATE_PERIOD_MIN_MS - 1;
	CHECK(policy_config_validate(&c, 0, err, sizeof(err)) == -1);
	CHECK(strstr(err, "rotate_period_ms") != NULL);
	c = d;
	c.gate_lease_ms = POLICY_GATE_LEASE_MAX_MS + 1;
	CHECK(policy_config_validate(&c, 0, err, sizeof(err)) == -1);
	CHECK(strstr(err, "gate_lease_ms") != NULL);
	c = d;
	c.rotate_period_ms = 300; /* the default lease, 500 ms, is not twice that */
	CHECK(policy_config_validate(&c, 0, err, sizeof(err)) == -1);
	CHECK(strstr(err, "twice") != NULL);
	c.gate_lease_ms = 600;
	CHECK(policy_config_validate(&c, 0, err, sizeof(err)) == 0);
	c = d;
	c.busy_lc_percent = 101;
	CHECK(policy_config_validate(&c, 0, err, sizeof(err)) == -1);
	CHECK(strstr(err, "busy_lc_percent") != NULL);
	CHECK_EQ_U(d.busy_lc_percent, 50);
	c = d;
	CHECK_EQ_U(c.wake_lead_us, 100);
	CHECK_EQ_U(c.wake_hold_us, 0);
	c.wake_lead_us = POLICY_WAKE_MAX_US + 1;
	CHECK(policy_config_validate(&c, 0, err, sizeof(err)) == -1);
	CHECK(strstr(err, "wake_lead_us") != NULL);
	c.wake_lead_us = POLICY_WAKE_MAX_US;
	c.wake_hold_us = POLICY_WAKE_MAX_US + 1;
	CHECK(policy_config_validate(&c, 0, err, sizeof(err)) == -1);
	CHECK(strstr(err, "wake_hold_us") != NULL);
	c.wake_hold_us = 60;
	CHECK(policy_config_validate(&c, 0, err, sizeof(err)) == 0);
	c.wake_lead_us = 0;
	CHECK(policy_config_validate(&c, 0, err, sizeof(err)) == -1);
	CHECK(strstr(err, "wake_hold_us") != NULL);
}

/* Wakes go to an LC beside a BE at lcUs and nowhere else. */
static void test_wake(const struct policy_config *dflt)
{
	struct policy_config c = *dflt;
	struct policy_tsg_in in[] = { tsg(0, GR, CLASS_LC, 2048), tsg(0, GR, CLASS_BE, 2048),
				      tsg(1, GR, CLASS_LC, 2048), tsg(2, CE, CLASS_LC, 1024),
				      tsg(2, CE, CLASS_BE, 1024) };
	struct policy_tsg_out out[5];

	c.wake_lead_us = 0;
	decide(&c, in, 5, out);
	for (int i = 0; i < 5; i++)
		CHECK_EQ_U(out[i].wake, 0); /* no lead: nobody */
	c.wake_lead_us = 100;
	decide(&c, in, 5, out);
	CHECK_EQ_U(out[0].wake, 1);
	CHECK_EQ_U(out[1].wake, 0); /* a BE */
	CHECK_EQ_U(out[2].wake, 0); /* an LC alone */
	CHECK_EQ_U(out[3].wake, 0); /* copy engines are not managed */
	in[0].lc_busy = 1;
	decide(&c, in, 5, out);
	CHECK_EQ_U(out[0].wake, 0); /* launch-bound: the driver's values */
}

static void test_be_alone(const struct policy_config *cfg)
{
	struct policy_tsg_in in[] = { tsg(0, GR, CLASS_BE, 2048) };
	struct policy_tsg_out out[1];

	decide(cfg, in, 1, out);
	CHECK_EQ_U(out[0].timeslice_us, 2048);
	CHECK(out[0].interleave == POLICY_INTERLEAVE_LEAVE);
	CHECK(strcmp(out[0].reason, "no LC on this runlist: baseline") == 0);
}

static void test_lc_and_be(const struct policy_config *cfg)
{
	struct policy_tsg_in in[] = { tsg(0, GR, CLASS_LC, 2048), tsg(0, GR, CLASS_BE, 2048) };
	struct policy_tsg_out out[2];

	decide(cfg, in, 2, out);
	CHECK_EQ_U(out[0].timeslice_us, 100000);
	CHECK_EQ_U(out[1].timeslice_us, 50);
	CHECK(out[0].interleave == POLICY_INTERLEAVE_LEAVE);
	CHECK(out[1].interleave == POLICY_INTERLEAVE_LEAVE);
	CHECK(strcmp(out[0].reason, "LC beside a BE") == 0);
	CHECK(strcmp(out[1].reason, "sole BE beside an LC") == 0);
}

static void test_other_gpu(const struct policy_config *cfg)
{
	struct policy_tsg_in in[] = { tsg(1, GR, CLASS_LC, 2048), tsg(0, GR, CLASS_BE, 2048) };
	struct policy_tsg_out out[2];

	decide(cfg, in, 2, out);
	CHECK_EQ_U(out[1].timeslice_us, 2048);
	CHECK(strcmp(out[1].reason, "no LC on this runlist: baseline") == 0);
	/* The LC has no BE beside it either. */
	CHECK_EQ_U(out[0].timeslice_us, 2048);
	CHECK(strcmp(out[0].reason, "no BE on this runlist: baseline") == 0);
}

static void test_other_runlist(const struct policy_config *cfg)
{
	/* GR1 is a different runlist from GR0 on the same GPU. */
	struct policy_tsg_in in[] = { tsg(0, GR + 1, CLASS_LC, 2048),
				      tsg(0, GR, CLASS_BE, 2048) };
	struct policy_tsg_out out[2];

	decide(cfg, in, 2, out);
	CHECK_EQ_U(out[1].timeslice_us, 2048);
	CHECK_EQ_U(out[0].timeslice_us, 2048);
}

static void test_lc_leaves(const struct policy_config *cfg)
{
	struct policy_tsg_in in[] = { tsg(0, GR, CLASS_BE, 2048), tsg(0, GR, CLASS_LC, 2048) };
	struct policy_tsg_out out[2];

	decide(cfg, in, 2, out);
	CHECK_EQ_U(out[0].timeslice_us, 50);
	/* The LC's TSG is gone: the next decision sees only the BE. */
	decide(cfg, in, 1, out);
	CHECK_EQ_U(out[0].timeslice_us, 2048);
	CHECK(strcmp(out[0].reason, "no LC on this runlist: baseline") == 0);
}

static void test_several_lc(const struct policy_config *cfg)
{
	struct policy_tsg_in in[] = { tsg(0, GR, CLASS_LC, 2048), tsg(0, GR, CLASS_LC, 2048),
				      tsg(0, GR, CLASS_BE, 2048) };
	struct policy_tsg_out out[3];

	decide(cfg, in, 3, out);
	CHECK_EQ_U(out[0].timeslice_us, 100000);
	CHECK_EQ_U(out[1].timeslice_us, 100000);
	CHECK_EQ_U(out[2].timeslice_us, 50);
}

static void test_several_be(const struct policy_config *dflt)
{
	struct policy_tsg_in in[] = { tsg(0, GR, CLASS_LC, 2048), tsg(0, GR, CLASS_BE, 2048),
				      tsg(0, GR, CLASS_BE, 3000), tsg(0, GR, CLASS_BE, 2048) };
	struct policy_config cfg = *dflt;
	struct policy_tsg_out out[4];

	/* Rotation by default, but no BE here can be gated: the floor. */
	decide(&cfg, in, 4, out);
	CHECK_EQ_U(out[0].timeslice_us, 100000);
	for (int i = 1; i < 4; i++) {
		CHECK_EQ_U(out[i].timeslice_us, 1000);
		CHECK_EQ_U(out[i].rotate, 0);
		CHECK(strcmp(out[i].reason,
			     "several BEs beside an LC, not all can be gated: safe floor") == 0);
	}
	/* Every BE gateable: all at the sole-BE value, taking turns. */
	for (int i = 0; i < 4; i++)
		in[i].gateable = 1;
	decide(&cfg, in, 4, out);
	CHECK_EQ_U(out[0].timeslice_us, 100000);
	CHECK_EQ_U(out[0].rotate, 0);
	for (int i = 1; i < 4; i++) {
		CHECK_EQ_U(out[i].timeslice_us, 50);
		CHECK_EQ_U(out[i].rotate, 1);
		CHECK(strcmp(out[i].reason,
			     "several BEs beside an LC: one schedulable at a time, rotated") == 0);
	}
	/* One of them cannot be gated: nobody rotates. */
	in[2].gateable = 0;
	decide(&cfg, in, 4, out);
	for (int i = 1; i < 4; i++) {
		CHECK_EQ_U(out[i].timeslice_us, 1000);
		CHECK_EQ_U(out[i].rotate, 0);
	}
	in[2].gateable = 1;
	/* A sole gateable BE is never rotated: nothing to take turns with. */
	decide(&cfg, in, 2, out);
	CHECK_EQ_U(out[1].timeslice_us, 50);
	CHECK_EQ_U(out[1].rotate, 0);
	cfg.several_be = POLICY_SEVERAL_BE_FLOOR;
	decide(&cfg, in, 4, out);
	for (int i = 1; i < 4; i++) {
		CHECK_EQ_U(out[i].timeslice_us, 1000);
		CHECK_EQ_U(out[i].rotate, 0);
		CHECK(strcmp(out[i].reason, "several BEs beside an LC: safe floor") == 0);
	}
	cfg.several_be = POLICY_SEVERAL_BE_LEAVE;
	decide(&cfg, in, 4, out);
	CHECK_EQ_U(out[0].timeslice_us, 100000);
	CHECK_EQ_U(out[1].timeslice_us, 2048);
	CHECK_EQ_U(out[2].timeslice_us, 3000);
	CHECK(strcmp(out[1].reason, "several BEs beside an LC: left at baseline") == 0);
	cfg.several_be = POLICY_SEVERAL_BE_FLOOR;
	cfg.several_be_timeslice_us = 700;
	decide(&cfg, in, 4, out);
	CHECK_EQ_U(out[3].timeslice_us, 700);
}

/* A launch-bound LC leaves every BE on its runlist at baseline: shorter
 * BE slices cost the BE more than that LC gains. */
static void test_busy_lc(const struct policy_config *dflt)
{
	struct policy_config c = *dflt, *cfg = &c;
	struct policy_tsg_in in[] = { tsg(0, GR, CLASS_LC, 2048), tsg(0, GR, CLASS_BE, 2048),
				      tsg(0, GR, CLASS_BE, 3000), tsg(1, GR, CLASS_LC, 2048),
				      tsg(1, GR, CLASS_BE, 2048) };
	struct policy_tsg_out out[5];

	c.busy_lc_percent = 90;
	for (int i = 0; i < 5; i++)
		in[i].gateable = 1;
	in[0].lc_busy = 1; /* GPU 0's LC only */
	decide(cfg, in, 5, out);
	CHECK_EQ_U(out[0].timeslice_us, 2048); /* the launch-bound LC too */
	CHECK(strstr(out[0].reason, "launch-bound LC") != NULL);
	CHECK_EQ_U(out[3].timeslice_us, 100000); /* GPU 1's LC is not */
	CHECK_EQ_U(out[1].timeslice_us, 2048);
	CHECK_EQ_U(out[2].timeslice_us, 3000);
	CHECK_EQ_U(out[1].rotate, 0);
	CHECK(strstr(out[1].reason, "launch-bound LC") != NULL);
	CHECK_EQ_U(out[4].timeslice_us, 50); /* GPU 1 is not affected */
	/* Where not every BE can be gated: baseline too, not the floor. */
	in[2].gateable = 0;
	decide(cfg, in, 5, out);
	CHECK_EQ_U(out[1].timeslice_us, 2048);
	CHECK_EQ_U(out[2].timeslice_us, 3000);
	CHECK_EQ_U(out[4].timeslice_us, 50);
	in[2].gateable = 1;
	/* A sole BE beside it: baseline, and so is a second LC that is not
	 * launch-bound. */
	in[2].cls = CLASS_LC;
	decide(cfg, in, 5, out);
	CHECK_EQ_U(out[1].timeslice_us, 2048);
	CHECK_EQ_U(out[2].timeslice_us, 3000);
	in[2].cls = CLASS_BE;
	/* The flag on a BE means nothing. */
	in[0].lc_busy = 0;
	in[1].lc_busy = 1;
	decide(cfg, in, 5, out);
	CHECK_EQ_U(out[1].timeslice_us, 50);
	CHECK_EQ_U(out[1].rotate, 1);
}

static void test_copy(const struct policy_config *dflt)
{
	struct policy_tsg_in in[] = { tsg(0, CE, CLASS_LC, 1024), tsg(0, CE, CLASS_BE, 1024),
				      tsg(0, RM_ENGINE_COPY0, CLASS_BE, 1024),
				      tsg(0, RM_ENGINE_COPY9, CLASS_BE, 1024) };
	struct policy_config cfg = *dflt;
	struct policy_tsg_out out[4];

	decide(&cfg, in, 4, out);
	for (int i = 0; i < 4; i++) {
		CHECK_EQ_U(out[i].timeslice_us, 1024);
		CHECK(out[i].interleave == POLICY_INTERLEAVE_LEAVE);
		CHECK(strcmp(out[i].reason, "engine not managed: baseline") == 0);
	}
	cfg.manage_copy = 1;
	decide(&cfg, in, 4, out);
	CHECK_EQ_U(out[0].timeslice_us, 100000);
	CHECK_EQ_U(out[1].timeslice_us, 50);
	/* Alone on their own copy runlists. */
	CHECK_EQ_U(out[2].timeslice_us, 1024);
	CHECK_EQ_U(out[3].timeslice_us, 1024);
}

static void test_not_gr_or_copy(const struct policy_config *dflt)
{
	/* An engine that is neither GR nor copy (e.g. a video engine). */
	struct policy_tsg_in in[] = { tsg(0, 0x13, CLASS_LC, 1000), tsg(0, 0x13, CLASS_BE, 1000) };
	struct policy_config cfg = *dflt;
	struct policy_tsg_out out[2];

	cfg.manage_copy = 1;
	decide(&cfg, in, 2, out);
	CHECK_EQ_U(out[0].timeslice_us, 1000);
	CHECK_EQ_U(out[1].timeslice_us, 1000);
}

static void test_unmanaged(const struct policy_config *cfg)
{
	/* Unmanaged TSGs neither count as BE (the BE stays "sole") nor as LC
	 * (a lone BE beside one stays at baseline). */
	struct policy_tsg_in in[] = { tsg(0, GR, CLASS_LC, 2048), tsg(0, GR, CLASS_BE, 2048),
				      tsg(0, GR, CLASS_UNMANAGED, 2048),
				      tsg(1, GR, CLASS_UNMANAGED, 2048),
				      tsg(1, GR, CLASS_BE, 2048) };
	struct policy_tsg_out out[5];

	decide(cfg, in, 5, out);
	CHECK_EQ_U(out[1].timeslice_us, 50);
	CHECK(strcmp(out[1].reason, "sole BE beside an LC") == 0);
	CHECK_EQ_U(out[2].timeslice_us, 2048);
	CHECK(out[2].interleave == POLICY_INTERLEAVE_LEAVE);
	CHECK(strcmp(out[2].reason, "unmanaged TSG: baseline") == 0);
	CHECK_EQ_U(out[3].timeslice_us, 2048);
	CHECK_EQ_U(out[4].timeslice_us, 2048);
}

static void test_interleave(const struct policy_config *dflt)
{
	struct policy_tsg_in in[] = { tsg(0, GR, CLASS_LC, 2048), tsg(0, GR, CLASS_BE, 2048),
				      tsg(0, GR, CLASS_UNMANAGED, 2048),
				      tsg(1, GR, CLASS_BE, 2048), tsg(2, GR, CLASS_LC, 2048) };
	struct policy_config cfg = *dflt;
	struct policy_tsg_out out[5];

	cfg.lc_interleave = RM_INTERLEAVE_HIGH;
	cfg.be_interleave = RM_INTERLEAVE_LOW;
	decide(&cfg, in, 5, out);
	CHECK(out[0].interleave == RM_INTERLEAVE_HIGH);
	CHECK(out[1].interleave == RM_INTERLEAVE_LOW);
	CHECK(out[2].interleave == POLICY_INTERLEAVE_LEAVE);
	/* Without a neighbour of the other class a configured level goes
	 * back to the driver's default, since it cannot be read back. */
	CHECK(out[3].interleave == POLICY_INTERLEAVE_DRIVER_DEFAULT);
	CHECK(out[4].interleave == POLICY_INTERLEAVE_DRIVER_DEFAULT);
	CHECK(POLICY_INTERLEAVE_DRIVER_DEFAULT == RM_INTERLEAVE_MEDIUM);

	/* Only the configured class is touched. */
	cfg.lc_interleave = POLICY_INTERLEAVE_LEAVE;
	decide(&cfg, in, 5, out);
	CHECK(out[0].interleave == POLICY_INTERLEAVE_LEAVE);
	CHECK(out[1].interleave == RM_INTERLEAVE_LOW);
	CHECK(out[4].interleave == POLICY_INTERLEAVE_LEAVE);
}

static void test_baseline_unknown(const struct policy_config *cfg)
{
	struct policy_tsg_in in[] = { tsg(0, GR, CLASS_BE, 0), tsg(0, CE, CLASS_BE, 0),
				      tsg(0, GR, CLASS_UNMANAGED, 0) };
	struct policy_tsg_out out[3];

	decide(cfg, in, 3, out);
	CHECK_EQ_U(out[0].timeslice_us, RM_DEFAULT_TIMESLICE_GR_US);
	CHECK_EQ_U(out[1].timeslice_us, RM_DEFAULT_TIMESLICE_COPY_US);
	CHECK_EQ_U(out[2].timeslice_us, RM_DEFAULT_TIMESLICE_GR_US);
}

static void test_pure(const struct policy_config *dflt)
{
	struct policy_tsg_in in[] = { tsg(0, GR, CLASS_LC, 2048), tsg(0, GR, CLASS_BE, 2048),
				      tsg(0, CE, CLASS_BE, 1024), tsg(1, GR, CLASS_BE, 2048),
				      tsg(1, GR, CLASS_BE, 2048), tsg(1, GR, CLASS_LC, 0),
				      tsg(1, GR, CLASS_UNMANAGED, 2048) };
	enum { N = sizeof(in) / sizeof(in[0]) };
	struct policy_tsg_in copy[N];
	struct policy_config cfg = *dflt, cfg_copy;
	struct policy_tsg_out a[N], b[N];

	memcpy(copy, in, sizeof(in));
	cfg_copy = cfg;
	decide(&cfg, in, N, a);
	memset(b, 0x5a, sizeof(b)); /* different poison: nothing may leak through */
	policy_decide(&cfg, in, N, b);
	CHECK(memcmp(in, copy, sizeof(in)) == 0);
	CHECK(memcmp(&cfg, &cfg_copy, sizeof(cfg)) == 0);
	for (int i = 0; i < N; i++) {
		CHECK_EQ_U(a[i].timeslice_us, b[i].timeslice_us);
		CHECK(a[i].interleave == b[i].interleave);
		CHECK(a[i].reason == b[i].reason);
		CHECK(a[i].reason != NULL);
	}
	/* n == 0 touches nothing. */
	policy_decide(&cfg, in, 0, NULL);
}

static void test_class_names(void)
{
	enum qos_class c;

	CHECK(strcmp(class_name(CLASS_UNMANAGED), "unmanaged") == 0);
	CHECK(strcmp(class_name(CLASS_BE), "best-effort") == 0);
	CHECK(strcmp(class_name(CLASS_LC), "latency-critical") == 0);
	CHECK(class_parse("latency-critical", &c) == 0 && c == CLASS_LC);
	CHECK(class_parse("lc", &c) == 0 && c == CLASS_LC);
	CHECK(class_parse("LC", &c) == 0 && c == CLASS_LC);
	CHECK(class_parse("best-effort", &c) == 0 && c == CLASS_BE);
	CHECK(class_parse("be", &c) == 0 && c == CLASS_BE);
	CHECK(class_parse("BE", &c) == 0 && c == CLASS_BE);
	CHECK(class_parse("unmanaged", &c) == 0 && c == CLASS_UNMANAGED);
	c = CLASS_LC;
	CHECK(class_parse("Latency-Critical", &c) == -1);
	CHECK(class_parse("", &c) == -1);
	CHECK(class_parse("lc ", &c) == -1);
	CHECK(class_parse(NULL, &c) == -1);
	CHECK(c == CLASS_LC); /* untouched on failure */
}

int main(void)
{
	struct policy_config cfg;

	policy_config_defaults(&cfg);
	test_defaults();
	test_validate();
	test_be_alone(&cfg);
	test_lc_and_be(&cfg);
	test_other_gpu(&cfg);
	test_other_runlist(&cfg);
	test_lc_leaves(&cfg);
	test_several_lc(&cfg);
	test_several_be(&cfg);
	test_busy_lc(&cfg);
	test_wake(&cfg);
	test_copy(&cfg);
	test_not_gr_or_copy(&cfg);
	test_unmanaged(&cfg);
	test_interleave(&cfg);
	test_baseline_unknown(&cfg);
	test_pure(&cfg);
	test_class_names();
	CHECK_DONE();
}
