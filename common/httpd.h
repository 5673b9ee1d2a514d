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

/* What one listener lets its clients hold. libmicrohttpd's timeout is reset
 * by any byte, so a client that trickles a header byte at a time keeps its
 * connection for as long as it likes: the deadline is what ends it. A
 * request not answered deadline_ms after its connection opened (or the
 * previous request on it ended) is cut, so a trickling client holds a slot
 * for that long at most, and the pool outnumbers what a few addresses can
 * hold that way. */
struct httpd_limits {
	unsigned connections; /* at once, in all */
	unsigned per_ip;      /* at once from one address; 0: no limit of its own */
	unsigned timeout_s;   /* a connection silent this long is closed */
	unsigned deadline_ms; /* a request unanswered this long is cut; 0: none */
};

/* The two listeners each daemon runs (docs/metrics.md, "Limits"): the
 * metrics port, facing the pod network, and the health listener the
 * kubelet probes, with no per-address limit: the kubelet's own address is
 * the node's, which every host-network pod shares. */
extern const struct httpd_limits httpd_metrics_limits;
extern const struct httpd_limits httpd_health_limits;

/* One listener: a libmicrohttpd daemon with its own polling thread, and
 * the thread that cuts requests past their deadline. */
struct httpd;

struct httpd_listener {
	const char *what;    /* "metrics", "health": names it in the log */
	const char *address; /* HOST:PORT, :PORT, [IPV6]:PORT, "" or "off" */
	const struct httpd_route *routes; /* up to a NULL path; outlives it */
	const struct httpd_limits *limits;
};

/* Starts the listeners l[0..n) into out[0..n). Each serves its routes;
 * any method but GET and HEAD is answered 405, a request with a body
 * (Content-Length or Transfer-Encoding) 400, a path not in routes 404
 * naming the ones that are; libmicrohttpd's own messages go to the log as
 * warnings. An address that is off leaves out[i] NULL; one that cannot be
 * bound is logged and leaves it NULL too (the daemon runs without it). -1
 * with a sentence in err, and nothing started, for an address that cannot
 * be parsed. */
int httpd_listen(const struct httpd_listener *l, size_t n, struct httpd **out, char *err,
		 size_t errlen);

/* Stops h (NULL: nothing): its threads are joined, no request runs after. */
void httpd_stop(struct httpd *h);

/* The port h listens on (the one the kernel chose for port 0), or 0. */
unsigned httpd_port(const struct httpd *h);

/* Queue an answer of content type `type`: body is copied, freed or kept
 * as mode says (freed on failure too when MUST_FREE). */
enum MHD_Result httpd_reply(struct MHD_Connection *conn, unsigned code, const char *type,
			    char *body, size_t len, enum MHD_ResponseMemoryMode mode);

/* Queue a text/plain answer; text must outlive the response (a literal). */
enum MHD_Result httpd_reply_text(struct MHD_Connection *conn, unsigned code, const char *text);

#endif
