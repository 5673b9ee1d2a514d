/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_procstat.c - common/procstat.c on its own: the start time (field
 * 22) and comm of stat lines whose comm holds spaces and parentheses,
 * lines that are not stat lines refused, and this process's own start
 * time read from /proc as /proc has it.
 */
#include "common/procstat.h"
#include "tests/check.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* A stat line of comm with starttime st: fields 3..21 as a kernel writes them. */
static void line(char *buf, size_t n, const char *comm, unsigned long long st)
{
	snprintf(buf, n, "4242 (%s) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 %llu "
		 "123456 789 18446744073709551615\n", comm, st);
}

static void test_parse(void)
{
	static const char *const comms[] = { "fakecuda", "a b", "x) S 1 2 (y", ")", "" };
	char buf[512], comm[16];
	uint64_t st;

	for (size_t i = 0; i < sizeof(comms) / sizeof(comms[0]); i++) {
		line(buf, sizeof(buf), comms[i], 987654321ull + i);
		st = 0;
		CHECK(procstat_parse(buf, &st, comm, sizeof(comm)) == 0);
		CHECK_EQ_U(st, 987654321ull + i);
		CHECK(strcmp(comm, comms[i]) == 0);
	}
	/* A comm longer than the buffer is cut, the start time still found. */
	line(buf, sizeof(buf), "a-name-of-twenty-chars", 5);
	CHECK(procstat_parse(buf, &st, comm, sizeof(comm)) == 0 && st == 5);
	CHECK(strcmp(comm, "a-name-of-twent") == 0);
	CHECK(procstat_parse(buf, &st, NULL, 0) == 0 && st == 5);
	/* Not stat lines: no parentheses, or too few fields after them. */
	CHECK(procstat_parse("4242 fakecuda S 1", &st, NULL, 0) == -1);
	CHECK(procstat_parse("4242 (fakecuda) S 1 2 3", &st, NULL, 0) == -1);
	CHECK(procstat_parse(")(", &st, NULL, 0) == -1);
}

static void test_self(void)
{
	char path[64], buf[4096], *close;
	unsigned long long want = 0;
	uint64_t st = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)getpid());
	f = fopen(path, "r");
	CHECK(f != NULL);
	if (!f)
		return;
	CHECK(fgets(buf, sizeof(buf), f) != NULL);
	fclose(f);
	/* Field 22 counted by hand: the 20th after the last ')'. */
	close = strrchr(buf, ')');
	CHECK(close && sscanf(close + 2, "%*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s "
			      "%*s %*s %*s %*s %*s %llu", &want) == 1);
	CHECK(procstat_starttime(getpid(), &st) == 0);
	CHECK_EQ_U(st, want);
	errno = 0;
	CHECK(procstat_starttime(0x7ffffff0, &st) == -1 && errno == ENOENT);
}

int main(void)
{
	test_parse();
	test_self();
	CHECK_DONE();
}
