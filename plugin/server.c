/* SPDX-License-Identifier: Apache-2.0 */
/*
 * server.c - one device-plugin gRPC server on the C core API (server.h).
 *
 * Every call is a struct rpc; each batch started on it holds one
 * reference (pending) and the rpc is freed when the last batch completes.
 * All of it runs on the server's own thread, which waits in
 * grpc_completion_queue_next. gRPC's C API has no way to wake a completion
 * queue from another thread, so while ListAndWatch streams are open the
 * thread also wakes every PSERVER_TICK_MS to look for a new device
 * generation; with no stream open it sleeps until a call comes.
 */
#include "plugin/server.h"
#include "plugin/metrics.h"
#include "common/log.h"

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>

#include "common/preemptlib.h"

#define SVC "/v1beta1.DevicePlugin/"

enum method { M_UNKNOWN, M_OPTIONS, M_LIST, M_PREFERRED, M_ALLOCATE, M_PRESTART };
enum tag_kind { T_NEW, T_RECV, T_SEND, T_CLOSE };

struct rpc;
struct tag {
	enum tag_kind kind;
	struct rpc *r;
};

struct rpc {
	struct pserver *s;
	struct tag t_new, t_recv, t_send, t_close;
	grpc_call *call;
	grpc_call_details details;
	grpc_metadata_array md;
	grpc_byte_buffer *recv_buf, *send_buf;
	grpc_slice status_details;
	int have_details;
	int cancelled; /* RECV_CLOSE_ON_SERVER's answer */
	int finished;  /* our status is sent: nothing more goes out */
	int pending;   /* batches in flight */
	enum method m;
	int counted;   /* one of the unary calls in flight (PSERVER_MAX_CALLS) */
	/* ListAndWatch; kubelet: the stream the kubelet opened after the
	 * latest registration (kept when slots run out) */
	int closed, send_busy, sent_any, stalled, kubelet;
	uint64_t sent_gen, send_started_ms;
	struct rpc *next;
};

struct pserver {
	const struct plugin_config *cfg;
	struct presource res;
	struct pshared *sh;
	char endpoint[128];
	char sock[PATH_MAX + 160];
	dev_t sock_dev;
	ino_t sock_ino;

	grpc_server *srv;
	grpc_completion_queue *cq;
	pthread_t th;
	_Atomic int shutting_down;
	int shutdown_done;
	size_t live;     /* rpcs not yet freed */
	size_t n_calls;  /* unary calls in flight (counted) */
	uint64_t refused; /* calls refused over PSERVER_MAX_CALLS */
	struct rpc *streams; /* newest first */
	size_t n_streams;
	/* Until when (now_ms) the next stream is the kubelet's: armed by
	 * pserver_expect_kubelet on the main thread, taken here; 0: not. */
	_Atomic uint64_t kubelet_until_ms;
	unsigned stall_ms;
	struct tag t_shutdown;
};

void pserver_endpoint_name(const char *resource, char *out, size_t len)
{
	size_t i;

	for (i = 0; resource[i] && i + 6 < len; i++)
		out[i] = resource[i] == '/' ? '_' : resource[i];
	snprintf(out + i, len - i, ".sock");
}

const char *pserver_endpoint(const struct pserver *s)
{
	return s->endpoint;
}

