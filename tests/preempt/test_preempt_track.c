/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_preempt_track.c - unit tests of the preempt agent's pure parts,
 * compiled from its sources into a sanitized binary: decoding (both alloc
 * forms, XFER), the tables and their bounds, frees, the SET_TIMESLICE
 * rewrite decision, command planning and the messages it sends.
 */
#include <stdint.h>
#include <string.h>

#include "agent/preempt/preempt_msg.h"
#include "agent/preempt/preempt_track.h"
#include "tests/check.h"

#define FD_CTL 7
#define FD_OTHER 9
#define H_DEV 0xde000001u

static struct pa_track T;

struct evlog {
	int n;
	struct pa_event ev[64];
};
static struct evlog ev;

static void record(void *ctx, const struct pa_event *e)
{
	struct evlog *l = ctx;

	if (l->n < 64)
		l->ev[l->n] = *e;
	l->n++;
}

static rm_u64 ptr(const void *p)
{
	return (rm_u64)(uintptr_t)p;
}

/* Run one completed call through the same path the interposer uses. */
static unsigned complete(int fd, enum rm_call_kind kind, void *arg, int ret)
{
	struct pa_call c;

	if (!pa_track_should_apply(kind, arg, ret, &c))
		return 0x100; /* "not applied" */
	return pa_track_apply(&T, fd, &c, record, &ev);
}

static unsigned alloc64(int fd, rm_handle root, rm_handle parent, rm_handle h, rm_u32 cls,
			void *params, rm_u32 size, rm_u32 status, int xfer)
{
	struct rm_alloc64_params p = { .hRoot = root, .hObjectParent = parent, .hObjectNew = h,
				       .hClass = cls, .pAllocParms = ptr(params),
				       .paramsSize = size, .status = status };
	struct rm_xfer x = { .cmd = RM_ESC_ALLOC, .size = sizeof(p), .ptr = ptr(&p) };

	return xfer ? complete(fd, RM_CALL_XFER, &x, 0) : complete(fd, RM_CALL_ALLOC64, &p, 0);
}

static unsigned alloc21(int fd, rm_handle root, rm_handle parent, rm_handle h, rm_u32 cls,
			void *params, rm_u32 size, rm_u32 status, int xfer)
{
	struct rm_alloc21_params p = { .hRoot = root, .hObjectParent = parent, .hObjectNew = h,
				       .hClass = cls, .pAllocParms = ptr(params),
				       .paramsSize = size, .status = status };
	struct rm_xfer x = { .cmd = RM_ESC_ALLOC, .size = sizeof(p), .ptr = ptr(&p) };

	return xfer ? complete(fd, RM_CALL_XFER, &x, 0) : complete(fd, RM_CALL_ALLOC21, &p, 0);
}

static unsigned add_tsg(rm_handle client, rm_handle h, rm_u32 engine, int form)
{
	struct rm_tsg_alloc a = { .engineType = engine };

	if (form == 0)
		return alloc64(FD_OTHER, client, H_DEV, h, RM_CLASS_TSG, &a, sizeof(a), 0, 0);
	if (form == 1)
		return alloc21(FD_OTHER, client, H_DEV, h, RM_CLASS_TSG, &a, sizeof(a), 0, 0);
	if (form == 2)
		return alloc64(FD_OTHER, client, H_DEV, h, RM_CLASS_TSG, &a, sizeof(a), 0, 1);
	return alloc21(FD_OTHER, client, H_DEV, h, RM_CLASS_TSG, &a, sizeof(a), 0, 1);
}

static unsigned free_obj(rm_handle root, rm_handle h, rm_u32 status, int xfer)
{
	struct rm_free_params p = { .hRoot = root, .hObjectParent = root, .hObjectOld = h,
				    .status = status };
	struct rm_xfer x = { .cmd = RM_ESC_FREE, .size = sizeof(p), .ptr = ptr(&p) };

	return xfer ? complete(FD_CTL, RM_CALL_XFER, &x, 0) : complete(FD_CTL, RM_CALL_FREE, &p, 0);
}

