#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""test_suite.py - the GPU suite's own plumbing, without a GPU, so that a
broken script is found here and not on a GPU machine's clock: every set
builds its scenarios; a driver-defaults row and a gpuqos row (the real node
agent and preempt agent, fake workloads that run no kernel) run, carry the
workloads' numbers into suite.jsonl and the table; the eager-LC event
starts its process (which fails at once without PyTorch, as it must be
allowed to); soak.py and fight.py parse their arguments.

Usage: test_suite.py --build BUILD
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

import suite as s  # beside it: the module under test
from gpuqos_test import check, run_main

HERE = os.path.dirname(os.path.abspath(__file__))
SUITE = os.path.join(HERE, "suite.py")
SUITES = ("proof", "quick", "models", "multibe", "policies", "fourbe", "stall", "targets",
          "podwindows", "tail", "net", "soak", "first")


def suite(*args, timeout=240):
    p = subprocess.run([sys.executable, SUITE] + list(args), capture_output=True, text=True,
                       timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    a = ap.parse_args()
    # The named suites, each with scenarios (or, soak and first, the
    # command it runs), and no more than a user can read through.
    check(sorted(list(s.SETS) + list(s.SCRIPTS)) == sorted(SUITES), f"the suites: {s.SETS} {s.SCRIPTS}")
    for name in SUITES:
        rc, out, err = suite("--sets", name, "--list")
        check(rc == 0 and out.strip(), f"--sets {name} --list: rc {rc}\n{out}{err}")
    rc, out, err = suite("--sets", "soak", "--out", "/o", "--list", "--", "--minutes", "6")
    check(rc == 0 and out.split()[1:] == [os.path.join(HERE, "soak.py"), "--bin", os.path.join(HERE, "bin"),
                                          "--build", os.path.join(s.ROOT, "build-gpu"), "--out",
                                          "/o/soak", "--minutes", "6"],
          f"soak's command: rc {rc}\n{out}{err}")
    rc, out, err = suite("--sets", "proof,first", "--list")
    check(rc != 0 and "run alone" in err, f"first beside proof: rc {rc}\n{out}{err}")
    # The switch each request pays is measured without a wake: a row under
    # the default policy (which wakes) or with GPUQOS_WAKE_LEAD_US set is
    # not used; gq:nowake and GPUQOS_WAKE_LEAD_US=0 are.
    def rec(mode, outside, lc="micro", nbe=1, env=None):
        return {"lc": lc, "mode": mode, "nbe": nbe, "be": "fill", "lc_args": [],
                "lc_env": env or {}, "be_results": [{"kernels_per_s": 80.0}] * nbe,
                "lc_result": {"outside_p50_us": outside, "p99_us": 300.0, "n": 500,
                              "duration_s": 1.0, "run_p50_us": 30.0}}
    recs = [rec("alone", 20.0, nbe=0), rec("gq:default", 110.0), rec("gq:nowake", 210.0),
            rec("gq:default", 120.0, env={"GPUQOS_WAKE_LEAD_US": "100"}),
            {**rec("be_alone", 0.0), "lc": None, "lc_result": None,
             "be_results": [{"kernels_per_s": 100.0}]}]
    check(s.derive(recs, None) == 190.0, f"the switch from the rows without a wake: {recs}")
    recs[2]["lc_env"] = {"GPUQOS_WAKE_LEAD_US": "100"}
    check(s.derive(recs, None) is None, "every row woken: no switch estimate")
    recs[1]["lc_env"] = {"GPUQOS_WAKE_LEAD_US": "0"}
    check(s.derive(recs, None) == 90.0, "the environment's 0 wins over the policy")
    # A model without CUDA events (its GPU time 0) takes the GPU side of
    # its traced requests alone as its work: 200 requests/s x (600 us + 2
    # x 100 us) = 0.16 of the time.
    def mrec(mode, nbe, after=600.0, kept=100.0):
        return {"lc": "bert_base_graph", "mode": mode, "nbe": nbe, "be": "fill",
                "lc_args": ["--no-events"], "lc_env": {},
                "be_results": [{"kernels_per_s": kept}] * nbe,
                "lc_result": {"outside_p50_us": 650.0, "p99_us": 800.0, "n": 1200,
                              "duration_s": 6.0, "gpu_p50_us": 0.0,
                              "after_call_p50_us": after}}
    mrecs = [mrec("alone", 0), mrec("gq:winauto", 1, after=520.0, kept=67.2),
             {**mrec("be_alone", 1), "lc": None, "lc_result": None}]
    s.derive(mrecs, 100.0)
    d = mrecs[1]["derived"]
    check(d.get("be_limit") == 0.84 and d.get("be_vs_limit") == 0.8,
          f"the limit of a model without events: {d}")
    # The targets table: what each gq row is held to, from its numbers.
    def trec(lc, nbe, p99=None, x=None, kept=None, each=None, limit=None, mode="gq:default",
             rep=0):
        return {"scenario": f"{lc} {mode} {nbe}", "rep": rep, "lc": lc, "be": "fill",
                "mode": mode, "nbe": nbe, "lc_args": [],
                "lc_result": {"p99_us": p99} if p99 is not None else {},
                "derived": {k: v for k, v in (("p99_vs_alone", x), ("be_kept", kept),
                                              ("be_each", each), ("be_vs_limit", limit))
                            if v is not None}}
    got = s.targets([trec("micro", 1, p99=250.0, kept=0.81, limit=0.98),
                     trec("micro", 1, p99=251.0, kept=0.79, limit=0.96, rep=1),
                     trec("micro", 3, p99=299.0, kept=0.81, each=[0.27, 0.27, 0.27]),
                     trec("micro", 3, p99=301.0, kept=0.79, each=[0.25, 0.26, 0.28], rep=1),
                     trec("resnet50_graph", 1, x=1.05), trec("resnet50_graph", 3, x=1.11),
                     trec("micro", 1, p99=100.0, mode="alone"),
                     trec("micro_poisson", 1, p99=900.0)])
    want = [("micro LC p99 ≤ 250 µs with 1 BE", 0, "250 µs", True),
            ("one BE ≥ 97 % of its physical limit", 0, "0.98", True),
            ("micro LC p99 ≤ 250 µs with 1 BE", 1, "251 µs", False),
            ("one BE ≥ 97 % of its physical limit", 1, "0.96", False),
            ("micro LC p99 ≤ 300 µs with 3 BEs", 0, "299 µs", True),
            ("3 BEs' shares within 10 % of each other", 0, "0.0 % apart", True),
            ("3 BEs' total ≥ one BE beside the same LC", 0, "0.81 vs 0.81", True),
            ("micro LC p99 ≤ 300 µs with 3 BEs", 1, "301 µs", False),
            ("3 BEs' shares within 10 % of each other", 1, "12.0 % apart", False),
            ("3 BEs' total ≥ one BE beside the same LC", 1, "0.79 vs 0.81", False),
            ("CUDA graph p99 ≤ 1.05× alone with 1 BE", 0, "1.05×", True),
            ("CUDA graph p99 ≤ 1.10× alone with 3 BEs", 0, "1.11×", False)]
    check([(t, rep, v, ok) for t, _, rep, v, ok in got] == want, f"the targets: {got}")
    # The gated runs from the agent's samples: a hole in the samples (the
    # agent stopped answering) ends a run; without one, a run is read whole.
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "ctl.jsonl")
        with open(path, "w") as f:
            for t, g in ((0.0, 0), (0.02, 1), (0.04, 1), (0.06, 1), (2.06, 1), (2.08, 0),
                         (3.00, 1), (3.02, 1), (3.30, 1), (3.32, 0)):
                f.write(json.dumps({"t": t, "tsg": [[7, "be", 0, g, 0, 400]], "proc": []}) + "\n")
        g = s.gating(path, {"be_results": [{}], "pids": {"be0": 7}})
        check(g["longest_gated_ms"] == [40] and g["agent_longest_ms"] == [400],
              f"gated runs split at a hole in the samples: {g}")
    with tempfile.TemporaryDirectory() as d:
        bin_dir = os.path.join(d, "bin")
        os.makedirs(bin_dir)
        for prog in ("lc_micro", "be_fill"):
            os.symlink(os.path.join(HERE, "fake_workload.py"), os.path.join(bin_dir, prog))
        out_dir = os.path.join(d, "out")
        rc, out, err = suite("--sets", "proof", "--only", r"^micro (defaults|gq:default) 3xfill$",
                             "--bin", bin_dir, "--build", a.build, "--out", out_dir,
                             "--duration-s", "1")
        check(rc == 0, f"suite: rc {rc}\n{out}\n{err}")
        recs = [json.loads(ln) for ln in open(os.path.join(out_dir, "suite.jsonl"))]
        names = [r["scenario"] for r in recs]
        check(names == ["be alone fill", "be alone 3xfill", "micro alone", "micro defaults 3xfill",
                        "micro gq:default 3xfill"], f"scenarios run: {names}")
        for r in recs[3:]:
            check((r["lc_result"] or {}).get("p99_us") == 77.0
                  and [b.get("long_gaps") for b in r["be_results"]] == [[[0.5, 321.5]]] * 3,
                  f"{r['scenario']}: the workloads' lines: {r}")
        # The fakes make no RM call, so their preempt agents never connect:
        # the agent answers with no processes, and the suite records that.
        gq = recs[4]
        check(gq.get("activity_mid") == [], f"the agent's launch readings: {gq.get('activity_mid')}")
        # Every row shows the LC's max beside its p50, p99 and p99.9.
        check("| micro gq:default 3xfill | 0 | 55 | 77 | 80 | 91 |" in out, f"the table:\n{out}")
        check("322@0.5" in out, f"the long stalls in the table:\n{out}")
        # be_fill is calibrated alone before the first be_fill row, and
        # every be_fill after it gets that iteration count.
        check("be_fill calibrated alone: 7 iterations" in out + err, f"calibration:\n{out}\n{err}")
        check([[b.get("iters_given") for b in r["be_results"]] for r in recs] == [[True], [True] * 3, [], [True] * 3,
                                                                                 [True] * 3],
              f"be_fill's iterations passed to each: {recs}")
        # --interleave runs the reps in rounds (baselines once, first; every
        # other round backwards), and
        # a "{build}" in an LC's GPUQOS_ setting is the --build folder: the
        # tail set's former-wake row preloads BUILD/old's library.
        build2 = os.path.join(d, "build2")
        os.makedirs(os.path.join(build2, "old"))
        for sub in ("agent", "lib"):
            if os.path.exists(os.path.join(a.build, sub)):
                os.symlink(os.path.join(a.build, sub), os.path.join(build2, sub))
        shutil.copy(os.path.join(a.build, "agent/preempt/libgpuqos-preempt.so"),
                    os.path.join(build2, "old"))
        out_dir = os.path.join(d, "tail")
        rc, out, err = suite("--sets", "tail", "--only", r"^micro gq:default 1xfill( formerwake)?$",
                             "--repeat", "2", "--interleave", "--bin", bin_dir, "--build", build2,
                             "--out", out_dir, "--duration-s", "1")
        check(rc == 0, f"tail: rc {rc}\n{out}\n{err}")
        recs = [json.loads(ln) for ln in open(os.path.join(out_dir, "suite.jsonl"))]
        got = [(r["scenario"], r["rep"]) for r in recs]
        want = [("be alone fill", 0), ("micro alone", 0), ("micro gq:default 1xfill", 0),
                ("micro gq:default 1xfill formerwake", 0),
                ("micro gq:default 1xfill formerwake", 1), ("micro gq:default 1xfill", 1),
                ("micro alone", 1)]
        check(got == want, f"interleaved reps, every other round backwards: {got}")
        pre = [(r["lc_result"] or {}).get("preload", "") for r in recs[2:4]]
        check(pre[0].endswith("/agent/preempt/libgpuqos-preempt.so")
              and pre[1] == os.path.join(build2, "old/libgpuqos-preempt.so"),
              f"each row's preempt library: {pre}")
        # The eager-LC event, at driver defaults (30 s windows).
        out_dir = os.path.join(d, "stall")
        rc, out, err = suite("--sets", "stall", "--only", "defaults", "--bin", bin_dir,
                             "--build", a.build, "--out", out_dir, "--duration-s", "1")
        check(rc == 0, f"stall: rc {rc}\n{out}\n{err}")
        recs = [json.loads(ln) for ln in open(os.path.join(out_dir, "suite.jsonl"))]
        ev = recs[-1].get("event") or {}
        check(ev.get("event") == "eager" and 0.9 <= ev.get("started_s", 0) <= 3.0
              and "eager_result" in ev, f"the eager event: {recs[-1]}")
        check((recs[-1]["lc_result"] or {}).get("duration_s") == 30,
              f"the scenario's own window: {recs[-1]['lc_result']}")
        # An event row under gpuqos samples the agent every 20 ms (ctltrace),
        # and each BE's stall (the fake's 321.5 ms ending 0.5 s in, before
        # the kill at 2 s) is matched with the samples inside it.
        out_dir = os.path.join(d, "killed")
        rc, out, err = suite("--sets", "proof", "--only", "agent killed", "--bin", bin_dir,
                             "--build", a.build, "--out", out_dir, "--duration-s", "3")
        check(rc == 0, f"killed: rc {rc}\n{out}\n{err}")
        rec = [json.loads(ln) for ln in open(os.path.join(out_dir, "suite.jsonl"))][-1]
        tpath = os.path.join(out_dir, rec.get("ctl_trace") or "-")
        lines = [json.loads(ln) for ln in open(tpath)] if os.path.exists(tpath) else []
        check(len(lines) >= 5 and all(rec["go_unix"] - 1 <= x["t"] <= rec["go_unix"] + 4
                                      and x["tsg"] == [] for x in lines),
              f"the agent's timeline ({tpath}): {lines} (go {rec.get('go_unix')})")
        g = rec.get("gating") or {}
        check(g.get("longest_gated_ms") == [0, 0, 0] and len(g.get("stalls", [])) == 3
              and all(len(x) == 1 and x[0]["ms"] == 321.5 and x[0]["samples"] >= 5
                      and x[0]["gated_pct"] == 0 for x in g["stalls"]),
              f"the stalls against the agent's samples: {g}")
        check("321.5 321.5 321.5 | 0 0 0 | be0 322@0.5 (gated 0 %, LC – %)" in out,
              f"the stall table with the agent's samples:\n{out}")
    p = subprocess.run([sys.executable, os.path.join(HERE, "soak.py"), "--help"],
                       capture_output=True, text=True, timeout=60)
    check(p.returncode == 0 and "--restart-every-s" in p.stdout, f"soak.py --help: {p.stdout}{p.stderr}")
    p = subprocess.run([sys.executable, os.path.join(HERE, "fight.py"), "--help"],
                       capture_output=True, text=True, timeout=30)
    check(p.returncode == 0 and "--every-ms" in p.stdout, f"fight.py --help: {p.stdout}{p.stderr}")
    # wake_cliff.py: a trace every 2 ms, request 20 on time plus 55 us:
    # nineteen in the 0 .. 10 us bin (the first nine only teach the period),
    # one at 50 .. 60 us, and the one after it 55 us early.
    with tempfile.TemporaryDirectory() as tmp:
        trace = os.path.join(tmp, "trace.txt")
        with open(trace, "w") as f:
            f.write("# i due_ns submit_ns latency_ns gpu_run_ns\n")
            for i in range(30):
                late = 55000 if i == 20 else 0
                f.write(f"{i} {i * 2000000} {i * 2000000 + late} {400000 if late else 140000} 30000\n")
        p = subprocess.run([sys.executable, os.path.join(HERE, "wake_cliff.py"), trace],
                           capture_output=True, text=True, timeout=60)
        rows = {ln.split("|")[1].strip(): ln for ln in p.stdout.splitlines() if " .. " in ln}
        check(p.returncode == 0 and set(rows) == {"0 .. 10", "50 .. 60", "-60 .. -50"}
              and "| 19 |" in rows["0 .. 10"] and "400 / 400 / 400 / 400" in rows["50 .. 60"],
              f"wake_cliff.py: {p.stdout}{p.stderr}")
        # --summary: the late one, and a run of three slow on-time ones
        # (24..26): 4 slow of 21, two of them after a slow one. In
        # lc_models' six columns (the sixth: when the submit call returned).
        with open(trace, "w") as f:
            f.write("# i due_ns submit_ns latency_ns gpu_run_ns returned_ns\n")
            for i in range(30):
                late = 55000 if i == 20 else 0
                lat = 400000 if late else 300000 if 24 <= i <= 26 else 140000
                f.write(f"{i} {i * 2000000} {i * 2000000 + late} {lat} 30000 {i * 2000000 + late + 20000}\n")
        p = subprocess.run([sys.executable, os.path.join(HERE, "wake_cliff.py"), "--summary", trace],
                           capture_output=True, text=True, timeout=60)
        check(p.returncode == 0 and "21 requests" in p.stdout and "later than 50.0 us: 1 (4.8 %)" in p.stdout
              and "slow (>= 230.0 us): 4 (19.0 %)" in p.stdout and "P(slow | previous slow) 0.50" in p.stdout,
              f"wake_cliff.py --summary: {p.stdout}{p.stderr}")
        # --by-wake: the requests grouped by what the wake's own rule
        # (tests/preempt/wake_replay) made of them: the first nine teach
        # the period (none), the one 55 us late came past its wake's reach
        # (wasted: the 400 us one), the others hit (the three slow ones
        # among them).
        replay = os.path.join(a.build, "tests/preempt/wake_replay")
        p = subprocess.run([sys.executable, os.path.join(HERE, "wake_cliff.py"), "--by-wake", replay,
                            "--slow-us", "250", trace], capture_output=True, text=True, timeout=60)
        rows = {ln.split("|")[1].strip(): ln for ln in p.stdout.splitlines() if ln.startswith("| ")}
        check(p.returncode == 0 and "30 requests" in p.stdout and "4 over 250 us" in p.stdout
              and rows.get("none", "").startswith("| none | 9 (")
              and rows.get("wasted", "").startswith("| wasted | 1 (")
              and "| 400 / 400 / 400 / 400 | 1 |" in rows["wasted"]
              and rows.get("hit", "").startswith("| hit | 20 (")
              and "| 140 / 300 / 300 / 300 | 3 |" in rows["hit"],
              f"wake_cliff.py --by-wake: {p.stdout}{p.stderr}")
    print("ok")
    return 0


