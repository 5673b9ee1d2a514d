# SPDX-License-Identifier: Apache-2.0
"""test_lifecycle.py - the node agent's files and its control socket over
its life: when state.json is written, the state directory's lock, the
sockets an exiting agent removes, start-up checks of its paths and policy,
and the control socket's idle timeout and connection limit.
Usage: GPUQOS_AGENT_BIN=... test_lifecycle.py <test-name>."""
import ctypes
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import check, run, standard_process, wait_for  # noqa: E402

IN_MOVED_FROM, IN_MOVED_TO = 0x40, 0x80
CTL_IDLE_S = 5.0   # agent/ctl.c CTL_IDLE_MS
CTL_CONN_MAX = 32  # agent/ctl.c CTL_CONN_MAX


def config(**kw):
    c = {"version": 1, "defaultClass": "unmanaged", "trustRunClass": True,
         "rules": [{"exe": "*python3*", "class": "best-effort"}],
         "controlDeadlineMs": 1000, "reconcileIntervalMs": 100}
    c.update(kw)
    return c


class Renames:
    """Counts state.json being replaced (the agent writes a temp file and
    renames it over), seen by inotify: independent of what the agent says."""

    def __init__(self, directory):
        libc = ctypes.CDLL(None, use_errno=True)
        self.fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        check(self.fd >= 0, "inotify_init1")
        # IN_MOVED_FROM too: inotify merges an unread event into an
        # identical one before it, and two renames over state.json in a row
        # would read as one; the temp file's event between them keeps
        # them apart.
        check(libc.inotify_add_watch(self.fd, directory.encode(), IN_MOVED_FROM | IN_MOVED_TO) >= 0,
              "inotify_add_watch " + directory)
        self.n = 0

    def count(self):
        while True:
            try:
                buf = os.read(self.fd, 65536)
            except BlockingIOError:
                return self.n
            off = 0
            while off < len(buf):
                _, mask, _, ln = struct.unpack_from("iIII", buf, off)
                name = buf[off + 16:off + 16 + ln].rstrip(b"\0")
                if mask & IN_MOVED_TO and name == b"state.json":
                    self.n += 1
                off += 16 + ln

    def close(self):
        os.close(self.fd)


def state_file(a):
    with open(os.path.join(a.state, "state.json")) as f:
        return json.load(f)


def settle(a, renames):
    """Waits until the agent has written what it had to: the coalescing
    delay (250 ms) passes without a new write, by inotify and by the
    agent's stateWrites alike. Returns (renames seen, stateWrites)."""
    last = None
    end = time.monotonic() + 30
    while time.monotonic() < end:
        time.sleep(0.6)
        now = (renames.count(), a.counters().get("stateWrites", 0))
        if now == last:
            return now
        last = now
    check(False, "state.json writes never settled: %r" % (last,))


def burst(a, n):
    """n processes connect to the preempt-agent socket at once, hold the
    connection until all are connected, then all close at once."""
    go_r, go_w = os.pipe()
    up_r, up_w = os.pipe()
    kids = []
    for _ in range(n):
        pid = os.fork()
        if pid == 0:
            try:
                os.close(go_w)
                s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
                s.connect(a.sock)
                os.write(up_w, b"x")
                os.read(go_r, 1)  # EOF when the parent closes go_w
                s.close()
            finally:
                os._exit(0)
        kids.append(pid)
    os.close(go_r)
    os.close(up_w)
    got = 0
    while got < n:
        b = os.read(up_r, n)
        check(b, "every burst process connected")
        got += len(b)
    wait_for(lambda: a.list()["agent"]["peers"] >= n, "the agent accepted the burst")
    os.close(go_w)
    for pid in kids:
        os.waitpid(pid, 0)
    os.close(up_r)


