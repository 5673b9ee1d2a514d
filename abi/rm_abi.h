/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rm_abi.h - the slice of the NVIDIA resource manager (RM) ioctl ABI that
 * gpuqos relies on: escapes, parameter blocks, classes, controls and status
 * codes, with a static assertion on every size and offset we read.
 *
 * Owns: layouts and numbers, and pure decoding helpers (which escape, which
 * alloc form, where the status word is). Does not own: any I/O. The header
 * includes nothing, so it compiles for the host, inside the preempt agent,
 * and with `clang -target bpf` for the eBPF programs.
 *
 * Values follow NVIDIA's open kernel modules (nv-ioctl-numbers.h, nvos.h,
 * cla06c.h, ctrla06c.h, nvstatuscodes.h) as shipped with driver 580.
 */
#ifndef GPUQOS_RM_ABI_H
#define GPUQOS_RM_ABI_H

typedef __UINT8_TYPE__ rm_u8;
typedef __UINT16_TYPE__ rm_u16;
typedef __UINT32_TYPE__ rm_u32;
typedef __UINT64_TYPE__ rm_u64;
typedef rm_u32 rm_handle;

#define RM_ALIGN8 __attribute__((aligned(8)))

/* ------------------------------------------------------------------ */
/* ioctl numbers                                                       */
/* ------------------------------------------------------------------ */

#define RM_IOCTL_MAGIC 'F' /* 0x46 */
#define RM_IOCTL_BASE 200

#define RM_ESC_FREE 0x29
#define RM_ESC_CONTROL 0x2a
#define RM_ESC_ALLOC 0x2b
#define RM_ESC_XFER (RM_IOCTL_BASE + 11) /* 211: NV_ESC_IOCTL_XFER_CMD */

/* Linux _IOC layout, spelled out so the header needs no <linux/ioctl.h>. */
#define RM_IOC_NRSHIFT 0
#define RM_IOC_TYPESHIFT 8
#define RM_IOC_SIZESHIFT 16
#define RM_IOC_DIRSHIFT 30
#define RM_IOC_READWRITE 3u
#define RM_IOWR(nr, size)                                                     \
	((RM_IOC_READWRITE << RM_IOC_DIRSHIFT) | ((rm_u32)(size) << RM_IOC_SIZESHIFT) | \
	 ((rm_u32)RM_IOCTL_MAGIC << RM_IOC_TYPESHIFT) | ((rm_u32)(nr) << RM_IOC_NRSHIFT))
#define RM_IOC_NR(cmd) (((rm_u32)(cmd)) & 0xffu)
#define RM_IOC_TYPE(cmd) ((((rm_u32)(cmd)) >> RM_IOC_TYPESHIFT) & 0xffu)
#define RM_IOC_SIZE(cmd) ((((rm_u32)(cmd)) >> RM_IOC_SIZESHIFT) & 0x3fffu)

/* The exact request values libcuda issues (measured: docs/rm-facts.md). */
#define RM_IOCTL_FREE 0xc0104629u      /* NVOS00, 16 bytes */
#define RM_IOCTL_CONTROL 0xc020462au   /* NVOS54, 32 bytes */
#define RM_IOCTL_ALLOC21 0xc020462bu   /* NVOS21, 32 bytes */
#define RM_IOCTL_ALLOC64 0xc030462bu   /* NVOS64, 48 bytes */
#define RM_IOCTL_XFER 0xc01046d3u      /* nv_ioctl_xfer_t, 16 bytes */

/* Largest parameter block an XFER may legitimately carry to the calls we
 * decode; anything bigger is not one of ours. */
#define RM_XFER_MAX_SIZE 4096u

/* ------------------------------------------------------------------ */
/* Parameter blocks                                                    */
/* ------------------------------------------------------------------ */

struct rm_free_params { /* NVOS00_PARAMETERS */
	rm_handle hRoot;
	rm_handle hObjectParent;
	rm_handle hObjectOld;
	rm_u32 status;
};

struct rm_alloc21_params { /* NVOS21_PARAMETERS */
	rm_handle hRoot;
	rm_handle hObjectParent;
	rm_handle hObjectNew;
	rm_u32 hClass;
	rm_u64 pAllocParms RM_ALIGN8;
	rm_u32 paramsSize;
	rm_u32 status;
};

struct rm_alloc64_params { /* NVOS64_PARAMETERS */
	rm_handle hRoot;
	rm_handle hObjectParent;
	rm_handle hObjectNew;
	rm_u32 hClass;
	rm_u64 pAllocParms RM_ALIGN8;
	rm_u64 pRightsRequested RM_ALIGN8;
	rm_u32 paramsSize;
	rm_u32 flags;
	rm_u32 status;
};

struct rm_control_params { /* NVOS54_PARAMETERS */
	rm_handle hClient;
	rm_handle hObject;
	rm_u32 cmd;
	rm_u32 flags;
	rm_u64 params RM_ALIGN8;
	rm_u32 paramsSize;
	rm_u32 status;
};