static void test_unwrap(void)
{
	struct rm_control_params ctl = { 0 };
	struct rm_xfer x = { .cmd = RM_ESC_CONTROL, .size = sizeof(ctl), .ptr = ptr(&ctl) };
	struct pa_call c;

	CHECK(pa_unwrap(RM_CALL_CONTROL, NULL, &c) != 0);
	CHECK(pa_unwrap(RM_CALL_NONE, &ctl, &c) != 0);
	CHECK(pa_unwrap(RM_CALL_CONTROL, &ctl, &c) == 0 && c.block == &ctl && !c.xfer);
	CHECK(pa_unwrap(RM_CALL_XFER, &x, &c) == 0);
	CHECK(c.kind == RM_CALL_CONTROL && c.block == &ctl && c.xfer && c.outer == &x);
	x.size = 40; /* no decoded call has this size */
	CHECK(pa_unwrap(RM_CALL_XFER, &x, &c) != 0);
	x.size = sizeof(ctl);
	x.cmd = RM_ESC_XFER; /* nested wrappers are not ours */
	CHECK(pa_unwrap(RM_CALL_XFER, &x, &c) != 0);
	x.cmd = RM_ESC_CONTROL;
	x.ptr = 0;
	CHECK(pa_unwrap(RM_CALL_XFER, &x, &c) != 0);
}

/* A client on FD_CTL, a device with deviceId 3, four TSGs in every form. */
static void test_alloc(void)
{
	struct rm_device_alloc dev = { .deviceId = 3 };
	rm_handle cl = RM_CLIENT_HANDLE_BASE;

	pa_track_init(&T);
	CHECK_EQ_U(alloc64(FD_CTL, 0, 0, cl, RM_CLASS_ROOT_CLIENT, NULL, 0, 0, 0),
		   PA_APPLY_NEW_CLIENT);
	CHECK(pa_track_fd_in_use(&T, FD_CTL));
	/* Failed calls are never tracked: RM status, or ioctl() itself. */
	CHECK_EQ_U(alloc64(FD_CTL, 0, 0, cl + 1, RM_CLASS_ROOT_CLIENT, NULL, 0, 0x23, 0), 0x100);
	struct rm_alloc64_params bad = { .hObjectNew = cl + 2, .hClass = RM_CLASS_ROOT };
	CHECK_EQ_U(complete(FD_CTL, RM_CALL_ALLOC64, &bad, -1), 0x100);
	CHECK(!pa_track_fd_in_use(&T, FD_OTHER));

	CHECK_EQ_U(alloc21(FD_CTL, cl, cl, H_DEV, RM_CLASS_DEVICE, &dev, sizeof(dev), 0, 1), 0);
	ev.n = 0;
	add_tsg(cl, 0x70, 1, 0);
	add_tsg(cl, 0x71, 11, 1);
	add_tsg(cl, 0x72, 12, 2);
	add_tsg(cl, 0x73, 13, 3);
	CHECK_EQ_U(T.ntsg, 4);
	CHECK_EQ_U(ev.n, 4);
	for (int i = 0; i < 4 && i < ev.n; i++) {
		struct pa_tsg *g = &ev.ev[i].tsg;

		CHECK_EQ_U(ev.ev[i].type, PA_EV_TSG);
		CHECK_EQ_U(g->h, 0x70u + (unsigned)i);
		CHECK_EQ_U(g->engine_type, i == 0 ? 1u : 10u + (unsigned)i);
		CHECK_EQ_U(g->device_instance, 3);
		CHECK_EQ_U(g->h_device, H_DEV);
		/* Issued on another fd: commands still go to the client's. */
		CHECK_EQ_U(g->fd, FD_CTL);
		CHECK_EQ_U(g->timeslice_us, GQ_UNKNOWN);
		CHECK_EQ_U(g->app_timeslice_us, GQ_UNKNOWN);
		CHECK_EQ_U(g->interleave, GQ_UNKNOWN);
	}
	/* A failed TSG alloc is not tracked. */
	struct rm_tsg_alloc a = { .engineType = 1 };
	alloc64(FD_CTL, cl, H_DEV, 0x79, RM_CLASS_TSG, &a, sizeof(a), RM_ERR_INVALID_OBJECT_PARENT, 0);
	CHECK(pa_track_tsg_find(&T, cl, 0x79) == NULL);
	/* Short params: tracked, engine unknown; unknown device: instance unknown. */
	alloc64(FD_CTL, cl, 0xbad, 0x7a, RM_CLASS_TSG, &a, 8, 0, 0);
	CHECK(pa_track_tsg_find(&T, cl, 0x7a) != NULL);
	CHECK_EQ_U(pa_track_tsg_find(&T, cl, 0x7a)->engine_type, GQ_UNKNOWN);
	CHECK_EQ_U(pa_track_tsg_find(&T, cl, 0x7a)->device_instance, GQ_UNKNOWN);
	CHECK_EQ_U(pa_track_tsg_find(&T, cl, 0x7a)->fd, FD_CTL);
}

