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
#include <dirent.h>
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

/* One open of the control device with the agent's own client on it, and
 * the GPUs' device nodes held open while it asks about their memory. */
struct rmconn {
	const char *dev;
	int fd;
	rm_handle client;
	struct gpuinfo_table *t; /* the GPU table being read, or NULL */
	char *error;             /* the first failure of the connection, in words */
	size_t error_len;
	int nodes[RM_GPU_MAX_ATTACHED];
	size_t nnodes;
};

/* Handles of the objects the client allocates, chosen by the caller as
 * libcuda does: a device and its subdevice per GPU, freed at once. */
#define RMGPUS_HANDLE_BASE 0x5c00f000u

__attribute__((format(printf, 2, 3))) static void fail(struct rmconn *c, const char *fmt, ...)
{
	va_list ap;

	if (c->error[0])
		return; /* keep the first: later ones usually follow from it */
	va_start(ap, fmt);
	vsnprintf(c->error, c->error_len, fmt, ap);
	va_end(ap);
}

/* A control on object obj of the client: the RM status, or -errno when
 * ioctl() itself failed. */
static int64_t rm_control_on(struct rmconn *c, rm_handle obj, uint32_t cmd, void *params,
			     uint32_t size)
{
	struct rm_control_params p;

	memset(&p, 0, sizeof(p));
	p.hClient = c->client;
	p.hObject = obj;
	p.cmd = cmd;
	p.params = (rm_u64)(uintptr_t)params;
	p.paramsSize = size;
	if (ioctl(c->fd, RM_IOCTL_CONTROL, &p) != 0)
		return -(int64_t)errno;
	return p.status;
}

/* A control on the client itself. Returns the RM status, or -1 (with the
 * failure recorded) when ioctl() itself failed. */
static int64_t rm_control(struct rmconn *c, uint32_t cmd, void *params, uint32_t size)
{
	int64_t st = rm_control_on(c, c->client, cmd, params, size);

	if (st < 0) {
		fail(c, "%s: RM control 0x%x on client 0x%x: ioctl: %s", c->dev, cmd, c->client,
		     strerror((int)-st));
		return -1;
	}
	return st;
}

/* Allocate object h of class cls under parent: the RM status, or -errno. */
static int64_t rm_alloc_obj(struct rmconn *c, rm_handle parent, rm_handle h, uint32_t cls,
			    void *params, uint32_t size)
{
	struct rm_alloc64_params a;

	memset(&a, 0, sizeof(a));
	a.hRoot = c->client;
	a.hObjectParent = parent;
	a.hObjectNew = h;
	a.hClass = cls;
	a.pAllocParms = (rm_u64)(uintptr_t)params;
	a.paramsSize = size;
	if (ioctl(c->fd, RM_IOCTL_ALLOC64, &a) != 0)
		return -(int64_t)errno;
	return a.status;
}

/* Free h and what hangs under it; a failure only leaves it to the
 * client's free. */
static void rm_free_obj(struct rmconn *c, rm_handle parent, rm_handle h)
{
	struct rm_free_params f;

	memset(&f, 0, sizeof(f));
	f.hRoot = c->client;
	f.hObjectParent = parent;
	f.hObjectOld = h;
	(void)ioctl(c->fd, RM_IOCTL_FREE, &f);
}

/* Open the device and allocate a client with a handle the RM picks
 * (NVOS64, hObjectNew 0: what libcuda does). */