const char *pserver_socket(const struct pserver *s)
{
	return s->sock;
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* ---- calls ---- */

static void request_next(struct pserver *s);

static void rpc_free(struct rpc *r)
{
	grpc_call_details_destroy(&r->details);
	grpc_metadata_array_destroy(&r->md);
	if (r->recv_buf)
		grpc_byte_buffer_destroy(r->recv_buf);
	if (r->send_buf)
		grpc_byte_buffer_destroy(r->send_buf);
	if (r->have_details)
		grpc_slice_unref(r->status_details);
	if (r->call)
		grpc_call_unref(r->call);
	if (r->counted)
		r->s->n_calls--;
	r->s->live--;
	free(r);
}

static int start(struct rpc *r, grpc_op *ops, size_t n, struct tag *t)
{
	grpc_call_error e = grpc_call_start_batch(r->call, ops, n, t, NULL);

	if (e != GRPC_CALL_OK) {
		log_error("%s: start_batch failed: %d", r->s->res.name, (int)e);
		return -1;
	}
	r->pending++;
	return 0;
}

static grpc_byte_buffer *to_buffer(const ProtobufCMessage *m)
{
	size_t n = protobuf_c_message_get_packed_size(m);
	grpc_slice sl = grpc_slice_malloc(n);
	grpc_byte_buffer *bb;

	protobuf_c_message_pack(m, GRPC_SLICE_START_PTR(sl));
	bb = grpc_raw_byte_buffer_create(&sl, 1);
	grpc_slice_unref(sl);
	return bb;
}

/* Ends a unary call: the answer (NULL on error) and the status; an
 * error is logged when loud. */
static void finish_call(struct rpc *r, const ProtobufCMessage *resp, grpc_status_code st,
			const char *details, int loud)
{
	grpc_op ops[3];
	size_t n = 0;

	memset(ops, 0, sizeof(ops));
	r->finished = 1;
	ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
	if (resp && st == GRPC_STATUS_OK) {
		r->send_buf = to_buffer(resp);
		ops[n].op = GRPC_OP_SEND_MESSAGE;
		ops[n++].data.send_message.send_message = r->send_buf;
	}
	r->status_details = grpc_slice_from_copied_string(details ? details : "");
	r->have_details = 1;
	ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
	ops[n].data.send_status_from_server.status = st;
	ops[n++].data.send_status_from_server.status_details = &r->status_details;
	if (st != GRPC_STATUS_OK && loud)
		log_warn("%s: %s", r->s->res.name, details);
	(void)start(r, ops, n, &r->t_send);
}

static void finish(struct rpc *r, const ProtobufCMessage *resp, grpc_status_code st,
		   const char *details)
{
	finish_call(r, resp, st, details, 1);
}

/* The request's bytes, or NULL (with size 0) when none came. */
static uint8_t *request_bytes(struct rpc *r, size_t *len)
{
	grpc_byte_buffer_reader rd;
	grpc_slice sl;
	uint8_t *buf;

	*len = 0;
	if (!r->recv_buf || !grpc_byte_buffer_reader_init(&rd, r->recv_buf))
		return NULL;
	sl = grpc_byte_buffer_reader_readall(&rd);
	grpc_byte_buffer_reader_destroy(&rd);
	*len = GRPC_SLICE_LENGTH(sl);
	buf = malloc(*len ? *len : 1);
	if (buf)
		memcpy(buf, GRPC_SLICE_START_PTR(sl), *len);
	grpc_slice_unref(sl);
	return buf;
}

static void copy_gpus(struct pserver *s, struct pgpus *g, uint64_t *gen)
{
	pthread_mutex_lock(&s->sh->mu);
	*g = s->sh->gpus;
	if (gen)
		*gen = s->sh->gen;
	pthread_mutex_unlock(&s->sh->mu);
}

static void do_allocate(struct rpc *r, const uint8_t *buf, size_t len)
{
	V1beta1__AllocateRequest *req = v1beta1__allocate_request__unpack(NULL, len, buf);
	struct parena a = { 0 };
	struct pgpus g;
	struct pinject inj;
	char why[256], lib[PATH_MAX];
	V1beta1__AllocateResponse *resp;

	if (!req) {
		snprintf(why, sizeof(why), "Allocate: malformed AllocateRequest (%zu bytes)", len);
		pmetrics_allocation(r->s->res.name, 0);
		finish(r, NULL, GRPC_STATUS_INVALID_ARGUMENT, why);
		return;
	}
	copy_gpus(r->s, &g, NULL);
	memset(&inj, 0, sizeof(inj));
	if (preemptlib_resolve(r->s->cfg->preempt_lib_dir, lib, sizeof(lib), &inj.have_ld_so_preload) ==
	    0)
		inj.lib_dir = lib;
	else if (r->s->cfg->injection != PCFG_INJ_NONE)
		log_warn("%s: Allocate: no preempt agent installed under %s/current; the container "
			 "runs without it",
			 r->s->res.name, r->s->cfg->preempt_lib_dir);
	resp = pdev_allocate(r->s->cfg, &r->s->res, &g, &inj, req, &a, why, sizeof(why));
	pmetrics_allocation(r->s->res.name, resp != NULL);
	if (resp) {
		log_info("%s: Allocate: %zu container(s)", r->s->res.name,
			 req->n_container_requests);
		finish(r, &resp->base, GRPC_STATUS_OK, NULL);
	} else {
		finish(r, NULL, a.oom ? GRPC_STATUS_RESOURCE_EXHAUSTED : GRPC_STATUS_INVALID_ARGUMENT,
		       why);
	}
	parena_free(&a);
	v1beta1__allocate_request__free_unpacked(req, NULL);
}

static void do_preferred(struct rpc *r, const uint8_t *buf, size_t len)
{
	V1beta1__PreferredAllocationRequest *req =
		v1beta1__preferred_allocation_request__unpack(NULL, len, buf);
	struct parena a = { 0 };
	struct pgpus g;
	char why[256];
	V1beta1__PreferredAllocationResponse *resp;

	if (!req) {
		snprintf(why, sizeof(why),
			 "GetPreferredAllocation: malformed PreferredAllocationRequest (%zu bytes)", len);
		finish(r, NULL, GRPC_STATUS_INVALID_ARGUMENT, why);
		return;
	}
	copy_gpus(r->s, &g, NULL);
	resp = pdev_preferred(r->s->cfg, &r->s->res, &g, req, &a, why, sizeof(why));
	if (resp)
		finish(r, &resp->base, GRPC_STATUS_OK, NULL);
	else
		finish(r, NULL, a.oom ? GRPC_STATUS_RESOURCE_EXHAUSTED : GRPC_STATUS_INVALID_ARGUMENT,
		       why);
	parena_free(&a);
	v1beta1__preferred_allocation_request__free_unpacked(req, NULL);
}

static void do_unary(struct rpc *r)
{
	size_t len;
	uint8_t *buf = request_bytes(r, &len);

	if (!buf) {
		finish(r, NULL, GRPC_STATUS_INVALID_ARGUMENT, "no request message");
		return;
	}
	switch (r->m) {
	case M_OPTIONS: {
		V1beta1__DevicePluginOptions o = V1BETA1__DEVICE_PLUGIN_OPTIONS__INIT;
		o.get_preferred_allocation_available = r->s->res.kind != PRES_INJECT;
		finish(r, &o.base, GRPC_STATUS_OK, NULL);
		break;
	}
	case M_PRESTART: {
		V1beta1__PreStartContainerResponse o = V1BETA1__PRE_START_CONTAINER_RESPONSE__INIT;
		finish(r, &o.base, GRPC_STATUS_OK, NULL);
		break;
	}
	case M_ALLOCATE:
		do_allocate(r, buf, len);
		break;
	case M_PREFERRED:
		do_preferred(r, buf, len);
		break;
	default:
		finish(r, NULL, GRPC_STATUS_UNIMPLEMENTED, "unknown method");
	}
	free(buf);
}

/* ---- ListAndWatch ---- */

static void stream_unlink(struct rpc *r)
{
	struct rpc **pp;

	for (pp = &r->s->streams; *pp; pp = &(*pp)->next)
		if (*pp == r) {
			*pp = r->next;
			r->s->n_streams--;
			pmetrics_streams(r->s->res.name, r->s->n_streams);
			return;
		}
}

/* Sends the current list when it differs from what the stream last got
 * and no send is in flight: the one place changes coalesce. */
static void stream_push(struct rpc *r)
{
	struct pserver *s = r->s;
	struct parena a = { 0 };
	struct pgpus g;
	uint64_t gen;
	V1beta1__ListAndWatchResponse *m;
	grpc_op ops[2];
	size_t n = 0;

	if (r->closed || r->finished || r->send_busy)
		return;
	copy_gpus(s, &g, &gen);
	if (r->sent_any && gen == r->sent_gen)
		return;
	m = pdev_list(&s->res, &g, &a);
	if (!m) {
		parena_free(&a);
		log_error("%s: ListAndWatch: out of memory building the list", s->res.name);
		return;
	}
	memset(ops, 0, sizeof(ops));
	if (!r->sent_any)
		ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
	if (r->send_buf)
		grpc_byte_buffer_destroy(r->send_buf);
	r->send_buf = to_buffer(&m->base);
	ops[n].op = GRPC_OP_SEND_MESSAGE;
	ops[n++].data.send_message.send_message = r->send_buf;
	log_debug("%s: ListAndWatch: sending %zu devices (generation %llu)", s->res.name,
		  m->n_devices, (unsigned long long)gen);
	parena_free(&a);
	if (start(r, ops, n, &r->t_send) == 0) {
		r->send_busy = 1;
		r->sent_any = 1;
		r->sent_gen = gen;
		r->send_started_ms = now_ms();
	}
}

static void streams_tick(struct pserver *s)
{
	uint64_t now = now_ms();

	for (struct rpc *r = s->streams; r; r = r->next) {
		if (r->send_busy && !r->stalled && now - r->send_started_ms > s->stall_ms) {
			log_warn("%s: ListAndWatch: the kubelet read nothing for %u ms; ending the stream",
				 s->res.name, s->stall_ms);
			(void)grpc_call_cancel_with_status(
				r->call, GRPC_STATUS_DEADLINE_EXCEEDED,
				"ListAndWatch: the device list was not read in time", NULL);
			r->stalled = 1;
		}
		stream_push(r);
	}
}

/* The oldest stream other than the kubelet's goes, for the kubelet's
 * new one (a restarted kubelet always gets its list). */
static void evict_oldest(struct pserver *s)
{
	struct rpc *old = NULL;

	for (struct rpc *r = s->streams; r; r = r->next)
		if (!r->kubelet)
			old = r;
	if (!old)
		return;
	log_warn("%s: ListAndWatch: %d streams open; ending the oldest for the kubelet's",
		 s->res.name, PSERVER_MAX_STREAMS);
	stream_unlink(old);
	old->finished = 1; /* nothing more goes out on it */
	(void)grpc_call_cancel_with_status(old->call, GRPC_STATUS_RESOURCE_EXHAUSTED,
					   "ListAndWatch: the kubelet's stream took this one's slot", NULL);
}

/* The kubelet opens its stream right after a registration and does not
 * open another if it is ended or refused: that one takes a slot from the
 * oldest other stream if it must, and no later stream can take its own.
 * Any other stream finds a slot or is refused. */
static void start_stream(struct rpc *r)
{
	struct pserver *s = r->s;
	uint64_t until = atomic_exchange(&s->kubelet_until_ms, 0);

	r->kubelet = until != 0 && now_ms() <= until;
	if (s->n_streams >= PSERVER_MAX_STREAMS && !r->kubelet) {
		log_warn("%s: ListAndWatch: %d streams open, the limit; a new one refused",
			 s->res.name, PSERVER_MAX_STREAMS);
		finish_call(r, NULL, GRPC_STATUS_RESOURCE_EXHAUSTED,
			    "ListAndWatch: every stream slot is taken", 0);
		return;
	}
	while (s->n_streams >= PSERVER_MAX_STREAMS)
		evict_oldest(s);
	if (r->kubelet)
		for (struct rpc *o = s->streams; o; o = o->next)
			o->kubelet = 0; /* an earlier kubelet's */
	r->next = s->streams;
	s->streams = r;
	s->n_streams++;
	pmetrics_streams(s->res.name, s->n_streams);
	log_info("%s: ListAndWatch stream opened%s", s->res.name,
		 r->kubelet ? " (the kubelet's, after its registration)" : "");
	stream_push(r);
}

void pserver_expect_kubelet(struct pserver *s)
{
	atomic_store(&s->kubelet_until_ms, now_ms() + PSERVER_KUBELET_WINDOW_MS);
}

/* ---- dispatch ---- */

static enum method method_of(const grpc_slice *m)
{
	static const struct {
		const char *path;
		enum method m;
	} t[] = {
		{ SVC "GetDevicePluginOptions", M_OPTIONS },
		{ SVC "ListAndWatch", M_LIST },
		{ SVC "GetPreferredAllocation", M_PREFERRED },
		{ SVC "Allocate", M_ALLOCATE },
		{ SVC "PreStartContainer", M_PRESTART },
	};

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if (grpc_slice_str_cmp(*m, t[i].path) == 0)
			return t[i].m;
	return M_UNKNOWN;
}

/* Over the bound: answered at once, before its request is read, so a
 * client that opens calls and sends nothing holds at most
 * PSERVER_MAX_CALLS of them (each some 12 KB of gRPC state). */
static void refuse(struct rpc *r)
{
	struct pserver *s = r->s;
	char why[128];

	s->refused++;
	if (r->m == M_ALLOCATE)
		pmetrics_allocation(s->res.name, 0);
	snprintf(why, sizeof(why), "%d calls already in flight (%llu refused so far)",
		 PSERVER_MAX_CALLS, (unsigned long long)s->refused);
	/* a flood of them is logged at the 1st, 2nd, 4th, 8th... */
	finish_call(r, NULL, GRPC_STATUS_RESOURCE_EXHAUSTED, why, !(s->refused & (s->refused - 1)));
}

static void on_new(struct rpc *r, int ok)
{
	struct pserver *s = r->s;
	grpc_op op;

	if (!ok) { /* the server is shutting down */
		rpc_free(r);
		return;
	}
	request_next(s);
	memset(&op, 0, sizeof(op));
	op.op = GRPC_OP_RECV_CLOSE_ON_SERVER;
	op.data.recv_close_on_server.cancelled = &r->cancelled;
	if (start(r, &op, 1, &r->t_close) < 0) {
		rpc_free(r);
		return;
	}
	r->m = method_of(&r->details.method);
	if (r->m == M_LIST) {
		start_stream(r);
	} else if (s->n_calls >= PSERVER_MAX_CALLS) {
		refuse(r);
	} else if (r->m == M_UNKNOWN) {
		char *p = grpc_slice_to_c_string(r->details.method);
		char why[256];
		snprintf(why, sizeof(why), "unknown method %.200s", p);
		gpr_free(p);
		finish(r, NULL, GRPC_STATUS_UNIMPLEMENTED, why);
	} else {
		r->counted = 1;
		s->n_calls++;
		memset(&op, 0, sizeof(op));
		op.op = GRPC_OP_RECV_MESSAGE;
		op.data.recv_message.recv_message = &r->recv_buf;
		(void)start(r, &op, 1, &r->t_recv);
	}
}

static void on_tag(struct tag *t, int ok)
{
	struct rpc *r = t->r;

	switch (t->kind) {
	case T_NEW:
		on_new(r, ok);
		return;
	case T_RECV:
		if (ok)
			do_unary(r);
		break;
	case T_SEND:
		r->send_busy = 0;
		if (r->m == M_LIST && ok)
			stream_push(r);
		break;
	case T_CLOSE:
		r->closed = 1;
		if (r->m == M_LIST) {
			stream_unlink(r);
			log_info("%s: ListAndWatch stream closed", r->s->res.name);
		}
		break;
	}
	if (--r->pending == 0)
		rpc_free(r);
}

static void request_next(struct pserver *s)
{
	struct rpc *r;
	grpc_call_error e;

	if (s->shutting_down)
		return;
	r = calloc(1, sizeof(*r));
	if (!r) {
		log_error("%s: out of memory: no more calls are accepted", s->res.name);
		return;
	}
	r->s = s;
	r->t_new = (struct tag){ T_NEW, r };
	r->t_recv = (struct tag){ T_RECV, r };
	r->t_send = (struct tag){ T_SEND, r };
	r->t_close = (struct tag){ T_CLOSE, r };
	grpc_call_details_init(&r->details);
	grpc_metadata_array_init(&r->md);
	s->live++;
	e = grpc_server_request_call(s->srv, &r->call, &r->details, &r->md, s->cq, s->cq, &r->t_new);
	if (e != GRPC_CALL_OK) {
		log_error("%s: grpc_server_request_call: %d", s->res.name, (int)e);
		rpc_free(r);
	}
}

static void *server_main(void *arg)
{
	struct pserver *s = arg;

	request_next(s);
	for (;;) {
		gpr_timespec until =
			s->n_streams ? gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
						    gpr_time_from_millis(PSERVER_TICK_MS, GPR_TIMESPAN))
				     : gpr_inf_future(GPR_CLOCK_MONOTONIC);
		grpc_event ev = grpc_completion_queue_next(s->cq, until, NULL);

		if (ev.type == GRPC_QUEUE_SHUTDOWN)
			break;
		if (ev.type == GRPC_OP_COMPLETE) {
			struct tag *t = ev.tag;
			if (t == &s->t_shutdown)
				s->shutdown_done = 1;
			else
				on_tag(t, ev.success);
		}
		streams_tick(s);
		/* pserver_stop destroys the server after the join: it may still
		 * be cancelling calls on it now */
		if (s->shutdown_done && s->live == 0) {
			grpc_completion_queue_shutdown(s->cq);
			s->shutdown_done = 0; /* once */
		}
	}
	return NULL;
}

