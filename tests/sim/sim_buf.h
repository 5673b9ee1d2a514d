/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sim_buf.h - a growable text buffer for the simulator's JSON views.
 *
 * Owns: one heap string and its length. Does not own: what is written into
 * it (state.c and log.c render; gpuqos_sim.c serves the bytes).
 */
#ifndef GPUQOS_SIM_BUF_H
#define GPUQOS_SIM_BUF_H

#include <stddef.h>

struct sim_buf {
	char *data;
	size_t len;
	size_t cap;
	int failed; /* an allocation failed: the text is truncated */
};

/* Append printf-formatted text; on allocation failure sets failed. */
void sim_buf_printf(struct sim_buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void sim_buf_free(struct sim_buf *b);

#endif
