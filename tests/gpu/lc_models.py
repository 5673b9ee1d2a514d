# SPDX-License-Identifier: Apache-2.0
"""lc_models - latency-critical model workloads for the gpuqos benchmark suite.

Models are built from their configurations with random weights (no download):
  resnet50   torchvision ResNet-50, 3x224x224, channels_last
  vit_b16    torchvision ViT-B/16, 3x224x224
  bert_base  a BERT-base encoder (12 layers, hidden 768, 12 heads, FFN 3072,
             vocabulary 30522) written here in plain PyTorch, sequence 128
batch 1 (--batch), fp16, eval, no grad.

  --mode graph   the forward pass is captured once in a CUDA graph; a
                 request is one replay
  --mode eager   a request is an ordinary forward call (CPU launch bound)
  --arrival fixed|poisson
                 requests due every --period-ms, or with exponential gaps of
                 that mean (seeded by --seed)
  --busy-wait-us N
                 sleep only until N us before each due time (with a 1 ns
                 timer slack), then spin on the clock: the request is
                 submitted on time whatever the host's wakeup latency
  --phase-us X   with fixed arrivals, the measured requests are due at X us
                 past each multiple of the period on CLOCK_MONOTONIC (to
                 line them up with another process's windows on that clock)
  --no-events    record no CUDA events around the submit: the request is
                 the model's work alone on the GPU (gpu_us is then 0)
  --trace FILE   one line per measured request, lc_micro's columns (index,
                 due, submit, latency, GPU time; ns, times from the window's
                 start) and a sixth: when the submit call returned

Latency = CLOCK_MONOTONIC from just before the submit to the return of
torch.cuda.synchronize(). CUDA events recorded before and after the submit
give the GPU time of the request (gpu_us: from when the LC's channel first
ran to its end); outside_us = latency - gpu_us holds the submit, the wait to
be scheduled (the context switch behind a BE) and the completion notice.
A request whose due time has passed when the previous one completes starts
at once and counts as late. The same pattern runs for --warmup-s first, then
--ready-file is created and, with --start-file, the warmup pattern goes on
until that file exists.

Output: one JSON line on stdout (workload "<model>_<mode>", n, p50_us,
p90_us, p99_us, p999_us, max_us, mean_us, late, gpu_p50_us, ...; lag: from
the due time to the submit; submit_call: the submit call itself (the CPU's
part: PyTorch, libcuda); after_call: from its return to the end of the
request), with
phases_unix: the wall-clock seconds when the model was built, the warmup
began, the window began and ended (to line them up with the node agent's
log and the BEs' stalls).
"""

import argparse
import json
import math
import os
import random
import sys
import time


def percentile_sorted(v, p):
    """Nearest-rank percentile, the definition lc_micro uses."""
    if not v:
        return 0
    rank = max(1, min(len(v), math.ceil(p / 100.0 * len(v) - 1e-9)))
    return v[rank - 1]


def sleep_until(t_ns, busy_ns=0):
    d = t_ns - busy_ns - time.monotonic_ns()
    if d > 0:
        time.sleep(d / 1e9)
    while busy_ns and time.monotonic_ns() < t_ns:
        pass


def set_timer_slack(ns):
    """prctl(PR_SET_TIMERSLACK): Linux's default lets a sleep end up to 50 us
    late so that timers fall together."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(29, ctypes.c_ulong(ns), ctypes.c_ulong(0), ctypes.c_ulong(0),
                  ctypes.c_ulong(0)) != 0:
        raise OSError(ctypes.get_errno(), "PR_SET_TIMERSLACK")


def touch(path):
    if path:
        with open(path, "a"):
            pass


def bert_base(torch):
    """BERT-base encoder from its configuration, plain PyTorch."""
    nn = torch.nn
    F = torch.nn.functional

    class Layer(nn.Module):
        def __init__(self, h=768, heads=12, ff=3072):
            super().__init__()
            self.heads = heads
            self.qkv = nn.Linear(h, 3 * h)
            self.out = nn.Linear(h, h)
            self.ln1 = nn.LayerNorm(h, eps=1e-12)
            self.ff1 = nn.Linear(h, ff)
            self.ff2 = nn.Linear(ff, h)
            self.ln2 = nn.LayerNorm(h, eps=1e-12)

        def forward(self, x):
            b, s, h = x.shape
            q, k, v = self.qkv(x).view(b, s, 3, self.heads, h // self.heads).unbind(2)
            a = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                               v.transpose(1, 2))
            x = self.ln1(x + self.out(a.transpose(1, 2).reshape(b, s, h)))
            return self.ln2(x + self.ff2(F.gelu(self.ff1(x))))

    class Bert(nn.Module):
        def __init__(self, vocab=30522, h=768, layers=12, max_pos=512):
            super().__init__()
            self.tok = nn.Embedding(vocab, h)
            self.pos = nn.Embedding(max_pos, h)
            self.typ = nn.Embedding(2, h)
            self.ln = nn.LayerNorm(h, eps=1e-12)
            self.layers = nn.ModuleList(Layer(h) for _ in range(layers))
            self.pool = nn.Linear(h, h)

        def forward(self, ids):
            pos = torch.arange(ids.shape[1], device=ids.device).unsqueeze(0)
            x = self.ln(self.tok(ids) + self.pos(pos) + self.typ(torch.zeros_like(ids)))
            for layer in self.layers:
                x = layer(x)
            return torch.tanh(self.pool(x[:, 0]))

    return Bert()


def warm_up(torch, fn, n=5):
    """Calls fn() n times on a side stream (what a CUDA graph capture
    needs first: cuDNN and cuBLAS pick their kernels), then waits."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(n):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()


