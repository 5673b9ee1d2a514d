/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpus.c - the GPU table from the RM, sysfs and procfs (gpus.h).
 */
#include "plugin/gpus.h"
#include "common/log.h"
#include "common/rmgpus.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int pgpus_sysfs_bus_id(const char *rm, char *out, size_t len)
{
	unsigned dom, bus, dev, fn;
	char tail;

	if (sscanf(rm, "%x:%x:%x.%x%c", &dom, &bus, &dev, &fn, &tail) != 4 || bus > 0xff ||
	    dev > 0x1f || fn > 7)
		return -1;
	snprintf(out, len, "%04x:%02x:%02x.%x", dom, bus, dev, fn);
	return 0;
}

int pgpus_parse_minor(const char *text)
{
	const char *p = strstr(text, "Device Minor:");
	char *end;
	long v;

	if (!p)
		return -1;
	p += strlen("Device Minor:");
	while (*p == ' ' || *p == '\t')
		p++;
	v = strtol(p, &end, 10);
	if (end == p || v < 0 || v > 255)
		return -1;
	return (int)v;
}

/* A small text file, NUL-terminated; -1 when unreadable. */
static int read_small(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "re");
	size_t n;

	if (!f)
		return -1;
	n = fread(buf, 1, len - 1, f);
	fclose(f);
	buf[n] = '\0';
	return 0;
}

static int read_numa(const struct plugin_config *c, const char *bus)
{
	char path[PATH_MAX + 64], buf[32];
	char *end;
	long v;

	snprintf(path, sizeof(path), "%s/bus/pci/devices/%s/numa_node", c->sysfs_root, bus);
	if (read_small(path, buf, sizeof(buf)) < 0)
		return -1;
	v = strtol(buf, &end, 10);
	if (end == buf || v < 0 || v > 4096)
		return -1; /* -1 in sysfs: no NUMA affinity */
	return (int)v;
}

static int read_minor(const struct plugin_config *c, const char *bus)
{
	char path[PATH_MAX + 64], buf[4096];

	snprintf(path, sizeof(path), "%s/driver/nvidia/gpus/%s/information", c->procfs_root, bus);
	if (read_small(path, buf, sizeof(buf)) < 0)
		return -1;
	return pgpus_parse_minor(buf);
}

int pgpus_discover(const struct plugin_config *c, struct pgpus *g, char *err, size_t errlen)
{
	struct gpuinfo_table *t = calloc(1, sizeof(*t));

	memset(g, 0, sizeof(*g));
	if (!t) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (gpuinfo_query(c->nvidiactl, 0, t) < 0) {
		snprintf(err, errlen, "GPU discovery: %s", t->error);
		free(t);
		return -1;
	}
	for (size_t i = 0; i < t->n && g->n < PDEV_MAX_GPUS; i++) {
		const struct gpuinfo_gpu *rg = &t->gpus[i];
		struct pgpu *p = &g->gpu[g->n];
		char bus[32];

		if (!rg->uuid[0]) {
			log_warn("GPU discovery: gpuId 0x%x has no UUID (%s); not advertised",
				 rg->gpu_id, gpuinfo_status_name(rg->status));
			continue;
		}
		snprintf(p->uuid, sizeof(p->uuid), "%s", rg->uuid);
		snprintf(p->pci_bus_id, sizeof(p->pci_bus_id), "%s", rg->pci_bus_id);
		p->numa = p->minor = -1;
		if (pgpus_sysfs_bus_id(rg->pci_bus_id, bus, sizeof(bus)) == 0) {
			p->numa = read_numa(c, bus);
			p->minor = read_minor(c, bus);
		}
		if (p->minor < 0) {
			/* no driver procfs (the simulator): the device instance is
			 * the minor on a node without MIG */
			p->minor = (int)rg->device_instance;
			log_debug("GPU %s: no Device Minor in %s/driver/nvidia; using %d", p->uuid,
				  c->procfs_root, p->minor);
		}
		p->healthy = 1;
		log_info("GPU %s: bus %s, minor %d, NUMA node %d", p->uuid,
			 p->pci_bus_id[0] ? p->pci_bus_id : "?", p->minor, p->numa);
		g->n++;
	}
	if (t->error[0])
		log_warn("GPU discovery: %s", t->error);
	free(t);
	return 0;
}