struct rm_xfer { /* nv_ioctl_xfer_t */
	rm_u32 cmd; /* the inner escape number, e.g. RM_ESC_CONTROL */
	rm_u32 size;
	rm_u64 ptr RM_ALIGN8;
};

#define RM_OFFSETOF(t, m) __builtin_offsetof(t, m)

_Static_assert(sizeof(struct rm_free_params) == 16, "NVOS00 is 16 bytes");
_Static_assert(RM_OFFSETOF(struct rm_free_params, hObjectOld) == 8, "NVOS00.hObjectOld");
_Static_assert(RM_OFFSETOF(struct rm_free_params, status) == 12, "NVOS00.status");
_Static_assert(sizeof(struct rm_alloc21_params) == 32, "NVOS21 is 32 bytes");
_Static_assert(RM_OFFSETOF(struct rm_alloc21_params, hObjectNew) == 8, "NVOS21.hObjectNew");
_Static_assert(RM_OFFSETOF(struct rm_alloc21_params, hClass) == 12, "NVOS21.hClass");
_Static_assert(RM_OFFSETOF(struct rm_alloc21_params, pAllocParms) == 16, "NVOS21.pAllocParms");
_Static_assert(RM_OFFSETOF(struct rm_alloc21_params, paramsSize) == 24, "NVOS21.paramsSize");
_Static_assert(RM_OFFSETOF(struct rm_alloc21_params, status) == 28, "NVOS21.status");
_Static_assert(sizeof(struct rm_alloc64_params) == 48, "NVOS64 is 48 bytes");
_Static_assert(RM_OFFSETOF(struct rm_alloc64_params, pAllocParms) == 16, "NVOS64.pAllocParms");
_Static_assert(RM_OFFSETOF(struct rm_alloc64_params, pRightsRequested) == 24,
	       "NVOS64.pRightsRequested");
_Static_assert(RM_OFFSETOF(struct rm_alloc64_params, paramsSize) == 32, "NVOS64.paramsSize");
_Static_assert(RM_OFFSETOF(struct rm_alloc64_params, flags) == 36, "NVOS64.flags");
_Static_assert(RM_OFFSETOF(struct rm_alloc64_params, status) == 40, "NVOS64.status");
_Static_assert(sizeof(struct rm_control_params) == 32, "NVOS54 is 32 bytes");
_Static_assert(RM_OFFSETOF(struct rm_control_params, cmd) == 8, "NVOS54.cmd");
_Static_assert(RM_OFFSETOF(struct rm_control_params, params) == 16, "NVOS54.params");
_Static_assert(RM_OFFSETOF(struct rm_control_params, paramsSize) == 24, "NVOS54.paramsSize");
_Static_assert(RM_OFFSETOF(struct rm_control_params, status) == 28, "NVOS54.status");
_Static_assert(sizeof(struct rm_xfer) == 16, "nv_ioctl_xfer_t is 16 bytes");
_Static_assert(RM_OFFSETOF(struct rm_xfer, ptr) == 8, "xfer.ptr");

_Static_assert(RM_IOWR(RM_ESC_FREE, sizeof(struct rm_free_params)) == RM_IOCTL_FREE, "free");
_Static_assert(RM_IOWR(RM_ESC_CONTROL, sizeof(struct rm_control_params)) == RM_IOCTL_CONTROL,
	       "control");
_Static_assert(RM_IOWR(RM_ESC_ALLOC, sizeof(struct rm_alloc21_params)) == RM_IOCTL_ALLOC21,
	       "alloc21");
_Static_assert(RM_IOWR(RM_ESC_ALLOC, sizeof(struct rm_alloc64_params)) == RM_IOCTL_ALLOC64,
	       "alloc64");
_Static_assert(RM_IOWR(RM_ESC_XFER, sizeof(struct rm_xfer)) == RM_IOCTL_XFER, "xfer");

/* ------------------------------------------------------------------ */
/* Classes and their allocation parameters                             */
/* ------------------------------------------------------------------ */

#define RM_CLASS_ROOT 0x0000u            /* NV01_ROOT */
#define RM_CLASS_ROOT_NON_PRIV 0x0001u   /* NV01_ROOT_NON_PRIV */
#define RM_CLASS_ROOT_CLIENT 0x0041u     /* NV01_ROOT_CLIENT */
#define RM_CLASS_DEVICE 0x0080u          /* NV01_DEVICE_0 */
#define RM_CLASS_SUBDEVICE 0x2080u       /* NV20_SUBDEVICE_0 */
#define RM_CLASS_TSG 0xa06cu             /* KEPLER_CHANNEL_GROUP_A */
#define RM_CLASS_MEMORY_SYSTEM 0x003eu   /* NV01_MEMORY_SYSTEM */
#define RM_CLASS_MEMORY_LOCAL_USER 0x0040u /* NV01_MEMORY_LOCAL_USER: video memory */
#define RM_CLASS_HOPPER_GPFIFO 0xc86fu   /* HOPPER_CHANNEL_GPFIFO_A */