/* ---- start and stop ---- */

/* GPUQOS_PLUGIN_STREAM_STALL_MS (100 ms to 1 h) shortens the wait for
 * tests; PSERVER_STALL_MS otherwise. */
static unsigned stall_ms(void)
{
	const char *v = getenv("GPUQOS_PLUGIN_STREAM_STALL_MS");
	char *end;
	unsigned long ms;

	if (!v || !*v)
		return PSERVER_STALL_MS;
	ms = strtoul(v, &end, 10);
	if (*end || ms < 100 || ms > 3600000) {
		log_warn("GPUQOS_PLUGIN_STREAM_STALL_MS=%s: not 100..3600000; using %d", v,
			 PSERVER_STALL_MS);
		return PSERVER_STALL_MS;
	}
	return (unsigned)ms;
}

static int make_server(struct pserver *s, char *err, size_t errlen)
{
	grpc_arg arg[2];
	grpc_channel_args args = { 2, arg };
	grpc_server_credentials *creds;
	char addr[sizeof(s->sock) + 8];
	struct stat st;

	arg[0].type = arg[1].type = GRPC_ARG_INTEGER;
	arg[0].key = (char *)GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH;
	arg[0].value.integer = PSERVER_MAX_MSG;
	arg[1].key = (char *)GRPC_ARG_MAX_CONCURRENT_STREAMS;
	arg[1].value.integer = 64;
	s->cq = grpc_completion_queue_create_for_next(NULL);
	s->srv = grpc_server_create(&args, NULL);
	grpc_server_register_completion_queue(s->srv, s->cq, NULL);
	if (unlink(s->sock) < 0 && errno != ENOENT) {
		snprintf(err, errlen, "%s: removing the old socket: %s", s->sock, strerror(errno));
		return -1;
	}
	snprintf(addr, sizeof(addr), "unix://%s", s->sock);
	creds = grpc_insecure_server_credentials_create();
	if (!grpc_server_add_http2_port(s->srv, addr, creds)) {
		grpc_server_credentials_release(creds);
		snprintf(err, errlen, "%s: cannot listen there (directory missing or not writable?)",
			 s->sock);
		return -1;
	}
	grpc_server_credentials_release(creds);
	grpc_server_start(s->srv);
	if (stat(s->sock, &st) == 0) {
		s->sock_dev = st.st_dev;
		s->sock_ino = st.st_ino;
	}
	return 0;
}