static unsigned set_timeslice(rm_handle cl, rm_handle h, rm_u64 us, rm_u32 status, int xfer)
{
	struct rm_tsg_timeslice ts = { .timesliceUs = us };
	struct rm_control_params p = { .hClient = cl, .hObject = h,
				       .cmd = RM_CTRL_TSG_SET_TIMESLICE, .params = ptr(&ts),
				       .paramsSize = sizeof(ts), .status = status };
	struct rm_xfer x = { .cmd = RM_ESC_CONTROL, .size = sizeof(p), .ptr = ptr(&p) };

	return xfer ? complete(FD_CTL, RM_CALL_XFER, &x, 0) : complete(FD_CTL, RM_CALL_CONTROL, &p, 0);
}

static void test_control(void)
{
	rm_handle cl = RM_CLIENT_HANDLE_BASE;
	struct rm_tsg_interleave il = { .tsgInterleaveLevel = 2 };
	struct rm_control_params p = { .hClient = cl, .hObject = 0x71,
				       .cmd = RM_CTRL_TSG_SET_INTERLEAVE, .params = ptr(&il),
				       .paramsSize = sizeof(il) };

	ev.n = 0;
	set_timeslice(cl, 0x70, 2048, 0, 0);
	CHECK_EQ_U(ev.n, 1);
	CHECK_EQ_U(ev.ev[0].tsg.timeslice_us, 2048);
	CHECK_EQ_U(ev.ev[0].tsg.app_timeslice_us, 2048);
	set_timeslice(cl, 0x72, 1024, 0, 1);
	CHECK_EQ_U(ev.n, 2);
	CHECK_EQ_U(ev.ev[1].tsg.h, 0x72);
	CHECK_EQ_U(ev.ev[1].tsg.timeslice_us, 1024);
	/* Refused by RM, or on a TSG we do not know: nothing changes. */
	CHECK_EQ_U(set_timeslice(cl, 0x70, 7, RM_ERR_INVALID_ARGUMENT, 0), 0x100);
	set_timeslice(cl, 0x99, 7, 0, 0);
	CHECK_EQ_U(ev.n, 2);
	CHECK_EQ_U(pa_track_tsg_find(&T, cl, 0x70)->timeslice_us, 2048);

	complete(FD_CTL, RM_CALL_CONTROL, &p, 0);
	CHECK_EQ_U(ev.n, 3);
	CHECK_EQ_U(pa_track_tsg_find(&T, cl, 0x71)->interleave, 2);

	/* A refused rewrite keeps the last accepted value, notes the ask. */
	pa_track_note_timeslice(&T, cl, 0x70, 4096, 0, 50, record, &ev);
	CHECK_EQ_U(pa_track_tsg_find(&T, cl, 0x70)->timeslice_us, 2048);
	CHECK_EQ_U(pa_track_tsg_find(&T, cl, 0x70)->app_timeslice_us, 4096);
	pa_track_note_timeslice(&T, cl, 0x70, 2048, 1, 50, record, &ev);
	CHECK_EQ_U(pa_track_tsg_find(&T, cl, 0x70)->timeslice_us, 50);
	CHECK_EQ_U(ev.n, 5);
}

