/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpuinfo.c - device instance -> GPU UUID and PCI bus id (gpuinfo.h).
 *
 * Owns: the query (its own RM client, opened and freed each time: a
 * client held open would be one more thing an RM hang could pin), the
 * worker thread that runs it, the deadline around it, and the agent's
 * copy of the table. Does not own the TSG table or the ctl socket; it
 * answers lookups and builds JSON for them. Controls and layouts:
 * docs/gpuinfo.md.
 */
#include "agent/gpuinfo.h"
#include "common/log.h"
#include "agent/loop.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/timerfd.h>
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

static void add_str_or_null(cJSON *o, const char *k, const char *v)
{
	if (v[0])
		cJSON_AddStringToObject(o, k, v);
	else
		cJSON_AddNullToObject(o, k);
}

cJSON *gpuinfo_table_json(const struct gpuinfo_table *t)
{
	cJSON *arr = cJSON_CreateArray();

	for (size_t i = 0; arr && i < t->n; i++) {
		const struct gpuinfo_gpu *g = &t->gpus[i];
		cJSON *o = cJSON_CreateObject();
		char id[16];

		if (!o || !cJSON_AddItemToArray(arr, o)) {
			cJSON_Delete(o);
			cJSON_Delete(arr);
			return NULL;
		}
		snprintf(id, sizeof(id), "0x%x", g->gpu_id);
		cJSON_AddNumberToObject(o, "deviceInstance", g->device_instance);
		cJSON_AddNumberToObject(o, "subDeviceInstance", g->subdevice_instance);
		cJSON_AddStringToObject(o, "gpuId", id);
		add_str_or_null(o, "uuid", g->uuid);
		add_str_or_null(o, "pciBusId", g->pci_bus_id);
		if (g->status)
			cJSON_AddStringToObject(o, "error", gpuinfo_status_name(g->status));
	}
	return arr;
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

/* ---- running it off the loop ---- */

/* One query in flight. The worker and the loop each hold a reference;
 * the last one frees it, so a worker stuck in the RM past the agent's
 * interest (or its exit) cleans up after itself. */
struct gpuinfo_job {
	pthread_mutex_t mu;
	int refs;
	int done;
	int efd; /* written once the table is filled */
	char dev[4096];
	struct gpuinfo_table table;
};

static struct {
	struct loop *loop;
	char dev[4096];
	struct loop_watch job_w;   /* the running job's eventfd */
	struct loop_watch timer_w; /* its deadline, or the next retry */
	struct gpuinfo_job *job;   /* the running query, or NULL */
	uint64_t job_started_us;
	int job_late;      /* it passed its deadline and is still inside the RM */
	int again;         /* asked for while one ran: run once more after it */
	struct gpuinfo_table table;
	char last_error[256];
	uint64_t last_unknown_us;
} g = { .job_w = { .fd = -1 }, .timer_w = { .fd = -1 } };

static void job_put(struct gpuinfo_job *j)
{
	int last;

	pthread_mutex_lock(&j->mu);
	last = --j->refs == 0;
	pthread_mutex_unlock(&j->mu);
	if (!last)
		return;
	if (j->efd >= 0)
		close(j->efd);
	pthread_mutex_destroy(&j->mu);
	free(j);
}

static void *job_main(void *arg)
{
	struct gpuinfo_job *j = arg;
	uint64_t one = 1;

	(void)gpuinfo_query(j->dev, &j->table); /* the result says how it went */
	pthread_mutex_lock(&j->mu);
	j->done = 1;
	/* Under the lock: the loop's reference (and the eventfd) cannot go
	 * between the check and the write. */
	if (j->refs == 2 && write(j->efd, &one, sizeof(one)) != (ssize_t)sizeof(one))
		j->done = -1; /* only EAGAIN is possible: the loop wakes anyway */
	pthread_mutex_unlock(&j->mu);
	job_put(j);
	return NULL;
}

static void timer_arm(uint32_t ms)
{
	struct itimerspec its = { .it_value = { .tv_sec = ms / 1000u,
						.tv_nsec = (long)(ms % 1000u) * 1000000L } };

	if (g.timer_w.fd >= 0 && timerfd_settime(g.timer_w.fd, 0, &its, NULL) != 0)
		log_warn("GPU table: timerfd_settime: %s", strerror(errno));
}

static void on_job(struct loop_watch *w, uint32_t events);

static struct gpuinfo_job *job_new(void)
{
	struct gpuinfo_job *j = calloc(1, sizeof(*j));

	if (!j)
		return NULL;
	if (pthread_mutex_init(&j->mu, NULL) != 0) {
		free(j);
		return NULL;
	}
	j->refs = 2;
	snprintf(j->dev, sizeof(j->dev), "%s", g.dev);
	j->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (j->efd < 0) {
		j->refs = 1;
		job_put(j);
		return NULL;
	}
	return j;
}

/* A detached worker with every signal blocked: signals are the loop's. */
static int job_spawn(struct gpuinfo_job *j)
{
	sigset_t all, old;
	pthread_attr_t attr;
	pthread_t th;
	int rc;

	if ((rc = pthread_attr_init(&attr)) != 0)
		return rc;
	if ((rc = pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED)) == 0) {
		sigfillset(&all);
		pthread_sigmask(SIG_BLOCK, &all, &old);
		rc = pthread_create(&th, &attr, job_main, j);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	}
	pthread_attr_destroy(&attr);
	return rc;
}

