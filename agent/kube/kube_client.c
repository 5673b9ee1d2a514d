/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kube_client.c - the libcurl multi glue: requests, the socket and timer
 * callbacks handed to the caller's loop, completion dispatch and the one
 * timer that also covers backoff and rate-limit deadlines. Does not own
 * what a request means (kube_sync.c, kube_write.c) nor the pod cache.
 */
#include "agent/kube/kube_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"

#define KUBE_CONNECT_TIMEOUT_MS 10000L
#define KUBE_REQUEST_TIMEOUT_MS 30000L
#define KUBE_ERROR_BODY_MAX 65536

uint64_t kube_now_ms(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
		return 0;
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

unsigned kube_rand(struct kube_client *c, unsigned bound)
{
	/* xorshift32: jitter only needs to differ between nodes. */
	c->rng ^= c->rng << 13;
	c->rng ^= c->rng >> 17;
	c->rng ^= c->rng << 5;
	return bound ? c->rng % bound : 0;
}

/* Doubling delay with "equal jitter": half fixed, half random, so that the
 * agents of a whole cluster do not retry in step after an API outage. */
unsigned kube_backoff_ms(struct kube_client *c, unsigned failures)
{
	uint64_t d = c->o.backoff_min_ms;

	for (unsigned i = 1; i < failures && d < c->o.backoff_max_ms; i++)
		d *= 2;
	if (d > c->o.backoff_max_ms)
		d = c->o.backoff_max_ms;
	return (unsigned)(d / 2 + kube_rand(c, (unsigned)(d / 2) + 1));
}

char *kube_strdup_printf(const char *fmt, ...)
{
	va_list ap;
	char *s;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&s, fmt, ap);
	va_end(ap);
	return n < 0 ? NULL : s;
}

/* Percent-encodes a query or path value (RFC 3986 unreserved kept). */
char *kube_escape(struct kube_client *c, const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	char *out = malloc(strlen(s) * 3 + 1), *o = out;

	(void)c;
	if (!out)
		return NULL;
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;

		if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		    (ch >= '0' && ch <= '9') || strchr("-._~", ch)) {
			*o++ = (char)ch;
		} else {
			*o++ = '%';
			*o++ = hex[ch >> 4];
			*o++ = hex[ch & 15];
		}
	}
	*o = '\0';
	return out;
}

int kube_buf_add(struct kube_buf *b, const char *p, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		char *np;

		while (cap < b->len + n + 1)
			cap *= 2;
		np = realloc(b->p, cap);
		if (!np)
			return -1;
		b->p = np;
		b->cap = cap;
	}
	memcpy(b->p + b->len, p, n);
	b->len += n;
	b->p[b->len] = '\0';
	return 0;
}

const char *kube_status_text(long status)
{
	switch (status) {
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 409: return "Conflict";
	case 410: return "Gone";
	case 415: return "Unsupported Media Type";
	case 422: return "Unprocessable Entity";
	case 429: return "Too Many Requests";
	case 500: return "Internal Server Error";
	case 502: return "Bad Gateway";
	case 503: return "Service Unavailable";
	case 504: return "Gateway Timeout";
	default: return status >= 200 && status < 300 ? "OK" : "unexpected status";
	}
}

static const char *req_method(const struct kube_req *r)
{
	switch (r->kind) {
	case KUBE_REQ_PATCH: return "PATCH";
	case KUBE_REQ_EVENT: return "POST";
	default: return "GET";
	}
}

/* "GET URL: HTTP 403 Forbidden: <Status message>" or "...: <curl error>". */
void kube_describe_failure(const struct kube_req *r, CURLcode rc, long status, char *out,
			   size_t len)
{
	const char *msg = NULL;
	cJSON *st = NULL;

	if (rc != CURLE_OK) {
		snprintf(out, len, "%s %s: %s", req_method(r), r->url,
			 r->errbuf[0] ? r->errbuf : curl_easy_strerror(rc));
		return;
	}
	if (r->resp.p && (st = cJSON_Parse(r->resp.p)))
		msg = kube_json_str(st, "message", NULL);
	snprintf(out, len, "%s %s: HTTP %ld %s%s%s", req_method(r), r->url, status,
		 kube_status_text(status), msg ? ": " : "", msg ? msg : "");
	cJSON_Delete(st);
}

