/* SPDX-License-Identifier: Apache-2.0 */
/*
 * preempt_track.c - the preempt agent's tables of RM clients, devices and
 * TSGs, and the SET_TIMESLICE rewrite decision.
 *
 * Owns: decoding completed RM calls into table changes and TSG events.
 * Does not own: locking (the caller's), ioctl(), I/O of any kind. The only
 * memory it reads besides its tables is the application's parameter blocks,
 * which the kernel has just read or written for the same call.
 */
#include <stdint.h>
#include <string.h>

#include "preempt_track.h"

_Static_assert(PA_TSG_MAX_CHANS <= RM_DISABLE_CHANNELS_MAX, "one DISABLE_CHANNELS names them all");

void pa_track_init(struct pa_track *t)
{
	memset(t, 0, sizeof(*t));
}

static void *pa_ptr(rm_u64 p)
{
	return (void *)(uintptr_t)p;
}

int pa_unwrap(enum rm_call_kind kind, void *arg, struct pa_call *c)
{
	memset(c, 0, sizeof(*c));
	if (arg == NULL)
		return -1;
	if (kind == RM_CALL_XFER) {
		struct rm_xfer *x = arg;

		c->kind = rm_xfer_kind(x);
		c->block = pa_ptr(x->ptr);
		c->xfer = 1;
		c->outer = x;
	} else {
		c->kind = kind;
		c->block = arg;
	}
	if (c->kind == RM_CALL_NONE || c->kind == RM_CALL_XFER || c->block == NULL)
		return -1;
	return 0;
}

rm_u32 pa_call_status(const struct pa_call *c)
{
	int off = rm_status_offset(c->kind);
	rm_u32 status;

	if (off < 0)
		return RM_ERR_INVALID_ARGUMENT;
	memcpy(&status, (const char *)c->block + off, sizeof(status));
	return status;
}

int pa_call_is_set_timeslice(const struct pa_call *c)
{
	const struct rm_control_params *p = c->block;

	return c->kind == RM_CALL_CONTROL && p->cmd == RM_CTRL_TSG_SET_TIMESLICE &&
	       p->paramsSize == sizeof(struct rm_tsg_timeslice) && p->params != 0;
}

static int pa_call_is_set_interleave(const struct pa_call *c)
{
	const struct rm_control_params *p = c->block;

	return c->kind == RM_CALL_CONTROL && p->cmd == RM_CTRL_TSG_SET_INTERLEAVE &&
	       p->paramsSize == sizeof(struct rm_tsg_interleave) && p->params != 0;
}

int pa_track_wants(const struct pa_call *c)
{
	struct rm_alloc_view v;

	switch (c->kind) {
	case RM_CALL_ALLOC21:
	case RM_CALL_ALLOC64:
		if (rm_alloc_view_of(c->kind, c->block, &v) != 0)
			return 0;
		return rm_class_is_client(v.hClass) || v.hClass == RM_CLASS_DEVICE ||
		       v.hClass == RM_CLASS_SUBDEVICE || v.hClass == RM_CLASS_TSG ||
		       rm_class_is_channel(v.hClass);
	case RM_CALL_CONTROL:
		return pa_call_is_set_timeslice(c) || pa_call_is_set_interleave(c);
	case RM_CALL_FREE:
		return 1;
	default:
		return 0;
	}
}

int pa_track_should_apply(enum rm_call_kind kind, void *arg, int ret, struct pa_call *c)
{
	if (ret != 0 || pa_unwrap(kind, arg, c) != 0)
		return 0;
	return pa_call_status(c) == RM_OK && pa_track_wants(c);
}

/* ---- lookups ---- */

static struct pa_client *pa_client_find(struct pa_track *t, rm_handle h)
{
	for (unsigned i = 0; i < t->client_hi; i++)
		if (t->clients[i].used && t->clients[i].h == h)
			return &t->clients[i];
	return NULL;
}

static struct pa_device *pa_device_find(struct pa_track *t, rm_handle h_client, rm_handle h)
{
	for (unsigned i = 0; i < t->device_hi; i++) {
		struct pa_device *d = &t->devices[i];

		if (d->used && d->h_client == h_client && d->h == h)
			return d;
	}
	return NULL;
}

rm_u32 pa_track_device_instance(struct pa_track *t, rm_handle h_client, rm_handle h_device)
{
	const struct pa_device *d = pa_device_find(t, h_client, h_device);

	return d != NULL ? d->instance : GQ_UNKNOWN;
}

