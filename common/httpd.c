/* SPDX-License-Identifier: Apache-2.0 */
/*
 * httpd.c - see httpd.h. Owns the address grammar, the listeners' options,
 * limits and deadlines, and the routing of a request to its path's
 * answer; does not own what the daemons serve.
 */
#include "common/httpd.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "common/log.h"

/* 40 slow clients from one address hold 8 metrics slots, and a scraper
 * elsewhere still gets its metrics; a scrape is answered well within its
 * 10 s. The kubelet's probes time out after 1 s: a probe's connection is
 * answered in microseconds, and one that has not sent its request within
 * 1 s is one the kubelet has given up on. */
const struct httpd_limits httpd_metrics_limits = { 64, 8, 5, 10000 };
const struct httpd_limits httpd_health_limits = { 64, 0, 2, 1000 };

/* A connection being served, in its listener's list from its start until
 * its deadline cuts it or it closes. Only the deadline thread and
 * libmicrohttpd's thread (its callbacks) touch the list, under mu. */
struct httpd_conn {
	struct httpd_conn *prev, *next;
	int fd;
	int listed;
	uint64_t deadline_ns;
};

struct httpd {
	struct MHD_Daemon *d;
	const struct httpd_limits *lim;
	pthread_mutex_t mu;
	pthread_cond_t cv; /* CLOCK_MONOTONIC: the list's head, or stop */
	pthread_t cutter;
	int cutter_started, stop;
	/* Ordered by deadline: every connection's deadline is the same time
	 * after its start or its last request's end, so it joins at the tail. */
	struct httpd_conn *head, *tail;
};

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

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void conn_unlink(struct httpd *h, struct httpd_conn *c)
{
	if (!c->listed)
		return;
	if (c->prev)
		c->prev->next = c->next;
	else
		h->head = c->next;
	if (c->next)
		c->next->prev = c->prev;
	else
		h->tail = c->prev;
	c->prev = c->next = NULL;
	c->listed = 0;
}

/* Under mu: c's deadline starts now. */
static void conn_arm(struct httpd *h, struct httpd_conn *c)
{
	conn_unlink(h, c);
	c->deadline_ns = mono_ns() + (uint64_t)h->lim->deadline_ms * 1000000ull;
	c->prev = h->tail;
	if (h->tail)
		h->tail->next = c;
	else
		h->head = c;
	h->tail = c;
	c->listed = 1;
	if (h->head == c)
		pthread_cond_signal(&h->cv);
}

/* The deadline's thread: shuts down the socket of each connection past
 * its deadline, which libmicrohttpd's thread then sees end and closes. The
 * fd is still the connection's: libmicrohttpd tells of a close (which
 * takes it out of the list, under mu) before it closes the socket. */
static void *conn_cutter(void *arg)
{
	struct httpd *h = arg;

	pthread_mutex_lock(&h->mu);
	while (!h->stop) {
		struct httpd_conn *c = h->head;
		uint64_t now = mono_ns();

		if (!c) {
			pthread_cond_wait(&h->cv, &h->mu);
		} else if (now >= c->deadline_ns) {
			shutdown(c->fd, SHUT_RDWR);
			conn_unlink(h, c);
		} else {
			struct timespec ts = { (time_t)(c->deadline_ns / 1000000000ull),
					       (long)(c->deadline_ns % 1000000000ull) };

			pthread_cond_timedwait(&h->cv, &h->mu, &ts);
		}
	}
	pthread_mutex_unlock(&h->mu);
	return NULL;
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
			  enum MHD_ConnectionNotificationCode toe)
{
	struct httpd *h = cls;
	struct httpd_conn *c = *socket_context;

	if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
		const union MHD_ConnectionInfo *fd =
			MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);

		c = fd ? calloc(1, sizeof(*c)) : NULL;
		*socket_context = c;
		if (!c) {
			/* Cannot be timed: not served. */
			if (fd)
				shutdown(fd->connect_fd, SHUT_RDWR);
			return;
		}
		c->fd = fd->connect_fd;
		pthread_mutex_lock(&h->mu);
		conn_arm(h, c);
		pthread_mutex_unlock(&h->mu);
		return;
	}
	if (!c)
		return;
	pthread_mutex_lock(&h->mu);
	conn_unlink(h, c);
	pthread_mutex_unlock(&h->mu);
	free(c);
	*socket_context = NULL;
}

/* A request answered: the next one on a kept-alive connection has a
 * deadline of its own. */
static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	struct httpd *h = cls;
	const union MHD_ConnectionInfo *sc =
		MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	struct httpd_conn *c = sc ? sc->socket_context : NULL;

	(void)con_cls;
	if (!c || toe != MHD_REQUEST_TERMINATED_COMPLETED_OK)
		return;
	pthread_mutex_lock(&h->mu);
	if (c->listed)
		conn_arm(h, c);
	pthread_mutex_unlock(&h->mu);
}

#define HTTPD_FLAGS (MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_USE_ERROR_LOG)

/* The logger comes first: libmicrohttpd reports problems with the options
 * after it through it, and warns on stderr when it is not first. */
