/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kube_client.c - the libcurl multi glue: the socket and timer callbacks
 * handed to the caller's loop, completion dispatch and the one timer that
 * also covers backoff and rate-limit deadlines, the client's life cycle
 * and the public entry points of writes (queued by kube_write.c, which
 * never calls back here). Does not own one request (kube_req.c), what a request means
 * (kube_sync.c, kube_write.c) nor the pod cache.
 */
#include "agent/kube/kube_internal.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"

static int on_curl_socket(CURL *e, curl_socket_t s, int what, void *userp, void *socketp)
{
	struct kube_client *c = userp;
	unsigned ev = 0;

	(void)e;
	(void)socketp;
	if (what == CURL_POLL_IN || what == CURL_POLL_INOUT)
		ev |= KUBE_IO_IN;
	if (what == CURL_POLL_OUT || what == CURL_POLL_INOUT)
		ev |= KUBE_IO_OUT;
	if (c->o.io.watch_fd(c->o.io.arg, s, ev) != 0)
		log_error("kube: the event loop refused to watch fd %d (events %u)", s, ev);
	return 0;
}

static int on_curl_timer(CURLM *m, long timeout_ms, void *userp)
{
	struct kube_client *c = userp;

	(void)m;
	/* 0 means "now": kept distinct from "no timeout" by adding 0 to a
	 * non-zero clock. */
	c->curl_due_ms = timeout_ms < 0 ? 0 : kube_now_ms() + (uint64_t)timeout_ms;
	if (timeout_ms >= 0 && c->curl_due_ms == 0)
		c->curl_due_ms = 1;
	return 0;
}

static void req_unlink(struct kube_client *c, struct kube_req *r)
{
	for (struct kube_req **pp = &c->reqs; *pp; pp = &(*pp)->next) {
		if (*pp == r) {
			*pp = r->next;
			break;
		}
	}
	r->next = NULL;
}

/* Retry-After (seconds or an HTTP date; libcurl reads both) of an
 * answer, capped at KUBE_RETRY_AFTER_MAX_MS; 0 when there is none. */
static unsigned retry_after_ms(CURL *e)
{
	curl_off_t s = 0;

	if (curl_easy_getinfo(e, CURLINFO_RETRY_AFTER, &s) != CURLE_OK || s <= 0)
		return 0;
	if (s >= (curl_off_t)(KUBE_RETRY_AFTER_MAX_MS / 1000u))
		return KUBE_RETRY_AFTER_MAX_MS;
	return (unsigned)s * 1000u;
}

static void dispatch_done(struct kube_client *c, CURL *e, CURLcode rc)
{
	struct kube_req *r = NULL;
	long status = 0;

	if (curl_easy_getinfo(e, CURLINFO_PRIVATE, (char **)&r) != CURLE_OK || !r)
		return;
	if (curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status) != CURLE_OK)
		status = 0;
	r->retry_after_ms = retry_after_ms(e);
	req_unlink(c, r);
	if (curl_multi_remove_handle(c->multi, e) != CURLM_OK)
		log_warn("kube: %s: could not detach from the multi handle", r->url);
	if (status == 401) {
		c->st.unauthorized++;
		kube_config_token_rejected(c->cfg);
	}
	if (rc != CURLE_OK || status < 200 || status >= 300)
		c->st.errors++;
	switch (r->kind) {
	case KUBE_REQ_LIST:
	case KUBE_REQ_WATCH:
		kube_sync_done(r, rc, status);
		break;
	case KUBE_REQ_PATCH:
		kube_patch_done(r, rc, status);
		break;
	case KUBE_REQ_EVENT:
		kube_event_done(r, rc, status);
		break;
	}
	kube_req_free(r);
}

