// SPDX-License-Identifier: Apache-2.0
/*
 * tsgtrace_main.c - gpuqos-tsgtrace, the debugging CLI of the RM tracer:
 * prints RM events as JSON lines, or dumps the pinned live tables.
 *
 * Owns: argument parsing, JSON output, a one-fd-per-source epoll loop (the
 * shape the node agent's loop has). Does not own: loading, pinning or
 * decoding (tsgtrace.c, tsgtrace.bpf.c).
 *
 *   gpuqos-tsgtrace [--pin-dir DIR] [--mode auto|tracepoint|tp_btf] [--pid N]
 *                   [--duration S] [--count N] [--detach-on-close]
 *                   [--report-failures] [--test-verifier-reject]
 *                   [--test-ring-bytes N]
 *   gpuqos-tsgtrace [--pin-dir DIR] --dump      live TSGs, channels, clients, counters
 *   gpuqos-tsgtrace [--pin-dir DIR] --unpin     detach and drop every pin
 *
 * The first line of a tracing run is {"ready":...}: the programs are
 * attached from then on. SIGINT/SIGTERM end the run after draining the ring
 * and printing {"counters":...}.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include "abi/rm_abi.h"
#include "bpf/tsgtrace_api.h"

static const char *type_name(unsigned int type)
{
	static const char *const names[TT_EV_MAX] = {
		[TT_EV_CLIENT] = "client",       [TT_EV_DEVICE] = "device",
		[TT_EV_TSG] = "tsg",             [TT_EV_CHANNEL] = "channel",
		[TT_EV_FREE] = "free",           [TT_EV_TIMESLICE] = "timeslice",
		[TT_EV_INTERLEAVE] = "interleave", [TT_EV_EXIT] = "exit",
		[TT_EV_CHANNEL_STATE] = "channel_state",
	};

	return type < TT_EV_MAX && names[type] ? names[type] : "unknown";
}

static const char *call_name(unsigned int call)
{
	switch (call) {
	case RM_CALL_ALLOC64:
		return "nvos64";
	case RM_CALL_ALLOC21:
		return "nvos21";
	case RM_CALL_CONTROL:
		return "nvos54";
	case RM_CALL_FREE:
		return "nvos00";
	default:
		return "";
	}
}

/* comm is whatever the process named itself: escape it for JSON. */
static void put_json_str(const char *s, size_t max)
{
	size_t i;

	putchar('"');
	for (i = 0; i < max && s[i]; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c < 0x20 || c >= 0x7f)
			printf("\\u%04x", c);
		else
			putchar(c);
	}
	putchar('"');
}

static void put_u32_or_null(const char *name, unsigned int v)
{
	if (v == TT_UNKNOWN)
		printf(",\"%s\":null", name);
	else
		printf(",\"%s\":%u", name, v);
}

struct run {
	unsigned long long seen;
	unsigned long long max;
};

static int print_event(void *ctx, const struct tt_event *ev)
{
	struct run *r = ctx;

	printf("{\"type\":\"%s\",\"ts_ns\":%llu,\"tgid\":%u,\"tid\":%u,\"comm\":", type_name(ev->type),
	       (unsigned long long)ev->ts_ns, ev->tgid, ev->tid);
	put_json_str(ev->comm, sizeof(ev->comm));
	printf(",\"cgroup\":%llu,\"fd\":%d", (unsigned long long)ev->cgroup_id, ev->fd);
	if (ev->type != TT_EV_EXIT) {
		printf(",\"client\":\"0x%08x\",\"parent\":\"0x%08x\",\"object\":\"0x%08x\","
		       "\"class\":\"0x%04x\",\"status\":\"0x%02x\",\"form\":\"%s\",\"xfer\":%s,"
		       "\"owner_tgid\":%u,\"foreign\":%s",
		       ev->hClient, ev->hParent, ev->hObject, ev->hClass, ev->status,
		       call_name(ev->call), ev->flags & TT_F_XFER ? "true" : "false", ev->owner_tgid,
		       ev->flags & TT_F_FOREIGN ? "true" : "false");
		put_u32_or_null("engineType", ev->engine_type);
		put_u32_or_null("deviceId", ev->device_id);
	}
	if (ev->type == TT_EV_TIMESLICE || ev->type == TT_EV_INTERLEAVE || ev->type == TT_EV_EXIT ||
	    ev->type == TT_EV_CHANNEL_STATE)
		printf(",\"value\":%llu", (unsigned long long)ev->value);
	printf("}\n");
	r->seen++;
	return 0;
}

