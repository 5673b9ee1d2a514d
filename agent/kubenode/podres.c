/* SPDX-License-Identifier: Apache-2.0 */
/*
 * podres.c - the kubelet pod-resources v1 client (see podres.h).
 *
 * Owns the worker thread, the gRPC channel and completion queue (worker
 * only), the rate limit and inotify watch (loop thread only) and the one
 * result slot between them (under mu). Does not own the loop or policy.
 *
 * The channel, the directory watch and the eventfd hand-off are the kubelet
 * socket plumbing shared with the device plugin (common/kubesock.h).
 *
 * Reconnecting: gRPC reconnects a channel by itself, but with exponential
 * backoff (up to minutes) after failures; a kubelet restart is exactly such
 * a failure. So a call that failed, or a socket that was recreated, makes
 * the next call build a fresh channel, which connects at once.
 */
#include "agent/kubenode/podres.h"
#include "common/kubesock.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>

#include "podresources_v1.pb-c.h"

#define LIST_METHOD "/v1.PodResourcesLister/List"
#define CANCEL_GRACE_MS 2000 /* past the deadline before the worker cancels itself */

/* Why the next call builds a fresh channel. A kubelet's socket file
 * appears at bind(), before listen(): the first call after a create waits
 * for the channel to connect (up to its deadline) instead of failing on a
 * refused connection. Otherwise calls fail fast, so an absent kubelet is
 * reported as UNAVAILABLE at once. */
#define RESET_FAILED 1u
#define RESET_CREATED 2u

struct podres {
	/* configuration, read-only after start */
	char *sock;
	char dir[PATH_MAX], base[NAME_MAX + 1];
	char *res[PODRES_MAX_RESOURCES];
	size_t n_res;
	unsigned interval_ms, deadline_ms;
	size_t max_msg;

	/* loop thread */
	int efd;
	struct kubesock_watch watch;
	uint64_t last_us;
	int asked_once;

	/* shared, under mu */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int want, busy, stop, ready;
	unsigned reset; /* RESET_* */
	grpc_call *call; /* in flight, so stop can cancel it */
	struct podres_result res_slot;

	/* worker thread */
	pthread_t th;
	grpc_channel *ch;
	grpc_completion_queue *cq;
};

const char *podres_status_name(int code)
{
	return kubesock_status_name(code);
}

/* ---- decoding (pure) ---- */

void podres_list_free(struct podres_list *l)
{
	size_t i, j;

	if (!l)
		return;
	for (i = 0; i < l->n; i++) {
		struct podres_row *r = &l->rows[i];
		for (j = 0; j < r->n_ids; j++)
			free(r->device_ids[j]);
		free(r->device_ids);
		free(r->namespace_);
		free(r->pod);
		free(r->container);
		free(r->resource);
	}
	free(l->rows);
	l->rows = NULL;
	l->n = 0;
}

static int kept(const char *name, const char *const *res, size_t n_res)
{
	size_t i;

	if (!n_res)
		return 1;
	for (i = 0; i < n_res; i++)
		if (strcmp(name, res[i]) == 0)
			return 1;
	return 0;
}

static char *dup_or_empty(const char *s)
{
	return strdup(s ? s : "");
}

/* Appends one row; -1 on out of memory (the list stays consistent). */
static int add_row(struct podres_list *out, const V1__PodResources *pod,
		   const V1__ContainerResources *c, const V1__ContainerDevices *d)
{
	struct podres_row *rows = realloc(out->rows, (out->n + 1) * sizeof(*rows));
	struct podres_row *r;
	size_t i;

	if (!rows)
		return -1;
	out->rows = rows;
	r = &rows[out->n++];
	memset(r, 0, sizeof(*r));
	r->namespace_ = dup_or_empty(pod->namespace_);
	r->pod = dup_or_empty(pod->name);
	r->container = dup_or_empty(c->name);
	r->resource = dup_or_empty(d->resource_name);
	r->device_ids = calloc(d->n_device_ids ? d->n_device_ids : 1, sizeof(char *));
	if (!r->namespace_ || !r->pod || !r->container || !r->resource || !r->device_ids)
		return -1;
	for (i = 0; i < d->n_device_ids; i++) {
		r->device_ids[i] = dup_or_empty(d->device_ids[i]);
		if (!r->device_ids[i])
			return -1;
		r->n_ids++;
	}
	return 0;
}

