/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kube_sync.c - keeps the pod cache in step with the API server: a paged
 * list of this node's pods, then a watch from the list's resourceVersion
 * with bookmarks, re-watching from the last resourceVersion after a
 * server timeout or a dropped connection and re-listing whenever an answer
 * says that version cannot be watched from: 410 Gone or Expired (too old),
 * 504 "Too large resource version" (ahead of the server's: etcd restored,
 * a lagging watch cache), as an HTTP status or an ERROR event inside the
 * 200 stream, a stream line that cannot be read, or a run of failed
 * watches. Does not own the cache entries (kube_pods.c) or the transport
 * (kube_client.c).
 */
#include "agent/kube/kube_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"

/* A watch that ends sooner than this without events is not a normal
 * server timeout: back off before the next one. */
#define KUBE_WATCH_MIN_MS 1000u
/* A watch that stayed open this long (or backoff_max_ms, if less) proves
 * the server healthy even without an event: the backoff starts over. */
#define KUBE_WATCH_HEALTHY_MS 10000u
/* Failed watches in a row (no event between) after which the next step
 * is a list, not another watch from the same version. */
#define KUBE_WATCH_FAILS_RELIST 5u
/* How often the warning that no pod is on the node repeats. */
#define KUBE_NO_PODS_WARN_MS (10u * 60u * 1000u)

static void set_rv(struct kube_client *c, const char *rv)
{
	char *n;

	if (!rv || !*rv || strcmp(rv, c->rv) == 0)
		return;
	n = strdup(rv);
	if (!n) {
		log_error("kube: out of memory recording resourceVersion %s", rv);
		return;
	}
	free(c->rv);
	c->rv = n;
}

static void wait_then(struct kube_client *c, uint64_t now, unsigned delay_ms, int relist)
{
	c->sync = KUBE_SYNC_WAITING;
	c->sync_due_ms = now + delay_ms;
	c->sync_relist = relist;
}

/* retry_after_ms: the failed answer's Retry-After (0: none). */
static void fail_then(struct kube_client *c, int relist, unsigned retry_after_ms)
{
	c->sync_failures++;
	wait_then(c, kube_now_ms(), kube_retry_ms(c, c->sync_failures, retry_after_ms), relist);
}

static char *pods_url(struct kube_client *c, const char *extra)
{
	char *node = kube_escape(c, c->node);
	char *url;

	if (!node)
		return NULL;
	/* "spec.nodeName=NODE" is one query value: its '=' is escaped. */
	url = kube_strdup_printf("%s/api/v1/pods?fieldSelector=spec.nodeName%%3D%s&%s",
				 c->cfg->server, node, extra);
	free(node);
	return url;
}

static int start_list(struct kube_client *c)
{
	char *extra, *cont = NULL;
	struct kube_req *r;

	if (c->list_continue && !(cont = kube_escape(c, c->list_continue)))
		return -1;
	extra = kube_strdup_printf("limit=%u%s%s", c->list_page, cont ? "&continue=" : "",
				   cont ? cont : "");
	free(cont);
	if (!extra)
		return -1;
	r = kube_req_new(c, KUBE_REQ_LIST, pods_url(c, extra));
	free(extra);
	if (!r)
		return -1;
	if (kube_req_start(r, "GET", NULL) != 0) {
		kube_req_free(r);
		return -1;
	}
	if (!c->list_continue)
		c->list_gen++;
	c->st.lists++;
	c->sync = KUBE_SYNC_LISTING;
	return 0;
}

static int start_watch(struct kube_client *c)
{
	unsigned t = c->o.watch_timeout_s + kube_rand(c, c->o.watch_timeout_s / 2 + 1);
	char *rv = kube_escape(c, c->rv), *extra;
	struct kube_req *r;

	if (!rv)
		return -1;
	extra = kube_strdup_printf("watch=1&allowWatchBookmarks=true&resourceVersion=%s"
				   "&timeoutSeconds=%u", rv, t);
	free(rv);
	if (!extra)
		return -1;
	r = kube_req_new(c, KUBE_REQ_WATCH, pods_url(c, extra));
	free(extra);
	if (!r)
		return -1;
	/* The server ends the watch after t s; the client-side limit only
	 * catches a server that forgot to. */
	if (curl_easy_setopt(r->easy, CURLOPT_WRITEFUNCTION, kube_watch_write) != CURLE_OK ||
	    curl_easy_setopt(r->easy, CURLOPT_TIMEOUT_MS, (long)(t + 30) * 1000L) != CURLE_OK ||
	    kube_req_start(r, "GET", NULL) != 0) {
		kube_req_free(r);
		return -1;
	}
	c->st.watches++;
	c->sync = KUBE_SYNC_WATCHING;
	return 0;
}

