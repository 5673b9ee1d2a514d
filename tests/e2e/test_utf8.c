/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_utf8.c - common/utf8.c: what is valid UTF-8 (RFC 3629) and what
 * each kind of invalid input becomes, in a string, a Prometheus label
 * value and a cJSON tree.
 */
#include "common/utf8.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

#define R UTF8_REPLACEMENT_STR

static int valid(const char *s)
{
	return utf8_valid(s, strlen(s));
}

/* utf8_dup_valid(in) is want. */
static int dup_is(const char *in, const char *want)
{
	char *out = utf8_dup_valid(in);
	int ok = out && strcmp(out, want) == 0;

	if (!ok)
		fprintf(stderr, "utf8_dup_valid: got \"%s\", want \"%s\"\n", out ? out : "(null)", want);
	free(out);
	return ok;
}

static void test_valid_kept(void)
{
	/* 1 to 4 bytes, the edges of each length and of the planes. */
	static const char *const ok[] = {
		"", "plain ascii", "\x7f", "\xc2\x80", "\xdf\xbf", "\xe0\xa0\x80", "\xed\x9f\xbf",
		"\xee\x80\x80", "\xef\xbf\xbd", "\xf0\x90\x80\x80", "\xf4\x8f\xbf\xbf",
		"gr\xc3\xbc\xc3\x9f \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80", "tab\there",
	};

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		CHECK(valid(ok[i]));
		CHECK(dup_is(ok[i], ok[i]));
	}
}

static void test_decode(void)
{
	uint32_t cp;
	int bad;

	CHECK_EQ_U(utf8_next("\xc3\xa9", 2, &cp, &bad), 2);
	CHECK(!bad && cp == 0xE9);
	CHECK_EQ_U(utf8_next("\xe2\x82\xac", 3, &cp, &bad), 3);
	CHECK(!bad && cp == 0x20AC);
	CHECK_EQ_U(utf8_next("\xf0\x9f\x98\x80", 4, &cp, &bad), 4);
	CHECK(!bad && cp == 0x1F600);
	CHECK_EQ_U(utf8_next("\xf4\x8f\xbf\xbf", 4, &cp, &bad), 4);
	CHECK(!bad && cp == 0x10FFFF);
	/* n bounds the read: a sequence cut by n is truncated. */
	CHECK_EQ_U(utf8_next("\xe2\x82\xac", 2, &cp, &bad), 2);
	CHECK(bad && cp == UTF8_REPLACEMENT);
}

static void test_invalid(void)
{
	/* Overlong forms: of '/' in 2, 3 and 4 bytes, and of U+07FF in 3. */
	CHECK(!valid("\xc0\xaf") && dup_is("\xc0\xaf", R R));
	CHECK(!valid("\xc1\xbf"));
	CHECK(!valid("\xe0\x80\xaf") && dup_is("a\xe0\x80\xaf", "a" R R R));
	CHECK(!valid("\xe0\x9f\xbf"));
	CHECK(!valid("\xf0\x80\x80\xaf") && dup_is("\xf0\x80\x80\xaf", R R R R));
	/* Surrogates, alone and as a CESU-8 pair. */
	CHECK(!valid("\xed\xa0\x80") && dup_is("\xed\xa0\x80", R R R));
	CHECK(!valid("\xed\xbf\xbf"));
	CHECK(!valid("\xed\xa0\xbd\xed\xb8\x80"));
	/* Past U+10FFFF, and the 5- and 6-byte forms of the old UTF-8. */
	CHECK(!valid("\xf4\x90\x80\x80") && dup_is("\xf4\x90\x80\x80", R R R R));
	CHECK(!valid("\xf5\x80\x80\x80"));
	CHECK(!valid("\xf8\x88\x80\x80\x80") && dup_is("\xf8\x88\x80\x80\x80", R R R R R));
	CHECK(!valid("\xfc\x84\x80\x80\x80\x80") && dup_is("\xfc\x84\x80\x80\x80\x80", R R R R R R));
	CHECK(!valid("\xfe") && !valid("\xff") && dup_is("x\xffy", "x" R "y"));
	/* Truncated: one U+FFFD for the maximal subpart, the next character
	 * kept. */
	CHECK(!valid("\xe2\x82") && dup_is("\xe2\x82", R));
	CHECK(dup_is("\xe2\x82z", R "z"));
	CHECK(dup_is("\xf0\x9f\x98", R));
	CHECK(dup_is("\xf0\x9f\x98\xc3\xa9", R "\xc3\xa9"));
	CHECK(dup_is("\xc3", R));
	/* Stray continuation bytes, each its own. */
	CHECK(!valid("\x80") && dup_is("a\x80\xbf" "b", "a" R R "b"));
}

struct sink {
	char s[256];
	size_t n;
};

static void put(void *cls, const char *p, size_t n)
{
	struct sink *k = cls;

	if (k->n + n < sizeof(k->s)) {
		memcpy(k->s + k->n, p, n);
		k->n += n;
		k->s[k->n] = '\0';
	}
}

static int label_is(const char *in, const char *want)
{
	struct sink k = { "", 0 };

	utf8_prom_label(in, put, &k);
	if (strcmp(k.s, want) != 0) {
		fprintf(stderr, "utf8_prom_label: got \"%s\", want \"%s\"\n", k.s, want);
		return 0;
	}
	return 1;
}

static void test_prom_label(void)
{
	CHECK(label_is("", ""));
	CHECK(label_is("plain", "plain"));
	CHECK(label_is("a\"b\\c\nd\xff}e", "a\\\"b\\\\c\\nd" R "}e"));
	CHECK(label_is("\xc3\xa9t\xc3\xa9", "\xc3\xa9t\xc3\xa9"));
	CHECK(label_is("\xed\xa0\x80\n", R R R "\\n"));
}

static void test_json(void)
{
	cJSON *root = cJSON_CreateObject(), *arr = cJSON_CreateArray();
	char *s;

	cJSON_AddStringToObject(root, "comm", "a\"b\\c\nd\xff}e");
	cJSON_AddStringToObject(root, "ok", "caf\xc3\xa9");
	cJSON_AddStringToObject(root, "k\xc0\xaf", "key");
	cJSON_AddItemToArray(arr, cJSON_CreateString("\xed\xa0\x80"));
	cJSON_AddItemToArray(arr, cJSON_CreateNumber(3));
	cJSON_AddItemToObject(root, "nested", arr);
	cJSON_AddItemToObjectCS(root, "const", cJSON_CreateString("fine"));
	cJSON_AddItemToObject(root, "raw", cJSON_CreateRaw("\"r\xf8\""));
	CHECK_EQ_U(utf8_json_sanitize(root), 4);
	CHECK_EQ_U(utf8_json_sanitize(root), 0); /* now clean */
	CHECK_EQ_U(utf8_json_sanitize(NULL), 0);
	s = cJSON_PrintUnformatted(root);
	CHECK(s && valid(s));
	CHECK(s && strcmp(s, "{\"comm\":\"a\\\"b\\\\c\\nd" R "}e\",\"ok\":\"caf\xc3\xa9\","
			     "\"k" R R "\":\"key\",\"nested\":[\"" R R R "\",3],"
			     "\"const\":\"fine\",\"raw\":\"r" R "\"}") == 0);
	if (s)
		fprintf(stderr, "%s\n", s);
	free(s);
	cJSON_Delete(root);
}

int main(void)
{
	test_valid_kept();
	test_decode();
	test_invalid();
	test_prom_label();
	test_json();
	CHECK_DONE();
}
