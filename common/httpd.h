/* SPDX-License-Identifier: Apache-2.0 */
/*
 * httpd.h - the HTTP server plumbing the node agent's and the device
 * plugin's metrics and health endpoints share (libmicrohttpd): the listen
 * address they accept, the limits a daemon keeps its clients to and
 * starting it. What is served is each caller's own.
 */
#ifndef GPUQOS_COMMON_HTTPD_H
#define GPUQOS_COMMON_HTTPD_H

#include <stddef.h>

#include <microhttpd.h>

/* The one sentence every caller gives for an address it refuses. */
#define HTTPD_ADDRESS_WANT "want HOST:PORT, :PORT, [IPV6]:PORT or off"

/* Serving is off: the address is empty or "off". */
int httpd_address_off(const char *s);

/* "HOST:PORT", ":PORT", "[V6]:PORT" into host ("" any) and port. 0, or -1
 * for anything else (no port, a port over 65535, a host of hlen or more
 * bytes). */
int httpd_split_address(const char *s, char *host, size_t hlen, unsigned *port);

/* A path served and what answers a GET or HEAD of it. */
struct httpd_route {
	const char *path;
	enum MHD_Result (*reply)(struct MHD_Connection *conn);
};

/* What one daemon lets its clients hold. A client that trickles a header
 * byte every few seconds keeps its connection (the timeout is reset by any
 * byte), so the timeout alone does not free slots: the per-address limit
 * keeps one client from taking them all, and whatever must answer while
 * the port is full (the kubelet's probes) gets a daemon of its own. */
struct httpd_limits {
	unsigned connections; /* at once, in all */
	unsigned per_ip;      /* at once from one address; 0: no limit of its own */
	unsigned timeout_s;   /* a connection silent this long is closed */
};

/* A daemon with its own polling thread serving routes (up to an entry
 * whose path is NULL; the array must outlive the daemon) on host:port
 * (host "" means every address, IPv6 and IPv4 where the host has both)
 * within lim. Any method but GET and HEAD is answered 405, a request with
 * a body (Content-Length or Transfer-Encoding) 400, a path not in routes
 * 404 naming the ones that are. name says which server in the log, where
 * libmicrohttpd's own messages go as warnings. NULL (logged) when it
 * cannot. */
struct MHD_Daemon *httpd_start(const char *name, const char *host, unsigned port,
			       const struct httpd_route *routes, const struct httpd_limits *lim);

/* The port d listens on (the one the kernel chose for port 0), or 0. */
unsigned httpd_port(struct MHD_Daemon *d);

/* Queue an answer of content type `type`: body is copied, freed or kept
 * as mode says (freed on failure too when MUST_FREE). */
enum MHD_Result httpd_reply(struct MHD_Connection *conn, unsigned code, const char *type,
			    char *body, size_t len, enum MHD_ResponseMemoryMode mode);

/* Queue a text/plain answer; text must outlive the response (a literal). */
enum MHD_Result httpd_reply_text(struct MHD_Connection *conn, unsigned code, const char *text);

#endif