def capture_graph(torch, fn):
    """fn() captured once in a CUDA graph: (the graph, fn's output, which
    each replay writes again). Warm fn up first (warm_up)."""
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn()
    torch.cuda.synchronize()
    return graph, out


def build(torch, name, batch, seq, dev):
    if name == "bert_base":
        model = bert_base(torch).to(dev).half().eval()
        x = torch.randint(0, 30522, (batch, seq), device=dev)
        return model, x
    import torchvision
    if name == "resnet50":
        model = torchvision.models.resnet50(weights=None)
        fmt = torch.channels_last
    elif name == "vit_b16":
        model = torchvision.models.vit_b_16(weights=None)
        fmt = torch.contiguous_format
    else:
        raise SystemExit(f"lc_models: unknown model {name}")
    model = model.to(dev).half().eval().to(memory_format=fmt)
    x = torch.randn(batch, 3, 224, 224, device=dev, dtype=torch.half)
    return model, x.contiguous(memory_format=fmt)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=["resnet50", "vit_b16", "bert_base"], default="resnet50")
    ap.add_argument("--mode", choices=["graph", "eager"], default="graph")
    ap.add_argument("--arrival", choices=["fixed", "poisson"], default="fixed")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--period-ms", type=float, default=5.0)
    ap.add_argument("--duration-s", type=float, default=10.0)
    ap.add_argument("--warmup-s", type=float, default=2.0)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--ready-file")
    ap.add_argument("--start-file")
    ap.add_argument("--start-timeout-s", type=float, default=300.0)
    ap.add_argument("--busy-wait-us", type=float, default=0.0)
    ap.add_argument("--no-events", action="store_true")
    ap.add_argument("--trace")
    ap.add_argument("--phase-us", type=float)
    a = ap.parse_args()
    if a.period_ms <= 0 or a.duration_s <= 0 or a.batch < 1 or not 1 <= a.seq <= 512 or \
            not 0 <= a.busy_wait_us <= a.period_ms * 1000:
        ap.error("bad --period-ms, --duration-s, --batch, --seq or --busy-wait-us")
    if a.phase_us is not None and (a.arrival != "fixed" or
                                   not 0 <= a.phase_us < a.period_ms * 1000):
        ap.error("--phase-us needs fixed arrivals and 0 <= X < the period")
    busy_ns = int(a.busy_wait_us * 1000)
    if busy_ns:
        set_timer_slack(1)

    import torch

    if not torch.cuda.is_available():
        print("lc_models: no CUDA device", file=sys.stderr)
        return 2
    torch.backends.cudnn.benchmark = True
    dev = torch.device("cuda", 0)
    phases = {"start": time.time()}
    model, x = build(torch, a.model, a.batch, a.seq, dev)
    phases["built"] = time.time()
    rng = random.Random(a.seed)

    with torch.no_grad():
        warm_up(torch, lambda: model(x))
        if a.mode == "graph":
            graph, static_out = capture_graph(torch, lambda: model(x))  # noqa: F841 (kept)

            def submit():
                graph.replay()
        else:
            def submit():
                model(x)

        e0 = torch.cuda.Event(enable_timing=True)
        e1 = torch.cuda.Event(enable_timing=True)

        def request():
            """(submit, submit returned, done, GPU time), ns."""
            t0 = time.monotonic_ns()
            if a.no_events:
                submit()
                ts = time.monotonic_ns()
                torch.cuda.synchronize()
                return t0, ts, time.monotonic_ns(), 0.0
            e0.record()
            submit()
            ts = time.monotonic_ns()
            e1.record()
            torch.cuda.synchronize()
            t1 = time.monotonic_ns()
            return t0, ts, t1, e0.elapsed_time(e1) * 1e6

        def gap():
            if a.arrival == "poisson":
                return int(rng.expovariate(1.0) * a.period_ms * 1e6)
            return int(a.period_ms * 1e6)

        nxt = time.monotonic_ns()
        phases["warmup"] = time.time()
        warm_end = nxt + int(a.warmup_s * 1e9)
        give_up = warm_end + int(a.start_timeout_s * 1e9)
        ready = False
        while True:
            sleep_until(nxt, busy_ns)
            _, _, t, _ = request()
            nxt += gap()
            nxt = max(nxt, t)
            if not ready and t >= warm_end:
                touch(a.ready_file)
                ready = True
            if ready and (not a.start_file or os.path.exists(a.start_file)):
                break
            if t > give_up:
                print(f"lc_models: start file {a.start_file} did not appear", file=sys.stderr)
                return 3

        lat, gpu, outside, lag, ret, after, trace = [], [], [], [], [], [], []
        late = 0
        t_start = time.monotonic_ns()
        phases["window"] = time.time()
        t_end = t_start + int(a.duration_s * 1e9)
        prev_done = 0
        nxt = t_start
        if a.phase_us is not None:
            per, ph = int(a.period_ms * 1e6), int(a.phase_us * 1e3)
            nxt = ((t_start - ph) // per + 1) * per + ph
        while nxt < t_end:
            if prev_done > nxt:
                late += 1
            else:
                sleep_until(nxt, busy_ns)
            s, sr, t, g = request()
            lat.append(t - s)
            gpu.append(g)
            outside.append(max(0.0, (t - s) - g))
            lag.append(max(0, s - nxt))
            ret.append(sr - s)
            after.append(t - sr)
            trace.append((nxt - t_start, s - t_start, t - s, int(g), sr - t_start))
            prev_done = t
            nxt += gap()
            if t >= t_end:
                break
        t_stop = time.monotonic_ns()
        phases["end"] = time.time()

    if a.trace:
        with open(a.trace, "w") as f:
            f.write("# i due_ns submit_ns latency_ns gpu_run_ns returned_ns\n")
            for i, r in enumerate(trace):
                f.write(f"{i} {r[0]} {r[1]} {r[2]} {r[3]} {r[4]}\n")
    lat.sort()
    gpu.sort()
    outside.sort()
    lag.sort()
    ret.sort()
    after.sort()
    n = len(lat)
    # Late: submitted more than 60 us past the median lag (lc_micro's rule).
    lag_med = percentile_sorted(lag, 50)
    lag_late = sum(1 for v in lag if v > lag_med + 60000)

    def us(v):
        return round(v / 1e3, 1)

    res = {
        "workload": f"{a.model}_{a.mode}",
        "n": n,
        "p50_us": us(percentile_sorted(lat, 50)),
        "p90_us": us(percentile_sorted(lat, 90)),
        "p99_us": us(percentile_sorted(lat, 99)),
        "p999_us": us(percentile_sorted(lat, 99.9)),
        "max_us": us(lat[-1]) if n else 0.0,
        "mean_us": us(sum(lat) / n) if n else 0.0,
        "gpu_p50_us": us(percentile_sorted(gpu, 50)),
        "gpu_p99_us": us(percentile_sorted(gpu, 99)),
        "outside_p50_us": us(percentile_sorted(outside, 50)),
        "outside_p99_us": us(percentile_sorted(outside, 99)),
        "lag_p50_us": us(lag_med),
        "lag_p99_us": us(percentile_sorted(lag, 99)),
        "lag_late_pct": round(100.0 * lag_late / n, 2) if n else 0.0,
        "submit_call_p50_us": us(percentile_sorted(ret, 50)),
        "submit_call_p99_us": us(percentile_sorted(ret, 99)),
        "after_call_p50_us": us(percentile_sorted(after, 50)),
        "after_call_p99_us": us(percentile_sorted(after, 99)),
        "events": not a.no_events,
        "late": late,
        "busy_wait_us": a.busy_wait_us,
        "period_us": round(a.period_ms * 1e3),
        "arrival": a.arrival,
        "batch": a.batch,
        "duration_s": round((t_stop - t_start) / 1e9, 3),
        "device": torch.cuda.get_device_name(dev),
        "torch": torch.__version__,
        "phases_unix": {k: round(v, 3) for k, v in phases.items()},
    }
    print(json.dumps(res, separators=(",", ":")), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
