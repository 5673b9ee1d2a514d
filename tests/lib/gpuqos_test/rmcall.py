# SPDX-License-Identifier: Apache-2.0
"""rmcall.py - RM calls made from a test's own Python process, the ones the
tests need and the workloads (fakecuda) do not make alone: an allocation
(NVOS21), a free (NVOS00) and DISABLE_CHANNELS (NVOS54 on a subdevice).
Layouts and numbers as abi/rm_abi.h has them. Each raises OSError on an
ioctl error or an RM status other than 0.
"""
import ctypes
import fcntl
import struct

RM_IOCTL_FREE = 0xC0104629  # NVOS00
RM_IOCTL_CONTROL = 0xC020462A  # NVOS54
RM_IOCTL_ALLOC21 = 0xC020462B  # NVOS21
NVOS00 = "=IIII"
NVOS21 = "=IIIIQII"
NVOS54 = "=IIIIQII"
DISABLE_CHANNELS = 0x2080110B  # on a subdevice; params: struct rm_disable_channels (536 bytes)

CLASS_CLIENT = 0x0041
CLASS_DEVICE = 0x0080
CLASS_SUBDEVICE = 0x2080
CLASS_TSG = 0xA06C
CLASS_CHANNEL = 0xC86F  # a GPFIFO class


def rm_alloc(fd, root, parent, new, cls, params=b""):
    """One allocation on fd; returns the new handle."""
    buf = ctypes.create_string_buffer(params, len(params)) if params else None
    b = bytearray(struct.pack(NVOS21, root, parent, new, cls,
                              ctypes.addressof(buf) if buf else 0, len(params), 0))
    fcntl.ioctl(fd, RM_IOCTL_ALLOC21, b, True)
    out = struct.unpack(NVOS21, b)
    if out[6] != 0:
        raise OSError("alloc of class 0x%04x: RM status 0x%x" % (cls, out[6]))
    return out[2]


def rm_device(fd, client, handle, gpu=0):
    return rm_alloc(fd, client, client, handle, CLASS_DEVICE, struct.pack("=I52x", gpu))


def rm_tsg(fd, client, device, handle, engine=1):
    return rm_alloc(fd, client, device, handle, CLASS_TSG, struct.pack("=12xI4x", engine))


def rm_free(fd, client, parent, obj):
    b = bytearray(struct.pack(NVOS00, client, parent, obj, 0))
    fcntl.ioctl(fd, RM_IOCTL_FREE, b, True)
    status = struct.unpack(NVOS00, b)[3]
    if status != 0:
        raise OSError("free of 0x%08x: RM status 0x%x" % (obj, status))


def rm_disable(fd, client, subdevice, channel, off):
    """DISABLE_CHANNELS (bDisable = off) of one channel of client, through
    its subdevice, as the preempt agent gates."""
    params = bytearray(536)
    struct.pack_into("=BxxxI", params, 0, 1 if off else 0, 1)
    struct.pack_into("=I", params, 24, client)
    struct.pack_into("=I", params, 280, channel)
    buf = ctypes.create_string_buffer(bytes(params), len(params))
    b = bytearray(struct.pack(NVOS54, client, subdevice, DISABLE_CHANNELS, 0, ctypes.addressof(buf),
                              len(params), 0))
    fcntl.ioctl(fd, RM_IOCTL_CONTROL, b, True)
    status = struct.unpack(NVOS54, b)[6]
    if status != 0:
        raise OSError("DISABLE_CHANNELS: RM status 0x%x" % status)
