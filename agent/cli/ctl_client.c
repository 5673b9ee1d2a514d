/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ctl_client.c - one request/answer exchange with gpuqos-agent's control
 * socket: connect, write one line, read one line, all under one deadline so
 * that a stuck agent can never hang the command line. Owns the socket and
 * the raw answer bytes; JSON and presentation live in the callers.
 */
#include "agent/cli/ctl_client.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

__attribute__((format(printf, 3, 4)))
static void say(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

static long long now_ms(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
		return 0; /* cannot happen for CLOCK_MONOTONIC; 0 only shortens waits */
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Milliseconds left before `deadline`, never negative. */
static int left_ms(long long deadline)
{
	long long left = deadline - now_ms();

	return left > 0 ? (int)left : 0;
}

/* Returns 0 with *fd_out set, or an errno. */
static int ctl_connect(const char *path, int timeout_ms, int *fd_out)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timeval tv = { timeout_ms / 1000, (timeout_ms % 1000) * 1000 };
	int fd, e, fl;

	if (strlen(path) >= sizeof(sa.sun_path))
		return ENAMETOOLONG;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return errno;
	/* connect() to a unix socket whose backlog is full waits for room;
	 * SO_SNDTIMEO bounds that wait (it ends with EAGAIN). */
	if (setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) != 0 ||
	    connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		e = errno;
		close(fd);
		return e;
	}
	fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0) {
		e = errno;
		close(fd);
		return e;
	}
	*fd_out = fd;
	return 0;
}

/* Waits for `events` on fd; returns 1 ready, 0 timed out, -1 error. */
static int wait_fd(int fd, short events, long long deadline)
{
	struct pollfd p = { .fd = fd, .events = events };
	int n;

	do {
		n = poll(&p, 1, left_ms(deadline));
	} while (n < 0 && errno == EINTR);
	return n;
}

static enum ctl_rc send_all(int fd, const char *buf, size_t len, long long deadline,
			    char *err, size_t errlen, int *err_no)
{
	size_t off = 0;

	while (off < len) {
		int w = wait_fd(fd, POLLOUT, deadline);
		ssize_t n;

		if (w <= 0) {
			*err_no = w < 0 ? errno : ETIMEDOUT;
			say(err, errlen, "sending the request: %s",
			    w < 0 ? strerror(errno) : "timed out");
			return CTL_FAILED;
		}
		/* MSG_NOSIGNAL: an agent that hangs up must not kill us with SIGPIPE. */
		n = send(fd, buf + off, len - off, MSG_NOSIGNAL);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (n < 0) {
			*err_no = errno;
			say(err, errlen, "sending the request: %s", strerror(errno));
			return CTL_FAILED;
		}
		off += (size_t)n;
	}
	return CTL_OK;
}

/* Makes room for at least one more read; returns 0 or -1 (too big / OOM). */
static int grow(struct ctl_answer *a, size_t *cap)
{
	char *p;
	size_t ncap;

	if (a->len + 1 < *cap)
		return 0;
	if (*cap >= CTL_ANSWER_MAX)
		return -1;
	ncap = *cap ? *cap * 2 : 4096;
	p = realloc(a->line, ncap);
	if (!p)
		return -1;
	a->line = p;
	*cap = ncap;
	return 0;
}

/* Reads one read's worth; returns 1 more to read, 0 done, -1 failed. */
static int recv_some(int fd, struct ctl_answer *a, size_t *cap, long long deadline,
		     char *err, size_t errlen, int *err_no)
{
	int w = wait_fd(fd, POLLIN, deadline);
	ssize_t n;
	char *nl;

	if (w <= 0) {
		*err_no = w < 0 ? errno : ETIMEDOUT;
		if (w < 0)
			say(err, errlen, "waiting for the answer: %s", strerror(errno));
		else
			say(err, errlen, "timed out waiting for the answer (%zu bytes received)", a->len);
		return -1;
	}
	if (grow(a, cap) != 0) {
		*err_no = EMSGSIZE;
		say(err, errlen, "answer is larger than %u bytes", CTL_ANSWER_MAX);
		return -1;
	}
	n = recv(fd, a->line + a->len, *cap - a->len - 1, 0);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return 1;
	if (n < 0) {
		*err_no = errno;
		say(err, errlen, "reading the answer: %s", strerror(errno));
		return -1;
	}
	if (n == 0)
		return 0; /* the agent closed: whatever we have is the answer */
	nl = memchr(a->line + a->len, '\n', (size_t)n);
	a->len += (size_t)n;
	if (!nl)
		return 1;
	/* One answer per connection: anything after the newline is ignored. */
	a->len = (size_t)(nl - a->line);
	a->complete = 1;
	return 0;
}

static enum ctl_rc recv_line(int fd, struct ctl_answer *a, long long deadline,
			     char *err, size_t errlen, int *err_no)
{
	size_t cap = 0;
	int r;

	do {
		r = recv_some(fd, a, &cap, deadline, err, errlen, err_no);
	} while (r > 0);
	if (r < 0)
		return CTL_FAILED;
	if (a->len == 0 && !a->complete) {
		say(err, errlen, "the agent closed the connection without answering");
		return CTL_FAILED;
	}
	if (grow(a, &cap) != 0) { /* only an empty answer can lack room here */
		*err_no = ENOMEM;
		say(err, errlen, "out of memory");
		return CTL_FAILED;
	}
	a->line[a->len] = '\0';
	return CTL_OK;
}

enum ctl_rc ctl_exchange(const char *path, const char *request, int timeout_ms,
			 struct ctl_answer *ans, char *err, size_t errlen, int *err_no)
{
	long long deadline = now_ms() + timeout_ms;
	enum ctl_rc rc;
	int fd = -1, e;

	memset(ans, 0, sizeof(*ans));
	*err_no = 0;
	e = ctl_connect(path, timeout_ms, &fd);
	if (e != 0) {
		*err_no = e;
		say(err, errlen, "cannot connect to %s: %s", path,
		    e == EAGAIN ? "the agent did not accept the connection in time" : strerror(e));
		return CTL_UNREACHABLE;
	}
	rc = send_all(fd, request, strlen(request), deadline, err, errlen, err_no);
	if (rc == CTL_OK)
		rc = recv_line(fd, ans, deadline, err, errlen, err_no);
	/* The exchange is over either way; a close error changes nothing. */
	(void)close(fd);
	if (rc != CTL_OK) {
		free(ans->line);
		memset(ans, 0, sizeof(*ans));
	}
	return rc;
}
