#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""preempt_test.py - libgpuqos-preempt.so preloaded into rm_workload, which
talks to libfake_rm.so, while this script plays the node agent on a
SOCK_SEQPACKET socket (docs/protocol.md).

Owns: one scenario per ctest entry (see SCENARIOS). Does not own: the
protocol layouts (abi/gq_proto.h; tests/lib/gpuqos_test/gq_proto.py), the fake RM.
Every wait has a timeout; nothing sleeps longer than it has to.
"""
import argparse
import fcntl
import json
import mmap
import re
import os
import select
import socket
import struct
import subprocess
import tempfile
import time

# The protocol's one Python codec and the test library (tests/lib,
# PYTHONPATH from ctest).
from gpuqos_test import Failure, check, run_main
from gpuqos_test import gq_proto
from gpuqos_test.gq_proto import (COMMAND, ERR_BAD_OP, ERR_EXPIRED, ERR_UNKNOWN_TSG,  # noqa: F401
                                  ERR_NOT_GATEABLE, F_ACTIVITY, F_GATE, F_RECONNECT, GATE_LEASE_MAX_MS, HDR,
                                  HELLO, MAGIC, OP_GATE, OP_PREEMPT, OP_UNGATE, POLICY, RESULT,
                                  SYNCED, TSG, TSG_F_GATED, TSG_F_LEASED, TSG_F_NO_GATE,
                                  TSG_GONE, UNKNOWN, ACTIVITY, ACTIVITY_PERIOD_MS,
                                  ACTIVITY_TAIL_US, POLICY_F_ACTIVITY, POLICY_F_WAKE,
                                  F_WAKE_STATS, POLICY_F_WAKE_STATS, WAKE, WAKE_F_STOPPED,
                                  F_PHASE, POLICY_F_PHASE, PHASE, F_WINDOW, window,
                                  F_WINDOW_STATE, F_MEMORY, F_LEASE_PAGE, WINDOW_F_ON, WINDOW_F_STATE, WINDOW_STATE,
                                  WINDOW_STATE_F_ON, WINDOW_STATE_F_REFUSED,
                                  F_SPAN, POLICY_F_SPAN, PHASE_F_SPAN,
                                  WINDOW_BEFORE_MAX_US, WINDOW_LEASE_MAX_MS,
                                  VERSION, command, hdr, policy, wake_word,
                                  REFUSED_SHARE, REFUSED_RETRY_MAX_MS, refused)

OP_SET, OP_GET, OP_INTERLEAVE = gq_proto.OP_SET_TS, gq_proto.OP_GET_TS, gq_proto.OP_SET_IL
# What the library's HELLO says it does (launch counting on).
HELLO_FLAGS = (F_GATE | F_ACTIVITY | F_WAKE_STATS | F_PHASE | F_WINDOW | F_SPAN | F_WINDOW_STATE
               | F_MEMORY | F_LEASE_PAGE)
CLIENT = 0xC1D00000
DEVICE = 0x5E000000
TSGS = [0x5E000001, 0x5E000002, 0x5E000003, 0x5E000004]
ENGINES = [1, 11, 12, 13]
CHILD_TSG = 0x7C000001
NO_TSG = 0xDEADBEEF


def policy_body(gr, copy):
    return policy(gr, copy)[HDR.size:]


def parse(buf):
    """A datagram from the preempt agent: never one only the node agent
    sends."""
    d = gq_proto.parse(buf)
    check(d["type"] not in (POLICY, COMMAND), "the preempt agent sent type %d" % d["type"])
    return d


class Conn:
    """One accepted connection; messages not yet asked for wait in pending."""

    def __init__(self, sock):
        self.s = sock
        self.pending = []

    def send(self, data):
        self.s.send(data)

    def send_fd(self, data, fd):
        socket.send_fds(self.s, [data], [fd])

    def _recv(self, deadline):
        left = deadline - time.monotonic()
        r, _, _ = select.select([self.s], [], [], max(left, 0))
        check(r, "timed out waiting for the preempt agent")
        data = self.s.recv(1024)
        check(data, "the preempt agent closed the connection")
        return parse(data)

    def take(self, mtype, pred=lambda d: True, timeout=5.0):
        deadline = time.monotonic() + timeout
        while True:
            for d in self.pending:
                if d["type"] == mtype and pred(d):
                    self.pending.remove(d)
                    return d
            self.pending.append(self._recv(deadline))

    def command(self, seq, op, tsg, client=CLIENT, deadline_us=2000000, arg=0):
        self.send(command(seq, op, client, tsg, deadline_us, arg))
        r = self.take(RESULT, lambda d: d["seq"] == seq)
        check(r["op"] == op and r["h_client"] == client and r["h_tsg"] == tsg,
              "RESULT does not echo the command: %r" % r)
        return r

    def barrier(self, seq):
        """Every datagram sent before is handled once this answers."""
        r = self.command(seq, OP_GET, NO_TSG)
        check(r["err"] == ERR_UNKNOWN_TSG, "unknown TSG: %r" % r)

    def close(self):
        self.s.close()


class Agent:
    def __init__(self, path):
        self.path = path
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.s.bind(path)
        self.s.listen(8)

    def accept(self, timeout=5.0):
        self.s.settimeout(timeout)
        try:
            c, _ = self.s.accept()
        except socket.timeout:
            raise Failure("the preempt agent did not connect")
        c.setblocking(True)
        return Conn(c)

    def close(self):
        self.s.close()
        os.unlink(self.path)


WORKLOADS = []


def steady():
    """For a workload whose requests must keep their period (the wake's
    predictor needs nine that agree): ahead of other work on a loaded
    machine, where the test may (root). It sleeps between requests, and
    the kernel's real-time throttling bounds what it could take."""
    if os.geteuid() != 0:
        return
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
    except OSError:
        os.nice(-15)


class Workload:
    def __init__(self, args, tmp, env, preexec=None):
        WORKLOADS.append(self)
        self.stderr_path = os.path.join(tmp, "workload.stderr")
        self.err = open(self.stderr_path, "wb")
        self.p = subprocess.Popen([args.workload, os.path.join(tmp, "fake-nvidiactl")],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=self.err, env=env, preexec_fn=preexec)
        self.buf = b""

    def step(self, line, timeout=5.0):
        self.p.stdin.write(line.encode() + b"\n")
        self.p.stdin.flush()
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buf:
            r, _, _ = select.select([self.p.stdout], [], [], max(deadline - time.monotonic(), 0))
            check(r, "workload step %r timed out" % line)
            chunk = os.read(self.p.stdout.fileno(), 4096)
            check(chunk, "workload exited during %r" % line)
            self.buf += chunk
        out, self.buf = self.buf.split(b"\n", 1)
        return out.decode()

    def expect(self, line, want):
        out = self.step(line)
        check(out == want, "step %r: got %r, want %r" % (line, out, want))

    def finish(self):
        self.p.stdin.write(b"exit\n")
        self.p.stdin.close()
        rest = self.p.stdout.read()
        rc = self.p.wait(timeout=10)
        self.err.close()
        check(rc == 0, "workload exit code %d" % rc)
        check(self.buf + rest == b"", "unexpected stdout: %r" % (self.buf + rest))
        with open(self.stderr_path, "rb") as f:
            return f.read().decode(errors="replace")

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()


def base_env():
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("GPUQOS_") and not k.startswith("FAKE_RM_")
           and k != "LD_PRELOAD"}
    return env


def preload_env(args, sock, **extra):
    env = base_env()
    env["LD_PRELOAD"] = "%s %s" % (args.lib, args.fake)
    env["GPUQOS_SOCKET"] = sock
    env.update(extra)
    return env


def ok(line):
    return line + " ret=0 status=0x0"


def setup(args, tmp, preexec=None, **extra):
    """A workload with a client, a device and libcuda's four TSGs, and the
    connection the preempt agent opened when the client appeared."""
    path = os.path.join(tmp, "agent.sock")
    agent = Agent(path)
    w = Workload(args, tmp, preload_env(args, path, **extra), preexec=preexec)
    w.expect("open", "open ok")
    w.expect("client 64", ok("client h=0x%x" % CLIENT))
    conn = agent.accept()
    hello = conn.take(HELLO)
    check(hello["flags"] == HELLO_FLAGS and hello["ntsg"] == 0, "first HELLO: %r" % hello)
    check(hello["lib_version"] == VERSION and hello["pid"] == w.p.pid, "HELLO: %r" % hello)
    check(hello["comm"] == "rm_workload", "HELLO comm: %r" % hello)
    check(conn.take(SYNCED)["ntsg"] == 0, "SYNCED")
    conn.send(policy(0, 0))
    w.expect("device 0 0 64", ok("device h=0x%x" % DEVICE))
    for i, form in enumerate(["64", "21", "x64", "x21"]):
        w.expect("tsg 0 %d %s" % (ENGINES[i], form),
                 ok("tsg h=0x%x engine=%d" % (TSGS[i], ENGINES[i])))
    for i, h in enumerate(TSGS):
        t = conn.take(TSG, lambda d: d["h_tsg"] == h)
        check(t["h_client"] == CLIENT and t["h_device"] == DEVICE, "TSG: %r" % t)
        check(t["engine_type"] == ENGINES[i] and t["device_instance"] == 0, "TSG: %r" % t)
        check(t["timeslice_us"] == UNKNOWN and t["app_timeslice_us"] == UNKNOWN
              and t["interleave"] == UNKNOWN, "new TSG: %r" % t)
    return agent, w, conn


def expect_tsg(conn, h, timeslice, app):
    t = conn.take(TSG, lambda d: d["h_tsg"] == h)
    check(t["timeslice_us"] == timeslice and t["app_timeslice_us"] == app,
          "TSG 0x%x: want %d/%d, got %r" % (h, timeslice, app, t))
    return t


def settime_line(t, us=None, status="0x0"):
    return "settime t%d ret=0 status=%s params_after=%d" % (t, status, us)


# ---------------------------------------------------------------- scenarios


