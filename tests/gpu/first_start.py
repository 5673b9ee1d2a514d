#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""first_start.py - which part of the gpuqos stack stalls an LC once per machine start?

Meant as the first thing a freshly started GPU machine runs. Rows in the
order given (--rows), each a micro LC (35 us kernel every 2 ms, every
request traced from its first, lc_micro --warmup-s 0) beside one be_fill,
each part of the stack added one row at a time, so that the first row with
a slow request names the part that does something slow once per start:

  A  driver defaults, no agent
  B  node agent, --bpf off, no wake, controlPath in-process
  C  B + the wake (wake.leadUs at its default)
  D  C with every control through the direct path (controlPath direct)
  E  the default: --bpf auto, the default policy
  F  E again
  G  E, the LC with an empty CUDA JIT cache of its own (CUDA_CACHE_PATH)
  H  G without the wake
  I  E with the preempt library of --fix-build
  K  I with an empty JIT cache of its own

Every process's output is stamped line by line on CLOCK_MONOTONIC as it
arrives (agent-ROW.log, lc-ROW.log, be-ROW.log: "mono_s line"), and the
LC's trace gives its start on the same clock, so each slow request can be
lined up with what the agent and the LC's preempt agent said around it
(summary.json: every request over --slow-ms with the log lines from 300 ms
before it to its end). The table last: per row the LC's p50/p99/max and
its slow requests.

Usage (root, from the repository root, bundle of tests/gpu/bundle.sh):
  first_start.py --build build-gpu --bin CUDA_BIN --out OUTDIR [--rows A,B,C]
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
WORK = "/tmp/gq-first"

ROWS = {
    "A": {"agent": False},
    "B": {"agent": True, "bpf": "off", "policy": {"wake": {"leadUs": 0}, "controlPath": "in-process"}},
    "C": {"agent": True, "bpf": "off", "policy": {"controlPath": "in-process"}},
    "D": {"agent": True, "bpf": "off", "policy": {"controlPath": "direct"}},
    "E": {"agent": True, "bpf": "auto", "policy": {}},
    "F": {"agent": True, "bpf": "auto", "policy": {}},
    "G": {"agent": True, "bpf": "auto", "policy": {}, "jit": "fresh"},
    "H": {"agent": True, "bpf": "auto", "policy": {"wake": {"leadUs": 0}}, "jit": "fresh"},
    "I": {"agent": True, "bpf": "auto", "policy": {}, "lib": "fix"},
    "K": {"agent": True, "bpf": "auto", "policy": {}, "jit": "fresh", "lib": "fix"},
}


def stamp_lines(pipe, path):
    """Write each line of pipe to path as 'mono_s line' when it arrives."""
    with open(path, "w") as f:
        for raw in iter(pipe.readline, b""):
            f.write("%.6f %s\n" % (time.monotonic(), raw.decode(errors="replace").rstrip("\n")))
            f.flush()


def spawn(cmd, env, log):
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         stdin=subprocess.DEVNULL, cwd=WORK)
    th = threading.Thread(target=stamp_lines, args=(p.stdout, log), daemon=True)
    th.start()
    return p, th


def stop(p, sig=signal.SIGTERM, wait=10):
    if p.poll() is None:
        p.send_signal(sig)
        try:
            p.wait(wait)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def jit_cache_listing():
    """What the CUDA JIT cache of this user holds (HOME's default one)."""
    d = os.path.join(os.path.expanduser("~"), ".nv", "ComputeCache")
    n, size = 0, 0
    for root, _, files in os.walk(d):
        for x in files:
            n += 1
            try:
                size += os.path.getsize(os.path.join(root, x))
            except OSError:
                pass
    return {"dir": d, "exists": os.path.isdir(d), "files": n, "bytes": size}


def load_trace(path):
    t0, rows = None, []
    with open(path) as f:
        for ln in f:
            if ln.startswith("# t_start_mono_ns"):
                t0 = int(ln.split()[2])
                continue
            if ln.startswith("#") or not ln.strip():
                continue
            v = ln.split()
            rows.append([int(x) for x in v])
    return t0, rows