static int rm_open(struct rmconn *c)
{
	struct rm_alloc64_params a;

	c->fd = open(c->dev, O_RDWR | O_CLOEXEC);
	if (c->fd < 0) {
		fail(c, "open %s: %s", c->dev, strerror(errno));
		return -1;
	}
	memset(&a, 0, sizeof(a));
	a.hClass = RM_CLASS_ROOT_CLIENT;
	if (ioctl(c->fd, RM_IOCTL_ALLOC64, &a) != 0) {
		fail(c, "%s: allocating an RM client: ioctl: %s", c->dev, strerror(errno));
		return -1;
	}
	if (a.status != RM_OK) {
		fail(c, "%s: allocating an RM client: %s (0x%x)", c->dev,
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
			fail(c, "%s: freeing RM client 0x%x: %s", c->dev, c->client,
			     f.status ? gpuinfo_status_name(f.status) : strerror(errno));
	}
	/* Closing the file frees the client anyway (release). */
	if (c->fd >= 0 && close(c->fd) != 0)
		fail(c, "close %s: %s", c->dev, strerror(errno));
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
	fail(c, "%s: GET_UUID_FROM_GPU_ID (0x%x) for gpuId 0x%x: %s (0x%x)", c->dev,
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

/* The GPUs' own device nodes, "nvidia" and a minor number in the control
 * device's directory: a user client may allocate a GPU's device object
 * only while its process holds that GPU's node open (the RM's
 * deviceConstruct: osIsGpuAccessible, NV_ERR_INSUFFICIENT_PERMISSIONS
 * otherwise). Which node is which GPU does not matter: all are held for
 * the query. One that cannot be opened is left out (its GPU then says
 * why it has no size). */
static void nodes_open(struct rmconn *c)
{
	char dir[4096];
	const char *slash = strrchr(c->dev, '/');
	struct dirent *e;
	DIR *d;

	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - c->dev) ? (int)(slash - c->dev) : 1,
			 c->dev);
	d = opendir(dir);
	if (!d)
		return;
	while (c->nnodes < RM_GPU_MAX_ATTACHED && (e = readdir(d)) != NULL) {
		const char *n = e->d_name;
		size_t digits;
		char path[4096 + 16];
		int fd;

		if (strncmp(n, "nvidia", 6) != 0)
			continue;
		digits = strspn(n + 6, "0123456789");
		if (digits == 0 || digits > 3 || n[6 + digits])
			continue;
		if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, n) >= sizeof(path))
			continue;
		fd = open(path, O_RDWR | O_CLOEXEC | O_NONBLOCK);
		if (fd >= 0)
			c->nodes[c->nnodes++] = fd;
	}
	closedir(d);
}

static void nodes_close(struct rmconn *c)
{
	for (size_t i = 0; i < c->nnodes; i++)
		close(c->nodes[i]);
	c->nnodes = 0;
}

/* what, and st (an RM status, or -errno) in words. */
static void status_words(char *out, size_t len, const char *what, int64_t st)
{
	if (st < 0)
		snprintf(out, len, "%s: ioctl: %s", what, strerror((int)-st));
	else
		snprintf(out, len, "%s: %s (0x%x)%s", what, gpuinfo_status_name((uint32_t)st),
			 (uint32_t)st,
			 st == RM_ERR_INSUFFICIENT_PERMISSIONS ? ", its /dev/nvidiaN not open" : "");
}

/* A device of instance di (NV0080_ALLOC_PARAMETERS.deviceId) and its
 * subdevice (subDeviceId 0, the device's only one) on the client, with
 * handles of slot's own: the subdevice, or 0 with why in err. The device
 * is freed (with the subdevice) by subdevice_close. */
static rm_handle subdevice_open(struct rmconn *c, uint32_t di, size_t slot, char *err,
				size_t len)
{
	rm_handle dev = RMGPUS_HANDLE_BASE + (rm_handle)slot * 4u, sub = dev + 1u;
	struct rm_device_alloc dp;
	uint32_t sub_id = 0;
	int64_t st;

	memset(&dp, 0, sizeof(dp));
	dp.deviceId = di;
	st = rm_alloc_obj(c, c->client, dev, RM_CLASS_DEVICE, &dp, sizeof(dp));
	if (st != RM_OK) {
		status_words(err, len, "allocating its device (class 0x80)", st);
		return 0;
	}
	st = rm_alloc_obj(c, dev, sub, RM_CLASS_SUBDEVICE, &sub_id, sizeof(sub_id));
	if (st != RM_OK) {
		status_words(err, len, "allocating its subdevice (class 0x2080)", st);
		rm_free_obj(c, c->client, dev);
		return 0;
	}
	return sub;
}

static void subdevice_close(struct rmconn *c, size_t slot)
{
	rm_free_obj(c, c->client, RMGPUS_HANDLE_BASE + (rm_handle)slot * 4u);
}

