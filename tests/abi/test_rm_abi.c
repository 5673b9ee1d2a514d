/* SPDX-License-Identifier: Apache-2.0 */
/* Decoding of RM ioctls: request classification, XFER unwrap, status
 * location, both alloc forms, against values measured on an H200. */
#include <stddef.h>
#include <string.h>
#include <sys/ioctl.h>

#include "abi/rm_abi.h"
#include "tests/check.h"

static void test_requests(void)
{
	/* The values libcuda was seen issuing (docs/rm-facts.md). */
	CHECK_EQ_U(rm_call_kind_of(0xc030462bUL), RM_CALL_ALLOC64);
	CHECK_EQ_U(rm_call_kind_of(0xc020462aUL), RM_CALL_CONTROL);
	CHECK_EQ_U(rm_call_kind_of(0xc020462bUL), RM_CALL_ALLOC21);
	CHECK_EQ_U(rm_call_kind_of(0xc0104629UL), RM_CALL_FREE);
	CHECK_EQ_U(rm_call_kind_of(0xc01046d3UL), RM_CALL_XFER);
	/* Our macros agree with the kernel's. */
	CHECK_EQ_U(_IOWR('F', 0x2b, struct rm_alloc64_params), RM_IOCTL_ALLOC64);
	CHECK_EQ_U(_IOWR('F', 0x2a, struct rm_control_params), RM_IOCTL_CONTROL);
	CHECK_EQ_U(_IOWR('F', 211, struct rm_xfer), RM_IOCTL_XFER);
	CHECK_EQ_U(RM_IOC_NR(RM_IOCTL_ALLOC64), 0x2b);
	CHECK_EQ_U(RM_IOC_SIZE(RM_IOCTL_ALLOC64), 48);
	CHECK_EQ_U(RM_IOC_TYPE(RM_IOCTL_ALLOC64), 'F');
	/* Not ours: other escapes, other sizes, other magics, other dirs. */
	CHECK_EQ_U(rm_call_kind_of(TCGETS), RM_CALL_NONE);
	CHECK_EQ_U(rm_call_kind_of(0xc0384657UL), RM_CALL_NONE); /* map memory */
	CHECK_EQ_U(rm_call_kind_of(0xc028462bUL), RM_CALL_NONE); /* alloc, 40 bytes */
	CHECK_EQ_U(rm_call_kind_of(0xc030472bUL), RM_CALL_NONE); /* magic 'G' */
	CHECK_EQ_U(rm_call_kind_of(0x8030462bUL), RM_CALL_NONE); /* read-only */
	CHECK_EQ_U(rm_call_kind_of(0x4600UL), RM_CALL_NONE);     /* FBIOGET_VSCREENINFO */
	/* Upper bits of a 64-bit request are ignored by the kernel too. */
	CHECK_EQ_U(rm_call_kind_of(0xffffffffc020462aUL), RM_CALL_CONTROL);
}

static void test_xfer(void)
{
	struct rm_xfer x = {.cmd = RM_ESC_ALLOC, .size = 48};

	CHECK_EQ_U(rm_xfer_kind(&x), RM_CALL_ALLOC64);
	x.size = 32;
	CHECK_EQ_U(rm_xfer_kind(&x), RM_CALL_ALLOC21);
	x.size = 40;
	CHECK_EQ_U(rm_xfer_kind(&x), RM_CALL_NONE);
	x.cmd = RM_ESC_CONTROL;
	x.size = 32;
	CHECK_EQ_U(rm_xfer_kind(&x), RM_CALL_CONTROL);
	x.size = 0xffffffffu;
	CHECK_EQ_U(rm_xfer_kind(&x), RM_CALL_NONE);
	x.cmd = RM_ESC_FREE;
	x.size = 16;
	CHECK_EQ_U(rm_xfer_kind(&x), RM_CALL_FREE);
	x.cmd = RM_ESC_XFER; /* nested wrappers are not unwrapped */
	x.size = 16;
	CHECK_EQ_U(rm_xfer_kind(&x), RM_CALL_NONE);
	x.cmd = 0x4a; /* vid heap control: not decoded */
	CHECK_EQ_U(rm_xfer_kind(&x), RM_CALL_NONE);
}