static void drain_destroy(struct pserver *s)
{
	if (s->srv) {
		grpc_server_shutdown_and_notify(s->srv, s->cq, &s->t_shutdown);
		grpc_server_cancel_all_calls(s->srv);
		while (grpc_completion_queue_next(s->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL)
			       .tag != &s->t_shutdown)
			;
		grpc_server_destroy(s->srv);
	}
	grpc_completion_queue_shutdown(s->cq);
	while (grpc_completion_queue_next(s->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL).type !=
	       GRPC_QUEUE_SHUTDOWN)
		;
	grpc_completion_queue_destroy(s->cq);
}

struct pserver *pserver_start(const struct plugin_config *cfg, const struct presource *res,
			      struct pshared *sh, char *err, size_t errlen)
{
	struct pserver *s = calloc(1, sizeof(*s));
	sigset_t all, old;
	int rc;

	if (!s) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	s->cfg = cfg;
	s->res = *res;
	s->sh = sh;
	s->t_shutdown = (struct tag){ T_NEW, NULL };
	s->stall_ms = stall_ms();
	pserver_endpoint_name(res->name, s->endpoint, sizeof(s->endpoint));
	snprintf(s->sock, sizeof(s->sock), "%s/%s", cfg->device_plugin_dir, s->endpoint);
	if (strlen(s->sock) >= sizeof(((struct sockaddr_un *)0)->sun_path)) {
		snprintf(err, errlen, "%s: longer than a unix socket path may be", s->sock);
		free(s);
		return NULL;
	}
	grpc_init();
	if (make_server(s, err, errlen) < 0) {
		drain_destroy(s);
		grpc_shutdown();
		free(s);
		return NULL;
	}
	/* gRPC's threads and ours never take the signals main reads */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&s->th, NULL, server_main, s);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc) {
		snprintf(err, errlen, "pthread_create: %s", strerror(rc));
		drain_destroy(s);
		grpc_shutdown();
		free(s);
		return NULL;
	}
	log_info("%s: serving on %s", res->name, s->sock);
	return s;
}

void pserver_stop(struct pserver *s)
{
	struct stat st;

	if (!s)
		return;
	/* The thread owns the calls; shutdown makes them all complete, then
	 * it destroys the server and shuts the queue down. */
	s->shutting_down = 1;
	grpc_server_shutdown_and_notify(s->srv, s->cq, &s->t_shutdown);
	grpc_server_cancel_all_calls(s->srv);
	pthread_join(s->th, NULL);
	pmetrics_streams(s->res.name, 0);
	grpc_server_destroy(s->srv);
	grpc_completion_queue_destroy(s->cq);
	/* a new plugin instance may own the path by now: remove only ours */
	if (stat(s->sock, &st) == 0 && st.st_dev == s->sock_dev && st.st_ino == s->sock_ino)
		unlink(s->sock);
	grpc_shutdown();
	log_info("%s: stopped serving %s", s->res.name, s->sock);
	free(s);
}