/* Handles the RM generates for clients start here (like the real RM). */
#define RM_CLIENT_HANDLE_BASE 0xc1d00000u

struct rm_device_alloc { /* NV0080_ALLOC_PARAMETERS */
	rm_u32 deviceId; /* the device instance: which GPU */
	rm_handle hClientShare;
	rm_handle hTargetClient;
	rm_handle hTargetDevice;
	rm_u32 flags;
	rm_u64 vaSpaceSize RM_ALIGN8;
	rm_u64 vaStartInternal RM_ALIGN8;
	rm_u64 vaLimitInternal RM_ALIGN8;
	rm_u32 vaMode;
};
_Static_assert(sizeof(struct rm_device_alloc) == 56, "NV0080_ALLOC_PARAMETERS");
_Static_assert(RM_OFFSETOF(struct rm_device_alloc, deviceId) == 0, "deviceId");

struct rm_tsg_alloc { /* NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS */
	rm_handle hObjectError;
	rm_handle hObjectEccError;
	rm_handle hVASpace;
	rm_u32 engineType;
	rm_u8 bIsCallingContextVgpuPlugin;
};
_Static_assert(sizeof(struct rm_tsg_alloc) == 20, "channel group alloc params");
_Static_assert(RM_OFFSETOF(struct rm_tsg_alloc, engineType) == 12, "engineType");

/* NV_MEMORY_ALLOCATION_PARAMS (nvos.h): the parameters of a memory class
 * allocation (video memory 0x40, system memory 0x3e). size is in bytes,
 * rounded up by the RM on return. */
struct rm_memory_alloc {
	rm_u32 owner, type, flags, width, height, pitch, attr, attr2, format, comprCovg, zcullCovg;
	rm_u32 pad0;
	rm_u64 rangeLo, rangeHi, size, alignment, offset, limit, address;
	rm_u32 ctagOffset;
	rm_handle hVASpace;
	rm_u32 internalflags, tag, numaNode, pad1;
};
_Static_assert(sizeof(struct rm_memory_alloc) == 128, "NV_MEMORY_ALLOCATION_PARAMS");
_Static_assert(RM_OFFSETOF(struct rm_memory_alloc, size) == 64, "NV_MEMORY_ALLOCATION_PARAMS.size");
_Static_assert(RM_OFFSETOF(struct rm_memory_alloc, hVASpace) == 108, "hVASpace");
#define RM_MEMORY_FLAGS_VIRTUAL 0x00080000u /* NVOS32_ALLOC_FLAGS_VIRTUAL */

/* NV2080_CTRL_CMD_FB_GET_INFO_V2 on a subdevice: a list of (index, data)
 * pairs answered in place; the sizes are in KiB. Driver 580 sends the
 * whole list (paramsSize 1028: 128 entries). */
#define RM_CTRL_FB_GET_INFO_V2 0x20801303u
struct rm_fb_info {
	rm_u32 index, data;
};
struct rm_fb_info_v2 {
	rm_u32 fbInfoListSize;
	struct rm_fb_info fbInfoList[128];
};
_Static_assert(sizeof(struct rm_fb_info_v2) == 1028, "NV2080_CTRL_FB_GET_INFO_V2_PARAMS");
#define RM_FB_INFO_RAM_SIZE 0x07u
#define RM_FB_INFO_TOTAL_RAM_SIZE 0x08u
#define RM_FB_INFO_HEAP_SIZE 0x09u
#define RM_FB_INFO_MAPPABLE_HEAP_SIZE 0x0au
#define RM_FB_INFO_LARGEST_FREE_REGION_SIZE_KB 0x12u
#define RM_FB_INFO_HEAP_FREE 0x16u
#define RM_FB_INFO_USABLE_RAM_SIZE 0x20u

/* NV2080_ENGINE_TYPE_*: GR0..GR7 run compute and graphics; COPY0.. are the
 * copy engines (docs/rm-facts.md: a CUDA context makes one GR TSG and three
 * copy TSGs, engine types 11..13 on an H200). */
#define RM_ENGINE_GR0 0x01u
#define RM_ENGINE_GR7 0x08u
#define RM_ENGINE_COPY0 0x09u
#define RM_ENGINE_COPY9 0x12u

static inline int rm_engine_is_gr(rm_u32 engine_type)
{
	return engine_type >= RM_ENGINE_GR0 && engine_type <= RM_ENGINE_GR7;
}

static inline int rm_engine_is_copy(rm_u32 engine_type)
{
	return engine_type >= RM_ENGINE_COPY0 && engine_type <= RM_ENGINE_COPY9;
}

static inline int rm_class_is_client(rm_u32 cls)
{
	return cls == RM_CLASS_ROOT || cls == RM_CLASS_ROOT_NON_PRIV || cls == RM_CLASS_ROOT_CLIENT;
}

