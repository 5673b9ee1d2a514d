/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cli_opt.h - the one option form both command-line tools accept for
 * options with a value: "--name VALUE" or "--name=VALUE". Libc only (gpuqos
 * itself links nothing else). Does not own: reporting errors.
 */
#ifndef GPUQOS_CLI_OPT_H
#define GPUQOS_CLI_OPT_H

/* At argv[*i]: 1 matched (value in *val, *i advanced past it), 0 not this
 * option, -1 matched but the value is missing (the caller reports it). */
int cli_opt_value(int argc, char **argv, int *i, const char *name, const char **val);

#endif
