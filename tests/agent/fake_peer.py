# SPDX-License-Identifier: Apache-2.0
"""fake_peer.py - a stand-in for the injected preempt agent, run as its own
process so the node agent sees a real pid (SO_PEERCRED), a real
/proc/<pid>/environ and a real open fd on the control-device file.

Driven over stdin with one JSON object per line; reports what it receives
on stdout, one JSON object per line. Speaks abi/gq_proto.h version 1.
Owns nothing of the node agent; it only plays the preempt agent's part.
"""
import errno
import fcntl
import json
import mmap
import os
import selectors
import socket
import struct
import sys
import time

# The protocol's one Python codec (tests/lib; PYTHONPATH comes from ctest
# through the harness's environment).
from gpuqos_test import gq_proto
from gpuqos_test.gq_proto import (COMMAND, HELLO, LEASE_PAGE, MEM_UNLIMITED, MEMORY, OP_GATE, OP_GET_TS, OP_SET_IL,
                                  OP_SET_TS, OP_UNGATE, POLICY, REFUSED, RESULT, SYNCED, TSG, TSG_F_GATED,
                                  TSG_F_LEASED, TSG_GONE, UNKNOWN, WINDOW, hdr)
from gpuqos_test.rmcall import (CLASS_CHANNEL, CLASS_CLIENT, CLASS_SUBDEVICE, rm_alloc, rm_device, rm_disable,
                                rm_tsg)