/* GPFIFO channel classes end in 0x6f (KEPLER_CHANNEL_GPFIFO_A 0xa06f ..
 * BLACKWELL_CHANNEL_GPFIFO_B 0xca6f). */
static inline int rm_class_is_channel(rm_u32 cls)
{
	return (cls & 0xffu) == 0x6fu && cls >= 0xa06fu && cls <= 0xcf6fu;
}

/* ------------------------------------------------------------------ */
/* TSG controls (class a06c)                                           */
/* ------------------------------------------------------------------ */

#define RM_CTRL_TSG_GPFIFO_SCHEDULE 0xa06c0101u
#define RM_CTRL_TSG_SET_TIMESLICE 0xa06c0103u
#define RM_CTRL_TSG_GET_TIMESLICE 0xa06c0104u
#define RM_CTRL_TSG_PREEMPT 0xa06c0105u
#define RM_CTRL_TSG_SET_INTERLEAVE 0xa06c0107u
#define RM_CTRL_TSG_GET_INTERLEAVE 0xa06c0108u

struct rm_tsg_timeslice { /* NVA06C_CTRL_TIMESLICE_PARAMS */
	rm_u64 timesliceUs RM_ALIGN8;
};
_Static_assert(sizeof(struct rm_tsg_timeslice) == 8, "timeslice params");

struct rm_tsg_preempt { /* NVA06C_CTRL_PREEMPT_PARAMS */
	rm_u8 bWait;
	rm_u8 bManualTimeout;
	rm_u32 timeoutUs;
};
_Static_assert(sizeof(struct rm_tsg_preempt) == 8, "preempt params");
_Static_assert(RM_OFFSETOF(struct rm_tsg_preempt, timeoutUs) == 4, "preempt.timeoutUs");

struct rm_tsg_interleave { /* NVA06C_CTRL_INTERLEAVE_LEVEL_PARAMS */
	rm_u32 tsgInterleaveLevel;
};
_Static_assert(sizeof(struct rm_tsg_interleave) == 4, "interleave params");

struct rm_tsg_gpfifo_schedule { /* NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS */
	rm_u8 bEnable;
	rm_u8 bSkipSubmit;
	rm_u8 bSkipEnable;
};
_Static_assert(sizeof(struct rm_tsg_gpfifo_schedule) == 3, "gpfifo schedule params");

/* ------------------------------------------------------------------ */
/* Channel disable (subdevice class 2080)                              */
/* ------------------------------------------------------------------ */

/* NV2080_CTRL_CMD_FIFO_DISABLE_CHANNELS, issued on a subdevice of the
 * caller's client. Measured on an H200 and an H100 (driver 580): a
 * non-root process gets NV_OK disabling and enabling its own channels;
 * a disabled channel is not scheduled until it is enabled again, so its
 * process stalls on its next wait (docs/rm-facts.md, "Channel gating"). */
#define RM_CTRL_FIFO_DISABLE_CHANNELS 0x2080110bu
#define RM_DISABLE_CHANNELS_MAX 64u

struct rm_disable_channels { /* NV2080_CTRL_FIFO_DISABLE_CHANNELS_PARAMS */
	rm_u8 bDisable;
	rm_u32 numChannels;
	rm_u8 bOnlyDisableScheduling;
	rm_u8 bRewindGpPut;
	/* A kernel event; RM refuses a non-NULL pointer from user space with
	 * NV_ERR_INSUFFICIENT_PERMISSIONS. */
	rm_u64 pRunlistPreemptEvent RM_ALIGN8;
	rm_handle hClientList[RM_DISABLE_CHANNELS_MAX];
	rm_handle hChannelList[RM_DISABLE_CHANNELS_MAX];
};
_Static_assert(sizeof(struct rm_disable_channels) == 536, "DISABLE_CHANNELS params");
_Static_assert(RM_OFFSETOF(struct rm_disable_channels, numChannels) == 4, "numChannels");
_Static_assert(RM_OFFSETOF(struct rm_disable_channels, bOnlyDisableScheduling) == 8,
	       "bOnlyDisableScheduling");
_Static_assert(RM_OFFSETOF(struct rm_disable_channels, pRunlistPreemptEvent) == 16,
	       "pRunlistPreemptEvent");
_Static_assert(RM_OFFSETOF(struct rm_disable_channels, hClientList) == 24, "hClientList");
_Static_assert(RM_OFFSETOF(struct rm_disable_channels, hChannelList) == 280, "hChannelList");

#define RM_INTERLEAVE_LOW 0u
#define RM_INTERLEAVE_MEDIUM 1u
#define RM_INTERLEAVE_HIGH 2u

/* Driver defaults observed on an H200 (docs/rm-facts.md): libcuda sets the
 * GR TSG to 2048 us once all four TSGs exist; copy TSGs stay at 1024 us. */
#define RM_DEFAULT_TIMESLICE_GR_US 2048u
#define RM_DEFAULT_TIMESLICE_COPY_US 1024u

