# SPDX-License-Identifier: Apache-2.0
"""gpuqos_test - what every Python test suite of gpuqos shares: one failure
and one skip type, one `check`, one `wait_for` on the monotonic clock.
The launchers live in submodules: `sim` (the FUSE GPU simulator), `agent`
(gpuqos-agent with fake preempt agents), `node` (a simulated GPU node:
simulator, real node agent, workloads, gpuqosctl; the end-to-end suites'
command line), `kube` (that node in Kubernetes mode, with pod cgroups),
`apiserver` (the test Kubernetes API server), `oci` (a container started
with crun as a kubelet would), `proc` (a child that drops to nobody before
exec) and `fake_ctl` (a stand-in control socket); `gq_proto` is the one
Python codec of abi/gq_proto.h. A helper two folders' suites share lives
here; a script may import a sibling of its own folder, never another's.

A test program's main runs under `run_main` (a runner shared by a folder's
suites under `main_status`), which turns a Skip or a Failure that escapes
it into the line and exit status ctest reads.

Suites find it through PYTHONPATH, which ctest sets (ENVIRONMENT of each
test); nothing edits sys.path. Run one by hand with
`PYTHONPATH=tests/lib /usr/bin/python3 tests/<suite>.py ...`.
"""
import os
import shutil
import socket
import sys
import time

SKIP = 77  # the exit status ctest's SKIP_RETURN_CODE reports as skipped


class Failure(Exception):
    """A check that did not hold: the test fails with this sentence."""


class Skip(Exception):
    """The test cannot run here (no root, no /dev/fuse, a tool missing)."""


def main_status(main, *args):
    """The exit status main(*args) comes to: its return value (None is 0);
    a Skip that escapes it prints "SKIP: <reason>" and is SKIP, a Failure
    prints "FAIL: <reason>" and is 1 (both on stdout, where the programs
    print "ok")."""
    try:
        rc = main(*args)
    except Skip as e:
        print("SKIP: %s" % e)
        return SKIP
    except Failure as e:
        print("FAIL: %s" % e)
        return 1
    return 0 if rc is None else rc


def run_main(main, *args):
    """Runs a test program's main(*args) and exits with main_status's
    status."""
    sys.exit(main_status(main, *args))


def check(cond, what):
    """Raises Failure(what) unless cond holds."""
    if not cond:
        raise Failure(what)


def wait_for(pred, what="condition", timeout=15.0, step=0.02):
    """Calls pred until it returns something true, and returns that; after
    timeout seconds (CLOCK_MONOTONIC) raises Failure naming what and the
    last value seen."""
    end = time.monotonic() + timeout
    while True:
        last = pred()
        if last:
            return last
        if time.monotonic() >= end:
            raise Failure("timed out after %.1f s waiting for %s (last: %r)" % (timeout, what, last))
        time.sleep(step)


# Where scripts/install-test-tools.sh puts helm, kubectl and the chart's
# validators (outside the checkout).
TEST_TOOLS = os.environ.get("GPUQOS_TEST_TOOLS", "/opt/gpuqos-test-tools")


def find_tool(name):
    """The path of a test tool: the project's install of it
    ($GPUQOS_TEST_TOOLS/bin, scripts/install-test-tools.sh) first, then
    PATH; None where neither has it."""
    own = os.path.join(TEST_TOOLS, "bin", name)
    if os.access(own, os.X_OK):
        return own
    return shutil.which(name)


def free_port():
    """A TCP port on 127.0.0.1 that nothing listened on a moment ago."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def cgroup2_root(mountinfo="/proc/self/mountinfo"):
    """The mount point of this machine's cgroup v2 tree: /sys/fs/cgroup
    where cgroup2 is mounted alone (a stock Debian 12, systemd's unified
    layout), /sys/fs/cgroup/unified in the hybrid layout (v1 controllers
    beside it); None without a cgroup2 mount under /sys/fs/cgroup. Read
    from the mount table, not guessed from paths that both layouts may
    have."""
    points = set()
    with open(mountinfo) as f:
        for line in f:
            # ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER
            left, _, right = line.partition(" - ")
            fields = left.split()
            if len(fields) >= 5 and right.split()[:1] == ["cgroup2"]:
                points.add(fields[4])
    for p in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified"):
        if p in points:
            return p
    return None
