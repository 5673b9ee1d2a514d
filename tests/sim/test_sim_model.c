/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_sim_model.c - unit tests of the simulator's RM model and injection
 * grammar, without FUSE, root or a mount: ownership per open file, handle
 * generation, parent rules, cascading frees (and the free of an unknown
 * object, NV_OK as on the real RM), TSG control statuses, the GPU
 * identity controls, channel gating (DISABLE_CHANNELS).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/check.h"
#include "sim_gpu.h"
#include "sim_inject.h"
#include "sim_buf.h"
#include "sim_rm.h"

static const struct sim_ctrl_inject no_inj;

static rm_u32 alloc(struct sim_rm *rm, const struct sim_call *c, rm_handle root,
		    rm_handle parent, rm_handle *h, rm_u32 cls, const void *ap, size_t len)
{
	struct rm_alloc_view v = { .hRoot = root, .hObjectParent = parent, .hObjectNew = *h,
				   .hClass = cls };
	rm_u32 st = sim_rm_alloc(rm, c, &v, ap, len);
	*h = v.hObjectNew;
	return st;
}

static rm_u32 ctrl(struct sim_rm *rm, const struct sim_call *c, rm_handle cl, rm_handle obj,
		   rm_u32 cmd, void *p, rm_u32 size)
{
	return sim_rm_control(rm, c, cl, obj, cmd, p, size, &no_inj);
}

static void test_ownership_and_tree(void)
{
	struct sim_rm *rm = sim_rm_new(2);
	struct sim_call a = { .fh = sim_rm_file_open(rm, 1), .privileged = 0 };
	struct sim_call b = { .fh = sim_rm_file_open(rm, 2), .privileged = 1 };
	struct rm_device_alloc dp = { .deviceId = 1 };
	struct rm_tsg_alloc tp = { .engineType = 11 };
	struct rm_tsg_timeslice ts = { 0 };
	rm_handle c = 0, c2 = 0, d = 0x10, t = 0x20, ch = 0x30;

	CHECK_EQ_U(alloc(rm, &a, 0, 0, &c, RM_CLASS_ROOT_CLIENT, NULL, 0), RM_OK);
	CHECK_EQ_U(c, RM_CLIENT_HANDLE_BASE);
	CHECK_EQ_U(alloc(rm, &b, 0, 0, &c2, RM_CLASS_ROOT_CLIENT, NULL, 0), RM_OK);
	CHECK_EQ_U(c2, RM_CLIENT_HANDLE_BASE + 1);
	CHECK_EQ_U(alloc(rm, &a, c, c, &d, RM_CLASS_DEVICE, &dp, sizeof(dp)), RM_OK);
	CHECK_EQ_U(alloc(rm, &a, c, d, &t, RM_CLASS_TSG, &tp, sizeof(tp)), RM_OK);
	CHECK_EQ_U(alloc(rm, &a, c, t, &ch, RM_CLASS_HOPPER_GPFIFO, NULL, 0), RM_OK);
	CHECK_EQ_U(ctrl(rm, &a, c, t, RM_CTRL_TSG_GET_TIMESLICE, &ts, sizeof(ts)), RM_OK);
	CHECK_EQ_U(ts.timesliceUs, 1024);
	CHECK_EQ_U(ctrl(rm, &b, c, t, RM_CTRL_TSG_GET_TIMESLICE, &ts, sizeof(ts)),
		   RM_ERR_INVALID_CLIENT);
	struct rm_tsg_interleave il = { 2 };
	CHECK_EQ_U(ctrl(rm, &a, c, t, RM_CTRL_TSG_SET_INTERLEAVE, &il, sizeof(il)),
		   RM_ERR_INSUFFICIENT_PERMISSIONS);
	struct rm_free_params fp = { .hRoot = c, .hObjectOld = d };
	CHECK_EQ_U(sim_rm_free(rm, &a, &fp), RM_OK);
	CHECK_EQ_U(ctrl(rm, &a, c, ch, 0xc86f0101u, NULL, 0), RM_ERR_INVALID_OBJECT_HANDLE);
	/* Freeing an object the client does not hold is NV_OK (measured);
	 * through another open file it is still the client's 0x23. */
	CHECK_EQ_U(sim_rm_free(rm, &a, &fp), RM_OK);
	CHECK_EQ_U(sim_rm_free(rm, &b, &fp), RM_ERR_INVALID_CLIENT);
	sim_rm_file_release(rm, a.fh);
	CHECK_EQ_U(ctrl(rm, &a, c, c, 0x00000101u, NULL, 0), RM_ERR_INVALID_CLIENT);
	sim_rm_destroy(rm);
}