/* ------------------------------------------------------------------ */
/* GPU identity controls (client class 0x41, subdevice class 0x2080)   */
/* ------------------------------------------------------------------ */

/* ctrl0000gpu.h; layouts confirmed on the H200 traces (driver 580, see
 * docs/gpuinfo.md): libcuda issues 0x201, 0x205 and 0x21b on its client
 * and 0x2080014a on its subdevice. A gpuId is the RM's platform id of a
 * GPU (on Linux domain << 16 | bus << 8 | slot: 6 for 0000:00:06.0). */
#define RM_CTRL_GPU_GET_ATTACHED_IDS 0x00000201u
#define RM_CTRL_GPU_GET_ID_INFO_V2 0x00000205u
#define RM_CTRL_GPU_GET_PCI_INFO 0x0000021bu
#define RM_CTRL_GPU_GET_UUID_FROM_GPU_ID 0x00000275u
#define RM_CTRL_SUBDEVICE_GET_GID_INFO 0x2080014au /* NV2080_CTRL_CMD_GPU_GET_GID_INFO */

#define RM_GPU_MAX_ATTACHED 32u          /* NV0000_CTRL_GPU_MAX_ATTACHED_GPUS */
#define RM_GPU_INVALID_ID 0xffffffffu    /* NV0000_CTRL_GPU_INVALID_ID: ends the list */
#define RM_GPU_MAX_GID_LENGTH 256u       /* NV0000_GPU_MAX_GID_LENGTH */
#define RM_GPU_UUID_LEN 16u              /* NV_UUID_LEN: the binary (SHA-1) GID */
#define RM_GPU_UUID_STR_LEN 41u          /* NV_UUID_STR_LEN: "GPU-" 8-4-4-4-12, NUL */

/* flags of GET_UUID_FROM_GPU_ID and GET_GID_INFO: FORMAT is bits 1:0,
 * TYPE bit 2 (SHA-1 is the UUID nvidia-smi shows). */
#define RM_GPU_UUID_FLAGS_FORMAT_ASCII 0x0u
#define RM_GPU_UUID_FLAGS_FORMAT_BINARY 0x2u
#define RM_GPU_UUID_FLAGS_FORMAT_MASK 0x3u
#define RM_GPU_UUID_FLAGS_TYPE_SHA256 0x4u

struct rm_gpu_attached_ids { /* NV0000_CTRL_GPU_GET_ATTACHED_IDS_PARAMS */
	rm_u32 gpuIds[RM_GPU_MAX_ATTACHED]; /* contiguous, then RM_GPU_INVALID_ID */
};
_Static_assert(sizeof(struct rm_gpu_attached_ids) == 128, "GET_ATTACHED_IDS params");

struct rm_gpu_id_info_v2 { /* NV0000_CTRL_GPU_GET_ID_INFO_V2_PARAMS */
	rm_u32 gpuId; /* in */
	rm_u32 gpuFlags;
	rm_u32 deviceInstance; /* what NV0080_ALLOC_PARAMETERS.deviceId names */
	rm_u32 subDeviceInstance;
	rm_u32 sliStatus;
	rm_u32 boardId;
	rm_u32 gpuInstance;
	rm_u32 numaId; /* NvS32: 0xffffffff (-1) when there is no NUMA node */
};
_Static_assert(sizeof(struct rm_gpu_id_info_v2) == 32, "GET_ID_INFO_V2 params");
_Static_assert(RM_OFFSETOF(struct rm_gpu_id_info_v2, deviceInstance) == 8, "deviceInstance");
_Static_assert(RM_OFFSETOF(struct rm_gpu_id_info_v2, subDeviceInstance) == 12, "subDeviceInstance");
_Static_assert(RM_OFFSETOF(struct rm_gpu_id_info_v2, numaId) == 28, "numaId");

struct rm_gpu_pci_info { /* NV0000_CTRL_GPU_GET_PCI_INFO_PARAMS */
	rm_u32 gpuId; /* in */
	rm_u32 domain;
	rm_u16 bus;
	rm_u16 slot; /* PCI device number; the function is not reported */
};
_Static_assert(sizeof(struct rm_gpu_pci_info) == 12, "GET_PCI_INFO params");
_Static_assert(RM_OFFSETOF(struct rm_gpu_pci_info, bus) == 8, "pci.bus");
_Static_assert(RM_OFFSETOF(struct rm_gpu_pci_info, slot) == 10, "pci.slot");

struct rm_gpu_uuid_from_id { /* NV0000_CTRL_GPU_GET_UUID_FROM_GPU_ID_PARAMS */
	rm_u32 gpuId; /* in */
	rm_u32 flags; /* in: RM_GPU_UUID_FLAGS_* */
	rm_u8 gpuUuid[RM_GPU_MAX_GID_LENGTH];
	rm_u32 uuidStrLen; /* 16 binary; 41 ASCII, counting the NUL */
};
_Static_assert(sizeof(struct rm_gpu_uuid_from_id) == 268, "GET_UUID_FROM_GPU_ID params");
_Static_assert(RM_OFFSETOF(struct rm_gpu_uuid_from_id, gpuUuid) == 8, "gpuUuid");
_Static_assert(RM_OFFSETOF(struct rm_gpu_uuid_from_id, uuidStrLen) == 264, "uuidStrLen");

