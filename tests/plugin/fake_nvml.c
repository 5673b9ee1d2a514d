/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fake_nvml.c - the few NVML functions the device plugin's health watch
 * dlopens (plugin/health.c), driven by a file: each line
 * "<GPU UUID> <XID>" appended to $FAKE_NVML_EVENTS becomes one XID event
 * on that GPU; "lost <GPU UUID>" makes that GPU gone (nvmlEventSetWait
 * and its nvmlDeviceGetMemoryInfo say GPU_IS_LOST) and "found <GPU UUID>"
 * brings it back; "lost *" / "found *" make the wait say GPU_IS_LOST
 * while every GPU still answers (NVML cannot tell which is gone). A test
 * library only; it knows nothing of a real GPU.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_DEV 32
#define NVML_SUCCESS 0
#define NVML_ERROR_NOT_FOUND 6
#define NVML_ERROR_TIMEOUT 10
#define NVML_ERROR_GPU_IS_LOST 15

struct event {
	void *device;
	unsigned long long type, data;
	unsigned gpu_instance, compute_instance;
};

struct memory {
	unsigned long long total, free, used;
};

static char uuids[MAX_DEV][96];
static int lost[MAX_DEV], lost_any;
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

int nvmlDeviceGetMemoryInfo(void *dev, struct memory *m)
{
	long i = (long)dev - 1;

	if (i < 0 || i >= n_dev)
		return NVML_ERROR_NOT_FOUND;
	if (lost[i])
		return NVML_ERROR_GPU_IS_LOST;
	m->total = 16ull << 30;
	m->free = m->total;
	m->used = 0;
	return NVML_SUCCESS;
}

/* "lost X" / "found X": 1 when line was one. */
static int lost_line(const char *line)
{
	char word[16], uuid[96];
	int on;

	if (sscanf(line, "%15s %95s", word, uuid) != 2)
		return 0;
	if (strcmp(word, "lost") != 0 && strcmp(word, "found") != 0)
		return 0;
	on = word[0] == 'l';
	if (strcmp(uuid, "*") == 0)
		lost_any = on;
	for (int i = 0; i < n_dev; i++)
		if (strcmp(uuids[i], uuid) == 0)
			lost[i] = on;
	return 1;
}

static int any_lost(void)
{
	int any = lost_any;

	for (int i = 0; i < n_dev; i++)
		any |= lost[i];
	return any;
}

int nvmlEventSetWait_v2(void *set, struct event *ev, unsigned timeout_ms)
{
	char line[256], uuid[96];
	unsigned long long xid;
	struct timespec step = { 0, 20 * 1000000L };

	for (unsigned waited = 0; waited <= timeout_ms; waited += 20) {
		while (next_line(line, sizeof(line))) {
			if (lost_line(line) || sscanf(line, "%95s %llu", uuid, &xid) != 2)
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
		/* like NVML: every wait says so while a GPU is gone */
		if (any_lost())
			return NVML_ERROR_GPU_IS_LOST;
		nanosleep(&step, NULL);
	}
	return NVML_ERROR_TIMEOUT;
}
