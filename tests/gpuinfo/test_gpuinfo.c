/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_gpuinfo.c - unit tests of agent/gpuinfo.c's parsing and
 * formatting, fed with the bytes the H200 returned to libcuda (fixture
 * h200-580.159.04-cuda13-lc_micro.jsonl, seq 17, 19, 36) and with
 * malformed answers; and of gpuinfo_query's failures without a driver.
 */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <string.h>

#include "agent/io/gpuinfo.h"
#include "tests/check.h"

static size_t unhex(const char *s, uint8_t *out, size_t max)
{
	size_t n = 0;

	while (s[0] && s[1] && n < max) {
		unsigned v;
		if (sscanf(s, "%2x", &v) != 1)
			break;
		out[n++] = (uint8_t)v;
		s += 2;
	}
	return n;
}

/* seq 19: GET_ATTACHED_IDS answered one gpuId (6), the rest invalid. */
static void test_attached(void)
{
	struct rm_gpu_attached_ids p;
	uint32_t ids[RM_GPU_MAX_ATTACHED];

	memset(&p, 0xff, sizeof(p));
	CHECK_EQ_U(unhex("06000000ffffffff", (uint8_t *)&p, sizeof(p)), 8);
	CHECK_EQ_U(gpuinfo_parse_attached(&p, ids, RM_GPU_MAX_ATTACHED), 1);
	CHECK_EQ_U(ids[0], 6);
	/* Contiguous: whatever follows the first invalid entry is ignored. */
	p.gpuIds[1] = RM_GPU_INVALID_ID;
	p.gpuIds[2] = 0x100;
	CHECK_EQ_U(gpuinfo_parse_attached(&p, ids, RM_GPU_MAX_ATTACHED), 1);
	memset(&p, 0xff, sizeof(p));
	CHECK_EQ_U(gpuinfo_parse_attached(&p, ids, RM_GPU_MAX_ATTACHED), 0);
	for (unsigned i = 0; i < RM_GPU_MAX_ATTACHED; i++)
		p.gpuIds[i] = i;
	CHECK_EQ_U(gpuinfo_parse_attached(&p, ids, 4), 4);
	CHECK_EQ_U(gpuinfo_parse_attached(&p, ids, RM_GPU_MAX_ATTACHED), RM_GPU_MAX_ATTACHED);
}

/* seq 17: GET_ID_INFO_V2 for gpuId 6: device instance 0. */
static void test_id_info_layout(void)
{
	struct rm_gpu_id_info_v2 p;

	CHECK_EQ_U(unhex("06000000010000000000000000000000410000000600000000000000ffffffff",
			 (uint8_t *)&p, sizeof(p)),
		   sizeof(p));
	CHECK_EQ_U(p.gpuId, 6);
	CHECK_EQ_U(p.gpuFlags, 1);
	CHECK_EQ_U(p.deviceInstance, 0);
	CHECK_EQ_U(p.subDeviceInstance, 0);
	CHECK_EQ_U(p.sliStatus, 0x41);
	CHECK_EQ_U(p.boardId, 6);
	CHECK_EQ_U(p.numaId, 0xffffffffu);
}

/* seq 36: GET_GID_INFO (binary, flags 2) gave these 16 bytes; the
 * binary form of GET_UUID_FROM_GPU_ID carries the same. */
