/* SPDX-License-Identifier: Apache-2.0 */
/*
 * preload_stub.c - a harmless shared object the cli tests put into
 * LD_PRELOAD (in place of the preempt library, and as a user's own entry),
 * so that ld.so loads something real without gpuqos' preempt agent.
 */
int gpuqos_cli_preload_stub(void);

int gpuqos_cli_preload_stub(void)
{
	return 0;
}
