#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""soak.py - gpuqos under mixed load for a while, then whether anything
went wrong: a micro LC and three BEs (two all-SM kernels, one training
step) run the whole time under the default policy (the BEs rotate); an
eager ResNet-50 LC (launch-bound: its BEs go back to baseline) comes and
goes; the node agent is restarted now and then (SIGTERM, or SIGKILL
mid-rotation); the training BE's class is flipped to LC for a while and
back (`gpuqosctl set-class`), and each flip must show in the agent's list
(every TSG of that process in the new class, converged) within 5 s, and
stay across a restart. At the end: XID lines the kernel logged meanwhile, the
agent's control failures and timeouts (every incarnation, read before it
stops), each BE's longest stall, the LC's latency, and a short table.

Usage: soak.py --bin DIR --build DIR --out DIR [--minutes M] [--flip-every-s S]
(run from the repository root on a GPU machine; tests/gpu/README.md).
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

import suite  # beside it: the suite's runner (commands, agent, environment)

XID = re.compile(r"NVRM: Xid", re.I)


def kernel_xids():
    try:
        out = subprocess.run(["dmesg"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    return [ln for ln in out.splitlines() if XID.search(ln)]


def ctl_json(r, *args):
    exe = os.path.join(r.build, "agent/cli/gpuqosctl")
    env = dict(os.environ, **r.gq_env(), LD_LIBRARY_PATH=os.path.join(r.build, "lib"))
    try:
        p = subprocess.run([exe, "--json"] + list(args), env=env, capture_output=True, text=True,
                           timeout=10)
        return json.loads(p.stdout)
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return None


def counters(st):
    """The agent's control counters that must stay 0, from status."""
    if not st or not isinstance(st.get("agent"), dict):
        return {"status": "unreadable"}
    st = st["agent"]
    c = st.get("counters", {})
    d = st.get("direct", {}) or {}
    return {"failures": c.get("failures"), "timeouts": c.get("timeouts"),
            "direct_lost": d.get("lost"), "direct_late": d.get("late"),
            "direct_stalled": d.get("stalled")}


def flip_check(r, pid, to, set_class=True):
    """Flip pid to class `to` (lc, or be: back to where it came from, which
    for a `gpuqos run --class be` process is what "auto" gives) unless
    set_class is false, then wait up to 5 s for the agent's list to show
    every TSG of pid in that class and converged. (ok, ms it took, what
    the list showed last)."""
    t0 = time.monotonic()
    if set_class:
        ans = ctl_json(r, "set-class", str(pid), "lc" if to == "lc" else "auto")
        if not ans or ans.get("ok") is not True:
            return False, None, f"set-class answered {ans}"
    want = {"lc": "latency-critical", "be": "best-effort"}[to]
    seen = None
    while time.monotonic() - t0 < 5.0:
        lst = ctl_json(r, "list") or {}
        mine = [t for t in lst.get("tsgs", []) if t.get("pid") == pid]
        seen = [(t.get("class"), t.get("state")) for t in mine]
        # Converged: the agent read back from the RM what it set; a TSG of
        # an engine it leaves alone is "unmanaged", but in the same class.
        if any(st == "converged" for _, st in seen) and \
                all(c == want and st in ("converged", "unmanaged") for c, st in seen):
            return True, round((time.monotonic() - t0) * 1000), seen
        time.sleep(0.1)
    return False, None, seen


def long_stalls(bes, events):
    """Every BE stall be_fill listed (at least --long-gap-ms), with the
    last soak event that began before or during it."""
    out = []
    for i, b in enumerate(bes):
        for end_s, ms in (b or {}).get("long_gaps") or []:
            began = end_s - ms / 1000.0
            before = [e for e in events if e[0] <= end_s]
            last = before[-1] if before else None
            out.append({"be": f"be{i}", "at_s": end_s, "ms": ms,
                        "after": (f"{last[1]} at {last[0]} s"
                                  + (" (during the stall)" if last[0] >= began else "")
                                  if last else "nothing")})
    return sorted(out, key=lambda x: x["at_s"])


def gpu_args(doc):
    """A parser with the arguments every GPU script here takes: the
    workloads' folder, the bundle and the output folder."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("--out", required=True)
    return ap


def main():
    ap = gpu_args(__doc__)
    ap.add_argument("--minutes", type=float, default=20.0)
    # 0 turns the eager LC, or the restarts, off: to tell their effects apart.
    ap.add_argument("--eager-every-s", type=float, default=45.0)
    ap.add_argument("--eager-for-s", type=float, default=15.0)
    ap.add_argument("--restart-every-s", type=float, default=100.0)
    ap.add_argument("--flip-every-s", type=float, default=60.0)
    ap.add_argument("--flip-for-s", type=float, default=20.0)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    ra = argparse.Namespace(bin=a.bin, build=a.build, out=a.out, duration_s=0, clocks=False)
    r = suite.Runner(ra)
    total = a.minutes * 60.0
    xids_before = kernel_xids()
    if not r.ensure_agent("default"):
        return 1
    tmp = r.tmp
    procs = []
    for i, be in enumerate(("fill", "fill", "train")):
        procs.append((f"be{i}", r.spawn(r.be_cmd(be, total, ()), {}, "gq:default", "be", tmp,
                                        f"be{i}")))
    # The LC's log level: its preempt agent's own count of wakes at exit.
    procs.append(("lc", r.spawn(r.lc_cmd("micro", total), {"GPUQOS_LOG": "info"}, "gq:default",
                                "lc", tmp, "lc")))
    if not r.wait_ready(procs, tmp, 240):
        r.say("soak: not every process got ready")
        r.close()
        return 1
    # What the agent holds, every 20 ms, for the whole soak: which BE was
    # gated when, and each LC's launch reading (suite.Runner.ctl_trace).
    trace_path = os.path.join(a.out, "ctltrace.jsonl")
    trace_stop = threading.Event()
    tracer = threading.Thread(target=r.ctl_trace, args=(trace_path, trace_stop), daemon=True)
    tracer.start()
    open(os.path.join(tmp, "go"), "w").close()
    start = time.monotonic()
    # The agent's log stamps in UTC: the window's start, to line the two up.
    start_utc = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + "Z"
    r.say(f"soak: {a.minutes:g} min from now")
    incarnations, eagers, restarts = [], 0, 0
    # What happened when (seconds since the window's start), to match
    # with the BEs' long stalls (be_fill's long_gaps).
    events = []
    next_eager = start + 10
    next_restart = start + a.restart_every_s
    eager = None
    # The class flips: the training BE (be2) to LC and back.
    flips, flip_pid, flipped = [], procs[2][1].pid, None
    next_flip = start + 30
    def flip(to, why):
        t0 = time.monotonic()
        try:
            ok, took, seen = flip_check(r, flip_pid, to, set_class=(why != "kept"))
        except Exception as e:  # a soak is not lost to one bad answer
            ok, took, seen = False, None, f"{type(e).__name__}: {e}"
        flips.append({"at_s": round(t0 - start, 3), "to": to, "why": why, "ok": ok,
                      "took_ms": took, "seen": seen})
        events.append((round(t0 - start, 3), f"be2 {why} {to}: {'ok' if ok else 'NOT SEEN'}"))
        if not ok:
            r.say(f"soak: be2 {why} {to}: not in the agent's list within 5 s: {seen}")
    while time.monotonic() - start < total - 5:
        now = time.monotonic()
        if (a.eager_every_s > 0 and eager is None and now >= next_eager
                and now - start < total - a.eager_for_s - 30):
            etmp = os.path.join(tmp, f"eager{eagers}")
            os.makedirs(etmp)
            cmd = r.lc_cmd("resnet50_eager", a.eager_for_s)
            eager = r.spawn(cmd, {}, "gq:default", "lc", etmp, "lc")
            events.append((round(now - start, 3), "eager LC started"))
            # It starts its window at once: its own go file.
            open(os.path.join(etmp, "go"), "w").close()
            eagers += 1
            next_eager = now + a.eager_every_s
        if eager is not None and eager.poll() is not None:
            events.append((round(now - start, 3), "eager LC gone"))
            eager = None
        if a.restart_every_s > 0 and now >= next_restart:
            st = ctl_json(r, "status")
            incarnations.append(counters(st))
            how = "kill" if restarts % 2 else "term"
            if how == "kill":
                r.agent.kill()
                r.agent.wait()
                r.agent = None
            else:
                r.stop_agent()
            events.append((round(time.monotonic() - start, 3), f"agent stopped ({how})"))
            r.ensure_agent("default", keep_state=True)
            events.append((round(time.monotonic() - start, 3), "agent up"))
            if flipped:
                flip("lc", "kept")
            restarts += 1
            r.say(f"soak: agent restarted ({how}) at {now - start:.0f} s: {incarnations[-1]}")
            next_restart = now + a.restart_every_s
        if a.flip_every_s > 0 and flipped is None and now >= next_flip and \
                now - start < total - a.flip_for_s - 20:
            flip("lc", "set")
            flipped = now
            next_flip = now + a.flip_every_s
        elif flipped is not None and now - flipped >= a.flip_for_s:
            flip("be", "set")
            flipped = None
        time.sleep(1.0)
    incarnations.append(counters(ctl_json(r, "status")))
    listing = ctl_json(r, "list")
    for _, p in procs:
        try:
            p.wait(max(1, total - (time.monotonic() - start) + 120))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    trace_stop.set()
    tracer.join(10)
    xids_after = kernel_xids()
    new_xids = (None if xids_before is None or xids_after is None
                else xids_after[len(xids_before):])
    bes = [r.result(tmp, f"be{i}") for i in range(3)]
    gating = suite.gating(trace_path, {"be_results": bes,
                                       "pids": {t: p.pid for t, p in procs}})
    stalls = long_stalls(bes, events)
    for x in stalls:
        i = int(x["be"][2:])
        g = next((y for y in (gating or {"stalls": [[]] * 3})["stalls"][i]
                  if y["end_s"] == x["at_s"]), None)
        if g:
            x.update({k: g[k] for k in ("gated_pct", "lc_busy_max", "lc_bound")})
    try:
        with open(os.path.join(tmp, "lc.err"), errors="replace") as f:
            wake = [ln.strip() for ln in f if ": wake: " in ln]
    except OSError:
        wake = []
    # The long-running workloads' own output, and how each ended.
    for t, _ in procs:
        for ext in ("out", "err"):
            try:
                shutil.copy(os.path.join(tmp, f"{t}.{ext}"), os.path.join(a.out, f"{t}.{ext}"))
            except OSError:
                pass
    res = {"minutes": a.minutes, "eager_runs": eagers, "agent_restarts": restarts,
           "flips": flips,
           "exit_codes": {t: p.returncode for t, p in procs},
           "lc_wake_log": wake[-12:],
           "environment": suite.environment(),
           "lc": r.result(tmp, "lc"),
           "bes": bes,
           "agent_counters": incarnations,
           "start_utc": start_utc,
           "events": events,
           "long_stalls": stalls,
           "longest_gated_ms": (gating or {}).get("longest_gated_ms"),
           "new_xid_lines": new_xids,
           "failed_tsgs": [t for t in (listing or {}).get("tsgs", [])
                           if t.get("state") == "failed"]}
    with open(os.path.join(a.out, "soak.json"), "w") as f:
        json.dump(res, f, indent=1)
    r.close()
    lc = res["lc"] or {}
    bad = sum(v for c in incarnations for k, v in c.items()
              if isinstance(v, (int, float)) and not isinstance(v, bool) and v)
    print("\n| what | value |\n| --- | --- |")
    print(f"| minutes | {a.minutes:g} |")
    print(f"| eager LC runs / agent restarts | {eagers} / {restarts} |")
    print(f"| class flips seen in the agent's list within 5 s (set, and kept across a restart) | "
          f"{sum(f['ok'] for f in flips)} of {len(flips)} |")
    print(f"| micro LC p50 / p99 / p99.9 us | {lc.get('p50_us')} / {lc.get('p99_us')} / "
          f"{lc.get('p999_us')} |")
    print("| BE iterations/s, longest stall ms | " + "; ".join(
        f"{(b or {}).get('kernels_per_s', (b or {}).get('steps_per_s'))}, "
        f"{(b or {}).get('max_gap_ms')}" for b in res["bes"]) + " |")
    print(f"| control failures+timeouts+lost+late (all agents) | {bad} |")
    print(f"| TSGs failed at the end | {len(res['failed_tsgs'])} |")
    print("| each BE's longest gated run, ms (agent, 20 ms samples) | "
          f"{res['longest_gated_ms']} |")
    print(f"| new XID lines | {'dmesg unreadable' if new_xids is None else len(new_xids)} |")
    print(f"| micro LC's wakes (its preempt agent, at exit) | {(wake or ['none logged'])[-1]} |")
    if res["long_stalls"]:
        print("\n| BE | stall ended at s | ms | last event before it | share of it gated "
              "| highest LC launch reading |\n| --- | --- | --- | --- | --- | --- |")
        for x in res["long_stalls"]:
            print(f"| {x['be']} | {x['at_s']} | {x['ms']} | {x['after']} | "
                  f"{suite.fmt(x.get('gated_pct'))} % | {suite.fmt(x.get('lc_busy_max'))} %"
                  f"{' bound' if x.get('lc_bound') else ''} |")
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    sys.exit(main())