void kube_sync_step(struct kube_client *c, uint64_t now)
{
	int rc;

	if (c->sync != KUBE_SYNC_WAITING || now < c->sync_due_ms)
		return;
	if (c->sync_relist || !*c->rv)
		rc = start_list(c);
	else
		rc = start_watch(c);
	if (rc != 0) {
		log_error("kube: could not start the pod %s; retrying",
			  c->sync_relist ? "list" : "watch");
		fail_then(c, c->sync_relist, 0);
	}
}

static void list_pass_done(struct kube_client *c);

/* rv: the list's metadata.resourceVersion, a non-empty string. */
static void list_page(struct kube_client *c, cJSON *list, const char *rv)
{
	const char *cont = kube_json_str(list, "metadata", "continue");
	const cJSON *item;

	/* Every page of one pass is the same snapshot: the first page's
	 * resourceVersion is the one to watch from. */
	if (!c->list_continue) {
		free(c->list_rv);
		c->list_rv = strdup(rv);
	}
	cJSON_ArrayForEach(item, cJSON_GetObjectItemCaseSensitive(list, "items"))
		kube_pods_apply(c, item, c->list_gen, c->list_replace);
	c->list_page_fit = c->list_page;
	free(c->list_continue);
	c->list_continue = cont && *cont ? strdup(cont) : NULL;
	if (c->list_continue) {
		wait_then(c, kube_now_ms(), 0, 1);
		return;
	}
	list_pass_done(c);
}

/* No pod of the cluster runs on this node: the agent's own pod would, so
 * the node name is almost surely wrong, and every GPU process stays
 * unmanaged. Said as a warning after a list, and again at most every
 * KUBE_NO_PODS_WARN_MS while it lasts (checked as each watch ends). */
static void warn_if_no_pods(struct kube_client *c, uint64_t now)
{
	if (c->n_pods || (c->no_pods_warned_ms && now - c->no_pods_warned_ms < KUBE_NO_PODS_WARN_MS))
		return;
	c->no_pods_warned_ms = now ? now : 1;
	c->st.no_pods_warnings++;
	log_warn("kube: no pod runs on node \"%s\" (spec.nodeName): is the node name right? The "
		 "agent's own pod would be one; until a pod of this node is listed, every GPU "
		 "process stays unmanaged", c->node);
}

/* The last page of a pass was applied: pods it did not bring are gone. */
static void list_pass_done(struct kube_client *c)
{
	kube_pods_sweep(c, c->list_gen);
	c->list_replace = 0;
	set_rv(c, c->list_rv);
	c->sync_failures = 0;
	c->synced = 1;
	log_info("kube: listed %zu pod(s) of node %s at resourceVersion %s", c->n_pods, c->node,
		 c->rv);
	c->list_page = c->o.list_limit;
	c->list_page_fit = 0;
	wait_then(c, kube_now_ms(), 0, 0);
	warn_if_no_pods(c, kube_now_ms());
	if (c->o.on_synced)
		c->o.on_synced(c->o.cb_arg);
}

/* The string value of "key" in the start of a JSON text, before the first
 * "items" (a list's metadata comes first, as the API server writes it);
 * -1 if it is not there, has an escape or does not fit. */
static int head_string(const char *p, size_t n, const char *key, int before_items, char *out,
		       size_t len)
{
	char pat[32];
	const char *end = p + n, *k, *items;
	size_t i = 0;

	snprintf(pat, sizeof(pat), "\"%s\"", key);
	items = before_items ? memmem(p, n, "\"items\"", 7) : NULL;
	if (items)
		end = items;
	k = memmem(p, (size_t)(end - p), pat, strlen(pat));
	if (!k)
		return -1;
	for (k += strlen(pat); k < end && (*k == ' ' || *k == ':' || *k == '\n' || *k == '\r' ||
					   *k == '\t'); k++)
		;
	if (k >= end || *k++ != '"')
		return -1;
	for (; k < end && *k != '"'; k++) {
		if (*k == '\\' || i + 1 >= len)
			return -1;
		out[i++] = *k;
	}
	out[i] = '\0';
	return k < end ? 0 : -1;
}

/* A page over max_list_bytes: ask for half as many pods; at one pod a page,
 * that pod alone is over the bound: refuse it, and go on past it with the
 * continue token the start of its page carries. */
