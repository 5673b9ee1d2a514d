#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""GPUQOS_PREEMPT_DISABLE=1: a container's opt-out of the preempt agent.

With the variable set to 1 the library, though preloaded, passes every RM
call straight through (the workload's output is byte for byte the one
without it) and never connects to the node agent; with it unset or set to
anything else it connects as usual (the control runs).

usage: test_preempt_disable.py --lib LIB --fake FAKE_RM --workload RM_WORKLOAD
"""
import argparse
import os
import socket
import subprocess
import sys
import tempfile

SCRIPT = "\n".join(["open", "client 64", "device 0 0 64", "tsg 0 1 64", "settime 0 2048 54",
                    "gettime 0", "close", "exit", ""])


def run(args, tmp, env, listener=None):
    """The script's output; with a listener, also whether the library
    connected while the workload, its RM client made, waits for input."""
    p = subprocess.Popen([args.workload, os.path.join(tmp, "fake-nvidiactl")], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, env=env)
    first, rest = SCRIPT.split("device", 1)
    p.stdin.write(first.encode())
    p.stdin.flush()
    was = None
    if listener is not None:
        listener.settimeout(2.0)
        try:
            c, _ = listener.accept()
            c.close()
            was = True
        except socket.timeout:
            was = False
    out, _ = p.communicate(("device" + rest).encode(), timeout=10)
    return (p.returncode, out), was


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--fake", required=True)
    ap.add_argument("--workload", required=True)
    args = ap.parse_args()
    base = {k: v for k, v in os.environ.items() if not k.startswith("GPUQOS_") and k != "LD_PRELOAD"}
    with tempfile.TemporaryDirectory() as tmp:
        sock = os.path.join(tmp, "agent.sock")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        listener.bind(sock)
        listener.listen(8)
        want, _ = run(args, tmp, dict(base, LD_PRELOAD=args.fake))
        if want[0] != 0 or b"us=2048" not in want[1]:
            print("baseline run failed: %r" % (want,))
            return 1
        preload = dict(base, LD_PRELOAD="%s %s" % (args.lib, args.fake), GPUQOS_SOCKET=sock,
                       GPUQOS_POLICY_WAIT_MS="0")
        for value, opted_out in (("1", True), (None, False), ("0", False), ("yes", False)):
            env = dict(preload)
            if value is not None:
                env["GPUQOS_PREEMPT_DISABLE"] = value
            got, was = run(args, tmp, env, listener)
            if got != want:
                print("GPUQOS_PREEMPT_DISABLE=%s: output differs:\n%r\n%r" % (value, got, want))
                return 1
            if was == opted_out:
                print("GPUQOS_PREEMPT_DISABLE=%s: the agent %s" %
                      (value, "connected" if opted_out else "did not connect"))
                return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