def t_state_burst(make_agent):
    """Peers coming and going in a burst cost O(1) writes of state.json, not
    one per accept and close; what the file holds is still exact, and
    survives a crash and a restart."""
    a = make_agent(config())
    a.start()
    p = a.peer()
    standard_process(p)
    wait_for(lambda: len(a.tsgs()) == 4, "peer listed")
    r = a.ctl({"cmd": "set-class", "pid": p.pid, "class": "lc"})
    check(r.get("ok"), "set-class: %r" % r)
    # set-class answers once the override is on disk.
    check([o["pid"] for o in state_file(a)["overrides"]] == [p.pid], "override written at once")
    renames = Renames(a.state)
    try:
        base, w0 = settle(a, renames)
        n = 60
        burst(a, n)
        wait_for(lambda: a.list()["agent"]["peers"] == 1, "the burst's peers closed")
        # The same process connecting again and again (each connection
        # supersedes the last): nothing persistent changes.
        for _ in range(100):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            s.connect(a.sock)
            s.close()
        r, w = settle(a, renames)
        writes = r - base
        check(writes <= 6, "%d peers and 100 reconnects caused %d writes of state.json "
              "(want O(1), at most 6)" % (n, writes))
        check(w - w0 == writes, "stateWrites %d agrees with the %d renames seen" % (w - w0, writes))
        st = state_file(a)
        check([e["pid"] for e in st["peers"]] == [p.pid], "peers on disk: %r" % st["peers"])
        check([(o["pid"], o["class"]) for o in st["overrides"]] == [(p.pid, "latency-critical")],
              "overrides on disk: %r" % st["overrides"])
        # An unchanged state is not written again by a restart.
        ino = os.stat(os.path.join(a.state, "state.json")).st_ino
        check(a.stop(signal.SIGKILL) == -signal.SIGKILL, "agent killed")
        a.start()
        wait_for(lambda: len(a.tsgs()) == 4, "peer back after the crash")
        procs = {q["pid"]: q for q in a.list()["processes"]}
        check(procs[p.pid]["classSource"] == "override", "override survived: %r" % procs[p.pid])
        wait_for(lambda: "every earlier preempt agent is back" in
                 open(os.path.join(a.dir, "agent.log")).read(), "the restart waited for the peer")
        check(a.stop() == 0, "agent stopped")
        check(os.stat(os.path.join(a.state, "state.json")).st_ino == ino,
              "state.json not rewritten: nothing in it changed")
    finally:
        renames.close()


def agent_cmd(a, state=None, sock=None, ctl=None, extra=()):
    return [a.binary, "--standalone", "--bpf", "off", "--nvidiactl", a.nvctl,
            "--socket", sock or a.sock, "--ctl-socket", ctl or a.ctl_sock,
            "--state-dir", state or a.state] + list(extra)


def t_state_lock(make_agent):
    """One state directory, one agent: a second one refuses to start and
    leaves the first one's sockets alone; an exiting agent removes only the
    socket files it bound."""
    a = make_agent(config())
    a.start()
    other = os.path.join(a.dir, "other")
    r = run_refused(agent_cmd(a, sock=other + ".sock", ctl=other + ".ctl"))
    check(r.returncode == 1 and "in use by another gpuqos-agent (pid %d)" % a.proc.pid in r.stderr,
          "second agent on the same state dir refused: %d %r" % (r.returncode, r.stderr[-400:]))
    check(not os.path.exists(other + ".sock") and not os.path.exists(other + ".ctl"),
          "the refused agent made no socket")
    r = run_refused(agent_cmd(a, state=other + "-state"))
    check(r.returncode == 1 and "another agent is listening" in r.stderr,
          "second agent on the same sockets refused: %d %r" % (r.returncode, r.stderr[-400:]))
    check(a.list()["ok"], "the first agent still answers")
    # A newer agent took the control socket's path: the exiting one must
    # leave that file alone.
    os.unlink(a.ctl_sock)
    newer = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    newer.bind(a.ctl_sock)
    newer.listen(1)
    ino = os.stat(a.ctl_sock).st_ino
    try:
        check(a.stop() == 0, "agent exited")
        check(os.path.exists(a.ctl_sock) and os.stat(a.ctl_sock).st_ino == ino,
              "the newer socket is still there")
        check(not os.path.exists(a.sock), "its own preempt-agent socket removed")
        log = open(os.path.join(a.dir, "agent.log")).read()
        check("left in place" in log, "the agent says why it left the file")
    finally:
        newer.close()
        os.unlink(a.ctl_sock)
    # The lock went with the agent: the next one starts.
    a.start()
    check(a.list()["ok"], "restarted on the same state dir")


def run_refused(cmd):
    """An agent that should refuse to start; one still running after 20 s
    was not refused (subprocess.run kills it)."""
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=20)
    except subprocess.TimeoutExpired:
        check(False, "started instead of refusing: %s" % " ".join(cmd))


def refused(cmd, want, what):
    r = run_refused(cmd)
    check(r.returncode != 0 and want in r.stderr,
          "%s: exit %d, want an error naming %r: %r" % (what, r.returncode, want, r.stderr[-600:]))