static void test_status(void)
{
	struct rm_control_params c;
	struct rm_alloc64_params a;
	struct rm_alloc21_params a21;
	struct rm_free_params f;
	unsigned char *p;

	memset(&c, 0, sizeof(c));
	c.status = RM_ERR_INSUFFICIENT_PERMISSIONS;
	p = (unsigned char *)&c;
	CHECK_EQ_U(*(rm_u32 *)(p + rm_status_offset(RM_CALL_CONTROL)), 0x1b);

	memset(&a, 0, sizeof(a));
	a.status = RM_ERR_INVALID_CLIENT;
	p = (unsigned char *)&a;
	CHECK_EQ_U(*(rm_u32 *)(p + rm_status_offset(RM_CALL_ALLOC64)), 0x23);

	memset(&a21, 0, sizeof(a21));
	a21.status = 7;
	p = (unsigned char *)&a21;
	CHECK_EQ_U(*(rm_u32 *)(p + rm_status_offset(RM_CALL_ALLOC21)), 7);

	memset(&f, 0, sizeof(f));
	f.status = 9;
	p = (unsigned char *)&f;
	CHECK_EQ_U(*(rm_u32 *)(p + rm_status_offset(RM_CALL_FREE)), 9);

	CHECK(rm_status_offset(RM_CALL_NONE) < 0);
	CHECK(rm_status_offset(RM_CALL_XFER) < 0);
	CHECK_EQ_U(rm_params_size(RM_CALL_ALLOC64), 48);
	CHECK_EQ_U(rm_params_size(RM_CALL_XFER), 0);
	CHECK(strcmp(rm_status_name(0x1b), "NV_ERR_INSUFFICIENT_PERMISSIONS") == 0);
	CHECK(strcmp(rm_status_name(0x56), "NV_ERR_NOT_SUPPORTED") == 0);
	CHECK(strcmp(rm_status_name(0x23), "NV_ERR_INVALID_CLIENT") == 0);
	CHECK(strcmp(rm_status_name(0x12345), "NV_ERR_(unknown)") == 0);
}

static void test_alloc_views(void)
{
	struct rm_alloc64_params a64 = {
		.hRoot = 0xc1d00001u, .hObjectParent = 0xcaf00001u, .hObjectNew = 0xcaf00010u,
		.hClass = RM_CLASS_TSG, .pAllocParms = 0x1000, .paramsSize = 20, .status = 0};
	struct rm_alloc21_params a21 = {
		.hRoot = 0, .hObjectParent = 0, .hObjectNew = 0xc1d00042u,
		.hClass = RM_CLASS_ROOT_CLIENT, .pAllocParms = 0x2000, .paramsSize = 4, .status = 0};
	struct rm_alloc_view v;

	CHECK(rm_alloc_view_of(RM_CALL_ALLOC64, &a64, &v) == 0);
	CHECK_EQ_U(v.hRoot, 0xc1d00001u);
	CHECK_EQ_U(v.hObjectParent, 0xcaf00001u);
	CHECK_EQ_U(v.hObjectNew, 0xcaf00010u);
	CHECK_EQ_U(v.hClass, 0xa06c);
	CHECK_EQ_U(v.pAllocParms, 0x1000);
	CHECK_EQ_U(v.paramsSize, 20);

	CHECK(rm_alloc_view_of(RM_CALL_ALLOC21, &a21, &v) == 0);
	CHECK(rm_class_is_client(v.hClass));
	CHECK_EQ_U(rm_alloc_client_handle(&v), 0xc1d00042u);
	CHECK(rm_alloc_view_of(RM_CALL_CONTROL, &a21, &v) < 0);
}

static void test_classes(void)
{
	CHECK(rm_engine_is_gr(1));
	CHECK(!rm_engine_is_gr(11));
	CHECK(rm_engine_is_copy(11) && rm_engine_is_copy(12) && rm_engine_is_copy(13));
	CHECK(!rm_engine_is_copy(0));
	CHECK(rm_class_is_client(0x41) && rm_class_is_client(0) && !rm_class_is_client(0x80));
	CHECK(rm_class_is_channel(0xc86f) && rm_class_is_channel(0xc56f));
	CHECK(!rm_class_is_channel(0xa06c) && !rm_class_is_channel(0x006f));
	CHECK_EQ_U(rm_tsg_ctrl_params_size(RM_CTRL_TSG_SET_TIMESLICE), 8);
	CHECK_EQ_U(rm_tsg_ctrl_params_size(RM_CTRL_TSG_PREEMPT), 8);
	CHECK_EQ_U(rm_tsg_ctrl_params_size(RM_CTRL_TSG_SET_INTERLEAVE), 4);
	CHECK_EQ_U(rm_tsg_ctrl_params_size(RM_CTRL_TSG_GPFIFO_SCHEDULE), 3);
	CHECK_EQ_U(rm_tsg_ctrl_params_size(0x20800101u), 0);
	CHECK_EQ_U(offsetof(struct rm_tsg_alloc, engineType), 12);
}

int main(void)
{
	test_requests();
	test_xfer();
	test_status();
	test_alloc_views();
	test_classes();
	CHECK_DONE();
}