static void start_query(const char *why)
{
	struct gpuinfo_job *j;
	int rc;

	if (g.job) {
		g.again = 1;
		return;
	}
	j = job_new();
	if (!j) {
		log_error("GPU table: cannot start a query (%s): out of memory or fds", why);
		timer_arm(GPUINFO_RETRY_MS);
		return;
	}
	g.job_w.fd = j->efd;
	g.job_w.fn = on_job;
	g.job_w.ctx = NULL;
	if (loop_add(g.loop, &g.job_w, EPOLLIN) != 0) {
		g.job_w.fd = -1;
		j->refs = 1;
		job_put(j);
		timer_arm(GPUINFO_RETRY_MS);
		return;
	}
	if ((rc = job_spawn(j)) != 0) {
		log_error("GPU table: cannot start the query thread (%s): %s", why, strerror(rc));
		loop_del(g.loop, &g.job_w);
		j->refs = 1;
		job_put(j);
		timer_arm(GPUINFO_RETRY_MS);
		return;
	}
	g.job = j;
	g.job_late = 0;
	g.job_started_us = now_us();
	log_debug("GPU table: querying %s (%s)", g.dev, why);
	timer_arm(GPUINFO_QUERY_TIMEOUT_MS);
}

/* A failure is logged once as an error; the same one again only at debug
 * (no driver on this node would otherwise log every retry). */
static void log_failure(const char *error)
{
	if (strcmp(error, g.last_error) == 0) {
		log_debug("GPU table: still failing: %s", error);
		return;
	}
	snprintf(g.last_error, sizeof(g.last_error), "%s", error);
	log_error("GPU table: %s; UUIDs of GPUs not listed stay unknown", error);
}

/* A complete list replaces the table; a failed one keeps what was known
 * (device instances do not change while the driver stays loaded). */
static void apply(const struct gpuinfo_table *t, uint64_t took_us)
{
	if (t->listed) {
		g.table = *t;
		for (size_t i = 0; i < t->n; i++) {
			const struct gpuinfo_gpu *x = &t->gpus[i];
			log_info("GPU device instance %u: %s, PCI %s, gpuId 0x%x", x->device_instance,
				 x->uuid[0] ? x->uuid : "UUID unknown",
				 x->pci_bus_id[0] ? x->pci_bus_id : "unknown", x->gpu_id);
		}
		log_info("GPU table: %zu GPU(s) from %s in %llu us", t->n, g.dev,
			 (unsigned long long)took_us);
	}
	if (t->error[0]) {
		log_failure(t->error);
		timer_arm(GPUINFO_RETRY_MS);
	} else {
		g.last_error[0] = '\0';
	}
}

/* Take the finished job's table; the caller saw its eventfd fire (or
 * polled it at start-up). 0 if it was done. */
