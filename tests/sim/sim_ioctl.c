/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sim_ioctl.c - the nvidiactl ioctl path (see sim_ioctl.h).
 *
 * Mirrors the layering of the real driver: nvidia_ioctl() checks the escape
 * and its size and copies the block (errno answers: -EINVAL, -EFAULT), the
 * RM escape layer checks the block size per escape (-EINVAL), and the RM API
 * copies nested parameters and answers everything else in the status word
 * with ioctl() returning 0.
 */
#include "sim_ioctl.h"
#include "sim_gpu.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define SIM_ERR_NO_MEMORY 0x51u
#define SIM_CAP_SYS_ADMIN 21
#define SIM_CAP_SYS_NICE 23
#define SIM_SIGKILL_BIT (1ull << (9 - 1))
#define SIM_SLEEP_CHUNK_US 10000u
#define SIM_PREEMPT_WAIT_MIN_US 200u /* measured: 200-480 us with bWait=1 */
#define SIM_PREEMPT_WAIT_SPAN_US 281u
/* DISABLE_CHANNELS, measured on an H100 and an H200: disabling 0.4-1.2 ms,
 * enabling 0.4-0.6 ms. */
#define SIM_DISABLE_MIN_US 500u
#define SIM_DISABLE_SPAN_US 501u
#define SIM_ENABLE_US 400u

/* One call in flight. */
struct sim_icall {
	struct sim_ctx *ctx;
	fuse_req_t req;
	pid_t tid;
	struct sim_call call;
	struct sim_log_rec rec;
};

uint64_t sim_mono_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* ---------------- the caller ---------------- */

