# SPDX-License-Identifier: Apache-2.0
"""agent - the real gpuqos-agent in a temporary directory (standalone,
--bpf off) and fake preempt agents (tests/agent/fake_peer.py processes)
to drive it: ctl requests, signals, restarts. Owns only test plumbing;
every check is made on what the agent answers.

    def t_example(make_agent):         # a scenario of tests/agent
        a = make_agent(config); a.start(); p = a.peer(); ...
    sys.exit(run(TESTS, name))         # GPUQOS_AGENT_BIN names the binary
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading

from gpuqos_test import Failure, check, main_status, wait_for  # noqa: F401  (check: for the scenarios)
from gpuqos_test.gq_proto import UNKNOWN  # noqa: F401  (for the scenarios)

PY = "/usr/bin/python3"
# The fake preempt agent: a script of the agent suite, run as a process of
# its own so the node agent sees a real pid, environ and fd.
FAKE_PEER = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                          "agent", "fake_peer.py"))


class Agent:
    def __init__(self, binary, config=None, prefix=None):
        self.binary = binary
        self.dir = tempfile.mkdtemp(prefix="gpuqos-agent-test-")
        self.sock = os.path.join(self.dir, "run", "agent.sock")
        self.ctl_sock = os.path.join(self.dir, "run", "ctl.sock")
        self.state = os.path.join(self.dir, "state")
        self.nvctl = os.path.join(self.dir, "nvidiactl")
        self.config = os.path.join(self.dir, "policy.json")
        self.prefix = prefix or []
        self.proc = None
        self.peers = []
        open(self.nvctl, "w").close()
        if config is not None:
            self.write_config(config)

    def write_config(self, config):
        with open(self.config + ".tmp", "w") as f:
            f.write(config if isinstance(config, str) else json.dumps(config))
        os.rename(self.config + ".tmp", self.config)

    def start(self, extra=()):
        # --bpf off: the fake peers' TSGs were never allocated in any RM,
        # so with the eBPF tracker running they would be refused (the e2e
        # tests cover the tracker with the simulator).
        args = self.prefix + [self.binary, "--standalone", "--socket", self.sock,
                              "--ctl-socket", self.ctl_sock, "--state-dir", self.state,
                              "--nvidiactl", self.nvctl, "--log-level", "debug", "--bpf", "off"]
        if os.path.exists(self.config):
            args += ["--config", self.config]
        # No HTTP listeners on the default ports unless a test asks for
        # them: tests run side by side.
        if "--metrics-address" not in extra:
            args += ["--metrics-address", "off", "--health-address", "off"]
        self.log = open(os.path.join(self.dir, "agent.log"), "ab")
        self.proc = subprocess.Popen(list(args) + list(extra), stdout=self.log,
                                     stderr=subprocess.STDOUT)
        wait_for(lambda: self.try_ctl({"cmd": "list"}) is not None, "agent ctl socket",
                 timeout=20)

    def try_ctl(self, req):
        try:
            return self.ctl(req)
        except OSError:
            return None

    def ctl_raw(self, data, timeout=5.0):
        return self.ctl_answer(self.ctl_send(data, timeout))

    def ctl_send(self, data, timeout=5.0):
        """A connection to the ctl socket with the request written."""
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        try:
            s.connect(self.ctl_sock)
            s.sendall(data)
        except OSError:
            s.close()
            raise
        return s

    def ctl_answer(self, s):
        """The answer on a connection of ctl_send, which it closes."""
        try:
            out = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                out += chunk
        finally:
            s.close()
        check(out.endswith(b"\n"), "ctl answer ends with a newline: %r" % out[-80:])
        return json.loads(out)

    def ctl(self, req, timeout=5.0):
        return self.ctl_raw(json.dumps(req).encode() + b"\n", timeout)

    def list(self):
        r = self.ctl({"cmd": "list"})
        check(r["ok"], "list ok: %r" % r)
        return r

    def tsgs(self, pid=None):
        return [t for t in self.list()["tsgs"] if pid is None or t["pid"] == pid]

    def counters(self):
        return self.list()["agent"]["counters"]

    def peer(self, env=None):
        p = FakePeer(self, env)
        self.peers.append(p)
        return p

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self, sig=signal.SIGTERM):
        if not self.proc:
            return None
        self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
        self.proc = None
        self.log.close()
        return rc

    def close(self, keep=False):
        for p in self.peers:
            p.close()
        if self.proc:
            self.stop(signal.SIGKILL)
        if keep:
            print("kept for inspection: " + self.dir, file=sys.stderr)
        else:
            shutil.rmtree(self.dir, ignore_errors=True)

    def dump_log(self):
        try:
            with open(os.path.join(self.dir, "agent.log"), "rb") as f:
                sys.stderr.write(f.read().decode(errors="replace")[-6000:])
        except OSError:
            pass


class FakePeer:
    def __init__(self, agent, env=None):
        e = dict(os.environ)
        e.pop("GPUQOS_RUN_CLASS", None)
        e.update(env or {})
        self.proc = subprocess.Popen([PY, FAKE_PEER, agent.sock,
                                      agent.nvctl], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, env=e)
        self.pid = self.proc.pid
        self.events = []
        self.lock = threading.Lock()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            with self.lock:
                self.events.append(json.loads(line))

    def evs(self, kind):
        with self.lock:
            return [e for e in self.events if e["ev"] == kind]

    def send(self, **cmd):
        n = len(self.evs("done"))
        self.proc.stdin.write((json.dumps(cmd) + "\n").encode())
        self.proc.stdin.flush()
        wait_for(lambda: len(self.evs("done")) > n, "fake peer ran " + cmd["op"])

    def sync(self):
        """Every event the peer emitted so far is in self.events after this:
        its stdout is ordered and "done" comes last."""
        self.send(op="set")

    def add_tsg(self, client, tsg, engine, **kw):
        self.send(op="tsg", client=client, tsg=tsg, engine=engine, **kw)

    def commands(self, op=None, tsg=None):
        return [c for c in self.evs("command")
                if (op is None or c["op"] == op) and (tsg is None or c["tsg"] == tsg)]

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def standard_process(peer, client=0xC1D00001, gr_app=2048):
    """One CUDA context: a GR TSG (libcuda set 2048 us) and three copy TSGs."""
    peer.add_tsg(client, 0x5C000010, 1, ts=gr_app, app=gr_app)
    for i, eng in enumerate((11, 12, 13)):
        peer.add_tsg(client, 0x5C000011 + i, eng)


def run(tests, name):
    binary = os.environ.get("GPUQOS_AGENT_BIN")
    if not binary or not os.access(binary, os.X_OK):
        print("GPUQOS_AGENT_BIN must name the gpuqos-agent binary", file=sys.stderr)
        return 1
    fn = tests.get(name)
    if not fn:
        print("unknown test %s; have %s" % (name, ", ".join(sorted(tests))), file=sys.stderr)
        return 1
    agents = []

    def make_agent(config=None, prefix=None):
        a = Agent(binary, config, prefix)
        agents.append(a)
        return a

    failed = True

    def test():
        nonlocal failed
        try:
            rc = fn(make_agent)
        except Failure:
            for a in agents:
                a.dump_log()
            raise
        print("ok" if not rc else "skipped")
        failed = False
        return rc or 0
    try:
        return main_status(test)
    finally:
        for a in agents:
            a.close(keep=failed)