static void test_uuid_binary(void)
{
	struct rm_gpu_gid_info gid;
	struct rm_gpu_uuid_from_id u;
	char out[RM_GPU_UUID_STR_LEN];

	memset(&gid, 0, sizeof(gid));
	unhex("0000000002000000100000002f4311e733dd3d3f5c2e8e924d8d11ce", (uint8_t *)&gid,
	      sizeof(gid));
	CHECK_EQ_U(gid.flags, RM_GPU_UUID_FLAGS_FORMAT_BINARY);
	CHECK_EQ_U(gid.length, RM_GPU_UUID_LEN);
	gpuinfo_format_uuid(gid.data, out);
	CHECK(strcmp(out, "GPU-2f4311e7-33dd-3d3f-5c2e-8e924d8d11ce") == 0);

	memset(&u, 0, sizeof(u));
	memcpy(u.gpuUuid, gid.data, RM_GPU_UUID_LEN);
	u.uuidStrLen = RM_GPU_UUID_LEN;
	CHECK_EQ_U(gpuinfo_parse_uuid(&u, RM_GPU_UUID_FLAGS_FORMAT_BINARY, out), 0);
	CHECK(strcmp(out, "GPU-2f4311e7-33dd-3d3f-5c2e-8e924d8d11ce") == 0);
	u.uuidStrLen = 15;
	CHECK(gpuinfo_parse_uuid(&u, RM_GPU_UUID_FLAGS_FORMAT_BINARY, out) == -1);
	CHECK(out[0] == '\0');
}

static int parse_ascii(const char *s, uint32_t len, char out[RM_GPU_UUID_STR_LEN])
{
	struct rm_gpu_uuid_from_id u;

	memset(&u, 0, sizeof(u));
	memcpy(u.gpuUuid, s, strlen(s));
	u.uuidStrLen = len;
	return gpuinfo_parse_uuid(&u, RM_GPU_UUID_FLAGS_FORMAT_ASCII, out);
}

static void test_uuid_ascii(void)
{
	const char *good = "GPU-2f4311e7-33dd-3d3f-5c2e-8e924d8d11ce";
	char out[RM_GPU_UUID_STR_LEN];

	CHECK_EQ_U(parse_ascii(good, RM_GPU_UUID_STR_LEN, out), 0); /* NUL counted */
	CHECK(strcmp(out, good) == 0);
	CHECK_EQ_U(parse_ascii(good, RM_GPU_UUID_STR_LEN - 1, out), 0);
	CHECK_EQ_U(parse_ascii("GPU-2F4311E7-33DD-3D3F-5C2E-8E924D8D11CE", 41, out), 0);
	CHECK(strcmp(out, good) == 0); /* spelled like nvidia-smi */
	CHECK(parse_ascii(good, 16, out) == -1);
	CHECK(parse_ascii(good, 42, out) == -1);
	CHECK(parse_ascii("MIG-2f4311e7-33dd-3d3f-5c2e-8e924d8d11ce", 41, out) == -1);
	CHECK(parse_ascii("GPU-2f4311e7-33dd-3d3f-5c2e-8e924d8d11cz", 41, out) == -1);
	CHECK(parse_ascii("GPU-2f4311e733dd-3d3f-5c2e-8e924d8d11ce", 41, out) == -1);
	CHECK(parse_ascii("GPU-2f4311e7-33dd-3d3f-5c2e-8e924d8d11c", 41, out) == -1);
	CHECK(out[0] == '\0');
}

/* seq 108 of the PyTorch trace: gpuId 6 sits at 0000:00:06 (no function). */
static void test_pci(void)
{
	struct rm_gpu_pci_info p;
	char out[GPUINFO_PCI_MAX];

	CHECK_EQ_U(unhex("060000000000000000000600", (uint8_t *)&p, sizeof(p)), sizeof(p));
	gpuinfo_format_pci(&p, out, sizeof(out));
	CHECK(strcmp(out, "00000000:00:06.0") == 0);
	p.domain = 0x10000;
	p.bus = 0xc1;
	p.slot = 0x1f;
	gpuinfo_format_pci(&p, out, sizeof(out));
	CHECK(strcmp(out, "00010000:c1:1f.0") == 0);
}