struct rm_gpu_gid_info { /* NV2080_CTRL_GPU_GET_GID_INFO_PARAMS */
	rm_u32 index;
	rm_u32 flags; /* in: RM_GPU_UUID_FLAGS_* */
	rm_u32 length;
	rm_u8 data[RM_GPU_MAX_GID_LENGTH];
};
_Static_assert(sizeof(struct rm_gpu_gid_info) == 268, "GET_GID_INFO params");
_Static_assert(RM_OFFSETOF(struct rm_gpu_gid_info, data) == 12, "gid.data");

/* The processes on a GPU and their video memory (ctrl2080gpu.h), both on
 * a subdevice and both RMCTRL_FLAGS_NON_PRIVILEGED (docs/rm-facts.md,
 * "Video memory"). GET_PIDS with idType CLASS and id NV20_SUBDEVICE_0
 * lists the processes with a device on the GPU, with or without a
 * context, at most 950, in the caller's pid namespace. GET_PID_INFO with
 * index VIDEO_MEMORY_USAGE sums each pid's video-memory objects on it. */
#define RM_CTRL_GPU_GET_PIDS 0x2080018du
#define RM_CTRL_GPU_GET_PID_INFO 0x2080018eu
#define RM_GPU_GET_PIDS_MAX 950u               /* NV2080_CTRL_GPU_GET_PIDS_MAX_COUNT */
#define RM_GPU_GET_PIDS_ID_TYPE_CLASS 0u       /* id is a class */
#define RM_GPU_GET_PIDS_ID_TYPE_VGPU_GUEST 1u
#define RM_GPU_GET_PID_INFO_MAX 200u           /* NV2080_CTRL_GPU_GET_PID_INFO_MAX_COUNT */
#define RM_GPU_PID_INFO_VIDEO_MEMORY_USAGE 0u  /* NV2080_CTRL_GPU_PID_INFO_INDEX_* */
#define RM_PARTITIONID_INVALID 0xffffffffu     /* smcSubscription without MIG */

struct rm_gpu_get_pids { /* NV2080_CTRL_GPU_GET_PIDS_PARAMS */
	rm_u32 idType;
	rm_u32 id;
	rm_u32 pidTblCount; /* out */
	rm_u32 pidTbl[RM_GPU_GET_PIDS_MAX];
};
_Static_assert(sizeof(struct rm_gpu_get_pids) == 3812, "GET_PIDS params");
_Static_assert(RM_OFFSETOF(struct rm_gpu_get_pids, pidTbl) == 12, "pidTbl");

struct rm_gpu_vidmem_usage { /* NV2080_CTRL_GPU_PID_INFO_VIDEO_MEMORY_USAGE_DATA */
	rm_u64 memPrivate RM_ALIGN8;     /* objects only this client holds */
	rm_u64 memSharedOwned RM_ALIGN8; /* duplicated elsewhere, owned here */
	rm_u64 memSharedDuped RM_ALIGN8; /* duplicated from another client */
	rm_u64 protectedMemPrivate RM_ALIGN8;
	rm_u64 protectedMemSharedOwned RM_ALIGN8;
	rm_u64 protectedMemSharedDuped RM_ALIGN8;
};

struct rm_gpu_pid_info { /* NV2080_CTRL_GPU_PID_INFO */
	rm_u32 pid;   /* in */
	rm_u32 index; /* in: RM_GPU_PID_INFO_* */
	rm_u32 result; /* out: an RM status for this entry */
	rm_u32 pad;
	struct rm_gpu_vidmem_usage data; /* NV2080_CTRL_GPU_PID_INFO_DATA, one member */
	rm_u32 computeInstanceId, gpuInstanceId; /* smcSubscription */
};
_Static_assert(sizeof(struct rm_gpu_pid_info) == 72, "NV2080_CTRL_GPU_PID_INFO");
_Static_assert(RM_OFFSETOF(struct rm_gpu_pid_info, data) == 16, "pid_info.data");
_Static_assert(RM_OFFSETOF(struct rm_gpu_pid_info, computeInstanceId) == 64, "smcSubscription");

struct rm_gpu_get_pid_info { /* NV2080_CTRL_GPU_GET_PID_INFO_PARAMS */
	rm_u32 pidInfoListCount; /* 1 .. RM_GPU_GET_PID_INFO_MAX */
	rm_u32 pad;
	struct rm_gpu_pid_info pidInfoList[RM_GPU_GET_PID_INFO_MAX];
};
_Static_assert(sizeof(struct rm_gpu_get_pid_info) == 14408, "GET_PID_INFO params");
_Static_assert(RM_OFFSETOF(struct rm_gpu_get_pid_info, pidInfoList) == 8, "pidInfoList");

