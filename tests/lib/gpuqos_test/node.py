# SPDX-License-Identifier: Apache-2.0
"""node - one simulated GPU node for the end-to-end suites (tests/e2e,
tests/gpuinfo, tests/image, tests/plugin, tests/chart): the FUSE GPU
simulator (gpuqos_test.sim) in a temp dir, the real node agent
(standalone unless told otherwise, --bpf off unless asked), workloads
(fakecuda, under `gpuqos run` or bare, as root or as nobody) and
gpuqosctl; the simulator's own view of the settings (gr_timeslice and
the rest read its state, never what the agent believes); and
run_scenario, the command line every such suite shares.

    sys.exit(run_scenario(SCENARIOS, Node))     # --build BUILD SCENARIO
    def t_example(node):
        node.start_agent(); lc = node.workload("lc")
        wait_for(lambda: gr_timeslice(node, lc.pid) == [100000])
"""
import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile

from gpuqos_test import SKIP, Failure, Skip, check, main_status, wait_for
from gpuqos_test.proc import as_nobody
from gpuqos_test.sim import Sim


class Node:
    """One simulated GPU node: simulator + agent + helpers, in a temp dir."""

    def __init__(self, build, gpus=1, sim_extra=()):
        self.b = build
        self.dir = tempfile.mkdtemp(prefix="gpuqos-e2e-")
        os.chmod(self.dir, 0o755)
        # The simulator (gpuqos_test.sim): a mount of its own, always
        # removed, its sanitizer reports a failure. sim_extra: more of its
        # options (--fb-mib N).
        self.simx = Sim(self.bin("tests/sim"), gpus=gpus, extra=sim_extra).__enter__()
        self.mnt = self.simx.mnt
        self.dev = self.simx.dev
        self.sock = os.path.join(self.dir, "agent.sock")
        self.ctl_sock = os.path.join(self.dir, "ctl.sock")
        self.state = os.path.join(self.dir, "state")
        self.procs = []
        self.pin = None  # the eBPF tracker's pin directory, once an agent used it
        self.agent = None
        self.agent_logs = []
        self.env = dict(os.environ)
        for k in list(self.env):
            if k.startswith("GPUQOS_") or k in ("LD_PRELOAD",):
                del self.env[k]
        self.env.update({"GPUQOS_SOCKET": self.sock, "GPUQOS_CTL_SOCKET": self.ctl_sock,
                         "GPUQOS_PREEMPT_LIB": self.bin("agent/preempt/libgpuqos-preempt.so"),
                         "ASAN_OPTIONS": "verify_asan_link_order=0:detect_leaks=0",
                         # A sanitized agent on a loaded 2-core CI machine can
                         # take longer than the default 50 ms to answer HELLO;
                         # the tests check the no-window mechanism, not that
                         # bound, so they give it room.
                         "GPUQOS_POLICY_WAIT_MS": "1000"})

    def bin(self, rel):
        return os.path.join(self.b, rel)

    def start_agent(self, config=None, extra=(), prefix=(), bpf=None, mode=("--standalone",),
                    agent="agent/gpuqos-agent"):
        """bpf=False runs the agent with --bpf off; bpf=True with --bpf on
        and a pin directory of this node's own. The scenarios written before
        the tracker leave it None: off, unless E2E_BPF=on asks to run them
        with the tracker too."""
        if bpf is None:
            bpf = os.environ.get("E2E_BPF") == "on"
        log = os.path.join(self.dir, "agent-%d.log" % len(self.agent_logs))
        self.agent_logs.append(log)
        if bpf:
            if not os.path.exists(self.bin("bpf/gpuqos-tsgtrace")):
                raise Skip("the eBPF tracer was not built (bpf/ skipped)")
            if self.pin is None:
                self.pin = "/sys/fs/bpf/gpuqos-e2e-%d" % os.getpid()
            extra = ["--bpf", "on", "--bpf-pin-dir", self.pin] + list(extra)
        else:
            extra = ["--bpf", "off"] + list(extra)
        # No HTTP listeners on the default ports unless a test asks for
        # them: tests run side by side.
        if "--metrics-address" not in extra:
            extra = ["--metrics-address", "off", "--health-address", "off"] + list(extra)
        cmd = list(prefix) + [self.bin(agent)] + list(mode) + ["--socket", self.sock,
               "--ctl-socket", self.ctl_sock, "--state-dir", self.state,
               "--nvidiactl", self.dev, "--log-level", "debug"] + list(extra)
        if config is not None:
            path = os.path.join(self.dir, "policy.json")
            with open(path, "w") as f:
                json.dump(config, f)
            cmd += ["--config", path]
        self.agent = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=open(log, "w"),
                                      env=self.env)
        wait_for(lambda: self.agent.poll() is not None or self.ctl_ready(),
                 what="agent ctl socket accepting")
        if self.agent.poll() is not None:
            text = open(log).read()
            if bpf and "eBPF tracker" in text:
                raise Skip("the eBPF tracker cannot run here: " + text.strip().splitlines()[-1])
            raise Failure("the agent exited at start (%d): %s" % (self.agent.returncode, text[-2000:]))

    def ctl_ready(self):
        # A killed agent leaves its socket file behind: wait for a listener.
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(self.ctl_sock)
            return True
        except OSError:
            return False
        finally:
            s.close()

    def stop_agent(self, sig=signal.SIGTERM):
        if self.agent and self.agent.poll() is None:
            self.agent.send_signal(sig)
            self.agent.wait(10)
        self.agent = None

    def public_copy(self, rel):
        """A copy any user can execute: the build tree may sit under /root."""
        dst = os.path.join(self.dir, "pub", os.path.basename(rel))
        if not os.path.exists(dst):
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            os.chmod(os.path.dirname(dst), 0o755)
            shutil.copy(self.bin(rel), dst)
            os.chmod(dst, 0o755)
        return dst

    def workload(self, cls, args=(), nonroot=False, inject=True, stdout=None, prefix=(), env_extra=None):
        """fakecuda under `gpuqos run --class cls` (or bare, inject=False)."""
        binf = self.bin
        env = dict(self.env, **(env_extra or {}))
        if nonroot:
            binf = self.public_copy
            env = dict(env, GPUQOS_PREEMPT_LIB=self.public_copy("agent/preempt/libgpuqos-preempt.so"))
        cmd = [binf("tests/e2e/e2e-fakecuda"), "--dev", self.dev] + list(args)
        if inject:
            cmd = [binf("agent/cli/gpuqos"), "run", "--class", cls, "--"] + cmd
        cmd = list(prefix) + cmd
        # A session of its own: close() ends whatever it started too.
        p = subprocess.Popen(cmd, env=env, preexec_fn=as_nobody if nonroot else None, cwd=self.dir,
                             stdout=stdout or subprocess.DEVNULL, stderr=subprocess.PIPE,
                             start_new_session=True)
        self.procs.append(p)
        return p

    def ctl(self, *args):
        p = subprocess.run([self.bin("agent/cli/gpuqosctl"), "--json"] + list(args),
                           capture_output=True, text=True, env=self.env, timeout=20)
        try:
            return json.loads(p.stdout)
        except ValueError:
            raise Failure("gpuqosctl %s: exit %d, %r %r" % (args, p.returncode, p.stdout, p.stderr))

    def sim_state(self):
        with open(os.path.join(self.mnt, "state")) as f:
            return json.load(f)

    def sim_log(self):
        with open(os.path.join(self.mnt, "log")) as f:
            return [json.loads(line) for line in f if line.strip()]

    def sim_control(self, text):
        with open(os.path.join(self.mnt, "control"), "w") as f:
            f.write(text + "\n")

    def close(self):
        for p in self.procs:
            # One already reaped is skipped: its pid may be another's now.
            if p.poll() is not None:
                continue
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        for p in self.procs:
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                pass
        self.stop_agent(signal.SIGKILL)
        if self.pin and os.path.isdir(self.pin):
            # The agent leaves its programs attached on purpose: detach here.
            subprocess.run([self.bin("bpf/gpuqos-tsgtrace"), "--pin-dir", self.pin, "--unpin"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            shutil.rmtree(self.pin, ignore_errors=True)
        self.simx.__exit__(None, None, None)
        if os.environ.get("E2E_KEEP"):
            print("kept", self.dir)
        else:
            shutil.rmtree(self.dir, ignore_errors=True)

    def dump(self):
        for log in self.agent_logs[-1:]:
            with open(log) as f:
                sys.stderr.write("---- agent log (tail)\n" + "".join(f.readlines()[-60:]))
        # What the simulated RM holds and the last calls it took: which
        # side's word the agent believed when the two disagree.
        try:
            tsgs = self.sim_state().get("tsgs", [])
            sys.stderr.write("---- simulator TSGs\n" + "".join(
                json.dumps(t, sort_keys=True) + "\n" for t in tsgs))
            sys.stderr.write("---- simulator log (tail)\n" + "".join(
                json.dumps(r, sort_keys=True) + "\n" for r in self.simx.log()[-40:]))
        except (OSError, ValueError) as e:
            sys.stderr.write("---- simulator unreadable: %s\n" % e)


def h(x):
    return int(x, 16) if isinstance(x, str) else x


def sim_tsgs_by_client(node):
    """client handle -> list of TSG dicts, from the simulator's state."""
    out = {}
    for t in node.sim_state().get("tsgs", []):
        out.setdefault(h(t["client"]), []).append(t)
    return out


def sim_client_of_pid(node, pid):
    """The clients opened by pid, via the simulator's file table."""
    st = node.sim_state()
    return [h(c) for f in st.get("files", []) if f.get("opener_pid") == pid for c in f.get("clients", [])]


def gr_timeslice(node, pid):
    """The GR TSG timeslices of pid's clients, as the simulator holds them."""
    clients = sim_client_of_pid(node, pid)
    by = sim_tsgs_by_client(node)
    return sorted(t["timeslice_us"] for c in clients for t in by.get(c, []) if t["engineType"] == 1)


def copy_timeslices(node, pid):
    clients = sim_client_of_pid(node, pid)
    by = sim_tsgs_by_client(node)
    return sorted(t["timeslice_us"] for c in clients for t in by.get(c, []) if t["engineType"] != 1)


# An LC that launches without pause is launch-bound only while it gets the
# CPU to launch: ahead of other work on a loaded machine (a prefix for
# workload(); nice execs, so the pid stays the workload's).
EAGER = ("nice", "-n", "-10")


def proc_row(node, pid):
    """The process's row in the agent's `list`, or None until it has seen it."""
    return next((p for p in node.ctl("list")["processes"] if p["pid"] == pid), None)


def agent_tsgs(node, pid=None):
    lst = node.ctl("list")
    check(lst.get("ok"), "list failed: %r" % lst)
    return [t for t in lst["tsgs"] if pid is None or t["pid"] == pid]


def run_scenario(scenarios, make_node, what="the simulator's FUSE mount"):
    """Parse --build SCENARIO, check root and /dev/fuse, build the node with
    make_node(build_dir), run the scenario; returns the exit status
    (0 ok, 1 failed, SKIP)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("scenario", choices=sorted(scenarios))
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("SKIP: %s needs root" % what)
        return SKIP
    if not os.path.exists("/dev/fuse"):
        print("SKIP: /dev/fuse is missing")
        return SKIP

    def scenario():
        node = make_node(os.path.abspath(a.build))
        try:
            scenarios[a.scenario](node)
        except Failure:
            node.dump()
            raise
        finally:
            node.close()
        print("ok")
    return main_status(scenario)