/* The size of the GPU's heap: FB_GET_INFO_V2 (HEAP_SIZE, KiB) on a
 * subdevice of our own. index: the row, for handles no other row uses. */
static void query_fb(struct rmconn *c, struct gpuinfo_gpu *g, size_t index)
{
	rm_handle sub = subdevice_open(c, g->device_instance, index, g->fb_error,
				       sizeof(g->fb_error));
	struct rm_fb_info_v2 fb;
	int64_t st;

	if (!sub)
		return;
	memset(&fb, 0, sizeof(fb));
	fb.fbInfoListSize = 1;
	fb.fbInfoList[0].index = RM_FB_INFO_HEAP_SIZE;
	st = rm_control_on(c, sub, RM_CTRL_FB_GET_INFO_V2, &fb, sizeof(fb));
	if (st != RM_OK)
		status_words(g->fb_error, sizeof(g->fb_error), "FB_GET_INFO_V2 (0x20801303)", st);
	else if (fb.fbInfoList[0].index != RM_FB_INFO_HEAP_SIZE || fb.fbInfoList[0].data == 0)
		snprintf(g->fb_error, sizeof(g->fb_error),
			 "FB_GET_INFO_V2 (0x20801303): no heap size in the answer");
	else
		g->fb_heap_bytes = (uint64_t)fb.fbInfoList[0].data << 10;
	subdevice_close(c, index);
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
			fail(c, "%s: GET_ID_INFO_V2 (0x%x) for gpuId 0x%x: %s (0x%x)", c->dev,
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

static void query_all(struct rmconn *c, unsigned flags)
{
	struct rm_gpu_attached_ids ids;
	uint32_t gpu_ids[RM_GPU_MAX_ATTACHED];
	size_t n;
	int64_t st;

	memset(&ids, 0xff, sizeof(ids));
	st = rm_control(c, RM_CTRL_GPU_GET_ATTACHED_IDS, &ids, sizeof(ids));
	if (st != RM_OK) {
		if (st > 0)
			fail(c, "%s: GET_ATTACHED_IDS (0x%x): %s (0x%x)", c->dev,
			     RM_CTRL_GPU_GET_ATTACHED_IDS, gpuinfo_status_name((uint32_t)st),
			     (uint32_t)st);
		return;
	}
	c->t->listed = 1;
	n = gpuinfo_parse_attached(&ids, gpu_ids, RM_GPU_MAX_ATTACHED);
	for (size_t i = 0; i < n; i++)
		if (query_gpu(c, gpu_ids[i], &c->t->gpus[c->t->n]) == 0)
			c->t->n++;
	if (!(flags & GPUINFO_Q_MEMORY))
		return;
	nodes_open(c);
	for (size_t i = 0; i < c->t->n; i++)
		query_fb(c, &c->t->gpus[i], i);
	nodes_close(c);
}

int gpuinfo_query(const char *dev, unsigned flags, struct gpuinfo_table *t)
{
	struct rmconn c = {
		.dev = dev, .fd = -1, .client = 0, .t = t, .error = t->error,
		.error_len = sizeof(t->error)
	};

	memset(t, 0, sizeof(*t));
	if (rm_open(&c) == 0)
		query_all(&c, flags);
	rm_close(&c);
	return t->listed ? 0 : -1;
}

/* ---- the processes on each GPU ---- */

long gpuprocs_parse_pids(const struct rm_gpu_get_pids *p, uint32_t self, uint32_t *out,
			 size_t max, uint32_t *listed)
{
	size_t n = 0;

	*listed = 0;
	if (p->pidTblCount > RM_GPU_GET_PIDS_MAX)
		return -1;
	for (uint32_t i = 0; i < p->pidTblCount; i++) {
		if (p->pidTbl[i] == 0 || p->pidTbl[i] == self)
			continue;
		(*listed)++;
		if (n < max)
			out[n++] = p->pidTbl[i];
	}
	return (long)n;
}

/* GET_PID_INFO for the pids of g in lists of at most 200: the entries
 * answered NV_OK are kept with their memory. -1 when a list was refused
 * (g->error says how). */
static int query_pid_info(struct rmconn *c, rm_handle sub, const uint32_t *pids, size_t n,
			  struct gpuprocs_gpu *g, struct rm_gpu_get_pid_info *info)
{
	for (size_t at = 0; at < n; at += RM_GPU_GET_PID_INFO_MAX) {
		size_t k = n - at < RM_GPU_GET_PID_INFO_MAX ? n - at : RM_GPU_GET_PID_INFO_MAX;
		int64_t st;

		memset(info, 0, sizeof(*info));
		info->pidInfoListCount = (rm_u32)k;
		for (size_t i = 0; i < k; i++) {
			info->pidInfoList[i].pid = pids[at + i];
			info->pidInfoList[i].index = RM_GPU_PID_INFO_VIDEO_MEMORY_USAGE;
		}
		st = rm_control_on(c, sub, RM_CTRL_GPU_GET_PID_INFO, info, sizeof(*info));
		if (st != RM_OK) {
			status_words(g->error, sizeof(g->error), "GET_PID_INFO (0x2080018e)", st);
			return -1;
		}
		for (size_t i = 0; i < k; i++) {
			const struct rm_gpu_pid_info *e = &info->pidInfoList[i];

			if (e->result != RM_OK || e->pid != pids[at + i])
				continue; /* gone meanwhile, or not this one's to read */
			g->procs[g->n].pid = e->pid;
			g->procs[g->n].used_bytes = e->data.memPrivate + e->data.memSharedOwned;
			g->n++;
		}
	}
	return 0;
}

static void query_procs(struct rmconn *c, struct gpuprocs_gpu *g, size_t slot, uint32_t self,
			struct rm_gpu_get_pids *pids, struct rm_gpu_get_pid_info *info)
{
	rm_handle sub = subdevice_open(c, g->device_instance, slot, g->error, sizeof(g->error));
	uint32_t keep[GPUPROCS_PER_GPU_MAX];
	long n;
	int64_t st;

	if (!sub)
		return;
	memset(pids, 0, sizeof(*pids));
	pids->idType = RM_GPU_GET_PIDS_ID_TYPE_CLASS;
	pids->id = RM_CLASS_SUBDEVICE;
	st = rm_control_on(c, sub, RM_CTRL_GPU_GET_PIDS, pids, sizeof(*pids));
	if (st != RM_OK) {
		status_words(g->error, sizeof(g->error), "GET_PIDS (0x2080018d)", st);
	} else if ((n = gpuprocs_parse_pids(pids, self, keep, GPUPROCS_PER_GPU_MAX,
					    &g->listed)) < 0) {
		snprintf(g->error, sizeof(g->error), "GET_PIDS (0x2080018d): a count of %u",
			 pids->pidTblCount);
	} else if (n == 0 || query_pid_info(c, sub, keep, (size_t)n, g, info) == 0) {
		g->read = 1;
	}
	subdevice_close(c, slot);
}

int gpuprocs_query(const char *dev, const uint32_t *instances, size_t n, uint32_t self,
		   struct gpuprocs_table *t)
{
	struct rmconn c = {
		.dev = dev, .fd = -1, .client = 0, .t = NULL, .error = t->error,
		.error_len = sizeof(t->error)
	};
	struct rm_gpu_get_pids *pids = malloc(sizeof(*pids));
	struct rm_gpu_get_pid_info *info = malloc(sizeof(*info));
	int ok = 0;

	memset(t, 0, sizeof(*t));
	if (!pids || !info) {
		snprintf(t->error, sizeof(t->error), "out of memory");
	} else if (rm_open(&c) == 0) {
		ok = 1;
		nodes_open(&c);
		for (size_t i = 0; i < n && i < RM_GPU_MAX_ATTACHED; i++) {
			t->gpus[i].device_instance = instances[i];
			query_procs(&c, &t->gpus[i], i, self, pids, info);
			t->n++;
		}
		nodes_close(&c);
	}
	rm_close(&c);
	free(pids);
	free(info);
	return ok ? 0 : -1;
}