static int plan(rm_handle h, rm_u32 cmd, rm_u32 size, rm_u32 gr, rm_u32 copy, int xfer,
		struct pa_rewrite *rw)
{
	struct rm_tsg_timeslice ts = { .timesliceUs = 2048 };
	struct rm_control_params p = { .hClient = RM_CLIENT_HANDLE_BASE, .hObject = h, .cmd = cmd,
				       .params = ptr(&ts), .paramsSize = size };
	struct rm_xfer x = { .cmd = RM_ESC_CONTROL, .size = sizeof(p), .ptr = ptr(&p) };
	struct pa_call c;

	if (pa_unwrap(xfer ? RM_CALL_XFER : RM_CALL_CONTROL, xfer ? (void *)&x : (void *)&p, &c))
		return -1;
	memset(rw, 0, sizeof(*rw));
	return pa_rewrite_plan(&T, &c, gr, copy, rw);
}

static void test_rewrite(void)
{
	const rm_u32 set = RM_CTRL_TSG_SET_TIMESLICE;
	struct pa_rewrite rw;

	CHECK_EQ_U(pa_policy_value(RM_ENGINE_GR0, 50, 100), 50);
	CHECK_EQ_U(pa_policy_value(RM_ENGINE_GR7, 50, 100), 50);
	CHECK_EQ_U(pa_policy_value(RM_ENGINE_COPY0, 50, 100), 100);
	CHECK_EQ_U(pa_policy_value(RM_ENGINE_COPY9, 50, 100), 100);
	CHECK_EQ_U(pa_policy_value(0, 50, 100), 0);
	CHECK_EQ_U(pa_policy_value(RM_ENGINE_COPY9 + 1, 50, 100), 0);
	CHECK_EQ_U(pa_policy_value(GQ_UNKNOWN, 50, 100), 0);

	CHECK(plan(0x70, set, 8, 50, 0, 0, &rw) == 1);
	CHECK_EQ_U(rw.value_us, 50);
	CHECK_EQ_U(rw.app_us, 2048);
	CHECK_EQ_U(rw.h_tsg, 0x70);
	CHECK(plan(0x70, set, 8, 50, 0, 1, &rw) == 1); /* inside an XFER */
	CHECK(plan(0x71, set, 8, 50, 0, 0, &rw) == 0); /* copy TSG, copy policy 0 */
	CHECK(plan(0x71, set, 8, 50, 100, 1, &rw) == 1);
	CHECK_EQ_U(rw.value_us, 100);
	CHECK(plan(0x70, set, 8, 0, 100, 0, &rw) == 0);  /* GR TSG, GR policy 0 */
	CHECK(plan(0x7a, set, 8, 50, 100, 0, &rw) == 0); /* engine unknown */
	CHECK(plan(0x99, set, 8, 50, 100, 0, &rw) == 0); /* not tracked */
	CHECK(plan(0x70, set, 4, 50, 100, 0, &rw) == 0); /* malformed */
	CHECK(plan(0x70, RM_CTRL_TSG_GET_TIMESLICE, 8, 50, 100, 0, &rw) == 0);
}

static void test_free(void)
{
	rm_handle cl = RM_CLIENT_HANDLE_BASE;

	ev.n = 0;
	CHECK_EQ_U(free_obj(cl, 0x73, RM_ERR_INVALID_OBJECT_HANDLE, 0), 0x100);
	CHECK(pa_track_tsg_find(&T, cl, 0x73) != NULL);
	free_obj(cl, 0x73, 0, 1);
	CHECK_EQ_U(ev.n, 1);
	CHECK_EQ_U(ev.ev[0].type, PA_EV_TSG_GONE);
	CHECK_EQ_U(ev.ev[0].tsg.h, 0x73);
	CHECK(pa_track_tsg_find(&T, cl, 0x73) == NULL);
	/* The device takes its TSGs, not the one under another parent. */
	free_obj(cl, H_DEV, 0, 0);
	CHECK_EQ_U(ev.n, 4);
	CHECK_EQ_U(T.ntsg, 1);
	CHECK(pa_track_tsg_find(&T, cl, 0x7a) != NULL);
	/* The client takes the rest. */
	free_obj(cl, cl, 0, 0);
	CHECK_EQ_U(ev.n, 5);
	CHECK_EQ_U(T.ntsg, 0);
	CHECK(!pa_track_fd_in_use(&T, FD_CTL));
}

