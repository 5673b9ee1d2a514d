#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""mem_probe_torch.py - what PyTorch's allocator asks the RM for.

The torch counterpart of mem_probe.cu, for the same report
(mem_probe_report.py): "phase NAME T0 T1" lines (CLOCK_MONOTONIC ns) on
stdout around CUDA initialisation, torch.cuda.mem_get_info, a 256 MiB
and a 2 MiB tensor, empty_cache, and (with --fill) 1 GiB tensors until the
allocator raises. Run it once as it is and once with
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (the VMM path).
"""
import sys
import time

import torch


def phase(name, fn):
    t0 = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
    r = fn()
    print("phase %s %d %d" % (name, t0, time.clock_gettime_ns(time.CLOCK_MONOTONIC)), flush=True)
    return r


def main():
    phase("context", lambda: torch.zeros(1, device="cuda"))
    fr, tot = phase("meminfo", torch.cuda.mem_get_info)
    print("meminfo free %d total %d" % (fr, tot))
    a = phase("t256m", lambda: torch.empty(256 << 20, dtype=torch.uint8, device="cuda"))
    b = phase("t2m", lambda: torch.empty(2 << 20, dtype=torch.uint8, device="cuda"))
    del a, b
    phase("empty_cache", torch.cuda.empty_cache)
    if "--fill" in sys.argv:
        held = []

        def fill():
            try:
                while True:
                    held.append(torch.empty(1 << 30, dtype=torch.uint8, device="cuda"))
            except torch.cuda.OutOfMemoryError as e:
                return str(e).splitlines()[0][:200]
        msg = phase("fill", fill)
        print("fill %d GiB then %s" % (len(held), msg))
        fr, tot = phase("fill_meminfo", torch.cuda.mem_get_info)
        print("fill_meminfo free %d total %d" % (fr, tot))
        del held
        phase("fill_free", torch.cuda.empty_cache)


if __name__ == "__main__":
    main()