rm_u32 pa_track_subdevice_instance(const struct pa_track *t, rm_handle h_client,
				   rm_handle h_subdevice)
{
	for (unsigned i = 0; i < t->device_hi; i++) {
		const struct pa_device *d = &t->devices[i];

		if (d->used && d->h_client == h_client && d->h_subdevice == h_subdevice)
			return d->instance;
	}
	return GQ_UNKNOWN;
}

struct pa_tsg *pa_track_tsg_find(struct pa_track *t, rm_handle h_client, rm_handle h)
{
	for (unsigned i = 0; i < t->tsg_hi; i++) {
		struct pa_tsg *g = &t->tsgs[i];

		if (g->used && g->h_client == h_client && g->h == h)
			return g;
	}
	return NULL;
}

/* A free slot in an array of n entries of `size` bytes whose first member
 * is `int used`; advances *hi when the slot is new. */
static void *pa_slot(void *base, size_t size, unsigned n, unsigned *hi)
{
	for (unsigned i = 0; i < n; i++) {
		int *used = (int *)((char *)base + i * size);

		if (!*used) {
			if (i >= *hi)
				*hi = i + 1;
			return used;
		}
	}
	return NULL;
}

static void pa_emit_tsg(const struct pa_tsg *g, enum pa_event_type type, pa_emit_fn *emit,
			void *ctx)
{
	struct pa_event ev;

	if (emit == NULL)
		return;
	ev.type = type;
	ev.tsg = *g;
	emit(ctx, &ev);
}

/* ---- allocations ---- */

static unsigned pa_add_client(struct pa_track *t, int fd, rm_handle h)
{
	struct pa_client *c = pa_client_find(t, h);

	if (c == NULL)
		c = pa_slot(t->clients, sizeof(*c), PA_MAX_CLIENTS, &t->client_hi);
	if (c == NULL) {
		t->ctr.client_overflow++;
		return 0;
	}
	c->used = 1;
	c->fd = fd;
	c->h = h;
	return PA_APPLY_NEW_CLIENT;
}

static void pa_add_device(struct pa_track *t, const struct rm_alloc_view *v)
{
	struct pa_device *d = pa_device_find(t, v->hRoot, v->hObjectNew);
	rm_u32 instance = GQ_UNKNOWN;

	if (rm_alloc_params_size(v) >= sizeof(rm_u32))
		memcpy(&instance, pa_ptr(v->pAllocParms), sizeof(instance));
	if (d == NULL)
		d = pa_slot(t->devices, sizeof(*d), PA_MAX_DEVICES, &t->device_hi);
	if (d == NULL) {
		t->ctr.device_overflow++;
		return;
	}
	if (!d->used)
		d->h_subdevice = 0;
	d->used = 1;
	d->h_client = v->hRoot;
	d->h = v->hObjectNew;
	d->instance = instance;
}

/* Report a TSG again when what the node agent sees of it changed. */
static void pa_emit_if_changed(const struct pa_tsg *g, rm_u32 old_flags, pa_emit_fn *emit,
			       void *ctx)
{
	if (pa_tsg_flags(g) != old_flags)
		pa_emit_tsg(g, PA_EV_TSG, emit, ctx);
}

/* The subdevice gating uses for d's TSGs (0: none); each TSG keeps a copy
 * so its flags and a gate need no device lookup. */
static void pa_device_subdevice(struct pa_track *t, struct pa_device *d, rm_handle h,
				pa_emit_fn *emit, void *ctx)
{
	d->h_subdevice = h;
	for (unsigned i = 0; i < t->tsg_hi; i++) {
		struct pa_tsg *g = &t->tsgs[i];
		rm_u32 old;

		if (!g->used || g->h_client != d->h_client || g->h_device != d->h)
			continue;
		old = pa_tsg_flags(g);
		g->h_subdevice = h;
		pa_emit_if_changed(g, old, emit, ctx);
	}
}

/* DISABLE_CHANNELS is a subdevice control: the first subdevice of a device
 * is the one gating uses for that device's TSGs. */
static void pa_add_subdevice(struct pa_track *t, const struct rm_alloc_view *v, pa_emit_fn *emit,
			     void *ctx)
{
	struct pa_device *d = pa_device_find(t, v->hRoot, v->hObjectParent);

	if (d != NULL && d->h_subdevice == 0)
		pa_device_subdevice(t, d, v->hObjectNew, emit, ctx);
}