int podres_decode(const uint8_t *buf, size_t len, const char *const *resources, size_t n_res,
		  struct podres_list *out, char *why, size_t whylen)
{
	V1__ListPodResourcesResponse *m;
	size_t i, j, k;
	int rc = 0;

	out->rows = NULL;
	out->n = 0;
	m = v1__list_pod_resources_response__unpack(NULL, len, buf);
	if (!m) {
		snprintf(why, whylen, "malformed ListPodResourcesResponse (%zu bytes)", len);
		return -1;
	}
	for (i = 0; i < m->n_pod_resources && !rc; i++) {
		const V1__PodResources *pod = m->pod_resources[i];
		for (j = 0; j < pod->n_containers && !rc; j++) {
			const V1__ContainerResources *c = pod->containers[j];
			for (k = 0; k < c->n_devices && !rc; k++)
				if (kept(c->devices[k]->resource_name, resources, n_res))
					rc = add_row(out, pod, c, c->devices[k]);
		}
	}
	v1__list_pod_resources_response__free_unpacked(m, NULL);
	if (rc) {
		podres_list_free(out);
		snprintf(why, whylen, "out of memory decoding ListPodResourcesResponse");
	}
	return rc;
}

/* ---- the worker: one List at a time on its own completion queue ---- */

static void set_call(struct podres *p, grpc_call *call)
{
	pthread_mutex_lock(&p->mu);
	p->call = call;
	pthread_mutex_unlock(&p->mu);
}

/* Waits for the batch; gRPC ends it at the deadline, and a call that is
 * still not done CANCEL_GRACE_MS later is cancelled so the worker can
 * never hang. */
static void wait_batch(struct podres *p, grpc_call *call, void *tag)
{
	gpr_timespec until = gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
					  gpr_time_from_millis(p->deadline_ms + CANCEL_GRACE_MS, GPR_TIMESPAN));
	grpc_event ev;

	for (;;) {
		ev = grpc_completion_queue_next(p->cq, until, NULL);
		if (ev.type == GRPC_OP_COMPLETE && ev.tag == tag)
			return;
		if (ev.type == GRPC_QUEUE_TIMEOUT) {
			/* fails only for a call already done: then the tag comes anyway */
			(void)grpc_call_cancel(call, NULL);
			until = gpr_inf_future(GPR_CLOCK_MONOTONIC);
		}
	}
}

static void read_answer(struct podres *p, grpc_byte_buffer *bb, struct podres_result *r)
{
	grpc_byte_buffer_reader rd;
	grpc_slice s;
	char why[256];

	if (!bb) {
		r->err = PODRES_ERR_DECODE;
		snprintf(r->why, sizeof(r->why), "pod-resources List on %s: OK status but no message",
			 p->sock);
		return;
	}
	if (!grpc_byte_buffer_reader_init(&rd, bb)) {
		r->err = PODRES_ERR_DECODE;
		snprintf(r->why, sizeof(r->why), "pod-resources List on %s: cannot read the message",
			 p->sock);
		return;
	}
	s = grpc_byte_buffer_reader_readall(&rd);
	grpc_byte_buffer_reader_destroy(&rd);
	if (podres_decode(GRPC_SLICE_START_PTR(s), GRPC_SLICE_LENGTH(s), (const char *const *)p->res,
			  p->n_res, &r->list, why, sizeof(why)) < 0) {
		r->err = PODRES_ERR_DECODE;
		snprintf(r->why, sizeof(r->why), "pod-resources List on %s: %s", p->sock, why);
	}
	grpc_slice_unref(s);
}

struct list_call {
	grpc_metadata_array md_init, md_trail;
	grpc_byte_buffer *req, *resp;
	grpc_status_code status;
	grpc_slice details;
	const char *errstr;
};

