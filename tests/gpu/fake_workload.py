#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""fake_workload.py - stands in for lc_micro and be_fill (by the name it is
called as) in gpu.suite_plumbing: the same ready/start-file handshake and
window, and one JSON line of the same shape, with no GPU. Its numbers are
fixed and mean nothing; the test checks that the suite carries them."""
import json
import os
import sys
import time


def opt(args, key, default=None):
    return args[args.index(key) + 1] if key in args else default


def main():
    args = sys.argv[1:]
    dur = float(opt(args, "--duration-s", "1"))
    ready, start = opt(args, "--ready-file"), opt(args, "--start-file")
    time.sleep(0.1)
    if ready:
        open(ready, "w").close()
    while start and not os.path.exists(start):
        time.sleep(0.01)
    start_unix = time.time()
    time.sleep(dur)
    if os.path.basename(sys.argv[0]) == "be_fill":
        print(json.dumps({"workload": "be_fill", "kernels": 40, "kernels_per_s": 20.0,
                          "duration_s": dur, "iters": int(opt(args, "--iters", "7")),
                          "iters_given": "--iters" in args, "start_unix": round(start_unix, 3),
                          "max_gap_ms": 321.5,
                          "max_gap_at_s": 0.5, "long_gaps_total": 1, "long_gaps": [[0.5, 321.5]]}))
    else:
        print(json.dumps({"workload": "lc_micro", "n": 20, "p50_us": 55.0, "p99_us": 77.0,
                          "p999_us": 80.0, "max_us": 91.0, "late": 0, "duration_s": dur,
                          "preload": os.environ.get("LD_PRELOAD", "")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