static void rearm(struct kube_client *c, uint64_t now)
{
	uint64_t due = c->curl_due_ms;
	long delay;

	if (c->sync == KUBE_SYNC_WAITING && (!due || c->sync_due_ms < due))
		due = c->sync_due_ms ? c->sync_due_ms : 1;
	if (c->write_due_ms && (!due || c->write_due_ms < due))
		due = c->write_due_ms;
	if (c->armed_valid && c->armed_due == due)
		return;
	c->armed_valid = 1;
	c->armed_due = due;
	delay = !due ? -1 : due <= now ? 0 : (long)(due - now);
	if (c->o.io.arm_timer(c->o.io.arg, delay) != 0)
		log_error("kube: the event loop refused to arm the timer (%ld ms)", delay);
}

/* Runs after every entry into the client: handles finished transfers,
 * starts what is due and re-arms the timer. Never nested: callbacks that
 * call back into the client (an annotate from on_pod) only queue work. */
static void finish(struct kube_client *c)
{
	CURLMsg *msg;
	int left;
	uint64_t now;

	if (c->in_curl || c->in_pump)
		return;
	c->in_pump = 1;
	while ((msg = curl_multi_info_read(c->multi, &left))) {
		if (msg->msg == CURLMSG_DONE)
			dispatch_done(c, msg->easy_handle, msg->data.result);
	}
	now = kube_now_ms();
	kube_sync_step(c, now);
	c->write_due_ms = 0;
	kube_write_step(c, now, &c->write_due_ms);
	c->in_pump = 0;
	rearm(c, now);
}

/* New writes start on the loop's next turn, so that whatever the caller
 * queues in one pass (a pod's class and state) leaves in one request. */
static void defer_write(struct kube_client *c)
{
	uint64_t now = kube_now_ms();

	/* Inside a pump, its own write step comes after the callbacks. */
	if (c->in_curl || c->in_pump)
		return;
	if (!c->write_due_ms || c->write_due_ms > now)
		c->write_due_ms = now;
	rearm(c, now);
}

int kube_client_annotate(struct kube_client *c, const char *uid, const char *key,
			 const char *value)
{
	int rc = kube_write_annotate(c, uid, key, value);

	if (rc == 0)
		defer_write(c);
	return rc;
}

int kube_client_event(struct kube_client *c, const char *uid, enum kube_event_type type,
		      const char *reason, const char *action, const char *note)
{
	int rc = kube_write_event(c, uid, type, reason, action, note);

	if (rc == 0)
		defer_write(c);
	return rc;
}

void kube_client_on_fd(struct kube_client *c, int fd, unsigned events)
{
	int mask = 0, running;
	CURLMcode mc;

	if (events & KUBE_IO_IN)
		mask |= CURL_CSELECT_IN;
	if (events & KUBE_IO_OUT)
		mask |= CURL_CSELECT_OUT;
	c->in_curl = 1;
	mc = curl_multi_socket_action(c->multi, fd, mask, &running);
	c->in_curl = 0;
	if (mc != CURLM_OK)
		log_error("kube: fd %d: %s", fd, curl_multi_strerror(mc));
	finish(c);
}

void kube_client_on_timer(struct kube_client *c)
{
	uint64_t now = kube_now_ms();
	int running;
	CURLMcode mc;

	c->armed_valid = 0; /* the timer fired: whatever comes next, arm it */
	if (c->curl_due_ms && c->curl_due_ms <= now) {
		c->curl_due_ms = 0;
		c->in_curl = 1;
		mc = curl_multi_socket_action(c->multi, CURL_SOCKET_TIMEOUT, 0, &running);
		c->in_curl = 0;
		if (mc != CURLM_OK)
			log_error("kube: timeout handling: %s", curl_multi_strerror(mc));
	}
	finish(c);
}

static void opts_defaults(struct kube_client_opts *o)
{
	if (!o->watch_timeout_s)
		o->watch_timeout_s = 300;
	if (!o->backoff_min_ms)
		o->backoff_min_ms = 500;
	if (!o->backoff_max_ms)
		o->backoff_max_ms = 30000;
	if (o->backoff_max_ms < o->backoff_min_ms)
		o->backoff_max_ms = o->backoff_min_ms;
	if (!(o->patch_qps > 0))
		o->patch_qps = 5;
	if (!o->patch_burst)
		o->patch_burst = 10;
	if (!(o->event_qps > 0))
		o->event_qps = 1;
	if (!o->event_burst)
		o->event_burst = 5;
	if (!o->event_dedup_s)
		o->event_dedup_s = 600;
	if (!o->list_limit)
		o->list_limit = 500;
	if (!o->max_object_bytes)
		o->max_object_bytes = KUBE_MAX_OBJECT;
	if (!o->max_pods)
		o->max_pods = KUBE_MAX_PODS_DEFAULT;
	if (!o->max_list_bytes)
		o->max_list_bytes = KUBE_MAX_LIST;
}

