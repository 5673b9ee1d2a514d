/* SPDX-License-Identifier: Apache-2.0 */
/*
 * server.h - one device-plugin gRPC server: one resource, one unix socket
 * in the kubelet's device-plugin directory, one completion-queue thread
 * serving GetDevicePluginOptions, ListAndWatch, GetPreferredAllocation,
 * Allocate and PreStartContainer.
 *
 * Owns: the socket, the gRPC server and its calls (at most
 * PSERVER_MAX_CALLS unary ones in flight), the open ListAndWatch streams
 * (one send in flight each; a new device generation is sent once the
 * previous send finished, so bursts of changes coalesce; when all slots
 * are taken a new stream is refused, but the kubelet's, the first after a
 * registration, ends the oldest other one and keeps its slot: a restarted
 * kubelet always gets its list, and no other client ends it). Does not own
 * the device table (struct pshared, written by main.c and health.c) or
 * registration (register.c).
 */
#ifndef GPUQOS_PLUGIN_SERVER_H
#define GPUQOS_PLUGIN_SERVER_H

#include <pthread.h>
#include <stdint.h>

#include "plugin/devices.h"

#define PSERVER_MAX_MSG (1u << 20)  /* larger requests get RESOURCE_EXHAUSTED */
#define PSERVER_MAX_STREAMS 8       /* ListAndWatch streams open at once; past
				     * it a new one is refused, but for the
				     * kubelet's (pserver_expect_kubelet) */
/* How long after a registration starts the next stream is the kubelet's. */
#define PSERVER_KUBELET_WINDOW_MS 30000
#define PSERVER_MAX_CALLS 128       /* other calls in flight; more get
				     * RESOURCE_EXHAUSTED at once */
#define PSERVER_TICK_MS 100         /* how soon a stream sees a new generation */
#define PSERVER_STALL_MS 30000      /* a stream whose kubelet reads nothing is ended */

/* The GPU table every server reads; gen grows on every change. */
struct pshared {
	pthread_mutex_t mu;
	struct pgpus gpus;
	uint64_t gen;
};

struct pserver;

/* Binds <dir>/<endpoint> (replacing a stale socket) and starts serving.
 * NULL with err filled on failure. */
struct pserver *pserver_start(const struct plugin_config *cfg, const struct presource *res,
			      struct pshared *sh, char *err, size_t errlen);

/* Ends every call (streams get UNAVAILABLE), joins the thread, removes
 * the socket when it is still ours. */
void pserver_stop(struct pserver *s);
/* Called just before Register: the next ListAndWatch, within
 * PSERVER_KUBELET_WINDOW_MS, is the kubelet's (server.c, start_stream). */
void pserver_expect_kubelet(struct pserver *s);

/* The socket's file name inside the directory (RegisterRequest.endpoint)
 * and its full path. */
const char *pserver_endpoint(const struct pserver *s);
const char *pserver_socket(const struct pserver *s);

/* "gpuqos.io/gpu" -> "gpuqos.io_gpu.sock". */
void pserver_endpoint_name(const char *resource, char *out, size_t len);

#endif
