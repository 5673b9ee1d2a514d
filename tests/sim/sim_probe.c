/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sim_probe.c - RM calls the simulator tests need and fakecuda does not
 * make: ownership across open(), dup(), fork() and pidfd_getfd(), release
 * on last close, interleave permissions, malformed ioctls, and
 * DISABLE_CHANNELS with whatever parameters a test asks for.
 *
 *   sim_probe ownership|release|interleave|malformed|disable MOUNTDIR [LEVEL]
 *
 * Owns: issuing the calls and printing one JSON line per case
 * ({"case","errno","status"[,"value"|"present"]}). Does not own the
 * expectations: test_sim.py compares the lines with what docs/rm-facts.md says.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/pidfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "abi/rm_abi.h"

#define PR_DEVICE 0x5c000001u
#define PR_SUBDEVICE 0x5c000002u
#define PR_TSG 0x5c000010u
#define PR_CHANNEL 0x5c000020u

struct pr_res {
	int err;
	rm_u32 status;
};

static const char *pr_mount;
static char pr_dev[4096];

static void pr_die(const char *what, int err)
{
	fprintf(stderr, "sim_probe[%d]: %s: %s\n", (int)getpid(), what, strerror(err));
	exit(1);
}

static int pr_open(void)
{
	int fd = open(pr_dev, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		pr_die(pr_dev, errno);
	return fd;
}

static void pr_report(const char *name, struct pr_res r)
{
	printf("{\"case\":\"%s\",\"errno\":%d,\"status\":\"0x%02x\"}\n", name, r.err, r.status);
	fflush(stdout);
}

static void pr_report_value(const char *name, struct pr_res r, unsigned long long v)
{
	printf("{\"case\":\"%s\",\"errno\":%d,\"status\":\"0x%02x\",\"value\":%llu}\n", name, r.err,
	       r.status, v);
	fflush(stdout);
}

/* ---------------- RM calls, results not judged ---------------- */

static struct pr_res pr_alloc_ptr(int fd, rm_handle root, rm_handle parent, rm_handle *hnew,
				  rm_u32 cls, rm_u64 params, rm_u32 size)
{
	struct rm_alloc64_params p = { .hRoot = root, .hObjectParent = parent,
				       .hObjectNew = *hnew, .hClass = cls,
				       .pAllocParms = params, .paramsSize = size };
	struct pr_res r = { 0, 0 };
	if (ioctl(fd, RM_IOCTL_ALLOC64, &p) < 0)
		r.err = errno;
	r.status = p.status;
	*hnew = p.hObjectNew;
	return r;
}

static struct pr_res pr_alloc(int fd, rm_handle root, rm_handle parent, rm_handle *hnew,
			      rm_u32 cls, const void *params, rm_u32 size)
{
	return pr_alloc_ptr(fd, root, parent, hnew, cls, (rm_u64)(uintptr_t)params, size);
}

static struct pr_res pr_control(int fd, rm_handle client, rm_handle object, rm_u32 cmd,
				rm_u64 params, rm_u32 size)
{
	struct rm_control_params p = { .hClient = client, .hObject = object, .cmd = cmd,
				       .params = params, .paramsSize = size };
	struct pr_res r = { 0, 0 };
	if (ioctl(fd, RM_IOCTL_CONTROL, &p) < 0)
		r.err = errno;
	r.status = p.status;
	return r;
}

static struct pr_res pr_free(int fd, rm_handle root, rm_handle object)
{
	struct rm_free_params p = { .hRoot = root, .hObjectOld = object };
	struct pr_res r = { 0, 0 };
	if (ioctl(fd, RM_IOCTL_FREE, &p) < 0)
		r.err = errno;
	r.status = p.status;
	return r;
}

static struct pr_res pr_get_ts(int fd, rm_handle client, rm_handle tsg, rm_u64 *value)
{
	struct rm_tsg_timeslice ts = { 0 };
	struct pr_res r = pr_control(fd, client, tsg, RM_CTRL_TSG_GET_TIMESLICE,
				     (rm_u64)(uintptr_t)&ts, sizeof(ts));
	*value = ts.timesliceUs;
	return r;
}

static struct pr_res pr_set_ts(int fd, rm_handle client, rm_handle tsg, rm_u64 us)
{
	struct rm_tsg_timeslice ts = { .timesliceUs = us };
	return pr_control(fd, client, tsg, RM_CTRL_TSG_SET_TIMESLICE, (rm_u64)(uintptr_t)&ts,
			  sizeof(ts));
}

static struct pr_res pr_preempt(int fd, rm_handle client, rm_handle tsg)
{
	struct rm_tsg_preempt p = { .bWait = 1 };
	return pr_control(fd, client, tsg, RM_CTRL_TSG_PREEMPT, (rm_u64)(uintptr_t)&p, sizeof(p));
}

/* Client, device, GR TSG and its channel on fd; exits if any fails. */
static rm_handle pr_setup(int fd)
{
	rm_handle client = 0, dev = PR_DEVICE, tsg = PR_TSG, ch = PR_CHANNEL;
	struct rm_device_alloc dp = { .deviceId = 0 };
	struct rm_tsg_alloc tp = { .engineType = RM_ENGINE_GR0 };
	struct pr_res r = pr_alloc(fd, 0, 0, &client, RM_CLASS_ROOT_CLIENT, NULL, 0);
	if (r.err || r.status)
		goto fail;
	r = pr_alloc(fd, client, client, &dev, RM_CLASS_DEVICE, &dp, sizeof(dp));
	if (r.err || r.status)
		goto fail;
	r = pr_alloc(fd, client, dev, &tsg, RM_CLASS_TSG, &tp, sizeof(tp));
	if (r.err || r.status)
		goto fail;
	r = pr_alloc(fd, client, tsg, &ch, RM_CLASS_HOPPER_GPFIFO, NULL, 0);
	if (r.err || r.status)
		goto fail;
	return client;
fail:
	fprintf(stderr, "sim_probe: setup allocation failed: errno %d (%s), status 0x%02x %s\n",
		r.err, strerror(r.err), r.status, rm_status_name(r.status));
	exit(1);
}

/* ---------------- the simulator's state ---------------- */

/* Whether the simulator's state lists client h; -1 if unreadable. */
static int pr_state_has_client(rm_handle h)
{
	char path[4200], needle[64];
	static char buf[1 << 20];

	snprintf(path, sizeof(path), "%s/state", pr_mount);
	snprintf(needle, sizeof(needle), "\"handle\":\"0x%08x\",\"class\"", h);
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	int bad = ferror(f);
	fclose(f);
	if (bad)
		return -1;
	buf[n] = '\0';
	return strstr(buf, needle) != NULL;
}

/* Release is asynchronous in FUSE: poll up to two seconds. */
static int pr_wait_client(rm_handle h, int want_present)
{
	int present = -1;
	for (int i = 0; i < 200; i++) {
		present = pr_state_has_client(h);
		if (present == want_present)
			break;
		struct timespec d = { 0, 10 * 1000000 };
		nanosleep(&d, NULL);
	}
	return present;
}

static void pr_report_present(const char *name, int present)
{
	printf("{\"case\":\"%s\",\"errno\":0,\"status\":\"0x00\",\"present\":%s}\n", name,
	       present < 0 ? "null" : present ? "true" : "false");
	fflush(stdout);
}

/* ---------------- ownership ---------------- */

static void pr_owner_fresh_open(int fd2, rm_handle c, const char *prefix)
{
	char name[96];
	rm_u64 v;
	rm_handle h = 0x5c0000f0u;
	struct rm_tsg_alloc tp = { .engineType = RM_ENGINE_COPY0 + 2 };

	snprintf(name, sizeof(name), "%s.get", prefix);
	pr_report(name, pr_get_ts(fd2, c, PR_TSG, &v));
	snprintf(name, sizeof(name), "%s.set", prefix);
	pr_report(name, pr_set_ts(fd2, c, PR_TSG, 100));
	snprintf(name, sizeof(name), "%s.preempt", prefix);
	pr_report(name, pr_preempt(fd2, c, PR_TSG));
	snprintf(name, sizeof(name), "%s.alloc", prefix);
	pr_report(name, pr_alloc(fd2, c, PR_DEVICE, &h, RM_CLASS_TSG, &tp, sizeof(tp)));
	snprintf(name, sizeof(name), "%s.free", prefix);
	pr_report(name, pr_free(fd2, c, PR_TSG));
}

static void pr_owner_fork(int fd1, rm_handle c)
{
	rm_u64 v;

	fflush(stdout);
	pid_t pid = fork();
	if (pid < 0)
		pr_die("fork", errno);
	if (pid == 0) {
		pr_report("own.fork_child.set", pr_set_ts(fd1, c, PR_TSG, 768));
		struct pr_res r = pr_get_ts(fd1, c, PR_TSG, &v);
		pr_report_value("own.fork_child.get", r, v);
		pr_report("own.fork_child.preempt", pr_preempt(fd1, c, PR_TSG));
		_exit(0);
	}
	int st;
	if (waitpid(pid, &st, 0) < 0)
		pr_die("waitpid", errno);
}

/* A second process owns the client; we take its fd with pidfd_getfd. */
static void pr_owner_pidfd(int fd2)
{
	int up[2], down[2];
	rm_handle msg[2];
	char go;
	rm_u64 v;

	if (pipe(up) || pipe(down))
		pr_die("pipe", errno);
	fflush(stdout);
	pid_t pid = fork();
	if (pid < 0)
		pr_die("fork", errno);
	if (pid == 0) {
		int fd = pr_open();
		msg[0] = (rm_handle)fd;
		msg[1] = pr_setup(fd);
		if (write(up[1], msg, sizeof(msg)) != (ssize_t)sizeof(msg))
			_exit(1);
		_exit(read(down[0], &go, 1) == 1 ? 0 : 1); /* hold until told */
	}
	if (read(up[0], msg, sizeof(msg)) != (ssize_t)sizeof(msg))
		pr_die("read from owner child", EIO);
	rm_handle c = msg[1];
	int pidfd = pidfd_open(pid, 0);
	if (pidfd < 0)
		pr_die("pidfd_open", errno);
	int dupfd = pidfd_getfd(pidfd, (int)msg[0], 0);
	if (dupfd < 0)
		pr_die("pidfd_getfd", errno);
	pr_report("own.pidfd.set", pr_set_ts(dupfd, c, PR_TSG, 300));
	struct pr_res r = pr_get_ts(dupfd, c, PR_TSG, &v);
	pr_report_value("own.pidfd.get", r, v);
	pr_report("own.pidfd.preempt", pr_preempt(dupfd, c, PR_TSG));
	pr_owner_fresh_open(fd2, c, "own.pidfd_fresh");
	if (write(down[1], "x", 1) != 1)
		pr_die("write to owner child", errno);
	int st;
	if (waitpid(pid, &st, 0) < 0)
		pr_die("waitpid", errno);
	/* The duplicate keeps the client alive after its owner exits. */
	r = pr_get_ts(dupfd, c, PR_TSG, &v);
	pr_report_value("own.pidfd.after_owner_exit", r, v);
	pr_report_present("own.pidfd.present_while_dup_open", pr_wait_client(c, 1));
	close(dupfd);
	pr_report_present("own.pidfd.present_after_dup_close", pr_wait_client(c, 0));
	close(pidfd);
}

static void pr_ownership(void)
{
	rm_u64 v;
	int fd1 = pr_open();
	rm_handle c = pr_setup(fd1);
	struct pr_res r = pr_get_ts(fd1, c, PR_TSG, &v);
	pr_report_value("own.same_fd.get", r, v);

	int fd2 = pr_open();
	pr_owner_fresh_open(fd2, c, "own.fresh_open");

	int fd3 = dup(fd1);
	if (fd3 < 0)
		pr_die("dup", errno);
	pr_report("own.dup.set", pr_set_ts(fd3, c, PR_TSG, 512));
	r = pr_get_ts(fd1, c, PR_TSG, &v);
	pr_report_value("own.dup.readback_on_original", r, v);

	pr_owner_fork(fd1, c);
	r = pr_get_ts(fd1, c, PR_TSG, &v);
	pr_report_value("own.fork.readback_on_original", r, v);
	pr_owner_pidfd(fd2);
	close(fd3);
	close(fd2);
	close(fd1);
}

/* ---------------- release ---------------- */

static void pr_sleep_ms(long ms)
{
	struct timespec d = { ms / 1000, (ms % 1000) * 1000000 };
	nanosleep(&d, NULL);
}

static void pr_release(void)
{
	rm_u64 v;
	int fd1 = pr_open();
	rm_handle c = pr_setup(fd1);
	int fd3 = dup(fd1);
	if (fd3 < 0)
		pr_die("dup", errno);
	close(fd1);
	pr_sleep_ms(100); /* give an (unwanted) release time to arrive */
	pr_report_present("release.dup_still_open", pr_state_has_client(c));
	close(fd3);
	pr_report_present("release.last_close", pr_wait_client(c, 0));

	int fd = pr_open();
	c = pr_setup(fd);
	fflush(stdout);
	pid_t pid = fork();
	if (pid < 0)
		pr_die("fork", errno);
	if (pid == 0) {
		pr_sleep_ms(300);
		_exit(0);
	}
	close(fd);
	pr_sleep_ms(100);
	pr_report_present("release.fork_child_holds", pr_state_has_client(c));
	int st;
	if (waitpid(pid, &st, 0) < 0)
		pr_die("waitpid", errno);
	pr_report_present("release.fork_child_exited", pr_wait_client(c, 0));

	fd = pr_open();
	c = pr_setup(fd);
	pr_report("release.free_device", pr_free(fd, c, PR_DEVICE));
	pr_report("release.tsg_gone_with_device", pr_get_ts(fd, c, PR_TSG, &v));
	pr_report("release.free_client", pr_free(fd, c, c));
	pr_report_present("release.client_gone_after_free", pr_state_has_client(c));
	close(fd);
}

/* ---------------- interleave ---------------- */

static void pr_interleave(unsigned level)
{
	int fd = pr_open();
	rm_handle c = pr_setup(fd);
	struct rm_tsg_interleave il = { .tsgInterleaveLevel = level };

	pr_report("interleave.set", pr_control(fd, c, PR_TSG, RM_CTRL_TSG_SET_INTERLEAVE,
					       (rm_u64)(uintptr_t)&il, sizeof(il)));
	pr_report("interleave.get", pr_control(fd, c, PR_TSG, RM_CTRL_TSG_GET_INTERLEAVE,
					       (rm_u64)(uintptr_t)&il, sizeof(il)));
	pr_report("interleave.preempt", pr_preempt(fd, c, PR_TSG));
	pr_report("interleave.set_timeslice", pr_set_ts(fd, c, PR_TSG, 20));
	close(fd);
}

/* ---------------- malformed calls ---------------- */

static struct pr_res pr_raw(int fd, unsigned long request, void *arg)
{
	struct pr_res r = { 0, 0 };
	if (ioctl(fd, request, arg) < 0)
		r.err = errno;
	return r;
}

static struct pr_res pr_xfer(int fd, rm_u32 cmd, rm_u32 size, rm_u64 ptr)
{
	struct rm_xfer x = { .cmd = cmd, .size = size, .ptr = ptr };
	return pr_raw(fd, RM_IOCTL_XFER, &x);
}

static void pr_malformed_escapes(int fd)
{
	unsigned char buf[64] = { 0 };
	struct rm_control_params cp = { 0 };

	pr_report("esc.unknown_nr", pr_raw(fd, RM_IOWR(0x50, 32), buf));
	pr_report("esc.card_info", pr_raw(fd, RM_IOWR(200, 16), buf));
	pr_report("esc.alloc_size40", pr_raw(fd, RM_IOWR(RM_ESC_ALLOC, 40), buf));
	pr_report("esc.control_size24", pr_raw(fd, RM_IOWR(RM_ESC_CONTROL, 24), buf));
	pr_report("esc.free_size8", pr_raw(fd, RM_IOWR(RM_ESC_FREE, 8), buf));
	pr_report("esc.not_rm_type", pr_raw(fd, (RM_IOWR(1, 16) & ~0xff00u) | ('G' << 8), buf));
	pr_report("esc.top_level_bad_pointer", pr_raw(fd, RM_IOCTL_CONTROL, (void *)16));
	pr_report("xfer.bad_ptr", pr_xfer(fd, RM_ESC_CONTROL, 32, 16));
	pr_report("xfer.too_big", pr_xfer(fd, RM_ESC_CONTROL, 20000, (rm_u64)(uintptr_t)buf));
	pr_report("xfer.nested", pr_xfer(fd, RM_ESC_XFER, 16, (rm_u64)(uintptr_t)buf));
	pr_report("xfer.inner_wrong_size", pr_xfer(fd, RM_ESC_CONTROL, 24, (rm_u64)(uintptr_t)&cp));
}

static void pr_malformed_controls(int fd, rm_handle c)
{
	static unsigned char big[2u << 20];
	rm_u64 v;
	struct rm_tsg_interleave il = { .tsgInterleaveLevel = 3 };

	pr_report("ctrl.null_cmd", pr_control(fd, c, PR_TSG, 0, 0, 0));
	pr_report("ctrl.params_bad_ptr", pr_control(fd, c, PR_TSG, RM_CTRL_TSG_GET_TIMESLICE, 16, 8));
	pr_report("ctrl.params_null_with_size",
		  pr_control(fd, c, PR_TSG, RM_CTRL_TSG_GET_TIMESLICE, 0, 8));
	pr_report("ctrl.params_too_big", pr_control(fd, c, PR_TSG, RM_CTRL_TSG_GET_TIMESLICE,
						    (rm_u64)(uintptr_t)big, sizeof(big)));
	pr_report("ctrl.wrong_size", pr_control(fd, c, PR_TSG, RM_CTRL_TSG_SET_TIMESLICE,
						(rm_u64)(uintptr_t)&v, 4));
	pr_report("ctrl.unknown_object", pr_set_ts(fd, c, 0x5c0000eeu, 100));
	pr_report("ctrl.unknown_client", pr_set_ts(fd, 0x12345678u, PR_TSG, 100));
	pr_report("ctrl.unknown_cmd_on_tsg", pr_control(fd, c, PR_TSG, 0xa06c01ffu,
							 (rm_u64)(uintptr_t)&v, sizeof(v)));
	pr_report("ctrl.other_cmd_on_device", pr_control(fd, c, PR_DEVICE, 0x00800101u,
							  (rm_u64)(uintptr_t)&v, sizeof(v)));
	pr_report("ctrl.tsg_cmd_on_device", pr_set_ts(fd, c, PR_DEVICE, 100));
	pr_report("ctrl.get_interleave", pr_control(fd, c, PR_TSG, RM_CTRL_TSG_GET_INTERLEAVE,
						    (rm_u64)(uintptr_t)&il, sizeof(il)));
	pr_report("ctrl.set_interleave_level3", pr_control(fd, c, PR_TSG,
							    RM_CTRL_TSG_SET_INTERLEAVE,
							    (rm_u64)(uintptr_t)&il, sizeof(il)));
	pr_report("ctrl.set_timeslice_max", pr_set_ts(fd, c, PR_TSG, 1000000));
	pr_report("ctrl.set_timeslice_over", pr_set_ts(fd, c, PR_TSG, 1000001));
	struct pr_res r = pr_get_ts(fd, c, PR_TSG, &v);
	pr_report_value("ctrl.timeslice_after_over", r, v);
	pr_report("ctrl.set_timeslice_zero", pr_set_ts(fd, c, PR_TSG, 0));
	r = pr_get_ts(fd, c, PR_TSG, &v);
	pr_report_value("ctrl.timeslice_after_zero", r, v);
}

static void pr_malformed_allocs(int fd, rm_handle c)
{
	struct rm_tsg_alloc tp = { .engineType = RM_ENGINE_GR0 };
	struct rm_device_alloc dp = { .deviceId = 7 };
	rm_handle h;
	struct pr_res r;

	h = 0x5c000030u;
	pr_report("alloc.bad_params_ptr",
		  pr_alloc_ptr(fd, c, PR_DEVICE, &h, RM_CLASS_TSG, 16, sizeof(tp)));
	h = 0x5c000031u;
	pr_report("alloc.null_params", pr_alloc(fd, c, PR_DEVICE, &h, RM_CLASS_TSG, NULL, 0));
	h = 0x5c000032u;
	pr_report("alloc.device_id_out_of_range",
		  pr_alloc(fd, c, c, &h, RM_CLASS_DEVICE, &dp, sizeof(dp)));
	h = PR_TSG;
	pr_report("alloc.duplicate_handle", pr_alloc(fd, c, PR_DEVICE, &h, RM_CLASS_TSG, &tp, sizeof(tp)));
	h = c;
	pr_report("alloc.handle_equals_client",
		  pr_alloc(fd, c, PR_DEVICE, &h, RM_CLASS_TSG, &tp, sizeof(tp)));
	h = 0x5c000033u;
	pr_report("alloc.unknown_parent", pr_alloc(fd, c, 0x5c0000eeu, &h, RM_CLASS_TSG, &tp, sizeof(tp)));
	h = 0x5c000034u;
	pr_report("alloc.tsg_under_client", pr_alloc(fd, c, c, &h, RM_CLASS_TSG, &tp, sizeof(tp)));
	h = 0;
	r = pr_alloc(fd, c, PR_DEVICE, &h, RM_CLASS_TSG, &tp, sizeof(tp));
	pr_report_value("alloc.generated_handle", r, h);
	h = c;
	pr_report("alloc.client_duplicate_handle",
		  pr_alloc(fd, 0, 0, &h, RM_CLASS_ROOT_CLIENT, NULL, 0));
	pr_report("free.unknown", pr_free(fd, c, 0x5c0000eeu));
	pr_report("free.tsg", pr_free(fd, c, PR_TSG));
	pr_report("free.channel_gone_with_tsg",
		  pr_control(fd, c, PR_CHANNEL, 0xc86f0101u, 0, 0));
}

static void pr_malformed(void)
{
	int fd = pr_open();
	rm_handle c = pr_setup(fd);
	pr_malformed_escapes(fd);
	pr_malformed_controls(fd, c);
	pr_malformed_allocs(fd, c);
	close(fd);
}

/* ---------------- DISABLE_CHANNELS ---------------- */

/* The parameter block with room past its end, so a test can send a
 * paramsSize larger than the structure. */
#define PR_DISABLE_BUF 1024u
#define PR_DISABLE_CHANNEL2 0x5c000021u

union pr_disable_buf {
	struct rm_disable_channels d;
	unsigned char raw[PR_DISABLE_BUF];
};

/* One number of a command line (any base strtoull takes), at most max;
 * exits with a usage error otherwise. */
static unsigned long long pr_number(char **cur, unsigned long long max)
{
	char *p = *cur, *end;

	while (isspace((unsigned char)*p))
		p++;
	if (*p == '\0' || *p == '-')
		goto bad;
	errno = 0;
	unsigned long long v = strtoull(p, &end, 0);
	if (errno || end == p || (*end && !isspace((unsigned char)*end)) || v > max)
		goto bad;
	*cur = end;
	return v;
bad:
	fprintf(stderr, "sim_probe: bad number at \"%s\"\n", p);
	exit(2);
}

static int pr_line_done(char *p)
{
	while (isspace((unsigned char)*p))
		p++;
	return *p == '\0';
}

/* "disable FD OBJECT SIZE EVENT BDISABLE ONLY NUM [CLIENT CHANNEL]...":
 * DISABLE_CHANNELS through open file FD (1 or 2) on OBJECT of the
 * probe's own client. NUM is sent as it is; the pairs fill the lists
 * from index 0 (at most 64), the rest stay zero. */
static void pr_disable_cmd(const int fds[2], rm_handle c, char *args)
{
	union pr_disable_buf b;

	memset(&b, 0, sizeof(b));
	unsigned fdi = (unsigned)pr_number(&args, 2);
	if (fdi == 0) {
		fprintf(stderr, "sim_probe: FD must be 1 or 2\n");
		exit(2);
	}
	rm_handle obj = (rm_handle)pr_number(&args, UINT32_MAX);
	rm_u32 size = (rm_u32)pr_number(&args, PR_DISABLE_BUF);
	b.d.pRunlistPreemptEvent = pr_number(&args, UINT64_MAX);
	b.d.bDisable = (rm_u8)pr_number(&args, UINT8_MAX);
	b.d.bOnlyDisableScheduling = (rm_u8)pr_number(&args, UINT8_MAX);
	b.d.numChannels = (rm_u32)pr_number(&args, UINT32_MAX);
	for (unsigned i = 0; !pr_line_done(args); i++) {
		if (i == RM_DISABLE_CHANNELS_MAX) {
			fprintf(stderr, "sim_probe: more than %u pairs\n", RM_DISABLE_CHANNELS_MAX);
			exit(2);
		}
		b.d.hClientList[i] = (rm_handle)pr_number(&args, UINT32_MAX);
		b.d.hChannelList[i] = (rm_handle)pr_number(&args, UINT32_MAX);
	}
	pr_report("disable", pr_control(fds[fdi - 1], c, obj, RM_CTRL_FIFO_DISABLE_CHANNELS,
					(rm_u64)(uintptr_t)&b, size));
}

/* Two open files, each with a client (device, GR TSG, channel); the
 * first also has a subdevice and a second channel. Prints the handles,
 * then runs one command per line of stdin, printing one result line
 * each: "disable ..." (above), "free HANDLE" (an object of the first
 * client), "quit". The test reads the state between commands. */
static void pr_disable(void)
{
	int fds[2] = { pr_open(), pr_open() };
	rm_handle c = pr_setup(fds[0]), other = pr_setup(fds[1]);
	rm_handle sub = PR_SUBDEVICE, ch2 = PR_DISABLE_CHANNEL2;
	struct pr_res r = pr_alloc(fds[0], c, PR_DEVICE, &sub, RM_CLASS_SUBDEVICE, NULL, 0);
	if (!r.err && !r.status)
		r = pr_alloc(fds[0], c, PR_TSG, &ch2, RM_CLASS_HOPPER_GPFIFO, NULL, 0);
	if (r.err || r.status) {
		fprintf(stderr, "sim_probe: setup failed: errno %d, status 0x%02x\n", r.err,
			r.status);
		exit(1);
	}
	printf("{\"case\":\"setup\",\"client\":\"0x%08x\",\"device\":\"0x%08x\","
	       "\"subdevice\":\"0x%08x\",\"tsg\":\"0x%08x\",\"channels\":[\"0x%08x\",\"0x%08x\"],"
	       "\"other_client\":\"0x%08x\",\"other_channel\":\"0x%08x\"}\n",
	       c, PR_DEVICE, sub, PR_TSG, PR_CHANNEL, ch2, other, PR_CHANNEL);
	fflush(stdout);

	char line[4096];
	while (fgets(line, sizeof(line), stdin)) {
		if (strncmp(line, "disable ", 8) == 0) {
			pr_disable_cmd(fds, c, line + 8);
		} else if (strncmp(line, "free ", 5) == 0) {
			char *args = line + 5;
			rm_handle h = (rm_handle)pr_number(&args, UINT32_MAX);
			pr_report("free", pr_free(fds[0], c, h));
		} else if (pr_line_done(line) || strncmp(line, "quit", 4) == 0) {
			break;
		} else {
			fprintf(stderr, "sim_probe: unknown command: %s", line);
			exit(2);
		}
	}
	close(fds[1]);
	close(fds[0]);
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: sim_probe ownership|release|interleave|malformed|disable "
				"MOUNTDIR [LEVEL]\n");
		return 2;
	}
	pr_mount = argv[2];
	snprintf(pr_dev, sizeof(pr_dev), "%s/nvidiactl", pr_mount);
	if (strcmp(argv[1], "ownership") == 0)
		pr_ownership();
	else if (strcmp(argv[1], "release") == 0)
		pr_release();
	else if (strcmp(argv[1], "interleave") == 0)
		pr_interleave(argc > 3 ? (unsigned)atoi(argv[3]) : RM_INTERLEAVE_HIGH);
	else if (strcmp(argv[1], "malformed") == 0)
		pr_malformed();
	else if (strcmp(argv[1], "disable") == 0)
		pr_disable();
	else {
		fprintf(stderr, "sim_probe: unknown mode %s\n", argv[1]);
		return 2;
	}
	return 0;
}