static void test_close_fd(void)
{
	struct rm_device_alloc dev = { .deviceId = 0 };
	rm_handle c1 = 0xc1d00010, c2 = 0xc1d00011;
	struct pa_tsg snap[8];

	pa_track_init(&T);
	ev.n = 0;
	alloc64(FD_CTL, 0, 0, c1, RM_CLASS_ROOT, NULL, 0, 0, 0);
	alloc64(FD_OTHER, 0, 0, c2, RM_CLASS_ROOT_NON_PRIV, NULL, 0, 0, 0);
	alloc64(FD_CTL, c1, c1, H_DEV, RM_CLASS_DEVICE, &dev, sizeof(dev), 0, 0);
	alloc64(FD_OTHER, c2, c2, H_DEV, RM_CLASS_DEVICE, &dev, sizeof(dev), 0, 0);
	add_tsg(c1, 0x1, 1, 0);
	add_tsg(c2, 0x1, 1, 0); /* same handle, other client */
	CHECK_EQ_U(pa_track_snapshot(&T, snap, 8), 2);
	CHECK_EQ_U(pa_track_snapshot(&T, snap, 1), 1);
	ev.n = 0;
	pa_track_close_fd(&T, FD_CTL, record, &ev);
	CHECK_EQ_U(ev.n, 1);
	CHECK_EQ_U(ev.ev[0].tsg.h_client, c1);
	CHECK(pa_track_tsg_find(&T, c2, 0x1) != NULL);
	CHECK(!pa_track_fd_in_use(&T, FD_CTL));
	CHECK(pa_track_fd_in_use(&T, FD_OTHER));
}

static void test_bounds(void)
{
	struct rm_device_alloc dev = { .deviceId = 0 };
	rm_handle cl = RM_CLIENT_HANDLE_BASE;
	struct pa_tsg *snap = malloc(sizeof(*snap) * (PA_MAX_TSGS + 8));

	pa_track_init(&T);
	for (unsigned i = 0; i < PA_MAX_CLIENTS + 3; i++)
		alloc64(FD_CTL, 0, 0, cl + i, RM_CLASS_ROOT, NULL, 0, 0, 0);
	CHECK_EQ_U(T.ctr.client_overflow, 3);
	for (unsigned i = 0; i < PA_MAX_DEVICES + 2; i++)
		alloc64(FD_CTL, cl, cl, H_DEV + i, RM_CLASS_DEVICE, &dev, sizeof(dev), 0, 0);
	CHECK_EQ_U(T.ctr.device_overflow, 2);
	for (unsigned i = 0; i < PA_MAX_TSGS + 5; i++)
		add_tsg(cl, 0x1000 + i, 1, 0);
	CHECK_EQ_U(T.ctr.tsg_overflow, 5);
	CHECK_EQ_U(T.ntsg, PA_MAX_TSGS);
	CHECK(snap != NULL);
	if (snap != NULL)
		CHECK_EQ_U(pa_track_snapshot(&T, snap, PA_MAX_TSGS + 8), PA_MAX_TSGS);
	/* A freed slot is reused. */
	free_obj(cl, 0x1000, 0, 0);
	add_tsg(cl, 0x9999, 1, 0);
	CHECK(pa_track_tsg_find(&T, cl, 0x9999) != NULL);
	CHECK_EQ_U(T.ctr.tsg_overflow, 5);
	free(snap);
}

/* (Which control each COMMAND op becomes: tests/abi/test_rm_plan.c.) */
static void test_deadline(void)
{
	CHECK(pa_deadline_passed(1000, 1000, 0));
	CHECK(!pa_deadline_passed(0, 999, 1));
	CHECK(pa_deadline_passed(0, 1000, 1));
	CHECK(!pa_deadline_passed(5, 5 + 4000000000ull, 5000000));
}

