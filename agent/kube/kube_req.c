/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kube_req.c - one HTTP request to the API server: its libcurl easy
 * handle (options, TLS, headers with the current token), the body it
 * keeps within a limit, how a failure is described, and its release.
 * Does not own the multi handle or completion dispatch (kube_client.c),
 * nor what a request means (kube_sync.c, kube_write.c).
 */
#include "agent/kube/kube_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"

#define KUBE_CONNECT_TIMEOUT_MS 10000L
#define KUBE_REQUEST_TIMEOUT_MS 30000L
#define KUBE_ERROR_BODY_MAX 65536

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

/* A list page is bounded by max_list_bytes; a PATCH's answer is a whole
 * pod; anything else only matters as an error page to log. */
static size_t body_limit(const struct kube_req *r)
{
	long status = 0;
	int ok = curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &status) == CURLE_OK &&
		 status >= 200 && status < 300;

	if (r->kind == KUBE_REQ_LIST && ok)
		return r->c->o.max_list_bytes;
	if (r->kind == KUBE_REQ_PATCH && ok)
		return r->c->o.max_object_bytes;
	return KUBE_ERROR_BODY_MAX;
}

static size_t body_write(char *p, size_t size, size_t n, void *arg)
{
	struct kube_req *r = arg;
	size_t limit = body_limit(r);

	n *= size;
	r->resp_total += n;
	/* Over the limit: keep nothing more (a cut body is never mistaken for
	 * a whole one: resp_over says so). A list page ends there (what it
	 * kept is the start of the page, kube_sync.c reads its metadata); any
	 * other body is read away. */
	if (r->resp_over || r->resp.len + n > limit) {
		r->resp_over = 1;
		return r->kind == KUBE_REQ_LIST ? 0 : n;
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
	kube_event_item_free(&r->ev);
	free(r);
}

void kube_event_item_free(struct kube_event_item *it)
{
	free(it->uid);
	free(it->name);
	free(it->namespace);
	free(it->reason);
	free(it->action);
	free(it->note);
	memset(it, 0, sizeof(*it));
}
