/* SPDX-License-Identifier: Apache-2.0 */
/* The shared validator of the preempt-agent protocol: every malformed or
 * truncated datagram is rejected with the right reason. */
#include <string.h>

#include "abi/gq_proto.h"
#include "tests/check.h"

int main(void)
{
	struct gq_command cmd;
	unsigned char buf[GQ_MSG_MAX];
	rm_u32 t;

	memset(&cmd, 0, sizeof(cmd));
	gq_hdr_init(&cmd.hdr, GQ_COMMAND, 7);
	CHECK_EQ_U(cmd.hdr.length, sizeof(cmd));
	CHECK_EQ_U(gq_msg_check(&cmd, sizeof(cmd)), GQ_CHECK_OK);

	/* Every truncation of a valid message is rejected. */
	for (unsigned long n = 0; n < sizeof(cmd); n++) {
		enum gq_check c = gq_msg_check(&cmd, n);
		CHECK(c == (n < sizeof(struct gq_hdr) ? GQ_CHECK_SHORT : GQ_CHECK_LENGTH));
	}
	/* Trailing bytes are rejected too. */
	memset(buf, 0, sizeof(buf));
	memcpy(buf, &cmd, sizeof(cmd));
	CHECK_EQ_U(gq_msg_check(buf, sizeof(cmd) + 1), GQ_CHECK_LENGTH);

	cmd.hdr.magic ^= 1;
	CHECK_EQ_U(gq_msg_check(&cmd, sizeof(cmd)), GQ_CHECK_MAGIC);
	cmd.hdr.magic ^= 1;
	cmd.hdr.version = 2;
	CHECK_EQ_U(gq_msg_check(&cmd, sizeof(cmd)), GQ_CHECK_VERSION);
	cmd.hdr.version = GQ_PROTO_VERSION;
	cmd.hdr.type = 0;
	CHECK_EQ_U(gq_msg_check(&cmd, sizeof(cmd)), GQ_CHECK_TYPE);
	cmd.hdr.type = GQ_TYPE_MAX + 1;
	CHECK_EQ_U(gq_msg_check(&cmd, sizeof(cmd)), GQ_CHECK_TYPE);
	cmd.hdr.type = GQ_COMMAND;
	cmd.hdr.length = sizeof(cmd) + 8; /* lies about its length */
	CHECK_EQ_U(gq_msg_check(&cmd, sizeof(cmd)), GQ_CHECK_LENGTH);

	/* A header of one type carrying another type's size. */
	cmd.hdr.length = sizeof(cmd);
	cmd.hdr.type = GQ_HELLO;
	CHECK_EQ_U(gq_msg_check(&cmd, sizeof(cmd)), GQ_CHECK_LENGTH);

	/* Every type has a size, and every size fits in GQ_MSG_MAX. */
	for (t = 1; t <= GQ_TYPE_MAX; t++) {
		CHECK(gq_msg_size(t) >= sizeof(struct gq_hdr));
		CHECK(gq_msg_size(t) <= GQ_MSG_MAX);
	}
	CHECK(strcmp(gq_check_name(GQ_CHECK_MAGIC), "bad magic") == 0);
	CHECK_DONE();
}