static struct MHD_Daemon *httpd_daemon(struct httpd *h, const char *name, unsigned flags,
				       unsigned port, const struct httpd_route *routes,
				       const struct sockaddr *sa)
{
	const struct httpd_limits *lim = h->lim;
	void *cls = (void *)routes;

	if (sa)
		return MHD_start_daemon(flags, (uint16_t)port, NULL, NULL, httpd_on_request, cls,
					MHD_OPTION_EXTERNAL_LOGGER, httpd_log, (void *)name,
					MHD_OPTION_CONNECTION_LIMIT, lim->connections,
					MHD_OPTION_PER_IP_CONNECTION_LIMIT, lim->per_ip,
					MHD_OPTION_CONNECTION_TIMEOUT, lim->timeout_s,
					MHD_OPTION_NOTIFY_CONNECTION, on_connection, h,
					MHD_OPTION_NOTIFY_COMPLETED, on_completed, h,
					MHD_OPTION_SOCK_ADDR, sa, MHD_OPTION_END);
	return MHD_start_daemon(flags, (uint16_t)port, NULL, NULL, httpd_on_request, cls,
				MHD_OPTION_EXTERNAL_LOGGER, httpd_log, (void *)name,
				MHD_OPTION_CONNECTION_LIMIT, lim->connections,
				MHD_OPTION_PER_IP_CONNECTION_LIMIT, lim->per_ip,
				MHD_OPTION_CONNECTION_TIMEOUT, lim->timeout_s,
				MHD_OPTION_NOTIFY_CONNECTION, on_connection, h,
				MHD_OPTION_NOTIFY_COMPLETED, on_completed, h, MHD_OPTION_END);
}

static struct MHD_Daemon *httpd_bind(struct httpd *h, const char *name, const char *host,
				     unsigned port, const struct httpd_route *routes)
{
	struct addrinfo hints = { .ai_flags = AI_PASSIVE, .ai_socktype = SOCK_STREAM }, *ai = NULL;
	struct MHD_Daemon *d;
	int rc;

	if (!*host) {
		/* Every address: IPv6 and IPv4 where the host has both. */
		d = httpd_daemon(h, name, HTTPD_FLAGS | MHD_USE_DUAL_STACK, port, routes, NULL);
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
	d = httpd_daemon(h, name, HTTPD_FLAGS | (ai->ai_family == AF_INET6 ? MHD_USE_IPv6 : 0), port,
			 routes, ai->ai_addr);
	freeaddrinfo(ai);
	return d;
}

static void httpd_free(struct httpd *h)
{
	pthread_cond_destroy(&h->cv);
	pthread_mutex_destroy(&h->mu);
	free(h);
}

static struct httpd *httpd_new(const struct httpd_limits *lim)
{
	struct httpd *h = calloc(1, sizeof(*h));
	pthread_condattr_t ca;

	if (!h)
		return NULL;
	h->lim = lim;
	pthread_mutex_init(&h->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&h->cv, &ca);
	pthread_condattr_destroy(&ca);
	return h;
}

void httpd_stop(struct httpd *h)
{
	if (!h)
		return;
	if (h->d)
		MHD_stop_daemon(h->d); /* joins its thread, closing every connection */
	if (h->cutter_started) {
		pthread_mutex_lock(&h->mu);
		h->stop = 1;
		pthread_cond_signal(&h->cv);
		pthread_mutex_unlock(&h->mu);
		pthread_join(h->cutter, NULL);
	}
	httpd_free(h);
}

/* One listener, or NULL (logged) where it cannot be started. */
static struct httpd *httpd_start(const struct httpd_listener *l, const char *host, unsigned port)
{
	struct httpd *h = httpd_new(l->limits);
	int e;

	if (!h) {
		log_error("%s: out of memory", l->what);
		return NULL;
	}
	if (l->limits->deadline_ms) {
		e = pthread_create(&h->cutter, NULL, conn_cutter, h);
		if (e) {
			log_error("%s: cannot start its deadline's thread: %s", l->what, strerror(e));
			httpd_free(h);
			return NULL;
		}
		h->cutter_started = 1;
	}
	h->d = httpd_bind(h, l->what, host, port, l->routes);
	if (!h->d) {
		httpd_stop(h);
		return NULL;
	}
	return h;
}

int httpd_listen(const struct httpd_listener *l, size_t n, struct httpd **out, char *err,
		 size_t errlen)
{
	char host[200];
	unsigned port;

	for (size_t i = 0; i < n; i++) {
		out[i] = NULL;
		if (!httpd_address_off(l[i].address) &&
		    httpd_split_address(l[i].address, host, sizeof(host), &port) != 0) {
			snprintf(err, errlen, "%s address \"%s\": " HTTPD_ADDRESS_WANT, l[i].what,
				 l[i].address);
			return -1;
		}
	}
	for (size_t i = 0; i < n; i++) {
		char paths[200];
		size_t k = 0;

		if (httpd_address_off(l[i].address)) {
			log_info("%s: off", l[i].what);
			continue;
		}
		httpd_split_address(l[i].address, host, sizeof(host), &port);
		out[i] = httpd_start(&l[i], host, port);
		if (!out[i]) {
			log_error("%s: cannot serve on %s; running without it", l[i].what, l[i].address);
			continue;
		}
		paths[0] = '\0';
		for (const struct httpd_route *r = l[i].routes; r->path && k < sizeof(paths); r++)
			k += (size_t)snprintf(paths + k, sizeof(paths) - k, "%s%s",
					      r == l[i].routes ? "" : r[1].path ? ", " : " and ",
					      r->path);
		log_info("%s: serving %s on %s (port %u)", l[i].what, paths, l[i].address,
			 httpd_port(out[i]));
	}
	return 0;
}

unsigned httpd_port(const struct httpd *h)
{
	const union MHD_DaemonInfo *info =
		h && h->d ? MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT) : NULL;

	return info ? (unsigned)info->port : 0;
}
