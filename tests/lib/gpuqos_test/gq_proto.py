# SPDX-License-Identifier: Apache-2.0
"""gq_proto - abi/gq_proto.h in Python: the preempt agent <-> node agent
protocol (docs/protocol.md). One codec for every test that speaks it: the
fake preempt agent (tests/agent/fake_peer.py), the fake node agent of the
preempt tests, and the garbage of the fail-open tests. Sizes and layouts
are those the header's _Static_asserts pin."""
import struct

from gpuqos_test import Failure

MAGIC = 0x534F5147
VERSION = 1
(HELLO, POLICY, TSG, TSG_GONE, COMMAND, RESULT, SYNCED, ACTIVITY, WAKE, PHASE,
 WINDOW, WINDOW_STATE, REFUSED, MEMORY, MEM_USAGE, LEASE_PAGE, LEASE_PAGE_STATE) = range(1, 18)
SIZES = {HELLO: 48, POLICY: 32, TSG: 56, TSG_GONE: 24, COMMAND: 40, RESULT: 56, SYNCED: 24,
         ACTIVITY: 56, WAKE: 88, PHASE: 48, WINDOW: 64, WINDOW_STATE: 48, REFUSED: 24,
         MEMORY: 40, MEM_USAGE: 72, LEASE_PAGE: 32, LEASE_PAGE_STATE: 24}
HDR = struct.Struct("=IHHII")  # magic version type length seq
OP_SET_TS, OP_GET_TS, OP_SET_IL, OP_PREEMPT, OP_GATE, OP_UNGATE = 1, 2, 3, 4, 5, 6
ERR_UNKNOWN_TSG, ERR_EXPIRED, ERR_BAD_OP, ERR_NOT_GATEABLE = 10001, 10002, 10003, 10004
GATE_LEASE_MAX_MS = 10000
UNKNOWN = 0xFFFFFFFF
F_RECONNECT = 1
F_GATE = 2
F_ACTIVITY = 4
F_WAKE_STATS = 8
F_PHASE = 16
F_WINDOW = 32
F_SPAN = 64
F_WINDOW_STATE = 128
F_MEMORY = 256
F_LEASE_PAGE = 512
LEASE_PAGE_MAGIC, LEASE_PAGE_SIZE, LEASE_PAGE_F_ON = 0x5345414C, 4096, 1
MEM_UNLIMITED = (1 << 64) - 1
MEMORY_F_REPORT = 1
PHASE_F_SPAN = 1
WINDOW_F_ON = 1
WINDOW_F_STATE = 2
WINDOW_STATE_F_ON, WINDOW_STATE_F_REFUSED = 1, 2
REFUSED_FULL, REFUSED_SHARE, REFUSED_UNREAD = 1, 2, 3
REFUSED_RETRY_MAX_MS = 30000
WINDOW_BEFORE_MAX_US, WINDOW_AFTER_MAX_US = 10000, 100000
WINDOW_ON_MIN_PERCENT, WINDOW_LEASE_MAX_MS = 10, 2000
POLICY_F_ACTIVITY = 1
POLICY_F_WAKE = 2
POLICY_F_WAKE_STATS = 4
POLICY_F_PHASE = 8
POLICY_F_SPAN = 16
WAKE_F_STOPPED = 1
WAKE_MAX_US = 1000
ACTIVITY_PERIOD_MS, ACTIVITY_TAIL_US = 250, 200
TSG_F_GATED, TSG_F_NO_GATE, TSG_F_LEASED = 1, 2, 4
COMM_LEN = 16

# Bodies after the header: struct format and field names, in order.
BODIES = {
    HELLO: ("=IIII16s", "pid flags lib_version ntsg comm"),
    POLICY: ("=IIII", "gr_timeslice_us copy_timeslice_us flags wake"),
    TSG: ("=10I", "h_client h_tsg h_device device_instance engine_type fd "
                  "timeslice_us app_timeslice_us interleave flags"),
    TSG_GONE: ("=II", "h_client h_tsg"),
    COMMAND: ("=IIIIQ", "op h_client h_tsg deadline_us arg"),
    RESULT: ("=IIIIIIQQ", "op h_client h_tsg rm_status err reserved value elapsed_ns"),
    SYNCED: ("=II", "ntsg reserved"),
    ACTIVITY: ("=IIQQQQ", "flags reserved launches bursts active_ns at_ns"),
    WAKE: ("=II8Q", "flags reserved requests wakes hits wasted beaten not_issued stops at_ns"),
    PHASE: ("=IIQQQ", "flags span_us period_ns last_start_ns at_ns"),
    WINDOW: ("=IIQQQIIII", "flags device_instance period_ns start_ns sent_ns before_us "
                           "after_us lease_ms reserved"),
    WINDOW_STATE: ("=IIQQQ", "flags reserved opened skipped at_ns"),
    REFUSED: ("=II", "reason retry_after_ms"),
    MEMORY: ("=IIQQ", "device_instance flags limit reported_total"),
    MEM_USAGE: ("=II6Q", "device_instance flags used peak limit refused refused_bytes unknown"),
    LEASE_PAGE: ("=IIQ", "flags size sent_ns"),
    LEASE_PAGE_STATE: ("=II", "flags reserved"),
}


def hdr(mtype, seq=0, length=None, magic=MAGIC, version=VERSION):
    """A header; length, magic and version may be given wrong on purpose."""
    return HDR.pack(magic, version, mtype, SIZES[mtype] if length is None else length, seq)