def t_bad_paths(make_agent):
    """Paths and policies that cannot work are refused at start, with a
    sentence; on SIGHUP the old policy is kept."""
    a = make_agent(config())
    same = os.path.join(a.dir, "one.sock")
    refused(agent_cmd(a, sock=same, ctl=same), "both " + same, "--socket = --ctl-socket")
    # The same file spelled two ways.
    os.makedirs(os.path.join(a.dir, "d"), exist_ok=True)
    refused(agent_cmd(a, sock=os.path.join(a.dir, "d", "s"), ctl=os.path.join(a.dir, "d", ".", "s")),
            "need a socket each", "--socket = --ctl-socket, spelled differently")
    refused(agent_cmd(a, state="/proc/self"), "procfs", "--state-dir /proc/self")
    refused(agent_cmd(a, state="/sys/kernel"), "sysfs", "--state-dir /sys/kernel")
    afile = os.path.join(a.dir, "a-file")
    open(afile, "w").close()
    refused(agent_cmd(a, state=afile), "not a directory", "--state-dir naming a file")
    for bad, want in (({"timeslices": {"lcUs": 40, "beUs": 50}}, "below timeslices.beUs"),
                      ({"rules": [{"exe": "[", "class": "be"}]}, "not a valid glob")):
        a.write_config(config(**bad))
        refused(agent_cmd(a, extra=["--config", a.config]), want, "policy %r" % bad)
    for path in (same, a.sock, a.ctl_sock):
        check(not os.path.exists(path), "no socket left behind: " + path)
    a.write_config(config())
    a.start()
    p = a.peer()
    standard_process(p)
    wait_for(lambda: len(a.tsgs()) == 4, "listed")
    for bad in ({"timeslices": {"lcUs": 40, "beUs": 50}}, {"rules": [{"exe": "*[", "class": "lc"}]}):
        n = a.counters()["configErrors"]
        a.write_config(config(**bad))
        a.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: a.counters()["configErrors"] == n + 1, "invalid policy refused on SIGHUP")
        check(a.tsgs(p.pid)[0]["class"] == "best-effort", "old policy kept")


def ctl_connect(a):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(a.ctl_sock)
    return s


def closed_by_agent(s, timeout):
    """True when the agent closes s (EOF) within timeout seconds."""
    s.settimeout(timeout)
    try:
        return s.recv(4096) == b""
    except socket.timeout:
        return False
    except ConnectionResetError:
        return True


def t_ctl_limits(make_agent):
    """A ctl client that connects and never writes is closed after the idle
    timeout; connections beyond the limit are refused with a sentence and
    the others keep working."""
    a = make_agent(config())
    a.start()
    idle = ctl_connect(a)
    t0 = time.monotonic()
    check(a.list()["ok"], "others are served meanwhile")
    check(closed_by_agent(idle, CTL_IDLE_S + 15), "an idle ctl connection is closed")
    check(time.monotonic() - t0 >= CTL_IDLE_S - 0.5, "not before the idle timeout")
    idle.close()
    # A client that sends its request but never reads nor closes: the
    # answer waits for it no longer than the timeout either.
    slow = ctl_connect(a)
    slow.sendall(b'{"cmd":"list"}\n')
    check(answer_of(slow), "the slow client got its answer")
    wait_for(lambda: a.counters()["ctlTimeouts"] == 2, "the slow client closed by the agent",
             timeout=CTL_IDLE_S + 15)
    try:
        slow.send(b"x")
        check(False, "the agent's end of the slow connection is closed")
    except (BrokenPipeError, ConnectionResetError):
        pass
    slow.close()
    held = [ctl_connect(a) for _ in range(CTL_CONN_MAX)]
    try:
        extra = ctl_connect(a)
        ans = answer_of(extra)
        extra.close()
        check(ans == {"ok": False, "error": "too many control connections (%d open)" % CTL_CONN_MAX},
              "connection over the limit refused with a sentence: %r" % ans)
        # The held ones are still served.
        held[0].sendall(b'{"cmd":"list"}\n')
        check(answer_of(held[0])["ok"], "a connection within the limit is answered")
    finally:
        for s in held:
            s.close()
    r = wait_for(lambda: a.try_ctl({"cmd": "list"}), "served again once the others closed")
    check(r["agent"]["counters"]["ctlRefused"] >= 1, "ctlRefused counted: %r" % r["agent"]["counters"])


def answer_of(s):
    """The answer up to the agent's end of writing (it then waits for the
    client to close)."""
    s.settimeout(10)
    out = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            return json.loads(out)
        out += chunk


TESTS = {"state_burst": t_state_burst, "state_lock": t_state_lock, "bad_paths": t_bad_paths,
         "ctl_limits": t_ctl_limits}

if __name__ == "__main__":
    sys.exit(run(TESTS, sys.argv[1] if len(sys.argv) > 1 else ""))