static int print_tsg(void *ctx, const struct tt_obj_key *k, const struct tt_tsg_val *v)
{
	printf("{\"kind\":\"tsg\",\"tgid\":%u,\"client\":\"0x%08x\",\"tsg\":\"0x%08x\",\"fd\":%d,"
	       "\"device\":\"0x%08x\"",
	       k->tgid, k->hClient, k->handle, v->fd, v->hDevice);
	put_u32_or_null("deviceId", v->device_id);
	put_u32_or_null("engineType", v->engine_type);
	if (v->flags & TT_TSG_TIMESLICE_SET)
		printf(",\"timesliceUs\":%llu", (unsigned long long)v->timeslice_us);
	else
		printf(",\"timesliceUs\":null");
	if (v->flags & TT_TSG_INTERLEAVE_SET)
		printf(",\"interleave\":%u", v->interleave);
	else
		printf(",\"interleave\":null");
	printf(",\"cgroup\":%llu,\"created_ns\":%llu}\n", (unsigned long long)v->cgroup_id,
	       (unsigned long long)v->created_ns);
	return 0;
}

static int print_chan(void *ctx, const struct tt_obj_key *k, const struct tt_chan_val *v)
{
	printf("{\"kind\":\"channel\",\"tgid\":%u,\"client\":\"0x%08x\",\"channel\":\"0x%08x\","
	       "\"tsg\":\"0x%08x\",\"device\":\"0x%08x\",\"class\":\"0x%04x\",\"disabled\":%s,"
	       "\"created_ns\":%llu}\n",
	       k->tgid, k->hClient, k->handle, v->hTsg, v->hDevice, v->hClass,
	       v->off ? "true" : "false", (unsigned long long)v->created_ns);
	return 0;
}

static int print_client(void *ctx, const struct tt_client_key *k, const struct tt_client_val *v)
{
	printf("{\"kind\":\"client\",\"tgid\":%u,\"client\":\"0x%08x\",\"fd\":%d,"
	       "\"class\":\"0x%04x\",\"cgroup\":%llu}\n",
	       k->tgid, k->hClient, v->fd, v->hClass, (unsigned long long)v->cgroup_id);
	return 0;
}

static int print_counters(struct tsgtrace *t)
{
	struct tsgtrace_counters c;
	unsigned int i;
	int rc = tsgtrace_counters(t, &c);

	if (rc) {
		fprintf(stderr, "gpuqos-tsgtrace: counters: %s\n", strerror(-rc));
		return rc;
	}
	printf("{\"counters\":{");
	for (i = 0; i < TT_CNT_MAX; i++)
		printf("%s\"%s\":%llu", i ? "," : "", tsgtrace_counter_name(i), c.v[i]);
	printf(",\"bad_records\":%llu}}\n", c.bad_records);
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: gpuqos-tsgtrace [--pin-dir DIR] [--mode auto|tracepoint|tp_btf] [--pid N]\n"
		"                       [--duration S] [--count N] [--detach-on-close]\n"
		"                       [--report-failures] [--test-verifier-reject]\n"
		"                       [--test-ring-bytes N]\n"
		"       gpuqos-tsgtrace [--pin-dir DIR] --dump\n"
		"       gpuqos-tsgtrace [--pin-dir DIR] --unpin\n"
		"Pin directory default: %s\n",
		TSGTRACE_DEFAULT_PIN_DIR);
}

static int trace_loop(struct tsgtrace *t, struct run *r, double duration)
{
	struct epoll_event ev = { .events = EPOLLIN }, got[4];
	struct timespec start, now;
	sigset_t mask;
	int ep, sfd, rc = 0;

	/* main() blocked them before printing "ready". */
	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	ep = epoll_create1(EPOLL_CLOEXEC);
	if (sfd < 0 || ep < 0) {
		rc = -errno;
		goto out;
	}
	ev.data.fd = sfd;
	if (epoll_ctl(ep, EPOLL_CTL_ADD, sfd, &ev) != 0) {
		rc = -errno;
		goto out;
	}
	ev.data.fd = tsgtrace_fd(t);
	if (epoll_ctl(ep, EPOLL_CTL_ADD, tsgtrace_fd(t), &ev) != 0) {
		rc = -errno;
		goto out;
	}
	/* Events left in a pinned ring (by the programs while no consumer
	 * ran) raise no wakeup: the producer only notifies a caught-up
	 * consumer. Drain once before the first wait. */
	rc = tsgtrace_consume(t, print_event, r);
	if (rc < 0)
		goto out;
	rc = 0;
	fflush(stdout);
	clock_gettime(CLOCK_MONOTONIC, &start);
	for (;;) {
		int n, i, timeout = -1;

		if (duration > 0) {
			double left;

			clock_gettime(CLOCK_MONOTONIC, &now);
			left = duration - (double)(now.tv_sec - start.tv_sec) -
			       (double)(now.tv_nsec - start.tv_nsec) / 1e9;
			if (left <= 0)
				break;
			timeout = (int)(left * 1000) + 1;
		}
		n = epoll_wait(ep, got, 4, timeout);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = -errno;
			break;
		}
		for (i = 0; i < n; i++) {
			if (got[i].data.fd == sfd)
				goto drain;
		}
		rc = tsgtrace_consume(t, print_event, r);
		if (rc < 0)
			break;
		rc = 0;
		fflush(stdout);
		if (r->max && r->seen >= r->max)
			break;
	}
