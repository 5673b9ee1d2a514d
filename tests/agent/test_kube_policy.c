/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_kube_policy.c - unit tests of the policy file's Kubernetes field,
 * "kubernetes": {"defaultClass": ...} (agent/config.c): its default, the
 * class names it takes, and the refusals an operator reads. No cluster.
 */
#include <string.h>

#include "agent/core/config.h"
#include "tests/check.h"

static int parse(const char *text, struct agent_config *c, char *err, size_t errlen)
{
	config_defaults(c);
	err[0] = '\0';
	return config_parse(text, c, err, errlen);
}

static void test_default(void)
{
	static struct agent_config c;
	char err[512];

	CHECK(parse("{\"version\": 1}", &c, err, sizeof(err)) == 0);
	/* BE unless configured; the standalone default stays unmanaged. */
	CHECK_EQ_U(c.k8s_default_class, CLASS_BE);
	CHECK_EQ_U(c.default_class, CLASS_UNMANAGED);
}

static void test_values(void)
{
	static const struct {
		const char *json;
		enum qos_class want;
	} ok[] = {
		{ "{\"version\":1,\"kubernetes\":{\"defaultClass\":\"best-effort\"}}", CLASS_BE },
		{ "{\"version\":1,\"kubernetes\":{\"defaultClass\":\"latency-critical\"}}", CLASS_LC },
		{ "{\"version\":1,\"kubernetes\":{\"defaultClass\":\"unmanaged\"}}", CLASS_UNMANAGED },
		{ "{\"version\":1,\"kubernetes\":{}}", CLASS_BE },
	};
	static struct agent_config c;
	char err[512];

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		CHECK(parse(ok[i].json, &c, err, sizeof(err)) == 0);
		CHECK_EQ_U(c.k8s_default_class, ok[i].want);
	}
}

static void test_refused(void)
{
	static const struct {
		const char *json, *says;
	} bad[] = {
		{ "{\"version\":1,\"kubernetes\":{\"defaultClass\":\"gold\"}}",
		  "field \"kubernetes.defaultClass\"" },
		{ "{\"version\":1,\"kubernetes\":{\"defaultclass\":\"best-effort\"}}",
		  "field \"kubernetes\" has unknown key \"defaultclass\"" },
		{ "{\"version\":1,\"kubernetes\":\"best-effort\"}", "field \"kubernetes\" must be an object" },
		{ "{\"version\":1,\"kubernetes\":{\"defaultClass\":1}}", "must be a string" },
	};
	static struct agent_config c;
	char err[512];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CHECK(parse(bad[i].json, &c, err, sizeof(err)) == -1);
		if (!strstr(err, bad[i].says))
			fprintf(stderr, "error %zu: %s\n", i, err);
		CHECK(strstr(err, bad[i].says) != NULL);
	}
}

int main(void)
{
	test_default();
	test_values();
	test_refused();
	CHECK_DONE();
}