static void test_messages(void)
{
	struct pa_tsg g = { .used = 1, .fd = 5, .h_client = 1, .h = 2, .h_device = 3,
			    .device_instance = 0, .engine_type = 11, .timeslice_us = 50,
			    .app_timeslice_us = 2048, .interleave = GQ_UNKNOWN };
	struct gq_command c = { .op = GQ_OP_GET_TIMESLICE, .h_client = 1, .h_tsg = 2 };
	struct gq_hello h;
	struct gq_tsg t;
	struct gq_tsg_gone gone;
	struct gq_synced s;
	struct gq_result r;

	pa_msg_hello(&h, 0, 42, GQ_HELLO_F_RECONNECT, 4, "a-very-long-command-name");
	CHECK_EQ_U(gq_msg_check(&h, sizeof(h)), GQ_CHECK_OK);
	CHECK(strcmp(h.comm, "a-very-long-com") == 0);
	CHECK_EQ_U(h.lib_version, GQ_PROTO_VERSION);
	CHECK_EQ_U(h.ntsg, 4);
	pa_msg_tsg(&t, 1, &g);
	CHECK_EQ_U(gq_msg_check(&t, sizeof(t)), GQ_CHECK_OK);
	CHECK_EQ_U(t.h_tsg, 2);
	CHECK_EQ_U(t.fd, 5);
	CHECK_EQ_U(t.engine_type, 11);
	CHECK_EQ_U(t.app_timeslice_us, 2048);
	pa_msg_tsg_gone(&gone, 2, &g);
	CHECK_EQ_U(gq_msg_check(&gone, sizeof(gone)), GQ_CHECK_OK);
	pa_msg_synced(&s, 3, 4);
	CHECK_EQ_U(gq_msg_check(&s, sizeof(s)), GQ_CHECK_OK);
	gq_hdr_init(&c.hdr, GQ_COMMAND, 77);
	pa_msg_result(&r, &c, 0x1b, 0, 9, 1234);
	CHECK_EQ_U(gq_msg_check(&r, sizeof(r)), GQ_CHECK_OK);
	CHECK_EQ_U(r.hdr.seq, 77);
	CHECK_EQ_U(r.rm_status, 0x1b);
	CHECK_EQ_U(r.elapsed_ns, 1234);
}

/* PHASE carries the span only where it was asked for and fits the
 * period, and is made only from a period in range and a recent start
 * (preempt_msg.c). */
static void test_phase(void)
{
	struct pa_wake_counts c;
	struct gq_phase m;

	memset(&c, 0, sizeof(c));
	c.period_ns = 5000000;
	c.last_start_ns = 1000;
	c.at_ns = 2000;
	c.span_us = 612;
	pa_msg_phase(&m, 4, &c, 1);
	CHECK_EQ_U(gq_msg_check(&m, sizeof(m)), GQ_CHECK_OK);
	CHECK_EQ_U(m.flags, GQ_PHASE_F_SPAN);
	CHECK_EQ_U(m.span_us, 612);
	CHECK_EQ_U(m.period_ns, 5000000);
	pa_msg_phase(&m, 5, &c, 0); /* not asked for */
	CHECK_EQ_U(m.flags, 0);
	CHECK_EQ_U(m.span_us, 0);
	c.span_us = 5000; /* the whole period: still a span */
	pa_msg_phase(&m, 6, &c, 1);
	CHECK_EQ_U(m.span_us, 5000);
	c.span_us = 5001; /* over it: none */
	pa_msg_phase(&m, 7, &c, 1);
	CHECK_EQ_U(m.flags, 0);
	CHECK_EQ_U(m.span_us, 0);
	c.span_us = 0; /* none measured yet */
	CHECK_EQ_U(pa_msg_phase(&m, 8, &c, 1), 0);
	CHECK_EQ_U(m.flags, 0);
	/* No phase to send: the latest start more than GQ_PHASE_STALE_NS
	 * before the report (wakes were off: the node agent would drop it),
	 * none, one after the report, a period out of range. */
	c.at_ns = c.last_start_ns + GQ_PHASE_STALE_NS;
	CHECK_EQ_U(pa_msg_phase(&m, 9, &c, 1), 0);
	c.at_ns++;
	CHECK(pa_msg_phase(&m, 9, &c, 1) == -1);
	c.at_ns = 2000;
	c.last_start_ns = 0;
	CHECK(pa_msg_phase(&m, 9, &c, 1) == -1);
	c.last_start_ns = 2001;
	CHECK(pa_msg_phase(&m, 9, &c, 1) == -1);
	c.last_start_ns = 1000;
	c.period_ns = GQ_PHASE_PERIOD_MIN_NS - 1;
	CHECK(pa_msg_phase(&m, 9, &c, 1) == -1);
	c.period_ns = GQ_PHASE_PERIOD_MAX_NS + 1;
	CHECK(pa_msg_phase(&m, 9, &c, 1) == -1);
}

