/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kube_client.h - the node agent's Kubernetes API client: lists and watches
 * the pods of one node into a cache, patches pod annotations and posts
 * events.k8s.io/v1 Events. Built on the libcurl multi interface so that
 * the caller's event loop drives every socket and the one timer; nothing
 * here ever blocks or starts a thread of its own (libcurl's resolver
 * aside). Does not own the event loop, the configuration (kube_config.h)
 * or what the annotations mean.
 */
#ifndef GPUQOS_KUBE_CLIENT_H
#define GPUQOS_KUBE_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "agent/kube/kube_config.h"

struct cJSON;
struct kube_client;

enum {
	KUBE_IO_IN = 1,  /* EPOLLIN */
	KUBE_IO_OUT = 2, /* EPOLLOUT */
};

/* How the client asks the caller's loop for work. */
struct kube_io {
	/* Watch fd for events (KUBE_IO_IN | KUBE_IO_OUT); events 0: stop
	 * watching it (libcurl owns the fd and closes it itself, so a
	 * loop_del, never a close). Returns 0 or -1. */
	int (*watch_fd)(void *arg, int fd, unsigned events);
	/* Arm the client's single timer to fire after delay_ms; 0 means on
	 * the next loop turn (a timerfd needs 1 ns, since 0 disarms it);
	 * negative disarms it. Returns 0 or -1. */
	int (*arm_timer)(void *arg, long delay_ms);
	void *arg;
};

/* One pod of this node as last seen. Valid until the next call into the
 * client; a DELETED callback's pod only during the callback. The uid
 * string alone stays valid for as long as the pod is cached. */
struct kube_pod {
	char *uid;
	char *name;
	char *namespace;
	char *node;
	char *phase;            /* "" when the status has none yet */
	char *resource_version;
	int terminating;        /* metadata.deletionTimestamp is set */
	struct cJSON *annotations; /* an object, never NULL; read only */
	/* metadata.annotations was there but not an object (a non-conforming
	 * server): annotations is then empty, and the pod says nothing valid. */
	int annotations_malformed;
	/* Container ids without the runtime prefix ("containerd://"): the
	 * form /proc/<pid>/cgroup shows. Init and ephemeral containers too. */
	char **container_ids;
	char **container_names; /* the same containers' names, "" if none */
	size_t n_container_ids;
	/* The client's change generation when the pod was added or last
	 * changed as an UPDATED callback says (kube_client_changed()). */
	uint64_t change_gen;
};

enum kube_pod_change {
	KUBE_POD_ADDED,
	KUBE_POD_UPDATED, /* annotations, phase, containers or deletion changed */
	KUBE_POD_DELETED,
};

enum kube_event_type {
	KUBE_EVENT_NORMAL,
	KUBE_EVENT_WARNING,
};

/* The most pods of one node the client caches (a node's pods are bounded
 * by the kubelet's maxPods, 110 by default); pods past it are refused
 * with an error. */
#define KUBE_MAX_PODS_DEFAULT 16384u

struct kube_client_opts {
	/* required: spec.nodeName to watch; pods of other nodes that a server
	 * sends anyway are neither cached nor told */
	const char *node;
	struct kube_io io;        /* required */
	void (*on_pod)(void *arg, enum kube_pod_change change, const struct kube_pod *pod);
	void (*on_synced)(void *arg); /* a full list has been applied */
	void *cb_arg;
	/* Knobs; 0 takes the default in brackets. */
	unsigned watch_timeout_s; /* [300] server-side timeout, +0..50 % jitter */
	unsigned backoff_min_ms;  /* [500] first retry delay after an error */
	unsigned backoff_max_ms;  /* [30000] cap of the doubling delay */
	double patch_qps;         /* [5] annotation PATCHes per second ... */
	unsigned patch_burst;     /* [10] ... with this burst */
	double event_qps;         /* [1] Events per second ... */
	unsigned event_burst;     /* [5] ... with this burst */
	unsigned event_dedup_s;   /* [600] same pod+reason+note suppressed this long */
	unsigned list_limit;      /* [500] pods per list page */
	size_t max_object_bytes;  /* [4 MiB] largest PATCH answer (a pod) cached */
	size_t max_pods;          /* [KUBE_MAX_PODS_DEFAULT] pods cached at most */
	/* [16 MiB] largest list page body and watch line read; a page over
	 * it is asked for again in halves, down to one pod, and a pod over it
	 * alone is refused with an error (the rest of the list goes on). */
	size_t max_list_bytes;
	/* The annotations cached, NULL-terminated: a key is kept if it is one
	 * of these (NULL: every key). Values over 4 KiB are cached as a note
	 * of their length. Annotating another key is refused (-1). */
	const char *const *annotation_keys;
};