static int list_too_large(struct kube_req *r)
{
	struct kube_client *c = r->c;
	char rv[128], cont[4096], name[254] = "?";

	c->st.lists_too_large++;
	if (c->list_page > 1) {
		c->list_page /= 2;
		log_warn("kube: GET %s: the page is over %zu bytes (max_list_bytes); asking for "
			 "pages of %u pods", r->url, c->o.max_list_bytes, c->list_page);
		wait_then(c, kube_now_ms(), 0, 1);
		return 0;
	}
	if (head_string(r->resp.p, r->resp.len, "resourceVersion", 1, rv, sizeof(rv)) != 0 || !*rv)
		return -1;
	head_string(r->resp.p, r->resp.len, "name", 0, name, sizeof(name));
	c->st.pods_refused++;
	log_error("kube: pod %s of node %s is over %zu bytes (max_list_bytes) alone: not cached, "
		  "its processes stay unmanaged", name, c->node, c->o.max_list_bytes);
	if (!c->list_continue) {
		free(c->list_rv);
		c->list_rv = strdup(rv);
	}
	free(c->list_continue);
	c->list_continue = NULL;
	/* Past it, pages as large as the last that fit. */
	c->list_page = c->list_page_fit ? c->list_page_fit : c->o.list_limit;
	if (head_string(r->resp.p, r->resp.len, "continue", 1, cont, sizeof(cont)) == 0 && *cont) {
		c->list_continue = strdup(cont);
		wait_then(c, kube_now_ms(), 0, 1);
		return 0;
	}
	if (!c->list_rv)
		return -1;
	list_pass_done(c);
	return 0;
}

static void list_done(struct kube_req *r, CURLcode rc, long status)
{
	struct kube_client *c = r->c;
	const char *rv;
	char why[1024];
	cJSON *list;

	if (rc == CURLE_OK && status == 200) {
		list = kube_json_parse(r->resp.p, r->resp.len);
		rv = kube_json_str(list, "metadata", "resourceVersion");
		/* Without a resourceVersion (or with one that is not a string:
		 * the API makes it one) no watch can follow the list, and the
		 * next step would be the same list at once: a failed list. */
		if (cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(list, "items")) && rv && *rv) {
			list_page(c, list, rv);
			cJSON_Delete(list);
			return;
		}
		log_error("kube: GET %s: %s; retrying the list", r->url,
			  list && cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(list, "items"))
				  ? "the pod list has no usable metadata.resourceVersion"
				  : "the answer is not a pod list");
		cJSON_Delete(list);
	} else if (r->resp_over && status == 200) {
		if (list_too_large(r) == 0)
			return;
		log_error("kube: GET %s: a page over %zu bytes (max_list_bytes) whose start "
			  "names no resourceVersion; retrying the list", r->url,
			  c->o.max_list_bytes);
	} else {
		kube_describe_failure(r, rc, status, why, sizeof(why));
		log_error("kube: %s; retrying the list", why);
	}
	/* A continue token that expired (410) or any failure: start the
	 * pass again from the first page. */
	free(c->list_continue);
	c->list_continue = NULL;
	fail_then(c, 1, r->retry_after_ms);
}

/* A watch cannot go on from our version (why says how): list. That is
 * news on a watch that had been running: list at once. Only refusals that
 * come right after each list (the watch between got nothing) count as a
 * streak, which backs off so a broken server cannot make the agent list in
 * a tight loop. */
static void watch_relist(struct kube_client *c, const char *url, const char *why)
{
	log_info("kube: watch %s: %s; re-listing", url, why);
	c->st.relists++;
	free(c->rv);
	c->rv = strdup("");
	if (!c->rv)
		log_error("kube: out of memory re-listing");
	c->gone_streak++;
	wait_then(c, kube_now_ms(), c->gone_streak > 1 ? kube_backoff_ms(c, c->gone_streak - 1) : 0,
		  1);
}

static uint64_t watch_healthy_ms(const struct kube_client *c)
{
	uint64_t t = c->o.backoff_max_ms < KUBE_WATCH_HEALTHY_MS ? c->o.backoff_max_ms
								  : KUBE_WATCH_HEALTHY_MS;

	return t > KUBE_WATCH_MIN_MS ? t : KUBE_WATCH_MIN_MS;
}

/* Whether a Status (an answer's body or an ERROR event's object) says
 * the version asked for is ahead of the server's: the API server's 504
 * with cause ResourceVersionTooLarge ("Too large resource version"). */