static void test_table(void)
{
	static struct gpuinfo_table t;
	cJSON *j;
	char *s;

	memset(&t, 0, sizeof(t));
	t.n = 2;
	t.gpus[0] = (struct gpuinfo_gpu){ .gpu_id = 6, .device_instance = 0 };
	strcpy(t.gpus[0].uuid, "GPU-2f4311e7-33dd-3d3f-5c2e-8e924d8d11ce");
	strcpy(t.gpus[0].pci_bus_id, "00000000:00:06.0");
	t.gpus[0].fb_heap_bytes = 80ull << 30;
	t.gpus[1] = (struct gpuinfo_gpu){ .gpu_id = 0x106, .device_instance = 1,
					  .status = RM_ERR_OBJECT_NOT_FOUND };
	strcpy(t.gpus[1].fb_error, "FB_GET_INFO_V2 (0x20801303): NV_ERR_NOT_SUPPORTED (0x56)");
	CHECK(gpuinfo_table_find(&t, 1) == &t.gpus[1]);
	CHECK(gpuinfo_table_find(&t, 2) == NULL);
	j = gpuinfo_table_json(&t);
	CHECK(j != NULL);
	s = cJSON_PrintUnformatted(j);
	CHECK(s && strcmp(s, "[{\"deviceInstance\":0,\"subDeviceInstance\":0,\"gpuId\":\"0x6\","
			     "\"uuid\":\"GPU-2f4311e7-33dd-3d3f-5c2e-8e924d8d11ce\","
			     "\"pciBusId\":\"00000000:00:06.0\",\"memoryBytes\":85899345920},"
			     "{\"deviceInstance\":1,"
			     "\"subDeviceInstance\":0,\"gpuId\":\"0x106\",\"uuid\":null,"
			     "\"pciBusId\":null,\"error\":\"NV_ERR_OBJECT_NOT_FOUND\","
			     "\"memoryBytes\":null,\"memoryError\":\"FB_GET_INFO_V2 (0x20801303): "
			     "NV_ERR_NOT_SUPPORTED (0x56)\"}]") == 0);
	cJSON_free(s);
	cJSON_Delete(j);
	CHECK(strcmp(gpuinfo_status_name(0x57), "NV_ERR_OBJECT_NOT_FOUND") == 0);
	CHECK(strcmp(gpuinfo_status_name(0x1f), "NV_ERR_INVALID_ARGUMENT") == 0);
}

/* No driver, or a file that is not one: nothing listed, the failure
 * named with the object and errno in words. */
static void test_query_failures(void)
{
	static struct gpuinfo_table t;

	CHECK(gpuinfo_query("/nonexistent/nvidiactl", GPUINFO_Q_MEMORY, &t) == -1);
	CHECK(!t.listed && t.n == 0);
	CHECK(strcmp(t.error, "open /nonexistent/nvidiactl: No such file or directory") == 0);
	CHECK(gpuinfo_query("/dev/null", GPUINFO_Q_MEMORY, &t) == -1);
	CHECK(strstr(t.error, "/dev/null: allocating an RM client: ioctl: ") == t.error);
}

/* GET_PIDS answers: 0 and the caller's own pid left out, at most max
 * kept while all are counted; a count past the table is refused. */
static void test_pids(void)
{
	static struct rm_gpu_get_pids p;
	uint32_t out[2], listed;

	memset(&p, 0, sizeof(p));
	p.pidTblCount = 5;
	p.pidTbl[0] = 40;
	p.pidTbl[1] = 7; /* the caller */
	p.pidTbl[2] = 0;
	p.pidTbl[3] = 41;
	p.pidTbl[4] = 42;
	p.pidTbl[5] = 43; /* past the count */
	CHECK_EQ_U(gpuprocs_parse_pids(&p, 7, out, 2, &listed), 2);
	CHECK_EQ_U(listed, 3);
	CHECK(out[0] == 40 && out[1] == 41);
	p.pidTblCount = RM_GPU_GET_PIDS_MAX + 1;
	CHECK(gpuprocs_parse_pids(&p, 7, out, 2, &listed) == -1);
	CHECK_EQ_U(listed, 0);
}

int main(void)
{
	test_pids();
	test_attached();
	test_id_info_layout();
	test_uuid_binary();
	test_uuid_ascii();
	test_pci();
	test_table();
	test_query_failures();
	CHECK_DONE();
}
