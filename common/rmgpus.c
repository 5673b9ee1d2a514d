/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rmgpus.c - the GPUs the RM lists, with UUID and PCI bus id (rmgpus.h).
 *
 * Owns the query (its own RM client, opened and freed each time: a
 * client held open would be one more thing an RM hang could pin) and
 * the parsing of its answers. Does not own running it off a loop or
 * keeping the table: the node agent (agent/gpuinfo.c) and the device
 * plugin each do that their own way. Controls and layouts:
 * docs/gpuinfo.md.
 */
#include "common/rmgpus.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

/* ---- pure helpers ---- */

size_t gpuinfo_parse_attached(const struct rm_gpu_attached_ids *p, uint32_t *ids, size_t max)
{
	size_t n = 0;

	for (size_t i = 0; i < RM_GPU_MAX_ATTACHED && n < max; i++) {
		if (p->gpuIds[i] == RM_GPU_INVALID_ID)
			break; /* the valid entries are contiguous */
		ids[n++] = p->gpuIds[i];
	}
	return n;
}

void gpuinfo_format_uuid(const uint8_t b[RM_GPU_UUID_LEN], char out[RM_GPU_UUID_STR_LEN])
{
	snprintf(out, RM_GPU_UUID_STR_LEN,
		 "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
		 b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
		 b[14], b[15]);
}

/* "GPU-" then 8-4-4-4-12 hex digits, nothing after. */
static int uuid_is_canonical(const char *s)
{
	static const char shape[] = "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx";

	if (strncmp(s, "GPU-", 4) != 0)
		return 0;
	s += 4;
	for (size_t i = 0; i < sizeof(shape) - 1; i++) {
		if (shape[i] == '-' ? s[i] != '-' : !isxdigit((unsigned char)s[i]))
			return 0;
	}
	return s[sizeof(shape) - 1] == '\0';
}

int gpuinfo_parse_uuid(const struct rm_gpu_uuid_from_id *p, uint32_t flags,
		       char out[RM_GPU_UUID_STR_LEN])
{
	out[0] = '\0';
	if ((flags & RM_GPU_UUID_FLAGS_FORMAT_MASK) == RM_GPU_UUID_FLAGS_FORMAT_BINARY) {
		if (p->uuidStrLen != RM_GPU_UUID_LEN)
			return -1;
		gpuinfo_format_uuid(p->gpuUuid, out);
		return 0;
	}
	/* ASCII: uuidStrLen counts the NUL (41); accept it without, too. */
	if (p->uuidStrLen < RM_GPU_UUID_STR_LEN - 1 || p->uuidStrLen > RM_GPU_UUID_STR_LEN)
		return -1;
	char s[RM_GPU_UUID_STR_LEN];
	memcpy(s, p->gpuUuid, RM_GPU_UUID_STR_LEN - 1);
	s[RM_GPU_UUID_STR_LEN - 1] = '\0';
	if (!uuid_is_canonical(s))
		return -1;
	for (char *c = s + 4; *c; c++) /* the RM writes lower case; nvidia-smi too */
		*c = (char)tolower((unsigned char)*c);
	memcpy(out, s, RM_GPU_UUID_STR_LEN);
	return 0;
}

void gpuinfo_format_pci(const struct rm_gpu_pci_info *p, char *out, size_t len)
{
	snprintf(out, len, "%08x:%02x:%02x.0", p->domain, p->bus & 0xffu, p->slot & 0xffu);
}

const char *gpuinfo_status_name(uint32_t status)
{
	switch (status) {
	case RM_ERR_OBJECT_NOT_FOUND:
		return "NV_ERR_OBJECT_NOT_FOUND";
	case 0x1e:
		return "NV_ERR_INVALID_ADDRESS";
	case 0x29:
		return "NV_ERR_INVALID_FLAGS";
	case 0x59:
		return "NV_ERR_OPERATING_SYSTEM";
	default:
		return rm_status_name(status);
	}
}