static int status_too_large(const cJSON *st)
{
	const cJSON *cause;
	const char *reason = kube_json_str(st, "reason", NULL);
	const char *msg = kube_json_str(st, "message", NULL);

	if ((reason && strcmp(reason, "TooLargeResourceVersion") == 0) ||
	    (msg && strstr(msg, "Too large resource version")))
		return 1;
	cJSON_ArrayForEach(cause, cJSON_GetObjectItemCaseSensitive(
					  cJSON_GetObjectItemCaseSensitive(st, "details"), "causes")) {
		const char *why = kube_json_str(cause, "reason", NULL);

		if (why && strcmp(why, "ResourceVersionTooLarge") == 0)
			return 1;
	}
	return 0;
}

static int too_large(const struct kube_req *r, long status)
{
	cJSON *st;
	int yes;

	if (status != 504 || !r->resp.p)
		return 0;
	st = cJSON_ParseWithLength(r->resp.p, r->resp.len);
	yes = status_too_large(st);
	cJSON_Delete(st);
	return yes;
}

/* A watch that failed: again from the same version, after the backoff;
 * but a run of KUBE_WATCH_FAILS_RELIST failures with no event between
 * lists instead, so that no answer the client does not know to mean "this
 * version is unusable" keeps it watching from there for ever. */
static void watch_failed(struct kube_client *c, unsigned retry_after_ms)
{
	fail_then(c, c->sync_failures + 1 >= KUBE_WATCH_FAILS_RELIST, retry_after_ms);
	if (c->sync_relist) {
		c->list_replace = 1;
		log_warn("kube: %u pod watches in a row failed from resourceVersion %s; re-listing",
			 c->sync_failures, c->rv);
		c->st.relists++;
	}
}

static void watch_done(struct kube_req *r, CURLcode rc, long status)
{
	struct kube_client *c = r->c;
	uint64_t now = kube_now_ms();
	char why[1024];

	/* A watch that ran (an event, or a second) ends a streak of 410s. */
	if (r->events || now - r->started_ms >= KUBE_WATCH_MIN_MS)
		c->gone_streak = 0;
	/* One that stayed open a while, quiet or not, ends a run of
	 * failures: the cut that ends it is the first of a new run. */
	if (r->events || now - r->started_ms >= watch_healthy_ms(c))
		c->sync_failures = 0;
	if (r->stop == KUBE_WATCH_GONE || (rc == CURLE_OK && status == 410)) {
		snprintf(why, sizeof(why), "%s, resourceVersion %s is too old",
			 r->stop == KUBE_WATCH_GONE ? r->stop_msg : "410 Gone", c->rv);
		watch_relist(c, r->url, why);
	} else if (r->stop == KUBE_WATCH_AHEAD || (rc == CURLE_OK && too_large(r, status))) {
		snprintf(why, sizeof(why), "%s: resourceVersion %s is ahead of the server's",
			 r->stop == KUBE_WATCH_AHEAD ? r->stop_msg : "504 Too large resource version",
			 c->rv);
		c->list_replace = 1;
		watch_relist(c, r->url, why);
	} else if (r->stop == KUBE_WATCH_BAD) {
		/* From the same version the same line would come again. */
		snprintf(why, sizeof(why), "%s", r->stop_msg);
		watch_relist(c, r->url, why);
	} else if (r->stop != KUBE_WATCH_OK) {
		log_warn("kube: watch %s: %s; watching again from resourceVersion %s", r->url,
			 r->stop_msg, c->rv);
		watch_failed(c, 0);
	} else if (rc == CURLE_OK && status == 200) {
		/* The server's timeoutSeconds ran out or it closed the stream
		 * cleanly: carry on from where we are, no list. */
		log_debug("kube: watch %s ended; watching again from resourceVersion %s", r->url,
			  c->rv);
		warn_if_no_pods(c, now);
		if (now - r->started_ms < KUBE_WATCH_MIN_MS && !r->events)
			watch_failed(c, 0);
		else
			wait_then(c, now, 0, 0);
	} else {
		kube_describe_failure(r, rc, status, why, sizeof(why));
		log_warn("kube: watch: %s; watching again from resourceVersion %s", why, c->rv);
		watch_failed(c, r->retry_after_ms);
	}
}

void kube_sync_done(struct kube_req *r, CURLcode rc, long status)
{
	if (r->kind == KUBE_REQ_LIST)
		list_done(r, rc, status);
	else
		watch_done(r, rc, status);
}

static enum kube_watch_stop watch_error(struct kube_req *r, const cJSON *st)
{
	const cJSON *code = cJSON_GetObjectItemCaseSensitive(st, "code");
	const char *msg = kube_json_str(st, "message", NULL);
	const char *reason = kube_json_str(st, "reason", NULL);

