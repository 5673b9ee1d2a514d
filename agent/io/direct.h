/* SPDX-License-Identifier: Apache-2.0 */
/*
 * direct.h - the direct control path: the node agent issues an RM control
 * on another process's TSG through a pidfd_getfd(2) duplicate of that
 * process's own control-device fd (the RM accepts a control only on the
 * open file description that created the client; a duplicate is that
 * description).
 *
 * Owns: the control itself (direct_control: pid-reuse guard, duplicate,
 * check, NVOS54, close), run off the event loop on a common/workq.h
 * pool of worker threads because an RM control can block (one did not
 * return for minutes). Workers report through the pool's eventfd, which
 * the loop watches (direct_fd). Does not
 * own deadlines (cmd.c enforces them and calls direct_expire), choosing
 * the path (path.c) or recording results on TSGs (cmd.c).
 *
 * Threads: the loop thread calls every function here except
 * direct_control, which the workers call (and tests may).
 */
#ifndef GPUQOS_AGENT_DIRECT_H
#define GPUQOS_AGENT_DIRECT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "abi/rm_abi.h"

#define DIRECT_WORKERS 4
#define DIRECT_MAX_LOST 4 /* stuck workers replaced; one more stalls the path */
#define DIRECT_QUEUE_MAX 256

struct direct_req {
	uint32_t seq; /* the command id (cmd.c) */
	pid_t pid;
	uint64_t starttime; /* /proc/<pid>/stat field 22 when the TSG was seen */
	uint32_t fd;        /* the process's fd the client was allocated on */
	rm_handle h_client, h_tsg;
	uint32_t op; /* GQ_OP_* */
	uint64_t arg;
};

struct direct_res {
	uint32_t seq;
	uint32_t rm_status; /* valid when err == 0 */
	uint32_t err;       /* errno, or GQ_ERR_BAD_OP; 0 when the control ran */
	uint64_t value;     /* GET_TIMESLICE read-back, else the arg */
	uint64_t elapsed_ns; /* time in ioctl() */
	int late;           /* its deadline had passed: the worker was counted lost */
	char why[200];      /* a failure (errno or RM status) in words, naming pid, fd, TSG */
};

struct direct_stats {
	unsigned workers;  /* live workers not counted lost */
	unsigned busy;     /* of those, running a control */
	unsigned queued;
	unsigned stuck;    /* lost workers still inside a control */
	unsigned max_lost;
	int stalled;       /* stuck > max_lost: no new work accepted */
	uint64_t lost;     /* workers ever counted lost */
	uint64_t done, late;
};

struct direct;

/* Starts `workers` threads. nvidiactl is the canonical control-device
 * path a duplicate must point to. NULL with err set on failure. */
struct direct *direct_start(const char *nvidiactl, unsigned workers, unsigned max_lost, char *err,
			    size_t errlen);

/* The eventfd that becomes readable when results are ready. */
int direct_fd(const struct direct *d);

/* Queues one control. 0, or -1 with errno: EAGAIN (queue full, retry
 * later) or EPIPE (stalled). Never blocks. */
int direct_submit(struct direct *d, const struct direct_req *r);

/* Moves up to max finished results to out, returns how many; drains the
 * eventfd and joins workers that exited, replacing lost ones. */
size_t direct_take(struct direct *d, struct direct_res *out, size_t max);

/* The command's deadline passed. Returns 0 if it was still queued (now
 * dropped), 1 if a worker is inside it (that worker is counted lost and
 * replaced, or the path stalls), -1 if unknown (it finished meanwhile:
 * its result is on the way). */
int direct_expire(struct direct *d, uint32_t seq);

void direct_get_stats(struct direct *d, struct direct_stats *s);
int direct_is_stalled(struct direct *d);

/* Stops idle workers and frees what no worker still uses; never waits for
 * a worker inside a control. */
void direct_stop(struct direct *d);

/* The control, synchronously, on the calling thread. */
void direct_control(const char *nvidiactl, const struct direct_req *r, struct direct_res *res);

#endif