static grpc_call_error start_list(grpc_call *call, struct list_call *lc, int wait_ready)
{
	grpc_op ops[6];
	grpc_slice empty = grpc_empty_slice();

	memset(ops, 0, sizeof(ops));
	lc->req = grpc_raw_byte_buffer_create(&empty, 1); /* ListPodResourcesRequest{} is 0 bytes */
	ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
	if (wait_ready)
		ops[0].flags = GRPC_INITIAL_METADATA_WAIT_FOR_READY |
			       GRPC_INITIAL_METADATA_WAIT_FOR_READY_EXPLICITLY_SET;
	ops[1].op = GRPC_OP_SEND_MESSAGE;
	ops[1].data.send_message.send_message = lc->req;
	ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
	ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
	ops[3].data.recv_initial_metadata.recv_initial_metadata = &lc->md_init;
	ops[4].op = GRPC_OP_RECV_MESSAGE;
	ops[4].data.recv_message.recv_message = &lc->resp;
	ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
	ops[5].data.recv_status_on_client.trailing_metadata = &lc->md_trail;
	ops[5].data.recv_status_on_client.status = &lc->status;
	ops[5].data.recv_status_on_client.status_details = &lc->details;
	ops[5].data.recv_status_on_client.error_string = &lc->errstr;
	return grpc_call_start_batch(call, ops, 6, lc, NULL);
}

static void rpc_failed(struct podres *p, const struct list_call *lc, struct podres_result *r)
{
	char *d = grpc_slice_to_c_string(lc->details);

	r->err = PODRES_ERR_RPC;
	r->grpc_status = (int)lc->status;
	snprintf(r->why, sizeof(r->why), "pod-resources List on %s: %s (%d): %s", p->sock,
		 podres_status_name((int)lc->status), (int)lc->status, d && d[0] ? d : "no details");
	gpr_free(d);
}

/* One List, start to end, on the worker thread. fresh: RESET_* bits. */
static void do_list(struct podres *p, unsigned fresh, struct podres_result *r)
{
	struct list_call lc;
	gpr_timespec deadline;
	grpc_call *call;
	grpc_call_error ce;

	memset(r, 0, sizeof(*r));
	memset(&lc, 0, sizeof(lc));
	if (fresh && p->ch) {
		grpc_channel_destroy(p->ch);
		p->ch = NULL;
	}
	if (!p->ch && !(p->ch = kubesock_channel(p->sock, (int)p->max_msg))) {
		r->err = PODRES_ERR_RPC;
		r->grpc_status = GRPC_STATUS_INTERNAL;
		snprintf(r->why, sizeof(r->why), "pod-resources: cannot create a channel to %s", p->sock);
		return;
	}
	deadline = gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
				gpr_time_from_millis(p->deadline_ms, GPR_TIMESPAN));
	call = grpc_channel_create_call(p->ch, NULL, GRPC_PROPAGATE_DEFAULTS, p->cq,
					grpc_slice_from_static_string(LIST_METHOD), NULL, deadline, NULL);
	grpc_metadata_array_init(&lc.md_init);
	grpc_metadata_array_init(&lc.md_trail);
	set_call(p, call);
	ce = start_list(call, &lc, (fresh & RESET_CREATED) != 0);
	if (ce == GRPC_CALL_OK) {
		wait_batch(p, call, &lc);
		if (lc.status == GRPC_STATUS_OK)
			read_answer(p, lc.resp, r);
		else
			rpc_failed(p, &lc, r);
	} else {
		r->err = PODRES_ERR_RPC;
		r->grpc_status = GRPC_STATUS_INTERNAL;
		snprintf(r->why, sizeof(r->why), "pod-resources List on %s: start_batch error %d",
			 p->sock, (int)ce);
	}
	set_call(p, NULL);
	grpc_call_unref(call);
	grpc_byte_buffer_destroy(lc.req);
	if (lc.resp)
		grpc_byte_buffer_destroy(lc.resp);
	grpc_slice_unref(lc.details);
	gpr_free((void *)lc.errstr);
	grpc_metadata_array_destroy(&lc.md_init);
	grpc_metadata_array_destroy(&lc.md_trail);
}