# The machine's own pin directory, which the agent's eBPF tracker uses by
# default (--bpf auto): the suite's agents get one of their own instead.
MACHINE_PINS = "/sys/fs/bpf/gpuqos"


def unpin(build, pin):
    """Detaches the tracer the suite's agents left pinned (they leave it
    attached on purpose, for the next agent) and removes the folder."""
    if not os.path.isdir(pin):
        return
    tool = os.path.join(build, "bpf/gpuqos-tsgtrace")
    if os.access(tool, os.X_OK):
        subprocess.run([tool, "--pin-dir", pin, "--unpin"], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=60)
    shutil.rmtree(pin, ignore_errors=True)


def run():
    build = sys.argv[sys.argv.index("--build") + 1] if "--build" in sys.argv[:-1] else ""
    pin = "/sys/fs/bpf/gpuqos-suite-%d" % os.getpid()
    os.environ["GPUQOS_BPF_PIN_DIR"] = pin  # suite.py's agents inherit it
    had_machine_pins = os.path.exists(MACHINE_PINS)
    try:
        rc = main()
        check(had_machine_pins or not os.path.exists(MACHINE_PINS),
              f"the suite's agents pinned their tracer under the machine's own {MACHINE_PINS}")
        return rc
    finally:
        unpin(build, pin)


if __name__ == "__main__":
    run_main(run)
