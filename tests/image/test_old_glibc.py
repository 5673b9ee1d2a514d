#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""test_old_glibc.py - the preempt library in an image older than the build.

Images built on Debian 11, Ubuntu 20.04, RHEL 8 or Amazon Linux 2 carry a
glibc older than the one gpuqos is built with. Here a Debian 11 root
filesystem (glibc 2.31; mmdebstrap from the package mirror, with gcc so the
workload is a program built for that image; the tarball is cached under
$GPUQOS_IMAGE_CACHE, default /var/cache/gpuqos-image) gets this build's
libgpuqos-preempt.so, and in containers (crun, gpuqos_test.oci) on that
root that see the simulator and the agent's socket:

  * `/bin/true` and a shell run with the library in LD_PRELOAD and with it
    named in /etc/ld.so.preload (the device plugin's two injection modes);
  * a BE and an LC, each the libcuda-like workload (tests/sim/fakecuda.c,
    compiled in the image by its own gcc), run with the library preloaded
    and talk to a node agent on this host: the agent's gpuqosctl shows each
    one's four TSGs reported by its preempt agent, and the simulator holds
    LC 100000 us / BE 50 us on their compute TSGs;
  * the same with the library named in /etc/ld.so.preload.

Exit 77 (with the reason) without root, mmdebstrap, crun, /dev/fuse or
the package mirror. Usage: test_old_glibc.py --build BUILD
"""
import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.abspath(os.path.join(HERE, "..", ".."))

from gpuqos_test import Failure as Fail  # noqa: E402
from gpuqos_test import Skip, run_main, wait_for  # noqa: E402
from gpuqos_test import check as expect  # noqa: E402
from gpuqos_test import oci  # noqa: E402
from gpuqos_test.node import Node, agent_tsgs, gr_timeslice, sim_client_of_pid  # noqa: E402

SUITE = "bullseye"
PACKAGES = ["gcc", "libc6-dev"]
MIRROR = os.environ.get("GPUQOS_DEBIAN_MIRROR", "http://deb.debian.org/debian")
CACHE = os.environ.get("GPUQOS_IMAGE_CACHE", "/var/cache/gpuqos-image")
LIB = "/opt/gpuqos/libgpuqos-preempt.so"
PROG = "/opt/gpuqos/fakecuda"


def rootfs_tarball():
    key = hashlib.sha256(json.dumps([SUITE, MIRROR, "minbase", PACKAGES]).encode()).hexdigest()[:16]
    tar = os.path.join(CACHE, "%s-%s.tar" % (SUITE, key))
    if os.path.exists(tar):
        print("root filesystem from the cache: %s" % tar)
        return tar
    os.makedirs(CACHE, exist_ok=True)
    tmp = os.path.join(CACHE, "%s-part-%d.tar" % (SUITE, os.getpid()))
    t0 = time.time()
    p = subprocess.run(["mmdebstrap", "--variant=minbase", "--format=tar", "--include=" + ",".join(PACKAGES),
                        SUITE, tmp, MIRROR], capture_output=True, text=True, timeout=900)
    if p.returncode != 0:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise Skip("mmdebstrap could not build a %s root filesystem from %s (exit %d): %s"
                   % (SUITE, MIRROR, p.returncode, p.stderr.strip()[-600:]))
    os.rename(tmp, tar)
    for f in os.listdir(CACHE):
        if f.startswith(SUITE + "-") and f != os.path.basename(tar):
            os.unlink(os.path.join(CACHE, f))
    print("root filesystem built by mmdebstrap in %.0f s: %s" % (time.time() - t0, tar))
    return tar


def make_root(build, work):
    root = os.path.join(work, "rootfs")
    os.mkdir(root)
    subprocess.run(["tar", "-xf", rootfs_tarball(), "-C", root], check=True)
    opt = os.path.join(root, LIB.lstrip("/").rsplit("/", 1)[0])
    os.makedirs(opt, exist_ok=True)
    shutil.copy(os.path.join(build, "agent", "preempt", "libgpuqos-preempt.so"), os.path.join(root, LIB.lstrip("/")))
    src = os.path.join(root, "src")
    os.makedirs(os.path.join(src, "abi"))
    shutil.copy(os.path.join(SRC, "tests", "sim", "fakecuda.c"), src)
    shutil.copy(os.path.join(SRC, "abi", "rm_abi.h"), os.path.join(src, "abi"))
    p = subprocess.run(["/usr/sbin/chroot", root, "gcc", "-O1", "-I/src", "-o", PROG, "/src/fakecuda.c", "-ldl"],
                       capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"})
    expect(p.returncode == 0, "gcc in the %s image: %s" % (SUITE, p.stderr[-1500:]))
    libc = subprocess.run(["/usr/sbin/chroot", root, "/lib/x86_64-linux-gnu/libc.so.6"], capture_output=True, text=True)
    print("image: %s" % (libc.stdout.splitlines() or ["?"])[0])
    return root


def container(work, root, name, argv, env, binds=()):
    """argv in a container (crun) on the image's root, with exactly env;
    each path in binds is seen at the same path. The host's pid of the
    container's first process is the program's (no pid namespace)."""
    return oci.Container(work, name, list(argv), env, [oci.bind(b, b) for b in binds], [],
                         rootfs=root, readonly=False)


def check_start(work, root, preload_file):
    env = {"PATH": "/usr/bin:/bin"}
    how = "in /etc/ld.so.preload" if preload_file else "in LD_PRELOAD"
    if not preload_file:
        env["LD_PRELOAD"] = LIB
    for i, argv in enumerate((["/bin/true"], ["/bin/sh", "-c", "echo started"])):
        rc, out = container(work, root, "start%d%s" % (i, "f" if preload_file else ""), argv, env).run(60)
        want = "started\n" if len(argv) > 1 else ""
        expect(rc == 0 and out == want, "%s in the %s image with the library %s: exit %r, %r"
               % (argv, SUITE, how, rc, out[-1500:]))
    print("/bin/true and /bin/sh start with the library %s" % how)


def check_workloads(work, node, root, preload_file):
    """A BE and an LC, both built in the image: each one's four TSGs come
    from its preempt agent, and the simulator holds LC 100000 us / BE 50 us
    on their compute TSGs."""
    how = "in /etc/ld.so.preload" if preload_file else "in LD_PRELOAD"
    cs = {}
    try:
        for cls in ("be", "lc"):
            env = {"PATH": "/usr/bin:/bin", "GPUQOS_SOCKET": node.sock, "GPUQOS_RUN_CLASS": cls,
                   "GPUQOS_POLICY_WAIT_MS": "1000"}
            if not preload_file:
                env["LD_PRELOAD"] = LIB
            cs[cls] = container(work, root, "%s%s" % (cls, "f" if preload_file else ""),
                                [PROG, "--dev", node.dev, "--hold", "60"], env, [node.dir, node.mnt]).start()
        pids = {}
        for cls, c in cs.items():
            pids[cls] = wait_for(lambda: not c.running() or c.init_pid(), timeout=40,
                                 what="the %s workload's container" % cls)
            expect(c.running(), "the %s workload in the %s image ended: %s" % (cls, SUITE, c.text()[-1500:]))
        want = {"be": ("best-effort", [50]), "lc": ("latency-critical", [100000])}
        for cls, pid in pids.items():
            tsgs = wait_for(lambda: [t for t in agent_tsgs(node, pid) if "preempt" in t["sources"]]
                            if len(agent_tsgs(node, pid)) == 4 else None,
                            timeout=40, what="the agent seeing the %s workload's 4 TSGs" % cls)
            expect(len(tsgs) == 4 and all(t["class"] == want[cls][0] for t in tsgs),
                   "the %s workload's TSGs, each from its preempt agent, %s: %r"
                   % (cls, want[cls][0], [(t["sources"], t["class"]) for t in agent_tsgs(node, pid)]))
        for cls, pid in pids.items():
            wait_for(lambda: gr_timeslice(node, pid) == want[cls][1], timeout=40,
                     what="the simulator holding %s us on the %s's compute TSG" % (want[cls][1], cls))
        print("a BE and an LC built in the %s image, library %s: 4 TSGs each from their preempt agents, "
              "BE 50 us / LC 100000 us" % (SUITE, how))
    except Fail:
        for cls, c in cs.items():
            print("---- %s workload container\n%s" % (cls, c.text()[-2000:]))
        raise
    finally:
        for c in cs.values():
            c.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    node = None
    why = oci.why_not()
    if why:
        raise Skip(why)
    if not shutil.which("mmdebstrap"):
        raise Skip("mmdebstrap is not installed (scripts/install-deps.sh installs it)")
    if os.uname().machine != "x86_64":
        raise Skip("the image's loader path is x86_64's")
    if not os.path.exists("/dev/fuse"):
        raise Skip("no /dev/fuse (the GPU simulator)")
    work = tempfile.mkdtemp(prefix="gpuqos-oldglibc-")
    os.chmod(work, 0o755)
    try:
        root = make_root(build, work)
        check_start(work, root, False)
        node = Node(build)
        node.start_agent()
        check_workloads(work, node, root, False)
        with open(os.path.join(root, "etc", "ld.so.preload"), "w") as f:
            f.write(LIB + "\n")
        check_start(work, root, True)
        check_workloads(work, node, root, True)
    except Fail:
        if node:
            node.dump()
        raise
    finally:
        if node:
            node.close()
        shutil.rmtree(work, ignore_errors=True)
    print("ok")
    return 0


if __name__ == "__main__":
    run_main(main)
