/* SPDX-License-Identifier: Apache-2.0 */
/*
 * httpd.c - see httpd.h. Owns the address grammar, the daemon's options
 * and limits, and the routing of a request to its path's answer; does not
 * own what the daemons serve.
 */
#include "common/httpd.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "common/log.h"

int httpd_address_off(const char *s)
{
	return !s[0] || strcmp(s, "off") == 0;
}

int httpd_split_address(const char *s, char *host, size_t hlen, unsigned *port)
{
	const char *colon = strrchr(s, ':');
	char *end;
	unsigned long p;
	size_t n;

	if (!colon)
		return -1;
	p = strtoul(colon + 1, &end, 10);
	if (colon[1] == '\0' || *end || p > 65535)
		return -1;
	n = (size_t)(colon - s);
	if (n >= 2 && s[0] == '[' && s[n - 1] == ']') {
		s++;
		n -= 2;
	}
	if (n >= hlen)
		return -1;
	memcpy(host, s, n);
	host[n] = '\0';
	*port = (unsigned)p;
	return 0;
}

/* Most of libmicrohttpd's messages are about what a client did (closed
 * mid-request, came over a limit): at most one a second reaches the log,
 * so that no client fills it, and the next one says how many were left
 * out. Both daemons' threads come here. */
static _Atomic long httpd_log_next_s;
static atomic_uint httpd_log_dropped;

static int httpd_log_turn(void)
{
	struct timespec ts;
	long next = atomic_load(&httpd_log_next_s);

	clock_gettime(CLOCK_MONOTONIC, &ts);
	if (ts.tv_sec < next ||
	    !atomic_compare_exchange_strong(&httpd_log_next_s, &next, (long)ts.tv_sec + 1)) {
		atomic_fetch_add(&httpd_log_dropped, 1);
		return 0;
	}
	return 1;
}

/* cls is the daemon's name (a literal). */
static void __attribute__((format(printf, 2, 0))) httpd_log(void *cls, const char *fmt, va_list ap)
{
	char msg[512];
	unsigned dropped;
	size_t n;

	if (!httpd_log_turn())
		return;
	dropped = atomic_exchange(&httpd_log_dropped, 0);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	n = strlen(msg);
	while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
		msg[--n] = '\0';
	if (dropped)
		log_warn("%s: %s (and %u more messages of the HTTP server left out)",
			 (const char *)cls, msg, dropped);
	else
		log_warn("%s: %s", (const char *)cls, msg);
}

enum MHD_Result httpd_reply(struct MHD_Connection *conn, unsigned code, const char *type,
			    char *body, size_t len, enum MHD_ResponseMemoryMode mode)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(len, body, mode);
	enum MHD_Result rc;

	if (!r) {
		if (mode == MHD_RESPMEM_MUST_FREE)
			free(body);
		return MHD_NO;
	}
	MHD_add_response_header(r, "Content-Type", type);
	rc = MHD_queue_response(conn, code, r);
	MHD_destroy_response(r);
	return rc;
}

#define HTTPD_TEXT "text/plain; charset=utf-8"

enum MHD_Result httpd_reply_text(struct MHD_Connection *conn, unsigned code, const char *text)
{
	return httpd_reply(conn, code, HTTPD_TEXT, (char *)text, strlen(text), MHD_RESPMEM_PERSISTENT);
}

static enum MHD_Result httpd_not_found(struct MHD_Connection *conn,
				       const struct httpd_route *routes)
{
	char text[256];
	size_t n = (size_t)snprintf(text, sizeof(text), "not found: try");

	for (const struct httpd_route *r = routes; r->path && n < sizeof(text); r++)
		n += (size_t)snprintf(text + n, sizeof(text) - n, "%s %s", r == routes ? "" : ",",
				      r->path);
	if (n < sizeof(text) - 1)
		strcpy(text + n, "\n");
	return httpd_reply(conn, MHD_HTTP_NOT_FOUND, HTTPD_TEXT, text, strlen(text),
			   MHD_RESPMEM_MUST_COPY);
}

/* A GET has no body; one that says it has is refused before any of it is
 * read (libmicrohttpd calls first with the headers alone, upload_size 0). */
