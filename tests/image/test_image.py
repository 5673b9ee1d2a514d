#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""test_image.py - the gpuqos image is known to start.

Builds the image's root filesystem the way deploy/Dockerfile's runtime stage
does, without a container engine: Debian 12 from the package mirror with
mmdebstrap (deploy/image-packages.txt; the tarball is cached under
$GPUQOS_IMAGE_CACHE, default /var/cache/gpuqos-image, keyed on the package
list, suite and mirror), plus this build installed by `cmake --install`
with the image's prefix (/usr/local). Then, with crun (gpuqos_test.oci):

  * every installed program and library finds all its libraries (ldd in
    the image: a runtime package missing from the list fails here);
  * `gpuqos-agent --help` runs;
  * the simulator demo: the image's gpuqos-agent (standalone, the chart's
    capabilities only), and a BE and an LC workload started with the
    image's `gpuqos run` (which must find the installed preempt library on
    its own), against the GPU simulator running on this host; the
    simulator must hold LC 100000 us / BE 50 us on their compute TSGs, and
    the image's gpuqosctl must show both preempt agents and its metrics
    server every TSG.

Exit 77 (with the reason) without root, mmdebstrap, crun, /dev/fuse or the
package mirror. Usage: test_image.py --build BUILD
"""
import argparse
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.abspath(os.path.join(HERE, "..", ".."))

# The test library (tests/lib, PYTHONPATH from ctest).
from gpuqos_test import Skip, run_main, wait_for  # noqa: E402
from gpuqos_test import check as expect  # noqa: E402
from gpuqos_test import oci  # noqa: E402
from gpuqos_test.node import Node  # noqa: E402

SUITE = "bookworm"
MIRROR = os.environ.get("GPUQOS_DEBIAN_MIRROR", "http://deb.debian.org/debian")
CACHE = os.environ.get("GPUQOS_IMAGE_CACHE", "/var/cache/gpuqos-image")
# The chart's capabilities for the agent container (charts/gpuqos).
AGENT_CAPS = ["CAP_BPF", "CAP_PERFMON", "CAP_SYS_NICE", "CAP_SYS_PTRACE"]


def packages(build):
    with open(os.path.join(SRC, "deploy", "image-packages.txt")) as f:
        pkgs = [line.strip() for line in f if line.strip() and not line.startswith("#")]
    # A sanitized test build needs the sanitizers' runtimes (and links
    # libatomic); the shipped image, an optimized build, does not.
    p = subprocess.run(["objdump", "-p", os.path.join(build, "agent", "gpuqos-agent")],
                       capture_output=True, text=True)
    if "libasan.so" in p.stdout:
        pkgs += ["libasan8", "libubsan1", "libatomic1"]
    return sorted(set(pkgs))


def rootfs_tarball(pkgs):
    """The cached mmdebstrap tarball for pkgs, made when missing."""
    key = hashlib.sha256(json.dumps([SUITE, MIRROR, "essential", pkgs]).encode()).hexdigest()[:16]
    tar = os.path.join(CACHE, "rootfs-%s.tar" % key)
    if os.path.exists(tar):
        print("root filesystem from the cache: %s" % tar)
        return tar
    os.makedirs(CACHE, exist_ok=True)
    tmp = os.path.join(CACHE, "part-%d.tar" % os.getpid())
    t0 = time.time()
    p = subprocess.run(["mmdebstrap", "--variant=essential", "--format=tar", "--include=" + ",".join(pkgs),
                        SUITE, tmp, MIRROR], capture_output=True, text=True, timeout=900)
    if p.returncode != 0:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise Skip("mmdebstrap could not build the root filesystem from %s (exit %d): %s"
                   % (MIRROR, p.returncode, p.stderr.strip()[-600:]))
    os.rename(tmp, tar)
    # One root filesystem is cached: older package lists are dropped.
    for f in os.listdir(CACHE):
        if (f.startswith("rootfs-") and f != os.path.basename(tar)) or f.startswith("part-"):
            p = os.path.join(CACHE, f)
            shutil.rmtree(p) if os.path.isdir(p) else os.unlink(p)
    print("root filesystem built by mmdebstrap in %.0f s: %s" % (time.time() - t0, tar))
    return tar


def image_root(build, work):
    """Extracted root filesystem + `cmake --install` of the build."""
    pkgs = packages(build)
    tar = rootfs_tarball(pkgs)
    root = os.path.join(work, "rootfs")
    os.mkdir(root)
    subprocess.run(["tar", "-xf", tar, "-C", root], check=True)
    p = subprocess.run(["cmake", "--install", build, "--prefix", "/usr/local"],
                       env=dict(os.environ, DESTDIR=root), capture_output=True, text=True)
    expect(p.returncode == 0, "cmake --install: %s%s" % (p.stdout[-1500:], p.stderr[-1500:]))
    for f in ("bin/gpuqos-agent", "bin/gpuqos", "bin/gpuqosctl", "lib/gpuqos/libgpuqos-preempt.so"):
        expect(os.path.exists(os.path.join(root, "usr/local", f)), "cmake --install did not install %s" % f)
    return root


ENV = {"PATH": "/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
       "ASAN_OPTIONS": "detect_leaks=0:verify_asan_link_order=0"}


def in_image(work, root, name, script, mounts=(), caps=AGENT_CAPS, timeout=60):
    c = oci.Container(work, name, ["/bin/sh", "-c", script], ENV,
                      [{"destination": "/run", "type": "tmpfs", "source": "tmpfs", "options": ["mode=755"]}]
                      + list(mounts), caps, rootfs=root, readonly=True)
    return c


def check_libs(work, root):
    c = in_image(work, root, "ldd",
                 "for f in /usr/local/bin/* /usr/local/lib/gpuqos/*.so; do echo \"== $f\"; ldd \"$f\"; done")
    rc, out = c.run(60)
    expect(rc == 0, "ldd in the image: exit %r\n%s" % (rc, out[-2000:]))
    missing = [line.strip() for line in out.splitlines() if "not found" in line]
    expect(not missing, "libraries the image lacks (add their packages to deploy/image-packages.txt): %s"
           % "; ".join(missing))
    print("ldd: every installed file finds its libraries in the image (%d files)" % out.count("== "))


def check_help(work, root):
    rc, out = in_image(work, root, "help", "exec gpuqos-agent --help").run(60)
    expect(rc == 0 and "usage: gpuqos-agent" in out, "gpuqos-agent --help in the image: exit %r\n%s" % (rc, out))
    print("gpuqos-agent --help runs in the image")


DEMO = r"""
set -eu
gpuqos-agent --standalone --bpf off --nvidiactl "$DEV" --socket /run/gpuqos/agent.sock \
  --ctl-socket /run/gpuqos/ctl.sock --state-dir /run/gpuqos --metrics-address "127.0.0.1:$PORT" \
  >/out/agent.log 2>&1 &
