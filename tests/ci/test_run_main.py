#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""test_run_main.py - gpuqos_test.run_main, under which every Python test
program runs its main: a Skip that escapes main prints "SKIP: <reason>"
(the line tests/ci/skips.py reads) and exits 77, a Failure prints
"FAIL: <reason>" and exits 1, both on stdout after what main printed;
otherwise main's return value is the exit status (None is 0), and
sys.exit or any other exception in main is left alone."""
import os
import subprocess
import sys

PROGRAM = """
import sys
import gpuqos_test as gq

def main(how):
    print("started")
    if how == "skip":
        raise gq.Skip("no tool here")
    if how == "fail":
        raise gq.Failure("the TSG kept 2048 us")
    if how == "return":
        return 3
    if how == "exit":
        sys.exit(5)
    if how == "error":
        raise KeyError("k")

gq.run_main(main, sys.argv[1])
"""


def run(how):
    p = subprocess.run([sys.executable, "-c", PROGRAM, how], capture_output=True, text=True,
                       timeout=30, env=dict(os.environ))
    return p.returncode, p.stdout, p.stderr


def fail(what):
    print("FAIL: " + what)
    sys.exit(1)


def main():
    want = {
        "skip": (77, "started\nSKIP: no tool here\n"),
        "fail": (1, "started\nFAIL: the TSG kept 2048 us\n"),
        "return": (3, "started\n"),
        "none": (0, "started\n"),
        "exit": (5, "started\n"),
    }
    for how, (rc, out) in want.items():
        got = run(how)
        if got[:2] != (rc, out) or got[2]:
            fail("%s: exit %d, stdout %r, stderr %r; want exit %d, stdout %r" % ((how,) + got + (rc, out)))
    rc, out, err = run("error")
    if rc != 1 or out != "started\n" or "KeyError" not in err:
        fail("another exception: exit %d, stdout %r, stderr %r; want its traceback" % (rc, out, err))
    print("ok")


if __name__ == "__main__":
    main()
