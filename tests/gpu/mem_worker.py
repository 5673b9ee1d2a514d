#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""mem_worker.py - a PyTorch process that holds, fills and grows video
memory on command, for mem_qos.py (the LC reserve and the BEs' budgets of
a real node agent on a real GPU).

  --hold-gib N     allocate N tensors of 1 GiB at start (each must succeed)
  --fill           then 1 GiB tensors until the allocator raises
  --serve          every 2 ms a 1024x1024 fp16 matmul, synchronised: the
                   request's latency (an LC that keeps serving meanwhile)
  --grow-gib M --grow-at-s T   allocate M more GiB T s after the start
  --duration-s D   end after D s (holding everything until then)

Every event is one JSON line on stdout as it happens ({"ev": ...}), so the
driver can act on "filled" while the process still holds its memory; the
last line is {"ev":"end",...} with the serving latencies.
"""
import argparse
import json
import sys
import time


def say(**kw):
    print(json.dumps(kw, separators=(",", ":")), flush=True)


def pct(v, q):
    if not v:
        return None
    s = sorted(v)
    return round(s[min(len(s) - 1, max(0, int(-(-q * len(s) // 100)) - 1))], 1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hold-gib", type=int, default=0)
    ap.add_argument("--fill", action="store_true")
    ap.add_argument("--serve", action="store_true")
    ap.add_argument("--grow-gib", type=int, default=0)
    ap.add_argument("--grow-at-s", type=float, default=0.0)
    ap.add_argument("--duration-s", type=float, default=10.0)
    a = ap.parse_args()
    if a.hold_gib < 0 or a.grow_gib < 0 or a.duration_s <= 0:
        ap.error("bad sizes or duration")
    t0 = time.monotonic()
    import torch
    dev = torch.device("cuda", 0)
    torch.zeros(1, device=dev)
    free, total = torch.cuda.mem_get_info(dev)
    say(ev="start", free=free, total=total, import_s=round(time.monotonic() - t0, 2))
    held = []
    for i in range(a.hold_gib):
        try:
            held.append(torch.empty(1 << 30, dtype=torch.uint8, device=dev))
        except torch.cuda.OutOfMemoryError as e:
            say(ev="hold_refused", at_gib=i, error=str(e).splitlines()[0][:200])
            return 2
    say(ev="held", gib=len(held))
    if a.fill:
        n = 0
        err = None
        while n < 4096:
            try:
                held.append(torch.empty(1 << 30, dtype=torch.uint8, device=dev))
                n += 1
            except torch.cuda.OutOfMemoryError as e:
                err = type(e).__name__
                break
        free, total = torch.cuda.mem_get_info(dev)
        # The process goes on: a small allocation and real work after the refusal.
        try:
            small = torch.ones(1 << 20, device=dev)
            ok_after = float(small.sum().item()) == float(1 << 20)
        except torch.cuda.OutOfMemoryError:
            ok_after = False
        say(ev="filled", gib=n, error=err, free=free, total=total, works_after=ok_after)
    x = torch.randn(1024, 1024, device=dev, dtype=torch.float16) if a.serve else None
    lat = []
    grown = a.grow_gib == 0
    end = t0 + a.duration_s
    nxt = time.monotonic()
    while time.monotonic() < end:
        if not grown and time.monotonic() - t0 >= a.grow_at_s:
            grown = True
            try:
                for _ in range(a.grow_gib):
                    held.append(torch.empty(1 << 30, dtype=torch.uint8, device=dev))
                say(ev="grew", gib=a.grow_gib)
            except torch.cuda.OutOfMemoryError as e:
                say(ev="grow_refused", error=str(e).splitlines()[0][:200])
        if x is None:
            time.sleep(0.05)
            continue
        nxt += 0.002
        d = nxt - time.monotonic()
        if d > 0:
            time.sleep(d)
        s = time.monotonic()
        (x @ x).sum()
        torch.cuda.synchronize()
        lat.append((time.monotonic() - s) * 1e6)
    say(ev="end", held_gib=len(held), n=len(lat), p50_us=pct(lat, 50), p99_us=pct(lat, 99),
        max_us=round(max(lat), 1) if lat else None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