/* 0: no limit. Lists can be large; a PATCH's answer is a whole pod;
 * anything else only matters as an error page to log. */
static size_t body_limit(const struct kube_req *r)
{
	long status = 0;

	if (r->kind == KUBE_REQ_LIST)
		return 0;
	if (r->kind == KUBE_REQ_PATCH &&
	    curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &status) == CURLE_OK &&
	    status >= 200 && status < 300)
		return r->c->o.max_object_bytes;
	return KUBE_ERROR_BODY_MAX;
}

static size_t body_write(char *p, size_t size, size_t n, void *arg)
{
	struct kube_req *r = arg;
	size_t limit = body_limit(r);

	n *= size;
	r->resp_total += n;
	/* Over the limit: read the rest away, keep nothing more (a cut
	 * body is never mistaken for a whole one: resp_over says so). */
	if (r->resp_over || (limit && r->resp.len + n > limit)) {
		r->resp_over = 1;
		return n;
	}
	return kube_buf_add(&r->resp, p, n) == 0 ? n : 0;
}

static int req_tls(struct kube_req *r)
{
	const struct kube_config *cfg = r->c->cfg;
	CURL *e = r->easy;
	struct curl_blob b;
	int bad = 0;

	if (cfg->ca_file)
		bad |= curl_easy_setopt(e, CURLOPT_CAINFO, cfg->ca_file) != CURLE_OK;
	if (cfg->ca_data.data) {
		b = (struct curl_blob){ cfg->ca_data.data, cfg->ca_data.len, CURL_BLOB_COPY };
		bad |= curl_easy_setopt(e, CURLOPT_CAINFO_BLOB, &b) != CURLE_OK;
	}
	if (cfg->cert_file)
		bad |= curl_easy_setopt(e, CURLOPT_SSLCERT, cfg->cert_file) != CURLE_OK;
	if (cfg->cert_data.data) {
		b = (struct curl_blob){ cfg->cert_data.data, cfg->cert_data.len, CURL_BLOB_COPY };
		bad |= curl_easy_setopt(e, CURLOPT_SSLCERT_BLOB, &b) != CURLE_OK;
	}
	if (cfg->key_file)
		bad |= curl_easy_setopt(e, CURLOPT_SSLKEY, cfg->key_file) != CURLE_OK;
	if (cfg->key_data.data) {
		b = (struct curl_blob){ cfg->key_data.data, cfg->key_data.len, CURL_BLOB_COPY };
		bad |= curl_easy_setopt(e, CURLOPT_SSLKEY_BLOB, &b) != CURLE_OK;
	}
	if (cfg->insecure) {
		bad |= curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 0L) != CURLE_OK;
		bad |= curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 0L) != CURLE_OK;
	}
	return bad ? -1 : 0;
}

static int req_options(struct kube_req *r)
{
	CURL *e = r->easy;
	int bad = 0;

	bad |= curl_easy_setopt(e, CURLOPT_URL, r->url) != CURLE_OK;
	bad |= curl_easy_setopt(e, CURLOPT_PRIVATE, r) != CURLE_OK;
	bad |= curl_easy_setopt(e, CURLOPT_ERRORBUFFER, r->errbuf) != CURLE_OK;
	/* No signals: the agent owns signal handling. */
	bad |= curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L) != CURLE_OK;
	bad |= curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, body_write) != CURLE_OK;
	bad |= curl_easy_setopt(e, CURLOPT_WRITEDATA, r) != CURLE_OK;
	bad |= curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, KUBE_CONNECT_TIMEOUT_MS) != CURLE_OK;
	bad |= curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, KUBE_REQUEST_TIMEOUT_MS) != CURLE_OK;
	/* A peer that vanished without a FIN (node network cut) must still
	 * end a quiet watch: keepalive probes find it. */
	bad |= curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L) != CURLE_OK;
	bad |= curl_easy_setopt(e, CURLOPT_TCP_KEEPIDLE, 30L) != CURLE_OK;
	bad |= curl_easy_setopt(e, CURLOPT_TCP_KEEPINTVL, 10L) != CURLE_OK;
	bad |= curl_easy_setopt(e, CURLOPT_USERAGENT, "gpuqos-agent/" "0.1") != CURLE_OK;
	bad |= curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https") != CURLE_OK;
	return bad ? -1 : req_tls(r);
}