static void test_inject_grammar(void)
{
	struct sim_inject *inj = sim_inject_new();
	struct sim_ctrl_inject out;
	uint64_t lat;
	int reset;
	const char *bad[] = { "", "latency", "latency xyz 10", "latency all -5", "fail a06c0103 0",
			      "clear extra", "bogus", "latency a06c0103 10\nbogus",
			      "unsupported all", "drop all", "drop a06c0103 0", "drop a06c0103 1 2" };

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK(sim_inject_apply(inj, bad[i], strlen(bad[i]), &reset) == -EINVAL);
	sim_inject_lookup(inj, RM_CTRL_TSG_SET_TIMESLICE, &lat, &out);
	CHECK_EQ_U(lat, 0);
	const char *good = "latency all 5\nlatency 0xa06c0103 300\nfail a06c0104 1f 1\nreset-log\n";
	CHECK_EQ_U(sim_inject_apply(inj, good, strlen(good), &reset), 0);
	CHECK_EQ_U(reset, 1);
	sim_inject_lookup(inj, RM_CTRL_TSG_SET_TIMESLICE, &lat, &out);
	CHECK_EQ_U(lat, 300);
	CHECK_EQ_U(out.fail, 0);
	sim_inject_lookup(inj, RM_CTRL_TSG_GET_TIMESLICE, &lat, &out);
	CHECK_EQ_U(lat, 5);
	CHECK_EQ_U(out.fail_status, 0x1f);
	sim_inject_lookup(inj, RM_CTRL_TSG_GET_TIMESLICE, &lat, &out);
	CHECK_EQ_U(out.fail, 0); /* counted failure used up */
	CHECK_EQ_U(sim_inject_apply(inj, "clear", 5, &reset), 0);
	sim_inject_lookup(inj, RM_CTRL_TSG_SET_TIMESLICE, &lat, &out);
	CHECK_EQ_U(lat, 0);
	/* A drop: NV_OK without running, twice. */
	const char *drop = "drop a06c0103 2";

	CHECK_EQ_U(sim_inject_apply(inj, drop, strlen(drop), &reset), 0);
	for (int i = 0; i < 2; i++) {
		sim_inject_lookup(inj, RM_CTRL_TSG_SET_TIMESLICE, &lat, &out);
		CHECK(out.fail == 1 && out.fail_status == RM_OK);
	}
	sim_inject_lookup(inj, RM_CTRL_TSG_SET_TIMESLICE, &lat, &out);
	CHECK_EQ_U(out.fail, 0);
	sim_inject_destroy(inj);
}

/* The GPU identity controls: two GPUs with gpuIds 0x6 and 0x106, the
 * statuses the RM's handlers return, GET_GID_INFO through a subdevice. */
