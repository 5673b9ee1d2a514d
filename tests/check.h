/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check.h - the minimal assertion kit every C unit test uses: a failed
 * CHECK prints file, line and expression and makes the test exit 1.
 */
#ifndef GPUQOS_TESTS_CHECK_H
#define GPUQOS_TESTS_CHECK_H

#include <stdio.h>
#include <stdlib.h>

static int check_failures;

#define CHECK(expr)                                                              \
	do {                                                                     \
		if (!(expr)) {                                                   \
			fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #expr); \
			check_failures++;                                        \
		}                                                                \
	} while (0)

#define CHECK_EQ_U(a, b)                                                         \
	do {                                                                     \
		unsigned long long check_a_ = (unsigned long long)(a);           \
		unsigned long long check_b_ = (unsigned long long)(b);           \
		if (check_a_ != check_b_) {                                      \
			fprintf(stderr, "%s:%d: CHECK failed: %s == %s (0x%llx != 0x%llx)\n", \
				__FILE__, __LINE__, #a, #b, check_a_, check_b_); \
			check_failures++;                                        \
		}                                                                \
	} while (0)

#define CHECK_DONE()                                                             \
	do {                                                                     \
		if (check_failures) {                                            \
			fprintf(stderr, "%d check(s) failed\n", check_failures); \
			return 1;                                                \
		}                                                                \
		printf("ok\n");                                                  \
		return 0;                                                        \
	} while (0)

#endif
