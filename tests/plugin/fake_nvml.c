/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fake_nvml.c - the few NVML functions the device plugin's health watch
 * dlopens (plugin/health.c), driven by a file: each line
 * "<GPU UUID> <XID>" appended to $FAKE_NVML_EVENTS becomes one XID event
 * on that GPU. A test library only; it knows nothing of a real GPU.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_DEV 32
#define NVML_SUCCESS 0
#define NVML_ERROR_NOT_FOUND 6
#define NVML_ERROR_TIMEOUT 10

struct event {
	void *device;
	unsigned long long type, data;
	unsigned gpu_instance, compute_instance;
};

static char uuids[MAX_DEV][96];
static int n_dev;
static long offset;

int nvmlInit_v2(void)
{
	return NVML_SUCCESS;
}

int nvmlShutdown(void)
{
	return NVML_SUCCESS;
}

/* Handles are 1-based indexes into uuids. */
int nvmlDeviceGetHandleByUUID(const char *uuid, void **dev)
{
	for (int i = 0; i < n_dev; i++)
		if (strcmp(uuids[i], uuid) == 0) {
			*dev = (void *)(long)(i + 1);
			return NVML_SUCCESS;
		}
	if (n_dev == MAX_DEV)
		return NVML_ERROR_NOT_FOUND;
	snprintf(uuids[n_dev], sizeof(uuids[0]), "%s", uuid);
	*dev = (void *)(long)(++n_dev);
	return NVML_SUCCESS;
}

int nvmlEventSetCreate(void **set)
{
	*set = (void *)1;
	return NVML_SUCCESS;
}

int nvmlDeviceRegisterEvents(void *dev, unsigned long long types, void *set)
{
	return NVML_SUCCESS;
}

int nvmlEventSetFree(void *set)
{
	return NVML_SUCCESS;
}

/* The next unread line of the events file, if any. */
static int next_line(char *line, size_t len)
{
	const char *path = getenv("FAKE_NVML_EVENTS");
	FILE *f = path ? fopen(path, "re") : NULL;
	int got = 0;

	if (!f)
		return 0;
	if (fseek(f, offset, SEEK_SET) == 0 && fgets(line, (int)len, f) && strchr(line, '\n')) {
		offset = ftell(f);
		got = 1;
	}
	fclose(f);
	return got;
}

int nvmlEventSetWait_v2(void *set, struct event *ev, unsigned timeout_ms)
{
	char line[256], uuid[96];
	unsigned long long xid;
	struct timespec step = { 0, 20 * 1000000L };

	for (unsigned waited = 0; waited <= timeout_ms; waited += 20) {
		while (next_line(line, sizeof(line))) {
			if (sscanf(line, "%95s %llu", uuid, &xid) != 2)
				continue;
			for (int i = 0; i < n_dev; i++)
				if (strcmp(uuids[i], uuid) == 0) {
					memset(ev, 0, sizeof(*ev));
					ev->device = (void *)(long)(i + 1);
					ev->type = 0x8; /* nvmlEventTypeXidCriticalError */
					ev->data = xid;
					return NVML_SUCCESS;
				}
		}
		nanosleep(&step, NULL);
	}
	return NVML_ERROR_TIMEOUT;
}