static void test_gpu_identity(void)
{
	struct sim_rm *rm = sim_rm_new(2);
	struct sim_call a = { .fh = sim_rm_file_open(rm, 1), .privileged = 0 };
	struct rm_device_alloc dp = { .deviceId = 1 };
	struct rm_gpu_attached_ids ids;
	struct rm_gpu_id_info_v2 info = { .gpuId = 0x106 };
	struct rm_gpu_uuid_from_id u = { .gpuId = 0x106, .flags = RM_GPU_UUID_FLAGS_FORMAT_ASCII };
	struct rm_gpu_pci_info pci = { .gpuId = 0x106 };
	struct rm_gpu_gid_info gid = { .flags = RM_GPU_UUID_FLAGS_FORMAT_BINARY };
	rm_u8 bin[RM_GPU_UUID_LEN];
	rm_handle c = 0, d = 0x10, sd = 0x11;

	CHECK_EQ_U(alloc(rm, &a, 0, 0, &c, RM_CLASS_ROOT_CLIENT, NULL, 0), RM_OK);
	CHECK_EQ_U(ctrl(rm, &a, c, c, RM_CTRL_GPU_GET_ATTACHED_IDS, &ids, sizeof(ids)), RM_OK);
	CHECK_EQ_U(ids.gpuIds[0], 0x6);
	CHECK_EQ_U(ids.gpuIds[1], 0x106);
	CHECK_EQ_U(ids.gpuIds[2], RM_GPU_INVALID_ID);
	CHECK_EQ_U(ctrl(rm, &a, c, c, RM_CTRL_GPU_GET_ID_INFO_V2, &info, sizeof(info)), RM_OK);
	CHECK_EQ_U(info.deviceInstance, 1);
	CHECK_EQ_U(info.gpuFlags, 0); /* no device of it allocated yet */
	CHECK_EQ_U(ctrl(rm, &a, c, c, RM_CTRL_GPU_GET_UUID_FROM_GPU_ID, &u, sizeof(u)), RM_OK);
	CHECK(strcmp((const char *)u.gpuUuid, "GPU-73696d30-0000-4000-8000-000000000001") == 0);
	CHECK_EQ_U(u.uuidStrLen, RM_GPU_UUID_STR_LEN);
	CHECK_EQ_U(ctrl(rm, &a, c, c, RM_CTRL_GPU_GET_PCI_INFO, &pci, sizeof(pci)), RM_OK);
	CHECK_EQ_U(pci.bus, 1);
	CHECK_EQ_U(pci.slot, SIM_GPU_PCI_SLOT);
	/* Unknown gpuId: each control's own status; wrong size: 0x3a. */
	info.gpuId = u.gpuId = pci.gpuId = 0x206;
	CHECK_EQ_U(ctrl(rm, &a, c, c, RM_CTRL_GPU_GET_ID_INFO_V2, &info, sizeof(info)),
		   RM_ERR_INVALID_ARGUMENT);
	CHECK_EQ_U(ctrl(rm, &a, c, c, RM_CTRL_GPU_GET_UUID_FROM_GPU_ID, &u, sizeof(u)),
		   RM_ERR_OBJECT_NOT_FOUND);
	CHECK_EQ_U(ctrl(rm, &a, c, c, RM_CTRL_GPU_GET_PCI_INFO, &pci, sizeof(pci)),
		   RM_ERR_OBJECT_NOT_FOUND);
	CHECK_EQ_U(ctrl(rm, &a, c, c, RM_CTRL_GPU_GET_UUID_FROM_GPU_ID, &u, sizeof(u) - 4),
		   RM_ERR_INVALID_PARAM_STRUCT);
	CHECK_EQ_U(ctrl(rm, &a, c, c, RM_CTRL_GPU_GET_ATTACHED_IDS, NULL, 0),
		   RM_ERR_INVALID_PARAM_STRUCT);
	/* A client method on a device, a subdevice method on the client. */
	CHECK_EQ_U(alloc(rm, &a, c, c, &d, RM_CLASS_DEVICE, &dp, sizeof(dp)), RM_OK);
	CHECK_EQ_U(alloc(rm, &a, c, d, &sd, RM_CLASS_SUBDEVICE, NULL, 0), RM_OK);
	CHECK_EQ_U(ctrl(rm, &a, c, d, RM_CTRL_GPU_GET_ATTACHED_IDS, &ids, sizeof(ids)),
		   RM_ERR_NOT_SUPPORTED);
	CHECK_EQ_U(ctrl(rm, &a, c, c, RM_CTRL_SUBDEVICE_GET_GID_INFO, &gid, sizeof(gid)),
		   RM_ERR_NOT_SUPPORTED);
	CHECK_EQ_U(ctrl(rm, &a, c, sd, RM_CTRL_SUBDEVICE_GET_GID_INFO, &gid, sizeof(gid)), RM_OK);
	sim_gpu_uuid_bin(1, bin);
	CHECK_EQ_U(gid.length, RM_GPU_UUID_LEN);
	CHECK(memcmp(gid.data, bin, RM_GPU_UUID_LEN) == 0);
	info.gpuId = 0x106;
	CHECK_EQ_U(ctrl(rm, &a, c, c, RM_CTRL_GPU_GET_ID_INFO_V2, &info, sizeof(info)), RM_OK);
	CHECK_EQ_U(info.gpuFlags, 1); /* now in use */
	sim_rm_destroy(rm);
}

