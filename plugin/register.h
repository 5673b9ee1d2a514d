/* SPDX-License-Identifier: Apache-2.0 */
/*
 * register.h - Registration.Register with the kubelet: tells it a plugin
 * serves resource_name on <device-plugin dir>/<endpoint>.
 *
 * Owns: the one call and its channel (made fresh for every call, so a
 * restarted kubelet is reached at once and not after gRPC's reconnect
 * backoff). Does not own when to register or retry (main.c).
 */
#ifndef GPUQOS_PLUGIN_REGISTER_H
#define GPUQOS_PLUGIN_REGISTER_H

#include <stddef.h>

#define PREG_API_VERSION "v1beta1"
#define PREG_DEADLINE_MS 5000

/* Blocks up to PREG_DEADLINE_MS (waiting for the kubelet's socket to
 * accept). 0, or -1 with err naming the socket and the gRPC status. */
int preg_register(const char *kubelet_sock, const char *endpoint, const char *resource,
		  int preferred_allocation, char *err, size_t errlen);

#endif
