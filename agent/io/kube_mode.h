/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kube_mode.h - the node agent in Kubernetes mode: where a process's class
 * comes from (its pod's gpu.qos annotation, found through /proc/<pid>/cgroup
 * and the pod cache of the API client), and what the agent writes back
 * (gpuqos.io/ annotations and Events, docs/kubernetes.md).
 *
 * kube_mode.c owns the wiring of the API client (its fds and timer in the
 * one loop) and classification; kube_podres.c the pod-resources client's fds;
 * kube_podstate.c the annotations and Events. Neither owns the policy
 * (policy.c), the TSG table (tsg.c) nor the API client itself (agent/kube).
 */
#ifndef GPUQOS_AGENT_KUBE_MODE_H
#define GPUQOS_AGENT_KUBE_MODE_H

#include <stdint.h>

#include "agent/kube/kube_client.h"
#include "common/loop.h"

struct agent;
struct proc;
struct cJSON;
struct podres;

/* What a pod says (docs/rm-facts.md). Only these two spellings are accepted:
 * anything else is a mistake an operator must hear about. */
#define KMODE_QOS_ANNOTATION "gpu.qos"
#define KMODE_QOS_LC "latency-critical"
#define KMODE_QOS_BE "best-effort"

/* What the agent writes, all under one prefix. */
#define KMODE_PREFIX "gpuqos.io/"
#define KMODE_KEY_CLASS KMODE_PREFIX "class"
#define KMODE_KEY_STATE KMODE_PREFIX "state"
/* What an LC pod may ask of its own windows (docs/kubernetes.md). */
#define KMODE_WINDOWS_ANNOTATION KMODE_PREFIX "windows"
/* The pod's video-memory budget per GPU (docs/kubernetes.md). */
#define KMODE_MEMORY_ANNOTATION KMODE_PREFIX "gpu-memory"

/* One libcurl socket in the loop. libcurl owns the fd. */
struct kfd {
	struct kfd *next;
	struct loop_watch w;
	struct agent *a;
};

/* What the agent remembers of a pod between passes, so a problem is told
 * once and not on every reconcile. Kept only for pods with something to
 * remember (an invalid annotation, TSGs), found by uid in a hash table
 * (kube_podstate.c), forgotten when the pod is deleted; at most
 * KUBE_MAX_PODS_DEFAULT of them. */
struct kpod {
	struct kpod *next; /* the next of the same hash bucket */
	char uid[40];
	char invalid[96];  /* the gpu.qos value an InvalidQoSClass Event named */
	char bad_windows[96]; /* the gpuqos.io/windows value an InvalidWindows Event named */
	char refused[160]; /* the last ControlRefused note */
	char capmiss[160]; /* the last CapabilityMissing note */
	char bad_memory[96]; /* the gpuqos.io/gpu-memory value an InvalidGPUMemory Event named */
	int mem_refused_said; /* a GPUMemoryRefused Event went for it */
};

struct kmode {
	struct kube_config cfg;
	struct kube_client *client;
	struct loop_timer timer;
	struct kfd *fds, *dead_fds;
	struct kpod **pods; /* hash buckets by uid */
	size_t npods, pod_buckets;
	int pods_full_logged;
	uint64_t synced_us; /* first full list applied (now_us), 0 before */
	uint64_t class_changes;
	struct ratelimit pods_full_log; /* "pod not taken in" */
	/* Publishing (kube_podstate.c), once a batch, visits the pods that
	 * changed, not every cached pod: the pods of the records the core
	 * queued in the batch (a TSG's decision, a TSG or process that came
	 * or went: struct agent.changes) and the pods the client changed since
	 * published_gen. publish_all asks for one pass over every cached pod
	 * (a list applied, the restart grace over). */
	uint64_t published_gen;
	unsigned gpuinfo_gen; /* gpuinfo_generation() at the last publishing: UUIDs */
	int publish_all, grace_over;
	uint64_t publish_passes, published_pods;
	/* pod-resources (kubelet), when built */
	struct podres *podres;
	struct loop_watch podres_w, inotify_w;
	void *devices; /* struct podres_list *, the last good answer */
	uint64_t podres_lists, podres_errors;
	char podres_error[512];
};

/* Starts the API client and the pod-resources client; -1 stops the start. */
int kmode_start(struct agent *a);
void kmode_stop(struct agent *a);
/* After each loop batch: frees the watches of sockets libcurl let go. */
void kmode_reap(struct agent *a);
/* Every reconcile tick: asks the kubelet again when due. */
void kmode_tick(struct agent *a);

/* What pod's annotations say, parsed once (kmode_pod_class and
 * kmode_pod_windows), as the facts the core takes (pod_set). */
void kmode_pod_facts(const struct agent *a, const struct kube_pod *pod, struct pod_facts *f);
/* The class a pod's annotation resolves to; *source "annotation" or
 * "default"; *invalid (if given) 1 when a gpu.qos value was refused: a
 * string other than the two, any value that is not a string, or
 * metadata.annotations that is not a map. */
int kmode_pod_class(const struct agent *a, const struct kube_pod *pod, enum class_source *source,
		    int *invalid);

/* A pod's own windows ask (gpuqos.io/windows, policy.h's
 * policy_window_ask_parse): *out WINDOW_ASK_NONE where it has none or
 * an invalid one; returns 1 when the value was refused (also one that
 * is not a string). */
int kmode_pod_windows(const struct kube_pod *pod, struct window_req *out);
/* Its gpuqos.io/gpu-memory in bytes (0: none); 1 when it is there but
 * not a size (common/quantity.c; *bytes is then 0), else 0. */
int kmode_pod_memory(const struct kube_pod *pod, uint64_t *bytes);
/* Process p's first refused allocation: a GPUMemoryRefused Warning Event
 * on its pod, once a pod (agent_hooks.mem_refused). */
void kmode_mem_refused(struct agent *a, struct proc *p, const struct mem_gpu *e);

/* kube_podstate.c: after every batch, writes the gpuqos.io/ annotations
 * of each pod whose records changed (only changes reach the API server)
 * and the Events of its TSGs' problems. */
void kmode_publish(struct agent *a);
/* kube_podstate.c: a pod's annotations changed or appeared (f: what they
 * say): an invalid gpu.qos or gpuqos.io/windows gets one Warning Event per
 * value. */
void kmode_note_annotation(struct agent *a, const struct kube_pod *pod, const struct pod_facts *f);
void kmode_forget_pod(struct agent *a, const char *uid);
void kmode_free_pods(struct kmode *k);

/* kube_podres.c: the pod-resources client (which devices each pod got). A
 * kubelet that cannot be reached is logged, never a reason to stop. */
int kmode_podres_start(struct agent *a);
void kmode_podres_stop(struct agent *a);
void kmode_podres_json(const struct agent *a, struct cJSON *o);
/* o.podDevices: the device ids the kubelet lists for pod (null: unknown). */
void kmode_podres_devices(const struct agent *a, const struct kube_pod *pod, struct cJSON *o);

/* The ctl view: agent.kubernetes, and each process's pod. */
void kmode_json(struct agent *a, struct cJSON *agent_obj);
void kmode_proc_json(struct agent *a, const struct proc *p, struct cJSON *o);
/* For metrics: p's pod namespace, name and container name; "" for what is
 * not known (standalone, no pod, not listed yet). */
void kmode_proc_pod(struct agent *a, const struct proc *p, const char **ns, const char **name,
		    const char **container);

#endif
