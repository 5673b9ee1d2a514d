#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""test_libc.py - the preempt library loads under every C library it meets.

  floor   libgpuqos-preempt.so references no glibc symbol version newer than
          GLIBC_2.17, names libdl.so.2 and libpthread.so.0 (where glibcs before
          2.34 define dlopen and pthread_create), and references the symbols
          only glibc has (dlvsym, __register_atfork, gnu_get_libc_version)
          weakly, so another C library loads it.
  musl    a program built with musl-gcc prints the same and exits the same
          with the library preloaded as without, and the library says it is
          not taking part (so it was loaded).

Exit 77 (with the reason) when a tool is missing.
Usage: test_libc.py --lib LIB (--objdump OBJDUMP --readelf READELF floor |
       --src DIR musl)
"""
import argparse
import os
import re
import shutil
import subprocess
import tempfile

from gpuqos_test import Failure as Fail
from gpuqos_test import Skip, run_main

FLOOR = (2, 17)
GLIBC_ONLY = ("dlvsym", "__register_atfork", "gnu_get_libc_version")


def ver(s):
    return tuple(int(x) for x in s.split("."))


def floor(args):
    t = subprocess.run([args.objdump, "-T", args.lib], capture_output=True, text=True, check=True).stdout
    newest = []
    weak_glibc_only = {}
    for line in t.splitlines():
        m = re.search(r"\(?GLIBC_([0-9.]+)\)?\s+(\S+)$", line)
        if not m:
            continue
        if ver(m.group(1)) > FLOOR:
            newest.append("%s@GLIBC_%s" % (m.group(2), m.group(1)))
        if m.group(2) in GLIBC_ONLY and "*UND*" in line:
            weak_glibc_only[m.group(2)] = " w " in line
    if newest:
        raise Fail("symbols newer than GLIBC_%d.%d: %s" % (FLOOR + (", ".join(sorted(newest)),)))
    strong = [s for s, w in weak_glibc_only.items() if not w]
    if strong:
        raise Fail("glibc-only symbols referenced strongly (another libc cannot load the library): %s"
                   % ", ".join(strong))
    d = subprocess.run([args.readelf, "-d", args.lib], capture_output=True, text=True, check=True).stdout
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", d)
    for lib in ("libdl.so.2", "libpthread.so.0", "libc.so.6"):
        if lib not in needed:
            raise Fail("%s is not NEEDED (NEEDED: %s)" % (lib, needed))
    print("no symbol newer than GLIBC_%d.%d; NEEDED %s; weak: %s"
          % (FLOOR + (", ".join(needed), ", ".join(sorted(weak_glibc_only)))))


def musl(args):
    cc = shutil.which("musl-gcc")
    if not cc:
        raise Skip("musl-gcc is not installed (Debian's musl-tools; scripts/install-deps.sh installs it)")
    work = tempfile.mkdtemp(prefix="gpuqos-musl-")
    try:
        prog = os.path.join(work, "musl_probe")
        p = subprocess.run([cc, "-O1", "-o", prog, os.path.join(args.src, "musl_probe.c")],
                           capture_output=True, text=True)
        if p.returncode != 0:
            raise Fail("musl-gcc: %s" % p.stderr[-1500:])
        env = {k: v for k, v in os.environ.items() if not k.startswith("GPUQOS_") and k != "LD_PRELOAD"}
        bare = subprocess.run([prog], capture_output=True, text=True, env=env, timeout=30)
        if bare.returncode != 0:
            raise Fail("the musl program fails on its own (%d): %s %s" % (bare.returncode, bare.stdout,
                                                                           bare.stderr))
        pre = subprocess.run([prog], capture_output=True, text=True, timeout=30,
                             env=dict(env, LD_PRELOAD=args.lib, GPUQOS_LOG="info"))
        if pre.returncode != bare.returncode or pre.stdout != bare.stdout:
            raise Fail("with the library preloaded: exit %d, stdout %r, stderr %r; without: exit %d, %r"
                       % (pre.returncode, pre.stdout, pre.stderr[-1500:], bare.returncode, bare.stdout))
        if "not glibc: not taking part" not in pre.stderr:
            raise Fail("the library did not say it stays out of the way (was it loaded?): %r" % pre.stderr)
        print("musl program: exit %d and the same output with the library preloaded (%s)"
              % (pre.returncode, pre.stdout.strip().replace("\n", "; ")))
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--objdump", default="objdump")
    ap.add_argument("--readelf", default="readelf")
    ap.add_argument("--src", default=os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("case", choices=("floor", "musl"))
    args = ap.parse_args()
    {"floor": floor, "musl": musl}[args.case](args)
    print("ok")
    return 0


if __name__ == "__main__":
    run_main(main)