static int httpd_has_body(struct MHD_Connection *conn)
{
	const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
						     MHD_HTTP_HEADER_CONTENT_LENGTH);

	return (cl && strspn(cl, "0") != strlen(cl)) ||
	       MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
					   MHD_HTTP_HEADER_TRANSFER_ENCODING) != NULL;
}

static enum MHD_Result httpd_on_request(void *cls, struct MHD_Connection *conn, const char *url,
					const char *method, const char *version,
					const char *upload, size_t *upload_size, void **con_cls)
{
	const struct httpd_route *routes = cls;

	(void)version;
	(void)upload;
	(void)con_cls;
	if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
		return httpd_reply_text(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "GET only\n");
	if (*upload_size)
		return MHD_NO; /* a body past the headers' check: drop the connection */
	if (httpd_has_body(conn))
		return httpd_reply_text(conn, MHD_HTTP_BAD_REQUEST, "a GET has no body\n");
	for (const struct httpd_route *r = routes; r->path; r++)
		if (strcmp(url, r->path) == 0)
			return r->reply(conn);
	return httpd_not_found(conn, routes);
}

#define HTTPD_FLAGS (MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_USE_ERROR_LOG)

/* The logger comes first: libmicrohttpd reports problems with the options
 * after it through it, and warns on stderr when it is not first. */
static struct MHD_Daemon *httpd_daemon(const char *name, unsigned flags, unsigned port,
				       const struct httpd_route *routes,
				       const struct httpd_limits *lim, const struct sockaddr *sa)
{
	void *cls = (void *)routes;

	if (sa)
		return MHD_start_daemon(flags, (uint16_t)port, NULL, NULL, httpd_on_request, cls,
					MHD_OPTION_EXTERNAL_LOGGER, httpd_log, (void *)name,
					MHD_OPTION_CONNECTION_LIMIT, lim->connections,
					MHD_OPTION_PER_IP_CONNECTION_LIMIT, lim->per_ip,
					MHD_OPTION_CONNECTION_TIMEOUT, lim->timeout_s,
					MHD_OPTION_SOCK_ADDR, sa, MHD_OPTION_END);
	return MHD_start_daemon(flags, (uint16_t)port, NULL, NULL, httpd_on_request, cls,
				MHD_OPTION_EXTERNAL_LOGGER, httpd_log, (void *)name,
				MHD_OPTION_CONNECTION_LIMIT, lim->connections,
				MHD_OPTION_PER_IP_CONNECTION_LIMIT, lim->per_ip,
				MHD_OPTION_CONNECTION_TIMEOUT, lim->timeout_s, MHD_OPTION_END);
}

struct MHD_Daemon *httpd_start(const char *name, const char *host, unsigned port,
			       const struct httpd_route *routes, const struct httpd_limits *lim)
{
	struct addrinfo hints = { .ai_flags = AI_PASSIVE, .ai_socktype = SOCK_STREAM }, *ai = NULL;
	struct MHD_Daemon *d;
	int rc;

	if (!*host) {
		/* Every address: IPv6 and IPv4 where the host has both. */
		d = httpd_daemon(name, HTTPD_FLAGS | MHD_USE_DUAL_STACK, port, routes, lim, NULL);
		if (d)
			return d;
		host = "0.0.0.0"; /* no IPv6 on this host */
	}
	if ((rc = getaddrinfo(host, NULL, &hints, &ai)) != 0) {
		log_error("%s: address %s: %s", name, host, gai_strerror(rc));
		return NULL;
	}
	if (ai->ai_family == AF_INET)
		((struct sockaddr_in *)ai->ai_addr)->sin_port = htons((uint16_t)port);
	else
		((struct sockaddr_in6 *)ai->ai_addr)->sin6_port = htons((uint16_t)port);
	d = httpd_daemon(name, HTTPD_FLAGS | (ai->ai_family == AF_INET6 ? MHD_USE_IPv6 : 0), port,
			 routes, lim, ai->ai_addr);
	freeaddrinfo(ai);
	return d;
}

unsigned httpd_port(struct MHD_Daemon *d)
{
	const union MHD_DaemonInfo *info = d ? MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT) : NULL;

	return info ? (unsigned)info->port : 0;
}
