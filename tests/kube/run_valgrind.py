#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""run_valgrind.py BINARY ARGS... - runs one agent/kube test under valgrind
and fails on any error or definite leak. Skips (77) without valgrind or
when given a sanitized binary (the two cannot share a process)."""
import os
import shutil
import subprocess
import sys

def main():
    if not shutil.which("valgrind"):
        print("SKIP: valgrind is not installed")
        return 77
    binary = sys.argv[1]
    with open(binary, "rb") as f:
        if b"__asan_init" in f.read():
            print("SKIP: %s is built with AddressSanitizer" % binary)
            return 77
    cmd = ["valgrind", "--quiet", "--error-exitcode=99", "--leak-check=full",
           "--errors-for-leak-kinds=definite", "--show-leak-kinds=definite",
           "--track-fds=no"] + sys.argv[1:]
    print(" ".join(cmd), flush=True)
    # valgrind runs code 20-50 times slower: this run looks for leaks and
    # memory errors, the sanitized runs for calls that block.
    return subprocess.call(cmd, env=dict(os.environ, KUBE_TEST_MAX_CALL_US="2000000"))

if __name__ == "__main__":
    sys.exit(main())
