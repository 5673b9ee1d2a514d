/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kube_internal.h - what the files of agent/kube share and nothing outside
 * may use: the client's state, requests in flight, the pod cache entries
 * and the token buckets. Does not own the public API (kube_client.h).
 */
#ifndef GPUQOS_KUBE_INTERNAL_H
#define GPUQOS_KUBE_INTERNAL_H

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/kube/kube_client.h"

#define KUBE_CONTROLLER "gpuqos.io/node-agent"
/* The default bound of one list page's body and of one watch line. A
 * page over it is asked for again in halves, down to one pod a page. */
#define KUBE_MAX_LIST ((size_t)16 << 20)
/* A kept annotation value longer than this is replaced by a note of its
 * length (kube_pods.c): no class or windows value is that long. */
#define KUBE_MAX_ANNOTATION 4096u
/* The default largest PATCH answer (one pod) that is cached. etcd keeps
 * objects up to 1.5 MiB by default; their JSON can be somewhat larger. */
#define KUBE_MAX_OBJECT ((size_t)4 << 20)
#define KUBE_EVENT_QUEUE 64
/* The longest Retry-After honoured. */
#define KUBE_RETRY_AFTER_MAX_MS 60000u
/* Events remembered per pod for de-duplication: a pod with more distinct
 * Events than this within event_dedup_s may repeat its oldest one, which
 * the server then refuses by name (409: kube_write.c names Events by pod
 * UID, reason and note). */
#define KUBE_DEDUP_SLOTS 8

struct kube_buf {
	char *p;
	size_t len, cap;
};

enum kube_req_kind {
	KUBE_REQ_LIST,
	KUBE_REQ_WATCH,
	KUBE_REQ_PATCH,
	KUBE_REQ_EVENT,
};

/* Why a watch stream was cut short by the client itself. */
enum kube_watch_stop {
	KUBE_WATCH_OK,
	KUBE_WATCH_GONE,   /* ERROR event: our version is too old (410, Expired) */
	KUBE_WATCH_AHEAD,  /* ERROR event: too large, ahead of the server's (504) */
	KUBE_WATCH_ERROR,  /* other ERROR event */
	KUBE_WATCH_BAD,    /* unparsable line or line too long */
};

struct kube_event_item {
	char *uid, *name, *namespace, *reason, *action, *note;
	enum kube_event_type type;
	unsigned failures;
	uint64_t due_ms;
};

struct kube_req {
	struct kube_client *c;
	enum kube_req_kind kind;
	CURL *easy;
	struct curl_slist *hdrs;
	char *url;
	char *body;
	struct kube_buf resp;   /* the body; for a watch, the unparsed tail */
	size_t resp_total;      /* body bytes received, kept or not */
	int resp_over;          /* the body went over its limit: resp is cut */
	char errbuf[CURL_ERROR_SIZE];
	char *uid;              /* PATCH and Event: the pod */
	struct kube_event_item ev; /* Event: what is being posted */
	enum kube_watch_stop stop;
	unsigned events;        /* watch: events applied from this stream */
	char stop_msg[256];
	uint64_t started_ms;
	unsigned retry_after_ms; /* the answer's Retry-After, capped; 0 none */
	struct kube_req *next;
};

struct kube_dedup {
	uint64_t hash;
	uint64_t at_ms;
};

struct kube_pod_entry {
	struct kube_pod pod;    /* first: the public view */
	size_t at;              /* its index in c->pods */
	/* The list of pods by change_gen, newest first (c->changed). */
	struct kube_pod_entry *newer, *older;
	unsigned list_gen;      /* last list pass that saw the pod */
	cJSON *pending;         /* annotations to send, coalesced */
	cJSON *inflight;        /* annotations in the PATCH now in flight */
	/* Annotations a PATCH wrote whose answer could not be cached (too
	 * large): what the pod holds until the next version of it arrives. */
	cJSON *written;
	/* The values the server last refused (403, 422 and other answers a
	 * retry cannot change), by key: not sent again until the value the
	 * caller asks for changes. */
	cJSON *refused;
	uint64_t patch_due_ms;  /* no PATCH before this (after a failure) */
	unsigned patch_failures;
	/* An Event the full queue could not take: the newest one per pod,
	 * queued when there is room (c->owed_head, oldest first). */
	struct kube_event_item *owed;
	struct kube_pod_entry *owed_next;
	/* The Events queued for the pod lately, by pod UID + reason + note
	 * hash: gone with the pod, so no other pod's Events push them out. */
	struct kube_dedup dedup[KUBE_DEDUP_SLOTS];
};

struct kube_bucket {
	double tokens, burst, qps;
	uint64_t last_ms;
};


enum kube_sync_state {
	KUBE_SYNC_IDLE,     /* not started */
	KUBE_SYNC_LISTING,
	KUBE_SYNC_WATCHING,
	KUBE_SYNC_WAITING,  /* backing off until sync_due_ms */
};

struct kube_client {
	struct kube_config *cfg;
	struct kube_client_opts o;
	char *node;
	CURLM *multi;
	struct kube_req *reqs;

