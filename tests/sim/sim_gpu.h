/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sim_gpu.h - who the simulated GPUs are: for each device instance a
 * gpuId, a PCI location and a UUID, all derived from the index so that
 * every run and every test sees the same ones, and the RM controls that
 * read them (GET_ATTACHED_IDS, GET_ID_INFO_V2, GET_PCI_INFO and
 * GET_UUID_FROM_GPU_ID on a client, GET_GID_INFO on a subdevice).
 *
 * Owns: the identities and those controls' answers and statuses. Does
 * not own: looking up the client, object or parameter copy (sim_rm.c
 * does those first, in the RM's order). No I/O, no lock: pure functions.
 */
#ifndef GPUQOS_SIM_GPU_H
#define GPUQOS_SIM_GPU_H

#include <stddef.h>
#include <stdint.h>

#include "abi/rm_abi.h"
#include "sim_buf.h"

/* Device instance i sits at PCI 0000:i:06.0, so its gpuId is
 * (i << 8) | 6: GPU 0 then has the gpuId (6) and slot of the recorded
 * H200, and the controls libcuda issued there with gpuId 6 name GPU 0
 * when a trace is replayed. */
#define SIM_GPU_PCI_SLOT 6u

rm_u32 sim_gpu_id(unsigned index);
/* The index of gpuId among gpus GPUs; -1 if none has it. */
int sim_gpu_index(unsigned gpus, rm_u32 gpu_id);
void sim_gpu_uuid_bin(unsigned index, rm_u8 out[RM_GPU_UUID_LEN]);
/* "GPU-73696d30-0000-4000-8000-0000000000ii" (ii = index in hex). */
void sim_gpu_uuid_str(unsigned index, char out[RM_GPU_UUID_STR_LEN]);
/* "00000000:ii:06.0", the spelling nvidia-smi uses. */
void sim_gpu_pci_bus_id(unsigned index, char *out, size_t len);

/* The paramsSize a GPU identity control requires; 0 for other commands. */
rm_u32 sim_gpu_ctrl_params_size(rm_u32 cmd);
/* Whether cmd is one of the client (class 0x41) controls modelled here. */
int sim_gpu_is_client_ctrl(rm_u32 cmd);

/* Run a client control on params (the right size, checked by the
 * caller). in_use has bit i set when some client holds a device of
 * instance i. Returns the RM status. */
rm_u32 sim_gpu_client_control(unsigned gpus, uint64_t in_use, rm_u32 cmd, void *params);

/* GET_GID_INFO on a subdevice of device instance index. */
rm_u32 sim_gpu_gid_info(unsigned index, struct rm_gpu_gid_info *p);

/* ,"attached_gpus":[{"deviceInstance","gpuId","uuid","pciBusId"}...] */
void sim_gpu_state_json(unsigned gpus, struct sim_buf *b);

#endif