/* WINDOW's checks and the next start (preempt_msg.c). */
static void test_windows(void)
{
	const rm_u64 now = 100000000000ull; /* 100 s */
	struct gq_window ok = { .flags = GQ_WINDOW_F_ON, .period_ns = 10000000ull,
				.start_ns = now - 3000000ull, .sent_ns = now - 1000ull,
				.before_us = 1200, .after_us = 1100, .lease_ms = 1000 };
	struct gq_window w;

	CHECK(pa_window_bad(&ok, now) == NULL);
	w = ok, w.reserved = 1;
	CHECK(pa_window_bad(&w, now) != NULL);
	w = ok, w.flags = 4 | GQ_WINDOW_F_ON;
	CHECK(pa_window_bad(&w, now) != NULL);
	w = ok, w.flags = GQ_WINDOW_F_STATE | GQ_WINDOW_F_ON;
	CHECK(pa_window_bad(&w, now) == NULL);
	w = ok, w.period_ns = 999999;
	CHECK(pa_window_bad(&w, now) != NULL);
	w = ok, w.before_us = GQ_WINDOW_BEFORE_MAX_US + 1;
	CHECK(pa_window_bad(&w, now) != NULL);
	w = ok, w.before_us = 0, w.after_us = 0;
	CHECK(pa_window_bad(&w, now) != NULL);
	w = ok, w.before_us = 5000, w.after_us = 4000; /* 90 % of the period: allowed */
	CHECK(pa_window_bad(&w, now) == NULL);
	w.after_us = 4001;
	CHECK(pa_window_bad(&w, now) != NULL);
	w = ok, w.lease_ms = GQ_WINDOW_LEASE_MAX_MS + 1;
	CHECK(pa_window_bad(&w, now) != NULL);
	w = ok, w.sent_ns = now + GQ_WINDOW_CLOCK_SLACK_NS + 1;
	CHECK(pa_window_bad(&w, now) != NULL);
	w = ok, w.sent_ns = now - GQ_WINDOW_CLOCK_SLACK_NS - 1;
	CHECK(pa_window_bad(&w, now) != NULL);
	w = ok, w.start_ns = now + GQ_WINDOW_START_SLACK_NS + 1;
	CHECK(pa_window_bad(&w, now) != NULL);
	w = ok, w.start_ns = 0;
	CHECK(pa_window_bad(&w, now) != NULL);

	CHECK_EQ_U(pa_window_next_start(100, 95, 10), 105);
	CHECK_EQ_U(pa_window_next_start(100, 90, 10), 110); /* a start now is not after now */
	CHECK_EQ_U(pa_window_next_start(100, 101, 10), 101);
	CHECK_EQ_U(pa_window_next_start(100, 131, 10), 101);
	CHECK_EQ_U(pa_window_next_start(100, 130, 10), 110);
	CHECK_EQ_U(pa_window_next_start(100, 0, 7), 105);
}

int main(void)
{
	test_unwrap();
	test_alloc();
	test_control();
	test_rewrite();
	test_free();
	test_close_fd();
	test_bounds();
	test_deadline();
	test_messages();
	test_phase();
	test_windows();
	CHECK_DONE();
}
