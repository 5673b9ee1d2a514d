# SPDX-License-Identifier: Apache-2.0
"""sim - the FUSE GPU simulator (tests/sim, docs/simulator.md) as a
context manager: mounted in a temp dir on enter, always unmounted on exit
(after ending the processes started against it), and a failure if the
simulator exited badly or its sanitizers reported anything. Also the
simulator's own tools: fakecuda, sim_probe.

    with Sim(bindir) as sim:      # bindir holds gpuqos-sim, fakecuda, sim_probe
        sim.fakecuda("--contexts", "2")
        sim.state(); sim.log(); sim.control("fail a06c0103 1f")
"""
import json
import os
import shutil
import signal
import subprocess
import tempfile

from gpuqos_test import Failure, check, wait_for

LIVE = []  # mounted simulators, for close_all() on the way out


def needs():
    """Why the simulator cannot run here, or None."""
    if os.geteuid() != 0:
        return "needs root (mounts FUSE with allow_other, runs helpers as other users)"
    try:
        os.close(os.open("/dev/fuse", os.O_RDWR))
    except OSError as e:
        return "cannot open /dev/fuse: %s" % os.strerror(e.errno)
    if not shutil.which("fusermount3") and not shutil.which("umount"):
        return "neither fusermount3 nor umount is available"
    return None


def close_all():
    for sim in list(LIVE):
        sim.__exit__(None, None, None)


class Sim:
    def __init__(self, bindir, gpus=1, extra=()):
        self.bindir = bindir
        self.tmp = tempfile.mkdtemp(prefix="gpuqos-sim-")
        os.chmod(self.tmp, 0o755)
        self.mnt = os.path.join(self.tmp, "mnt")
        os.mkdir(self.mnt)
        self.errpath = os.path.join(self.tmp, "sim.stderr")
        self.args = [os.path.join(bindir, "gpuqos-sim"), self.mnt, "--foreground",
                     "--gpus", str(gpus)] + list(extra)
        self.proc = None
        self.background = []  # processes started against it: ended before unmounting

    def __enter__(self):
        with open(self.errpath, "w") as err:
            self.proc = subprocess.Popen(self.args, stdout=err, stderr=err)
        try:
            wait_for(self._mounted, "the simulator to mount", 5.0)
        except Failure:
            self.__exit__(None, None, None)
            raise
        LIVE.append(self)
        return self

    def _mounted(self):
        if self.proc.poll() is not None:
            raise Failure("gpuqos-sim exited with %d: %s" % (self.proc.returncode, self.stderr()))
        with open("/proc/self/mountinfo") as f:
            return any(line.split()[4] == self.mnt for line in f)

    def stderr(self):
        try:
            with open(self.errpath) as f:
                return f.read()
        except OSError:
            return ""

    def end_background(self):
        """A failed case leaves its holding workloads behind: end them (and
        their --fork children: they run in their own sessions)."""
        while self.background:
            p = self.background.pop()
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.communicate(timeout=10)

    def __exit__(self, *exc):
        if self in LIVE:
            LIVE.remove(self)
        self.end_background()
        if subprocess.call(["fusermount3", "-u", self.mnt], stderr=subprocess.DEVNULL) != 0:
            subprocess.call(["umount", "-l", self.mnt], stderr=subprocess.DEVNULL)
        if self.proc:
            try:
                # Unmounted, it exits (with the sanitizers' leak check):
                # seconds on a loaded machine.
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                if exc and exc[0] is None:
                    raise Failure("gpuqos-sim did not exit within 30 s of its unmount: %s"
                                  % self.stderr())
            if self.proc.returncode not in (0, None) and exc and exc[0] is None:
                raise Failure("gpuqos-sim exited with %d: %s" % (self.proc.returncode,
                                                                 self.stderr()))
            # Sanitizer reports go to stderr: any is a failure.
            if "Sanitizer" in self.stderr() or "runtime error" in self.stderr():
                raise Failure("sanitizer report from gpuqos-sim:\n" + self.stderr())
        shutil.rmtree(self.tmp, ignore_errors=True)
        return False

    @property
    def dev(self):
        return os.path.join(self.mnt, "nvidiactl")

    def state(self):
        with open(os.path.join(self.mnt, "state")) as f:
            return json.load(f)

    def log(self):
        with open(os.path.join(self.mnt, "log")) as f:
            return [json.loads(line) for line in f if line.strip()]

    def control(self, text):
        """Write one command block; raises OSError as write(2) does."""
        fd = os.open(os.path.join(self.mnt, "control"), os.O_WRONLY)
        try:
            os.write(fd, text.encode())
        finally:
            os.close(fd)

    def injections(self):
        with open(os.path.join(self.mnt, "control")) as f:
            return json.load(f)

    def wait_empty(self, timeout=3.0):
        """Release is asynchronous in FUSE: wait until nothing is left."""
        def empty():
            s = self.state()
            return not s["clients"] and not s["tsgs"] and not s["files"]
        wait_for(empty, "every client to be freed", timeout)

    # ---- programs ----

    def fakecuda(self, *args, check_rc=True, timeout=20):
        cmd = [os.path.join(self.bindir, "fakecuda"), "--dev", self.dev] + list(args)
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        if check_rc and p.returncode != 0:
            raise Failure("fakecuda %s exited %d: %s" % (" ".join(args), p.returncode, p.stderr))
        return p

    def fakecuda_bg(self, *args):
        cmd = [os.path.join(self.bindir, "fakecuda"), "--dev", self.dev] + list(args)
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def probe(self, mode, *args, prefix=()):
        cmd = list(prefix) + [os.path.join(self.bindir, "sim_probe"), mode, self.mnt] + list(args)
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
        check(p.returncode == 0, "sim_probe %s exited %d: %s" % (mode, p.returncode, p.stderr))
        return {r["case"]: r for r in map(json.loads, p.stdout.splitlines())}