static void pa_add_channel(struct pa_track *t, const struct rm_alloc_view *v, pa_emit_fn *emit,
			   void *ctx)
{
	struct pa_tsg *g = pa_track_tsg_find(t, v->hRoot, v->hObjectParent);
	rm_u32 old;

	if (g == NULL)
		return;
	old = pa_tsg_flags(g);
	if (g->nchans < PA_TSG_MAX_CHANS)
		g->chans[g->nchans++] = v->hObjectNew;
	else
		g->chans_overflow = 1;
	pa_emit_if_changed(g, old, emit, ctx);
}

/* A freed channel: forget it in its TSG (reported when that leaves the
 * TSG without channels). Returns 1 if it was one. */
static int pa_drop_channel(struct pa_track *t, rm_handle h_client, rm_handle h, pa_emit_fn *emit,
			   void *ctx)
{
	for (unsigned i = 0; i < t->tsg_hi; i++) {
		struct pa_tsg *g = &t->tsgs[i];
		rm_u32 old;

		if (!g->used || g->h_client != h_client)
			continue;
		old = pa_tsg_flags(g);
		for (unsigned k = 0; k < g->nchans; k++) {
			if (g->chans[k] != h)
				continue;
			g->chans[k] = g->chans[--g->nchans];
			pa_emit_if_changed(g, old, emit, ctx);
			return 1;
		}
	}
	return 0;
}

static void pa_add_tsg(struct pa_track *t, int fd, const struct rm_alloc_view *v,
		       pa_emit_fn *emit, void *ctx)
{
	const size_t engine_end = RM_OFFSETOF(struct rm_tsg_alloc, engineType) + sizeof(rm_u32);
	struct pa_client *c = pa_client_find(t, v->hRoot);
	struct pa_device *d = pa_device_find(t, v->hRoot, v->hObjectParent);
	struct pa_tsg *g = pa_track_tsg_find(t, v->hRoot, v->hObjectNew);
	struct rm_tsg_alloc a;

	if (g == NULL) {
		g = pa_slot(t->tsgs, sizeof(*g), PA_MAX_TSGS, &t->tsg_hi);
		if (g == NULL) {
			t->ctr.tsg_overflow++;
			return;
		}
		t->ntsg++;
	}
	g->used = 1;
	/* RM accepts controls only on the fd that created the client. */
	g->fd = c != NULL ? c->fd : fd;
	g->h_client = v->hRoot;
	g->h = v->hObjectNew;
	g->h_device = v->hObjectParent;
	g->device_instance = d != NULL ? d->instance : GQ_UNKNOWN;
	g->h_subdevice = d != NULL ? d->h_subdevice : 0;
	g->nchans = 0;
	g->chans_overflow = 0;
	g->gated = 0;
	g->leased = 0;
	g->lease_end_ns = 0;
	g->windowed = 0;
	g->engine_type = GQ_UNKNOWN;
	if (rm_alloc_params_size(v) >= engine_end) {
		memcpy(&a, pa_ptr(v->pAllocParms), engine_end);
		g->engine_type = a.engineType;
	}
	g->timeslice_us = GQ_UNKNOWN;
	g->app_timeslice_us = GQ_UNKNOWN;
	g->interleave = GQ_UNKNOWN;
	pa_emit_tsg(g, PA_EV_TSG, emit, ctx);
}

static unsigned pa_apply_alloc(struct pa_track *t, int fd, const struct pa_call *c,
			       pa_emit_fn *emit, void *ctx)
{
	struct rm_alloc_view v;

	if (rm_alloc_view_of(c->kind, c->block, &v) != 0)
		return 0;
	if (rm_class_is_client(v.hClass))
		return pa_add_client(t, fd, rm_alloc_client_handle(&v));
	if (v.hClass == RM_CLASS_DEVICE)
		pa_add_device(t, &v);
	else if (v.hClass == RM_CLASS_SUBDEVICE)
		pa_add_subdevice(t, &v, emit, ctx);
	else if (v.hClass == RM_CLASS_TSG)
		pa_add_tsg(t, fd, &v, emit, ctx);
	else if (rm_class_is_channel(v.hClass))
		pa_add_channel(t, &v, emit, ctx);
	return 0;
}

/* ---- frees ---- */

