/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sim_gpu.c - the simulated GPUs' identities and the controls that read
 * them (see sim_gpu.h). Statuses follow the RM's own handlers
 * (client_resource.c, gpu_mgr.c of the open kernel modules):
 * GET_ID_INFO_V2 answers NV_ERR_INVALID_ARGUMENT for a gpuId it does not
 * know, GET_UUID_FROM_GPU_ID and GET_PCI_INFO NV_ERR_OBJECT_NOT_FOUND.
 */
#include "sim_gpu.h"

#include <stdio.h>
#include <string.h>

/* Recorded on the H200 (fixture seq 17): the SLI status word of a GPU
 * that is not in SLI, and no NUMA node. */
#define SIM_GPU_SLI_STATUS 0x41u
#define SIM_GPU_NO_NUMA 0xffffffffu
#define SIM_GPU_ID_IN_USE 0x1u /* NV0000_CTRL_GPU_ID_INFO_IN_USE */

rm_u32 sim_gpu_id(unsigned index)
{
	return ((rm_u32)index << 8) | SIM_GPU_PCI_SLOT;
}

int sim_gpu_index(unsigned gpus, rm_u32 gpu_id)
{
	for (unsigned i = 0; i < gpus; i++)
		if (sim_gpu_id(i) == gpu_id)
			return (int)i;
	return -1;
}

/* The bytes spell "sim0" first, so a simulated UUID is never mistaken for
 * a real one in a log; the index makes each GPU's unique. */
void sim_gpu_uuid_bin(unsigned index, rm_u8 out[RM_GPU_UUID_LEN])
{
	static const rm_u8 base[RM_GPU_UUID_LEN] = { 's', 'i', 'm', '0', 0, 0, 0x40, 0,
						     0x80, 0, 0, 0, 0, 0, 0, 0 };

	memcpy(out, base, RM_GPU_UUID_LEN);
	out[14] = (rm_u8)(index >> 8);
	out[15] = (rm_u8)index;
}

/* The RM's spelling (nvGetUuidString): lower-case hex, 8-4-4-4-12. */
void sim_gpu_uuid_str(unsigned index, char out[RM_GPU_UUID_STR_LEN])
{
	rm_u8 u[RM_GPU_UUID_LEN];

	sim_gpu_uuid_bin(index, u);
	snprintf(out, RM_GPU_UUID_STR_LEN,
		 "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0],
		 u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
		 u[14], u[15]);
}

void sim_gpu_pci_bus_id(unsigned index, char *out, size_t len)
{
	snprintf(out, len, "%08x:%02x:%02x.0", 0u, index & 0xffu, SIM_GPU_PCI_SLOT);
}

rm_u32 sim_gpu_ctrl_params_size(rm_u32 cmd)
{
	switch (cmd) {
	case RM_CTRL_GPU_GET_ATTACHED_IDS:
		return sizeof(struct rm_gpu_attached_ids);
	case RM_CTRL_GPU_GET_ID_INFO_V2:
		return sizeof(struct rm_gpu_id_info_v2);
	case RM_CTRL_GPU_GET_PCI_INFO:
		return sizeof(struct rm_gpu_pci_info);
	case RM_CTRL_GPU_GET_UUID_FROM_GPU_ID:
		return sizeof(struct rm_gpu_uuid_from_id);
	case RM_CTRL_SUBDEVICE_GET_GID_INFO:
		return sizeof(struct rm_gpu_gid_info);
	default:
		return 0;
	}
}

int sim_gpu_is_client_ctrl(rm_u32 cmd)
{
	return cmd != RM_CTRL_SUBDEVICE_GET_GID_INFO && sim_gpu_ctrl_params_size(cmd) != 0;
}

/* The UUID in the form flags ask for, as GET_UUID_FROM_GPU_ID and
 * GET_GID_INFO both write it. SHA-256 GIDs are not modelled. */
