/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpus_main.c - gpuqos-gpus: runs the node agent's GPU identity query
 * (agent/gpuinfo.c) once, synchronously, and prints the device instance ->
 * UUID table as one JSON object, so it can be compared with
 * `nvidia-smi -L` on a machine with GPUs (docs/gpuinfo.md).
 *
 *   gpuqos-gpus [--dev PATH]      (default /dev/nvidiactl)
 *
 * {"dev":PATH,"ok":true,"error":null,"gpus":[{"deviceInstance":0,
 *  "subDeviceInstance":0,"gpuId":"0x6","uuid":"GPU-...","pciBusId":"..."}]}
 *
 * Owns: the command line and the output. Does not own the query. Exit
 * status: 0 when the list was read (a GPU may still lack a UUID; "error"
 * says why), 1 when nothing could be read, 2 for a usage error.
 */
#include "agent/io/gpuinfo.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int usage(void)
{
	fprintf(stderr, "usage: gpuqos-gpus [--dev PATH]\n");
	return 2;
}

static int print_table(const char *dev, const struct gpuinfo_table *t, int ok)
{
	cJSON *o = cJSON_CreateObject();
	char *s;

	if (!o)
		return -1;
	cJSON_AddStringToObject(o, "dev", dev);
	cJSON_AddBoolToObject(o, "ok", ok);
	if (t->error[0])
		cJSON_AddStringToObject(o, "error", t->error);
	else
		cJSON_AddNullToObject(o, "error");
	cJSON_AddItemToObject(o, "gpus", gpuinfo_table_json(t));
	s = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	if (!s)
		return -1;
	printf("%s\n", s);
	free(s);
	return fflush(stdout) == 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
	const char *dev = "/dev/nvidiactl";
	struct gpuinfo_table *t;
	int ok;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--dev") == 0 && i + 1 < argc)
			dev = argv[++i];
		else
			return usage();
	}
	t = malloc(sizeof(*t));
	if (!t) {
		fprintf(stderr, "gpuqos-gpus: out of memory\n");
		return 1;
	}
	ok = gpuinfo_query(dev, GPUINFO_Q_MEMORY, t) == 0;
	if (print_table(dev, t, ok) != 0) {
		fprintf(stderr, "gpuqos-gpus: cannot write the table\n");
		ok = 0;
	}
	if (t->error[0])
		fprintf(stderr, "gpuqos-gpus: %s\n", t->error);
	free(t);
	return ok ? 0 : 1;
}