def sc_policy(args, tmp):
    agent, w, conn = setup(args, tmp)
    # No policy: libcuda's value goes through.
    w.expect("settime 0 2048 54", settime_line(0, 2048))
    expect_tsg(conn, TSGS[0], 2048, 2048)
    w.expect("gettime 0", ok("gettime t0") + " us=2048")
    # POLICY before libcuda's SET_TIMESLICE: RM gets the policy value.
    conn.send(policy(50, 0))
    conn.barrier(1)
    w.expect("settime 0 2048 54", settime_line(0, 2048))
    expect_tsg(conn, TSGS[0], 50, 2048)
    w.expect("gettime 0", ok("gettime t0") + " us=50")
    # The same through the XFER wrapper.
    check(conn.command(2, OP_SET, TSGS[0], arg=2048)["err"] == 0, "SET 2048")
    w.expect("gettime 0", ok("gettime t0") + " us=2048")
    w.expect("settime 0 2048 x54", settime_line(0, 2048))
    expect_tsg(conn, TSGS[0], 50, 2048)
    w.expect("gettime 0", ok("gettime t0") + " us=50")
    # Copy TSGs follow copy_timeslice_us only.
    w.expect("settime 1 1024 54", settime_line(1, 1024))
    expect_tsg(conn, TSGS[1], 1024, 1024)
    conn.send(policy(50, 100))
    conn.barrier(3)
    w.expect("settime 1 1024 x54", settime_line(1, 1024))
    expect_tsg(conn, TSGS[1], 100, 1024)
    w.expect("gettime 1", ok("gettime t1") + " us=100")
    # A policy value RM refuses: the application sees RM's status for the
    # call that was issued, and the TSG keeps its last accepted value.
    conn.send(policy(2000000, 100))
    conn.barrier(4)
    w.expect("settime 0 2048 54", settime_line(0, 2048, status="0x1f"))
    expect_tsg(conn, TSGS[0], 50, 2048)
    w.expect("gettime 0", ok("gettime t0") + " us=50")
    # Frees and close report the TSGs gone.
    w.expect("free tsg 3 x00", "free tsg 3 ret=0 status=0x0")
    conn.take(TSG_GONE, lambda d: d["h_tsg"] == TSGS[3] and d["h_client"] == CLIENT)
    w.expect("close", "close ret=0")
    for h in TSGS[:3]:
        conn.take(TSG_GONE, lambda d, h=h: d["h_tsg"] == h)
    w.finish()


def sc_commands(args, tmp):
    agent, w, conn = setup(args, tmp)
    r = conn.command(1, OP_SET, TSGS[0], arg=300)
    check(r["err"] == 0 and r["rm_status"] == 0 and r["value"] == 300, "SET: %r" % r)
    check(r["elapsed_ns"] > 0, "elapsed_ns: %r" % r)
    w.expect("gettime 0", ok("gettime t0") + " us=300")
    r = conn.command(2, OP_GET, TSGS[0])
    check(r["err"] == 0 and r["rm_status"] == 0 and r["value"] == 300, "GET: %r" % r)
    r = conn.command(3, OP_PREEMPT, TSGS[0], arg=1)
    check(r["err"] == 0 and r["rm_status"] == 0 and r["value"] == 1, "PREEMPT: %r" % r)
    r = conn.command(4, OP_INTERLEAVE, TSGS[1], arg=2)
    check(r["err"] == 0 and r["rm_status"] == 0x1B and r["value"] == 2, "INTERLEAVE: %r" % r)
    r = conn.command(5, OP_SET, NO_TSG, arg=5)
    check(r["err"] == ERR_UNKNOWN_TSG, "unknown TSG: %r" % r)
    r = conn.command(6, OP_GET, TSGS[0], client=CLIENT + 1)
    check(r["err"] == ERR_UNKNOWN_TSG, "TSG of another client: %r" % r)
    r = conn.command(7, OP_SET, TSGS[0], deadline_us=0, arg=999)
    check(r["err"] == ERR_EXPIRED, "expired: %r" % r)
    w.expect("gettime 0", ok("gettime t0") + " us=300")
    for seq, op, arg in [(8, 9, 0), (9, 0, 0), (10, OP_INTERLEAVE, 3), (11, OP_PREEMPT, 2),
                         (12, OP_SET, 1 << 32)]:
        r = conn.command(seq, op, TSGS[0], arg=arg)
        check(r["err"] == ERR_BAD_OP, "bad op %d arg %d: %r" % (op, arg, r))
    w.expect("gettime 0", ok("gettime t0") + " us=300")
    # An application closing every fd it does not know about does not see
    # (or break) the library's own.
    w.expect("closefds", "closefds closed=0")
    r = conn.command(13, OP_GET, TSGS[0])
    check(r["err"] == 0 and r["value"] == 300, "GET after closefds: %r" % r)
    w.finish()


def sc_garbage(args, tmp):
    agent, w, conn = setup(args, tmp, GPUQOS_LOG="debug")
    conn.send(policy(50, 0))
    conn.barrier(1)
    set7 = command(2, OP_SET, CLIENT, TSGS[0], arg=7)
    bad = [
        hdr(POLICY, magic=0x12345678) + policy_body(7, 7),  # bad magic
        policy(7, 7)[:10],                                  # truncated header
        policy(7, 7)[:20],                                  # truncated body
        hdr(POLICY, length=40) + policy_body(7, 7),         # length lies
        hdr(POLICY, version=2) + policy_body(7, 7),         # other version
        HDR.pack(MAGIC, VERSION, 99, 32, 0) + policy_body(7, 7),  # unknown type
        policy(7, 7) + b"\0" * 268,                         # oversize
        b"",                                                # empty
        set7[:-8],                                          # truncated command
        set7 + b"\0" * 8,                                   # command too long
        hdr(HELLO) + b"\0" * 32,                            # not for P
        hdr(RESULT, 2) + b"\0" * 40,                        # not for P
    ]
    for b in bad:
        conn.send(b)
    conn.barrier(3)
    check(not any(d["type"] == RESULT for d in conn.pending), "answered garbage: %r" % conn.pending)
    # The application's results are what the last valid POLICY says.
    w.expect("settime 0 2048 54", settime_line(0, 2048))
    expect_tsg(conn, TSGS[0], 50, 2048)
    w.expect("gettime 0", ok("gettime t0") + " us=50")
    log = w.finish()
    for reason in ["bad magic", "shorter than a header", "length does not match type",
                   "unsupported protocol version", "unknown message type",
                   "not one the node agent sends"]:
        check(reason in log, "no log line for %r in %r" % (reason, log))


def sc_reconnect(args, tmp):
    agent, w, conn = setup(args, tmp, FAKE_RM_ALLOW_NICE="1")
    conn.send(policy(50, 0))
    conn.barrier(1)
    w.expect("settime 0 2048 54", settime_line(0, 2048))
    expect_tsg(conn, TSGS[0], 50, 2048)
    r = conn.command(2, OP_INTERLEAVE, TSGS[1], arg=0)
    check(r["err"] == 0 and r["rm_status"] == 0, "INTERLEAVE as CAP_SYS_NICE: %r" % r)
    w.expect("free tsg 3 00", "free tsg 3 ret=0 status=0x0")
    conn.take(TSG_GONE, lambda d: d["h_tsg"] == TSGS[3])
    conn.close()
    agent.close()
    # With the agent gone, libcuda's own values stand again (fail open).
    deadline = time.monotonic() + 5
    while True:
        w.expect("settime 0 2048 54", settime_line(0, 2048))
        if w.step("gettime 0") == ok("gettime t0") + " us=2048":
            break
        check(time.monotonic() < deadline, "policy survived the agent")
        time.sleep(0.01)
    agent = Agent(agent.path)
    conn = agent.accept(timeout=8)
    hello = conn.take(HELLO)
    check(hello["flags"] & F_RECONNECT and hello["ntsg"] == 3, "HELLO: %r" % hello)
    check(hello["pid"] == w.p.pid, "HELLO pid: %r" % hello)
    expect_tsg(conn, TSGS[0], 2048, 2048)
    t1 = conn.take(TSG, lambda d: d["h_tsg"] == TSGS[1])
    check(t1["interleave"] == 0, "interleave kept: %r" % t1)
    conn.take(TSG, lambda d: d["h_tsg"] == TSGS[2])
    check(conn.take(SYNCED)["ntsg"] == 3, "SYNCED after reconnect")
    check(not any(d["type"] == TSG for d in conn.pending), "extra TSGs: %r" % conn.pending)
    conn.send(policy(0, 0))
    w.expect("tsg 0 12 64", ok("tsg h=0x5e000005 engine=12"))
    conn.take(TSG, lambda d: d["h_tsg"] == 0x5E000005)
    w.finish()


def logged_waits(w, n, timeout=20.0):
    """The first n waits before a next try the library logged (stderr), each
    as (ms, refused)."""
    pat = re.compile(r"next try in (\d+) ms( \(refused\))?")
    deadline = time.monotonic() + timeout
    while True:
        with open(w.stderr_path, "rb") as f:
            got = [(int(m.group(1)), bool(m.group(2)))
                   for m in pat.finditer(f.read().decode(errors="replace"))]
        if len(got) >= n:
            return got[:n]
        check(time.monotonic() < deadline, "only %d waits logged: %r" % (len(got), got))
        time.sleep(0.05)


def greet_and(agent, answer):
    """Accepts the next connection, reads its greeting and answers it:
    REFUSED (answer: retry-after ms), POLICY ("policy") or a bare close
    (None)."""
    c = agent.accept(timeout=40)
    c.take(HELLO)
    c.take(SYNCED)
    if answer == "policy":
        c.send(policy(0, 0))
        c.barrier(90)
    elif answer is not None:
        c.send(refused(REFUSED_SHARE, answer))
    c.close()


def sc_refused(args, tmp):
    """A refused connection (REFUSED, then the close) is tried again no
    sooner than the agent asked, each further refusal doubles the wait (to
    at most 30 s), and only an admitted connection (its POLICY) brings the
    wait back to the shortest; a close before POLICY doubles it as well,
    though the greeting went out (it reset the wait, and refused peers
    retried several times a second)."""
    agent, w, conn = setup(args, tmp, GPUQOS_LOG="debug")
    conn.close()  # admitted: the shortest wait, 50 ms
    for _ in range(5):
        greet_and(agent, 100)
    greet_and(agent, "policy")
    greet_and(agent, 100)
    greet_and(agent, None)
    greet_and(agent, None)
    greet_and(agent, REFUSED_RETRY_MAX_MS * 10)
    waits = logged_waits(w, 10)
    want = [(50, False), (100, True), (200, True), (400, True), (800, True), (1600, True),
            (50, False), (100, True), (200, False), (400, False)]
    check(waits == want, "waits before each try: %r, want %r" % (waits, want))
    # The agent's retry-after is held to 30 s.
    check(logged_waits(w, 11)[10] == (REFUSED_RETRY_MAX_MS, True), "retry-after capped")
    w.kill()