/* ------------------------------------------------------------------ */
/* Status codes (NV_STATUS)                                            */
/* ------------------------------------------------------------------ */

#define RM_OK 0x00u
#define RM_ERR_INSUFFICIENT_PERMISSIONS 0x1bu
#define RM_ERR_INVALID_ARGUMENT 0x1fu
#define RM_ERR_INVALID_CLASS 0x22u
#define RM_ERR_INVALID_CLIENT 0x23u
#define RM_ERR_INVALID_COMMAND 0x24u
#define RM_ERR_INVALID_OBJECT_HANDLE 0x33u
#define RM_ERR_INVALID_OBJECT_NEW 0x34u
#define RM_ERR_INVALID_OBJECT_PARENT 0x36u
#define RM_ERR_INVALID_PARAM_STRUCT 0x3au
#define RM_ERR_NO_MEMORY 0x51u
#define RM_ERR_INVALID_PARAMETER 0x3bu
#define RM_ERR_NOT_SUPPORTED 0x56u
#define RM_ERR_OBJECT_NOT_FOUND 0x57u /* unknown gpuId: GET_UUID_FROM_GPU_ID, GET_PCI_INFO */

/* The RM status in words, for logs and the JSON view. */
static inline const char *rm_status_name(rm_u32 status)
{
	switch (status) {
	case RM_OK:
		return "NV_OK";
	case RM_ERR_INSUFFICIENT_PERMISSIONS:
		return "NV_ERR_INSUFFICIENT_PERMISSIONS";
	case RM_ERR_INVALID_ARGUMENT:
		return "NV_ERR_INVALID_ARGUMENT";
	case RM_ERR_INVALID_CLASS:
		return "NV_ERR_INVALID_CLASS";
	case RM_ERR_INVALID_CLIENT:
		return "NV_ERR_INVALID_CLIENT";
	case RM_ERR_INVALID_COMMAND:
		return "NV_ERR_INVALID_COMMAND";
	case RM_ERR_INVALID_OBJECT_HANDLE:
		return "NV_ERR_INVALID_OBJECT_HANDLE";
	case RM_ERR_INVALID_OBJECT_NEW:
		return "NV_ERR_INVALID_OBJECT_NEW";
	case RM_ERR_INVALID_OBJECT_PARENT:
		return "NV_ERR_INVALID_OBJECT_PARENT";
	case RM_ERR_INVALID_PARAM_STRUCT:
		return "NV_ERR_INVALID_PARAM_STRUCT";
	case RM_ERR_NO_MEMORY:
		return "NV_ERR_NO_MEMORY";
	case RM_ERR_INVALID_PARAMETER:
		return "NV_ERR_INVALID_PARAMETER";
	case RM_ERR_NOT_SUPPORTED:
		return "NV_ERR_NOT_SUPPORTED";
	default:
		return "NV_ERR_(unknown)";
	}
}

/* ------------------------------------------------------------------ */
/* Decoding                                                            */
/* ------------------------------------------------------------------ */

enum rm_call_kind {
	RM_CALL_NONE = 0, /* not an RM call gpuqos decodes */
	RM_CALL_ALLOC21,
	RM_CALL_ALLOC64,
	RM_CALL_CONTROL,
	RM_CALL_FREE,
	RM_CALL_XFER, /* wrapper: unwrap with rm_xfer_kind() */
};

/* Classify an ioctl request by its exact value. Cheap enough for every
 * ioctl on the hot path: compares only, no memory access. */
static inline enum rm_call_kind rm_call_kind_of(unsigned long request)
{
	switch ((rm_u32)request) {
	case RM_IOCTL_ALLOC64:
		return RM_CALL_ALLOC64;
	case RM_IOCTL_ALLOC21:
		return RM_CALL_ALLOC21;
	case RM_IOCTL_CONTROL:
		return RM_CALL_CONTROL;
	case RM_IOCTL_FREE:
		return RM_CALL_FREE;
	case RM_IOCTL_XFER:
		return RM_CALL_XFER;
	default:
		return RM_CALL_NONE;
	}
}

/* The kind of call an XFER wrapper carries, from its inner escape and size;
 * RM_CALL_NONE for anything else (including nested XFERs). */
static inline enum rm_call_kind rm_xfer_kind(const struct rm_xfer *x)
{
	switch (x->cmd) {
	case RM_ESC_ALLOC:
		if (x->size == sizeof(struct rm_alloc64_params))
			return RM_CALL_ALLOC64;
		if (x->size == sizeof(struct rm_alloc21_params))
			return RM_CALL_ALLOC21;
		return RM_CALL_NONE;
	case RM_ESC_CONTROL:
		return x->size == sizeof(struct rm_control_params) ? RM_CALL_CONTROL : RM_CALL_NONE;
	case RM_ESC_FREE:
		return x->size == sizeof(struct rm_free_params) ? RM_CALL_FREE : RM_CALL_NONE;
	default:
		return RM_CALL_NONE;
	}
}

