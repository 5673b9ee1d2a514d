/* SPDX-License-Identifier: Apache-2.0 */
/*
 * utf8.h - strings that leave a gpuqos daemon are valid UTF-8. Process
 * names, executable paths and pod fields come from outside and may hold
 * any bytes; Prometheus refuses a whole scrape over one invalid label
 * value, and a JSON reader refuses a whole document. Every invalid
 * sequence becomes U+FFFD (one per maximal invalid subpart, as Unicode
 * recommends), valid text is kept byte for byte.
 *
 * Owns: decoding (RFC 3629: no overlong forms, no surrogates, nothing
 * past U+10FFFF, no 5- or 6-byte forms), the Prometheus label-value
 * escapes, and the cleaning of a cJSON tree's strings. Does not own where
 * the strings come from or where they go.
 */
#ifndef GPUQOS_COMMON_UTF8_H
#define GPUQOS_COMMON_UTF8_H

#include <stddef.h>
#include <stdint.h>

#define UTF8_REPLACEMENT 0xFFFDu
#define UTF8_REPLACEMENT_STR "\xEF\xBF\xBD"

struct cJSON;

/* The sequence at s (n > 0 bytes): its length, 1 to 4, with *cp its code
 * point; or for an invalid one the length of its maximal invalid subpart
 * (at least 1) with *cp UTF8_REPLACEMENT and *bad set. */
size_t utf8_next(const char *s, size_t n, uint32_t *cp, int *bad);

/* 1 when the n bytes at s are valid UTF-8. */
int utf8_valid(const char *s, size_t n);

/* A malloc'd copy of s with every invalid sequence replaced; NULL when out
 * of memory. */
char *utf8_dup_valid(const char *s);

/* s as a Prometheus text-format label value (no quotes): backslash,
 * quote and newline escaped, invalid sequences replaced. Handed to
 * put(cls, bytes, n) in pieces. */
void utf8_prom_label(const char *s, void (*put)(void *cls, const char *p, size_t n), void *cls);

/* Every string in the tree (values and member names, recursively) made
 * valid UTF-8 in place, so that the JSON printed from it is: replaced by a
 * copy with U+FFFD, or when out of memory each invalid byte overwritten
 * with '?'. The number of strings changed; item may be NULL. */
int utf8_json_sanitize(struct cJSON *item);

#endif