def sc_fork(args, tmp):
    agent, w, conn = setup(args, tmp)
    flag = os.path.join(tmp, "child-may-exit")
    w.expect("fork " + flag, "fork ok")
    child = agent.accept()
    hello = child.take(HELLO)
    check(hello["flags"] == HELLO_FLAGS and hello["pid"] not in (0, w.p.pid),
          "child HELLO: %r" % hello)
    check(hello["ntsg"] <= 1, "the child reported its parent's TSGs: %r" % hello)
    child.take(SYNCED)
    t = child.take(TSG)
    check(t["h_tsg"] == CHILD_TSG and t["h_client"] != CLIENT and t["device_instance"] == 1,
          "child TSG: %r" % t)
    child.barrier(1)
    check(not any(d["type"] == TSG for d in child.pending), "child sent %r" % child.pending)
    open(flag, "w").close()
    w.expect("wait", "child exit=0")
    conn.barrier(1)
    check(not any(d["type"] == TSG for d in conn.pending), "parent sent %r" % conn.pending)
    w.finish()


FAILOPEN_SCRIPT = "\n".join([
    "open", "client 64", "device 0 0 64", "tsg 0 1 64", "tsg 0 11 21", "tsg 0 12 x64",
    "tsg 0 13 x21", "settime 0 2048 54", "settime 0 2048 x54", "gettime 0",
    "settime 1 1024 54", "gettime 1", "interleave 0 2", "other", "nonrm",
    "free tsg 3 x00", "free device 0 00", "client x21", "free client 1 00", "closefds", "close",
    "exit", ""])


def run_script(args, tmp, env):
    p = subprocess.run([args.workload, os.path.join(tmp, "fake-nvidiactl")],
                       input=FAILOPEN_SCRIPT.encode(), capture_output=True, env=env, timeout=10)
    return p.returncode, p.stdout, p.stderr


def sc_failopen(args, tmp):
    env = base_env()
    env["LD_PRELOAD"] = args.fake
    want = run_script(args, tmp, env)
    check(want[0] == 0 and b"gettime t0 ret=0 status=0x0 us=2048" in want[1],
          "baseline run: %r" % (want,))
    regular = os.path.join(tmp, "not-a-socket")
    open(regular, "w").close()
    silent = os.path.join(tmp, "silent.sock")
    never_accepts = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    never_accepts.bind(silent)
    never_accepts.listen(1)
    runs = {
        "no socket": (preload_env(args, os.path.join(tmp, "absent.sock")), False),
        "not a socket": (preload_env(args, regular), False),
        "agent never accepts": (preload_env(args, silent), False),
        "logging": (preload_env(args, os.path.join(tmp, "absent.sock"), GPUQOS_LOG="debug"), True),
    }
    for name, (env, logs) in runs.items():
        rc, out, err = run_script(args, tmp, env)
        check(rc == want[0], "%s: exit code %d, want %d" % (name, rc, want[0]))
        check(out == want[1], "%s: stdout differs:\n%r\n%r" % (name, out, want[1]))
        if logs:
            check(b"gpuqos-preempt[" in err, "%s: no log on stderr" % name)
        else:
            check(err == b"", "%s: stderr %r" % (name, err))
    never_accepts.close()


