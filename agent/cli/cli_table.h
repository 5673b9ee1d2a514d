/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cli_table.h - column-aligned text tables and terminal-safe strings for
 * gpuqosctl. Strings in answers come from other processes (a comm, an exe
 * path, a cgroup): they are printed with control bytes replaced so that a
 * workload cannot drive the operator's terminal. Knows nothing of gpuqos.
 */
#ifndef GPUQOS_CLI_TABLE_H
#define GPUQOS_CLI_TABLE_H

#include <stdio.h>
#include <stddef.h>

struct table {
	size_t ncols;
	size_t nrows; /* header included */
	size_t cap;
	char **cells; /* nrows * ncols, each owned */
};

/* Both return 0, or -1 when out of memory (the table stays printable). */
int table_init(struct table *t, size_t ncols, const char *const *header);
int table_add(struct table *t, const char *const *cells);
/* Columns are padded to their widest cell; the last one is not padded. */
void table_print(const struct table *t, FILE *f);
void table_free(struct table *t);

/* A copy of s with C0/C1 control characters replaced by '?'; NULL on OOM. */
char *term_safe(const char *s);
/* Writes s to f as term_safe() would, without allocating. */
void put_safe(FILE *f, const char *s);

#endif
