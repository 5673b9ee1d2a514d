/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ctl_json.h - typed, checked access to the members of a control-socket
 * answer. Every getter either yields a value of the documented type or
 * records, once, which member was wrong ("tsgs[2].timeslice: missing
 * \"applied\""), so a malformed answer becomes one clear sentence instead of
 * a crash. Knows JSON types, not what the members mean.
 */
#ifndef GPUQOS_CLI_CTL_JSON_H
#define GPUQOS_CLI_CTL_JSON_H

#include <cjson/cJSON.h>
#include <stddef.h>

struct jerr {
	char msg[512]; /* the first problem found; empty while none */
};

/* flags */
#define J_REQ 0      /* must be present and not null */
#define J_NULL 1     /* null is accepted and reads as absent */
#define J_OPT 2      /* a missing member reads as absent */
#define J_ANY (J_NULL | J_OPT)

/*
 * Each getter returns 1 when a value was stored, 0 when the member is absent
 * in a way `flags` allows, -1 when it is malformed (recorded in e).
 * `where` names the object for the message ("answer", "tsgs[3]").
 */
int j_int(struct jerr *e, const cJSON *o, const char *where, const char *key,
	  int flags, long long *v);
int j_str(struct jerr *e, const cJSON *o, const char *where, const char *key,
	  int flags, const char **v);
int j_bool(struct jerr *e, const cJSON *o, const char *where, const char *key,
	   int flags, int *v);
int j_obj(struct jerr *e, const cJSON *o, const char *where, const char *key,
	  int flags, const cJSON **v);
int j_arr(struct jerr *e, const cJSON *o, const char *where, const char *key,
	  int flags, const cJSON **v);

/* An errno member: an integer, or the string "timeout" (docs/ctl.md). */
struct jerrno {
	int present;
	int timeout;
	long long num;
};
int j_errno(struct jerr *e, const cJSON *o, const char *where, const char *key,
	    int flags, struct jerrno *v);

__attribute__((format(printf, 2, 3)))
void j_fail(struct jerr *e, const char *fmt, ...);

#endif