static rm_u32 sim_gpu_uuid_out(unsigned index, rm_u32 flags, rm_u8 *buf, rm_u32 *len)
{
	if (flags & RM_GPU_UUID_FLAGS_TYPE_SHA256)
		return RM_ERR_INVALID_ARGUMENT;
	memset(buf, 0, RM_GPU_MAX_GID_LENGTH);
	if ((flags & RM_GPU_UUID_FLAGS_FORMAT_MASK) == RM_GPU_UUID_FLAGS_FORMAT_BINARY) {
		sim_gpu_uuid_bin(index, buf);
		*len = RM_GPU_UUID_LEN;
	} else {
		sim_gpu_uuid_str(index, (char *)buf);
		*len = RM_GPU_UUID_STR_LEN; /* the RM counts the NUL */
	}
	return RM_OK;
}

static rm_u32 sim_gpu_id_info(unsigned gpus, uint64_t in_use, struct rm_gpu_id_info_v2 *p)
{
	int i = sim_gpu_index(gpus, p->gpuId);

	if (i < 0)
		return RM_ERR_INVALID_ARGUMENT;
	p->gpuFlags = (in_use >> i) & 1u ? SIM_GPU_ID_IN_USE : 0;
	p->deviceInstance = (rm_u32)i;
	p->subDeviceInstance = 0;
	p->sliStatus = SIM_GPU_SLI_STATUS;
	p->boardId = p->gpuId;
	p->gpuInstance = (rm_u32)i;
	p->numaId = SIM_GPU_NO_NUMA;
	return RM_OK;
}

rm_u32 sim_gpu_client_control(unsigned gpus, uint64_t in_use, rm_u32 cmd, void *params)
{
	int i;

	switch (cmd) {
	case RM_CTRL_GPU_GET_ATTACHED_IDS: {
		struct rm_gpu_attached_ids *p = params;
		for (unsigned k = 0; k < RM_GPU_MAX_ATTACHED; k++)
			p->gpuIds[k] = k < gpus ? sim_gpu_id(k) : RM_GPU_INVALID_ID;
		return RM_OK;
	}
	case RM_CTRL_GPU_GET_ID_INFO_V2:
		return sim_gpu_id_info(gpus, in_use, params);
	case RM_CTRL_GPU_GET_PCI_INFO: {
		struct rm_gpu_pci_info *p = params;
		if ((i = sim_gpu_index(gpus, p->gpuId)) < 0)
			return RM_ERR_OBJECT_NOT_FOUND;
		p->domain = 0;
		p->bus = (rm_u16)i;
		p->slot = SIM_GPU_PCI_SLOT;
		return RM_OK;
	}
	case RM_CTRL_GPU_GET_UUID_FROM_GPU_ID: {
		struct rm_gpu_uuid_from_id *p = params;
		if ((i = sim_gpu_index(gpus, p->gpuId)) < 0)
			return RM_ERR_OBJECT_NOT_FOUND;
		return sim_gpu_uuid_out((unsigned)i, p->flags, p->gpuUuid, &p->uuidStrLen);
	}
	default:
		return RM_OK;
	}
}

rm_u32 sim_gpu_gid_info(unsigned index, struct rm_gpu_gid_info *p)
{
	return sim_gpu_uuid_out(index, p->flags, p->data, &p->length);
}

void sim_gpu_state_json(unsigned gpus, struct sim_buf *b)
{
	char uuid[RM_GPU_UUID_STR_LEN], pci[32];

	sim_buf_printf(b, ",\"attached_gpus\":[");
	for (unsigned i = 0; i < gpus; i++) {
		sim_gpu_uuid_str(i, uuid);
		sim_gpu_pci_bus_id(i, pci, sizeof(pci));
		sim_buf_printf(b, "%s{\"deviceInstance\":%u,\"gpuId\":\"0x%08x\",\"uuid\":\"%s\","
			       "\"pciBusId\":\"%s\"}", i ? "," : "", i, sim_gpu_id(i), uuid, pci);
	}
	sim_buf_printf(b, "]");
}