class Peer:
    def __init__(self, path, ctl_path):
        self.path = path
        self.ctlfd = os.open(ctl_path, os.O_RDWR)  # libcuda's nvidiactl fd
        self.sock = None
        self.seq = 0
        self.tsgs = {}  # (client, tsg) -> dict
        self.answer = True  # answer COMMANDs
        # Report each GATE and UNGATE answered as the library would (GATED,
        # LEASED), without any RM call: a peer that lies about its gates.
        self.gate_reports = False
        self.status = {}  # op -> rm_status to answer with
        self.hello_pid = os.getpid()
        # More HELLO flags ("set" changes them before a reconnect); ACTIVITY
        # (0x4) as the preempt agent where it counts launches.
        self.hello_flags = 4
        self.reconnect = True
        self.connects = 0
        self.held = []  # unanswered commands while silent
        self.sel = selectors.DefaultSelector()
        self.sel.register(sys.stdin, selectors.EVENT_READ, "stdin")
        self.next_try = 0.0
        self.inbuf = b""
        # "flip": re-report one TSG every interval with these flags toggled.
        self.flip = None
        # Memory per GPU as the library counts it (MEM_USAGE fields; "mem"
        # sets them and reports), and the budget each MEMORY set.
        self.mem = {}
        self.mem_ok = False
        self.mem_limit = {}  # gpu -> the budget its last MEMORY set
        self.objs = None  # (client, subdevice, channel) of the last "alloc"
        # LEASE_PAGE: the page mapped read-only, and what to answer (ON, or
        # 0 to refuse it).
        self.lease = None
        self.lease_answer = gq_proto.LEASE_PAGE_F_ON

    def mem_msg(self, gpu):
        m = self.mem[gpu]
        self.seq += 1
        limit = self.mem_limit.get(gpu, MEM_UNLIMITED)
        return gq_proto.mem_usage(int(gpu), m["used"], m["peak"], limit, m["refused"],
                                  m["refused_bytes"], m["unknown"], m["flags"], seq=self.seq)

    def emit(self, **ev):
        sys.stdout.write(json.dumps(ev) + "\n")
        sys.stdout.flush()

    def send(self, data):
        try:
            self.sock.send(data)
        except OSError as e:
            self.emit(ev="send_error", error=str(e))

    def tsg_msg(self, t):
        self.seq += 1
        return hdr(TSG, self.seq) + struct.pack(
            "=10I", t["client"], t["tsg"], t.get("device", 0x5c000001), t.get("gpu", 0),
            t["engine"], t.get("fd", self.ctlfd), t.get("ts", UNKNOWN), t.get("app", UNKNOWN),
            t.get("il", UNKNOWN), t.get("flags", 0))

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            s.connect(self.path)
        except OSError:
            s.close()
            self.next_try = time.monotonic() + 0.05
            return
        self.sock = s
        self.sel.register(s, selectors.EVENT_READ, "sock")
        self.seq += 1
        flags = (1 if self.connects else 0) | self.hello_flags
        self.connects += 1
        self.send(hdr(HELLO, self.seq) + struct.pack("=4I16s", self.hello_pid, flags, 1,
                                                     len(self.tsgs), b"fake_peer"))
        for t in self.tsgs.values():
            self.send(self.tsg_msg(t))
        self.seq += 1
        self.send(hdr(SYNCED, self.seq) + struct.pack("=II", len(self.tsgs), 0))
        # As the library does: no MEM_USAGE on a connection before a MEMORY.
        self.mem_ok = False
        self.emit(ev="connected", n=self.connects)

    def disconnect(self):
        if self.sock:
            self.sel.unregister(self.sock)
            self.sock.close()
            self.sock = None
            self.lease = None
            self.emit(ev="disconnected")
        self.next_try = time.monotonic() + 0.05

    def result(self, seq, op, client, tsg, status, err, value):
        self.send(hdr(RESULT, seq) + struct.pack("=6IQQ", op, client, tsg, status, err, 0,
                                                 value, 150000))

    def on_command(self, seq, op, client, tsg, deadline, arg):
        # t: when it came (monotonic seconds), to count commands per second
        self.emit(ev="command", seq=seq, op=op, client=client, tsg=tsg, deadline=deadline,
                  arg=arg, t=time.monotonic())
        if not self.answer:
            self.held.append((seq, op, client, tsg, arg))
            return
        t = self.tsgs.get((client, tsg))
        if t is None:
            self.result(seq, op, client, tsg, 0, 10001, 0)
            return
        status = self.status.get(str(op), 0)
        value = arg
        if status == 0 and op == OP_SET_TS:
            t["ts"] = arg
        elif status == 0 and op == OP_SET_IL:
            t["il"] = arg
        elif op == OP_GET_TS:
            value = t.get("ts", UNKNOWN)
            if value == UNKNOWN:  # never set: RM reads back the driver default
                value = 2048 if t["engine"] <= 8 else 1024
        self.result(seq, op, client, tsg, status, 0, value)
        if self.gate_reports and status == 0 and op in (OP_GATE, OP_UNGATE):
            said = TSG_F_GATED | TSG_F_LEASED if op == OP_GATE else TSG_F_LEASED if arg else 0
            t["flags"] = (t.get("flags", 0) & ~(TSG_F_GATED | TSG_F_LEASED)) | said
            self.send(self.tsg_msg(t))

    def try_write(self, fd):
        """What a hostile peer tries with the page: the errors it got."""
        tried = {}
        for what, fn in (("write", lambda: os.pwrite(fd, b"x" * 8, 8)),
                         ("ftruncate", lambda: os.ftruncate(fd, 0)),
                         ("mmap_write", lambda: mmap.mmap(fd, gq_proto.LEASE_PAGE_SIZE))):
            try:
                fn()
                tried[what] = "done"
            except OSError as e:
                tried[what] = errno.errorcode.get(e.errno, str(e.errno))
        return tried

    def on_lease_page(self, data, fds):
        m = gq_proto.parse(data)
        ev = {"ev": "lease_page", "fds": len(fds), "size": m["size"], "sent_ns": m["sent_ns"]}
        if fds:
            fd = fds[0]
            ev["seals"] = fcntl.fcntl(fd, fcntl.F_GET_SEALS)
            ev["tried"] = self.try_write(fd)
            self.lease = mmap.mmap(fd, gq_proto.LEASE_PAGE_SIZE, prot=mmap.PROT_READ)
            ev["magic"], ev["version"] = struct.unpack_from("=II", self.lease, 0)
        for fd in fds:
            os.close(fd)
        self.emit(**ev)
        self.seq += 1
        self.send(gq_proto.lease_page_state(self.lease_answer, seq=self.seq))

    def on_sock(self):
        fds = []
        try:
            data, fds, _, _ = socket.recv_fds(self.sock, 256, 1)
        except OSError:
            data = b""
        if not data:
            for fd in fds:
                os.close(fd)
            self.disconnect()
            return
        magic, ver, mtype, length, seq = struct.unpack_from("=IHHII", data)
        if mtype == LEASE_PAGE:
            self.on_lease_page(data, fds)
            return
        for fd in fds:
            os.close(fd)
        if mtype == POLICY:
            gr, copy, flags, wake = struct.unpack_from("=IIII", data, 16)
            self.emit(ev="policy", gr=gr, copy=copy, flags=flags, wake=wake)
        elif mtype == COMMAND:
            op, client, tsg, deadline, arg = struct.unpack_from("=4IQ", data, 16)
            self.on_command(seq, op, client, tsg, deadline, arg)
        elif mtype == WINDOW:
            w = gq_proto.parse(data)
            self.emit(ev="window", **{k: w[k] for k in (
                "flags", "device_instance", "period_ns", "start_ns", "sent_ns", "before_us",
                "after_us", "lease_ms", "reserved")})
        elif mtype == MEMORY:
            m = gq_proto.parse(data)
            gpu = str(m["device_instance"])
            self.mem_limit[gpu] = m["limit"]
            self.emit(ev="memory", gpu=m["device_instance"], flags=m["flags"], limit=m["limit"],
                      total=m["reported_total"])
            if not self.mem_ok:  # from the first MEMORY on: every GPU it has seen
                self.mem_ok = True
                for g in self.mem:
                    self.send(self.mem_msg(g))
        elif mtype == REFUSED:
            r = gq_proto.parse(data)
            self.emit(ev="refused", reason=r["reason"], retry_after_ms=r["retry_after_ms"])
            # As the library does: no sooner than the agent asked.
            self.disconnect()
            self.next_try = time.monotonic() + r["retry_after_ms"] / 1000.0
        else:
            self.emit(ev="unexpected", type=mtype)

    def on_stdin(self):
        data = os.read(0, 65536)
        if not data:
            sys.exit(0)
        self.inbuf += data
        while b"\n" in self.inbuf:
            line, self.inbuf = self.inbuf.split(b"\n", 1)
            self.on_line(json.loads(line))

    def on_line(self, c):
        op = c.pop("op")
        if op == "alloc":  # real objects: client, device, subdevice, a TSG of engine, one channel
            client = rm_alloc(self.ctlfd, 0, 0, 0, CLASS_CLIENT)
            dev = rm_device(self.ctlfd, client, 0x5D000001, c.get("gpu", 0))
            sub = rm_alloc(self.ctlfd, client, dev, 0x5D000002, CLASS_SUBDEVICE)
            tsg = rm_tsg(self.ctlfd, client, dev, 0x5D000010, c.get("engine", 1))
            chan = rm_alloc(self.ctlfd, client, tsg, 0x5D000020, CLASS_CHANNEL)
            self.objs = (client, sub, chan)
            self.emit(ev="alloc", client=client, device=dev, tsg=tsg, channel=chan)
        elif op == "disable":  # {off}: the channel of the last "alloc" disabled (1) or enabled (0)
            client, sub, chan = self.objs
            rm_disable(self.ctlfd, client, sub, chan, c["off"])
        elif op == "tsg":
            self.tsgs[(c["client"], c["tsg"])] = c
            if self.sock:
                self.send(self.tsg_msg(c))
        elif op == "forget":  # gone without telling (only a resync shows it)
            self.tsgs.pop((c["client"], c["tsg"]), None)
        elif op == "gone":
            self.tsgs.pop((c["client"], c["tsg"]), None)
            self.seq += 1
            self.send(hdr(TSG_GONE, self.seq) + struct.pack("=II", c["client"], c["tsg"]))
        elif op == "flood":  # n TSG claims at once (handles tsg, tsg+1, ...), not kept
            for i in range(c["n"]):
                t = {"client": c["client"], "tsg": c["tsg"] + i, "engine": c.get("engine", 1),
                     "fd": c.get("fd", self.ctlfd)}
                self.send(self.tsg_msg(t))
        elif op == "mem":  # {gpu, used, [peak, refused, ...]}: set and report MEM_USAGE
            gpu = str(c.pop("gpu"))
            m = self.mem.setdefault(gpu, {"used": 0, "peak": 0, "refused": 0, "refused_bytes": 0,
                                          "unknown": 0, "flags": 0})
            m.update(c)
            if "peak" not in c:
                m["peak"] = max(m["peak"], m["used"])
            if self.sock and self.mem_ok:
                self.send(self.mem_msg(gpu))
        elif op == "raw":
            self.send(bytes.fromhex(c["hex"]))
        elif op == "lease":  # what the lease page says now
            until = struct.unpack_from("=Q", self.lease, 8)[0] if self.lease else None
            self.emit(ev="lease", until_ns=until, now_ns=time.clock_gettime_ns(time.CLOCK_MONOTONIC))
        elif op == "set":
            for k, v in c.items():
                setattr(self, k, v)
        elif op == "release":  # answer the commands held while silent
            held, self.held = self.held, []
            for seq, cop, client, tsg, arg in held:
                self.result(seq, cop, client, tsg, 0, 0, arg)
        elif op == "result":
            self.result(c["seq"], c["cmd"], c["client"], c["tsg"], 0, 0, 0)
        elif op == "resync":  # HELLO again on the same connection, only some TSGs
            keep = list(self.tsgs.values())[:c["keep"]]
            self.seq += 1
            self.send(hdr(HELLO, self.seq) + struct.pack("=4I16s", self.hello_pid, 0, 1,
                                                         len(keep), b"fake_peer"))
            for t in keep:
                self.send(self.tsg_msg(t))
            self.seq += 1
            self.send(hdr(SYNCED, self.seq) + struct.pack("=II", len(keep), 0))
        elif op == "flip":  # {client, tsg, flags, every_ms, n}: n reports, flags toggled
            self.flip = {"key": (c["client"], c["tsg"]), "flags": c["flags"],
                         "every": c["every_ms"] / 1000.0, "left": c["n"],
                         "next": time.monotonic()}
        elif op == "reconnect":
            self.disconnect()
            self.next_try = 0
        self.emit(ev="done", op=op)

    def flip_due(self):
        """Re-reports the flipping TSG when due; the seconds until the next."""
        f = self.flip
        now = time.monotonic()
        if now >= f["next"]:
            t = self.tsgs.get(f["key"])
            if t is not None and self.sock:
                t["flags"] = t.get("flags", 0) ^ f["flags"]
                self.send(self.tsg_msg(t))
            f["left"] -= 1
            f["next"] = now + f["every"]
            if f["left"] <= 0:
                self.flip = None
                self.emit(ev="flipped")
                return None
        return max(0.0, f["next"] - now)

    def run(self):
        while True:
            if self.sock is None and self.reconnect and time.monotonic() >= self.next_try:
                self.connect()
            timeout = None if self.sock else 0.02
            if self.flip is not None:
                due = self.flip_due()
                if due is not None:
                    timeout = due if timeout is None else min(timeout, due)
            for key, _ in self.sel.select(timeout):
                if key.data == "stdin":
                    self.on_stdin()
                elif self.sock is not None:
                    self.on_sock()


if __name__ == "__main__":
    Peer(sys.argv[1], sys.argv[2]).run()