/* Read /proc/<tid>/status into buf (NUL-terminated); -errno on failure. */
static int sim_read_task_status(pid_t tid, char *buf, size_t len)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)tid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	size_t got = 0;
	while (got < len - 1) {
		ssize_t n = read(fd, buf + got, len - 1 - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	buf[got] = '\0';
	close(fd);
	return got ? 0 : -EIO;
}

static int sim_status_field(const char *status, const char *name, int base,
			    unsigned long long *out)
{
	const char *p = strstr(status, name);
	if (!p)
		return -1;
	char *end;
	*out = strtoull(p + strlen(name), &end, base);
	return end == p + strlen(name) ? -1 : 0;
}

int sim_task_info(pid_t tid, pid_t *tgid, int *privileged)
{
	char status[4096];
	unsigned long long v;

	*tgid = tid;
	*privileged = 0;
	int r = sim_read_task_status(tid, status, sizeof(status));
	if (r)
		return r;
	if (sim_status_field(status, "\nTgid:", 10, &v) == 0)
		*tgid = (pid_t)v;
	if (sim_status_field(status, "\nCapEff:", 16, &v) == 0)
		*privileged = (v & ((1ull << SIM_CAP_SYS_NICE) | (1ull << SIM_CAP_SYS_ADMIN))) != 0;
	return 0;
}

/* Whether tid is being killed: only then may an injected wait end early,
 * because the real driver never answers an RM ioctl with EINTR. */
static int sim_task_dying(pid_t tid)
{
	char status[4096];
	unsigned long long pend;

	if (sim_read_task_status(tid, status, sizeof(status)))
		return 1; /* gone */
	if (sim_status_field(status, "\nShdPnd:", 16, &pend) == 0 && (pend & SIM_SIGKILL_BIT))
		return 1;
	return sim_status_field(status, "\nSigPnd:", 16, &pend) == 0 && (pend & SIM_SIGKILL_BIT);
}

/* Sleep us microseconds; -EINTR if the caller is killed or the mount goes. */
static int sim_sleep_us(struct sim_icall *ic, uint64_t us)
{
	uint64_t deadline = sim_mono_us() + us;

	for (;;) {
		uint64_t now = sim_mono_us();
		if (now >= deadline)
			return 0;
		if (fuse_session_exited(ic->ctx->se))
			return -EINTR;
		if (fuse_req_interrupted(ic->req) && sim_task_dying(ic->tid))
			return -EINTR;
		uint64_t chunk = deadline - now < SIM_SLEEP_CHUNK_US ? deadline - now
								      : SIM_SLEEP_CHUNK_US;
		struct timespec ts = { .tv_sec = 0, .tv_nsec = (long)chunk * 1000 };
		nanosleep(&ts, NULL);
	}
}

/* ---------------- the caller's memory ---------------- */

static int sim_peek(pid_t tid, uint64_t addr, void *buf, size_t len)
{
	struct iovec local = { .iov_base = buf, .iov_len = len };
	struct iovec remote = { .iov_base = (void *)(uintptr_t)addr, .iov_len = len };
	if (len == 0)
		return 0;
	ssize_t n = process_vm_readv(tid, &local, 1, &remote, 1, 0);
	return n == (ssize_t)len ? 0 : -1;
}

static int sim_poke(pid_t tid, uint64_t addr, const void *buf, size_t len)
{
	struct iovec local = { .iov_base = (void *)buf, .iov_len = len };
	struct iovec remote = { .iov_base = (void *)(uintptr_t)addr, .iov_len = len };
	if (len == 0)
		return 0;
	ssize_t n = process_vm_writev(tid, &local, 1, &remote, 1, 0);
	return n == (ssize_t)len ? 0 : -1;
}

/* The RM API's copy of a nested parameter block (rmapiParamsAcquire):
 * size and pointer must agree, at most 1 MiB, and readable. */
static rm_u32 sim_copy_in(pid_t tid, uint64_t ptr, rm_u32 len, void **out)
{
	*out = NULL;
	if ((len != 0) != (ptr != 0) || len > SIM_PARAM_COPY_MAX)
		return RM_ERR_INVALID_ARGUMENT;
	if (len == 0)
		return RM_OK;
	void *buf = malloc(len);
	if (!buf)
		return SIM_ERR_NO_MEMORY;
	if (sim_peek(tid, ptr, buf, len)) {
		free(buf);
		return SIM_ERR_INVALID_ADDRESS;
	}
	*out = buf;
	return RM_OK;
}

static void sim_rec_param(struct sim_log_rec *r, const char *name, uint64_t v)
{
	if (r->nparams < SIM_LOG_MAX_PARAMS) {
		r->pname[r->nparams] = name;
		r->pval[r->nparams++] = v;
	}
}

/* ---------------- alloc ---------------- */

static void sim_alloc_store(enum rm_call_kind k, void *block, rm_handle hnew, rm_u32 st)
{
	if (k == RM_CALL_ALLOC64) {
		struct rm_alloc64_params *p = block;
		p->hObjectNew = hnew;
		p->status = st;
	} else {
		struct rm_alloc21_params *p = block;
		p->hObjectNew = hnew;
		p->status = st;
	}
}

static void sim_alloc_log(struct sim_log_rec *r, const struct rm_alloc_view *v, const void *ap,
			  rm_u32 aplen)
{
	r->client = v->hRoot;
	r->parent = v->hObjectParent;
	r->object = v->hObjectNew;
	r->cls = v->hClass;
	if (v->hClass == RM_CLASS_TSG && ap && aplen >= sizeof(struct rm_tsg_alloc))
		sim_rec_param(r, "engineType", ((const struct rm_tsg_alloc *)ap)->engineType);
	if (v->hClass == RM_CLASS_DEVICE && ap && aplen >= sizeof(struct rm_device_alloc)) {
		const struct rm_device_alloc *d = ap;
		sim_rec_param(r, "deviceId", d->deviceId);
		/* Logged so a replay can show it renumbered the client inside. */
		sim_rec_param(r, "hClientShare", d->hClientShare);
	}
}

static void sim_do_alloc(struct sim_icall *ic, enum rm_call_kind k, void *block)
{
	struct rm_alloc_view v;
	void *ap = NULL;
	rm_u32 aplen = 0, st = RM_OK;

	rm_alloc_view_of(k, block, &v);
	ic->rec.kind = "alloc";
	ic->rec.form = k == RM_CALL_ALLOC64 ? "nvos64" : "nvos21";
	if (!rm_class_is_client(v.hClass)) {
		/* Classes not modelled take the caller's size; a pointer with
		 * size 0 is let through so recorded traces replay. */
		aplen = sim_rm_alloc_params_len(v.hClass, v.paramsSize);
		/* The recorded traces keep no video-memory parameters: such
		 * an allocation replays without any and takes nothing. */
		if (v.hClass == RM_CLASS_MEMORY_LOCAL_USER && !v.pAllocParms)
			aplen = 0;
		if (aplen)
			st = sim_copy_in(ic->tid, v.pAllocParms, aplen, &ap);
	}
	if (st == RM_OK)
		st = sim_rm_alloc(ic->ctx->rm, &ic->call, &v, ap, aplen);
	sim_alloc_store(k, block, v.hObjectNew, st);
	sim_alloc_log(&ic->rec, &v, ap, aplen);
	ic->rec.has_status = 1;
	ic->rec.status = st;
	free(ap);
}

/* ---------------- control ---------------- */

/* The GPU identity controls: which gpuId was asked about, and the device
 * instance GET_ID_INFO_V2 answered (the UUID itself is in `state`). */
static void sim_gpu_control_log(struct sim_log_rec *r, rm_u32 cmd, const void *params)
{
	switch (cmd) {
	case RM_CTRL_GPU_GET_ID_INFO_V2:
		sim_rec_param(r, "gpuId", ((const struct rm_gpu_id_info_v2 *)params)->gpuId);
		sim_rec_param(r, "deviceInstance",
			      ((const struct rm_gpu_id_info_v2 *)params)->deviceInstance);
		break;
	case RM_CTRL_GPU_GET_PCI_INFO:
		sim_rec_param(r, "gpuId", ((const struct rm_gpu_pci_info *)params)->gpuId);
		break;
	case RM_CTRL_GPU_GET_UUID_FROM_GPU_ID: {
		const struct rm_gpu_uuid_from_id *p = params;
		sim_rec_param(r, "gpuId", p->gpuId);
		sim_rec_param(r, "flags", p->flags);
		sim_rec_param(r, "uuidStrLen", p->uuidStrLen);
		break;
	}
	case RM_CTRL_SUBDEVICE_GET_GID_INFO:
		sim_rec_param(r, "flags", ((const struct rm_gpu_gid_info *)params)->flags);
		sim_rec_param(r, "length", ((const struct rm_gpu_gid_info *)params)->length);
		break;
	default:
		break;
	}
}

/* The first two (client, channel) pairs are logged: the log keeps names
 * by pointer, so they are fixed strings. */
static void sim_disable_log(struct sim_log_rec *r, const struct rm_disable_channels *d)
{
	static const char *const cl[] = { "hClient0", "hClient1" };
	static const char *const ch[] = { "hChannel0", "hChannel1" };

	sim_rec_param(r, "bDisable", d->bDisable);
	sim_rec_param(r, "numChannels", d->numChannels);
	sim_rec_param(r, "bOnlyDisableScheduling", d->bOnlyDisableScheduling);
	for (rm_u32 i = 0; i < d->numChannels && i < 2; i++) {
		sim_rec_param(r, cl[i], d->hClientList[i]);
		sim_rec_param(r, ch[i], d->hChannelList[i]);
	}
}

static void sim_control_log(struct sim_log_rec *r, rm_u32 cmd, const void *params, rm_u32 size)
{
	if (params && cmd == RM_CTRL_FIFO_DISABLE_CHANNELS &&
	    size == sizeof(struct rm_disable_channels)) {
		sim_disable_log(r, params);
		return;
	}
	if (params && size && size == sim_gpu_ctrl_params_size(cmd)) {
		sim_gpu_control_log(r, cmd, params);
		return;
	}
	if (!params || size != rm_tsg_ctrl_params_size(cmd))
		return;
	switch (cmd) {
	case RM_CTRL_TSG_SET_TIMESLICE:
	case RM_CTRL_TSG_GET_TIMESLICE:
		sim_rec_param(r, "timesliceUs", ((const struct rm_tsg_timeslice *)params)->timesliceUs);
		break;
	case RM_CTRL_TSG_SET_INTERLEAVE:
	case RM_CTRL_TSG_GET_INTERLEAVE:
		sim_rec_param(r, "tsgInterleaveLevel",
			      ((const struct rm_tsg_interleave *)params)->tsgInterleaveLevel);
		break;
	case RM_CTRL_TSG_PREEMPT: {
		const struct rm_tsg_preempt *p = params;
		sim_rec_param(r, "bWait", p->bWait);
		sim_rec_param(r, "bManualTimeout", p->bManualTimeout);
		sim_rec_param(r, "timeoutUs", p->timeoutUs);
		break;
	}
	case RM_CTRL_TSG_GPFIFO_SCHEDULE:
		sim_rec_param(r, "bEnable", ((const struct rm_tsg_gpfifo_schedule *)params)->bEnable);
		break;
	default:
		break;
	}
}

/* Run the control after the injected latency (the firmware round trip). */
static int sim_control_run(struct sim_icall *ic, struct rm_control_params *p, void *params,
			   rm_u32 *st)
{
	struct sim_ctrl_inject inj;
	uint64_t latency_us;

	sim_inject_lookup(ic->ctx->inj, p->cmd, &latency_us, &inj);
	if (latency_us && sim_sleep_us(ic, latency_us))
		return -EINTR;
	/* A channel is disabled from when the model applies the call, not
	 * from before an injected latency. */
	ic->call.t_us = sim_mono_us() - ic->ctx->start_us;
	*st = sim_rm_control(ic->ctx->rm, &ic->call, p->hClient, p->hObject, p->cmd, params,
			     p->paramsSize, &inj);
	if (*st == RM_OK && p->cmd == RM_CTRL_TSG_PREEMPT &&
	    ((const struct rm_tsg_preempt *)params)->bWait &&
	    sim_sleep_us(ic, SIM_PREEMPT_WAIT_MIN_US + sim_mono_us() % SIM_PREEMPT_WAIT_SPAN_US))
		return -EINTR;
	if (*st == RM_OK && p->cmd == RM_CTRL_FIFO_DISABLE_CHANNELS &&
	    sim_sleep_us(ic, ((const struct rm_disable_channels *)params)->bDisable
				     ? SIM_DISABLE_MIN_US + sim_mono_us() % SIM_DISABLE_SPAN_US
				     : SIM_ENABLE_US))
		return -EINTR;
	return 0;
}

static int sim_do_control(struct sim_icall *ic, void *block)
{
	struct rm_control_params *p = block;
	void *params = NULL;
	int err = 0;

	ic->rec.kind = "control";
	ic->rec.form = "nvos54";
	ic->rec.client = p->hClient;
	ic->rec.object = p->hObject;
	ic->rec.cmd = p->cmd;
	rm_u32 st = sim_copy_in(ic->tid, p->params, p->paramsSize, &params);
	if (st == RM_OK)
		err = sim_control_run(ic, p, params, &st);
	if (err == 0) {
		/* Copied back whatever the status, as rmapiParamsRelease does. */
		if (params && sim_poke(ic->tid, p->params, params, p->paramsSize) && st == RM_OK)
			st = SIM_ERR_INVALID_ADDRESS;
		p->status = st;
		ic->rec.has_status = 1;
		ic->rec.status = st;
	}
	sim_control_log(&ic->rec, p->cmd, params, p->paramsSize);
	free(params);
	return err;
}

/* ---------------- free ---------------- */

static void sim_do_free(struct sim_icall *ic, void *block)
{
	struct rm_free_params *p = block;

	ic->rec.kind = "free";
	ic->rec.form = "nvos00";
	p->status = sim_rm_free(ic->ctx->rm, &ic->call, p);
	ic->rec.client = p->hRoot;
	ic->rec.parent = p->hObjectParent;
	ic->rec.object = p->hObjectOld;
	ic->rec.has_status = 1;
	ic->rec.status = p->status;
}

/* ---------------- escapes ---------------- */

/* The RM escape layer: which escape, and is the block the right size. */
static int sim_escape(struct sim_icall *ic, rm_u32 nr, void *block, rm_u32 size)
{
	switch (nr) {
	case RM_ESC_ALLOC:
		if (size == sizeof(struct rm_alloc64_params)) {
			sim_do_alloc(ic, RM_CALL_ALLOC64, block);
			return 0;
		}
		if (size == sizeof(struct rm_alloc21_params)) {
			sim_do_alloc(ic, RM_CALL_ALLOC21, block);
			return 0;
		}
		ic->rec.kind = "alloc";
		return -EINVAL;
	case RM_ESC_CONTROL:
		ic->rec.kind = "control";
		return size == sizeof(struct rm_control_params) ? sim_do_control(ic, block) : -EINVAL;
	case RM_ESC_FREE:
		ic->rec.kind = "free";
		if (size != sizeof(struct rm_free_params))
			return -EINVAL;
		sim_do_free(ic, block);
		return 0;
	default:
		return -EINVAL; /* card info, version check, ...: not modelled */
	}
}

/* NV_ESC_IOCTL_XFER_CMD: the block lives at xfer.ptr in the caller. */
static int sim_xfer(struct sim_icall *ic, const void *in_buf, size_t in_bufsz)
{
	struct rm_xfer x;

	ic->rec.xfer = 1;
	if (in_bufsz != sizeof(x))
		return -EINVAL;
	memcpy(&x, in_buf, sizeof(x));
	if (x.size > SIM_XFER_MAX || x.cmd == RM_ESC_XFER)
		return -EINVAL;
	void *block = malloc(x.size ? x.size : 1);
	if (!block)
		return -ENOMEM;
	int err = sim_peek(ic->tid, x.ptr, block, x.size) ? -EFAULT : 0;
	if (!err)
		err = sim_escape(ic, x.cmd, block, x.size);
	if (err != -EFAULT && err != -EINTR && sim_poke(ic->tid, x.ptr, block, x.size))
		err = -EFAULT;
	free(block);
	return err;
}

static void sim_icall_init(struct sim_icall *ic, struct sim_ctx *ctx, fuse_req_t req,
			   uint64_t fh, unsigned int cmd)
{
	pid_t tgid;

	memset(ic, 0, sizeof(*ic));
	ic->ctx = ctx;
	ic->req = req;
	ic->tid = fuse_req_ctx(req)->pid;
	(void)sim_task_info(ic->tid, &tgid, &ic->call.privileged); /* gone: unprivileged */
	ic->call.fh = fh;
	ic->rec.t_us = sim_mono_us() - ctx->start_us;
	ic->call.t_us = ic->rec.t_us;
	ic->rec.pid = tgid;
	ic->rec.tid = ic->tid;
	ic->rec.fh = fh;
	ic->rec.request = cmd;
	ic->rec.kind = "other";
	ic->rec.form = "";
}

void sim_ioctl_handle(struct sim_ctx *ctx, fuse_req_t req, uint64_t fh, unsigned int cmd,
		      const void *in_buf, size_t in_bufsz, size_t out_bufsz)
{
	struct sim_icall ic;
	unsigned char block[RM_IOC_SIZE(0xffffffffu) + 1];
	int err;

	sim_icall_init(&ic, ctx, req, fh, cmd);
	if (RM_IOC_TYPE(cmd) != RM_IOCTL_MAGIC)
		err = -ENOTTY;
	else if ((cmd >> RM_IOC_DIRSHIFT) != RM_IOC_READWRITE || in_bufsz != out_bufsz ||
		 in_bufsz != RM_IOC_SIZE(cmd))
		err = -EINVAL;
	else if (RM_IOC_NR(cmd) == RM_ESC_XFER)
		err = sim_xfer(&ic, in_buf, in_bufsz);
	else {
		memcpy(block, in_buf, in_bufsz);
		err = sim_escape(&ic, RM_IOC_NR(cmd), block, (rm_u32)in_bufsz);
	}
	ic.rec.err = -err;
	ic.rec.dur_us = sim_mono_us() - ctx->start_us - ic.rec.t_us;
	sim_log_add(ctx->log, &ic.rec);
	if (err)
		fuse_reply_err(req, -err);
	else
		fuse_reply_ioctl(req, 0, RM_IOC_NR(cmd) == RM_ESC_XFER ? in_buf : block, out_bufsz);
}
