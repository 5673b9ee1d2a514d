/* SPDX-License-Identifier: Apache-2.0 */
/*
 * devices.h - what the device plugin advertises and answers, as pure
 * functions of the configuration and the GPU table: the device ids of each
 * resource, the ListAndWatch list, the checks on a request's ids, the
 * Allocate response (GPU visibility and preempt-agent injection) and the
 * preferred allocation.
 *
 * Owns: the device-id scheme (`<GPU-UUID>::<n>` for shares, `qos-<n>` for
 * inject), the decision what a container gets. Does not own gRPC (server.c),
 * GPU discovery (common/rmgpus.c), health (health.c) or where the preempt
 * library is installed (resolved by the caller at Allocate time).
 *
 * Messages built here live in a struct parena; free it after packing.
 */
#ifndef GPUQOS_PLUGIN_DEVICES_H
#define GPUQOS_PLUGIN_DEVICES_H

#include <stddef.h>
#include <stdint.h>

#include "common/preemptlib.h"
#include "plugin/config.h"
#include "deviceplugin_v1beta1.pb-c.h"

#define PDEV_MAX_GPUS 32
#define PDEV_UUID_MAX 48
#define PDEV_ID_MAX 64        /* the kubelet's limit is 63 characters */
#define PDEV_MAX_IDS 4096     /* ids in one request, across its containers */
#define PDEV_MAX_CONTAINERS 64

/* Where the preempt agent appears inside a container. */
#define PDEV_CONTAINER_LIB_DIR PREEMPTLIB_CONTAINER_DIR
#define PDEV_CONTAINER_LIB PREEMPTLIB_CONTAINER_LIB
#define PDEV_CONTAINER_SOCKET_DIR "/run/gpuqos" /* abi/gq_proto.h GQ_DEFAULT_SOCKET's dir */

struct pgpu {
	char uuid[PDEV_UUID_MAX];
	char pci_bus_id[24];
	int minor;   /* /dev/nvidia<minor> */
	int numa;    /* -1: none reported */
	int healthy;
};

struct pgpus {
	struct pgpu gpu[PDEV_MAX_GPUS];
	size_t n;
};

enum pres_kind { PRES_BE, PRES_LC, PRES_INJECT };

/* One advertised resource: one plugin socket, one registration. */
struct presource {
	enum pres_kind kind;
	const char *name;     /* points into the config */
	unsigned per_gpu;     /* replicas (BE, LC) */
	unsigned count;       /* inject devices */
};

/* The resources of a configuration (1 to 2); returns how many. */
size_t pres_from_config(const struct plugin_config *c, struct presource out[2]);

/* All strings and sub-messages of one built message. */
struct parena {
	void **p;
	size_t n, cap;
	int oom;
};
void parena_free(struct parena *a);

/* The full list (ids, health, NUMA node). NULL when out of memory. */
V1beta1__ListAndWatchResponse *pdev_list(const struct presource *r, const struct pgpus *g,
					 struct parena *a);

/* Which GPU an id names (index into g; 0 for inject ids), or -1 when the id
 * is not one of r's. */
int pdev_id_gpu(const struct presource *r, const struct pgpus *g, const char *id);

/* What Allocate needs from the host, read by the caller when it runs. */
struct pinject {
	const char *lib_dir;    /* the resolved versioned dir, or NULL: not installed */
	int have_ld_so_preload; /* lib_dir holds a generated ld.so.preload */
};

/* Builds the response for req, or returns NULL with why filled (unknown
 * id, an id given twice in one container or to two, an empty request or
 * container, too many ids). */
V1beta1__AllocateResponse *pdev_allocate(const struct plugin_config *c, const struct presource *r,
					 const struct pgpus *g, const struct pinject *inj,
					 const V1beta1__AllocateRequest *req, struct parena *a,
					 char *why, size_t whylen);

V1beta1__PreferredAllocationResponse *
pdev_preferred(const struct plugin_config *c, const struct presource *r, const struct pgpus *g,
	       const V1beta1__PreferredAllocationRequest *req, struct parena *a, char *why,
	       size_t whylen);

#endif