drain:
	if (rc == 0) {
		rc = tsgtrace_consume(t, print_event, r);
		rc = rc < 0 ? rc : 0;
	}
out:
	if (sfd >= 0)
		close(sfd);
	if (ep >= 0)
		close(ep);
	return rc;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "pin-dir", required_argument, NULL, 'P' },
		{ "mode", required_argument, NULL, 'm' },
		{ "pid", required_argument, NULL, 'p' },
		{ "duration", required_argument, NULL, 'd' },
		{ "count", required_argument, NULL, 'c' },
		{ "detach-on-close", no_argument, NULL, 'D' },
		{ "report-failures", no_argument, NULL, 'f' },
		{ "test-verifier-reject", no_argument, NULL, 'V' },
		{ "test-ring-bytes", required_argument, NULL, 'R' },
		{ "dump", no_argument, NULL, 'u' },
		{ "unpin", no_argument, NULL, 'U' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct tsgtrace_opts o;
	struct run r = { 0, 0 };
	struct tsgtrace *t;
	bool dump = false, unpin = false;
	double duration = 0;
	char err[2048];
	int opt, rc;

	memset(&o, 0, sizeof(o));
	while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'P':
			o.pin_dir = optarg;
			break;
		case 'm':
			if (strcmp(optarg, "auto") == 0)
				o.mode = TSGTRACE_MODE_AUTO;
			else if (strcmp(optarg, "tracepoint") == 0)
				o.mode = TSGTRACE_MODE_TRACEPOINT;
			else if (strcmp(optarg, "tp_btf") == 0)
				o.mode = TSGTRACE_MODE_TP_BTF;
			else {
				usage(stderr);
				return 2;
			}
			break;
		case 'p':
			o.target_tgid = (unsigned int)strtoul(optarg, NULL, 10);
			break;
		case 'd':
			duration = strtod(optarg, NULL);
			break;
		case 'c':
			r.max = strtoull(optarg, NULL, 10);
			break;
		case 'D':
			o.detach_on_close = true;
			break;
		case 'f':
			o.report_failures = true;
			break;
		case 'V':
			o.test_verifier_reject = true;
			break;
		case 'R':
			o.test_ring_bytes = (unsigned int)strtoul(optarg, NULL, 10);
			break;
		case 'u':
			dump = true;
			break;
		case 'U':
			unpin = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return 2;
	}
	if (unpin) {
		rc = tsgtrace_unpin(o.pin_dir, err, sizeof(err));
		if (rc) {
			fprintf(stderr, "gpuqos-tsgtrace: %s\n", err);
			return 1;
		}
		return 0;
	}
	o.dump_only = dump;
	t = tsgtrace_open(&o, err, sizeof(err));
	if (!t) {
		fprintf(stderr, "gpuqos-tsgtrace: %s\n", err);
		return 1;
	}
	if (dump) {
		rc = tsgtrace_dump(t, print_tsg, NULL);
		if (rc >= 0)
			rc = tsgtrace_dump_channels(t, print_chan, NULL);
		if (rc >= 0)
			rc = tsgtrace_dump_clients(t, print_client, NULL);
		if (rc >= 0)
			rc = print_counters(t);
		tsgtrace_close(t);
		if (rc < 0) {
			fprintf(stderr, "gpuqos-tsgtrace: dump: %s\n", strerror(-rc));
			return 1;
		}
		return 0;
	}
	{
		/* Before "ready": a SIGTERM right after it must reach the loop. */
		sigset_t mask;

		sigemptyset(&mask);
		sigaddset(&mask, SIGINT);
		sigaddset(&mask, SIGTERM);
		if (sigprocmask(SIG_BLOCK, &mask, NULL) != 0) {
			fprintf(stderr, "gpuqos-tsgtrace: sigprocmask: %s\n", strerror(errno));
			tsgtrace_close(t);
			return 1;
		}
	}
	printf("{\"ready\":true,\"mode\":\"%s\",\"inherited_tables\":%s,\"inherited_links\":%s,"
	       "\"recreated\":%s,\"pid\":%d}\n",
	       tsgtrace_attach_mode(t),
	       tsgtrace_inherited(t) & TSGTRACE_INHERITED_TABLES ? "true" : "false",
	       tsgtrace_inherited(t) & TSGTRACE_INHERITED_LINKS ? "true" : "false",
	       tsgtrace_inherited(t) & TSGTRACE_RECREATED ? "true" : "false", (int)getpid());
	fflush(stdout);
	rc = trace_loop(t, &r, duration);
	if (rc == 0)
		rc = print_counters(t);
	fflush(stdout);
	tsgtrace_close(t);
	if (rc) {
		fprintf(stderr, "gpuqos-tsgtrace: %s\n", strerror(-rc));
		return 1;
	}
	return 0;
}