struct kube_req *kube_req_new(struct kube_client *c, enum kube_req_kind kind, char *url)
{
	struct kube_req *r;

	if (!url) {
		log_error("kube: out of memory building a request URL");
		return NULL;
	}
	r = calloc(1, sizeof(*r));
	if (!r || !(r->easy = curl_easy_init())) {
		log_error("kube: out of memory for a request to %s", url);
		free(r);
		free(url);
		return NULL;
	}
	r->c = c;
	r->kind = kind;
	r->url = url;
	if (req_options(r) != 0) {
		log_error("kube: %s: libcurl refused an option (TLS files or blobs unsupported?)",
			  url);
		kube_req_free(r);
		return NULL;
	}
	return r;
}

static int req_headers(struct kube_req *r, const char *content_type)
{
	const char *token = kube_config_token(r->c->cfg, kube_now_ms());
	char *auth = NULL, *ct = NULL;
	struct curl_slist *h = NULL, *t;

	if (token && !(auth = kube_strdup_printf("Authorization: Bearer %s", token)))
		return -1;
	if (content_type && !(ct = kube_strdup_printf("Content-Type: %s", content_type))) {
		free(auth);
		return -1;
	}
	const char *lines[] = { "Accept: application/json", auth, ct };

	for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
		if (!lines[i])
			continue;
		t = curl_slist_append(h, lines[i]);
		if (!t) {
			curl_slist_free_all(h);
			h = NULL;
			break;
		}
		h = t;
	}
	if (auth) /* the token must not linger in freed heap */
		explicit_bzero(auth, strlen(auth));
	free(auth);
	free(ct);
	r->hdrs = h;
	return h ? 0 : -1;
}

int kube_req_start(struct kube_req *r, const char *method, const char *content_type)
{
	struct kube_client *c = r->c;
	CURLMcode mc;
	int bad = 0;

	if (req_headers(r, content_type) != 0) {
		log_error("kube: %s %s: out of memory for headers", method, r->url);
		return -1;
	}
	bad |= curl_easy_setopt(r->easy, CURLOPT_HTTPHEADER, r->hdrs) != CURLE_OK;
	if (strcmp(method, "GET") != 0)
		bad |= curl_easy_setopt(r->easy, CURLOPT_CUSTOMREQUEST, method) != CURLE_OK;
	if (r->body)
		bad |= curl_easy_setopt(r->easy, CURLOPT_POSTFIELDS, r->body) != CURLE_OK;
	if (bad) {
		log_error("kube: %s %s: libcurl refused an option", method, r->url);
		return -1;
	}
	mc = curl_multi_add_handle(c->multi, r->easy);
	if (mc != CURLM_OK) {
		log_error("kube: %s %s: %s", method, r->url, curl_multi_strerror(mc));
		return -1;
	}
	r->started_ms = kube_now_ms();
	r->next = c->reqs;
	c->reqs = r;
	return 0;
}

void kube_req_free(struct kube_req *r)
{
	if (!r)
		return;
	curl_easy_cleanup(r->easy);
	curl_slist_free_all(r->hdrs);
	free(r->url);
	free(r->body);
	free(r->resp.p);
	free(r->uid);
	kube_req_free_event(r);
	free(r);
}

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

static void dispatch_done(struct kube_client *c, CURL *e, CURLcode rc)
{
	struct kube_req *r = NULL;
	long status = 0;

	if (curl_easy_getinfo(e, CURLINFO_PRIVATE, (char **)&r) != CURLE_OK || !r)
		return;
	if (curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status) != CURLE_OK)
		status = 0;
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

void kube_client_defer(struct kube_client *c)
{
	uint64_t now = kube_now_ms();

	/* Inside a pump, its own write step comes after the callbacks. */
	if (c->in_curl || c->in_pump)
		return;
	if (!c->write_due_ms || c->write_due_ms > now)
		c->write_due_ms = now;
	rearm(c, now);
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