static uint64_t mono_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static void *worker_main(void *arg)
{
	struct podres *p = arg;
	struct podres_result r;
	unsigned fresh;

	pthread_mutex_lock(&p->mu);
	for (;;) {
		while (!p->stop && !p->want)
			pthread_cond_wait(&p->cv, &p->mu);
		if (p->stop)
			break;
		p->want = 0;
		fresh = p->reset;
		p->reset = 0;
		pthread_mutex_unlock(&p->mu);

		uint64_t t0 = mono_us();
		do_list(p, fresh, &r);
		r.elapsed_us = mono_us() - t0;

		pthread_mutex_lock(&p->mu);
		if (r.err == PODRES_ERR_RPC)
			p->reset |= RESET_FAILED; /* next call: a fresh channel, no backoff */
		podres_list_free(&p->res_slot.list); /* an untaken older answer */
		p->res_slot = r;
		p->ready = 1;
		p->busy = 0;
		kubesock_post(p->efd);
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

/* ---- the loop thread's side ---- */

/* 1 when a new watch was added and the socket is already there (the
 * directory appeared after start, with the kubelet already serving). */
static int watch_dir(struct podres *p)
{
	return kubesock_watch_retry(&p->watch) && access(p->sock, F_OK) == 0;
}

static int set_paths(struct podres *p, const struct podres_config *cfg, char *err, size_t errlen)
{
	const char *sock = cfg->socket_path ? cfg->socket_path : PODRES_DEFAULT_SOCKET;
	const char *slash = strrchr(sock, '/');
	size_t dl, i;

	if (sock[0] != '/' || !slash[1] || strlen(slash + 1) > NAME_MAX) {
		snprintf(err, errlen, "pod-resources socket %s: not an absolute path to a file", sock);
		return -1;
	}
	dl = slash == sock ? 1 : (size_t)(slash - sock);
	if (dl >= sizeof(p->dir)) {
		snprintf(err, errlen, "pod-resources socket %s: path too long", sock);
		return -1;
	}
	memcpy(p->dir, sock, dl);
	p->dir[dl] = '\0';
	strcpy(p->base, slash + 1);
	p->sock = strdup(sock);
	if (!p->sock) {
		snprintf(err, errlen, "pod-resources: out of memory");
		return -1;
	}
	for (i = 0; i < PODRES_MAX_RESOURCES && cfg->resources[i]; i++) {
		if (!(p->res[i] = strdup(cfg->resources[i]))) {
			snprintf(err, errlen, "pod-resources: out of memory");
			return -1;
		}
		p->n_res++;
	}
	return 0;
}

static void free_podres(struct podres *p)
{
	size_t i;

	if (p->efd >= 0)
		close(p->efd);
	kubesock_watch_close(&p->watch);
	for (i = 0; i < p->n_res; i++)
		free(p->res[i]);
	podres_list_free(&p->res_slot.list);
	free(p->sock);
	free(p);
}

/* A completion queue is destroyed only once shut down and drained. */
static void close_cq(grpc_completion_queue *cq)
{
	grpc_completion_queue_shutdown(cq);
	while (grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL).type !=
	       GRPC_QUEUE_SHUTDOWN)
		;
	grpc_completion_queue_destroy(cq);
}

/* gRPC's own threads and our worker must never take the agent's signals
 * (it reads them from a signalfd): start them with every signal blocked. */
static int start_threads(struct podres *p)
{
	sigset_t all, old;
	int rc;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	grpc_init();
	p->cq = grpc_completion_queue_create_for_next(NULL);
	rc = pthread_create(&p->th, NULL, worker_main, p);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return rc;
}

struct podres *podres_start(const struct podres_config *cfg, char *err, size_t errlen)
{
	struct podres *p = calloc(1, sizeof(*p));
	int rc;

	if (!p) {
		snprintf(err, errlen, "pod-resources: out of memory");
		return NULL;
	}
	p->efd = p->watch.fd = p->watch.wd = -1;
	p->interval_ms = cfg->min_interval_ms ? cfg->min_interval_ms : PODRES_DEFAULT_INTERVAL_MS;
	p->deadline_ms = cfg->deadline_ms ? cfg->deadline_ms : PODRES_DEFAULT_DEADLINE_MS;
	p->max_msg = cfg->max_msg_bytes ? cfg->max_msg_bytes : PODRES_DEFAULT_MAX_MSG;
	if (p->max_msg > INT_MAX)
		p->max_msg = INT_MAX;
	if (set_paths(p, cfg, err, errlen) < 0) {
		free_podres(p);
		return NULL;
	}
	p->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (p->efd < 0 || kubesock_watch_init(&p->watch, p->dir) < 0) {
		snprintf(err, errlen, "pod-resources: %s: %s", p->efd < 0 ? "eventfd" : "inotify",
			 strerror(errno));
		free_podres(p);
		return NULL;
	}
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv, NULL);
	if ((rc = start_threads(p)) != 0) {
		snprintf(err, errlen, "pod-resources: pthread_create: %s", strerror(rc));
		close_cq(p->cq);
		grpc_shutdown();
		pthread_cond_destroy(&p->cv);
		pthread_mutex_destroy(&p->mu);
		free_podres(p);
		return NULL;
	}
	return p;
}