const struct gpuinfo_gpu *gpuinfo_table_find(const struct gpuinfo_table *t,
					     uint32_t device_instance)
{
	for (size_t i = 0; i < t->n; i++)
		if (t->gpus[i].device_instance == device_instance)
			return &t->gpus[i];
	return NULL;
}

/* ---- the query ---- */

/* One open of the control device with the agent's own client on it. */
struct rmconn {
	const char *dev;
	int fd;
	rm_handle client;
	struct gpuinfo_table *t;
};

__attribute__((format(printf, 2, 3))) static void fail(struct gpuinfo_table *t,
							const char *fmt, ...)
{
	va_list ap;

	if (t->error[0])
		return; /* keep the first: later ones usually follow from it */
	va_start(ap, fmt);
	vsnprintf(t->error, sizeof(t->error), fmt, ap);
	va_end(ap);
}

/* A control on the client itself. Returns the RM status, or -1 (with the
 * failure recorded) when ioctl() itself failed. */
static int64_t rm_control(struct rmconn *c, uint32_t cmd, void *params, uint32_t size)
{
	struct rm_control_params p;

	memset(&p, 0, sizeof(p));
	p.hClient = c->client;
	p.hObject = c->client;
	p.cmd = cmd;
	p.params = (rm_u64)(uintptr_t)params;
	p.paramsSize = size;
	if (ioctl(c->fd, RM_IOCTL_CONTROL, &p) != 0) {
		fail(c->t, "%s: RM control 0x%x on client 0x%x: ioctl: %s", c->dev, cmd, c->client,
		     strerror(errno));
		return -1;
	}
	return p.status;
}

/* Open the device and allocate a client with a handle the RM picks
 * (NVOS64, hObjectNew 0: what libcuda does). */
static int rm_open(struct rmconn *c)
{
	struct rm_alloc64_params a;

	c->fd = open(c->dev, O_RDWR | O_CLOEXEC);
	if (c->fd < 0) {
		fail(c->t, "open %s: %s", c->dev, strerror(errno));
		return -1;
	}
	memset(&a, 0, sizeof(a));
	a.hClass = RM_CLASS_ROOT_CLIENT;
	if (ioctl(c->fd, RM_IOCTL_ALLOC64, &a) != 0) {
		fail(c->t, "%s: allocating an RM client: ioctl: %s", c->dev, strerror(errno));
		return -1;
	}
	if (a.status != RM_OK) {
		fail(c->t, "%s: allocating an RM client: %s (0x%x)", c->dev,
		     gpuinfo_status_name(a.status), a.status);
		return -1;
	}
	c->client = a.hObjectNew;
	return 0;
}

static void rm_close(struct rmconn *c)
{
	struct rm_free_params f;

	if (c->client) {
		memset(&f, 0, sizeof(f));
		f.hRoot = f.hObjectParent = f.hObjectOld = c->client;
		if (ioctl(c->fd, RM_IOCTL_FREE, &f) != 0 || f.status != RM_OK)
			fail(c->t, "%s: freeing RM client 0x%x: %s", c->dev, c->client,
			     f.status ? gpuinfo_status_name(f.status) : strerror(errno));
	}
	/* Closing the file frees the client anyway (release). */
	if (c->fd >= 0 && close(c->fd) != 0)
		fail(c->t, "close %s: %s", c->dev, strerror(errno));
}

