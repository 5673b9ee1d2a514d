# SPDX-License-Identifier: Apache-2.0
"""be_train - a real training best-effort (BE) workload for the gpuqos suite.

ResNet-50 (torchvision, random weights, built from its configuration), batch
--batch (64), bf16 autocast, channels_last, SGD with momentum, synthetic data
kept on the GPU. Each step is forward, backward, optimizer step, then
torch.cuda.synchronize() so steps are counted exactly.

--ready-file is created after --warmup-steps; the timed window starts at the
first step that begins after --start-file exists (at once without it) and
ends after --duration-s.

Output: one JSON line: {"workload":"resnet50_train","steps":..,
"steps_per_s":..,"duration_s":..,...}
"""

import argparse
import json
import os
import sys
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--duration-s", type=float, default=10.0)
    ap.add_argument("--warmup-steps", type=int, default=3)
    ap.add_argument("--ready-file")
    ap.add_argument("--start-file")
    ap.add_argument("--start-timeout-s", type=float, default=300.0)
    a = ap.parse_args()
    if a.batch < 1 or a.duration_s <= 0 or a.warmup_steps < 1:
        ap.error("bad --batch, --duration-s or --warmup-steps")

    import torch
    import torchvision

    torch.backends.cudnn.benchmark = True
    dev = torch.device("cuda", 0)
    model = torchvision.models.resnet50(weights=None).to(dev).to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(a.batch, 3, 224, 224, device=dev).contiguous(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (a.batch,), device=dev)
    loss_fn = torch.nn.CrossEntropyLoss()

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        torch.cuda.synchronize()

    for _ in range(a.warmup_steps):
        step()
    if a.ready_file:
        with open(a.ready_file, "a"):
            pass
    give_up = time.monotonic() + a.start_timeout_s
    while a.start_file and not os.path.exists(a.start_file):
        step()
        if time.monotonic() > give_up:
            print(f"be_train: start file {a.start_file} did not appear", file=sys.stderr)
            return 3
    t0 = time.monotonic()
    steps = 0
    while True:
        step()
        steps += 1
        t = time.monotonic()
        if t - t0 >= a.duration_s:
            break
    secs = t - t0
    print(json.dumps({"workload": "resnet50_train", "steps": steps,
                      "steps_per_s": round(steps / secs, 3), "duration_s": round(secs, 3),
                      "batch": a.batch, "device": torch.cuda.get_device_name(dev),
                      "torch": torch.__version__}, separators=(",", ":")), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
