/* SPDX-License-Identifier: Apache-2.0 */
/*
 * quantity.h - sizes in whole bytes written as Kubernetes writes a
 * quantity ("16Gi", "1500M", "12345"), parsed strictly and shown exactly.
 */
#ifndef GPUQOS_COMMON_QUANTITY_H
#define GPUQOS_COMMON_QUANTITY_H

#include <stddef.h>
#include <stdint.h>

/* A size is at least 1 MiB (a smaller budget is a typo: no CUDA context
 * fits) and at most 1 PiB, so sums of many never overflow. */
#define QUANTITY_MIN (1ull << 20)
#define QUANTITY_MAX (1ull << 50)

/* Digits, then nothing (bytes) or one of Ki Mi Gi Ti Pi (powers of 1024)
 * or k M G T P (powers of 1000); QUANTITY_MIN .. QUANTITY_MAX. 0, or -1
 * with why (one phrase) filled. */
int quantity_parse(const char *s, uint64_t *out, char *why, size_t n);
/* The bytes as the shortest exact quantity; GQ_MEM_UNLIMITED (no
 * budget) as "unlimited". */
void quantity_format(uint64_t bytes, char *buf, size_t n);

#endif
