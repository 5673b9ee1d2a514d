/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sha256.h - SHA-256 (FIPS 180-4), enough to name an installed file by
 * its content. libc only.
 */
#ifndef GPUQOS_COMMON_SHA256_H
#define GPUQOS_COMMON_SHA256_H

#include <stddef.h>
#include <stdint.h>

void sha256_digest(const void *data, size_t len, uint8_t out[32]);

#endif
