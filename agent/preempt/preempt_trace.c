/* SPDX-License-Identifier: Apache-2.0 */
/*
 * preempt_trace.c - GPUQOS_TRACE: one JSON object per line for every RM
 * ioctl of the process, to record fixtures on a real GPU (docs/trace.md).
 *
 * Owns: the trace file and its line format. Does not own: deciding what is
 * an RM call (preempt_track.c) or issuing it (preempt_ioctl.c). Off unless
 * GPUQOS_TRACE is set; then each record costs a malloc, two copies of the
 * parameters and one write(2) with O_APPEND, so lines from several threads
 * (and forked children writing the same file) never interleave.
 */
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "preempt.h"
#include "preempt_trace.h"

#define PA_TRACE_MAX_PARAMS 4096u
/* Two hex dumps plus the fixed fields of the longest record. */
#define PA_TRACE_LINE (4u * PA_TRACE_MAX_PARAMS + 1024u)

int pa_trace_on;
static int pa_trace_fd = -1;
static char pa_trace_template[PATH_MAX];
static _Atomic unsigned long pa_trace_seq;

struct pa_trace_call {
	unsigned long seq;
	rm_u64 t_ns;
	int fd;
	int tid;
	rm_u32 request;
	enum rm_call_kind kind; /* of the request itself (XFER for a wrapper) */
	void *arg;
	struct pa_call call;
	int decoded;
	const void *params; /* the call's parameter buffer, if it has one */
	rm_u32 params_size;
	rm_u32 copied;
	unsigned char before[PA_TRACE_MAX_PARAMS];
	char line[PA_TRACE_LINE];
};

/* ---- the file ---- */

static void pa_trace_open(void)
{
	char path[PATH_MAX + 32];
	size_t o = 0;
	int fd;

	for (const char *t = pa_trace_template; *t != '\0' && o < sizeof(path) - 24; t++) {
		if (t[0] == '%' && t[1] == 'p') {
			o += (size_t)snprintf(path + o, sizeof(path) - o, "%d", (int)getpid());
			t++;
		} else {
			path[o++] = *t;
		}
	}
	path[o] = '\0';
	pa_own_fd_begin();
	fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	pa_trace_fd = fd;
	pa_own_fd_end(fd);
	if (fd < 0) {
		pa_info("cannot open trace file %s: %m; not tracing", path);
		pa_trace_on = 0;
		return;
	}
	pa_trace_on = 1;
}

void pa_trace_init(const char *path_template)
{
	if (strlen(path_template) >= sizeof(pa_trace_template)) {
		pa_info("GPUQOS_TRACE path too long; not tracing");
		return;
	}
	memcpy(pa_trace_template, path_template, strlen(path_template) + 1);
	pa_trace_open();
}

/* A child writes its own file when the name holds its pid, else it
 * appends to the parent's. The caller has cleared the fd map. */
void pa_trace_child_reset(void)
{
	if (pa_trace_fd < 0)
		return;
	if (strstr(pa_trace_template, "%p") == NULL) {
		pa_fd_mark(pa_trace_fd);
		return;
	}
	pa_real_close(pa_trace_fd);
	pa_trace_fd = -1;
	pa_trace_open();
}

int pa_trace_owns(int fd)
{
	return fd >= 0 && fd == pa_trace_fd;
}

/* ---- formatting ---- */

static const char *pa_kind_name(enum rm_call_kind k)
{
	switch (k) {
	case RM_CALL_ALLOC21:
	case RM_CALL_ALLOC64:
		return "alloc";
	case RM_CALL_CONTROL:
		return "control";
	case RM_CALL_FREE:
		return "free";
	default:
		return "other";
	}
}