static int multi_setup(struct kube_client *c)
{
	int bad = 0;

	c->multi = curl_multi_init();
	if (!c->multi)
		return -1;
	bad |= curl_multi_setopt(c->multi, CURLMOPT_SOCKETFUNCTION, on_curl_socket) != CURLM_OK;
	bad |= curl_multi_setopt(c->multi, CURLMOPT_SOCKETDATA, c) != CURLM_OK;
	bad |= curl_multi_setopt(c->multi, CURLMOPT_TIMERFUNCTION, on_curl_timer) != CURLM_OK;
	bad |= curl_multi_setopt(c->multi, CURLMOPT_TIMERDATA, c) != CURLM_OK;
	/* One watch plus writes: HTTP/2 multiplexes them on one TLS session. */
	bad |= curl_multi_setopt(c->multi, CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX) != CURLM_OK;
	return bad ? -1 : 0;
}

struct kube_client *kube_client_new(struct kube_config *cfg, const struct kube_client_opts *o)
{
	struct kube_client *c;

	if (!cfg || !cfg->server || !o || !o->node || !*o->node || !o->io.watch_fd ||
	    !o->io.arm_timer) {
		log_error("kube: client needs a server, a node name and the loop callbacks");
		return NULL;
	}
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		log_error("kube: libcurl global initialisation failed");
		return NULL;
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		goto fail_global;
	c->cfg = cfg;
	c->o = *o;
	opts_defaults(&c->o);
	c->list_page = c->o.list_limit;
	c->node = strdup(o->node);
	c->rv = strdup("");
	c->o.node = c->node;
	c->rng = (unsigned)kube_now_ms() ^ ((unsigned)getpid() << 16) ^ 0x9e3779b9u;
	if (!c->rng)
		c->rng = 1;
	if (!c->node || !c->rv || multi_setup(c) != 0) {
		log_error("kube: out of memory setting up the client");
		kube_client_free(c);
		return NULL;
	}
	kube_bucket_init(&c->patch_tb, c->o.patch_qps, c->o.patch_burst, kube_now_ms());
	kube_bucket_init(&c->event_tb, c->o.event_qps, c->o.event_burst, kube_now_ms());
	return c;
fail_global:
	log_error("kube: out of memory setting up the client");
	curl_global_cleanup();
	return NULL;
}

int kube_client_start(struct kube_client *c)
{
	if (c->sync != KUBE_SYNC_IDLE)
		return 0;
	c->sync = KUBE_SYNC_WAITING;
	c->sync_relist = 1;
	c->sync_due_ms = kube_now_ms();
	finish(c);
	return 0;
}

void kube_client_free(struct kube_client *c)
{
	if (!c)
		return;
	while (c->reqs) {
		struct kube_req *r = c->reqs;

		c->reqs = r->next;
		if (c->multi && curl_multi_remove_handle(c->multi, r->easy) != CURLM_OK)
			log_warn("kube: %s: could not detach from the multi handle", r->url);
		kube_req_free(r);
	}
	if (c->multi)
		curl_multi_cleanup(c->multi);
	kube_pods_free_all(c);
	kube_write_free_all(c);
	free(c->node);
	free(c->rv);
	free(c->list_rv);
	free(c->list_continue);
	free(c);
	curl_global_cleanup();
}

const char *kube_client_resource_version(const struct kube_client *c)
{
	return c->rv;
}

int kube_client_synced(const struct kube_client *c)
{
	return c->synced;
}

void kube_client_stats(const struct kube_client *c, struct kube_stats *out)
{
	*out = c->st;
}
