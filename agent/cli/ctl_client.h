/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ctl_client.h - one request/answer exchange with gpuqos-agent's control
 * socket (docs/ctl.md). Owns the socket and the raw bytes of the answer;
 * does not parse JSON and does not decide what the user sees.
 */
#ifndef GPUQOS_CLI_CTL_CLIENT_H
#define GPUQOS_CLI_CTL_CLIENT_H

#include <stddef.h>

/* An answer longer than this is treated as malformed rather than buffered. */
#define CTL_ANSWER_MAX (16u << 20)

enum ctl_rc {
	CTL_OK = 0,
	CTL_UNREACHABLE, /* could not connect: no agent, or no permission */
	CTL_FAILED,      /* connected, but no usable answer came back */
};

struct ctl_answer {
	char *line;     /* NUL-terminated, newline stripped; owned, free() it */
	size_t len;     /* bytes before the NUL */
	int complete;   /* 1 when the answer ended with its newline */
};

/*
 * Connects to `path`, writes `request` (one line, newline included), reads
 * the first line of the answer. Everything happens within `timeout_ms`.
 * On failure `err` holds a sentence and *err_no the errno (0 if none).
 */
enum ctl_rc ctl_exchange(const char *path, const char *request, int timeout_ms,
			 struct ctl_answer *ans, char *err, size_t errlen, int *err_no);

#endif