static void pa_drop_tsg(struct pa_track *t, struct pa_tsg *g, pa_emit_fn *emit, void *ctx)
{
	pa_emit_tsg(g, PA_EV_TSG_GONE, emit, ctx);
	g->used = 0;
	t->ntsg--;
}

/* Drop the TSGs of client h_client under parent h_device (under any parent
 * when all_parents). */
static void pa_drop_tsgs(struct pa_track *t, rm_handle h_client, rm_handle h_device,
			 int all_parents, pa_emit_fn *emit, void *ctx)
{
	for (unsigned i = 0; i < t->tsg_hi; i++) {
		struct pa_tsg *g = &t->tsgs[i];

		if (g->used && g->h_client == h_client && (all_parents || g->h_device == h_device))
			pa_drop_tsg(t, g, emit, ctx);
	}
}

static void pa_drop_client(struct pa_track *t, rm_handle h, pa_emit_fn *emit, void *ctx)
{
	struct pa_client *c = pa_client_find(t, h);

	pa_drop_tsgs(t, h, 0, 1, emit, ctx);
	for (unsigned i = 0; i < t->device_hi; i++)
		if (t->devices[i].used && t->devices[i].h_client == h)
			t->devices[i].used = 0;
	if (c != NULL)
		c->used = 0;
}

/* A freed subdevice: its device's TSGs can no longer be gated. */
static void pa_drop_subdevice(struct pa_track *t, rm_handle h_client, rm_handle h,
			      pa_emit_fn *emit, void *ctx)
{
	for (unsigned i = 0; i < t->device_hi; i++) {
		struct pa_device *d = &t->devices[i];

		if (d->used && d->h_client == h_client && d->h_subdevice == h)
			pa_device_subdevice(t, d, 0, emit, ctx);
	}
}

static void pa_apply_free(struct pa_track *t, const struct rm_free_params *p, pa_emit_fn *emit,
			  void *ctx)
{
	struct pa_device *d;
	struct pa_tsg *g;

	if (p->hObjectOld == p->hRoot) {
		pa_drop_client(t, p->hRoot, emit, ctx);
		return;
	}
	/* RM frees an object's children with it: a device takes its TSGs. */
	d = pa_device_find(t, p->hRoot, p->hObjectOld);
	if (d != NULL) {
		pa_drop_tsgs(t, p->hRoot, p->hObjectOld, 0, emit, ctx);
		d->used = 0;
		return;
	}
	g = pa_track_tsg_find(t, p->hRoot, p->hObjectOld);
	if (g != NULL) {
		pa_drop_tsg(t, g, emit, ctx);
		return;
	}
	if (!pa_drop_channel(t, p->hRoot, p->hObjectOld, emit, ctx))
		pa_drop_subdevice(t, p->hRoot, p->hObjectOld, emit, ctx);
}

/* ---- controls ---- */

static rm_u32 pa_u32_clamp(rm_u64 v)
{
	/* GQ_UNKNOWN is reserved on the wire. */
	return v >= GQ_UNKNOWN ? GQ_UNKNOWN - 1 : (rm_u32)v;
}

void pa_track_note_timeslice(struct pa_track *t, rm_handle h_client, rm_handle h, rm_u64 app_us,
			     int accepted, rm_u64 rm_us, pa_emit_fn *emit, void *ctx)
{
	struct pa_tsg *g = pa_track_tsg_find(t, h_client, h);

	if (g == NULL)
		return;
	/* Unknown stays unknown: the clamp would turn it into a real value. */
	g->app_timeslice_us = app_us == GQ_UNKNOWN ? GQ_UNKNOWN : pa_u32_clamp(app_us);
	if (accepted)
		g->timeslice_us = pa_u32_clamp(rm_us);
	g->set_seq++;
	pa_emit_tsg(g, PA_EV_TSG, emit, ctx);
}

static void pa_apply_control(struct pa_track *t, const struct pa_call *c, pa_emit_fn *emit,
			     void *ctx)
{
	const struct rm_control_params *p = c->block;
	struct rm_tsg_timeslice ts;
	struct rm_tsg_interleave il;
	struct pa_tsg *g;

	if (pa_call_is_set_timeslice(c)) {
		memcpy(&ts, pa_ptr(p->params), sizeof(ts));
		pa_track_note_timeslice(t, p->hClient, p->hObject, ts.timesliceUs, 1,
					ts.timesliceUs, emit, ctx);
		return;
	}
	if (!pa_call_is_set_interleave(c))
		return;
	g = pa_track_tsg_find(t, p->hClient, p->hObject);
	if (g == NULL)
		return;
	memcpy(&il, pa_ptr(p->params), sizeof(il));
	g->interleave = il.tsgInterleaveLevel;
	g->set_seq++;
	pa_emit_tsg(g, PA_EV_TSG, emit, ctx);
}

