/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_config.c - the standalone policy file: the shipped example, the
 * defaults, every kind of bad input (which must be refused with a useful
 * sentence and leave the caller's struct byte-identical), loading from
 * disk, and classification precedence.
 *
 * Usage: test_config MODE [EXAMPLE_JSON]; MODE is example, defaults,
 * errors, load or classify (one ctest each).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "abi/rm_abi.h"
#include "agent/core/config.h"
#include "agent/io/configfile.h"
#include "tests/check.h"

static char err[512];

/* A struct nobody would produce by parsing, to see that it stays put. */
static void scribble(struct agent_config *c)
{
	memset(c, 0x6b, sizeof(*c));
}

static void test_example(const char *path)
{
	struct agent_config c;
	enum qos_class cls;
	enum class_source src;

	scribble(&c);
	CHECK(config_load(path, &c, err, sizeof(err)) == 0);
	if (check_failures) {
		fprintf(stderr, "%s\n", err);
		return;
	}
	CHECK_EQ_U(c.version, 1);
	CHECK_EQ_U(c.default_class, CLASS_UNMANAGED);
	CHECK_EQ_U(c.trust_run_class, 1);
	CHECK_EQ_U(c.nrules, 2);
	CHECK_EQ_U(c.rules[0].kind, MATCH_CGROUP);
	CHECK(strcmp(c.rules[0].pattern, "/system.slice/inference-*.scope") == 0);
	CHECK_EQ_U(c.rules[0].cls, CLASS_LC);
	CHECK_EQ_U(c.rules[1].kind, MATCH_EXE);
	CHECK(strcmp(c.rules[1].pattern, "/opt/train/*") == 0);
	CHECK_EQ_U(c.rules[1].cls, CLASS_BE);
	CHECK_EQ_U(c.policy.lc_timeslice_us, 100000);
	CHECK_EQ_U(c.policy.be_timeslice_us, 50);
	CHECK_EQ_U(c.policy.several_be_timeslice_us, 1000);
	CHECK_EQ_U(c.policy.several_be, POLICY_SEVERAL_BE_ROTATE);
	CHECK_EQ_U(c.policy.rotate_period_ms, 250);
	CHECK_EQ_U(c.policy.gate_lease_ms, 500);
	CHECK(c.policy.rotate_in_gap);
	CHECK_EQ_U(c.policy.busy_lc_percent, 50);
	CHECK(c.policy.lc_interleave == POLICY_INTERLEAVE_LEAVE);
	CHECK(c.policy.be_interleave == POLICY_INTERLEAVE_LEAVE);
	CHECK_EQ_U(c.policy.manage_copy, 0);
	CHECK_EQ_U(c.control_deadline_ms, 1000);
	CHECK_EQ_U(c.reconcile_interval_ms, 200);
	CHECK_EQ_U(c.verify_interval_s, 60);
	CHECK(strcmp(c.path, path) == 0);
	cls = config_classify(&c, "/system.slice/inference-7.scope", "/usr/bin/python3", NULL,
				 &src);
	CHECK(cls == CLASS_LC && src == CLS_SRC_RULE);
	cls = config_classify(&c, "/user.slice", "/opt/train/bin/python", NULL, &src);
	CHECK(cls == CLASS_BE && src == CLS_SRC_RULE);
}

static void test_defaults(void)
{
	struct agent_config c, d;
	struct policy_config p;

	scribble(&c);
	config_defaults(&c);
	policy_config_defaults(&p);
	CHECK_EQ_U(c.version, 1);
	CHECK_EQ_U(c.default_class, CLASS_UNMANAGED);
	CHECK_EQ_U(c.trust_run_class, 1);
	CHECK_EQ_U(c.nrules, 0);
	CHECK(memcmp(&c.policy, &p, sizeof(p)) == 0);
	CHECK_EQ_U(c.control_deadline_ms, 1000);
	CHECK_EQ_U(c.reconcile_interval_ms, 200);
	CHECK_EQ_U(c.verify_interval_s, 60);
	CHECK(c.path[0] == '\0');

	/* The smallest file means exactly the defaults. */
	scribble(&d);
	CHECK(config_parse("{\"version\": 1}", &d, err, sizeof(err)) == 0);
	CHECK(memcmp(&c, &d, sizeof(c)) == 0);

	/* Every field set to a non-default value lands where it should. */
	CHECK(config_parse("{\"version\":1,\"defaultClass\":\"be\",\"trustRunClass\":false,"
			      "\"timeslices\":{\"lcUs\":1000000,\"beUs\":20,\"severalBeUs\":100},"
			      "\"allowUnsafeSeveralBe\":true,\"severalBe\":\"leave\","
			      "\"interleave\":{\"lc\":\"high\",\"be\":\"low\"},"
			      "\"manageCopyEngines\":true,\"controlDeadlineMs\":250,"
			      "\"reconcileIntervalMs\":1000,\"verifyIntervalS\":0,\"rules\":[]}",
			      &d, err, sizeof(err)) == 0);
	CHECK_EQ_U(d.default_class, CLASS_BE);
	CHECK_EQ_U(d.trust_run_class, 0);
	CHECK_EQ_U(d.policy.lc_timeslice_us, 1000000);
	CHECK_EQ_U(d.policy.be_timeslice_us, 20);
	CHECK_EQ_U(d.policy.several_be_timeslice_us, 100);
	CHECK_EQ_U(d.policy.several_be, POLICY_SEVERAL_BE_LEAVE);
	CHECK_EQ_U(d.memory.lc_reserve, 0);
	CHECK(d.memory.default_budget[CLASS_BE] == GQ_MEM_UNLIMITED &&
	      d.memory.default_budget[CLASS_LC] == GQ_MEM_UNLIMITED);
	{
		struct agent_config e;

		/* Sizes as Kubernetes writes them, or whole bytes, or a percent. */
		CHECK(config_parse("{\"version\":1,\"memory\":{\"lcReserve\":\"16Gi\",\"defaults\":"
				      "{\"best-effort\":\"1500M\",\"latency-critical\":2097152}}}",
				      &e, err, sizeof(err)) == 0);
		CHECK_EQ_U(e.memory.lc_reserve, 16ull << 30);
		CHECK_EQ_U(e.memory.lc_reserve_percent, 0);
		CHECK_EQ_U(e.memory.default_budget[CLASS_BE], 1500000000ull);
		CHECK_EQ_U(e.memory.default_budget[CLASS_LC], 2097152ull);
		CHECK(e.memory.default_budget[CLASS_UNMANAGED] == GQ_MEM_UNLIMITED);
		CHECK(config_parse("{\"version\":1,\"memory\":{\"lcReserve\":\"25%\"}}", &e, err,
				      sizeof(err)) == 0);
		CHECK_EQ_U(e.memory.lc_reserve_percent, 25);
		CHECK_EQ_U(e.memory.lc_reserve, 0);
		{
			char q[32];

			quantity_format(16ull << 30, q, sizeof(q));
			CHECK(strcmp(q, "16Gi") == 0);
			quantity_format(1500000000ull, q, sizeof(q));
			CHECK(strcmp(q, "1500M") == 0);
			quantity_format(1048577, q, sizeof(q));
			CHECK(strcmp(q, "1048577") == 0);
		}
	}
	CHECK(d.policy.lc_interleave == RM_INTERLEAVE_HIGH);
	CHECK(d.policy.be_interleave == RM_INTERLEAVE_LOW);
	CHECK_EQ_U(d.policy.manage_copy, 1);
	CHECK_EQ_U(d.control_deadline_ms, 250);
	CHECK_EQ_U(d.reconcile_interval_ms, 1000);
	CHECK_EQ_U(d.verify_interval_s, 0);
	CHECK_EQ_U(d.nrules, 0);
	CHECK(config_parse("{\"version\":1,\"severalBe\":\"floor\",\"busyLcPercent\":0,"
			      "\"rotation\":{\"periodMs\":250,\"leaseMs\":1000}}",
			      &d, err, sizeof(err)) == 0);
	CHECK_EQ_U(d.policy.several_be, POLICY_SEVERAL_BE_FLOOR);
	CHECK_EQ_U(d.policy.busy_lc_percent, 0);
	CHECK_EQ_U(d.policy.rotate_period_ms, 250);
	CHECK_EQ_U(d.policy.gate_lease_ms, 1000);
	CHECK_EQ_U(d.policy.wake_lead_us, 100); /* the default */
	CHECK(d.policy.rotate_in_gap); /* the default */
	CHECK(config_parse("{\"version\":1,\"rotation\":{\"inGap\":false}}", &d, err,
			   sizeof(err)) == 0);
	CHECK(!d.policy.rotate_in_gap);
	CHECK_EQ_U(d.policy.window_after_us, 0); /* windows off by default */
	CHECK_EQ_U(d.policy.window_before_us, 1200);
	CHECK_EQ_U(d.policy.window_max_off_percent, 50);
	CHECK(config_parse("{\"version\":1,\"windows\":{\"afterUs\":900,\"beforeUs\":1000,"
			   "\"maxOffPercent\":40}}",
			   &d, err, sizeof(err)) == 0);
	CHECK_EQ_U(d.policy.window_after_us, 900);
	CHECK(!d.policy.window_after_auto);
	CHECK_EQ_U(d.policy.window_before_us, 1000);
	CHECK_EQ_U(d.policy.window_max_off_percent, 40);
	CHECK(config_parse("{\"version\":1,\"windows\":{\"afterUs\":\"auto\"}}", &d, err,
			   sizeof(err)) == 0);
	CHECK(d.policy.window_after_auto);
	CHECK_EQ_U(d.policy.window_after_us, 0);
	/* Only a lease below twice the default turn: the turn is half of it
	 * (a file valid under the former 100 ms turn stays valid); a lease
	 * that allows the default keeps it. */
	CHECK(config_parse("{\"version\":1,\"rotation\":{\"leaseMs\":300}}", &d, err,
			   sizeof(err)) == 0);
	CHECK_EQ_U(d.policy.rotate_period_ms, 150);
	CHECK_EQ_U(d.policy.gate_lease_ms, 300);
	CHECK(config_parse("{\"version\":1,\"rotation\":{\"leaseMs\":2000}}", &d, err,
			   sizeof(err)) == 0);
	CHECK_EQ_U(d.policy.rotate_period_ms, 250);
	CHECK(config_parse("{\"version\":1,\"wake\":{\"leadUs\":100,\"holdUs\":60}}", &d, err,
			   sizeof(err)) == 0);
	CHECK_EQ_U(d.policy.wake_lead_us, 100);
	CHECK_EQ_U(d.policy.wake_hold_us, 60);
	CHECK(config_parse("{\"version\":1,\"wake\":{\"leadUs\":0}}", &d, err, sizeof(err)) == 0);
	CHECK_EQ_U(d.policy.wake_lead_us, 0);
	CHECK(config_parse("{\"version\":1,\"interleave\":{\"lc\":\"medium\"}}", &d, err,
			      sizeof(err)) == 0);
	CHECK(d.policy.lc_interleave == RM_INTERLEAVE_MEDIUM);
	CHECK(d.policy.be_interleave == POLICY_INTERLEAVE_LEAVE);
}

struct bad {
	const char *json;
	const char *want[2]; /* substrings the message must hold */
};

static const struct bad bads[] = {
	{ "{}", { "\"version\"", "missing" } },
	{ "{\"version\": 2}", { "\"version\"", "must be 1" } },
	{ "{\"version\": \"1\"}", { "\"version\"", "a string" } },
	{ "{\"version\": 1.5}", { "\"version\"", "1.5" } },
	{ "{\"version\": 1, \"timeslise\": {}}", { "unknown key", "timeslise" } },
	{ "{\"version\": 1, \"version\": 1}", { "\"version\"", "twice" } },
	{ "{\"version\": 1, \"interleave\": {\"lc\": \"low\", \"lc\": \"high\"}}",
	  { "\"interleave\"", "\"lc\" twice" } },
	{ "{\"version\": 1, \"trustRunClass\": 1}", { "trustRunClass", "true or false" } },
	{ "{\"version\": 1, \"manageCopyEngines\": \"yes\"}", { "manageCopyEngines", "a string" } },
	{ "{\"version\": 1, \"rules\": {}}", { "\"rules\"", "must be an array" } },
	{ "{\"version\": 1, \"timeslices\": []}", { "\"timeslices\"", "an object" } },
	{ "{\"version\": 1, \"timeslices\": {\"beUs\": \"50\"}}", { "timeslices.beUs", "a string" } },
	{ "{\"version\": 1, \"timeslices\": {\"be\": 50}}", { "\"timeslices\"", "unknown key \"be\"" } },
	{ "{\"version\": 1, \"defaultClass\": \"gold\"}", { "defaultClass", "\"gold\"" } },
	{ "{\"version\": 1, \"defaultClass\": 2}", { "defaultClass", "must be a string" } },
	{ "{\"version\": 1, \"timeslices\": {\"beUs\": 0}}", { "timeslices.beUs", "from 1 to 10000000" } },
	{ "{\"version\": 1, \"timeslices\": {\"lcUs\": 10000001}}", { "timeslices.lcUs", "10000001" } },
	{ "{\"version\": 1, \"timeslices\": {\"lcUs\": -5}}", { "timeslices.lcUs", "-5" } },
	{ "{\"version\": 1, \"timeslices\": {\"beUs\": 50.5}}", { "timeslices.beUs", "50.5" } },
	{ "{\"version\": 1, \"timeslices\": {\"severalBeUs\": 499}}",
	  { "timeslices.severalBeUs", "allowUnsafeSeveralBe" } },
	{ "{\"version\": 1, \"allowUnsafeSeveralBe\": false, \"timeslices\": {\"severalBeUs\": 20}}",
	  { "timeslices.severalBeUs", "safe floor of 500" } },
	{ "{\"version\": 1, \"allowUnsafeSeveralBe\": true, \"timeslices\": {\"severalBeUs\": 0}}",
	  { "timeslices.severalBeUs", "from 1" } },
	{ "{\"version\": 1, \"severalBe\": \"shorten\"}", { "severalBe", "\"floor\" or \"leave\"" } },
	{ "{\"version\": 1, \"rotation\": {\"periodMs\": 10}}", { "rotation.periodMs", "from 20" } },
	{ "{\"version\": 1, \"rotation\": {\"inGap\": 1}}", { "rotation.inGap", "true or false" } },
	{ "{\"version\": 1, \"rotation\": {\"inGaps\": true}}", { "rotation", "inGaps" } },
	{ "{\"version\": 1, \"rotation\": {\"leaseMs\": 20000}}", { "rotation.leaseMs", "10000" } },
	{ "{\"version\": 1, \"rotation\": {\"periodMs\": 400}}", { "rotation.leaseMs", "twice" } },
	{ "{\"version\": 1, \"rotation\": {\"periodMs\": 250, \"leaseMs\": 400}}",
	  { "rotation.leaseMs", "twice" } },
	{ "{\"version\": 1, \"rotation\": {\"period\": 100}}", { "\"rotation\"", "\"period\"" } },
	{ "{\"version\": 1, \"rotation\": 100}", { "rotation", "an object" } },
	{ "{\"version\": 1, \"busyLcPercent\": 101}", { "busyLcPercent", "from 0 to 100" } },
	{ "{\"version\": 1, \"busyLcPercent\": \"90\"}", { "busyLcPercent", "a string" } },
	{ "{\"version\": 1, \"wake\": {\"leadUs\": 1001}}", { "wake.leadUs", "from 0 to 1000" } },
	{ "{\"version\": 1, \"wake\": {\"leadUs\": 100, \"holdUs\": -1}}",
	  { "wake.holdUs", "from 0 to 1000" } },
	{ "{\"version\": 1, \"wake\": {\"leadUs\": 99.5}}", { "wake.leadUs", "99.5" } },
	{ "{\"version\": 1, \"wake\": {\"leadUs\": 0, \"holdUs\": 60}}",
	  { "wake.holdUs", "without a wake.leadUs" } },
	{ "{\"version\": 1, \"wake\": {\"lead\": 100}}", { "\"wake\"", "\"lead\"" } },
	{ "{\"version\": 1, \"windows\": {\"afterUs\": 100001}}",
	  { "windows.afterUs", "from 0 to 100000" } },
	{ "{\"version\": 1, \"windows\": {\"afterUs\": \"Auto\"}}",
	  { "windows.afterUs", "or \"auto\", got \"Auto\"" } },
	{ "{\"version\": 1, \"windows\": {\"afterUs\": true}}",
	  { "windows.afterUs", "or \"auto\", got a boolean" } },
	{ "{\"version\": 1, \"windows\": {\"afterUs\": -5}}",
	  { "windows.afterUs", "from 0 to 100000" } },
	{ "{\"version\": 1, \"windows\": {\"beforeUs\": 10001}}",
	  { "windows.beforeUs", "from 0 to 10000" } },
	{ "{\"version\": 1, \"windows\": {\"maxOffPercent\": 0}}",
	  { "windows.maxOffPercent", "from 1 to 90" } },
	{ "{\"version\": 1, \"windows\": {\"maxOffPercent\": 91}}",
	  { "windows.maxOffPercent", "from 1 to 90" } },
	{ "{\"version\": 1, \"windows\": {\"after\": 800}}", { "\"windows\"", "\"after\"" } },
	{ "{\"version\": 1, \"windows\": true}", { "windows", "an object" } },
	{ "{\"version\": 1, \"wake\": 100}", { "wake", "an object" } },
	{ "{\"version\": 1, \"interleave\": {\"lc\": \"max\"}}", { "interleave.lc", "\"max\"" } },
	{ "{\"version\": 1, \"interleave\": {\"be\": 0}}", { "interleave.be", "a number" } },
	{ "{\"version\": 1, \"interleave\": {\"bee\": \"low\"}}", { "\"interleave\"", "\"bee\"" } },
	{ "{\"version\": 1, \"controlDeadlineMs\": 0}", { "controlDeadlineMs", "from 1 to 60000" } },
	{ "{\"version\": 1, \"reconcileIntervalMs\": 5}", { "reconcileIntervalMs", "from 10" } },
	{ "{\"version\": 1, \"verifyIntervalS\": 86401}", { "verifyIntervalS", "from 0 to 86400" } },
	{ "{\"version\": 1, \"verifyIntervalS\": -1}", { "verifyIntervalS", "from 0" } },
	{ "{\"version\": 1, \"verifyIntervalS\": \"60\"}", { "verifyIntervalS", "got a string" } },
	{ "{\"version\": 1, \"rules\": [{\"cgroup\": \"/a\", \"exe\": \"/b\", \"class\": \"lc\"}]}",
	  { "rules[0]", "both" } },
	{ "{\"version\": 1, \"rules\": [{\"cgroup\": \"/a\", \"class\": \"lc\"}, {\"class\": \"be\"}]}",
	  { "rules[1]", "neither" } },
	{ "{\"version\": 1, \"rules\": [{\"cgroup\": \"/a\"}]}", { "rules[0].class", "missing" } },
	{ "{\"version\": 1, \"rules\": [{\"exe\": \"/a\", \"class\": \"fast\"}]}",
	  { "rules[0].class", "\"fast\"" } },
	{ "{\"version\": 1, \"rules\": [{\"exe\": \"\", \"class\": \"be\"}]}", { "rules[0].exe", "empty" } },
	{ "{\"version\": 1, \"rules\": [{\"exe\": 7, \"class\": \"be\"}]}", { "rules[0].exe", "a number" } },
	{ "{\"version\": 1, \"rules\": [{\"exe\": \"/a\", \"class\": \"be\", \"pid\": 1}]}",
	  { "rules[0]", "unknown key \"pid\"" } },
	{ "{\"version\": 1, \"rules\": [\"/a\"]}", { "rules[0]", "an object" } },
	{ "{\"version\": 1, \"rules\": [{\"exe\": \"[\", \"class\": \"be\"}]}",
	  { "rules[0].exe", "not a valid glob" } },
	{ "{\"version\": 1, \"rules\": [{\"cgroup\": \"/kubepods/[!a-z*\", \"class\": \"be\"}]}",
	  { "rules[0].cgroup", "no closing" } },
	{ "{\"version\": 1, \"rules\": [{\"exe\": \"/bin/x\\\\\", \"class\": \"be\"}]}",
	  { "rules[0].exe", "lone" } },
	{ "{\"version\": 1, \"rules\": [{\"exe\": \"*[[:digits:]]\", \"class\": \"be\"}]}",
	  { "rules[0].exe", "[:digits:]" } },
	{ "{\"version\": 1, \"timeslices\": {\"lcUs\": 40, \"beUs\": 50}}",
	  { "timeslices.lcUs", "below timeslices.beUs (50 us)" } },
	{ "{\"version\": 1, \"timeslices\": {\"lcUs\": 20}}", { "timeslices.lcUs", "below" } },
	{ "[1, 2]", { "one JSON object", "an array" } },
	{ "{\"version\": 1,\n \"rules\": [}", { "not valid JSON", "line 2" } },
	{ "{\"version\": 1} trailing", { "not valid JSON", "column" } },
	{ "version = 1", { "not valid JSON", "line 1" } },
	{ "", { "empty", "version" } },
	{ "{\"version\": 1, \"memory\": {\"lcReserve\": \"16GB\"}}",
	  { "memory.lcReserve", "unknown suffix \"GB\"" } },
	{ "{\"version\": 1, \"memory\": {\"lcReserve\": \"1.5Gi\"}}",
	  { "memory.lcReserve", "unknown suffix \".5Gi\"" } },
	{ "{\"version\": 1, \"memory\": {\"lcReserve\": \"101%\"}}",
	  { "memory.lcReserve", "from 1% to 100%" } },
	{ "{\"version\": 1, \"memory\": {\"lcReserve\": \"-5%\"}}", { "memory.lcReserve", "\"-5%\"" } },
	{ "{\"version\": 1, \"memory\": {\"lcReserve\": \"2Pi\"}}", { "memory.lcReserve", "larger than 1Pi" } },
	{ "{\"version\": 1, \"memory\": {\"lcReserve\": 1000}}", { "memory.lcReserve", "smaller than 1Mi" } },
	{ "{\"version\": 1, \"memory\": {\"lcReserve\": 1.5}}", { "memory.lcReserve", "whole bytes" } },
	{ "{\"version\": 1, \"memory\": {\"lcReserve\": true}}", { "memory.lcReserve", "a boolean" } },
	{ "{\"version\": 1, \"memory\": {\"lcReserve\": \"\"}}", { "memory.lcReserve", "empty" } },
	{ "{\"version\": 1, \"memory\": {\"lcReserve\": \"Gi\"}}", { "memory.lcReserve", "not a size" } },
	{ "{\"version\": 1, \"memory\": {\"lcReserve\": \"016Gi\"}}", { "memory.lcReserve", "not a size" } },
	{ "{\"version\": 1, \"memory\": {\"reserve\": \"1Gi\"}}", { "memory", "unknown key \"reserve\"" } },
	{ "{\"version\": 1, \"memory\": []}", { "memory", "an object" } },
	{ "{\"version\": 1, \"memory\": {\"defaults\": {\"be\": \"1Gi\"}}}",
	  { "memory.defaults", "unknown key \"be\"" } },
	{ "{\"version\": 1, \"memory\": {\"defaults\": {\"best-effort\": \"99999999999999999999Gi\"}}}",
	  { "memory.defaults.best-effort", "larger than 1Pi" } },
	{ " \n\t ", { "empty", "version" } },
};

/* Refused, with a sentence that names the text and holds both strings, and
 * the output struct left exactly as it was. */
static void expect_bad(const char *json, const char *const want[2])
{
	struct agent_config c, before;

	scribble(&c);
	memcpy(&before, &c, sizeof(c));
	err[0] = '\0';
	if (config_parse(json, &c, err, sizeof(err)) != -1) {
		fprintf(stderr, "accepted: %s\n", json);
		check_failures++;
		return;
	}
	CHECK(memcmp(&c, &before, sizeof(c)) == 0);
	CHECK(strncmp(err, "policy text: ", 13) == 0);
	for (int i = 0; i < 2; i++) {
		if (!strstr(err, want[i])) {
			fprintf(stderr, "message for %s\n  is \"%s\"\n  lacks \"%s\"\n", json, err,
				want[i]);
			check_failures++;
		}
	}
}

static void test_errors(void)
{
	char *json, *p, pattern[300];
	size_t cap = 16 * 1024;
	const char *const too_many[2] = { "\"rules\"", "at most 64" };
	const char *const too_long[2] = { "rules[0].cgroup", "256 bytes" };
	const char *const none[2] = { "policy text", "missing" };
	struct agent_config c;

	for (size_t i = 0; i < sizeof(bads) / sizeof(bads[0]); i++)
		expect_bad(bads[i].json, bads[i].want);

	json = malloc(cap);
	CHECK(json != NULL);
	if (!json)
		return;
	p = json + sprintf(json, "{\"version\": 1, \"rules\": [");
	for (int i = 0; i < CONFIG_MAX_RULES + 1; i++)
		p += sprintf(p, "%s{\"exe\": \"/bin/x%d\", \"class\": \"be\"}", i ? "," : "", i);
	sprintf(p, "]}");
	expect_bad(json, too_many);
	/* Exactly the limit is fine. */
	p = strrchr(json, '{');
	sprintf(p - 1, "]}");
	CHECK(config_parse(json, &c, err, sizeof(err)) == 0);
	CHECK_EQ_U(c.nrules, CONFIG_MAX_RULES);
	CHECK(strcmp(c.rules[CONFIG_MAX_RULES - 1].pattern, "/bin/x63") == 0);

	memset(pattern, 'a', 256);
	pattern[0] = '/';
	pattern[256] = '\0';
	sprintf(json, "{\"version\": 1, \"rules\": [{\"cgroup\": \"%s\", \"class\": \"lc\"}]}",
		pattern);
	expect_bad(json, too_long);
	pattern[255] = '\0'; /* 255 bytes fit */
	sprintf(json, "{\"version\": 1, \"rules\": [{\"cgroup\": \"%s\", \"class\": \"lc\"}]}",
		pattern);
	CHECK(config_parse(json, &c, err, sizeof(err)) == 0);
	CHECK(strcmp(c.rules[0].pattern, pattern) == 0);
	free(json);

	/* Brackets, classes and escapes fnmatch reads as intended pass, and
	 * match what they say. */
	CHECK(config_parse("{\"version\": 1, \"rules\": ["
			      "{\"exe\": \"/bin/job[0-9]\", \"class\": \"lc\"},"
			      "{\"exe\": \"*[![:digit:]]x\", \"class\": \"be\"},"
			      "{\"exe\": \"/a[]]b\", \"class\": \"lc\"},"
			      "{\"exe\": \"/lit\\\\[\", \"class\": \"lc\"}]}",
			      &c, err, sizeof(err)) == 0);
	CHECK(config_classify(&c, NULL, "/bin/job7", NULL, NULL) == CLASS_LC);
	CHECK(config_classify(&c, NULL, "/opt/yx", NULL, NULL) == CLASS_BE);
	CHECK(config_classify(&c, NULL, "/a]b", NULL, NULL) == CLASS_LC);
	CHECK(config_classify(&c, NULL, "/lit[", NULL, NULL) == CLASS_LC);

	expect_bad(NULL, none);
	/* A tiny buffer is filled, truncated and terminated. */
	memset(err, 'x', 8);
	CHECK(config_parse("{}", &c, err, 8) == -1);
	CHECK(memchr(err, '\0', 8) != NULL);
}

static int write_file(char *path, const char *text, size_t len)
{
	const char *dir = getenv("TMPDIR");
	int fd;

	snprintf(path, 256, "%s/gpuqos-policy-XXXXXX", dir && *dir ? dir : "/tmp");
	fd = mkstemp(path);
	if (fd < 0)
		return -1;
	if (write(fd, text, len) != (ssize_t)len) {
		close(fd);
		unlink(path);
		return -1;
	}
	return close(fd);
}

/* Loading fails like parsing does, and the message names the file. */
static void expect_load_bad(const char *path, const char *want)
{
	struct agent_config c, before;

	scribble(&c);
	memcpy(&before, &c, sizeof(c));
	err[0] = '\0';
	CHECK(config_load(path, &c, err, sizeof(err)) == -1);
	CHECK(memcmp(&c, &before, sizeof(c)) == 0);
	CHECK(strstr(err, path) != NULL);
	if (!strstr(err, want)) {
		fprintf(stderr, "message for %s is \"%s\", lacks \"%s\"\n", path, err, want);
		check_failures++;
	}
}

static void test_load(void)
{
	static const char good[] = "{\"version\": 1, \"defaultClass\": \"best-effort\"}\n";
	static const char bad_range[] = "{\"version\": 1, \"timeslices\": {\"beUs\": 0}}";
	static const char nul[] = "{\"version\": 1}\0{\"x\": 1}";
	char path[256], *big;
	struct agent_config c;

	expect_load_bad("/nonexistent/gpuqos/policy.json", "No such file");
	expect_load_bad("/", "not a regular file");
	/* A FIFO where the file should be is refused, not waited on. */
	CHECK(write_file(path, "", 0) == 0);
	unlink(path);
	CHECK(mkfifo(path, 0600) == 0);
	expect_load_bad(path, "not a regular file");
	unlink(path);
	CHECK(write_file(path, "", 0) == 0);
	expect_load_bad(path, "empty");
	unlink(path);
	CHECK(write_file(path, bad_range, sizeof(bad_range) - 1) == 0);
	expect_load_bad(path, "timeslices.beUs");
	CHECK(strncmp(err, "policy file /", 13) == 0);
	unlink(path);
	CHECK(write_file(path, nul, sizeof(nul) - 1) == 0);
	expect_load_bad(path, "NUL");
	unlink(path);
	big = malloc(CONFIG_MAX_BYTES + 1);
	CHECK(big != NULL);
	if (big) {
		/* Valid JSON, padded with blanks past the limit. */
		memset(big, ' ', CONFIG_MAX_BYTES + 1);
		memcpy(big, good, sizeof(good) - 1);
		CHECK(write_file(path, big, CONFIG_MAX_BYTES + 1) == 0);
		expect_load_bad(path, "larger than");
		unlink(path);
		CHECK(write_file(path, big, CONFIG_MAX_BYTES) == 0);
		CHECK(config_load(path, &c, err, sizeof(err)) == 0);
		unlink(path);
		free(big);
	}
	CHECK(write_file(path, good, sizeof(good) - 1) == 0);
	scribble(&c);
	CHECK(config_load(path, &c, err, sizeof(err)) == 0);
	CHECK_EQ_U(c.default_class, CLASS_BE);
	CHECK(strcmp(c.path, path) == 0);
	unlink(path);
	CHECK(config_load(NULL, &c, err, sizeof(err)) == -1);
	CHECK(config_load("", &c, err, sizeof(err)) == -1);
}

static void test_classify(void)
{
	struct agent_config c;
	enum class_source src = CLS_SRC_OVERRIDE;

	CHECK(config_parse("{\"version\": 1, \"defaultClass\": \"best-effort\", \"rules\": ["
			      "{\"exe\": \"/opt/serve/*\", \"class\": \"latency-critical\"},"
			      "{\"cgroup\": \"/system.slice/*\", \"class\": \"unmanaged\"},"
			      "{\"cgroup\": \"/system.slice/infer.scope\", \"class\": \"lc\"}]}",
			      &c, err, sizeof(err)) == 0);
	/* gpuqos run beats every rule. */
	CHECK(config_classify(&c, "/system.slice/infer.scope", "/opt/serve/bin/x", "be", &src) ==
	      CLASS_BE);
	CHECK(src == CLS_SRC_GPUQOS_RUN);
	CHECK(config_classify(&c, "/user.slice", "/bin/x", "unmanaged", &src) ==
	      CLASS_UNMANAGED);
	CHECK(src == CLS_SRC_GPUQOS_RUN);
	/* An unparsable run class is ignored, not trusted as anything. */
	CHECK(config_classify(&c, "/user.slice", "/bin/x", "platinum", &src) == CLASS_BE);
	CHECK(src == CLS_SRC_DEFAULT);
	/* First matching rule wins, in file order; `*` spans `/`. */
	CHECK(config_classify(&c, "/system.slice/infer.scope", "/bin/x", NULL, &src) ==
	      CLASS_UNMANAGED);
	CHECK(src == CLS_SRC_RULE);
	CHECK(config_classify(&c, "/system.slice/infer.scope", "/opt/serve/bin/x", NULL, &src) ==
	      CLASS_LC);
	CHECK(config_classify(&c, "/system.slice/a/b/c", NULL, NULL, &src) ==
	      CLASS_UNMANAGED);
	CHECK(src == CLS_SRC_RULE);
	/* A rule never matches an unknown subject. */
	CHECK(config_classify(&c, NULL, NULL, NULL, &src) == CLASS_BE);
	CHECK(src == CLS_SRC_DEFAULT);
	CHECK(config_classify(&c, "/opt/serve/bin/x", NULL, NULL, NULL) == CLASS_BE);
	/* Not trusted: the run class is ignored. */
	c.trust_run_class = 0;
	CHECK(config_classify(&c, "/user.slice", "/opt/serve/x", "be", &src) == CLASS_LC);
	CHECK(src == CLS_SRC_RULE);
	CHECK(config_classify(&c, "/user.slice", "/bin/x", "lc", &src) == CLASS_BE);
	CHECK(src == CLS_SRC_DEFAULT);
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";

	if (strcmp(mode, "example") == 0 && argc > 2)
		test_example(argv[2]);
	else if (strcmp(mode, "defaults") == 0)
		test_defaults();
	else if (strcmp(mode, "errors") == 0)
		test_errors();
	else if (strcmp(mode, "load") == 0)
		test_load();
	else if (strcmp(mode, "classify") == 0)
		test_classify();
	else {
		fprintf(stderr, "usage: %s example FILE | defaults | errors | load | classify\n",
			argv[0]);
		return 2;
	}
	CHECK_DONE();
}