/* Size of the parameter block of a decoded call (0 for NONE/XFER). */
static inline rm_u32 rm_params_size(enum rm_call_kind k)
{
	switch (k) {
	case RM_CALL_ALLOC64:
		return sizeof(struct rm_alloc64_params);
	case RM_CALL_ALLOC21:
		return sizeof(struct rm_alloc21_params);
	case RM_CALL_CONTROL:
		return sizeof(struct rm_control_params);
	case RM_CALL_FREE:
		return sizeof(struct rm_free_params);
	default:
		return 0;
	}
}

/* Byte offset of the RM status word in a decoded call's parameter block.
 * ioctl() returns 0 even when the RM fails: this word is the result. */
static inline int rm_status_offset(enum rm_call_kind k)
{
	switch (k) {
	case RM_CALL_ALLOC64:
		return RM_OFFSETOF(struct rm_alloc64_params, status);
	case RM_CALL_ALLOC21:
		return RM_OFFSETOF(struct rm_alloc21_params, status);
	case RM_CALL_CONTROL:
		return RM_OFFSETOF(struct rm_control_params, status);
	case RM_CALL_FREE:
		return RM_OFFSETOF(struct rm_free_params, status);
	default:
		return -1;
	}
}

/* An allocation, whichever form: the fields gpuqos uses. */
struct rm_alloc_view {
	rm_handle hRoot;
	rm_handle hObjectParent;
	rm_handle hObjectNew;
	rm_u32 hClass;
	rm_u64 pAllocParms;
	rm_u32 paramsSize;
	rm_u32 status;
};

/* Both alloc forms name these fields alike; only their offsets differ. */
#define RM_ALLOC_VIEW_FILL(v, p)                                                \
	do {                                                                     \
		(v)->hRoot = (p)->hRoot;                                         \
		(v)->hObjectParent = (p)->hObjectParent;                         \
		(v)->hObjectNew = (p)->hObjectNew;                               \
		(v)->hClass = (p)->hClass;                                       \
		(v)->pAllocParms = (p)->pAllocParms;                             \
		(v)->paramsSize = (p)->paramsSize;                               \
		(v)->status = (p)->status;                                       \
	} while (0)

/* Fill a view from a parameter block of kind k (ALLOC21 or ALLOC64).
 * Returns 0, or -1 if k is not an allocation. */
static inline int rm_alloc_view_of(enum rm_call_kind k, const void *block, struct rm_alloc_view *v)
{
	if (k == RM_CALL_ALLOC64) {
		RM_ALLOC_VIEW_FILL(v, (const struct rm_alloc64_params *)block);
		return 0;
	}
	if (k == RM_CALL_ALLOC21) {
		RM_ALLOC_VIEW_FILL(v, (const struct rm_alloc21_params *)block);
		return 0;
	}
	return -1;
}

/* The client handle an allocation of a client class produced: the RM
 * returns it in hObjectNew (generated when the caller passed 0). */
static inline rm_handle rm_alloc_client_handle(const struct rm_alloc_view *v)
{
	return v->hObjectNew;
}

/* How many bytes of pAllocParms an allocation carries. libcuda (driver
 * 580, measured on an H200) passes paramsSize 0 in NVOS64 and lets the RM
 * take the size from the class, so for the classes gpuqos reads the class's
 * own parameter size stands in; 0 for other classes without a size. */
static inline rm_u32 rm_alloc_params_size(const struct rm_alloc_view *v)
{
	if (v->paramsSize != 0 || v->pAllocParms == 0)
		return v->pAllocParms == 0 ? 0 : v->paramsSize;
	if (v->hClass == RM_CLASS_TSG)
		return sizeof(struct rm_tsg_alloc);
	if (v->hClass == RM_CLASS_DEVICE)
		return sizeof(struct rm_device_alloc);
	if (v->hClass == RM_CLASS_MEMORY_LOCAL_USER || v->hClass == RM_CLASS_MEMORY_SYSTEM)
		return sizeof(struct rm_memory_alloc);
	return 0;
}

/* Expected paramsSize of the TSG controls gpuqos issues; 0 if unknown. */
static inline rm_u32 rm_tsg_ctrl_params_size(rm_u32 cmd)
{
	switch (cmd) {
	case RM_CTRL_TSG_SET_TIMESLICE:
	case RM_CTRL_TSG_GET_TIMESLICE:
		return sizeof(struct rm_tsg_timeslice);
	case RM_CTRL_TSG_PREEMPT:
		return sizeof(struct rm_tsg_preempt);
	case RM_CTRL_TSG_SET_INTERLEAVE:
	case RM_CTRL_TSG_GET_INTERLEAVE:
		return sizeof(struct rm_tsg_interleave);
	case RM_CTRL_TSG_GPFIFO_SCHEDULE:
		return sizeof(struct rm_tsg_gpfifo_schedule);
	default:
		return 0;
	}
}

#endif /* GPUQOS_RM_ABI_H */