/* The state view, for substring checks. The caller frees data. */
static char *state_of(struct sim_rm *rm, uint64_t t_us)
{
	struct sim_buf b = { 0 };

	sim_rm_state_json(rm, &b, t_us);
	CHECK(!b.failed && b.data != NULL);
	return b.data;
}

static int state_has(struct sim_rm *rm, const char *what)
{
	char *s = state_of(rm, 77);
	int has = s && strstr(s, what) != NULL;

	free(s);
	return has;
}

/* DISABLE_CHANNELS: own channels only, all or nothing, on a subdevice,
 * state and counts in the view; refusals change nothing. */
static void test_disable_channels(void)
{
	struct sim_rm *rm = sim_rm_new(1);
	struct sim_call a = { .fh = sim_rm_file_open(rm, 1), .t_us = 500 };
	struct sim_call b = { .fh = sim_rm_file_open(rm, 2), .t_us = 600 };
	struct rm_device_alloc dp = { .deviceId = 0 };
	struct rm_tsg_alloc tp = { .engineType = 1 };
	struct rm_disable_channels d;
	rm_handle c = 0, c2 = 0, dev = 0x10, sub = 0x11, t = 0x20, ch0 = 0x30, ch1 = 0x31;
	rm_handle dev2 = 0x10, sub2 = 0x11, t2 = 0x20, ch2 = 0x30;

	CHECK_EQ_U(alloc(rm, &a, 0, 0, &c, RM_CLASS_ROOT_CLIENT, NULL, 0), RM_OK);
	CHECK_EQ_U(alloc(rm, &a, c, c, &dev, RM_CLASS_DEVICE, &dp, sizeof(dp)), RM_OK);
	CHECK_EQ_U(alloc(rm, &a, c, dev, &sub, RM_CLASS_SUBDEVICE, NULL, 0), RM_OK);
	CHECK_EQ_U(alloc(rm, &a, c, dev, &t, RM_CLASS_TSG, &tp, sizeof(tp)), RM_OK);
	CHECK_EQ_U(alloc(rm, &a, c, t, &ch0, RM_CLASS_HOPPER_GPFIFO, NULL, 0), RM_OK);
	CHECK_EQ_U(alloc(rm, &a, c, t, &ch1, RM_CLASS_HOPPER_GPFIFO, NULL, 0), RM_OK);
	CHECK_EQ_U(alloc(rm, &b, 0, 0, &c2, RM_CLASS_ROOT_CLIENT, NULL, 0), RM_OK);
	CHECK_EQ_U(alloc(rm, &b, c2, c2, &dev2, RM_CLASS_DEVICE, &dp, sizeof(dp)), RM_OK);
	CHECK_EQ_U(alloc(rm, &b, c2, dev2, &sub2, RM_CLASS_SUBDEVICE, NULL, 0), RM_OK);
	CHECK_EQ_U(alloc(rm, &b, c2, dev2, &t2, RM_CLASS_TSG, &tp, sizeof(tp)), RM_OK);
	CHECK_EQ_U(alloc(rm, &b, c2, t2, &ch2, RM_CLASS_HOPPER_GPFIFO, NULL, 0), RM_OK);
	CHECK(state_has(rm, "\"t_us\":77,"));
	CHECK(state_has(rm, "\"enabled\":true,\"disables\":0,\"enables\":0"));

	memset(&d, 0, sizeof(d));
	d.bDisable = 1;
	d.numChannels = 2;
	d.hClientList[0] = d.hClientList[1] = c;
	d.hChannelList[0] = ch0;
	d.hChannelList[1] = ch1;
	/* Refusals: each one leaves every channel enabled. */
	CHECK_EQ_U(ctrl(rm, &a, c, t, RM_CTRL_FIFO_DISABLE_CHANNELS, &d, sizeof(d)),
		   RM_ERR_NOT_SUPPORTED); /* a TSG is not a subdevice */
	CHECK_EQ_U(ctrl(rm, &a, c, sub, RM_CTRL_FIFO_DISABLE_CHANNELS, &d, sizeof(d) - 1),
		   RM_ERR_INVALID_PARAM_STRUCT);
	d.pRunlistPreemptEvent = 0x1000;
	CHECK_EQ_U(ctrl(rm, &a, c, sub, RM_CTRL_FIFO_DISABLE_CHANNELS, &d, sizeof(d)),
		   RM_ERR_INSUFFICIENT_PERMISSIONS);
	d.pRunlistPreemptEvent = 0;
	d.numChannels = 65;
	CHECK_EQ_U(ctrl(rm, &a, c, sub, RM_CTRL_FIFO_DISABLE_CHANNELS, &d, sizeof(d)),
		   RM_ERR_INVALID_ARGUMENT);
	d.numChannels = 2;
	d.hClientList[1] = c2; /* another file's client */
	d.hChannelList[1] = ch2;
	CHECK_EQ_U(ctrl(rm, &a, c, sub, RM_CTRL_FIFO_DISABLE_CHANNELS, &d, sizeof(d)),
		   RM_ERR_INVALID_CLIENT);
	d.hClientList[1] = c;
	d.hChannelList[1] = t; /* a TSG, not a channel */
	CHECK_EQ_U(ctrl(rm, &a, c, sub, RM_CTRL_FIFO_DISABLE_CHANNELS, &d, sizeof(d)),
		   RM_ERR_INVALID_OBJECT_HANDLE);
	d.hChannelList[1] = 0x99;
	CHECK_EQ_U(ctrl(rm, &a, c, sub, RM_CTRL_FIFO_DISABLE_CHANNELS, &d, sizeof(d)),
		   RM_ERR_INVALID_OBJECT_HANDLE);
	CHECK_EQ_U(ctrl(rm, &b, c, sub, RM_CTRL_FIFO_DISABLE_CHANNELS, &d, sizeof(d)),
		   RM_ERR_INVALID_CLIENT); /* through another open file */
	CHECK(!state_has(rm, "\"enabled\":false"));
	CHECK(state_has(rm, "\"channels_disabled\":0}"));
	/* Disable both, then enable: counts, since, the TSG's count. */
	d.hChannelList[1] = ch1;
	CHECK_EQ_U(ctrl(rm, &a, c, sub, RM_CTRL_FIFO_DISABLE_CHANNELS, &d, sizeof(d)), RM_OK);
	CHECK(state_has(rm, "\"enabled\":false,\"disables\":1,\"enables\":0,"
			    "\"onlyScheduling\":false,\"disabled_since_us\":500"));
	CHECK(state_has(rm, "\"channels_disabled\":2}"));
	a.t_us = 900;
	CHECK_EQ_U(ctrl(rm, &a, c, sub, RM_CTRL_FIFO_DISABLE_CHANNELS, &d, sizeof(d)), RM_OK);
	CHECK(state_has(rm, "\"disables\":2,\"enables\":0,\"onlyScheduling\":false,"
			    "\"disabled_since_us\":500")); /* still since the first */
	d.bDisable = 0;
	d.numChannels = 1;
	CHECK_EQ_U(ctrl(rm, &a, c, sub, RM_CTRL_FIFO_DISABLE_CHANNELS, &d, sizeof(d)), RM_OK);
	CHECK(state_has(rm, "\"enabled\":true,\"disables\":2,\"enables\":1,"
			    "\"onlyScheduling\":false,\"disabled_since_us\":null"));
	CHECK(state_has(rm, "\"channels_disabled\":1}"));
	/* Freeing the TSG takes its disabled channel with it. */
	struct rm_free_params fp = { .hRoot = c, .hObjectOld = t };
	CHECK_EQ_U(sim_rm_free(rm, &a, &fp), RM_OK);
	CHECK(!state_has(rm, "\"enabled\":false"));
	CHECK(!state_has(rm, "\"disables\":2"));
	/* The same handles again start enabled, with no counts. */
	CHECK_EQ_U(alloc(rm, &a, c, dev, &t, RM_CLASS_TSG, &tp, sizeof(tp)), RM_OK);
	CHECK_EQ_U(alloc(rm, &a, c, t, &ch0, RM_CLASS_HOPPER_GPFIFO, NULL, 0), RM_OK);
	CHECK(!state_has(rm, "\"disables\":2"));
	char want[160];
	snprintf(want, sizeof(want), "\"client\":\"0x%08x\",\"parent\":\"0x%08x\",\"class\":"
		 "\"0xc86f\",\"enabled\":true,\"disables\":0,\"enables\":0", c, t);
	CHECK(state_has(rm, want));
	/* numChannels 0 is NV_OK and touches nothing. */
	d.numChannels = 0;
	d.bDisable = 1;
	CHECK_EQ_U(ctrl(rm, &a, c, sub, RM_CTRL_FIFO_DISABLE_CHANNELS, &d, sizeof(d)), RM_OK);
	CHECK(!state_has(rm, "\"enabled\":false"));
	sim_rm_destroy(rm);
}