def sc_trace(args, tmp):
    env = base_env()
    env["LD_PRELOAD"] = args.fake
    want = run_script(args, tmp, env)
    env = preload_env(args, os.path.join(tmp, "absent.sock"),
                      GPUQOS_TRACE=os.path.join(tmp, "trace-%p.jsonl"))
    p = subprocess.Popen([args.workload, os.path.join(tmp, "fake-nvidiactl")],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
    out, _ = p.communicate(FAILOPEN_SCRIPT.encode(), timeout=10)
    check(p.returncode == 0 and out == want[1], "traced run changed stdout: %r" % out)
    with open(os.path.join(tmp, "trace-%d.jsonl" % p.pid)) as f:
        recs = [json.loads(line) for line in f]
    common = {"seq", "tNs", "tid", "fd", "request", "xfer", "kind", "ret", "errno"}
    for r in recs:
        check(common <= set(r), "record lacks fields: %r" % r)
    seqs = [r["seq"] for r in recs]
    check(seqs == sorted(seqs) and len(set(seqs)) == len(seqs), "seq order: %r" % seqs)
    allocs = [r for r in recs if r["kind"] == "alloc"]
    check([r["hClass"] for r in allocs] == ["0x41", "0x80"] + ["0xa06c"] * 4 + ["0x41"],
          "allocs: %r" % allocs)
    check(allocs[0]["hNew"] == "0xc1d00000" and allocs[0]["status"] == 0, "client: %r" % allocs[0])
    check([r["xfer"] for r in allocs[2:6]] == [False, False, True, True], "xfer flags")
    check(allocs[1]["params"][:8] == "00000000" and allocs[1]["paramsSize"] == 56, "device")
    for i, r in enumerate(allocs[2:6]):
        check(len(r["params"]) == 40 and r["params"][24:32] == "%02x000000" % ENGINES[i],
              "TSG params: %r" % r)
    ctls = [r for r in recs if r["kind"] == "control"]
    sets = [r for r in ctls if r["cmd"] == "0xa06c0103"]
    check(len(sets) == 3 and sets[0]["params"] == "0008000000000000"
          and sets[0]["paramsOut"] == sets[0]["params"] and sets[0]["status"] == 0,
          "SET_TIMESLICE: %r" % sets)
    check([r["xfer"] for r in sets] == [False, True, False], "SET forms: %r" % sets)
    gets = [r for r in ctls if r["cmd"] == "0xa06c0104"]
    check(gets[0]["params"] == "0000000000000000" and gets[0]["paramsOut"] == "0008000000000000",
          "GET: %r" % gets)
    il = [r for r in ctls if r["cmd"] == "0xa06c0107"]
    check(len(il) == 1 and il[0]["status"] == 0x1B, "interleave: %r" % il)
    frees = [r for r in recs if r["kind"] == "free"]
    check([r["hOld"] for r in frees] == ["0x5e000004", "0x5e000000", "0xc1d00001"],
          "frees: %r" % frees)
    other = [r for r in recs if r["kind"] == "other"]
    check(len(other) == 1 and other[0]["request"] == "0xc0084657" and other[0]["size"] == 8
          and other[0]["ret"] == -1 and other[0]["errno"] == 25, "other: %r" % other)
    check(len(recs) == len(allocs) + len(ctls) + len(frees) + 1, "FIONREAD was traced")


def sc_symbols(args, tmp):
    dyn = subprocess.run([args.readelf, "-d", args.lib], capture_output=True, text=True,
                         check=True).stdout
    needed = [l.split("[")[1].split("]")[0] for l in dyn.splitlines() if "(NEEDED)" in l]
    allowed = {"libc.so.6", "libpthread.so.0", "libdl.so.2"}
    bad = [n for n in needed if n not in allowed and not n.startswith("ld-linux")]
    check(needed and not bad, "NEEDED beyond libc/libpthread/libdl: %r" % needed)
    syms = subprocess.run([args.readelf, "-W", "--dyn-syms", args.lib], capture_output=True,
                          text=True, check=True).stdout
    exported = set()
    for line in syms.splitlines():
        f = line.split()
        if len(f) >= 8 and f[4] in ("GLOBAL", "WEAK") and f[6] != "UND":
            exported.add(f[7].split("@")[0])
    launch = {"cuLaunchKernel", "cuLaunchCooperativeKernel", "cuLaunchKernelEx", "cuGraphLaunch",
              "cuEventRecord", "cuEventRecordWithFlags"}
    ctxgone = {"cuCtxDestroy", "cuDevicePrimaryCtxRelease", "cuDevicePrimaryCtxReset"}
    waits = {"cuCtxSynchronize", "cuEventSynchronize", "cuEventQuery", "cuStreamSynchronize",
             "cuStreamQuery", "cuStreamSynchronize_ptsz", "cuStreamQuery_ptsz"}
    # gpuqos_request_hint: the one function of its own (docs/policy.md).
    want = {"ioctl", "close", "dlsym", "gpuqos_request_hint"} | launch \
        | {n + "_ptsz" for n in launch} | ctxgone | {n + "_v2" for n in ctxgone} | waits
    check(exported == want, "exported symbols: %r" % sorted(exported))


SUBDEVICE, CHANNEL = 0x5E000005, 0x5E000006


def chanstate(w, disabled, disables, enables):
    w.expect("chanstate 0", "chanstate disabled=%d disables=%d enables=%d"
             % (disabled, disables, enables))


def take_flags(conn, flags, timeout=5.0):
    """The next report of the GR TSG carrying these flags."""
    return conn.take(TSG, lambda d: d["h_tsg"] == TSGS[0] and d["flags"] == flags,
                     timeout=timeout)


def sc_gate(args, tmp):
    agent, w, conn = setup(args, tmp, GPUQOS_RESTORE_GRACE_MS="400")
    GL = TSG_F_GATED | TSG_F_LEASED
    w.expect("settime 0 2048 54", settime_line(0, 2048))
    expect_tsg(conn, TSGS[0], 2048, 2048)
    # Not gateable before its channels and a subdevice exist.
    r = conn.command(1, OP_GATE, TSGS[0], arg=300)
    check(r["err"] == ERR_NOT_GATEABLE, "GATE without channels: %r" % r)
    w.expect("subdevice 0", ok("subdevice h=0x%x" % SUBDEVICE))
    w.expect("channel 0", ok("channel h=0x%x" % CHANNEL))
    take_flags(conn, 0)
    chanstate(w, 0, 0, 0)
    # Bad leases and unknown TSGs change nothing.
    for seq, op, arg in [(2, OP_GATE, 0), (3, OP_GATE, GATE_LEASE_MAX_MS + 1),
                         (4, OP_UNGATE, GATE_LEASE_MAX_MS + 1)]:
        r = conn.command(seq, op, TSGS[0], arg=arg)
        check(r["err"] == ERR_BAD_OP, "op %d arg %d: %r" % (op, arg, r))
    check(conn.command(5, OP_GATE, NO_TSG, arg=300)["err"] == ERR_UNKNOWN_TSG, "unknown TSG")
    r = conn.command(6, OP_GATE, TSGS[1], arg=300)
    check(r["err"] == ERR_NOT_GATEABLE, "copy TSG without channels: %r" % r)
    chanstate(w, 0, 0, 0)
    # The rotation's timeslice, as the node agent would set it.
    check(conn.command(7, OP_SET, TSGS[0], arg=50)["err"] == 0, "SET 50")
    # GATE disables the channels and reports it; a second GATE only renews.
    r = conn.command(8, OP_GATE, TSGS[0], arg=GATE_LEASE_MAX_MS)
    check(r["err"] == 0 and r["rm_status"] == 0, "GATE: %r" % r)
    take_flags(conn, GL)
    chanstate(w, 1, 1, 0)
    r = conn.command(9, OP_GATE, TSGS[0], arg=GATE_LEASE_MAX_MS)
    check(r["err"] == 0 and r["elapsed_ns"] == 0, "renewal issued a control: %r" % r)
    chanstate(w, 1, 1, 0)
    # Its turn: enabled, still leased; then out of the rotation.
    r = conn.command(10, OP_UNGATE, TSGS[0], arg=GATE_LEASE_MAX_MS)
    check(r["err"] == 0 and r["rm_status"] == 0, "UNGATE with a lease: %r" % r)
    take_flags(conn, TSG_F_LEASED)
    chanstate(w, 0, 1, 1)
    check(conn.command(11, OP_UNGATE, TSGS[0])["elapsed_ns"] == 0, "UNGATE of an open TSG")
    take_flags(conn, 0)
    w.expect("gettime 0", ok("gettime t0") + " us=50")
    # A lease nobody renews lapses on its own, the connection still open:
    # enabled, and libcuda's timeslice back.
    # (Never before its 300 ms; the upper bound only tells it from the
    # longest lease, GATE_LEASE_MAX_MS, with room for a loaded machine.)
    t0 = time.monotonic()
    check(conn.command(12, OP_GATE, TSGS[0], arg=300)["err"] == 0, "GATE 300 ms")
    take_flags(conn, GL)
    t = take_flags(conn, 0, timeout=8.0)
    held = time.monotonic() - t0
    check(0.3 <= held < GATE_LEASE_MAX_MS / 1000 - 2, "a 300 ms lease held %.3f s" % held)
    chanstate(w, 0, 2, 2)
    t = conn.take(TSG, lambda d: d["h_tsg"] == TSGS[0] and d["timeslice_us"] == 2048)
    check(t["app_timeslice_us"] == 2048, "restored report: %r" % t)
    w.expect("gettime 0", ok("gettime t0") + " us=2048")
    # A turn's lease lapses the same way.
    check(conn.command(13, OP_SET, TSGS[0], arg=50)["err"] == 0, "SET 50")
    check(conn.command(14, OP_UNGATE, TSGS[0], arg=200)["err"] == 0, "turn of 200 ms")
    take_flags(conn, TSG_F_LEASED)
    take_flags(conn, 0, timeout=8.0)
    w.expect("gettime 0", ok("gettime t0") + " us=2048")
    # The node agent going away ends every rotation at once; the TSGs
    # outside it keep their values for the restore grace (400 ms here).
    check(conn.command(15, OP_SET, TSGS[0], arg=50)["err"] == 0, "SET 50")
    check(conn.command(16, OP_SET, TSGS[1], arg=100)["err"] == 0, "copy TSG at 100")
    check(conn.command(17, OP_GATE, TSGS[0], arg=GATE_LEASE_MAX_MS)["err"] == 0, "GATE")
    take_flags(conn, GL)
    chanstate(w, 1, 3, 2)
    conn.close()
    agent.close()
    t_close = time.monotonic()
    deadline = t_close + 5.0
    while w.step("chanstate 0") != "chanstate disabled=0 disables=3 enables=3":
        check(time.monotonic() < deadline, "still gated 5 s after the agent went away")
        time.sleep(0.02)
    w.expect("gettime 0", ok("gettime t0") + " us=2048")
    w.expect("gettime 1", ok("gettime t1") + " us=100")
    while w.step("gettime 1") != ok("gettime t1") + " us=1024":
        check(time.monotonic() < t_close + 5.0, "copy TSG not restored after the grace")
        time.sleep(0.05)
    check(time.monotonic() - t_close >= 0.35, "restored before the grace ended")
    # Reconnected, it reports the TSG open, gateable and out of any rotation.
    agent = Agent(agent.path)
    conn = agent.accept(timeout=8)
    conn.take(HELLO)
    take_flags(conn, 0)
    conn.take(SYNCED)
    # Freeing its only channel makes the TSG ungateable again, and says so.
    w.expect("free channel 0 00", "free channel 0 ret=0 status=0x0")
    take_flags(conn, TSG_F_NO_GATE)
    r = conn.command(30, OP_GATE, TSGS[0], arg=300)
    check(r["err"] == ERR_NOT_GATEABLE, "GATE without channels again: %r" % r)
    w.expect("free tsg 0 00", "free tsg 0 ret=0 status=0x0")
    conn.take(TSG_GONE, lambda d: d["h_tsg"] == TSGS[0])
    w.finish()

def chancounts(w):
    m = re.fullmatch(r"chanstate disabled=(\d+) disables=(\d+) enables=(\d+)",
                     w.step("chanstate 0"))
    check(m, "chanstate")
    return tuple(int(x) for x in m.groups())


def wait_chan(w, pred, what, timeout=5.0):
    deadline = time.monotonic() + timeout
    while True:
        c = chancounts(w)
        if pred(c):
            return c
        check(time.monotonic() < deadline, "%s: channel %r" % (what, c))
        time.sleep(0.01)


def sc_window(args, tmp):
    """WINDOW (docs/protocol.md, "Windows"): the BE's own GR TSG disabled
    and enabled on the schedule, on the schedule's phase; a bad schedule,
    a lapsed lease, an end, a gate and a lost connection each leave it as
    the protocol says."""
    agent, w, conn = setup(args, tmp, GPUQOS_LOG="info")
    w.expect("subdevice 0", ok("subdevice h=0x%x" % SUBDEVICE))
    w.expect("channel 0", ok("channel h=0x%x" % CHANNEL))
    take_flags(conn, 0)
    period, before, after = 40000000, WINDOW_BEFORE_MAX_US, 5000
    now = time.monotonic_ns
    # Schedules the library must refuse change nothing.
    bad = [dict(sent_ns=now() - 10 ** 9), dict(period_ns=500000),
           dict(before_us=WINDOW_BEFORE_MAX_US + 1), dict(after_us=37000),
           dict(lease_ms=0), dict(lease_ms=WINDOW_LEASE_MAX_MS + 1), dict(reserved=1),
           dict(flags=WINDOW_F_ON | 4), dict(start_ns=now() + 11 * 10 ** 9)]
    for i, b in enumerate(bad):
        m = dict(period_ns=period, start_ns=now(), sent_ns=now(), before_us=before,
                 after_us=after, lease_ms=1000)
        m.update(b)
        conn.send(window(900 + i, **m))
    conn.barrier(950)
    time.sleep(0.3)
    check(chancounts(w) == (0, 0, 0), "a bad WINDOW took the BE off: %r" % (chancounts(w),))
    # Asked for its state (WINDOW_STATE), the library says it refused one.
    conn.send(window(951, period, now(), now() - 10 ** 9, before, after, 1000,
                     flags=WINDOW_F_ON | WINDOW_F_STATE))
    st = conn.take(WINDOW_STATE)
    check(st["flags"] == WINDOW_STATE_F_REFUSED and st["opened"] == 0 and st["reserved"] == 0,
          "a refused WINDOW's state: %r" % st)

    # A schedule: the channel is off around every start, and only then.
    start = now() + 100000000
    sent = now()
    conn.send(window(960, period, start, sent, before, after, 2000))
    c = wait_chan(w, lambda c: c[1] >= 2, "no window opened")
    time.sleep(0.5)
    c = chancounts(w)
    # One window a start at most (the first start 100 ms after sending),
    # each closed but the one open now.
    check(c[1] <= (now() - sent) // period + 1 and c[2] >= c[1] - 1,
          "%.2f s of 40 ms windows: %r" % ((now() - sent) / 1e9, c))
    # A renewal that asks for its state: held, with the windows it opened
    # (the channel's count read before and after it).
    conn.send(window(958, period, start, now(), before, after, 2000,
                     flags=WINDOW_F_ON | WINDOW_F_STATE))
    st = conn.take(WINDOW_STATE)
    c2 = chancounts(w)
    check(st["flags"] == WINDOW_STATE_F_ON and c[1] <= st["opened"] <= c2[1],
          "a running schedule's state: %r, channel %r then %r" % (st, c, c2))
    # Without the bit, no answer.
    conn.send(window(959, period, start, now(), before, after, 2000))
    conn.barrier(957)
    check(not any(d["type"] == WINDOW_STATE for d in conn.pending),
          "a WINDOW_STATE nobody asked for: %r" % conn.pending)
    # Each window opens on the schedule's phase: never before its time,
    # and before the start it is for (the product's promise: the BE is
    # off when the LC's request is due; a window the library gets to
    # later than 200 us before its start is skipped, and the largest
    # `before` leaves 9.8 ms for the disable itself on a loaded machine).
    for _ in range(5):
        at = int(w.step("chantime 0").split("=")[1])
        into = (at - (start - before * 1000)) % period
        check(into < before * 1000, "a window opened %d us after its time" % (into // 1000))
        time.sleep(0.037)
    # Its lease lapses: the windows stop (the library says so) and the
    # channel is on.
    conn.send(window(961, period, start, now(), before, after, 200))
    end = time.monotonic() + 5.0
    while "windows ended (lease lapsed)" not in open(w.stderr_path, errors="replace").read():
        check(time.monotonic() < end, "the lease never lapsed")
        time.sleep(0.05)
    c1 = wait_chan(w, lambda c: c[0] == 0, "on after the lease lapsed")
    time.sleep(0.3)
    c2 = chancounts(w)
    check(c2 == c1, "windows after the lease lapsed: %r then %r" % (c1, c2))

    # A gate holds it off through the windows; its end gives it back to them.
    conn.send(window(962, period, start, now(), before, after, 2000))
    wait_chan(w, lambda c: c[1] > c2[1], "windows again")
    r = conn.command(963, OP_GATE, TSGS[0], arg=GATE_LEASE_MAX_MS)
    check(r["err"] == 0, "GATE beside windows: %r" % r)
    take_flags(conn, TSG_F_GATED | TSG_F_LEASED)
    g0 = wait_chan(w, lambda c: c[0] == 1, "gated")
    for _ in range(10):
        c = chancounts(w)
        check(c[0] == 1 and c[2] == g0[2], "a window enabled a gated TSG: %r" % (c,))
        time.sleep(0.03)
    conn.send(window(964, period, start, now(), before, after, 2000))
    check(conn.command(965, OP_UNGATE, TSGS[0])["err"] == 0, "UNGATE")
    take_flags(conn, 0)
    wait_chan(w, lambda c: c[2] >= g0[2] + 2, "windows after the gate")
    # Ended by the node agent: on at once, and no more windows; asked, the
    # library says none runs.
    conn.send(window(966, period, start, now(), before, after, 2000, flags=WINDOW_F_STATE))
    st = conn.take(WINDOW_STATE)
    check(st["flags"] == 0, "an ended schedule's state: %r" % st)
    c1 = wait_chan(w, lambda c: c[0] == 0, "on after the end")
    time.sleep(0.2)
    check(chancounts(w)[1] == c1[1], "a window after the end")

    # The connection ends mid-schedule: the channel is on again.
    conn.send(window(967, period, start, now(), before, after, 2000))
    wait_chan(w, lambda c: c[1] > c1[1], "windows before the close")
    conn.close()
    agent.close()
    c1 = wait_chan(w, lambda c: c[0] == 0, "on after the node agent went away")
    time.sleep(0.2)
    check(chancounts(w)[1] == c1[1], "a window after the node agent went away")
    err = w.finish()
    check("ignored a WINDOW" in err and "windows ended (lease lapsed)" in err, err)


def chanoff(w):
    """(time off in all, when), both ns, as fake_rm holds the channel."""
    m = re.fullmatch(r"chanoff ns=(\d+) now=(\d+)", w.step("chanoff 0"))
    check(m, "chanoff")
    return int(m.group(1)), int(m.group(2))


def sc_window_budget(args, tmp):
    """The library's budget on time off (docs/protocol.md, "Windows"):
    WINDOWs that move the schedule every 2 ms, each asking for a window
    due at once, leave the BE's channel off (as fake_rm held it) at most
    33 windows in any 32 periods, and a period of slack for the one a
    loaded machine closes late; the library says it skipped windows over
    the budget. Without the budget they kept it off most of the time."""
    agent, w, conn = setup(args, tmp, GPUQOS_LOG="info")
    w.expect("subdevice 0", ok("subdevice h=0x%x" % SUBDEVICE))
    w.expect("channel 0", ok("channel h=0x%x" % CHANNEL))
    take_flags(conn, 0)
    period, before, after = 40000000, 2000, 2000
    win_ns = (before + after) * 1000
    span = 32 * period
    now = time.monotonic_ns
    samples, seq, end = [chanoff(w)], 2000, now() + 3 * 10 ** 9
    while now() < end:
        for _ in range(10):
            t = now()
            conn.send(window(seq, period, t + 1500000, t, before, after, 2000))
            seq += 1
            time.sleep(0.002)
        samples.append(chanoff(w))
    conn.send(window(seq, period, now(), now(), before, after, 2000, flags=0))
    conn.barrier(seq + 1)
    wait_chan(w, lambda c: c[0] == 0, "on after the end")
    samples.append(chanoff(w))
    c = chancounts(w)
    check(c[1] >= 2 and samples[-1][0] > 0, "the BE got no windows: %r %r" % (c, samples[-1]))
    worst = (0, None)
    for i, (off_i, t_i) in enumerate(samples):
        for off_j, t_j in samples[i + 1:]:
            if t_j - t_i > span - win_ns:
                break
            if off_j - off_i > worst[0]:
                worst = (off_j - off_i, (t_i, t_j))
    check(worst[0] <= 33 * win_ns + period,
          "%.1f ms off in %.0f ms (the budget: %.1f ms in %.0f ms); %d windows"
          % (worst[0] / 1e6, (worst[1][1] - worst[1][0]) / 1e6, 33 * win_ns / 1e6,
             span / 1e6, c[1]))
    err = w.finish()
    m = re.findall(r"windows ended \(the node agent's word\): (\d+) opened .* (\d+) skipped "
                   r"\((\d+) of them over the budget", err)
    check(m and int(m[-1][2]) > 0, "no window skipped over the budget: %r\n%s" % (m, err[-3000:]))


def rm_reaches(w, us, timeout=2.0):
    """Polls GET_TIMESLICE of TSG 0 until RM holds us."""
    deadline = time.monotonic() + timeout
    while True:
        got = w.step("gettime 0")
        if got == ok("gettime t0") + " us=%d" % us:
            return
        check(time.monotonic() < deadline, "RM never held %d: %r" % (us, got))
        time.sleep(0.01)


def sc_setrace(args, tmp):
    """The node agent's SET and libcuda's own SET_TIMESLICE on one TSG at
    once: what the library reports afterwards is what RM holds."""
    # RM answers a SET of 300 us 2.5 s after taking it.
    agent, w, conn = setup(args, tmp, FAKE_RM_SLOW_SET="300:2500")
    w.expect("subdevice 0", ok("subdevice h=0x%x" % SUBDEVICE))
    # No policy yet: libcuda's SET is not rewritten. It reaches RM after
    # the command's SET and is recorded before the command's answer.
    conn.send(command(1, OP_SET, CLIENT, TSGS[0], 2000000, 300))
    rm_reaches(w, 300)
    w.expect("settime 0 2048 54", settime_line(0, 2048))
    r = conn.take(RESULT, lambda d: d["seq"] == 1)
    check(r["err"] == 0 and r["rm_status"] == 0 and r["value"] == 300, "SET: %r" % r)
    w.expect("gettime 0", ok("gettime t0") + " us=2048")
    # The next report of the TSG (its channel makes it gateable) carries
    # RM's value, not the command's.
    w.expect("channel 0", ok("channel h=0x%x" % CHANNEL))
    t = take_flags(conn, 0)
    check(t["timeslice_us"] == 2048 and t["app_timeslice_us"] == 2048, "after the race: %r" % t)
    # With a policy, libcuda's SET is rewritten. It waits for the
    # command's (so that they are recorded in the order RM took them), but
    # not for long: a control of the library that does not return must
    # not stall the application. Then the race is seen as above.
    conn.send(policy(50, 0))
    conn.barrier(2)
    conn.pending = [d for d in conn.pending if d["type"] != TSG]
    conn.send(command(3, OP_SET, CLIENT, TSGS[0], 2000000, 300))
    rm_reaches(w, 300)
    w.expect("settime 0 2048 54", settime_line(0, 2048))
    # libcuda's SET returned before RM answered the command's (2.5 s).
    while select.select([conn.s], [], [], 0)[0]:
        conn.pending.append(parse(conn.s.recv(1024)))
    check(not any(d["type"] == RESULT for d in conn.pending),
          "libcuda's SET waited for the library's: %r" % conn.pending)
    r = conn.take(RESULT, lambda d: d["seq"] == 3)
    check(r["err"] == 0 and r["value"] == 300, "SET under a policy: %r" % r)
    w.expect("gettime 0", ok("gettime t0") + " us=50")
    t = expect_tsg(conn, TSGS[0], 50, 2048)
    check(t["flags"] == 0, "flags: %r" % t)
    w.finish()


def quiet_for(conn, mtype, seconds):
    """No message of mtype arrives for this long (others are kept)."""
    end = time.monotonic() + seconds
    while True:
        left = end - time.monotonic()
        if left <= 0:
            return
        r, _, _ = select.select([conn.s], [], [], left)
        if r:
            d = parse(conn.s.recv(1024))
            check(d["type"] != mtype, "unexpected %r" % d)
            conn.pending.append(d)


def take_activity(conn, pred, what, timeout=5.0):
    """ACTIVITY reports until pred(latest); checks every interval on the
    way: counters only grow, active time never exceeds elapsed time."""
    seen = []
    end = time.monotonic() + timeout
    while True:
        d = conn.take(ACTIVITY, timeout=max(end - time.monotonic(), 0.01))
        if seen:
            p = seen[-1]
            dt = d["at_ns"] - p["at_ns"]
            check(dt > 0 and d["launches"] >= p["launches"] and d["bursts"] >= p["bursts"]
                  and d["active_ns"] >= p["active_ns"], "counters went back: %r -> %r" % (p, d))
            check(d["active_ns"] - p["active_ns"] <= dt, "active beyond elapsed: %r -> %r"
                  % (p, d))
            check(dt >= (ACTIVITY_PERIOD_MS - 20) * 1e6, "reports %d ns apart" % dt)
        seen.append(d)
        if pred(d):
            return d, seen
        check(time.monotonic() < end, "timed out waiting for %s: %r" % (what, seen[-3:]))


def sc_activity(args, tmp):
    """Launches through the paths the CUDA runtime and -lcuda programs use
    reach the real functions with every argument and are counted; ACTIVITY
    comes only while a POLICY asks for it."""
    agent, w, conn = setup(args, tmp)
    quiet_for(conn, ACTIVITY, 0.6)
    conn.send(policy(0, 0, flags=POLICY_F_ACTIVITY))
    first = conn.take(ACTIVITY, timeout=2.0)
    check(first["launches"] == 0 and first["bursts"] == 0 and first["active_ns"] == 0
          and first["flags"] == 0, "before any launch: %r" % first)
    tail = ACTIVITY_TAIL_US * 1000
    # Before libcuda is loaded, the library's own launch functions are not
    # handed out: a program probing for the driver finds none.
    w.expect("probe", "probe cuLaunchKernel=none cuLaunchKernel_ptsz=none")
    # 20 launches 2 ms apart: a burst each; then 6 more at once (one burst,
    # unless this machine stalls the workload for more than the tail).
    w.expect("launch %s 20 2000" % args.libcuda,
             "launch ok=26 bad=0 other=1 status=ok rtld_next=ok")
    d, _ = take_activity(conn, lambda d: d["launches"] == 26 and d["at_ns"] > 0, "26 launches")
    d, _ = take_activity(conn, lambda d: True, "the tail to pass")
    check(20 <= d["bursts"] <= 26, "bursts: %r" % d)
    check(20 * tail <= d["active_ns"] <= 26 * tail, "active: %r" % d)
    # Back to back: 300 launches are one burst of a few hundred us at most.
    before = d
    w.expect("launch %s 300 0" % args.libcuda,
             "launch ok=332 bad=0 other=2 status=ok rtld_next=ok")
    w.expect("probe", "probe cuLaunchKernel=found cuLaunchKernel_ptsz=found")
    d, _ = take_activity(conn, lambda d: d["launches"] == 332, "332 launches")
    d, _ = take_activity(conn, lambda d: True, "the tail to pass")
    # (Each burst is active for a tail past its last launch, and a gap
    # longer than the tail ends it: a loaded machine that stalls the loop
    # splits it, but 306 launches are far fewer bursts than launches.)
    b = d["bursts"] - before["bursts"]
    check(1 <= b <= 306 // 2, "back-to-back bursts: %r -> %r" % (before, d))
    check(b * tail <= d["active_ns"] - before["active_ns"]
          <= b * tail + d["at_ns"] - before["at_ns"], "back-to-back active: %r -> %r" % (before, d))
    # Idle: the reports go on, unchanged.
    d2, seen = take_activity(conn, lambda x: x["at_ns"] - d["at_ns"] > 600e6, "idle reports")
    check(all(x["launches"] == 332 and x["active_ns"] == d["active_ns"] for x in seen),
          "idle: %r" % seen)
    # A POLICY without the flag stops them.
    conn.send(policy(0, 0))
    conn.barrier(900)
    conn.pending = [x for x in conn.pending if x["type"] != ACTIVITY]
    quiet_for(conn, ACTIVITY, 0.7)
    w.finish()


def take_wake(conn, pred, what, timeout=5.0):
    """WAKE reports until pred(latest); counts only grow on the way."""
    end = time.monotonic() + timeout
    prev = None
    while True:
        try:
            d = conn.take(WAKE, timeout=max(end - time.monotonic(), 0.01))
        except Failure as e:
            raise Failure("%s: %s; the last WAKE %r" % (what, e, prev))
        if prev:
            check(all(d[k] >= prev[k] for k in ("requests", "wakes", "hits", "wasted", "beaten",
                                                 "not_issued", "stops", "at_ns")),
                  "WAKE counts went back: %r -> %r" % (prev, d))
        prev = d
        if pred(d):
            return d
        check(time.monotonic() < end, "%s: the last WAKE %r" % (what, d))


def periodic(w, args, what):
    out = w.step("periodic %s %s" % (args.libcuda, what), timeout=15.0)
    m = re.match(r"periodic status=(\w+) wakes=(\d+) bad=(\d+) in_ctx=(\d+) stale=(\d+) "
                 r"leads=(\d+) min=(\d+) median=(\d+) max=(\d+) events=(\d+) renewed=(\d+)$", out)
    check(m, "periodic %s: %r" % (what, out))
    keys = ("wakes", "bad", "in_ctx", "stale", "leads", "min", "median", "max", "events",
            "renewed")
    d = dict(zip(keys, map(int, m.groups()[1:])))
    check(m.group(1) == "ok", "periodic %s: the application's launches: %r" % (what, out))
    return d


# What the library itself promises about the wake's timing
# (agent/preempt/preempt_wake.h): the intervals it calls a period agree
# within this much, and a wake more than half its lead late is not issued.
WAKE_JITTER_NS = 50000
WAKE_SPLIT_NS = 100000
SPAN_MIN = 32
# The workloads' requests come this often (us), on an absolute schedule.
PERIOD_US = 3000
# The wake's predictor needs nine requests whose starts agree; whether a
# loaded machine gives them is its own affair, not the library's. A step
# that needs a wake is repeated until one came, for at most this long
# (the test's TIMEOUT allows for it).
STEADY_S = 25.0


def periodic_until(w, args, what, pred, why):
    """periodic runs until pred(counts) holds (see STEADY_S)."""
    end = time.monotonic() + STEADY_S
    while True:
        d = periodic(w, args, what)
        if pred(d):
            return d
        check(time.monotonic() < end, "%s: %r" % (why, d))


class CudaLog:
    """The fake libcuda's log (FAKE_CUDA_LOG, tests/preempt/fake_libcuda.c),
    read a run at a time: per request its due time and the clock before it
    ("S"), its event record ("V" before, "E" in the fake), its launch ("A"
    in the fake, "L" after it), the wait that said done ("R"); and the wake
    thread's launches ("W") where they came among them; at exit, after
    the library's wake thread stopped, the fake's counts ("C": wake
    launches, requests woken) in final."""

    def __init__(self, tmp, name):
        self.path = os.path.join(tmp, name)
        self.pos = 0
        self.final = None

    def run(self):
        """(requests, wake launches by the request they came after (-1:
        before the first)) since the last call."""
        try:
            with open(self.path) as f:
                f.seek(self.pos)
                text = f.read()
        except FileNotFoundError:
            text = ""
        text = text[:text.rfind("\n") + 1]
        self.pos += len(text)
        reqs, wakes = [], []
        for line in text.splitlines():
            k, *t = line.split()
            t = [int(x) for x in t]
            if k == "S":
                reqs.append({"due": t[0], "pre": t[1]})
            elif k == "C":
                self.final = {"wakes": t[0], "leads": t[1]}
            elif k == "W":
                wakes.append((len(reqs) - 1, t[0], "a" in reqs[-1] if reqs else False))
            elif reqs and k in "AELRV" and k.lower() not in reqs[-1]:
                reqs[-1][k.lower()] = t[0]
        return reqs, wakes


def matches_period(reqs, period_ns):
    """The library's period is the median of eight intervals between its
    request starts, six of them within WAKE_JITTER_NS of it. Each start it
    took lies between the workload's clock before the launch and the fake's
    in it: some eight intervals in a row, so bracketed, must agree."""
    near = []
    for p, q in zip(reqs, reqs[1:]):
        lo, hi = q["pre"] - p["a"], q["a"] - p["pre"]
        near.append(lo - WAKE_JITTER_NS <= period_ns <= hi + WAKE_JITTER_NS)
    return any(sum(near[i:i + 8]) >= 6 for i in range(len(near) - 7))


def one_of_the_starts(reqs, t):
    """A start the library took is one of the workload's launches."""
    return any(r["pre"] <= t <= r["a"] for r in reqs)


def exit_summary(err):
    m = re.search(r"wake: (\d+) requests, (\d+) wakes: (\d+) hit, (\d+) wasted \((\d+) of "
                  r"them: kernels long after the request's first operation\), (\d+) beaten by "
                  r"the request; (\d+) not issued \(late or failed\); (\d+) stops, (\d+) of them "
                  r"ended early; (\d+) spans measured, the latest 99th percentile (\d+) us", err)
    check(m, "the exit summary: %s" % err)
    keys = ("requests", "wakes", "hits", "wasted", "split", "beaten", "not_issued", "stops",
            "resumes", "spans", "span_us")
    return dict(zip(keys, map(int, m.groups())))


def check_one_launch_per_wake(s, log, what):
    """Without a hold, every launch of the wake thread is one wake the
    library counted (the fake saw them all: none on a stale stream), and
    each request has one: the launches between two of the application's
    are its wake, plus one its predecessor beat. (Both counts as they were
    at exit: the fake's read once the library's had been.)"""
    log.run()
    d = log.final
    check(d and s["wakes"] == d["wakes"], "%s: the library counted %r, the fake saw %r"
          % (what, s, d))
    check(s["wakes"] <= d["leads"] + s["beaten"] + 1, "%s, no hold, no train: %r %r"
          % (what, s, d))
    check(s["wakes"] + s["not_issued"] <= s["requests"] + 1, "%s: %r" % (what, s))


def sc_wake(args, tmp):
    """GPUQOS_WAKE_LEAD_US: requests that come at a steady period get a wake
    (one empty kernel on the library's own stream, in the application's
    context) ahead of them; Poisson arrivals get none; a context destroyed
    or reset is never used again by the wake thread; a hold's train ends at
    its request; a request whose launch comes long after a CUDA event it
    recorded first has its wake judged wasted; bad values and no value
    start nothing. No node agent is needed."""
    sock = os.path.join(tmp, "none.sock")
    # Off: nothing is woken.
    w = Workload(args, tmp, preload_env(args, sock))
    d = periodic(w, args, "40 %d" % PERIOD_US)
    check(d["wakes"] == 0 and d["bad"] == 0, "without GPUQOS_WAKE_LEAD_US: %r" % d)
    w.finish()
    for bad in ("abc", "1001", "-5", "100us", ""):
        w = Workload(args, tmp, preload_env(args, sock, GPUQOS_WAKE_LEAD_US=bad,
                                            GPUQOS_LOG="info"))
        d = periodic(w, args, "40 %d" % PERIOD_US)
        err = w.finish()
        check(d["wakes"] == 0, "GPUQOS_WAKE_LEAD_US=%r: %r" % (bad, d))
        check(bad == "" or "GPUQOS_WAKE_LEAD_US=%s is not a whole number" % bad in err,
              "GPUQOS_WAKE_LEAD_US=%r: %s" % (bad, err))
    log = CudaLog(tmp, "steady.log")
    w = Workload(args, tmp, preload_env(args, sock, GPUQOS_WAKE_LEAD_US="100",
                                        GPUQOS_LOG="info", FAKE_CUDA_LOG=log.path),
                 preexec=steady)
    # Steady requests: woken, each wake in the application's context and
    # before the request it was aimed at. The lead the fake saw (from the
    # wake's launch to the request's) is the library's promise: the wake
    # comes ahead of its request (it is aimed 100 us ahead and not issued
    # more than 50 us late), not after the one before, so the median lies
    # within the first half of the period; the exact aim is the unit
    # test's (test_preempt_wake.c).
    d = periodic_until(w, args, "300 %d" % PERIOD_US, lambda d: d["leads"] > 0,
                       "steady requests were never woken")
    check(d["bad"] == 0 and d["in_ctx"] == d["wakes"] and d["stale"] == 0,
          "steady requests: %r" % d)
    check(0 < d["median"] < PERIOD_US // 2, "the wakes' leads: %r" % d)
    # Poisson arrivals of the same mean: no period, no wake. The eight
    # intervals the predictor holds keep the steady period for two Poisson
    # requests (a third odd interval breaks it), and one wake may have been
    # aimed past the steady run's end: three at most.
    before = d
    d = periodic(w, args, "300 %d poisson 7" % PERIOD_US)
    check(d["leads"] - before["leads"] <= 3, "Poisson requests: %r -> %r" % (before, d))
    # The context destroyed (cuCtxDestroy through cuGetProcAddress) or
    # reset (cuDevicePrimaryCtxReset_v2 through dlsym) every 20 requests:
    # no wake ever lands on a stream of a context that went away, and the
    # wakes resume in the new one.
    d = periodic_until(w, args, "200 %d destroy 20" % PERIOD_US, lambda d: d["renewed"] > 0,
                       "no wake in a context that came back")
    check(d["stale"] == 0 and d["bad"] == 0, "a context that went away was used: %r" % d)
    err = w.finish()
    check("wake: off" not in err and "failed" not in err.replace("late or failed", ""),
          "nothing failed: %s" % err)
    check_one_launch_per_wake(exit_summary(err), log, "steady, Poisson, destroyed")

    # A 500 us hold: after each wake, the empty kernel again every 20 us
    # until the request's launch. The train ends there: after a request's
    # launch, at most one launch of the wake thread that was already under
    # way, until the next request's wake (aimed a period less the lead
    # after the request: none within half a period). A train that ran on to
    # the hold's end would put about 20 there.
    log = CudaLog(tmp, "hold.log")
    w = Workload(args, tmp, preload_env(args, sock, GPUQOS_WAKE_LEAD_US="100",
                                        GPUQOS_WAKE_HOLD_US="500", GPUQOS_LOG="info",
                                        FAKE_CUDA_LOG=log.path), preexec=steady)
    d = periodic_until(w, args, "150 %d" % PERIOD_US, lambda d: d["wakes"] > d["leads"] > 0,
                       "no train after a wake")
    s = exit_summary(w.finish())
    check(d["bad"] == 0 and d["stale"] == 0 and s["wakes"] < d["wakes"],
          "the hold's train: %r %r" % (s, d))
    reqs, wakes = log.run()
    for i, r in enumerate(reqs):
        after = [t for k, t, launched in wakes
                 if k == i and launched and t < r["pre"] + PERIOD_US * 500]
        check(len(after) <= 1, "request %d: %d train launches after its launch" % (i, len(after)))

    # Each launch after a CUDA event recorded on its due time (through
    # cuGetProcAddress). 160 us after it: the library judges wakes wasted
    # for that reason (on a GPU the context would run the event and leave
    # before the kernels). 20 us after it: only the launches that came more
    # than 100 us after their event, by the workload's own clock (which
    # holds the library's), may be.
    for gap in (160, 20):
        end = time.monotonic() + STEADY_S
        while True:
            log = CudaLog(tmp, "event%d.log" % gap)
            w = Workload(args, tmp, preload_env(args, sock, GPUQOS_WAKE_LEAD_US="100",
                                                GPUQOS_LOG="info", FAKE_CUDA_LOG=log.path),
                         preexec=steady)
            d = periodic(w, args, "150 %d event %d" % (PERIOD_US, gap))
            s = exit_summary(w.finish())
            reqs, _ = log.run()
            log.pos = 0
            check(d["events"] == 150 and d["bad"] == 0 and len(reqs) == 150
                  and 0 < s["requests"] <= 150, "event %d: %r %r" % (gap, d, s))
            check_one_launch_per_wake(s, log, "event %d" % gap)
            late = sum(r["l"] - r["v"] > WAKE_SPLIT_NS for r in reqs)
            check(s["split"] <= late, "event %d: %d judged split, %d launches late: %r"
                  % (gap, s["split"], late, s))
            if (s["split"] if gap == 160 else s["hits"]) > 0:
                break
            check(time.monotonic() < end, "event %d: no wake judged: %r %r" % (gap, d, s))
            os.unlink(log.path)


def sc_wake_hint(args, tmp):
    """gpuqos_request_hint (docs/policy.md, "A request that says it comes"):
    Poisson requests, each saying 300 us ahead that it comes, get wakes
    ahead of them in the application's context though no period can be
    learnt (Poisson alone gets three at most, sc_wake); without wakes on,
    the hint wakes nothing."""
    sock = os.path.join(tmp, "none.sock")
    w = Workload(args, tmp, preload_env(args, sock))
    d = periodic(w, args, "40 %d hint 300" % PERIOD_US)
    check(d["wakes"] == 0 and d["bad"] == 0, "hints without wakes on: %r" % d)
    w.finish()
    log = CudaLog(tmp, "hint.log")
    w = Workload(args, tmp, preload_env(args, sock, GPUQOS_WAKE_LEAD_US="100",
                                        GPUQOS_LOG="info", FAKE_CUDA_LOG=log.path))
    d = periodic_until(w, args, "200 %d hint 300" % PERIOD_US, lambda d: d["leads"] > 3,
                       "hinted requests were never woken")
    check(d["bad"] == 0 and d["in_ctx"] == d["wakes"] and d["stale"] == 0,
          "hinted requests: %r" % d)
    err = w.finish()
    m = re.search(r"wake: (\d+) request hints, (\d+) of their wakes issued", err)
    check(m and int(m.group(2)) > 3 and int(m.group(2)) <= int(m.group(1)),
          "the hints' count: %s" % err[-600:])


def take_phase(conn, pred):
    """The latest PHASE that pred accepts once the reports stopped, or
    None (the other messages kept)."""
    quiet_for(conn, -1, 0.6)
    phs = [x for x in conn.pending if x["type"] == PHASE and pred(x)]
    conn.pending = [x for x in conn.pending if x["type"] not in (WAKE, PHASE)]
    return phs[-1] if phs else None


def sc_span(args, tmp):
    """PHASE with the requests' span (GQ_POLICY_F_SPAN): each request's
    work (BUSY us in the fake) waited for by each way, the 99th percentile
    of how long past its due time the first wait that said done returned
    (a late request adds its lateness; a query spun on counts once it says
    done). Without the flag, no span (sc_wake_policy)."""
    for how, busy in (("stream", 600), ("ctx", 1200), ("query", 300)):
        # A workload of its own for each: the spans held are this way's.
        log = CudaLog(tmp, "span-%s.log" % how)
        agent, w, conn = setup(args, tmp, preexec=steady, GPUQOS_LOG="info",
                               FAKE_CUDA_LOG=log.path)
        conn.send(policy(0, 0, flags=POLICY_F_WAKE | POLICY_F_WAKE_STATS | POLICY_F_PHASE
                         | POLICY_F_SPAN, wake=wake_word(100)))
        conn.barrier(931)
        reqs = []
        end = time.monotonic() + STEADY_S
        while True:
            out = w.step("waits %s 150 4000 %d %s" % (args.libcuda, busy, how), timeout=15.0)
            m = re.match(r"waits status=ok spins=(\d+)$", out)
            check(m and (how != "query" or int(m.group(1)) > 0), "waits %s: %r" % (how, out))
            reqs += log.run()[0]
            ph = take_phase(conn, lambda x: x["span_us"] != 0)
            if ph:
                break
            check(time.monotonic() < end, "waits %s: never a PHASE with a span" % how)
        # The span is measured from the request's due time to the first
        # wait that said done: no shorter than the work (as long as one of
        # the latest spans had a start no later than its due time), and
        # within what the workload itself saw from its due time to the
        # wait's return (the library's due time lies on a grid of its own
        # period, within WAKE_JITTER_NS a period of the workload's, two
        # periods back at most).
        longest = max((r["r"] - r["due"] + 999) // 1000 for r in reqs)
        check(ph["flags"] == PHASE_F_SPAN
              and busy <= ph["span_us"] <= longest + 2 * WAKE_JITTER_NS // 1000,
              "PHASE with the span of %d us waited for by %s: %r (the workload's longest %d us)"
              % (busy, how, ph, longest))
        check(matches_period(reqs, ph["period_ns"])
              and one_of_the_starts(reqs, ph["last_start_ns"]),
              "PHASE's period and start are not the workload's: %r" % ph)
        s = exit_summary(w.finish())
        agent.close()
        # The library's own count at exit: at most one span a request (its
        # first has none), at least the SPAN_MIN a PHASE's span needs; the
        # 99th percentile as above.
        check(SPAN_MIN <= s["spans"] < len(reqs) and s["spans"] <= s["requests"]
              and busy <= s["span_us"] <= longest + 2 * WAKE_JITTER_NS // 1000,
              "the spans at exit (%d requests): %r" % (len(reqs), s))


def sc_wake_policy(args, tmp):
    """The node agent's POLICY turns wakes on (GQ_POLICY_F_WAKE and a lead)
    and off (without the flag, with a lead or hold out of range, and when
    the connection ends); a workload whose environment sets
    GPUQOS_WAKE_LEAD_US keeps its own choice."""
    log = CudaLog(tmp, "policy.log")
    agent, w, conn = setup(args, tmp, preexec=steady, GPUQOS_LOG="info", FAKE_CUDA_LOG=log.path)
    # WAKE reports asked for, but no wake ever was: nothing to report.
    conn.send(policy(0, 0, flags=POLICY_F_WAKE_STATS))
    d = periodic(w, args, "40 %d" % PERIOD_US)
    check(d["wakes"] == 0, "before any wake in a POLICY: %r" % d)
    quiet_for(conn, WAKE, 0.6)
    conn.send(policy(0, 0, flags=POLICY_F_WAKE | POLICY_F_WAKE_STATS, wake=wake_word(100)))
    conn.barrier(901)
    # Woken (see sc_wake for the lead), and the library's own counts
    # (WAKE, sent only when they changed) are what the fake saw: every wake
    # the wake thread launched, judged by the request after it (a hit at
    # least once).
    end = time.monotonic() + STEADY_S
    while True:
        d = periodic(w, args, "300 %d" % PERIOD_US)
        rep = take_wake(conn, lambda m: m["wakes"] >= d["wakes"], "the wakes counted")
        if d["leads"] > 0 and rep["hits"] > 0:
            break
        check(time.monotonic() < end, "steady requests were never woken: %r %r" % (d, rep))
    # The reports of that run, to the last (a wake aimed past its end may
    # still come).
    while True:
        try:
            rep = take_wake(conn, lambda m: True, "", timeout=0.6)
        except Failure:
            break
    check(d["bad"] == 0 and d["in_ctx"] == d["wakes"] and d["stale"] == 0,
          "POLICY with a wake: %r" % d)
    check(0 < d["median"] < PERIOD_US // 2, "the wakes' leads: %r" % d)
    launches = len(log.run()[0])
    check(rep["flags"] & ~WAKE_F_STOPPED == 0 and rep["reserved"] == 0
          and 0 < rep["requests"] <= launches - 40
          and rep["hits"] + rep["wasted"] + rep["beaten"] <= rep["wakes"] <= rep["requests"] + 1
          and rep["wakes"] + rep["not_issued"] <= rep["requests"] + 1,
          "the counts: %r (%d launches)" % (rep, launches))
    check(all(m["type"] != PHASE for m in conn.pending), "PHASE not asked for, yet sent")
    # PHASE asked for as well: with each WAKE, the period the wake agreed
    # and the latest start, on this machine's CLOCK_MONOTONIC: a period
    # and a start the workload's own launches show.
    t0 = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
    conn.send(policy(0, 0, flags=POLICY_F_WAKE | POLICY_F_WAKE_STATS | POLICY_F_PHASE,
                     wake=wake_word(100)))
    conn.barrier(930)
    end = time.monotonic() + STEADY_S
    while True:
        d = periodic(w, args, "100 %d" % PERIOD_US)
        reqs = log.run()[0]
        ph = take_phase(conn, lambda x: x["at_ns"] > reqs[0]["pre"])
        now = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        if ph:
            break
        check(time.monotonic() < end, "never a PHASE: %r" % d)
    check(ph["flags"] == 0 and ph["span_us"] == 0
          and 0 < ph["last_start_ns"] <= ph["at_ns"] and t0 < ph["at_ns"] <= now
          and one_of_the_starts(reqs, ph["last_start_ns"])
          and matches_period(reqs, ph["period_ns"]), "PHASE: %r" % ph)
    # A POLICY without the flag: off. (A wake already aimed may land.)
    conn.send(policy(0, 0))
    conn.barrier(902)
    before = d
    d = periodic(w, args, "100 %d" % PERIOD_US)
    check(d["leads"] - before["leads"] <= 1, "POLICY without a wake: %r -> %r" % (before, d))
    # Out of range: ignored, and no wakes.
    for i, word in enumerate((wake_word(0, 0), wake_word(1001), wake_word(100, 1001))):
        conn.send(policy(0, 0, flags=POLICY_F_WAKE, wake=word))
        conn.barrier(903 + i)
    before = d
    d = periodic(w, args, "100 %d" % PERIOD_US)
    check(d["leads"] - before["leads"] <= 1, "bad wakes in POLICY: %r -> %r" % (before, d))
    # On again; then the node agent goes away: off.
    # (With a 20 us hold this time: the log below says POLICY carried it.)
    conn.send(policy(0, 0, flags=POLICY_F_WAKE, wake=wake_word(100, 20)))
    conn.barrier(910)
    # (Wakes judged wasted earlier may hold them off for a while.)
    before = d
    d = periodic_until(w, args, "300 %d" % PERIOD_US, lambda d: d["leads"] > before["leads"],
                       "POLICY with a wake again: %r ->" % before)
    conn.close()
    # Off once the library saw the connection end (it says so).
    end = time.monotonic() + 5.0
    while open(w.stderr_path, errors="replace").read().count(
            "wake: off (the node agent's policy)") < 2:
        check(time.monotonic() < end, "the library did not turn wakes off at the close")
        time.sleep(0.05)
    before = d
    d = periodic(w, args, "100 %d" % PERIOD_US)
    check(d["leads"] - before["leads"] <= 1, "after the connection ended: %r -> %r" % (before, d))
    err = w.finish()
    agent.close()
    # (With the 20 us hold the train adds launches the library does not
    # count as wakes: the counts as they were before it.)
    check(rep["wakes"] <= d["wakes"], "the library counted wakes the fake never saw: %r %r"
          % (rep, d))
    check("wake: lead 100 us, hold 20 us (the node agent's policy)" in err
          and err.count("wake: off (the node agent's policy)") == 2, "the log: %s" % err)
    check(err.count("ignored the wake of a POLICY") == 1
          and "ignored the wake of a POLICY (lead 0 us, hold 0 us)" in err,
          "bad wakes are said once: %s" % err)
    # The workload's own environment wins: GPUQOS_WAKE_LEAD_US=0 stays off.
    agent, w, conn = setup(args, tmp, GPUQOS_WAKE_LEAD_US="0", GPUQOS_LOG="info")
    conn.send(policy(0, 0, flags=POLICY_F_WAKE, wake=wake_word(100)))
    conn.barrier(920)
    d = periodic(w, args, "100 %d" % PERIOD_US)
    check(d["wakes"] == 0, "GPUQOS_WAKE_LEAD_US=0 and a POLICY with a wake: %r" % d)
    w.finish()
    agent.close()


F_SEAL_FUTURE_WRITE = 0x10  # Linux 5.1; Python's fcntl may not name it


def lease_page_file(seal=True, magic=gq_proto.LEASE_PAGE_MAGIC):
    """A memfd lease page as the node agent makes it (abi/gq_proto.h,
    struct gq_lease_word), mapped here: (fd, map)."""
    fd = os.memfd_create("lease", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, gq_proto.LEASE_PAGE_SIZE)
    m = mmap.mmap(fd, gq_proto.LEASE_PAGE_SIZE)
    m[0:16] = struct.pack("=IIQ", magic, VERSION, 0)
    if seal:
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS,
                    fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | F_SEAL_FUTURE_WRITE)
    return fd, m


def lease_until(m, t_s):
    """Store `until` (CLOCK_MONOTONIC seconds) as the node agent does."""
    m[8:16] = struct.pack("=Q", int(t_s * 1e9))


def offer_page(conn, fd, sent_ns=None, size=gq_proto.LEASE_PAGE_SIZE):
    msg = gq_proto.lease_page(time.clock_gettime_ns(time.CLOCK_MONOTONIC)
                              if sent_ns is None else sent_ns, size=size)
    if fd is None:
        conn.send(msg)
    else:
        conn.send_fd(msg, fd)
    return conn.take(gq_proto.LEASE_PAGE_STATE)["flags"]


def sc_lease_page(args, tmp):
    """Leases renewed through the node agent's page (docs/protocol.md,
    "Lease page"): pages that cannot be trusted are refused and leases then
    lapse on their own; a taken page holds a lease past its end exactly as
    long as the page says, and only on the connection it came with."""
    agent, w, conn = setup(args, tmp)
    GL = TSG_F_GATED | TSG_F_LEASED
    w.expect("settime 0 2048 54", settime_line(0, 2048))
    expect_tsg(conn, TSGS[0], 2048, 2048)
    w.expect("subdevice 0", ok("subdevice h=0x%x" % SUBDEVICE))
    w.expect("channel 0", ok("channel h=0x%x" % CHANNEL))
    take_flags(conn, 0)
    now = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
    plain = os.path.join(tmp, "plain-page")
    with open(plain, "wb") as f:
        f.write(b"\0" * gq_proto.LEASE_PAGE_SIZE)
    pfd = os.open(plain, os.O_RDWR)
    unsealed, _ = lease_page_file(seal=False)
    badmagic, _ = lease_page_file(magic=0x12345678)
    good, page = lease_page_file()
    for what, fd, kw in [("no descriptor", None, {}), ("a plain file", pfd, {}),
                         ("an unsealed memfd", unsealed, {}), ("another magic", badmagic, {}),
                         ("another clock", good, {"sent_ns": now - 10**9}),
                         ("another size", good, {"size": 8192})]:
        check(offer_page(conn, fd, **kw) == 0, "took a page with %s" % what)
    # A descriptor sent with any other message is closed, not kept: 20
    # COMMANDs each carrying one leave the process with no more fds.
    fds_of = lambda: len(os.listdir("/proc/%d/fd" % w.p.pid))  # noqa: E731
    before = fds_of()
    for i in range(20):
        conn.send_fd(command(100 + i, OP_GET, CLIENT, NO_TSG, 2000000, 0), good)
        conn.take(RESULT, lambda d, i=i: d["seq"] == 100 + i)
    check(fds_of() < before + 20, "descriptors kept: %d -> %d" % (before, fds_of()))
    # Refused: a lease lapses at its own end whatever the page says.
    lease_until(page, time.monotonic() + 30)
    t0 = time.monotonic()
    check(conn.command(1, OP_GATE, TSGS[0], arg=300)["err"] == 0, "GATE 300 ms")
    take_flags(conn, GL)
    take_flags(conn, 0, timeout=8.0)
    check(time.monotonic() - t0 < 8.0, "a refused page held the lease")
    lease_until(page, 0)
    check(offer_page(conn, good) == gq_proto.LEASE_PAGE_F_ON, "a sealed page refused")
    # Taken: the 300 ms lease holds as long as the page says, then lapses.
    t0 = time.monotonic()
    check(conn.command(2, OP_GATE, TSGS[0], arg=300)["err"] == 0, "GATE 300 ms")
    take_flags(conn, GL)
    until = time.monotonic() + 1.5
    lease_until(page, until)
    take_flags(conn, 0, timeout=10.0)
    t1 = time.monotonic()
    check(t1 >= until, "the lease ended %.3f s before the page's end" % (until - t1))
    chanstate(w, 0, 2, 2)
    # Renewed again and again, it holds; the channels stay off meanwhile.
    check(conn.command(3, OP_GATE, TSGS[0], arg=300)["err"] == 0, "GATE 300 ms")
    take_flags(conn, GL)
    for _ in range(4):
        lease_until(page, time.monotonic() + 0.5)
        quiet_for(conn, TSG, 0.25)
    chanstate(w, 1, 3, 2)
    # A page of an ended connection renews nothing on the next one.
    lease_until(page, time.monotonic() + 60)
    conn.close()
    agent.close()
    wait_chan(w, lambda c: c[0] == 0, "enabled after the agent went away")
    agent = Agent(agent.path)
    conn = agent.accept(timeout=8)
    conn.take(HELLO)
    take_flags(conn, 0)
    conn.take(SYNCED)
    t0 = time.monotonic()
    check(conn.command(4, OP_GATE, TSGS[0], arg=300)["err"] == 0, "GATE 300 ms")
    take_flags(conn, GL)
    take_flags(conn, 0, timeout=8.0)
    check(time.monotonic() - t0 < 8.0, "the old connection's page held the lease")
    w.finish()


SCENARIOS = {
    "policy": sc_policy, "commands": sc_commands, "garbage": sc_garbage,
    "reconnect": sc_reconnect, "fork": sc_fork, "failopen": sc_failopen,
    "trace": sc_trace, "symbols": sc_symbols, "gate": sc_gate, "activity": sc_activity,
    "wake": sc_wake, "wake_policy": sc_wake_policy, "span": sc_span, "setrace": sc_setrace,
    "window": sc_window, "window_budget": sc_window_budget, "refused": sc_refused,
    "lease_page": sc_lease_page, "wake_hint": sc_wake_hint,
}


def main():
    ap = argparse.ArgumentParser()
    for opt in ("--lib", "--fake", "--workload", "--readelf", "--libcuda"):
        ap.add_argument(opt, required=True)
    ap.add_argument("scenario", choices=sorted(SCENARIOS))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="gpuqos-preempt-") as tmp:
        try:
            SCENARIOS[args.scenario](args, tmp)
        finally:
            for w in WORKLOADS:
                w.kill()
    print("ok")
    return 0


if __name__ == "__main__":
    run_main(main)