def pct(vals, p):
    v = sorted(vals)
    if not v:
        return None
    return v[min(len(v) - 1, max(0, int(-(-p * len(v) // 100)) - 1))]


def log_window(path, lo, hi, limit=200):
    out = []
    try:
        with open(path) as f:
            for ln in f:
                try:
                    t = float(ln.split(" ", 1)[0])
                except ValueError:
                    continue
                if lo <= t <= hi:
                    out.append("%+.1f ms %s" % ((t - lo) * 1e3 - 300.0, ln.split(" ", 1)[1].rstrip()))
    except OSError:
        pass
    return out[:limit]


def run_row(a, name, spec, build, binp):
    out = a.out
    env = dict(os.environ)
    env.update({"GPUQOS_SOCKET": WORK + "/agent.sock", "GPUQOS_CTL_SOCKET": WORK + "/ctl.sock",
                "GPUQOS_PREEMPT_LIB": WORK + ("/libfix" if spec.get("lib") == "fix" else "/lib") +
                "/libgpuqos-preempt.so", "GPUQOS_LOG": "debug"})
    tool_env = dict(env, LD_LIBRARY_PATH=os.path.join(build, "lib"))
    rec = {"row": name, "spec": spec, "mono_start": time.monotonic(),
           "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "jit_cache_before": jit_cache_listing()}
    agent = None
    if spec["agent"]:
        d = WORK + "/gq-" + name
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        for s in ("agent.sock", "ctl.sock"):
            if os.path.exists(WORK + "/" + s):
                os.unlink(WORK + "/" + s)
        pol = {"version": 1, "defaultClass": "unmanaged", "trustRunClass": True}
        pol.update(spec["policy"])
        with open(d + "/policy.json", "w") as f:
            json.dump(pol, f)
        agent, _ = spawn([os.path.join(build, "agent/gpuqos-agent"), "--standalone", "--config",
                          d + "/policy.json", "--state-dir", d + "/state", "--log-level", "debug",
                          "--bpf", spec["bpf"], "--metrics-address", "off"],
                         tool_env, os.path.join(out, "agent-%s.log" % name))
        end = time.time() + 15
        while time.time() < end and not os.path.exists(WORK + "/agent.sock"):
            if agent.poll() is not None:
                break
            time.sleep(0.02)
        rec["agent_up_s"] = round(time.monotonic() - rec["mono_start"], 3)
    wl_env = dict(env)
    if spec.get("jit") == "fresh":
        jd = WORK + "/jit-" + name
        shutil.rmtree(jd, ignore_errors=True)
        os.makedirs(jd)
        os.chmod(jd, 0o777)
        wl_env["CUDA_CACHE_PATH"] = jd
    pre = [WORK + "/gpuqos", "run", "--class"] if spec["agent"] else None
    be_cmd = [binp + "/be_fill", "--duration-s", str(a.lc_s + 20)]
    trace = os.path.join(out, "trace-%s.txt" % name)
    lc_cmd = [binp + "/lc_micro", "--period-us", "2000", "--kernel-us", "35", "--duration-s",
              str(a.lc_s), "--warmup-s", "0", "--trace", trace]
    be, _ = spawn((pre + ["be", "--"] if pre else []) + be_cmd, env,
                  os.path.join(out, "be-%s.log" % name))
    lc, lc_th = spawn((pre + ["lc", "--"] if pre else []) + lc_cmd, wl_env,
                      os.path.join(out, "lc-%s.log" % name))
    rec["lc_spawn_mono"] = time.monotonic()
    ctl = []
    if agent:
        # As the suite does: a list before its window and one mid-window.
        for at, args in ((3.0, ["list"]), (3.0 + a.lc_s / 2, ["--json", "list"])):
            time.sleep(max(0.0, rec["lc_spawn_mono"] + at - time.monotonic()))
            t = time.monotonic()
            r = subprocess.run([os.path.join(build, "agent/cli/gpuqosctl")] + args, env=tool_env,
                               capture_output=True, text=True, timeout=20)
            ctl.append("== %.6f gpuqosctl %s (%.1f ms)\n%s%s" % (
                t, " ".join(args), (time.monotonic() - t) * 1e3, r.stdout[-6000:], r.stderr[-500:]))
    try:
        lc.wait(a.lc_s + 90)
    except subprocess.TimeoutExpired:
        lc.kill()
        lc.wait()
    lc_th.join(5)
    stop(be, signal.SIGKILL)
    if agent:
        stop(agent)
    if ctl:
        with open(os.path.join(out, "ctl-%s.txt" % name), "w") as f:
            f.write("\n".join(ctl))
    rec["jit_cache_after"] = jit_cache_listing()
    if spec.get("jit") == "fresh":
        rec["row_jit_cache_files"] = sum(len(fs) for _, _, fs in os.walk(wl_env["CUDA_CACHE_PATH"]))
    res = None
    try:
        with open(os.path.join(out, "lc-%s.log" % name)) as f:
            for ln in f:
                body = ln.split(" ", 1)[1] if " " in ln else ""
                if body.startswith("{"):
                    res = json.loads(body)
    except (OSError, ValueError):
        pass
    rec["lc_result"] = res
    slow = []
    try:
        t0, rows = load_trace(trace)
        lat = [r[3] for r in rows]
        rec["n"] = len(rows)
        rec["p50_us"] = pct(lat, 50) / 1e3
        rec["p99_us"] = pct(lat, 99) / 1e3
        rec["max_us"] = max(lat) / 1e3
        rec["t_start_mono"] = t0 / 1e9 if t0 else None
        ks = sorted(r[6] for r in rows if len(r) > 6 and r[6])
        kmed = ks[len(ks) // 2] if ks else 0
        for r in rows:
            if r[3] >= a.slow_ms * 1e6:
                due = (t0 + r[1]) / 1e9 if t0 else None
                sub = (t0 + r[2]) / 1e9 if t0 else None
                x = {"i": r[0], "due_mono": due, "submit_mono": sub,
                     "since_lc_spawn_s": round(sub - rec["lc_spawn_mono"], 3) if sub else None,
                     "latency_ms": r[3] / 1e6, "gpu_run_us": r[4] / 1e3,
                     "launch_call_ms": (r[5] - r[2]) / 1e6 if len(r) > 5 else None,
                     "kstart_vs_median_ms": (r[6] - kmed) / 1e6 if len(r) > 6 and r[6] else None,
                     "lag_ms": (r[2] - r[1]) / 1e6}
                if sub:
                    lo, hi = sub - 0.3, sub + r[3] / 1e9 + 0.05
                    x["agent_log"] = log_window(os.path.join(out, "agent-%s.log" % name), lo, hi)
                    x["lc_log"] = log_window(os.path.join(out, "lc-%s.log" % name), lo, hi)
                    x["be_log"] = log_window(os.path.join(out, "be-%s.log" % name), lo, hi, 40)
                slow.append(x)
        # Slow submits too: a request held up before its submit (the
        # thread blocked elsewhere) shows as lag, not latency.
        rec["max_lag_ms"] = max((r[2] - r[1]) / 1e6 for r in rows) if rows else None
        rec["max_launch_call_ms"] = max((r[5] - r[2]) / 1e6 for r in rows) if rows and \
            len(rows[0]) > 5 else None
    except (OSError, ValueError, TypeError, IndexError) as e:
        rec["trace_error"] = str(e)
    rec["slow"] = slow
    return rec


# The preempt agent's wake kernel (agent/preempt/preempt_wake.c), loaded
# the way its thread loads it; prints how long cuModuleLoadData took.
JIT_PROBE = r"""
import ctypes, sys, time
import os
PTX = b".version 6.0\n.target sm_50\n.address_size 64\n.visible .entry gpuqos_wake()\n{\n\tret;\n}\n"
cu = ctypes.CDLL("libcuda.so.1")
ctx, mod, dev = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_int()
assert cu.cuInit(0) == 0 and cu.cuDeviceGet(ctypes.byref(dev), 0) == 0
assert cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0 and cu.cuCtxSetCurrent(ctx) == 0
t = time.monotonic()
img = open(os.environ["GQ_PROBE_IMAGE"], "rb").read() if os.environ.get("GQ_PROBE_IMAGE") else PTX
r = cu.cuModuleLoadData(ctypes.byref(mod), img)
print("cuModuleLoadData %d in %.2f ms" % (r, (time.monotonic() - t) * 1e3))
"""


def jit_probe(out, image=None):
    """cuModuleLoadData of the wake's PTX alone: in an empty JIT cache
    (compiled), then in the cache it filled (read from it), then with the
    cache off (compiled, the compiler's files warm); with image (a file,
    the machine code), the same for it, and the files its load left in an
    empty cache."""
    lines = []
    d = WORK + "/jit-probe"
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    runs = [("empty cache", {"CUDA_CACHE_PATH": d}), ("filled cache", {"CUDA_CACHE_PATH": d}),
            ("cache off", {"CUDA_CACHE_DISABLE": "1"}), ("cache off again", {"CUDA_CACHE_DISABLE": "1"})]
    if image:
        di = WORK + "/jit-probe-image"
        shutil.rmtree(di, ignore_errors=True)
        os.makedirs(di)
        runs = [("image, empty cache", {"CUDA_CACHE_PATH": di, "GQ_PROBE_IMAGE": image}),
                ("image, cache off", {"CUDA_CACHE_DISABLE": "1", "GQ_PROBE_IMAGE": image})] + runs
    for what, extra in runs:
        r = subprocess.run([sys.executable, "-c", JIT_PROBE], env=dict(os.environ, **extra),
                           capture_output=True, text=True, timeout=60)
        lines.append("jit probe, %s: %s" % (what, (r.stdout + r.stderr).strip()[-300:]))
        if image and what == "image, empty cache":
            lines[-1] += "; files in that cache after: %d" % sum(len(f) for _, _, f in os.walk(di))
        print(lines[-1], flush=True)
    with open(os.path.join(out, "jit-probe.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--fix-build", help="build whose preempt library rows I and J use")
    ap.add_argument("--bin", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--rows", default="A,B,C,D,E,F,G,H")
    ap.add_argument("--lc-s", type=float, default=5.0)
    ap.add_argument("--slow-ms", type=float, default=5.0)
    ap.add_argument("--jit-probe", action="store_true",
                    help="after the rows, time the wake kernel's cuModuleLoadData alone")
    ap.add_argument("--probe-image", help="with --jit-probe: the same for this image file first")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    build = os.path.abspath(a.build)
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK + "/lib")
    os.chmod(WORK, 0o755)
    shutil.copy(os.path.join(build, "agent/preempt/libgpuqos-preempt.so"), WORK + "/lib/")
    if a.fix_build:
        os.makedirs(WORK + "/libfix")
        shutil.copy(os.path.join(a.fix_build, "agent/preempt/libgpuqos-preempt.so"), WORK + "/libfix/")
    shutil.copy(os.path.join(build, "agent/cli/gpuqos"), WORK + "/gpuqos")
    binp = WORK + "/bin"
    shutil.copytree(a.bin, binp)
    recs = []
    with open(os.path.join(a.out, "summary.jsonl"), "w") as sj:
        for name in a.rows.split(","):
            spec = ROWS[name]
            if spec.get("lib") == "fix" and not a.fix_build:
                print("row %s: no --fix-build; skipped" % name, flush=True)
                continue
            rec = run_row(a, name, spec, build, binp)
            recs.append(rec)
            sj.write(json.dumps(rec) + "\n")
            sj.flush()
            print("row %s: n %s p50 %s p99 %s max %s us, slow %s, max lag %s ms, JIT cache %s" % (
                name, rec.get("n"), rec.get("p50_us"), rec.get("p99_us"), rec.get("max_us"),
                [(round(s["since_lc_spawn_s"] or 0, 2), round(s["latency_ms"], 1)) for s in rec["slow"]],
                rec.get("max_lag_ms"), rec["jit_cache_after"]), flush=True)
    if a.jit_probe:
        jit_probe(a.out, a.probe_image)
    for r in recs:
        for s in r["slow"]:
            print("\n== row %s: request %d, %.1f ms, submitted %.3f s after the LC's spawn, "
                  "launch call %s ms, kernel start vs median %s ms, GPU run %.0f us" % (
                      r["row"], s["i"], s["latency_ms"], s["since_lc_spawn_s"] or -1,
                      s["launch_call_ms"], s["kstart_vs_median_ms"], s["gpu_run_us"]))
            # What each said from 60 ms before the submit to the end.
            for k in ("lc_log", "agent_log"):
                near = [ln for ln in s.get(k, []) if float(ln.split(" ", 1)[0]) >= -60.0]
                for ln in near[:30]:
                    print("  %s: %s" % (k[:-4], ln[:220]))
    print("\n| row | what | n | p50 us | p99 us | max us | slow requests (s after LC spawn: ms) | "
          "max submit lag ms | JIT cache files after |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in recs:
        sp = r["spec"]
        what = "defaults" if not sp["agent"] else "bpf %s, %s%s%s" % (
            sp["bpf"], json.dumps(sp["policy"], separators=(",", ":")),
            ", fresh JIT cache" if sp.get("jit") else "", ", fixed lib" if sp.get("lib") else "")
        print("| %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            r["row"], what, r.get("n"), r.get("p50_us"), r.get("p99_us"), r.get("max_us"),
            ", ".join("%.2f: %.1f" % (s["since_lc_spawn_s"] or -1, s["latency_ms"]) for s in r["slow"])
            or "none", None if r.get("max_lag_ms") is None else round(r["max_lag_ms"], 2),
            r.get("row_jit_cache_files", r["jit_cache_after"]["files"])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