/* Append to tc->line at *o; never past its end. */
static void pa_put(struct pa_trace_call *tc, size_t *o, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void pa_put(struct pa_trace_call *tc, size_t *o, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (*o >= sizeof(tc->line))
		return;
	va_start(ap, fmt);
	n = vsnprintf(tc->line + *o, sizeof(tc->line) - *o, fmt, ap);
	va_end(ap);
	if (n > 0)
		*o += (size_t)n;
}

static void pa_put_hex(struct pa_trace_call *tc, size_t *o, const char *name,
		       const unsigned char *b, rm_u32 n)
{
	static const char digits[] = "0123456789abcdef";

	pa_put(tc, o, ",\"%s\":\"", name);
	if (*o + 2u * n + 2u >= sizeof(tc->line))
		n = 0; /* cannot happen with PA_TRACE_LINE; stay valid JSON */
	for (rm_u32 i = 0; i < n; i++) {
		tc->line[(*o)++] = digits[b[i] >> 4];
		tc->line[(*o)++] = digits[b[i] & 15u];
	}
	pa_put(tc, o, "\"");
}

/* The call's parameter buffer: where pAllocParms or params points. */
static void pa_trace_params(struct pa_trace_call *tc)
{
	struct rm_alloc_view v;
	const struct rm_control_params *c = tc->call.block;

	if (!tc->decoded)
		return;
	if (rm_alloc_view_of(tc->call.kind, tc->call.block, &v) == 0) {
		tc->params = (const void *)(uintptr_t)v.pAllocParms;
		tc->params_size = rm_alloc_params_size(&v);
	} else if (tc->call.kind == RM_CALL_CONTROL) {
		tc->params = (const void *)(uintptr_t)c->params;
		tc->params_size = c->paramsSize;
	}
	if (tc->params == NULL)
		return;
	tc->copied = tc->params_size < PA_TRACE_MAX_PARAMS ? tc->params_size : PA_TRACE_MAX_PARAMS;
	memcpy(tc->before, tc->params, tc->copied);
}

struct pa_trace_call *pa_trace_begin(int fd, unsigned long request, enum rm_call_kind kind,
				     void *arg)
{
	struct pa_trace_call *tc = malloc(sizeof(*tc));

	if (tc == NULL)
		return NULL;
	memset(tc, 0, offsetof(struct pa_trace_call, before));
	tc->seq = atomic_fetch_add(&pa_trace_seq, 1);
	tc->t_ns = pa_now_ns();
	tc->tid = (pid_t)syscall(SYS_gettid);
	tc->fd = fd;
	tc->request = (rm_u32)request;
	tc->kind = kind;
	tc->arg = arg;
	tc->decoded = kind != RM_CALL_NONE && pa_unwrap(kind, arg, &tc->call) == 0;
	pa_trace_params(tc);
	return tc;
}

static void pa_trace_body(struct pa_trace_call *tc, size_t *o)
{
	struct rm_alloc_view v;
	const struct rm_control_params *c = tc->call.block;
	const struct rm_free_params *f = tc->call.block;
	rm_u32 status = pa_call_status(&tc->call);

	if (rm_alloc_view_of(tc->call.kind, tc->call.block, &v) == 0) {
		pa_put(tc, o, ",\"hRoot\":\"0x%x\",\"hParent\":\"0x%x\",\"hNew\":\"0x%x\","
			      "\"hClass\":\"0x%x\",\"paramsSize\":%u",
		       v.hRoot, v.hObjectParent, v.hObjectNew, v.hClass, v.paramsSize);
	} else if (tc->call.kind == RM_CALL_CONTROL) {
		pa_put(tc, o, ",\"hClient\":\"0x%x\",\"hObject\":\"0x%x\",\"cmd\":\"0x%x\","
			      "\"paramsSize\":%u",
		       c->hClient, c->hObject, c->cmd, c->paramsSize);
	} else {
		pa_put(tc, o, ",\"hRoot\":\"0x%x\",\"hParent\":\"0x%x\",\"hOld\":\"0x%x\"",
		       f->hRoot, f->hObjectParent, f->hObjectOld);
	}
	if (tc->call.kind != RM_CALL_FREE) {
		pa_put_hex(tc, o, "params", tc->before, tc->copied);
		pa_put_hex(tc, o, "paramsOut", tc->params, tc->params ? tc->copied : 0);
	}
	pa_put(tc, o, ",\"status\":%u", status);
}

void pa_trace_end(struct pa_trace_call *tc, int ret, int err)
{
	size_t o = 0;
	rm_u32 size = RM_IOC_SIZE(tc->request);

	pa_put(tc, &o,
	       "{\"seq\":%lu,\"tNs\":%llu,\"tid\":%d,\"fd\":%d,\"request\":\"0x%x\",\"xfer\":%s,"
	       "\"kind\":\"%s\",\"ret\":%d,\"errno\":%d",
	       tc->seq, (unsigned long long)tc->t_ns, tc->tid, tc->fd, tc->request,
	       tc->kind == RM_CALL_XFER ? "true" : "false",
	       tc->decoded ? pa_kind_name(tc->call.kind) : "other", ret, err);
	if (tc->decoded) {
		pa_trace_body(tc, &o);
	} else {
		if (tc->kind == RM_CALL_XFER && tc->arg != NULL)
			size = ((const struct rm_xfer *)tc->arg)->size;
		pa_put(tc, &o, ",\"size\":%u", size);
	}
	pa_put(tc, &o, "}\n");
	if (o > sizeof(tc->line))
		o = sizeof(tc->line);
	if (write(pa_trace_fd, tc->line, o) != (ssize_t)o)
		pa_debug("trace write: %m");
	free(tc);
}