unsigned pa_track_apply(struct pa_track *t, int fd, const struct pa_call *c, pa_emit_fn *emit,
			void *ctx)
{
	switch (c->kind) {
	case RM_CALL_ALLOC21:
	case RM_CALL_ALLOC64:
		return pa_apply_alloc(t, fd, c, emit, ctx);
	case RM_CALL_CONTROL:
		pa_apply_control(t, c, emit, ctx);
		return 0;
	case RM_CALL_FREE:
		pa_apply_free(t, c->block, emit, ctx);
		return 0;
	default:
		return 0;
	}
}

void pa_track_close_fd(struct pa_track *t, int fd, pa_emit_fn *emit, void *ctx)
{
	for (unsigned i = 0; i < t->client_hi; i++)
		if (t->clients[i].used && t->clients[i].fd == fd)
			pa_drop_client(t, t->clients[i].h, emit, ctx);
	for (unsigned i = 0; i < t->tsg_hi; i++)
		if (t->tsgs[i].used && t->tsgs[i].fd == fd)
			pa_drop_tsg(t, &t->tsgs[i], emit, ctx);
}

int pa_track_fd_in_use(const struct pa_track *t, int fd)
{
	for (unsigned i = 0; i < t->client_hi; i++)
		if (t->clients[i].used && t->clients[i].fd == fd)
			return 1;
	for (unsigned i = 0; i < t->tsg_hi; i++)
		if (t->tsgs[i].used && t->tsgs[i].fd == fd)
			return 1;
	return 0;
}

unsigned pa_track_snapshot(const struct pa_track *t, struct pa_tsg *out, unsigned max)
{
	unsigned n = 0;

	for (unsigned i = 0; i < t->tsg_hi && n < max; i++)
		if (t->tsgs[i].used)
			out[n++] = t->tsgs[i];
	return n;
}

/* ---- gating ---- */

rm_u32 pa_tsg_flags(const struct pa_tsg *g)
{
	rm_u32 f = 0;

	if (g->gated)
		f |= GQ_TSG_F_GATED;
	if (g->leased)
		f |= GQ_TSG_F_LEASED;
	if (g->h_subdevice == 0 || g->nchans == 0 || g->chans_overflow)
		f |= GQ_TSG_F_NO_GATE;
	return f;
}

rm_u32 pa_gate_params(const struct pa_tsg *g, int disable, struct rm_disable_channels *out)
{
	memset(out, 0, sizeof(*out));
	if (pa_tsg_flags(g) & GQ_TSG_F_NO_GATE)
		return GQ_ERR_NOT_GATEABLE;
	out->bDisable = (rm_u8)(disable != 0);
	out->numChannels = g->nchans;
	for (unsigned i = 0; i < g->nchans; i++) {
		out->hClientList[i] = g->h_client;
		out->hChannelList[i] = g->chans[i];
	}
	return 0;
}

/* ---- the rewrite decision ---- */

rm_u32 pa_policy_value(rm_u32 engine_type, rm_u32 gr_us, rm_u32 copy_us)
{
	if (rm_engine_is_gr(engine_type))
		return gr_us;
	if (rm_engine_is_copy(engine_type))
		return copy_us;
	return 0;
}

int pa_rewrite_plan(struct pa_track *t, const struct pa_call *c, rm_u32 gr_us, rm_u32 copy_us,
		    struct pa_rewrite *rw)
{
	const struct rm_control_params *p = c->block;
	struct rm_tsg_timeslice ts;
	struct pa_tsg *g;
	rm_u32 want;

	if (!pa_call_is_set_timeslice(c))
		return 0;
	g = pa_track_tsg_find(t, p->hClient, p->hObject);
	if (g == NULL)
		return 0;
	want = pa_policy_value(g->engine_type, gr_us, copy_us);
	if (want == 0)
		return 0;
	memcpy(&ts, pa_ptr(p->params), sizeof(ts));
	rw->h_client = p->hClient;
	rw->h_tsg = p->hObject;
	rw->app_us = ts.timesliceUs;
	rw->value_us = want;
	return 1;
}
