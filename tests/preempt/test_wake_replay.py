#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""wake_replay runs the wake's rule over LC traces: a steady LC is woken for
nearly every request and wastes none; a burst of late requests stops the
wakes and costs wasted ones; a real trace from the perf log is read and its
counts add up; bad input is refused with a reason."""
import os
import re
import subprocess
import sys
import tarfile
import tempfile

LINE = re.compile(r": (\d+) requests, woken ([0-9.]+): (\d+) hit, (\d+) wasted \(([0-9.]+) of the "
                  r"requests\), (\d+) beaten; (\d+) stops$")


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def write_trace(path, starts):
    with open(path, "w") as f:
        f.write("# i due_ns submit_ns latency_ns gpu_run_ns returned_ns\n")
        for i, t in enumerate(starts):
            f.write(f"{i} {i * 2000000} {t} 150000 0 {t + 20000}\n")


def replay(exe, *args):
    r = subprocess.run([exe, *args], capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        fail(f"{args}: rc {r.returncode}: {r.stderr}")
    m = LINE.search(r.stdout.strip())
    if not m:
        fail(f"{args}: unreadable output {r.stdout!r}")
    n, woken, hit, wasted, _, beaten, stops = m.groups()
    return {"n": int(n), "woken": float(woken), "hit": int(hit), "wasted": int(wasted),
            "beaten": int(beaten), "stops": int(stops)}


def main():
    exe, src = sys.argv[1], sys.argv[2]
    tmp = tempfile.mkdtemp(prefix="gq-replay-")
    # A steady LC, every 2 ms, 60 us after its due time, +-10 us.
    steady = [2000000 * i + 60000 + (i * 7919 % 21 - 10) * 1000 for i in range(3000)]
    p = os.path.join(tmp, "steady.txt")
    write_trace(p, steady)
    s = replay(exe, p)
    if s["n"] != 3000 or s["wasted"] != 0 or s["stops"] != 0 or s["woken"] < 0.99:
        fail(f"steady LC: {s}")
    # Two bursts of noise, every third request 200 us late for 30
    # requests: wasted wakes, a stop each, and wakes again afterwards.
    late = list(steady)
    for k in list(range(1000, 1030, 3)) + list(range(2000, 2030, 3)):
        late[k] += 200000
    p = os.path.join(tmp, "late.txt")
    write_trace(p, late)
    b = replay(exe, p)
    if b["stops"] < 2 or b["wasted"] < 2 or b["woken"] >= s["woken"] or b["woken"] < 0.9:
        fail(f"late bursts: {b} (steady {s})")
    # A real micro LC's trace from the perf log: read, and the counts add up.
    # (scripts/perf-data: the day's archive holds the run's own archive.)
    day = os.path.join(src, "docs/perf-log/raw-2026-11-26.tar.xz")
    with tarfile.open(day) as d, \
            tarfile.open(fileobj=d.extractfile("raw/2026-11-26-wake-soak/run5-traces.tgz")) as t, \
            open(os.path.join(tmp, "trace-micro-gq-default-1xfill-0.txt"), "wb") as out:
        out.write(t.extractfile("trace-micro-gq-default-1xfill-0.txt").read())
    r = replay(exe, "--lead-us", "100", os.path.join(tmp, "trace-micro-gq-default-1xfill-0.txt"))
    if r["n"] < 1000 or r["hit"] + r["wasted"] > r["n"] - 1 or not 0 < r["woken"] <= 1:
        fail(f"real trace: {r}")
    # --each 1: one line per request before the summary, agreeing with it.
    x = subprocess.run([exe, "--each", "1", p], capture_output=True, text=True, timeout=30)
    lines = x.stdout.splitlines()
    whats = [ln.split()[1] for ln in lines[:-1]]
    if x.returncode != 0 or len(whats) != b["n"] or \
            [ln.split()[0] for ln in lines[:-1]] != [str(i) for i in range(b["n"])] or \
            whats.count("hit") != b["hit"] or whats.count("wasted") != b["wasted"] or \
            whats.count("beaten") != b["beaten"] or not set(whats) <= {"hit", "wasted", "beaten",
                                                                      "held", "none"} or \
            (b["stops"] and "held" not in whats):
        fail(f"--each: rc {x.returncode}, {lines[:3]} ... {lines[-1:]}")
    # Refused: a column that is not a number, a bad option, no file.
    bad = os.path.join(tmp, "bad.txt")
    with open(bad, "w") as f:
        f.write("0 0 12x 5\n")
    long_line = os.path.join(tmp, "long.txt")
    with open(long_line, "w") as f:
        f.write("0 0 1000 5 " + "7" * 600 + "\n1 2000000 2000000 5\n")
    for args, want in (([bad], "no number in column 2"), ([long_line], "line longer than"), (["--lead-us", "0", p], "bad option"),
                       (["--col", "99", p], "bad option"), (["--each", "2", p], "bad option"),
                       ([os.path.join(tmp, "none.txt")], "No such file")):
        x = subprocess.run([exe, *args], capture_output=True, text=True, timeout=30)
        if x.returncode == 0 or want not in x.stderr:
            fail(f"{args}: rc {x.returncode}, stderr {x.stderr!r}")
    print(f"ok: steady {s}, bursts {b}, real {r}")


if __name__ == "__main__":
    main()