AGENT=$!
i=0; while [ ! -S /run/gpuqos/ctl.sock ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done
export GPUQOS_SOCKET=/run/gpuqos/agent.sock GPUQOS_CTL_SOCKET=/run/gpuqos/ctl.sock
gpuqos run --class be -- /opt/gpuqos-test/e2e-fakecuda --dev "$DEV" --hold 60 >/out/be.log 2>&1 &
BE=$!
gpuqos run --class lc -- /opt/gpuqos-test/e2e-fakecuda --dev "$DEV" --hold 60 >/out/lc.log 2>&1 &
LC=$!
echo "$BE $LC" >/out/pids
i=0; while [ ! -e /out/stop ] && [ $i -lt 900 ]; do sleep 0.1; i=$((i+1)); done
gpuqosctl --json list >/out/list.json
kill $BE $LC $AGENT
wait $AGENT || true
"""


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def scrape(port):
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=5) as r:
            return r.read().decode()
    except OSError:
        return ""


def check_demo(build, work, root):
    if not os.path.exists("/dev/fuse"):
        raise Skip("no /dev/fuse (the GPU simulator)")
    node = Node(build)
    out = os.path.join(work, "out")
    os.mkdir(out)
    c = None
    try:
        fake = os.path.join(build, "tests", "e2e", "e2e-fakecuda")
        mounts = [oci.bind(node.mnt, node.mnt),  # at its host path: fds read back as --nvidiactl
                  oci.bind(fake, "/opt/gpuqos-test/e2e-fakecuda", True),
                  oci.bind(out, "/out")]
        port = free_port()
        env_script = "DEV=%s\nPORT=%d\n" % (node.dev, port) + DEMO
        c = in_image(work, root, "demo", env_script, mounts)
        c.start()

        def gr():
            ts = [t for t in node.sim_state().get("tsgs", []) if t["engineType"] == 1]
            return sorted(t["timeslice_us"] for t in ts)
        wait_for(lambda: not c.running() or gr() == [50, 100000], timeout=40,
                 what="simulator: BE 50 us and LC 100000 us on the two compute TSGs")
        expect(c.running(), "the demo container ended early:\n%s" % c.text()[-2000:])
        # The image's metrics server (libmicrohttpd) answers from the host
        # (no network namespace).
        series = wait_for(lambda: [line for line in scrape(port).splitlines()
                                   if line.startswith("gpuqos_tsg_timeslice_applied_seconds{")],
                          timeout=15, what="the image's agent serving per-TSG metrics")
        expect(len(series) == 8, "8 TSGs in the metrics: %r" % series)
        open(os.path.join(out, "stop"), "w").close()
        c.proc.wait(30)
        with open(os.path.join(out, "list.json")) as f:
            lst = json.load(f)
        classes = sorted({t["class"] for t in lst["tsgs"]})
        expect(classes == ["best-effort", "latency-critical"], "classes in the image's gpuqosctl: %r" % classes)
        expect(all("preempt" in t["sources"] for t in lst["tsgs"]) and len(lst["tsgs"]) == 8,
               "every TSG reported by an injected preempt agent (gpuqos run found the library): %r"
               % [(t["pid"], t["sources"]) for t in lst["tsgs"]])
        print("simulator demo in the image: LC 100000 us / BE 50 us, 8 TSGs from 2 injected preempt agents, "
              "all 8 in its metrics")
    except Exception:
        for f in ("agent.log", "be.log", "lc.log"):
            p = os.path.join(out, f)
            if os.path.exists(p):
                print("---- %s\n%s" % (f, open(p).read()[-2000:]))
        if c:
            print("---- container\n" + c.text()[-2000:])
        raise
    finally:
        if c:
            c.stop()
        oci.close_after(node.close)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    why = oci.why_not()
    if why:
        raise Skip(why)
    if not shutil.which("mmdebstrap"):
        raise Skip("mmdebstrap is not installed (scripts/install-deps.sh installs it)")
    work = tempfile.mkdtemp(prefix="gpuqos-image-")
    os.chmod(work, 0o755)
    try:
        root = image_root(build, work)
        check_libs(work, root)
        check_help(work, root)
        check_demo(build, work, root)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("ok")
    return 0


if __name__ == "__main__":
    run_main(main)