/* GET_PIDS and GET_PID_INFO on a subdevice: the distinct pids with a
 * device on that GPU (another GPU's and a device-less client's not), and
 * each pid's video memory there summed over its clients; bad counts,
 * indexes and id types as the RM answers them. */
static void test_gpu_pids(void)
{
	struct sim_rm *rm = sim_rm_new(2);
	struct sim_call a = { .fh = sim_rm_file_open(rm, 101) };
	struct sim_call a2 = { .fh = sim_rm_file_open(rm, 101) };
	struct sim_call b = { .fh = sim_rm_file_open(rm, 202) };
	struct sim_call c = { .fh = sim_rm_file_open(rm, 303) };
	struct rm_device_alloc d0 = { .deviceId = 0 }, d1 = { .deviceId = 1 };
	struct rm_memory_alloc m = { .size = 8u << 20 };
	static struct rm_gpu_get_pids pids;
	static struct rm_gpu_get_pid_info info;
	rm_handle ca = 0, ca2 = 0, cb = 0, cc = 0, dev = 0x10, sub = 0x11, mem = 0x12;

	CHECK_EQ_U(alloc(rm, &a, 0, 0, &ca, RM_CLASS_ROOT_CLIENT, NULL, 0), RM_OK);
	CHECK_EQ_U(alloc(rm, &a, ca, ca, &dev, RM_CLASS_DEVICE, &d0, sizeof(d0)), RM_OK);
	CHECK_EQ_U(alloc(rm, &a, ca, dev, &sub, RM_CLASS_SUBDEVICE, NULL, 0), RM_OK);
	CHECK_EQ_U(alloc(rm, &a, ca, dev, &mem, RM_CLASS_MEMORY_LOCAL_USER, &m, sizeof(m)), RM_OK);
	/* The same process again, on another file: one pid, memory summed. */
	dev = 0x10, mem = 0x12;
	CHECK_EQ_U(alloc(rm, &a2, 0, 0, &ca2, RM_CLASS_ROOT_CLIENT, NULL, 0), RM_OK);
	CHECK_EQ_U(alloc(rm, &a2, ca2, ca2, &dev, RM_CLASS_DEVICE, &d0, sizeof(d0)), RM_OK);
	CHECK_EQ_U(alloc(rm, &a2, ca2, dev, &mem, RM_CLASS_MEMORY_LOCAL_USER, &m, sizeof(m)),
		   RM_OK);
	/* Another process on GPU 1 only, a third with a client and nothing. */
	dev = 0x10, mem = 0x12;
	CHECK_EQ_U(alloc(rm, &b, 0, 0, &cb, RM_CLASS_ROOT_CLIENT, NULL, 0), RM_OK);
	CHECK_EQ_U(alloc(rm, &b, cb, cb, &dev, RM_CLASS_DEVICE, &d1, sizeof(d1)), RM_OK);
	CHECK_EQ_U(alloc(rm, &b, cb, dev, &mem, RM_CLASS_MEMORY_LOCAL_USER, &m, sizeof(m)), RM_OK);
	CHECK_EQ_U(alloc(rm, &c, 0, 0, &cc, RM_CLASS_ROOT_CLIENT, NULL, 0), RM_OK);

	memset(&pids, 0xee, sizeof(pids));
	pids.idType = RM_GPU_GET_PIDS_ID_TYPE_CLASS;
	pids.id = RM_CLASS_SUBDEVICE;
	CHECK_EQ_U(ctrl(rm, &a, ca, sub, RM_CTRL_GPU_GET_PIDS, &pids, sizeof(pids)), RM_OK);
	CHECK_EQ_U(pids.pidTblCount, 1);
	CHECK_EQ_U(pids.pidTbl[0], 101);
	/* A class no client has: nobody; a vGPU guest query: nobody. */
	pids.id = RM_CLASS_TSG;
	CHECK_EQ_U(ctrl(rm, &a, ca, sub, RM_CTRL_GPU_GET_PIDS, &pids, sizeof(pids)), RM_OK);
	CHECK_EQ_U(pids.pidTblCount, 0);
	pids.idType = RM_GPU_GET_PIDS_ID_TYPE_VGPU_GUEST;
	CHECK_EQ_U(ctrl(rm, &a, ca, sub, RM_CTRL_GPU_GET_PIDS, &pids, sizeof(pids)), RM_OK);
	CHECK_EQ_U(pids.pidTblCount, 0);
	pids.idType = 7;
	CHECK_EQ_U(ctrl(rm, &a, ca, sub, RM_CTRL_GPU_GET_PIDS, &pids, sizeof(pids)),
		   RM_ERR_INVALID_ARGUMENT);
	CHECK_EQ_U(ctrl(rm, &a, ca, sub, RM_CTRL_GPU_GET_PIDS, &pids, sizeof(pids) - 4),
		   RM_ERR_INVALID_PARAM_STRUCT);
	CHECK_EQ_U(ctrl(rm, &a, ca, 0x10, RM_CTRL_GPU_GET_PIDS, &pids, sizeof(pids)),
		   RM_ERR_NOT_SUPPORTED); /* a subdevice's method, not a device's */

	memset(&info, 0, sizeof(info));
	info.pidInfoListCount = 4;
	info.pidInfoList[0].pid = 101;
	info.pidInfoList[1].pid = 202; /* its memory is on GPU 1 */
	info.pidInfoList[2].pid = 101;
	info.pidInfoList[2].index = 1; /* no such index */
	info.pidInfoList[3].pid = 0;
	CHECK_EQ_U(ctrl(rm, &a, ca, sub, RM_CTRL_GPU_GET_PID_INFO, &info, sizeof(info)), RM_OK);
	CHECK_EQ_U(info.pidInfoList[0].result, RM_OK);
	CHECK_EQ_U(info.pidInfoList[0].data.memPrivate, 16u << 20);
	CHECK_EQ_U(info.pidInfoList[0].data.memSharedOwned, 0);
	CHECK_EQ_U(info.pidInfoList[0].gpuInstanceId, RM_PARTITIONID_INVALID);
	CHECK_EQ_U(info.pidInfoList[1].result, RM_OK);
	CHECK_EQ_U(info.pidInfoList[1].data.memPrivate, 0);
	CHECK_EQ_U(info.pidInfoList[2].result, RM_ERR_INVALID_ARGUMENT);
	CHECK_EQ_U(info.pidInfoList[3].result, RM_ERR_INVALID_ARGUMENT);
	info.pidInfoListCount = 0;
	CHECK_EQ_U(ctrl(rm, &a, ca, sub, RM_CTRL_GPU_GET_PID_INFO, &info, sizeof(info)),
		   RM_ERR_INVALID_ARGUMENT);
	info.pidInfoListCount = RM_GPU_GET_PID_INFO_MAX + 1;
	CHECK_EQ_U(ctrl(rm, &a, ca, sub, RM_CTRL_GPU_GET_PID_INFO, &info, sizeof(info)),
		   RM_ERR_INVALID_ARGUMENT);
	sim_rm_destroy(rm);
}

int main(void)
{
	test_gpu_pids();
	test_ownership_and_tree();
	test_disable_channels();
	test_inject_grammar();
	test_gpu_identity();
	CHECK_DONE();
}
