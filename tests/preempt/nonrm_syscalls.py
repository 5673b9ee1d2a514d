#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""nonrm_syscalls.py LIB PROGRAM - the preempt agent adds no system call to
ioctls that are not NVIDIA RM calls: strace counts the ioctl and total
system calls of PROGRAM (10000 non-RM ioctls) with and without LIB
preloaded; the counts must be equal. Exit 77 if strace is missing."""
import os
import re
import shutil
import subprocess
import sys
import tempfile


def count(prog, env):
    with tempfile.NamedTemporaryFile("r", suffix=".strace") as out:
        p = subprocess.run(["strace", "-f", "-c", "-o", out.name, prog], env=env,
                           capture_output=True, text=True, timeout=60)
        if p.returncode != 0:
            sys.exit("%s failed: %s %s" % (prog, p.stdout, p.stderr))
        calls = {}
        for line in out.read().splitlines():
            m = re.match(r"\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(\w+)$", line)
            if m and m.group(2) != "total":
                calls[m.group(2)] = int(m.group(1))
        return calls


def main():
    lib, prog = sys.argv[1], sys.argv[2]
    if not shutil.which("strace"):
        print("SKIP: strace is not installed")
        return 77
    base = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    plain = count(prog, base)
    pre = count(prog, dict(base, LD_PRELOAD=lib))
    print("without the preempt agent:", plain.get("ioctl"), "ioctl,", sum(plain.values()), "calls")
    print("with the preempt agent:   ", pre.get("ioctl"), "ioctl,", sum(pre.values()), "calls")
    if plain.get("ioctl") != 10000 or pre.get("ioctl") != 10000:
        print("FAIL: expected exactly 10000 ioctl calls in both runs")
        return 1
    # Loading one more shared object costs a fixed handful of calls (open,
    # mmap, ...); none may scale with the ioctls.
    extra = {k: pre.get(k, 0) - plain.get(k, 0) for k in set(pre) | set(plain)}
    if any(v >= 100 for v in extra.values()):
        print("FAIL: calls added per ioctl:", {k: v for k, v in extra.items() if v})
        return 1
    print("ok: extra calls only from loading the library:", {k: v for k, v in extra.items() if v})
    return 0


if __name__ == "__main__":
    sys.exit(main())