def hello(seq, pid, flags=0, lib_version=1, ntsg=0, comm=b"fake_peer"):
    return hdr(HELLO, seq) + struct.pack("=IIII16s", pid, flags, lib_version, ntsg, comm)


def policy(gr, copy, seq=0, flags=0, wake=0):
    """wake: the lead and hold word (abi/gq_proto.h, GQ_WAKE_WORD), sent as
    is; give it with flags POLICY_F_WAKE."""
    return hdr(POLICY, seq) + struct.pack("=IIII", gr, copy, flags, wake)


def wake_word(lead_us, hold_us=0):
    return (lead_us & 0xFFFF) | ((hold_us & 0xFFFF) << 16)


def tsg(seq, h_client, h_tsg, h_device, device_instance, engine_type, fd,
        timeslice_us=UNKNOWN, app_timeslice_us=UNKNOWN, interleave=UNKNOWN, flags=0):
    return hdr(TSG, seq) + struct.pack("=10I", h_client, h_tsg, h_device, device_instance,
                                       engine_type, fd, timeslice_us, app_timeslice_us,
                                       interleave, flags)


def tsg_gone(seq, h_client, h_tsg):
    return hdr(TSG_GONE, seq) + struct.pack("=II", h_client, h_tsg)


def command(seq, op, h_client, h_tsg, deadline_us=2000000, arg=0):
    return hdr(COMMAND, seq) + struct.pack("=IIIIQ", op, h_client, h_tsg, deadline_us, arg)


def result(seq, op, h_client, h_tsg, rm_status, err, value, elapsed_ns=150000):
    return hdr(RESULT, seq) + struct.pack("=6IQQ", op, h_client, h_tsg, rm_status, err, 0,
                                          value, elapsed_ns)


def synced(seq, ntsg):
    return hdr(SYNCED, seq) + struct.pack("=II", ntsg, 0)


def activity(seq, launches, bursts, active_ns, at_ns, flags=0):
    return hdr(ACTIVITY, seq) + struct.pack("=IIQQQQ", flags, 0, launches, bursts, active_ns,
                                            at_ns)


def wake(seq, requests, wakes, hits, wasted, beaten, not_issued, stops, at_ns, flags=0,
         reserved=0):
    return hdr(WAKE, seq) + struct.pack("=II8Q", flags, reserved, requests, wakes, hits, wasted,
                                        beaten, not_issued, stops, at_ns)


def phase(seq, period_ns, last_start_ns, at_ns, flags=0, span_us=0):
    return hdr(PHASE, seq) + struct.pack("=IIQQQ", flags, span_us, period_ns, last_start_ns,
                                         at_ns)


def window(seq, period_ns, start_ns, sent_ns, before_us, after_us, lease_ms,
           flags=WINDOW_F_ON, device_instance=0, reserved=0):
    return hdr(WINDOW, seq) + struct.pack("=IIQQQIIII", flags, device_instance, period_ns,
                                          start_ns, sent_ns, before_us, after_us, lease_ms,
                                          reserved)


def window_state(seq, flags, opened, skipped, at_ns, reserved=0):
    return hdr(WINDOW_STATE, seq) + struct.pack("=IIQQQ", flags, reserved, opened, skipped,
                                                at_ns)


class BadMessage(Failure):
    """A datagram the header does not allow: a test failure."""


def refused(reason, retry_after_ms, seq=0):
    return hdr(REFUSED, seq) + struct.pack("=II", reason, retry_after_ms)


def memory(device_instance, limit, flags=MEMORY_F_REPORT, reported_total=0, seq=0):
    return hdr(MEMORY, seq) + struct.pack("=IIQQ", device_instance, flags, limit, reported_total)


def mem_usage(device_instance, used, peak, limit, refused=0, refused_bytes=0, unknown=0,
              flags=0, seq=0):
    return hdr(MEM_USAGE, seq) + struct.pack("=II6Q", device_instance, flags, used, peak, limit,
                                             refused, refused_bytes, unknown)


def lease_page(sent_ns, size=LEASE_PAGE_SIZE, flags=0, seq=0):
    """LEASE_PAGE; its memfd goes with it as SCM_RIGHTS (socket.send_fds)."""
    return hdr(LEASE_PAGE, seq) + struct.pack("=IIQ", flags, size, sent_ns)


def lease_page_state(flags, reserved=0, seq=0):
    return hdr(LEASE_PAGE_STATE, seq) + struct.pack("=II", flags, reserved)


def parse(buf):
    """One datagram -> dict of its fields plus "type" and "seq"; raises
    BadMessage for anything the header does not allow."""
    if len(buf) < HDR.size:
        raise BadMessage("datagram shorter than a header: %r" % buf)
    magic, version, mtype, length, seq = HDR.unpack_from(buf)
    if magic != MAGIC or version != VERSION:
        raise BadMessage("bad header %r" % buf[:HDR.size])
    if mtype not in BODIES:
        raise BadMessage("unknown type %d" % mtype)
    if not length == SIZES[mtype] == len(buf):
        raise BadMessage("bad length %d (%d bytes) for type %d" % (length, len(buf), mtype))
    fmt, names = BODIES[mtype]
    d = dict(zip(names.split(), struct.unpack(fmt, buf[HDR.size:])))
    d["type"], d["seq"] = mtype, seq
    if mtype == HELLO:
        d["comm"] = d["comm"].split(b"\0")[0].decode(errors="replace")
    return d