void podres_stop(struct podres *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	p->stop = 1;
	if (p->call) /* the worker then gets CANCELLED at once */
		(void)grpc_call_cancel(p->call, NULL);
	pthread_cond_signal(&p->cv);
	pthread_mutex_unlock(&p->mu);
	pthread_join(p->th, NULL);
	if (p->ch)
		grpc_channel_destroy(p->ch);
	close_cq(p->cq);
	grpc_shutdown();
	pthread_cond_destroy(&p->cv);
	pthread_mutex_destroy(&p->mu);
	free_podres(p);
}

int podres_result_fd(const struct podres *p)
{
	return p->efd;
}

int podres_inotify_fd(const struct podres *p)
{
	return p->watch.fd;
}

uint64_t podres_next_us(const struct podres *p)
{
	return p->asked_once ? p->last_us + (uint64_t)p->interval_ms * 1000 : 0;
}

int podres_request(struct podres *p, uint64_t now_us, int force)
{
	int rc = 0;

	watch_dir(p);
	pthread_mutex_lock(&p->mu);
	if (p->busy) {
		errno = EBUSY;
		rc = -1;
	} else if (!force && now_us < podres_next_us(p)) {
		errno = EAGAIN;
		rc = -1;
	} else {
		p->busy = p->want = 1;
		p->last_us = now_us;
		p->asked_once = 1;
		pthread_cond_signal(&p->cv);
	}
	pthread_mutex_unlock(&p->mu);
	return rc;
}

unsigned podres_on_inotify(struct podres *p)
{
	const char *names[1] = { p->base };
	unsigned got, bits = 0;

	kubesock_watch_drain(&p->watch, names, 1, &got);
	if (got & KUBESOCK_CREATED)
		bits |= PODRES_SOCKET_CREATED;
	if (got & KUBESOCK_DELETED)
		bits |= PODRES_SOCKET_DELETED;
	if (watch_dir(p))
		bits |= PODRES_SOCKET_CREATED;
	if (bits) {
		pthread_mutex_lock(&p->mu);
		p->reset |= (bits & PODRES_SOCKET_CREATED) ? RESET_CREATED : RESET_FAILED;
		pthread_mutex_unlock(&p->mu);
	}
	return bits;
}

int podres_take(struct podres *p, struct podres_result *out)
{
	int got = 0;

	/* nothing posted since the last take: the slot decides */
	kubesock_drain(p->efd);
	pthread_mutex_lock(&p->mu);
	if (p->ready) {
		*out = p->res_slot;
		memset(&p->res_slot, 0, sizeof(p->res_slot));
		p->ready = 0;
		got = 1;
	}
	pthread_mutex_unlock(&p->mu);
	return got;
}
