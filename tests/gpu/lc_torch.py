# SPDX-License-Identifier: Apache-2.0
"""lc_torch - the PyTorch latency-critical (LC) workload of the gpuqos benchmarks.

A torchvision ResNet-50 (random weights, no download), batch 1, fp16,
channels_last by default, answers one request every --period-ms:

  --mode graph   the forward pass is captured once in a CUDA graph; a request
                 is one graph replay
  --mode eager   a request is an ordinary forward call (CPU launch bound)

Latency of one request = CLOCK_MONOTONIC from just before the submit to the
return of torch.cuda.synchronize(). Requests follow an absolute schedule
(request i due at t0 + i * period); one whose slot has passed when the
previous one completes starts at once and is counted as late. Measurement
stops at t0 + --duration-s.

The same pattern runs for --warmup-s first; then --ready-file is created and,
with --start-file, the warmup pattern keeps running until that file exists.

Output: one JSON line on stdout with "workload" "resnet50_graph" or
"resnet50_eager", n, p50_us, p90_us, p99_us, max_us, mean_us, late.
"""

import argparse
import json
import math
import os
import sys
import time


def percentile_sorted(v, p):
    """Nearest-rank percentile, the definition lc_micro uses."""
    if not v:
        return 0
    rank = max(1, min(len(v), math.ceil(p / 100.0 * len(v) - 1e-9)))
    return v[rank - 1]


def sleep_until(t_ns):
    d = t_ns - time.monotonic_ns()
    if d > 0:
        time.sleep(d / 1e9)


def touch(path):
    if path:
        with open(path, "a"):
            pass


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", choices=["graph", "eager"], default="graph")
    ap.add_argument("--period-ms", type=float, default=5.0)
    ap.add_argument("--duration-s", type=float, default=10.0)
    ap.add_argument("--warmup-s", type=float, default=2.0)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--no-channels-last", action="store_true")
    ap.add_argument("--ready-file")
    ap.add_argument("--start-file")
    ap.add_argument("--start-timeout-s", type=float, default=300.0)
    a = ap.parse_args()

    import torch
    import torchvision

    if not torch.cuda.is_available():
        print("lc_torch: no CUDA device", file=sys.stderr)
        return 2
    torch.backends.cudnn.benchmark = True
    dev = torch.device("cuda", 0)
    fmt = torch.contiguous_format if a.no_channels_last else torch.channels_last

    model = torchvision.models.resnet50(weights=None)
    model = model.to(dev).half().eval().to(memory_format=fmt)
    x = torch.randn(a.batch, 3, 224, 224, device=dev, dtype=torch.half)
    x = x.contiguous(memory_format=fmt)

    with torch.no_grad():
        if a.mode == "graph":
            # Warm up on a side stream (cuDNN picks its algorithms here), then
            # capture.
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(5):
                    model(x)
            torch.cuda.current_stream().wait_stream(side)
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                static_out = model(x)  # noqa: F841 (kept by the graph)
            torch.cuda.synchronize()

            def submit():
                graph.replay()
        else:
            for _ in range(5):
                model(x)
            torch.cuda.synchronize()

            def submit():
                model(x)

        def request():
            t0 = time.monotonic_ns()
            submit()
            torch.cuda.synchronize()
            return t0, time.monotonic_ns()

        period = int(a.period_ms * 1e6)

        # Warmup with the same pattern, then ready, then wait for the start file.
        nxt = time.monotonic_ns()
        warm_end = nxt + int(a.warmup_s * 1e9)
        give_up = warm_end + int(a.start_timeout_s * 1e9)
        ready = False
        while True:
            sleep_until(nxt)
            _, t = request()
            nxt += period
            if t > nxt:
                nxt = t
            if not ready and t >= warm_end:
                touch(a.ready_file)
                ready = True
            if ready and (not a.start_file or os.path.exists(a.start_file)):
                break
            if t > give_up:
                print(f"lc_torch: start file {a.start_file} did not appear",
                      file=sys.stderr)
                return 3

        # Measurement.
        lat = []
        late = 0
        t_start = time.monotonic_ns()
        t_end = t_start + int(a.duration_s * 1e9)
        prev_done = 0
        nxt = t_start
        while nxt < t_end:
            if prev_done > nxt:
                late += 1
            else:
                sleep_until(nxt)
            s, t = request()
            lat.append(t - s)
            prev_done = t
            nxt += period
            if t >= t_end:
                break
        t_stop = time.monotonic_ns()

    lat.sort()
    n = len(lat)
    res = {
        "workload": "resnet50_" + a.mode,
        "n": n,
        "p50_us": round(percentile_sorted(lat, 50) / 1e3, 1),
        "p90_us": round(percentile_sorted(lat, 90) / 1e3, 1),
        "p99_us": round(percentile_sorted(lat, 99) / 1e3, 1),
        "max_us": round(lat[-1] / 1e3, 1) if n else 0.0,
        "mean_us": round(sum(lat) / n / 1e3, 1) if n else 0.0,
        "late": late,
        "period_us": round(a.period_ms * 1e3),
        "batch": a.batch,
        "channels_last": not a.no_channels_last,
        "duration_s": round((t_stop - t_start) / 1e9, 3),
        "device": torch.cuda.get_device_name(dev),
        "torch": torch.__version__,
    }
    print(json.dumps(res, separators=(",", ":")), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