	enum kube_sync_state sync;
	int sync_relist;        /* the next sync step is a list */
	char *rv;               /* last resourceVersion seen, "" = none */
	char *list_rv;          /* RV of the list pass in progress */
	char *list_continue;    /* next page token of that pass */
	unsigned list_page;     /* pods asked for a page: list_limit, or less
				 * after a page over max_list_bytes */
	unsigned list_page_fit; /* the last page size of this pass that fit */
	unsigned list_gen;
	int synced;
	uint64_t sync_due_ms;
	unsigned sync_failures;
	unsigned gone_streak;   /* 410s with no watch event in between */
	/* The list pass in progress follows an answer that our version is
	 * ahead of the server's (etcd restored from a backup): its objects
	 * replace the cached ones even where their versions read older. */
	int list_replace;

	struct kube_pod_entry **pods;
	size_t n_pods, cap_pods;
	/* uid -> entry: open addressing, linear probing, a power of two
	 * slots kept at most half full. */
	struct kube_pod_entry **idx;
	size_t idx_cap;
	uint64_t change_gen;
	struct kube_pod_entry *changed; /* newest change first */
	int foreign_logged;     /* a pod of another node was logged once */
	int full_logged;        /* a pod over max_pods was logged once */
	size_t patch_cursor;    /* round-robin start among pods */

	struct kube_bucket patch_tb, event_tb;
	struct kube_event_item events[KUBE_EVENT_QUEUE];
	size_t ev_head, ev_len;
	struct kube_pod_entry *owed_head, *owed_tail;
	uint64_t no_pods_warned_ms; /* last warning that no pod is on the node */

	uint64_t curl_due_ms;   /* 0: libcurl wants no timeout */
	uint64_t armed_due;     /* deadline last handed to arm_timer, 0 none */
	int armed_valid;        /* armed_due is what the loop's timer holds */
	int in_curl;            /* inside libcurl: start no transfer now */
	int in_pump;
	uint64_t write_due_ms;  /* next PATCH/Event the buckets allow, 0 none */
	unsigned rng;
	struct kube_stats st;
};

/* kube_util.c: helpers that call nothing else in agent/kube */
uint64_t kube_now_ms(void);
unsigned kube_rand(struct kube_client *c, unsigned bound);
unsigned kube_backoff_ms(struct kube_client *c, unsigned failures);
int kube_buf_add(struct kube_buf *b, const char *p, size_t n);
const char *kube_status_text(long status);
char *kube_strdup_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
char *kube_escape(struct kube_client *c, const char *s);
const char *kube_json_str(const cJSON *obj, const char *a, const char *b);
/* Parses JSON the server sent, after kube_json_mend() of the (writable)
 * text: no string with an embedded NUL, no document lost to one lone
 * surrogate escape. */
void kube_json_mend(char *p, size_t n);
cJSON *kube_json_parse(char *p, size_t n);
unsigned kube_retry_ms(struct kube_client *c, unsigned failures, unsigned retry_after_ms);

/* kube_req.c: one request */
struct kube_req *kube_req_new(struct kube_client *c, enum kube_req_kind kind, char *url);
int kube_req_start(struct kube_req *r, const char *method, const char *content_type);
void kube_req_free(struct kube_req *r);
void kube_describe_failure(const struct kube_req *r, CURLcode rc, long status, char *out,
			   size_t len);
void kube_event_item_free(struct kube_event_item *it);

/* kube_sync.c: list + watch */
void kube_sync_step(struct kube_client *c, uint64_t now);
void kube_sync_done(struct kube_req *r, CURLcode rc, long status);
size_t kube_watch_write(char *p, size_t size, size_t n, void *arg);

/* kube_pods.c: the cache */
struct kube_pod_entry *kube_pods_find(const struct kube_client *c, const char *uid);
/* Whether annotation key is one the cache keeps (annotation_keys). */
int kube_pods_keeps(const struct kube_client *c, const char *key);
/* replace: take the object even if its resourceVersion reads older (a
 * list after the server said our version is ahead of its own). */
int kube_pods_apply(struct kube_client *c, const cJSON *obj, unsigned gen, int replace);
/* Cache a PATCH's answer only if it is newer than the cached pod. */
int kube_pods_apply_answer(struct kube_client *c, const cJSON *obj, unsigned gen);
void kube_pods_delete(struct kube_client *c, const cJSON *obj);
void kube_pods_sweep(struct kube_client *c, unsigned gen);
void kube_pods_free_all(struct kube_client *c);

/* kube_write.c: PATCHes and Events. It calls nothing in kube_client.c:
 * the public kube_client_annotate() and kube_client_event() queue here and
 * then have the transport start the write on the loop's next turn. Both
 * return what the public calls do. */
int kube_write_annotate(struct kube_client *c, const char *uid, const char *key,
			const char *value);
int kube_write_event(struct kube_client *c, const char *uid, enum kube_event_type type,
		     const char *reason, const char *action, const char *note);
void kube_bucket_init(struct kube_bucket *b, double qps, unsigned burst, uint64_t now);
int kube_bucket_take(struct kube_bucket *b, uint64_t now);
uint64_t kube_bucket_next_ms(const struct kube_bucket *b, uint64_t now);
void kube_write_step(struct kube_client *c, uint64_t now, uint64_t *next_due);
void kube_patch_done(struct kube_req *r, CURLcode rc, long status);
void kube_event_done(struct kube_req *r, CURLcode rc, long status);
void kube_write_free_all(struct kube_client *c);

/* kube_yaml.c */
cJSON *kube_yaml_load(const char *path, char *err, size_t errlen);

#endif