struct kube_stats {
	uint64_t lists;        /* list requests sent (pages included) */
	uint64_t relists;      /* lists after the watch's version was unusable */
	uint64_t watches;      /* watch requests sent */
	uint64_t watch_events; /* events applied from watch streams */
	uint64_t bookmarks;
	uint64_t unauthorized; /* 401 answers */
	uint64_t errors;       /* failed requests of any kind */
	uint64_t patches_sent;
	uint64_t patches_unchanged; /* annotate calls that needed no request */
	uint64_t patch_answers_too_large; /* written, answer over max_object_bytes */
	uint64_t patches_refused;   /* PATCHes answered 403, 422 or another final 4xx */
	uint64_t patches_withheld;  /* annotate calls for a value the server refused */
	uint64_t pods_refused;  /* pods not cached: max_pods were already, or too large */
	uint64_t lists_too_large; /* list pages over max_list_bytes, asked again smaller */
	uint64_t events_sent;
	uint64_t events_suppressed; /* duplicates, and owed Events a newer one replaced */
	uint64_t events_existing; /* refused by the server as posted before (409) */
	uint64_t events_dropped;  /* queued for a pod that was deleted before its turn */
	uint64_t no_pods_warnings; /* warnings that no pod is on the node */
};

/* cfg is borrowed and must outlive the client. Returns NULL and logs why. */
struct kube_client *kube_client_new(struct kube_config *cfg, const struct kube_client_opts *o);
/* Starts list+watch; the work happens in the callbacks below. */
int kube_client_start(struct kube_client *c);
void kube_client_free(struct kube_client *c);

/* The caller's loop reports readiness (KUBE_IO_* bits; error and hang-up
 * reported as both) and timer expiry. */
void kube_client_on_fd(struct kube_client *c, int fd, unsigned events);
void kube_client_on_timer(struct kube_client *c);

/* Sets (value non-NULL) or removes (NULL) one annotation of a cached pod.
 * Returns 1 when the pod already has that value (or it is already queued
 * or in flight): no request. Returns 2 when the server refused this very
 * value (403, 422: an answer no retry changes; logged, counted and told
 * in an AnnotationRefused Event once): no request until the value asked
 * for changes. Returns 0 when queued: PATCHes start on the loop's next
 * turn, so all a caller queues for a pod in one pass leaves in one PATCH;
 * they are rate-limited, one in flight per pod; 5xx, 429 and transport
 * errors are retried with backoff. -1: no such pod in the cache. */
int kube_client_annotate(struct kube_client *c, const char *uid, const char *key,
			 const char *value);

/* Queues an events.k8s.io/v1 Event regarding a cached pod. When the queue
 * is full the pod is owed the Event instead (one per pod: a newer one
 * replaces it), queued as soon as there is room. Returns 0 when queued or
 * owed, 1 when suppressed as a duplicate, -1 when the pod is unknown or
 * an argument is empty. */
int kube_client_event(struct kube_client *c, const char *uid, enum kube_event_type type,
		      const char *reason, const char *action, const char *note);

const struct kube_pod *kube_client_pod(const struct kube_client *c, const char *uid);
size_t kube_client_pod_count(const struct kube_client *c);
const struct kube_pod *kube_client_pod_at(const struct kube_client *c, size_t i);
/* Every addition of a pod and every change an UPDATED callback reports
 * takes the next number of one counter, which the pod keeps as its
 * change_gen. A caller that remembers the counter after a pass asks at
 * the next pass which pods changed since, in O(changed): */
uint64_t kube_client_change_gen(const struct kube_client *c);
/* Fills uids[0..max) with the cached pods whose change_gen is above since,
 * newest first, and returns how many there are (more than max: call again
 * with a larger array). The strings are the pods' own (valid while they
 * are cached). Deleted pods are not in it: the DELETED callback told. */
size_t kube_client_changed(const struct kube_client *c, uint64_t since, const char **uids,
			   size_t max);
/* The value of one annotation, or NULL. */
const char *kube_pod_annotation(const struct kube_pod *pod, const char *key);
/* The resourceVersion the next watch starts from ("" before the first list). */
const char *kube_client_resource_version(const struct kube_client *c);
/* 1 once a full list has been applied. */
int kube_client_synced(const struct kube_client *c);
void kube_client_stats(const struct kube_client *c, struct kube_stats *out);

#endif
