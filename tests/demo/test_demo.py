#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""test_demo.py - scripts/demo as a newcomer runs it, with a build folder of
its own (never the checkout's build-demo/) and never apt.

Usage: test_demo.py --source SRC --build DIR --cmake CMAKE break STAGE
       test_demo.py --source SRC --build DIR --cmake CMAKE full
(exit 77 = skipped, with a reason)

  break STAGE  GPUQOS_DEMO_BREAK=STAGE: the demo exits 1, its last line says
               "demo: STAGE failed: ...", it ran the stages before STAGE and
               none after, and it left no process, mount or folder behind.
  full         the whole demo succeeds: the five stages in order, the BE and
               the LC listed, the simulator's own record of the BE's
               timeslice shortened beside the LC and restored after it,
               nothing left behind; then `cmake --install` of its build into
               a temporary prefix gives working programs, run from another
               directory, and `gpuqos run` injects the installed library.
"""
import argparse
import glob
import os
import re
import shutil
import subprocess
import tempfile

from gpuqos_test import Skip, check, run_main

# The stage each GPUQOS_DEMO_BREAK name belongs to ("== [N/5]"), in order.
STAGES = {"packages": 1, "configure": 2, "build": 2, "simulator": 3, "agent": 3, "be": 4,
          "lc": 4, "list": 4, "state": 4, "restore": 4}
# Room for a cold build on a busy 2-core machine; ctest's TIMEOUT is above it.
DEMO_TIMEOUT_S = 840


def need(stage):
    if os.geteuid() != 0:
        raise Skip("the demo needs root (it re-runs itself with sudo, which may ask for a password)")
    if STAGES.get(stage, 5) >= 3:
        if not os.path.exists("/dev/fuse"):
            raise Skip("no /dev/fuse for the GPU simulator")
        if os.path.exists("/dev/nvidiactl"):
            raise Skip("an NVIDIA driver is here: the demo runs the real GPU (tests/gpu covers it)")


def leftovers(build, before):
    """What a finished demo must not leave: its programs running, its
    simulator mounted, its run folder."""
    left = []
    for exe in glob.glob("/proc/[0-9]*/exe"):
        try:
            path = os.readlink(exe)
        except OSError:
            continue
        if path.startswith(build + "/"):
            left.append("process %s: %s" % (exe.split("/")[2], path))
    new = set(glob.glob("/tmp/gpuqos-demo.*")) - before
    left += ["folder " + d for d in sorted(new)]
    with open("/proc/self/mounts") as f:
        left += ["mount " + line.split()[1] for line in f
                 if any(line.split()[1].startswith(d + "/") for d in new)]
    return left


def run_demo(args, env_extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUQOS_DEMO_")}
    env.update(GPUQOS_DEMO_BUILD=args.build, **env_extra)
    before = set(glob.glob("/tmp/gpuqos-demo.*"))
    p = subprocess.run(["/bin/bash", os.path.join(args.source, "scripts", "demo")],
                       cwd="/", env=env, capture_output=True, text=True, timeout=DEMO_TIMEOUT_S)
    check(not leftovers(args.build, before),
          "the demo left behind: %s\n%s" % (leftovers(args.build, before), p.stderr[-3000:]))
    return p


def headers(out):
    """The stage numbers of the "== [N/5]" lines, in order."""
    return [int(m) for m in re.findall(r"^== \[(\d)/5\]", out, re.M)]


def test_break(args, stage):
    need(stage)
    # The packages stage is the one that is not skipped: broken, it runs
    # `false` instead of scripts/install-deps.sh, so apt never runs.
    extra = {"GPUQOS_DEMO_BREAK": stage}
    if stage != "packages":
        extra["GPUQOS_DEMO_NO_PACKAGES"] = "1"
    p = run_demo(args, extra)
    tail = "stdout:\n%s\nstderr:\n%s" % (p.stdout[-2000:], p.stderr[-3000:])
    check(p.returncode == 1, "GPUQOS_DEMO_BREAK=%s: exit %d, not 1\n%s" % (stage, p.returncode, tail))
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    check(lines and lines[-1].startswith("demo: %s failed: " % stage),
          "the last line is not \"demo: %s failed: ...\"\n%s" % (stage, tail))
    fails = [line for line in lines if re.match(r"demo: \S+ failed: ", line)]
    check(len(fails) == 1, "%d failure lines, not 1: %s" % (len(fails), fails))
    seen = headers(p.stdout)
    want = STAGES[stage]
    check(seen and seen == sorted(seen) and sorted(set(seen)) == list(range(1, want + 1)),
          "stages %s before a failure in stage %d (%s)\n%s" % (seen, want, stage, tail))
    print("demo: %s failed as it should: %s" % (stage, lines[-1]))


def section(out, start, end):
    check(start in out and end in out, "no %r ... %r in the demo's output" % (start, end))
    return out.split(start, 1)[1].split(end, 1)[0]


def gr_rows(table):
    """The CLASS of each GR0 row of a `gpuqosctl list` table."""
    return sorted(line.split()[4] for line in table.splitlines()
                  if len(line.split()) > 4 and line.split()[3] == "GR0")


def test_full(args):
    need("full")
    p = run_demo(args, {"GPUQOS_DEMO_NO_PACKAGES": "1"})
    out = p.stdout
    tail = "stdout:\n%s\nstderr:\n%s" % (out[-3000:], p.stderr[-3000:])
    check(p.returncode == 0, "the demo exited %d\n%s" % (p.returncode, tail))
    check(not re.search(r"^demo: \S+ failed", p.stderr, re.M), "a failure line\n" + tail)
    seen = headers(out)
    check(seen == sorted(seen) and sorted(set(seen)) == [1, 2, 3, 4, 5],
          "stages %s, not 1 to 5 in order\n%s" % (seen, tail))
    check("GPU SIMULATOR" in out, "the demo did not say it runs the simulator\n" + tail)
    # What the agent listed, in the three moments the demo shows.
    alone = section(out, "(the BE alone", "a latency-critical workload")
    beside = section(out, "(the LC beside the BE", "(the LC gone")
    after = section(out, "(the LC gone", "the simulator's own record")
    check(gr_rows(alone) == ["BE"], "the BE alone: GR rows %s\n%s" % (gr_rows(alone), tail))
    check(gr_rows(beside) == ["BE", "LC"], "beside: GR rows %s\n%s" % (gr_rows(beside), tail))
    check(gr_rows(after) == ["BE"], "after: GR rows %s\n%s" % (gr_rows(after), tail))
    # The simulator's record, as the demo read it: shortened, then restored.
    m = re.search(r"alone (\d+) us -> beside the LC (\d+) us \(LC: (\d+) us\) -> after the LC (\d+) us",
                  out)
    check(m, "no record line\n" + tail)
    solo, be, lc, back = map(int, m.groups())
    check(be < solo < lc and back == solo, "the record: %s" % m.group(0))
    check("cmake --install" in out, "the demo does not say how to install\n" + tail)
    print("demo: ran end to end: " + m.group(0))
    check_install(args)


def check_install(args):
    prefix = tempfile.mkdtemp(prefix="gpuqos-demo-install-")
    try:
        p = subprocess.run([args.cmake, "--install", args.build, "--prefix", prefix],
                           capture_output=True, text=True, timeout=120)
        check(p.returncode == 0, "cmake --install exited %d: %s" % (p.returncode, p.stderr))
        files = sorted(os.path.relpath(os.path.join(d, f), prefix)
                       for d, _, fs in os.walk(prefix) for f in fs)
        want = ["bin/gpuqos", "bin/gpuqos-agent", "bin/gpuqosctl", "lib/gpuqos/libgpuqos-preempt.so"]
        check(files == want, "installed %s, not %s" % (files, want))
        for prog, word in (("gpuqosctl", "usage: gpuqosctl"), ("gpuqos-agent", "usage: gpuqos-agent"),
                           ("gpuqos", "usage: gpuqos")):
            p = subprocess.run([os.path.join(prefix, "bin", prog), "--help"], cwd="/",
                               capture_output=True, text=True, timeout=30)
            check(p.returncode == 0 and word in p.stdout + p.stderr,
                  "installed %s --help: exit %d: %s%s" % (prog, p.returncode, p.stdout, p.stderr))
        # The installed `gpuqos run` finds the installed library next to its bin/.
        env = {k: v for k, v in os.environ.items() if k not in ("GPUQOS_PREEMPT_LIB", "LD_PRELOAD")}
        p = subprocess.run([os.path.join(prefix, "bin", "gpuqos"), "run", "--class", "be", "--",
                            "/bin/sh", "-c", 'echo "$LD_PRELOAD"'],
                           cwd="/", env=env, capture_output=True, text=True, timeout=30)
        lib = os.path.realpath(os.path.join(prefix, "lib", "gpuqos", "libgpuqos-preempt.so"))
        check(p.returncode == 0 and p.stdout.split(":")[0].strip() == lib,
              "installed gpuqos run: exit %d, LD_PRELOAD %r, not %s: %s"
              % (p.returncode, p.stdout.strip(), lib, p.stderr))
        print("demo: cmake --install gave %s" % files)
    finally:
        shutil.rmtree(prefix, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("--cmake", required=True)
    ap.add_argument("case", choices=["break", "full"])
    ap.add_argument("stage", nargs="?", choices=sorted(STAGES))
    args = ap.parse_args()
    args.build = os.path.abspath(args.build)
    if args.case == "break":
        check(args.stage, "break needs a stage")
        test_break(args, args.stage)
    else:
        test_full(args)
    return 0


if __name__ == "__main__":
    run_main(main)
