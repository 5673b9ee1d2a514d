/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cgroup.h - process -> pod: what /proc/<pid>/cgroup says about the pod UID,
 * container id, container runtime and QoS class of a process, for cgroup v1,
 * v2 and hybrid hosts, the kubelet's cgroupfs and systemd drivers, and the
 * containerd, CRI-O and Docker spellings of a container cgroup.
 *
 * Owns: the parser (pure: text in, identity out, no I/O), a small reader of
 * /proc/<pid>/cgroup, and the cgroup v2 id of a cgroup directory (its inode,
 * the value bpf_get_current_cgroup_id() reports), so a cache can be keyed by
 * the id the eBPF tracer already has. Does not own the cache itself, pod
 * annotations or anything the kubelet says (podres.h).
 */
#ifndef GPUQOS_KUBENODE_CGROUP_H
#define GPUQOS_KUBENODE_CGROUP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define CGROUP_UID_LEN 36       /* 8-4-4-4-12; a static pod's 32-hex UID also fits */
#define CGROUP_CID_LEN 64       /* containerd, CRI-O and Docker ids: 64 hex digits */
#define CGROUP_PATH_MAX 1024    /* the unified ("0::") path kept for the id lookup */
#define CGROUP_TEXT_MAX (64 * 1024) /* larger /proc/<pid>/cgroup text is refused */

enum cgroup_kind {
	CGROUP_MALFORMED = -1, /* refused: see why */
	CGROUP_NOT_POD = 0,    /* system.slice, user.slice, init, the QoS cgroups */
	CGROUP_POD_ONLY = 1,   /* in a pod's cgroup but not in a container (crio-conmon) */
	CGROUP_CONTAINER = 2,  /* pod UID and container id both known */
};

enum cgroup_runtime {
	CGROUP_RT_UNKNOWN = 0, /* cgroupfs driver: a bare id names no runtime */
	CGROUP_RT_CONTAINERD,
	CGROUP_RT_CRIO,
	CGROUP_RT_DOCKER,
};

enum cgroup_qos {
	CGROUP_QOS_NONE = 0, /* not a pod */
	CGROUP_QOS_GUARANTEED, /* no QoS level in the path */
	CGROUP_QOS_BURSTABLE,
	CGROUP_QOS_BESTEFFORT,
};

enum cgroup_mode {
	CGROUP_MODE_V1 = 1, /* only "N:controllers:/path" lines */
	CGROUP_MODE_V2,     /* only the "0::/path" line */
	CGROUP_MODE_HYBRID, /* both */
};

struct cgroup_info {
	enum cgroup_kind kind;
	enum cgroup_runtime runtime;
	enum cgroup_qos qos;
	enum cgroup_mode mode;
	int from_version;                   /* 1 or 2: the line the identity was read from */
	char pod_uid[CGROUP_UID_LEN + 1];   /* lower case, '_' normalised to '-' */
	char container_id[CGROUP_CID_LEN + 1];
	char unified_path[CGROUP_PATH_MAX]; /* the "0::" path, "" if none or too long */
	const char *why;                    /* static text: why MALFORMED or NOT_POD */
};

/* Parses the text of /proc/<pid>/cgroup (len bytes, need not end in NUL).
 * Never reads past len; fills *out and returns out->kind. Every line must
 * have the kernel's shape ("id:controllers:/path"); lines that name
 * different pods or containers are refused. */
enum cgroup_kind cgroup_parse(const char *text, size_t len, struct cgroup_info *out);

/* Reads /proc/<pid>/cgroup and parses it. Returns the kind, or -1 with
 * errno set (ESRCH when the process is gone, EFBIG when the text exceeds
 * CGROUP_TEXT_MAX) and out->why naming the failure. */
int cgroup_read_pid(pid_t pid, struct cgroup_info *out);

/* Same for any file holding that text (tests, fixtures). */
int cgroup_read_file(const char *path, struct cgroup_info *out);

/* Where the cgroup v2 hierarchy is mounted: /sys/fs/cgroup on a unified
 * host, /sys/fs/cgroup/unified on a hybrid one. 0, or -1 with errno
 * (ENOENT: no cgroup v2 mount at either place). */
int cgroup_v2_root(char *buf, size_t len);

/* The cgroup v2 id of the cgroup at `path` (a unified path, "/kubepods/...")
 * below the v2 mount `root`: the directory's inode number, which is the id
 * bpf_get_current_cgroup_id() returns on 64-bit kernels. 0, or -1 with
 * errno: EINVAL for a path that is not absolute or has "." or ".."
 * components, ENOTDIR, ENOENT, EXDEV when root is not a cgroup v2 mount. */
int cgroup_inode_of_path(const char *root, const char *path, uint64_t *id);

/* Whether this process's cgroup v2 id (what the eBPF tracer reports) can
 * key a cache of its pod and container: only when the identity was read
 * from the v2 line. On a hybrid host whose runtime leaves processes at the
 * v2 root ("0::/"), every container shares one id. */
static inline int cgroup_v2_keyable(const struct cgroup_info *ci)
{
	return ci->kind >= CGROUP_POD_ONLY && ci->from_version == 2 && ci->unified_path[0] == '/';
}

const char *cgroup_kind_name(enum cgroup_kind k);
const char *cgroup_runtime_name(enum cgroup_runtime r);
const char *cgroup_qos_name(enum cgroup_qos q);
const char *cgroup_mode_name(enum cgroup_mode m);

#endif