	snprintf(r->stop_msg, sizeof(r->stop_msg), "ERROR event %d %s: %s",
		 cJSON_IsNumber(code) ? code->valueint : 0,
		 cJSON_IsNumber(code) ? kube_status_text(code->valueint) : "without a code",
		 msg ? msg : "no message");

	if (status_too_large(st) || (cJSON_IsNumber(code) && code->valueint == 504))
		return KUBE_WATCH_AHEAD;
	if ((cJSON_IsNumber(code) && code->valueint == 410) ||
	    (reason && (strcmp(reason, "Expired") == 0 || strcmp(reason, "Gone") == 0)))
		return KUBE_WATCH_GONE;
	return KUBE_WATCH_ERROR;
}

static enum kube_watch_stop watch_event(struct kube_req *r, const cJSON *ev)
{
	struct kube_client *c = r->c;
	const char *type = kube_json_str(ev, "type", NULL);
	const cJSON *obj = cJSON_GetObjectItemCaseSensitive(ev, "object");

	if (!type || !cJSON_IsObject(obj)) {
		snprintf(r->stop_msg, sizeof(r->stop_msg), "a watch line is not an event");
		return KUBE_WATCH_BAD;
	}
	if (strcmp(type, "ERROR") == 0)
		return watch_error(r, obj);
	if (strcmp(type, "ADDED") == 0 || strcmp(type, "MODIFIED") == 0)
		kube_pods_apply(c, obj, c->list_gen, 0);
	else if (strcmp(type, "DELETED") == 0)
		kube_pods_delete(c, obj);
	else if (strcmp(type, "BOOKMARK") == 0)
		c->st.bookmarks++;
	else
		log_debug("kube: watch %s: ignoring event type %s", r->url, type);
	set_rv(c, kube_json_str(obj, "metadata", "resourceVersion"));
	r->events++;
	c->st.watch_events++;
	c->sync_failures = 0;
	c->gone_streak = 0;
	return KUBE_WATCH_OK;
}

/* One JSON event per line; returns KUBE_WATCH_OK to go on. */
static enum kube_watch_stop watch_line(struct kube_req *r, char *p, size_t n)
{
	enum kube_watch_stop stop;
	cJSON *ev;

	while (n > 0 && (p[n - 1] == '\r' || p[n - 1] == ' '))
		n--;
	if (n == 0)
		return KUBE_WATCH_OK;
	ev = kube_json_parse(p, n);
	if (!ev) {
		snprintf(r->stop_msg, sizeof(r->stop_msg), "unparsable watch line (%zu bytes)", n);
		return KUBE_WATCH_BAD;
	}
	stop = watch_event(r, ev);
	cJSON_Delete(ev);
	return stop;
}

static size_t watch_feed(struct kube_req *r, const char *p, size_t n)
{
	size_t start = 0, from = r->resp.len;
	char *nl;

	if (kube_buf_add(&r->resp, p, n) != 0) {
		snprintf(r->stop_msg, sizeof(r->stop_msg), "out of memory for a watch line");
		r->stop = KUBE_WATCH_BAD;
		return 0;
	}
	/* Chunk boundaries fall anywhere: parse each complete line, keep
	 * the tail for the next chunk. The tail has no newline: only the
	 * new bytes need a search (a long line comes in many chunks). */
	while ((nl = memchr(r->resp.p + from, '\n', r->resp.len - from))) {
		size_t len = (size_t)(nl - (r->resp.p + start));

		r->stop = watch_line(r, r->resp.p + start, len);
		start += len + 1;
		from = start;
		if (r->stop != KUBE_WATCH_OK)
			return 0;
	}
	memmove(r->resp.p, r->resp.p + start, r->resp.len - start);
	r->resp.len -= start;
	r->resp.p[r->resp.len] = '\0';
	if (r->resp.len > r->c->o.max_list_bytes) {
		snprintf(r->stop_msg, sizeof(r->stop_msg), "watch line over %zu bytes",
			 r->c->o.max_list_bytes);
		r->stop = KUBE_WATCH_BAD;
		return 0;
	}
	return n;
}

size_t kube_watch_write(char *p, size_t size, size_t n, void *arg)
{
	struct kube_req *r = arg;
	long status = 0;

	n *= size;
	if (curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &status) != CURLE_OK)
		status = 0;
	if (status != 200) {
		/* An error answer: keep (the start of) its Status body to log. */
		if (r->resp.len < 65536 && kube_buf_add(&r->resp, p, n) != 0)
			return 0;
		return n;
	}
	return watch_feed(r, p, n);
}