/* ASCII first (the RM's own spelling); the binary form if that fails. */
static void query_uuid(struct rmconn *c, struct gpuinfo_gpu *g)
{
	static const uint32_t forms[] = { RM_GPU_UUID_FLAGS_FORMAT_ASCII,
					  RM_GPU_UUID_FLAGS_FORMAT_BINARY };
	struct rm_gpu_uuid_from_id u;
	int64_t st = 0;

	for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); i++) {
		memset(&u, 0, sizeof(u));
		u.gpuId = g->gpu_id;
		u.flags = forms[i];
		st = rm_control(c, RM_CTRL_GPU_GET_UUID_FROM_GPU_ID, &u, sizeof(u));
		if (st < 0)
			return;
		if (st == RM_OK && gpuinfo_parse_uuid(&u, forms[i], g->uuid) == 0)
			return;
	}
	g->status = st ? (uint32_t)st : RM_ERR_INVALID_PARAM_STRUCT;
	fail(c->t, "%s: GET_UUID_FROM_GPU_ID (0x%x) for gpuId 0x%x: %s (0x%x)", c->dev,
	     RM_CTRL_GPU_GET_UUID_FROM_GPU_ID, g->gpu_id,
	     st ? gpuinfo_status_name((uint32_t)st) : "answer is not a GPU UUID", (uint32_t)st);
}

/* Cheap and optional: a missing bus id is no failure of the table. */
static void query_pci(struct rmconn *c, struct gpuinfo_gpu *g)
{
	struct rm_gpu_pci_info p;

	memset(&p, 0, sizeof(p));
	p.gpuId = g->gpu_id;
	if (rm_control(c, RM_CTRL_GPU_GET_PCI_INFO, &p, sizeof(p)) == RM_OK)
		gpuinfo_format_pci(&p, g->pci_bus_id, sizeof(g->pci_bus_id));
}

/* One GPU: its device instance, then UUID and bus id. 0 if it has a
 * device instance (and so a row in the table). */
static int query_gpu(struct rmconn *c, uint32_t gpu_id, struct gpuinfo_gpu *g)
{
	struct rm_gpu_id_info_v2 info;
	int64_t st;

	memset(g, 0, sizeof(*g));
	memset(&info, 0, sizeof(info));
	g->gpu_id = info.gpuId = gpu_id;
	st = rm_control(c, RM_CTRL_GPU_GET_ID_INFO_V2, &info, sizeof(info));
	if (st != RM_OK) {
		if (st > 0)
			fail(c->t, "%s: GET_ID_INFO_V2 (0x%x) for gpuId 0x%x: %s (0x%x)", c->dev,
			     RM_CTRL_GPU_GET_ID_INFO_V2, gpu_id, gpuinfo_status_name((uint32_t)st),
			     (uint32_t)st);
		return -1;
	}
	g->device_instance = info.deviceInstance;
	g->subdevice_instance = info.subDeviceInstance;
	query_uuid(c, g);
	query_pci(c, g);
	return 0;
}

static void query_all(struct rmconn *c)
{
	struct rm_gpu_attached_ids ids;
	uint32_t gpu_ids[RM_GPU_MAX_ATTACHED];
	size_t n;
	int64_t st;

	memset(&ids, 0xff, sizeof(ids));
	st = rm_control(c, RM_CTRL_GPU_GET_ATTACHED_IDS, &ids, sizeof(ids));
	if (st != RM_OK) {
		if (st > 0)
			fail(c->t, "%s: GET_ATTACHED_IDS (0x%x): %s (0x%x)", c->dev,
			     RM_CTRL_GPU_GET_ATTACHED_IDS, gpuinfo_status_name((uint32_t)st),
			     (uint32_t)st);
		return;
	}
	c->t->listed = 1;
	n = gpuinfo_parse_attached(&ids, gpu_ids, RM_GPU_MAX_ATTACHED);
	for (size_t i = 0; i < n; i++)
		if (query_gpu(c, gpu_ids[i], &c->t->gpus[c->t->n]) == 0)
			c->t->n++;
}

int gpuinfo_query(const char *dev, struct gpuinfo_table *t)
{
	struct rmconn c = { .dev = dev, .fd = -1, .client = 0, .t = t };

	memset(t, 0, sizeof(*t));
	if (rm_open(&c) == 0)
		query_all(&c);
	rm_close(&c);
	return t->listed ? 0 : -1;
}