static int take_job(void)
{
	struct gpuinfo_job *j = g.job;
	uint64_t v;
	int done;

	pthread_mutex_lock(&j->mu);
	done = j->done;
	pthread_mutex_unlock(&j->mu);
	if (!done)
		return -1;
	if (read(j->efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		log_warn("GPU table: eventfd read: %s", strerror(errno));
	if (g.job_late)
		log_warn("GPU table: the query given up on answered after %llu ms",
			 (unsigned long long)((now_us() - g.job_started_us) / 1000u));
	timer_arm(0);
	/* The worker is done with the table: it set done under the lock. */
	apply(&j->table, now_us() - g.job_started_us);
	loop_del(g.loop, &g.job_w);
	g.job = NULL;
	job_put(j);
	if (g.again) {
		g.again = 0;
		start_query("asked for while the last one ran");
	}
	return 0;
}

static void on_job(struct loop_watch *w, uint32_t events)
{
	(void)w;
	(void)events;
	if (g.job)
		(void)take_job(); /* not done yet: a spurious wake-up */
}

/* The deadline of a running query, or the retry after a failure. A query
 * past its deadline is left to finish (one stuck worker at most): a new
 * one would only get stuck behind the same RM call. */
static void on_timer(struct loop_watch *w, uint32_t events)
{
	uint64_t n;

	(void)events;
	if (read(w->fd, &n, sizeof(n)) < 0 && errno != EAGAIN)
		log_warn("GPU table: timerfd read: %s", strerror(errno));
	if (g.job && !g.job_late) {
		g.job_late = 1;
		log_error("GPU table: no answer from %s within %u ms (an RM control is blocking); "
			  "UUIDs stay as they are; trying again in %u s", g.dev,
			  GPUINFO_QUERY_TIMEOUT_MS, GPUINFO_RETRY_MS / 1000u);
		timer_arm(GPUINFO_RETRY_MS);
	} else if (g.job) {
		log_warn("GPU table: the query is still blocked after %llu s",
			 (unsigned long long)((now_us() - g.job_started_us) / 1000000u));
		timer_arm(GPUINFO_RETRY_MS);
	} else {
		start_query("retry");
	}
}

/* The one bounded wait: the first answer before the loop serves. */
static void wait_first(void)
{
	struct pollfd p = { .fd = g.job->efd, .events = POLLIN };
	uint64_t deadline = now_us() + GPUINFO_QUERY_TIMEOUT_MS * 1000ull;

	for (;;) {
		uint64_t now = now_us();
		int r;

		if (now >= deadline)
			return; /* the timer reports it and the loop takes it later */
		r = poll(&p, 1, (int)((deadline - now + 999) / 1000));
		if (r < 0 && errno != EINTR) {
			log_warn("GPU table: poll: %s", strerror(errno));
			return;
		}
		if (r > 0 && take_job() == 0)
			return;
	}
}

int gpuinfo_init(struct loop *loop, const char *dev)
{
	g.loop = loop;
	snprintf(g.dev, sizeof(g.dev), "%s", dev);
	g.timer_w.fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (g.timer_w.fd < 0) {
		log_error("GPU table: timerfd_create: %s", strerror(errno));
		return -1;
	}
	g.timer_w.fn = on_timer;
	g.timer_w.ctx = NULL;
	if (loop_add(loop, &g.timer_w, EPOLLIN) != 0)
		return -1;
	start_query("start-up");
	if (g.job)
		wait_first();
	return 0;
}

void gpuinfo_refresh(const char *why)
{
	if (g.loop)
		start_query(why);
}

void gpuinfo_note_device(uint32_t device_instance)
{
	uint64_t now = now_us();

	if (!g.loop || gpuinfo_uuid(device_instance))
		return;
	if (g.last_unknown_us && now - g.last_unknown_us < GPUINFO_UNKNOWN_MIN_MS * 1000ull)
		return;
	g.last_unknown_us = now;
	log_debug("GPU table: device instance %u has no UUID yet: querying again", device_instance);
	start_query("unknown device instance");
}

const char *gpuinfo_uuid(uint32_t device_instance)
{
	const struct gpuinfo_gpu *x = gpuinfo_table_find(&g.table, device_instance);

	return x && x->uuid[0] ? x->uuid : NULL;
}

cJSON *gpuinfo_json(void)
{
	return gpuinfo_table_json(&g.table);
}

const char *gpuinfo_error(void)
{
	return g.last_error[0] ? g.last_error : NULL;
}

void gpuinfo_fini(void)
{
	if (!g.loop)
		return;
	if (g.job) {
		loop_del(g.loop, &g.job_w);
		job_put(g.job); /* a worker inside the RM frees it when it returns */
		g.job = NULL;
	}
	if (g.timer_w.fd >= 0)
		loop_close(g.loop, &g.timer_w);
	g.loop = NULL;
}
