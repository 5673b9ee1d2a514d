#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""suite.py - the gpuqos benchmark suite: one command on any NVIDIA GPU.

    python3 tests/gpu/suite.py --sets quick --out DIR [--duration-s 3]
                               [--repeat 1] [--only REGEX] [--max-s 540]
    python3 tests/gpu/suite.py --report DIR/suite.jsonl [--switch-us N]

Runs scenarios (an LC workload, 0-4 BE processes, a mode), prints a table and
writes DIR/suite.json (every record and the derived figures) and
DIR/suite.jsonl (one line per run, as it happens). Scenario sets:

  quick    micro LC and a ResNet-50 CUDA graph, 1 and 3 all-SM BEs, a
           training BE; alone, driver defaults, gpuqos default policy
  models   ResNet-50, ViT-B/16 and BERT-base CUDA graphs (fixed and Poisson
           arrivals) and eager ResNet-50 against the training BE and the
           all-SM BE: alone, defaults, gpuqos
  full     quick + models + every LC against 1-4 BEs of both kinds under
           defaults and every gpuqos policy variant (long: run it in parts
           with --only)
  switch   what the per-request switch costs and what hides it (micro LC,
           in-process settings through rm_probe.so)
  puzzle   driver defaults, 1-3 BEs, fixed and Poisson arrivals
  multibe  several BEs: defaults kept, one short BE, interleave levels
  rotate   channel-disable rotation among 3 BEs (rm_probe.so)
  key      the rows to repeat on every GPU kind (micro: defaults, 50 µs BE,
           wake and hold ahead of the request)
  fourbe   four all-SM BEs: defaults, policies default / leave / floor200,
           rotation every 100 ms (rm_probe.so)
  policies one BE: policies default, be20, interleave
  proof    the rows the default policy is judged by: micro LC with 1 and 3
           all-SM BEs (defaults, gpuqos, the several-BE floor), the node
           agent killed and stopped mid-rotation, ResNet-50 graph beside 1
           and 3 training BEs, micro beside 3 training BEs, eager ResNet-50

--only REGEX keeps the matching scenarios and the baselines they are
compared with (the same LC alone, the BEs alone).

Modes: `alone` (LC only), `be_alone` (BEs only), `defaults` (nothing set),
`gq:<policy>` (the standalone node agent with that policy file, workloads
under `gpuqos run --class lc|be`; needs the bundle of tests/gpu/bundle.sh)
and `probe` (workloads under LD_PRELOAD=rm_probe.so with per-process
GQP_* settings; no agent).

Derived per run: LC p99 / alone p99 (same LC, same arguments), BE kept =
sum of the BEs' rates / one BE of that kind alone, the switch cost of the
run = LC outside-time p50 (latency minus GPU time) minus the same alone,
and the physical limit 1 - rate x (LC GPU work alone + 2 switches), with
the switch taken from the micro LC under the default policy with one BE
(the suite's own measurement; without a micro row, the model graphs' own
beside one all-SM BE; --switch-us overrides). --clocks records the GPU's
clocks, power and P-state once mid-window.
"""

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

POLICIES = {
    # The example policy's values (deploy/gpuqos-policy.example.json).
    "default": {},
    "be20": {"timeslices": {"beUs": 20}},
    "leave": {"severalBe": "leave"},
    "floor200": {"timeslices": {"severalBeUs": 200}, "allowUnsafeSeveralBe": True},
    "interleave": {"interleave": {"lc": "high", "be": "low"}},
    "interleave_be": {"interleave": {"be": "low"}},
    "floor": {"severalBe": "floor"},
    "busy": {"busyLcPercent": 50},
    "norule": {"busyLcPercent": 0},
    "lc10ms": {"timeslices": {"lcUs": 10000}},
    # Every LC launch-bound (the micro LC reads 10 %): the whole runlist at
    # the driver's values all the time, with every preempt agent present.
    "allbound": {"busyLcPercent": 1},
    # The policy asks an LC beside a BE to wake its context ahead of its
    # periodic requests (docs/policy.md, "Waking a periodic LC").
    "wake100": {"wake": {"leadUs": 100}},
    "wake100h60": {"wake": {"leadUs": 100, "holdUs": 60}},
    "wake100h120": {"wake": {"leadUs": 100, "holdUs": 120}},
    "nowake": {"wake": {"leadUs": 0}},
}
# Policies a named set runs, kept out of POLICIES (which the full matrix
# runs every one of).
SET_POLICIES = {
    "rot250": {"rotation": {"periodMs": 250, "leaseMs": 600}},
    "rot250l500": {"rotation": {"periodMs": 250, "leaseMs": 500}},
    "rot500": {"rotation": {"periodMs": 500, "leaseMs": 1000}},
    "nogap": {"rotation": {"inGap": False}},
    # Windows (docs/policy.md, "Windows"): the BE off from 1.2 ms before each
    # request to the model's request time alone plus ~300 us after its start.
    "winvit": {"windows": {"afterUs": 1100}},
    "winbert": {"windows": {"afterUs": 800}},
    "winres": {"windows": {"afterUs": 1300}},
    "winvit14": {"windows": {"afterUs": 1400}},
    "winbert10": {"windows": {"afterUs": 1000}},
    "winauto": {"windows": {"afterUs": "auto"}},
    "win300": {"windows": {"afterUs": 300}},
    "win500": {"windows": {"afterUs": 500}},
    # The take-off started later: how much of beforeUs's 1.2 ms the BE
    # must be given notice before a request.
    "winb900": {"windows": {"afterUs": "auto", "beforeUs": 900}},
    "winb700": {"windows": {"afterUs": "auto", "beforeUs": 700}},
    "winb500": {"windows": {"afterUs": "auto", "beforeUs": 500}},
}

LC_TS = {"GQP_TIMESLICE_US": "100000"}

# rm_probe's context-switch counts, the compute preemption modes the RM was
# asked for, and the cumulative timings of its channel controls.
PROBE_CTXSW = re.compile(r"rm_probe: pid \d+ ctxsw: (.*) \(\d+ us\)$")
PROBE_PMODE = re.compile(r"rm_probe: pid \d+ SET_CTXSW_PREEMPTION_MODE compute (\d+): "
                         r"rc (-?\d+) status (0x[0-9a-f]+)$")
PROBE_SUMMARY = re.compile(r"rm_probe: pid \d+ (disable|preempt|enable): n (\d+) p50 (\d+) us "
                           r"p99 (\d+) us max (\d+) us")


def sc(name, lc, be="fill", nbe=1, mode="defaults", lc_args=(), lc_env=None, be_env=None,
       be_args=(), tag="", event=None, duration_s=None, trace=False, pin=False):
    """One scenario. be_env: a dict for every BE or a list, one per BE.
    event (gq modes): ("kill", AT_S) sends the node agent SIGKILL AT_S into
    the window; ("stop", AT_S, FOR_S) stops it (SIGSTOP) for FOR_S seconds;
    ("eager", AT_S, FOR_S) starts an eager ResNet-50 LC AT_S into the window
    that measures FOR_S seconds once built and warm (any mode).
    duration_s: this scenario's window instead of --duration-s.
    trace: the LC writes one line per request (lc_micro or lc_models
    --trace) to trace-<scenario>-<rep>.txt in the output folder.
    pin: the LC runs on the machine's last LC_CPUS CPUs and the BEs on the
    others, as a Kubernetes CPU manager's static policy gives a Guaranteed
    LC pod cores of its own (lc_cpus)."""
    if isinstance(be_env, dict) or be_env is None:
        be_env = [dict(be_env or {}) for _ in range(nbe)]
    return {"name": name, "lc": lc, "be": be, "nbe": nbe, "mode": mode,
            "lc_args": list(lc_args), "lc_env": dict(lc_env or {}), "be_env": be_env,
            "be_args": list(be_args), "tag": tag, "event": event, "duration_s": duration_s,
            "trace": trace, "pin": pin}


LC_CPUS = 4


def lc_cpus():
    """(the LC's CPUs, the others) for a pinned scenario: the last LC_CPUS
    the process may use, or None where fewer than twice as many are there.
    Four: the LC's thread and its preempt agent's wake thread both spin
    before each request, and PyTorch's and the agent's other threads must
    not take the CPU from them (with two CPUs the wake made the LC's submit
    slower; docs/perf-log)."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2 * LC_CPUS:
        return None
    return set(cpus[-LC_CPUS:]), set(cpus[:-LC_CPUS])


def set_quick():
    s = [sc("be alone fill", None, "fill", 1, "be_alone"),
         sc("be alone train", None, "train", 1, "be_alone")]
    for lc in ("micro", "resnet50_graph"):
        s.append(sc(f"{lc} alone", lc, nbe=0, mode="alone"))
        for nbe in ((1, 3) if lc == "micro" else (1,)):
            for mode in ("defaults", "gq:default"):
                s.append(sc(f"{lc} {mode} {nbe}xfill", lc, "fill", nbe, mode))
    # Without the wake: the switch each request pays, for the BE's limit.
    s.append(sc("micro gq:nowake 1xfill", "micro", "fill", 1, "gq:nowake"))
    s.append(sc("micro defaults 1xtrain", "micro", "train", 1, "defaults"))
    s.append(sc("micro gq:default 1xtrain", "micro", "train", 1, "gq:default"))
    return s


MODEL_LCS = ("resnet50_graph", "vit_b16_graph", "bert_base_graph", "resnet50_graph_poisson",
             "resnet50_eager")


def set_models():
    """Ordered so that a run cut short by --max-s has the gpuqos rows of every
    model first: each LC alone and under gpuqos beside the all-SM BE, then the
    driver defaults, then the training BE (slow to start)."""
    s = [sc("be alone fill", None, "fill", 1, "be_alone")]
    for lc in MODEL_LCS:
        s.append(sc(f"{lc} alone", lc, nbe=0, mode="alone"))
        s.append(sc(f"{lc} gq:default 1xfill", lc, "fill", 1, "gq:default"))
    s += [sc(f"{lc} defaults 1xfill", lc, "fill", 1, "defaults") for lc in MODEL_LCS]
    s.append(sc("be alone train", None, "train", 1, "be_alone"))
    for lc in MODEL_LCS:
        for mode in ("gq:default", "defaults"):
            s.append(sc(f"{lc} {mode} 1xtrain", lc, "train", 1, mode))
    return s


def set_full():
    s = set_quick() + set_models()
    for lc in ("micro", "micro_poisson", "resnet50_graph", "vit_b16_graph", "bert_base_graph",
               "resnet50_eager"):
        s.append(sc(f"{lc} alone", lc, nbe=0, mode="alone"))
        for be in ("fill", "train"):
            for nbe in (1, 2, 3, 4):
                s.append(sc(f"be alone {nbe}x{be}", None, be, nbe, "be_alone"))
                for mode in ["defaults"] + ["gq:" + p for p in POLICIES]:
                    s.append(sc(f"{lc} {mode} {nbe}x{be}", lc, be, nbe, mode))
    return s


def set_switch():
    be = lambda us: {"GQP_TIMESLICE_US": str(us)}  # noqa: E731
    s = [sc("be alone fill", None, "fill", 1, "be_alone"),
         sc("micro alone", "micro", nbe=0, mode="alone"),
         sc("micro alone 1 block", "micro", nbe=0, mode="alone", lc_args=["--blocks", "1"]),
         sc("micro alone all-SM", "micro", nbe=0, mode="alone", lc_args=["--blocks", "264"]),
         sc("micro alone graph", "micro", nbe=0, mode="alone", lc_args=["--graph"]),
         sc("micro alone wake lead 300", "micro", nbe=0, mode="alone",
            lc_args=["--pre", "wake", "--pre-lead-us", "300"])]
    for us in (2048, 1000, 200, 50, 20):
        s.append(sc(f"micro probe BE {us}", "micro", "fill", 1, "probe", lc_env=LC_TS,
                    be_env=be(us), tag="ts"))
    for pre, lead in (("wake", 0), ("wake", 100), ("wake", 300), ("wake", 1000), ("copy", 0),
                      ("copy", 300), ("memset", 0)):
        s.append(sc(f"micro probe BE 50 pre {pre} lead {lead}", "micro", "fill", 1, "probe",
                    lc_args=["--pre", pre, "--pre-lead-us", str(lead)], lc_env=LC_TS,
                    be_env=be(50), tag="pre"))
    for lead in (100, 300):
        s.append(sc(f"micro probe BE 50 pre hold lead {lead}", "micro", "fill", 1, "probe",
                    lc_args=["--pre", "hold", "--pre-lead-us", str(lead)], lc_env=LC_TS,
                    be_env=be(50), tag="pre"))
    s.append(sc("micro probe BE 50 1 block", "micro", "fill", 1, "probe",
                lc_args=["--blocks", "1"], lc_env=LC_TS, be_env=be(50), tag="shape"))
    s.append(sc("micro probe BE 50 graph", "micro", "fill", 1, "probe",
                lc_args=["--graph"], lc_env=LC_TS, be_env=be(50), tag="shape"))
    s.append(sc("micro probe BE 50 all-SM", "micro", "fill", 1, "probe",
                lc_args=["--blocks", "264"], lc_env=LC_TS, be_env=be(50), tag="shape"))
    for per in ("500", "10000"):
        s.append(sc(f"micro probe BE 50 period {per}", "micro", "fill", 1, "probe",
                    lc_args=["--period-us", per], lc_env=LC_TS, be_env=be(50), tag="period"))
    s.append(sc("micro probe BE 50, BE kernel 1 ms", "micro", "fill", 1, "probe",
                lc_env=LC_TS, be_env=be(50), be_args=["--kernel-ms", "1"], tag="bekernel"))
    s.append(sc("micro probe BE 50, BE inflight 1", "micro", "fill", 1, "probe",
                lc_env=LC_TS, be_env=be(50), be_args=["--inflight", "1"], tag="bekernel"))
    return s


def set_puzzle():
    s = [sc("be alone fill", None, "fill", 1, "be_alone"),
         sc("micro alone", "micro", nbe=0, mode="alone"),
         sc("micro alone period 5000", "micro", nbe=0, mode="alone",
            lc_args=["--period-us", "5000"]),
         sc("micro_poisson alone", "micro_poisson", nbe=0, mode="alone")]
    for nbe in (1, 2, 3):
        s.append(sc(f"micro defaults {nbe}xfill", "micro", "fill", nbe, "defaults"))
        s.append(sc(f"micro defaults {nbe}xfill period 5000", "micro", "fill", nbe,
                    "defaults", lc_args=["--period-us", "5000"]))
        s.append(sc(f"micro_poisson defaults {nbe}xfill", "micro_poisson", "fill", nbe,
                    "defaults"))
    s.append(sc("micro defaults 1xfill inflight 1", "micro", "fill", 1, "defaults",
                be_args=["--inflight", "1"]))
    s.append(sc("micro defaults 3xfill inflight 1", "micro", "fill", 3, "defaults",
                be_args=["--inflight", "1"]))
    return s


def set_multibe():
    s = [sc("be alone fill", None, "fill", 1, "be_alone"),
         sc("be alone 3xfill", None, "fill", 3, "be_alone"),
         sc("micro alone", "micro", nbe=0, mode="alone"),
         sc("micro probe 3 BEs kept at 2048 (LC 100 ms)", "micro", "fill", 3, "probe",
            lc_env=LC_TS),
         sc("micro probe 3 BEs at 1000 (floor)", "micro", "fill", 3, "probe", lc_env=LC_TS,
            be_env={"GQP_TIMESLICE_US": "1000"}),
         sc("micro probe 1 BE 50 + 2 at 2048", "micro", "fill", 3, "probe", lc_env=LC_TS,
            be_env=[{"GQP_TIMESLICE_US": "50"}, {}, {}]),
         sc("micro probe 1 BE 50 + 2 at 1000", "micro", "fill", 3, "probe", lc_env=LC_TS,
            be_env=[{"GQP_TIMESLICE_US": "50"}, {"GQP_TIMESLICE_US": "1000"},
                    {"GQP_TIMESLICE_US": "1000"}])]
    # Interleave: two BEs, no LC. Equal throughput means the level did nothing.
    for how, extra in (("settled", {}), ("early", {"GQP_EARLY": "1"}),
                       ("settled+rebuild", {"GQP_REBUILD": "1"})):
        s.append(sc(f"2 BEs interleave HIGH/LOW {how}", None, "fill", 2, "probe",
                    be_env=[dict(extra, GQP_INTERLEAVE="2"), dict(extra, GQP_INTERLEAVE="0")],
                    tag="interleave"))
    s.append(sc("micro probe 3 BEs 2048, LC HIGH (LC 2048) early", "micro", "fill", 3, "probe",
                lc_env={"GQP_INTERLEAVE": "2", "GQP_EARLY": "1"},
                be_env={"GQP_INTERLEAVE": "0", "GQP_EARLY": "1"}, tag="interleave"))
    return s


def set_rotate():
    base = {"GQP_TIMESLICE_US": "50"}
    s = [sc("be alone fill", None, "fill", 1, "be_alone"),
         sc("micro alone", "micro", nbe=0, mode="alone"),
         sc("rotate: 3 BEs at 50, all schedulable", "micro", "fill", 3, "probe",
            lc_env=LC_TS, be_env=base, tag="rotate"),
         sc("rotate: 3 BEs at 50, one schedulable (static)", "micro", "fill", 3, "probe",
            lc_env=LC_TS, tag="rotate",
            be_env=[dict(base, GQP_ROT_N="3", GQP_ROT_I=str(i), GQP_ROT_STATIC="1")
                    for i in range(3)])]
    for per in (100, 500):
        s.append(sc(f"rotate: 3 BEs at 50, one at a time every {per} ms", "micro", "fill", 3,
                    "probe", lc_env=LC_TS, tag="rotate",
                    be_env=[dict(base, GQP_ROT_N="3", GQP_ROT_I=str(i),
                                 GQP_ROT_PERIOD_MS=str(per)) for i in range(3)]))
    s.append(sc("rotate: 3 BEs at 2048, one at a time every 500 ms", "micro", "fill", 3,
                "probe", lc_env=LC_TS, tag="rotate",
                be_env=[dict(GQP_ROT_N="3", GQP_ROT_I=str(i), GQP_ROT_PERIOD_MS="500")
                        for i in range(3)]))
    return s


def set_fourbe():
    """Four BEs: defaults, the several-BE policy variants, and rotation."""
    rot = [dict(GQP_TIMESLICE_US="50", GQP_ROT_N="4", GQP_ROT_I=str(i), GQP_ROT_PERIOD_MS="100")
           for i in range(4)]
    s = [sc("be alone fill", None, "fill", 1, "be_alone"),
         sc("be alone 4xfill", None, "fill", 4, "be_alone"),
         sc("micro alone", "micro", nbe=0, mode="alone"),
         sc("micro defaults 4xfill", "micro", "fill", 4, "defaults")]
    for pol in ("default", "leave", "floor200"):
        s.append(sc(f"micro gq:{pol} 4xfill", "micro", "fill", 4, f"gq:{pol}"))
    s.append(sc("rotate: 4 BEs at 50, one at a time every 100 ms", "micro", "fill", 4, "probe",
                lc_env=LC_TS, be_env=rot, tag="rotate"))
    return s


def set_policies():
    """The one-BE policy variants beside the default policy."""
    s = [sc("be alone fill", None, "fill", 1, "be_alone"),
         sc("micro alone", "micro", nbe=0, mode="alone")]
    for pol in ("default", "be20", "interleave"):
        s.append(sc(f"micro gq:{pol} 1xfill", "micro", "fill", 1, f"gq:{pol}"))
    return s


def set_key():
    """The rows to repeat on every GPU kind."""
    be50 = {"GQP_TIMESLICE_US": "50"}
    return [sc("be alone fill", None, "fill", 1, "be_alone"),
            sc("micro alone", "micro", nbe=0, mode="alone"),
            sc("micro defaults 1xfill", "micro", "fill", 1, "defaults"),
            sc("micro defaults 1xfill period 5000", "micro", "fill", 1, "defaults",
               lc_args=["--period-us", "5000"]),
            sc("micro defaults 3xfill", "micro", "fill", 3, "defaults"),
            sc("micro probe BE 50", "micro", "fill", 1, "probe", lc_env=LC_TS, be_env=be50,
               tag="ts"),
            sc("micro probe BE 50 pre wake lead 100", "micro", "fill", 1, "probe",
               lc_args=["--pre", "wake", "--pre-lead-us", "100"], lc_env=LC_TS, be_env=be50,
               tag="pre"),
            sc("micro probe BE 50 pre hold lead 300", "micro", "fill", 1, "probe",
               lc_args=["--pre", "hold", "--pre-lead-us", "300"], lc_env=LC_TS, be_env=be50,
               tag="pre")]


def set_proof():
    """The rows the policy is judged by: one and three BEs of both kinds under
    the default policy (rotation) against the driver defaults and the
    several-BE floor, the micro LC submitting on time (busy-waiting the last
    200 us), an eager LC (a launch-bound LC must not cost the BE
    more than at the defaults), and the node agent killed or stopped while
    it rotates (each BE's longest stall: be_fill's max_gap_ms)."""
    s = [sc("be alone fill", None, "fill", 1, "be_alone"),
         sc("be alone 3xfill", None, "fill", 3, "be_alone"),
         sc("micro alone", "micro", nbe=0, mode="alone")]
    for nbe in (1, 3):
        for mode in ("defaults", "gq:default"):
            s.append(sc(f"micro {mode} {nbe}xfill", "micro", "fill", nbe, mode))
    s.append(sc("micro gq:floor 3xfill", "micro", "fill", 3, "gq:floor"))
    # The same LC submitting on time (docs/perf-log, "An LC that submits on
    # time"): what the wake can do where the host does not make it late.
    s.append(sc("micro alone busy200", "micro", nbe=0, mode="alone",
                lc_args=["--busy-wait-us", "200"]))
    for nbe in (1, 3):
        s.append(sc(f"micro gq:default {nbe}xfill busy200", "micro", "fill", nbe, "gq:default",
                    lc_args=["--busy-wait-us", "200"]))
    s.append(sc("micro gq:default 3xfill, agent killed at 2 s", "micro", "fill", 3,
                "gq:default", event=("kill", 2.0)))
    s.append(sc("micro gq:default 3xfill, agent stopped 2 s at 1 s", "micro", "fill", 3,
                "gq:default", event=("stop", 1.0, 2.0)))
    s += [sc("be alone train", None, "train", 1, "be_alone"),
          sc("be alone 3xtrain", None, "train", 3, "be_alone"),
          sc("resnet50_graph alone", "resnet50_graph", nbe=0, mode="alone"),
          sc("resnet50_eager alone", "resnet50_eager", nbe=0, mode="alone")]
    for nbe in (1, 3):
        for mode in ("gq:default", "defaults"):
            s.append(sc(f"resnet50_graph {mode} {nbe}xtrain", "resnet50_graph", "train", nbe,
                        mode))
    s.append(sc("micro gq:default 3xtrain", "micro", "train", 3, "gq:default"))
    for mode in ("gq:default", "gq:norule", "defaults"):
        s.append(sc(f"resnet50_eager {mode} 1xtrain", "resnet50_eager", "train", 1, mode))
    s.append(sc("resnet50_eager gq:default 3xtrain", "resnet50_eager", "train", 3, "gq:default"))
    s.append(sc("resnet50_eager defaults 3xtrain", "resnet50_eager", "train", 3, "defaults"))
    # Last, so --max-s cuts these first: the other CUDA-graph models.
    for lc in ("vit_b16_graph", "bert_base_graph"):
        s.append(sc(f"{lc} alone", lc, nbe=0, mode="alone"))
        for nbe in (1, 3):
            s.append(sc(f"{lc} gq:default {nbe}xtrain", lc, "train", nbe, "gq:default"))
    return s


def set_stall():
    """What stalls a rotating BE when an eager LC arrives: a micro LC and
    three be_fill rotating (30 s windows), an eager ResNet-50 LC started 1 s
    in (it builds its model, warms up, then runs 10 s), under the default
    policy, with the LC timeslice at 10 ms instead of 100, with the
    launch-bound rule off, with every LC launch-bound (the driver's values
    with the preempt agents present), and at driver defaults. be_fill lists every wait
    of 300 ms or more with its time (long_gaps); the eager LC's start, its
    verdict (agent log) and its window place them."""
    ev = ("eager", 1.0, 10.0)
    s = [sc("be alone fill", None, "fill", 1, "be_alone"),
         sc("micro alone", "micro", nbe=0, mode="alone")]
    for mode in ("gq:default", "gq:lc10ms", "gq:norule", "gq:allbound", "defaults"):
        s.append(sc(f"micro {mode} 3xfill, eager LC from 1 s", "micro", "fill", 3, mode,
                    event=ev, duration_s=30))
    return s


def set_preempt_mode():
    """Does the BE's compute preemption mode change the switch an LC request
    pays behind it (~200 us)? libcuda asks the RM for a mode per channel when
    it creates the context (SET_CTXSW_PREEMPTION_MODE); rm_probe.so replaces
    it in the BE with WFI (wait for the running work), CTA (at a thread-block
    boundary) or CILP (at an instruction, every SM's state saved), or leaves
    libcuda's and logs it. The LC at 100 ms, the BE at 50 us, as the policy
    sets them. Both print their context-switch counts every second
    (GET_CTXSW_STATS: saves by kind), which says which kind the switches
    really were. be_fill's thread blocks run the whole 10 ms kernel, so it
    is also run with 1 ms kernels; the training BE's blocks are short."""
    stats = {"GQP_CTXSW_STATS_MS": "1000"}
    lc_env = dict(LC_TS, **stats)
    s = [sc("be alone fill", None, "fill", 1, "be_alone"),
         sc("be alone train", None, "train", 1, "be_alone"),
         sc("micro alone", "micro", nbe=0, mode="alone")]
    for be, be_args in (("fill", ()), ("fill", ("--kernel-ms", "1")), ("train", ())):
        for mode in (None, "cilp", "cta", "wfi"):
            if be == "train" and mode == "wfi":
                continue
            env = dict(stats, GQP_TIMESLICE_US="50", **({"GQP_COMPUTE_PREEMPT": mode} if mode else {}))
            what = f"{be}{' 1 ms kernels' if be_args else ''}"
            s.append(sc(f"micro probe BE {what} at 50, compute preemption {mode or 'libcuda'}",
                        "micro", be, 1, "probe", lc_env=lc_env, be_env=env, be_args=be_args,
                        tag="pmode"))
    return s


def set_wake():
    """The preempt agent waking a periodic LC's context one switch ahead of
    its next request (GPUQOS_WAKE_LEAD_US): each LC under the default policy
    without and with the wake, fixed and Poisson arrivals (a Poisson LC must
    not lose), one and three BEs of both kinds. The LC's stderr keeps the
    wake's own count of hits and wasted wakes."""
    s = [sc("be alone fill", None, "fill", 1, "be_alone"),
         sc("be alone train", None, "train", 1, "be_alone"),
         sc("micro alone", "micro", nbe=0, mode="alone")]
    rows = [("micro", "fill", 1), ("micro_poisson", "fill", 1), ("micro", "fill", 3),
            ("resnet50_graph", "fill", 1),
            ("micro", "train", 1), ("resnet50_graph", "train", 1),
            ("vit_b16_graph", "train", 1), ("resnet50_graph", "train", 3)]
    for lc, be, nbe in rows:
        if lc in ("resnet50_graph", "vit_b16_graph") and nbe == 1 \
                and not any(x["name"] == f"{lc} alone" for x in s):
            s.append(sc(f"{lc} alone", lc, nbe=0, mode="alone"))
        key = (lc, be, nbe) == ("micro", "fill", 1)
        for lead, hold in ([(0, 0), (100, 0), (150, 0), (100, 60), (100, 120)] if key
                           else [(0, 0), (100, 0), (100, 60)]):
            s.append(sc(f"{lc} gq:default {nbe}x{be} wake {lead}" + (f" hold {hold}" if hold else ""),
                        lc, be, nbe, "gq:default",
                        lc_env={"GPUQOS_WAKE_LEAD_US": str(lead), "GPUQOS_WAKE_HOLD_US": str(hold),
                                "GPUQOS_LOG": "info"},
                        tag="wake"))
    return s


def set_waketrace():
    """Where a wake's tail comes from: the micro LC beside one and three
    `be_fill`s under the default policy, without a wake and with a 100 us
    lead (and a 60 us hold), each request traced (when it was due, when it
    was submitted, its latency), so that the latency can be read against
    how far the request came after the time the wake aimed at."""
    s = [sc("micro alone", "micro", nbe=0, mode="alone", trace=True)]
    for nbe in (1, 3):
        for lead, hold in ((0, 0), (100, 0), (100, 60)):
            if nbe == 3 and hold:
                continue
            s.append(sc(f"micro gq:default {nbe}xfill wake {lead}" + (f" hold {hold}" if hold else ""),
                        "micro", "fill", nbe, "gq:default",
                        lc_env={"GPUQOS_WAKE_LEAD_US": str(lead), "GPUQOS_WAKE_HOLD_US": str(hold),
                                "GPUQOS_LOG": "info"},
                        tag="waketrace", trace=True))
    return s


def set_wakepolicy():
    """The wake asked for by the node agent's policy (wake.leadUs), against
    the same policy without it: the micro LC beside one and three
    `be_fill`s (traced) and beside a training BE, a CUDA-graph ResNet-50
    beside a training BE. Nothing is set in the workloads' environment but
    the log level (for the wake's own counts)."""
    s = [sc("be alone fill", None, "fill", 1, "be_alone"),
         sc("be alone train", None, "train", 1, "be_alone"),
         sc("micro alone", "micro", nbe=0, mode="alone"),
         sc("resnet50_graph alone", "resnet50_graph", nbe=0, mode="alone")]
    info = {"GPUQOS_LOG": "info"}
    for lc, be, nbe, pols in (("micro", "fill", 1, ("default", "wake100", "wake100h60")),
                              ("micro", "fill", 3, ("default", "wake100")),
                              ("micro", "train", 1, ("default", "wake100")),
                              ("resnet50_graph", "train", 1, ("default", "wake100"))):
        for pol in pols:
            s.append(sc(f"{lc} gq:{pol} {nbe}x{be}", lc, be, nbe, f"gq:{pol}", lc_env=info,
                        tag="wakepolicy", trace=lc == "micro"))
    return s


def set_wakedefault():
    """The default policy (which wakes an LC beside a BE, 100 us ahead)
    against the same policy without wakes: micro LC beside one and three
    `be_fill`s and beside a training BE, CUDA-graph ResNet-50 and ViT-B/16
    beside a training BE."""
    s = [sc("be alone fill", None, "fill", 1, "be_alone"),
         sc("be alone train", None, "train", 1, "be_alone"),
         sc("micro alone", "micro", nbe=0, mode="alone"),
         sc("resnet50_graph alone", "resnet50_graph", nbe=0, mode="alone"),
         sc("vit_b16_graph alone", "vit_b16_graph", nbe=0, mode="alone")]
    info = {"GPUQOS_LOG": "info"}
    for lc, be, nbe in (("micro", "fill", 1), ("micro", "fill", 3), ("micro", "train", 1),
                        ("resnet50_graph", "train", 1), ("vit_b16_graph", "train", 1)):
        for pol in ("default", "nowake"):
            s.append(sc(f"{lc} gq:{pol} {nbe}x{be}", lc, be, nbe, f"gq:{pol}", lc_env=info,
                        tag="wakedefault", trace=lc == "micro"))
    return s


def set_wakehold():
    """Whether a hold covers the late requests that stop the wakes on a
    host whose LC submits off its period (docs/perf-log, "Where the H200's
    wake tail comes from"): the micro LC beside one and three `be_fill`s
    under the default policy, with a 60 and a 120 us hold, and without a
    wake; every request traced (wake_cliff.py reads the latency by how late
    each came). The wake's judging still counts a request more than 150 us
    after its wake as wasted, hold or not: the traces say whether it should."""
    s = [sc("be alone fill", None, "fill", 1, "be_alone"),
         sc("micro alone", "micro", nbe=0, mode="alone")]
    info = {"GPUQOS_LOG": "info"}
    for nbe in (1, 3):
        for pol in ("default", "wake100h60", "wake100h120", "nowake"):
            s.append(sc(f"micro gq:{pol} {nbe}xfill", "micro", "fill", nbe, f"gq:{pol}",
                        lc_env=info, tag="wakehold", trace=True))
    return s


def set_wakestops():
    """Whether the wake's stops (four wasted among the last 128 wakes stop
    the next ones, each stop twice as long) are right on a host where a few
    percent of the LC's requests come late: the micro LC beside one and
    three `be_fill`s, traced, under the default policy, the same with
    GPUQOS_WAKE_STOPS=0 in the LC (every wake judged, none stopped), and
    without a wake."""
    s = [sc("be alone fill", None, "fill", 1, "be_alone"),
         sc("micro alone", "micro", nbe=0, mode="alone")]
    for nbe in (1, 3):
        for pol, env in (("default", {}), ("default", {"GPUQOS_WAKE_STOPS": "0"}), ("nowake", {})):
            name = f"micro gq:{pol} {nbe}xfill" + (" stops 0" if env else "")
            s.append(sc(name, "micro", "fill", nbe, f"gq:{pol}", lc_env=dict(env, GPUQOS_LOG="info"),
                        tag="wakestops", trace=True))
    return s


def set_wakelag():
    """Whether the host's lateness in submitting is what keeps the micro
    LC's p99 off the target with the wake on (docs/perf-log, "The wake on
    the H200 machine"): the micro LC as it is (sleeping to each due time
    with Linux's 50 us timer slack), with a 1 ns timer slack, and busy-
    waiting the last 200 us before each due time; beside one and three
    `be_fill`s under the default policy, without a wake, and (busy-waiting
    only) with a 60 and a 120 us hold. Traced; the
    table after the main one gives each row's submit lag. Then the CUDA-graph
    ResNet-50 as it is and busy-waiting, beside one and three training BEs
    under the default policy."""
    variants = (("", []), (" slack1", ["--slack-ns", "1"]), (" busy200", ["--busy-wait-us", "200"]))
    s = [sc("be alone fill", None, "fill", 1, "be_alone")]
    s += [sc("micro alone" + v, "micro", nbe=0, mode="alone", lc_args=a, tag="wakelag")
          for v, a in variants]
    info = {"GPUQOS_LOG": "info"}
    for nbe in (1, 3):
        for pol in ("default", "nowake", "wake100h60", "wake100h120"):
            for v, a in variants:
                if (nbe == 3 and v == " slack1") or (pol.startswith("wake") and v != " busy200"):
                    continue
                s.append(sc(f"micro gq:{pol} {nbe}xfill{v}", "micro", "fill", nbe, f"gq:{pol}",
                            lc_args=a, lc_env=info, tag="wakelag", trace=True))
    s += [sc("be alone train", None, "train", 1, "be_alone"),
          sc("be alone 3xtrain", None, "train", 3, "be_alone")]
    for v, a in (("", []), (" busy200", ["--busy-wait-us", "200"])):
        s.append(sc("resnet50_graph alone" + v, "resnet50_graph", nbe=0, mode="alone", lc_args=a,
                    tag="wakelag"))
        for nbe in (1, 3):
            s.append(sc(f"resnet50_graph gq:default {nbe}xtrain{v}", "resnet50_graph", "train",
                        nbe, "gq:default", lc_args=a, lc_env=info, tag="wakelag"))
    return s


def set_graphwake():
    """Why the wake does little for a CUDA-graph model (docs/perf-log,
    "A CUDA-graph model and the wake"): the ResNet-50 graph every 5 ms,
    busy-waiting to each due time, beside one training BE under the default
    policy (wake 100 us ahead), without a wake, with 60 and 120 us holds,
    with every wake issued (GPUQOS_WAKE_STOPS=0), and without the CUDA
    events around each request; beside three training BEs with and without
    the wake. Every request traced (lc_models --trace: when it was due,
    submitted, how long the submit call took, latency, GPU time)."""
    busy = ["--busy-wait-us", "200"]
    info = {"GPUQOS_LOG": "info"}
    lc = "resnet50_graph"
    s = [sc("be alone train", None, "train", 1, "be_alone"),
         sc("be alone 3xtrain", None, "train", 3, "be_alone"),
         sc(f"{lc} alone busy200", lc, nbe=0, mode="alone", lc_args=busy, tag="graphwake",
            trace=True),
         sc(f"{lc} alone busy200 noevents", lc, nbe=0, mode="alone", lc_args=busy + ["--no-events"],
            tag="graphwake", trace=True)]
    for name, pol, env, extra in (("default", "default", {}, []), ("nowake", "nowake", {}, []),
                                  ("wake100h60", "wake100h60", {}, []),
                                  ("wake100h120", "wake100h120", {}, []),
                                  ("default stops0", "default", {"GPUQOS_WAKE_STOPS": "0"}, []),
                                  ("default noevents", "default", {}, ["--no-events"]),
                                  ("nowake noevents", "nowake", {}, ["--no-events"])):
        s.append(sc(f"{lc} gq:{name} 1xtrain busy200", lc, "train", 1, f"gq:{pol}",
                    lc_args=busy + extra, lc_env=dict(info, **env), tag="graphwake", trace=True))
    for pol in ("default", "nowake"):
        s.append(sc(f"{lc} gq:{pol} 3xtrain busy200", lc, "train", 3, f"gq:{pol}", lc_args=busy,
                    lc_env=info, tag="graphwake", trace=True))
    return s


def set_graphpin():
    """The CUDA-graph models with the LC's CPU time out of the way (docs/
    docs/perf-log, "A CUDA-graph model and the wake"): every LC busy-waits to its
    due time, records no CUDA events around its request (lc_models
    --no-events: the request is the model's graph alone on the GPU), and
    runs on CPUs of its own with the BEs on the others (pin). ResNet-50
    alone, under the default policy and without a wake beside one and three
    training BEs, and unpinned beside one; ViT-B/16 and BERT-base alone and
    under the default policy beside one and three. Traced."""
    busy = ["--busy-wait-us", "200", "--no-events"]
    info = {"GPUQOS_LOG": "info"}
    s = [sc("be alone train", None, "train", 1, "be_alone", pin=True),
         sc("be alone 3xtrain", None, "train", 3, "be_alone", pin=True)]
    for lc in ("resnet50_graph", "vit_b16_graph", "bert_base_graph"):
        s.append(sc(f"{lc} alone pinned", lc, nbe=0, mode="alone", lc_args=busy, tag="graphpin",
                    trace=True, pin=True))
        pols = ("default", "nowake") if lc == "resnet50_graph" else ("default",)
        for nbe in (1, 3):
            for pol in pols:
                s.append(sc(f"{lc} gq:{pol} {nbe}xtrain pinned", lc, "train", nbe, f"gq:{pol}",
                            lc_args=busy, lc_env=info, tag="graphpin", trace=True, pin=True))
        if lc == "resnet50_graph":
            s.append(sc(f"{lc} alone", lc, nbe=0, mode="alone", lc_args=busy, tag="graphpin",
                        trace=True))
            s.append(sc(f"{lc} gq:default 1xtrain", lc, "train", 1, "gq:default", lc_args=busy,
                        lc_env=info, tag="graphpin", trace=True))
    return s


def set_graphbe20():
    """Whether a shorter BE slice (20 us, the be20 policy) takes off what
    is left of the models' tail once they are woken, as graphpin runs them
    (pinned, on time, no CUDA events): ResNet-50 beside three training BEs,
    ViT-B/16 and BERT-base beside one, each against the default policy."""
    busy = ["--busy-wait-us", "200", "--no-events"]
    info = {"GPUQOS_LOG": "info"}
    s = [sc("be alone train", None, "train", 1, "be_alone", pin=True)]
    for lc, nbe in (("resnet50_graph", 3), ("vit_b16_graph", 1), ("bert_base_graph", 1)):
        s.append(sc(f"{lc} alone pinned", lc, nbe=0, mode="alone", lc_args=busy, tag="graphbe20",
                    trace=True, pin=True))
        for pol in ("default", "be20"):
            s.append(sc(f"{lc} gq:{pol} {nbe}xtrain pinned", lc, "train", nbe, f"gq:{pol}",
                        lc_args=busy, lc_env=info, tag="graphbe20", trace=True, pin=True))
    return s


def set_graphevents():
    """The wake's judging of a request whose kernels come long after the
    CUDA event it records first (docs/policy.md, "Waking a periodic LC"):
    the CUDA-graph ResNet-50 with its events around each request, busy-
    waiting, beside one training BE under the default policy and without a
    wake, and beside three under the default policy. The LC's library logs
    at exit how many wasted wakes were of that kind. Traced."""
    busy = ["--busy-wait-us", "200"]
    info = {"GPUQOS_LOG": "info"}
    lc = "resnet50_graph"
    s = [sc("be alone train", None, "train", 1, "be_alone"),
         sc(f"{lc} alone busy200", lc, nbe=0, mode="alone", lc_args=busy, tag="graphevents",
            trace=True)]
    for nbe, pol in ((1, "default"), (1, "nowake"), (3, "default")):
        s.append(sc(f"{lc} gq:{pol} {nbe}xtrain busy200", lc, "train", nbe, f"gq:{pol}",
                    lc_args=busy, lc_env=info, tag="graphevents", trace=True))
    return s


def set_graphlead():
    """Whether a lead as long as the switch, with a hold that keeps the
    woken context in until the request comes, hides the rest of the switch
    for the models the 100 us lead left at 1.11-1.15x (docs/perf-log, "A
    CUDA-graph model and the wake"): ViT-B/16 and BERT-base pinned, on
    time, no CUDA events, beside one training BE under the default policy
    with the wake from the LC's environment: lead/hold 100/0 (the default),
    150/100, 200/100 and 200/150; the micro LC beside one be_fill at
    100/0 and 200/150."""
    busy = ["--busy-wait-us", "200", "--no-events"]
    s = [sc("be alone train", None, "train", 1, "be_alone", pin=True),
         sc("be alone fill", None, "fill", 1, "be_alone", pin=True)]
    rows = [("vit_b16_graph", "train", ((100, 0), (150, 100), (200, 100), (200, 150))),
            ("bert_base_graph", "train", ((100, 0), (150, 100), (200, 100), (200, 150))),
            ("micro", "fill", ((100, 0), (200, 150)))]
    for lc, be, leads in rows:
        args = busy if lc != "micro" else []
        s.append(sc(f"{lc} alone pinned", lc, nbe=0, mode="alone", lc_args=args,
                    tag="graphlead", trace=True, pin=True))
        for lead, hold in leads:
            s.append(sc(f"{lc} gq:default 1x{be} pinned lead {lead} hold {hold}", lc, be, 1,
                        "gq:default", lc_args=args,
                        lc_env={"GPUQOS_WAKE_LEAD_US": str(lead),
                                "GPUQOS_WAKE_HOLD_US": str(hold), "GPUQOS_LOG": "info"},
                        tag="graphlead", trace=True, pin=True))
    return s


def set_graphhold():
    """What a longer lead and a hold do when every wake is issued
    (GPUQOS_WAKE_STOPS=0; graphlead's 150 and 200 us leads were judged
    wasted, as reaching past PA_WAKE_REACH_NS, and stopped): ViT-B/16
    pinned, on time, no CUDA events, beside one training BE, lead/hold
    100/0, 200/0, 200/150 and 250/300; the micro LC beside one be_fill at
    100/0, 200/150 and 200/300."""
    busy = ["--busy-wait-us", "200", "--no-events"]
    s = []
    rows = [("vit_b16_graph", "train", ((100, 0), (200, 0), (200, 150), (250, 300))),
            ("micro", "fill", ((100, 0), (200, 150), (200, 300)))]
    for lc, be, leads in rows:
        args = busy if lc != "micro" else []
        s.append(sc(f"{lc} alone pinned", lc, nbe=0, mode="alone", lc_args=args,
                    tag="graphhold", trace=True, pin=True))
        for lead, hold in leads:
            s.append(sc(f"{lc} gq:default 1x{be} pinned stops0 lead {lead} hold {hold}", lc, be,
                        1, "gq:default", lc_args=args,
                        lc_env={"GPUQOS_WAKE_LEAD_US": str(lead),
                                "GPUQOS_WAKE_HOLD_US": str(hold), "GPUQOS_WAKE_STOPS": "0",
                                "GPUQOS_LOG": "info"},
                        tag="graphhold", trace=True, pin=True))
    return s


def set_holdprobe():
    """Whether a request finds the LC's context on the GPU when something
    of the same context keeps it there until the request is submitted
    (docs/perf-log, "Keeping the woken context in"): the micro LC beside one
    be_fill, each process setting its own timeslice (LC 100 ms, BE 50 us,
    no node agent), with an empty kernel 100 us ahead on the request's
    stream and on a second stream; a kernel spinning until the request is
    submitted, 150 and 300 us ahead, on either stream; and a train of empty
    kernels on the second stream, 200 and 300 us ahead, every 20 or 50 us
    until the request."""
    be50 = {"GQP_TIMESLICE_US": "50"}
    s = [sc("be alone fill", None, "fill", 1, "be_alone"),
         sc("micro alone", "micro", nbe=0, mode="alone", trace=True),
         sc("micro probe BE 50", "micro", "fill", 1, "probe", lc_env=LC_TS, be_env=be50,
            tag="holdprobe", trace=True)]
    for pre, lead, extra in (("wake", 100, []), ("wake2", 100, []), ("hold", 300, []),
                             ("hold2", 300, []), ("hold2", 150, []), ("train", 200, []),
                             ("train", 300, []), ("train", 300, ["--train-us", "50"])):
        name = f"micro probe BE 50 pre {pre} lead {lead}" + (" every 50" if extra else "")
        s.append(sc(name, "micro", "fill", 1, "probe",
                    lc_args=["--pre", pre, "--pre-lead-us", str(lead)] + extra, lc_env=LC_TS,
                    be_env=be50, tag="holdprobe", trace=True))
    return s


def set_holdprobe2():
    """holdprobe's train and hold at more leads, beside be_fill and beside a
    training BE, each process printing its context-switch counts every
    second (GET_CTXSW_STATS: whether the LC's context was saved while it
    spun or ran its train, and how)."""
    stats = {"GQP_CTXSW_STATS_MS": "1000"}
    lc_env = dict(LC_TS, **stats)
    be50 = dict(stats, GQP_TIMESLICE_US="50")
    s = [sc("be alone fill", None, "fill", 1, "be_alone"),
         sc("be alone train", None, "train", 1, "be_alone"),
         sc("micro alone", "micro", nbe=0, mode="alone", trace=True)]
    rows = [("fill", "train", 150), ("fill", "train", 175), ("fill", "train", 200),
            ("fill", "hold2", 100), ("fill", "hold2", 200), ("fill", "hold2", 300),
            ("fill", "wake2", 150),
            ("train", "none", 0), ("train", "wake2", 100), ("train", "train", 150),
            ("train", "train", 200)]
    for be, pre, lead in rows:
        args = ["--pre", pre, "--pre-lead-us", str(lead)] if pre != "none" else []
        s.append(sc(f"micro probe BE {be} 50 pre {pre} lead {lead}", "micro", be, 1, "probe",
                    lc_args=args, lc_env=lc_env, be_env=be50, tag="holdprobe2", trace=True))
    return s


def set_graphtrain():
    """The preempt agent's wake with a hold (the empty kernel again every
    20 us from the wake until the request's first launch, at most the hold
    past the start it was aimed at) against today's default (lead 100, no
    hold), from the LC's environment, everything pinned: the micro LC
    beside one be_fill, one training BE and three be_fills; the CUDA-graph
    models on time without CUDA events beside one training BE (ResNet-50
    also beside three)."""
    busy = ["--busy-wait-us", "200", "--no-events"]
    s = [sc("be alone fill", None, "fill", 1, "be_alone", pin=True),
         sc("be alone train", None, "train", 1, "be_alone", pin=True),
         sc("be alone 3xtrain", None, "train", 3, "be_alone", pin=True)]
    rows = [("micro", "fill", 1, ((100, 0), (150, 50), (175, 50))),
            ("micro", "train", 1, ((100, 0), (175, 50))),
            ("micro", "fill", 3, ((100, 0), (175, 50))),
            ("resnet50_graph", "train", 1, ((100, 0), (175, 50))),
            ("resnet50_graph", "train", 3, ((100, 0), (175, 50))),
            ("vit_b16_graph", "train", 1, ((100, 0), (150, 50), (175, 50))),
            ("bert_base_graph", "train", 1, ((100, 0), (150, 50), (175, 50)))]
    for lc, be, nbe, leads in rows:
        args = busy if lc != "micro" else []
        if not any(x["name"] == f"{lc} alone pinned" for x in s):
            s.append(sc(f"{lc} alone pinned", lc, nbe=0, mode="alone", lc_args=args,
                        tag="graphtrain", trace=True, pin=True))
        for lead, hold in leads:
            s.append(sc(f"{lc} gq:default {nbe}x{be} pinned lead {lead} hold {hold}", lc, be,
                        nbe, "gq:default", lc_args=args,
                        lc_env={"GPUQOS_WAKE_LEAD_US": str(lead),
                                "GPUQOS_WAKE_HOLD_US": str(hold), "GPUQOS_LOG": "info"},
                        tag="graphtrain", trace=True, pin=True))
    return s


def set_trainhold():
    """The hold's train at the default lead (100 us, hold 50: the empty
    kernel again every 20 us until the request, at most 50 us past the
    start aimed at) against no hold, pinned: the micro LC beside one
    be_fill (two reps of each), ViT-B/16 and BERT-base on time without CUDA
    events beside one training BE."""
    busy = ["--busy-wait-us", "200", "--no-events"]
    s = [sc("be alone fill", None, "fill", 1, "be_alone", pin=True),
         sc("be alone train", None, "train", 1, "be_alone", pin=True)]
    for lc, be in (("micro", "fill"), ("vit_b16_graph", "train"), ("bert_base_graph", "train")):
        args = busy if lc != "micro" else []
        s.append(sc(f"{lc} alone pinned", lc, nbe=0, mode="alone", lc_args=args,
                    tag="trainhold", trace=True, pin=True))
        for rep in ((0, 1) if lc == "micro" else (0,)):
            for hold in (0, 50):
                s.append(sc(f"{lc} gq:default 1x{be} pinned lead 100 hold {hold}"
                            + (f" rep {rep}" if rep else ""), lc, be, 1, "gq:default",
                            lc_args=args,
                            lc_env={"GPUQOS_WAKE_LEAD_US": "100",
                                    "GPUQOS_WAKE_HOLD_US": str(hold), "GPUQOS_LOG": "info"},
                            tag="trainhold", trace=True, pin=True))
    return s


def set_exactlead():
    """Whether a lead of 150-175 us works through the preempt agent for an
    LC that submits exactly on time (the micro LC busy-waiting the last
    200 us, pinned), as it did when the LC woke its own context
    (holdprobe2): beside one be_fill, one training BE and three be_fills,
    lead/hold 100/0 against 150/0, 175/0 and 175/50. Run with a preempt
    agent whose reach is the lead plus 50 us (else such leads are judged
    wasted and stopped)."""
    busy = ["--busy-wait-us", "200"]
    s = [sc("be alone fill", None, "fill", 1, "be_alone", pin=True),
         sc("be alone train", None, "train", 1, "be_alone", pin=True),
         sc("micro alone pinned", "micro", nbe=0, mode="alone", lc_args=busy, tag="exactlead",
            trace=True, pin=True)]
    for be, nbe, leads in (("fill", 1, ((100, 0), (150, 0), (175, 0), (175, 50))),
                           ("train", 1, ((100, 0), (175, 50))),
                           ("fill", 3, ((100, 0), (175, 50)))):
        for lead, hold in leads:
            s.append(sc(f"micro gq:default {nbe}x{be} pinned busy200 lead {lead} hold {hold}",
                        "micro", be, nbe, "gq:default", lc_args=busy,
                        lc_env={"GPUQOS_WAKE_LEAD_US": str(lead),
                                "GPUQOS_WAKE_HOLD_US": str(hold), "GPUQOS_LOG": "info"},
                        tag="exactlead", trace=True, pin=True))
    return s


def set_targets():
    """The issue's targets under the default policy, as an LC that meets
    the wake's needs runs (pinned, on time; the models without CUDA
    events): the micro LC beside one and three be_fills, the CUDA-graph
    ResNet-50 beside one and three training BEs, ViT-B/16 and BERT-base
    beside one; each LC alone, pinned, and the BEs alone."""
    busy = ["--busy-wait-us", "200"]
    s = [sc("be alone fill", None, "fill", 1, "be_alone", pin=True),
         sc("be alone 3xfill", None, "fill", 3, "be_alone", pin=True),
         sc("be alone train", None, "train", 1, "be_alone", pin=True),
         sc("be alone 3xtrain", None, "train", 3, "be_alone", pin=True)]
    for lc, be, nbes in (("micro", "fill", (1, 3)), ("resnet50_graph", "train", (1, 3)),
                         ("vit_b16_graph", "train", (1,)), ("bert_base_graph", "train", (1,))):
        args = busy + (["--no-events"] if lc != "micro" else [])
        s.append(sc(f"{lc} alone pinned", lc, nbe=0, mode="alone", lc_args=args,
                    tag="targets", trace=True, pin=True))
        for nbe in nbes:
            s.append(sc(f"{lc} gq:default {nbe}x{be} pinned", lc, be, nbe, "gq:default",
                        lc_args=args, lc_env={"GPUQOS_LOG": "info"}, tag="targets",
                        trace=True, pin=True))
    return s


def set_be20multi():
    """Whether a 20 us BE slice (the be20 policy) should be the default
    for several BEs (one run on 2026-11-26 gave the CUDA-graph ResNet-50
    1.02x beside three training BEs against 1.20x): ResNet-50 beside three
    training BEs under both policies, two reps each in turn; the micro LC
    beside three be_fills and ResNet-50 beside one training BE under both;
    pinned, on time, no CUDA events."""
    busy = ["--busy-wait-us", "200"]
    s = [sc("be alone fill", None, "fill", 1, "be_alone", pin=True),
         sc("be alone train", None, "train", 1, "be_alone", pin=True),
         sc("be alone 3xtrain", None, "train", 3, "be_alone", pin=True),
         sc("micro alone pinned", "micro", nbe=0, mode="alone", lc_args=busy, tag="be20multi",
            trace=True, pin=True),
         sc("resnet50_graph alone pinned", "resnet50_graph", nbe=0, mode="alone",
            lc_args=busy + ["--no-events"], tag="be20multi", trace=True, pin=True)]
    rows = [("resnet50_graph", "train", 3, "default", 0), ("resnet50_graph", "train", 3, "be20", 0),
            ("resnet50_graph", "train", 3, "default", 1), ("resnet50_graph", "train", 3, "be20", 1),
            ("micro", "fill", 3, "default", 0), ("micro", "fill", 3, "be20", 0),
            ("resnet50_graph", "train", 1, "be20", 0)]
    for lc, be, nbe, pol, rep in rows:
        args = busy + (["--no-events"] if lc != "micro" else [])
        s.append(sc(f"{lc} gq:{pol} {nbe}x{be} pinned" + (f" rep {rep}" if rep else ""), lc, be,
                    nbe, f"gq:{pol}", lc_args=args, lc_env={"GPUQOS_LOG": "info"},
                    tag="be20multi", trace=True, pin=True))
    return s


def set_alonewake():
    """Why a model runs faster beside a busy BE than alone (docs/perf-log,
    "What hid it for ResNet-50"), and faster still when its woken context
    was in ahead of it ("Keeping the woken context in"): each LC alone,
    pinned, on time, with its CUDA events (the GPU time), without and with
    a wake from its own environment 100, 300 and 1000 us ahead (no BE: the
    wake only brings the GPU out of its idle state)."""
    busy = ["--busy-wait-us", "200"]
    s = []
    for lc, leads in (("vit_b16_graph", (0, 100, 300, 1000)), ("resnet50_graph", (0, 100, 300)),
                      ("micro", (0, 100))):
        s.append(sc(f"{lc} alone pinned", lc, nbe=0, mode="alone", lc_args=busy,
                    tag="alonewake", trace=True, pin=True))
        for lead in leads:
            # Under the node agent and gpuqos run (the preempt agent
            # loaded), alone on the GPU; the environment's wake is followed
            # whatever the policy says.
            s.append(sc(f"{lc} gq:default alone pinned wake {lead}", lc, nbe=0, mode="gq:default",
                        lc_args=busy,
                        lc_env={"GPUQOS_WAKE_LEAD_US": str(lead), "GPUQOS_LOG": "info"},
                        tag="alonewake", trace=True, pin=True))
    return s


def set_keepin():
    """lc_micro's own train 175 us ahead (holdprobe2's best row) and the
    preempt agent's (lead 175, hold 50, the LC busy-waiting), in turn on
    one host, each against its own 100 us wake: whether the two differ by
    who launches the train or by the host. Run with a preempt agent whose
    reach is the lead plus 50 us, as exactlead."""
    be50 = {"GQP_TIMESLICE_US": "50"}
    busy = ["--busy-wait-us", "200"]
    s = [sc("be alone fill", None, "fill", 1, "be_alone"),
         sc("micro alone", "micro", nbe=0, mode="alone", trace=True)]
    for rep in (0, 1):
        r = f" rep {rep}" if rep else ""
        s.append(sc(f"micro probe BE 50 pre wake2 lead 100{r}", "micro", "fill", 1, "probe",
                    lc_args=["--pre", "wake2", "--pre-lead-us", "100"] + busy, lc_env=LC_TS,
                    be_env=be50, tag="keepin", trace=True))
        s.append(sc(f"micro probe BE 50 pre train lead 175{r}", "micro", "fill", 1, "probe",
                    lc_args=["--pre", "train", "--pre-lead-us", "175"] + busy, lc_env=LC_TS,
                    be_env=be50, tag="keepin", trace=True))
        for lead, hold in ((100, 0), (175, 50)):
            s.append(sc(f"micro gq:default 1xfill busy200 lead {lead} hold {hold}{r}", "micro",
                        "fill", 1, "gq:default", lc_args=busy,
                        lc_env={"GPUQOS_WAKE_LEAD_US": str(lead),
                                "GPUQOS_WAKE_HOLD_US": str(hold), "GPUQOS_LOG": "info"},
                        tag="keepin", trace=True))
    return s


def set_keepin2():
    """Whether the preempt agent's train from 175 us ahead loses more
    requests than lc_micro's own (keepin: 2.4 % against 0.3-1.0 %, the
    agent's slow requests in runs of two and three) because of who
    launches the train or because of what gq mode adds (the node agent's
    settings through the preempt agents, their launch counting): beside
    one be_fill, the LC busy-waiting, two reps in turn: lc_micro's own
    train in probe mode and in gq mode (the agent's wake off), the agent's
    train (lead 175, hold 50, every wake issued) and the agent's default
    wake."""
    be50 = {"GQP_TIMESLICE_US": "50"}
    busy = ["--busy-wait-us", "200"]
    own = ["--pre", "train", "--pre-lead-us", "175"] + busy
    s = [sc("be alone fill", None, "fill", 1, "be_alone"),
         sc("micro alone", "micro", nbe=0, mode="alone", lc_args=busy, trace=True)]
    for rep in (0, 1):
        r = f" rep {rep}" if rep else ""
        s.append(sc(f"micro probe BE 50 pre train lead 175{r}", "micro", "fill", 1, "probe",
                    lc_args=own, lc_env=LC_TS, be_env=be50, tag="keepin2", trace=True))
        s.append(sc(f"micro gq:default 1xfill pre train lead 175 agent wake off{r}", "micro",
                    "fill", 1, "gq:default", lc_args=own,
                    lc_env={"GPUQOS_WAKE_LEAD_US": "0", "GPUQOS_LOG": "info"},
                    tag="keepin2", trace=True))
        for lead, hold in ((175, 50), (100, 0)):
            s.append(sc(f"micro gq:default 1xfill busy200 lead {lead} hold {hold}{r}", "micro",
                        "fill", 1, "gq:default", lc_args=busy,
                        lc_env={"GPUQOS_WAKE_LEAD_US": str(lead),
                                "GPUQOS_WAKE_HOLD_US": str(hold), "GPUQOS_WAKE_STOPS": "0",
                                "GPUQOS_LOG": "info"},
                        tag="keepin2", trace=True))
    return s


def set_alonewake2():
    """alonewake again with every wake issued (GPUQOS_WAKE_STOPS=0; in
    alonewake the judging held most wakes off): whether a model alone on
    the GPU runs faster with its context woken ahead of each request.
    ViT-B/16 and ResNet-50 graphs alone, pinned, on time, with their CUDA
    events (the GPU time), wake 0, 100 and 300 us."""
    busy = ["--busy-wait-us", "200"]
    s = []
    for lc in ("vit_b16_graph", "resnet50_graph"):
        s.append(sc(f"{lc} alone pinned", lc, nbe=0, mode="alone", lc_args=busy,
                    tag="alonewake2", trace=True, pin=True))
        for lead in (0, 100, 300):
            s.append(sc(f"{lc} gq:default alone pinned wake {lead}", lc, nbe=0, mode="gq:default",
                        lc_args=busy,
                        lc_env={"GPUQOS_WAKE_LEAD_US": str(lead), "GPUQOS_WAKE_STOPS": "0",
                                "GPUQOS_LOG": "info"},
                        tag="alonewake2", trace=True, pin=True))
    return s


def set_rotperiod():
    """Whether a longer rotation turn (rotation.periodMs 250 against the
    default 100) lets three BEs keep in total what one BE keeps beside the
    LC (run 8 of 2026-11-26: 0.80 against 0.81; each turn costs two
    channel controls and a switch among BEs): the micro LC beside one and
    three be_fills and the CUDA-graph ResNet-50 beside three training BEs,
    both policies in turn, two reps, pinned, on time."""
    busy = ["--busy-wait-us", "200"]
    s = [sc("be alone fill", None, "fill", 1, "be_alone", pin=True),
         sc("be alone 3xfill", None, "fill", 3, "be_alone", pin=True),
         sc("be alone 3xtrain", None, "train", 3, "be_alone", pin=True),
         sc("micro alone pinned", "micro", nbe=0, mode="alone", lc_args=busy, tag="rotperiod",
            trace=True, pin=True)]
    for rep in (0, 1):
        r = f" rep {rep}" if rep else ""
        s.append(sc(f"micro gq:default 1xfill pinned{r}", "micro", "fill", 1, "gq:default",
                    lc_args=busy, tag="rotperiod", trace=True, pin=True))
        for lc, be in (("micro", "fill"), ("resnet50_graph", "train")):
            args = busy + (["--no-events"] if lc != "micro" else [])
            for pol in ("default", "rot250"):
                s.append(sc(f"{lc} gq:{pol} 3x{be} pinned{r}", lc, be, 3, f"gq:{pol}",
                            lc_args=args, lc_env={"GPUQOS_LOG": "info"}, tag="rotperiod",
                            trace=True, pin=True))
    return s


def set_modelbe20():
    """Whether the 20 us BE slice (be20) brings ViT-B/16 and BERT-base,
    woken, nearer their solo p99 beside one training BE than the default
    50 us (run 8 of 2026-11-26: 1.10x and 1.14x): each alone, then both
    policies in turn; pinned, on time, no CUDA events."""
    busy = ["--busy-wait-us", "200", "--no-events"]
    s = [sc("be alone train", None, "train", 1, "be_alone", pin=True)]
    for lc in ("vit_b16_graph", "bert_base_graph"):
        s.append(sc(f"{lc} alone pinned", lc, nbe=0, mode="alone", lc_args=busy,
                    tag="modelbe20", trace=True, pin=True))
        for pol in ("default", "be20"):
            s.append(sc(f"{lc} gq:{pol} 1xtrain pinned", lc, "train", 1, f"gq:{pol}",
                        lc_args=busy, lc_env={"GPUQOS_LOG": "info"}, tag="modelbe20",
                        trace=True, pin=True))
    return s


def set_betotal():
    """Whether three rotated BEs keep in total what one BE keeps beside the
    LC, over 30 s windows (6 s windows count whole BE kernels and steps
    only, and each BE loses its unfinished one at the window's end, which
    hits three BEs three times): the micro LC beside one and three
    be_fills (default and rot250), the CUDA-graph ResNet-50 beside one and
    three training BEs; pinned, on time."""
    busy = ["--busy-wait-us", "200"]
    g = busy + ["--no-events"]
    return [sc("be alone fill", None, "fill", 1, "be_alone", pin=True, duration_s=30),
            sc("be alone train", None, "train", 1, "be_alone", pin=True, duration_s=30),
            sc("micro gq:default 1xfill pinned", "micro", "fill", 1, "gq:default", lc_args=busy,
               tag="betotal", pin=True, duration_s=30),
            sc("micro gq:default 3xfill pinned", "micro", "fill", 3, "gq:default", lc_args=busy,
               tag="betotal", pin=True, duration_s=30),
            sc("micro gq:rot250 3xfill pinned", "micro", "fill", 3, "gq:rot250", lc_args=busy,
               tag="betotal", pin=True, duration_s=30),
            sc("resnet50_graph gq:default 1xtrain pinned", "resnet50_graph", "train", 1,
               "gq:default", lc_args=g, tag="betotal", pin=True, duration_s=30),
            sc("resnet50_graph gq:default 3xtrain pinned", "resnet50_graph", "train", 3,
               "gq:default", lc_args=g, tag="betotal", pin=True, duration_s=30)]


def set_rotconfirm():
    """betotal's rotation turns again over 30 s windows: the CUDA-graph
    ResNet-50 beside three training BEs with 100 and 250 ms turns (and
    alone), the micro LC beside three be_fills with 250 ms turns under the
    default 500 ms lease, and 500 ms turns; pinned, on time."""
    busy = ["--busy-wait-us", "200"]
    g = busy + ["--no-events"]
    s = [sc("resnet50_graph alone pinned", "resnet50_graph", nbe=0, mode="alone", lc_args=g,
            tag="rotconfirm", pin=True, duration_s=30)]
    for pol in ("default", "rot250"):
        s.append(sc(f"resnet50_graph gq:{pol} 3xtrain pinned", "resnet50_graph", "train", 3,
                    f"gq:{pol}", lc_args=g, tag="rotconfirm", pin=True, duration_s=30))
    for pol in ("rot250l500", "rot500"):
        s.append(sc(f"micro gq:{pol} 3xfill pinned", "micro", "fill", 3, f"gq:{pol}",
                    lc_args=busy, tag="rotconfirm", pin=True, duration_s=30))
    return s


def set_rotturn():
    """Each rotation turn's change lands on an LC request now and then
    (rotperiod's traces: the slow requests come at multiples of the turn):
    the CUDA-graph ResNet-50 beside three training BEs with turns of 100,
    250 (under the default 500 ms lease) and 500 ms, two reps in turn,
    30 s windows, every request traced; pinned, on time."""
    g = ["--busy-wait-us", "200", "--no-events"]
    s = [sc("be alone train", None, "train", 1, "be_alone", pin=True, duration_s=30),
         sc("resnet50_graph alone pinned", "resnet50_graph", nbe=0, mode="alone", lc_args=g,
            tag="rotturn", trace=True, pin=True, duration_s=30)]
    for rep in (0, 1):
        r = f" rep {rep}" if rep else ""
        for pol in ("default", "rot250l500", "rot500"):
            s.append(sc(f"resnet50_graph gq:{pol} 3xtrain pinned{r}", "resnet50_graph", "train",
                        3, f"gq:{pol}", lc_args=g, tag="rotturn", trace=True, pin=True,
                        duration_s=30))
    return s


def set_lead125():
    """Whether a wake lead between the default 100 us and the 150 us
    reach (125, 140) hides more of the switch for ViT-B/16 and BERT-base
    (1.10-1.15x their solo p99 at 100) without the losses of 150 and up:
    beside one training BE, pinned, on time, no CUDA events, leads 100
    and 125 twice in turn and 140 once; the micro LC beside one be_fill
    at 100 and 125."""
    busy = ["--busy-wait-us", "200"]
    s = [sc("be alone train", None, "train", 1, "be_alone", pin=True),
         sc("be alone fill", None, "fill", 1, "be_alone", pin=True)]
    for lc, be, leads in (("vit_b16_graph", "train", (100, 125, 100, 125, 140)),
                          ("bert_base_graph", "train", (100, 125, 100, 125, 140)),
                          ("micro", "fill", (100, 125))):
        args = busy + (["--no-events"] if lc != "micro" else [])
        s.append(sc(f"{lc} alone pinned", lc, nbe=0, mode="alone", lc_args=args,
                    tag="lead125", trace=True, pin=True))
        seen = {}
        for lead in leads:
            seen[lead] = seen.get(lead, 0) + 1
            r = f" rep {seen[lead] - 1}" if seen[lead] > 1 else ""
            s.append(sc(f"{lc} gq:default 1x{be} pinned lead {lead}{r}", lc, be, 1, "gq:default",
                        lc_args=args, lc_env={"GPUQOS_WAKE_LEAD_US": str(lead),
                                              "GPUQOS_LOG": "info"},
                        tag="lead125", trace=True, pin=True))
    return s


def keepin_set(alone_pres, rows, tag):
    """A probe-mode micro set: the BEs alone, the micro LC alone (busy-
    waiting, pinned) and with each of alone_pres 300 us ahead, then rows of
    (BE kind, lc_micro's --pre, its lead in us) each beside one BE at
    50 us, the LC at 100 ms, every process printing its context-switch
    counts every second."""
    stats = {"GQP_CTXSW_STATS_MS": "1000"}
    lc_env = dict(LC_TS, **stats)
    be50 = dict(stats, GQP_TIMESLICE_US="50")
    busy = ["--busy-wait-us", "200"]
    s = [sc("be alone fill", None, "fill", 1, "be_alone", pin=True),
         sc("be alone train", None, "train", 1, "be_alone", pin=True),
         sc("micro alone", "micro", nbe=0, mode="alone", lc_args=busy, trace=True, pin=True)]
    for pre in alone_pres:
        s.append(sc(f"micro alone {pre} 300", "micro", nbe=0, mode="alone",
                    lc_args=busy + ["--pre", pre, "--pre-lead-us", "300"], trace=True, pin=True))
    for be, pre, lead in rows:
        args = busy + (["--pre", pre, "--pre-lead-us", str(lead)] if pre != "none" else [])
        s.append(sc(f"micro probe BE {be} 50 pre {pre} lead {lead}", "micro", be, 1, "probe",
                    lc_args=args, lc_env=lc_env, be_env=be50, tag=tag, trace=True, pin=True))
    return s


def set_latch():
    """Does a woken LC context stay on the GPU while it has work, all the way
    to its request? lc_micro's latch (--pre latch): from L us ahead a kernel
    on a second stream spins until the request's own stream writes its
    number (cuStreamWriteValue32 queued just before the request's kernel),
    so the context is never idle between the latch and the request. The
    hold of holdprobe2 (hold2: released by the host after the submit) and
    the empty kernel 100 us ahead beside it; the LC and the latch alone
    (what the latch costs with no BE); be_fill and a training BE at 50 us.
    Every process prints its context-switch counts every second: one LC
    save per request means the context stayed."""
    rows = [("fill", "none", 0), ("fill", "wake2", 100), ("fill", "hold2", 300),
            ("fill", "latch", 200), ("fill", "latch", 250), ("fill", "latch", 300),
            ("fill", "latch", 400), ("train", "wake2", 100), ("train", "latch", 300)]
    return keepin_set(("latch",), rows, "latch")


def set_acquire():
    """latch's question with a stream wait instead of a spinning kernel
    (the latch run: a context whose channels have no method left is
    switched out at its next idle point, its kernel still running, and the
    latch then spun to its limit). waitv: an empty kernel and a wait
    (cuStreamWaitValue32) on a second stream from L us ahead, released by
    the request's own stream; gate: the same on the request's stream, the
    request queued behind it and released by the host after the launch.
    One LC save per request means the context stayed."""
    rows = [("fill", "none", 0), ("fill", "wake2", 100),
            ("fill", "waitv", 200), ("fill", "waitv", 300), ("fill", "waitv", 400),
            ("fill", "gate", 200), ("fill", "gate", 300), ("fill", "gate", 400),
            ("train", "waitv", 300), ("train", "gate", 300)]
    return keepin_set(("waitv", "gate"), rows, "acquire")


def set_graphsaves():
    """How often is a CUDA-graph model's context saved per request beside a
    BE (rm_probe's context-switch counts every second; the suite keeps the
    series)? One save per request: the context stays from its first kernel
    to its last. More: it is switched out within the request, at an idle
    point between kernels, and pays the switch again (the acquire run: a
    context whose channels have no method left is switched out at its next
    idle point). LC at 100 ms, BE at 50 us, no wake (probe mode), pinned,
    on time, no CUDA events; the micro LC for reference."""
    stats = {"GQP_CTXSW_STATS_MS": "1000"}
    lc_env = dict(LC_TS, **stats)
    be50 = dict(stats, GQP_TIMESLICE_US="50")
    busy = ["--busy-wait-us", "200", "--no-events"]
    s = [sc("be alone train", None, "train", 1, "be_alone", pin=True),
         sc("be alone fill", None, "fill", 1, "be_alone", pin=True)]
    for lc in ("resnet50_graph", "vit_b16_graph", "bert_base_graph"):
        s.append(sc(f"{lc} alone", lc, nbe=0, mode="alone", lc_args=busy, pin=True))
    for lc, be in (("micro", "train"), ("resnet50_graph", "train"), ("vit_b16_graph", "train"),
                   ("bert_base_graph", "train"), ("vit_b16_graph", "fill"),
                   ("bert_base_graph", "fill")):
        args = ["--busy-wait-us", "200"] if lc == "micro" else busy
        s.append(sc(f"{lc} probe BE {be} 50", lc, be, 1, "probe", lc_args=args, lc_env=lc_env,
                    be_env=be50, tag="graphsaves", trace=True, pin=True))
    return s


def set_turngap():
    """Turn changes held until they fit in the LC's gap (rotation.inGap,
    the default) against changes at the turn's period (nogap), in turn on
    one machine: the micro LC beside three be_fills, the CUDA-graph
    ResNet-50 beside three training BEs, pinned, on time; each LC alone.
    The suite keeps every request (trace) to find the ones that met a
    change."""
    busy = ["--busy-wait-us", "200"]
    s = [sc("be alone 3xfill", None, "fill", 3, "be_alone", pin=True),
         sc("be alone 3xtrain", None, "train", 3, "be_alone", pin=True)]
    for lc, be in (("micro", "fill"), ("resnet50_graph", "train")):
        args = busy + (["--no-events"] if lc != "micro" else [])
        s.append(sc(f"{lc} alone pinned", lc, nbe=0, mode="alone", lc_args=args,
                    tag="turngap", trace=True, pin=True))
        for pol in ("default", "nogap"):
            s.append(sc(f"{lc} gq:{pol} 3x{be} pinned", lc, be, 3, f"gq:{pol}", lc_args=args,
                        lc_env={"GPUQOS_LOG": "info"}, tag="turngap", trace=True, pin=True))
    return s


def set_bewindows():
    """Windows built into gpuqos (policy windows.*): ViT-B/16 every 10 ms and
    BERT-base every 5 ms beside one training BE, the CUDA-graph ResNet-50
    every 5 ms beside three, each under the default policy and with
    windows (winvit, winbert, winres); each model alone and the BEs alone.
    Pinned, on time, no CUDA events; the BEs log their windows."""
    busy = ["--busy-wait-us", "200", "--no-events"]
    info = {"GPUQOS_LOG": "info"}
    s = [sc("be alone train", None, "train", 1, "be_alone", pin=True),
         sc("be alone 3xtrain", None, "train", 3, "be_alone", pin=True)]
    for lc, nbe, pol in (("vit_b16_graph", 1, "winvit"), ("bert_base_graph", 1, "winbert"),
                         ("resnet50_graph", 3, "winres")):
        s.append(sc(f"{lc} alone pinned", lc, nbe=0, mode="alone", lc_args=busy,
                    tag="bewindows", trace=True, pin=True))
        for p in ("default", pol):
            s.append(sc(f"{lc} gq:{p} {nbe}xtrain pinned", lc, "train", nbe, f"gq:{p}",
                        lc_args=busy, lc_env=info, be_env=info, tag="bewindows", trace=True,
                        pin=True))
    return s


def set_bewindows2():
    """bewindows again for the two models it is for, with ViT-B/16's window
    also 300 us longer (winvit14): each model alone, under the default
    policy and with its windows, the BE alone."""
    busy = ["--busy-wait-us", "200", "--no-events"]
    info = {"GPUQOS_LOG": "info"}
    s = [sc("be alone train", None, "train", 1, "be_alone", pin=True)]
    for lc, pols in (("vit_b16_graph", ("default", "winvit", "winvit14")),
                     ("bert_base_graph", ("default", "winbert"))):
        s.append(sc(f"{lc} alone pinned", lc, nbe=0, mode="alone", lc_args=busy,
                    tag="bewindows", trace=True, pin=True))
        for p in pols:
            s.append(sc(f"{lc} gq:{p} 1xtrain pinned", lc, "train", 1, f"gq:{p}",
                        lc_args=busy, lc_env=info, be_env=info, tag="bewindows", trace=True,
                        pin=True))
    return s


def set_bewinproof():
    """Windows and safety: BERT-base (winbert) beside a be_fill, whose
    longest stall (max_gap_ms) shows what a window costs it at most, also
    with the node agent killed at 2 s and stopped for 2 s at 1 s (the
    schedule must end with the connection, or lapse with its lease); the
    micro LC every 2 ms under winbert, whose window is too long for its
    period (no windows: as under the default policy)."""
    busy = ["--busy-wait-us", "200"]
    model = busy + ["--no-events"]
    info = {"GPUQOS_LOG": "info"}
    return [sc("be alone fill", None, "fill", 1, "be_alone", pin=True),
            sc("bert_base_graph alone pinned", "bert_base_graph", nbe=0, mode="alone",
               lc_args=model, tag="bewinproof", pin=True),
            sc("bert_base_graph gq:winbert 1xfill pinned", "bert_base_graph", "fill", 1,
               "gq:winbert", lc_args=model, lc_env=info, be_env=info, tag="bewinproof",
               pin=True),
            sc("bert_base_graph gq:winbert 1xfill pinned, agent killed at 2 s",
               "bert_base_graph", "fill", 1, "gq:winbert", lc_args=model, lc_env=info,
               be_env=info, tag="bewinproof", pin=True, event=("kill", 2.0)),
            sc("bert_base_graph gq:winbert 1xfill pinned, agent stopped 2 s at 1 s",
               "bert_base_graph", "fill", 1, "gq:winbert", lc_args=model, lc_env=info,
               be_env=info, tag="bewinproof", pin=True, event=("stop", 1.0, 2.0)),
            sc("micro alone pinned", "micro", nbe=0, mode="alone", lc_args=busy,
               tag="bewinproof", pin=True),
            sc("micro gq:default 1xfill pinned", "micro", "fill", 1, "gq:default",
               lc_args=busy, lc_env=info, be_env=info, tag="bewinproof", pin=True),
            sc("micro gq:winbert 1xfill pinned", "micro", "fill", 1, "gq:winbert",
               lc_args=busy, lc_env=info, be_env=info, tag="bewinproof", pin=True)]


def set_bewinfill():
    """BERT-base's windows beside a be_fill (always ready: it comes back the
    moment a window ends), at 800 and 1000 us after the start, every
    request traced; the model alone."""
    model = ["--busy-wait-us", "200", "--no-events"]
    info = {"GPUQOS_LOG": "info"}
    s = [sc("be alone fill", None, "fill", 1, "be_alone", pin=True),
         sc("bert_base_graph alone pinned", "bert_base_graph", nbe=0, mode="alone",
            lc_args=model, tag="bewinfill", trace=True, pin=True)]
    for p in ("default", "winbert", "winbert10"):
        s.append(sc(f"bert_base_graph gq:{p} 1xfill pinned", "bert_base_graph", "fill", 1,
                    f"gq:{p}", lc_args=model, lc_env=info, be_env=info, tag="bewinfill",
                    trace=True, pin=True))
    return s


def set_bewin3be():
    """ViT-B/16 and BERT-base beside three training BEs (the issue's 1.10x
    target), under the default policy (rotation) and with windows on the
    BE whose turn it is; each model alone and the BEs alone."""
    busy = ["--busy-wait-us", "200", "--no-events"]
    info = {"GPUQOS_LOG": "info"}
    # One BE alone too: "BE kept" is against one BE's rate.
    s = [sc("be alone train", None, "train", 1, "be_alone", pin=True),
         sc("be alone 3xtrain", None, "train", 3, "be_alone", pin=True)]
    for lc, pol in (("vit_b16_graph", "winvit"), ("bert_base_graph", "winbert")):
        s.append(sc(f"{lc} alone pinned", lc, nbe=0, mode="alone", lc_args=busy,
                    tag="bewin3be", trace=True, pin=True))
        for p in ("default", pol):
            s.append(sc(f"{lc} gq:{p} 3xtrain pinned", lc, "train", 3, f"gq:{p}",
                        lc_args=busy, lc_env=info, be_env=info, tag="bewin3be", trace=True,
                        pin=True))
    return s


def set_winauto():
    """Windows sized by each LC's own span (windows.afterUs "auto") against
    the hand-set ones and the default policy: ViT-B/16 (winvit) and
    BERT-base (winbert) beside one training BE, BERT-base beside a
    be_fill; the micro LC every 2 ms beside a be_fill under the default
    policy (the switch cost and the physical limit) and under winauto
    (its window cannot fit its period: none). Each LC alone, the BEs
    alone; the LCs log their spans, the BEs their windows."""
    busy = ["--busy-wait-us", "200"]
    info = {"GPUQOS_LOG": "info"}
    s = [sc("be alone fill", None, "fill", 1, "be_alone", pin=True),
         sc("be alone train", None, "train", 1, "be_alone", pin=True),
         sc("micro alone pinned", "micro", nbe=0, mode="alone", lc_args=busy,
            tag="winauto", pin=True)]
    for p in ("default", "winauto"):
        s.append(sc(f"micro gq:{p} 1xfill pinned", "micro", "fill", 1, f"gq:{p}",
                    lc_args=busy, lc_env=info, be_env=info, tag="winauto", pin=True))
    for lc, be, pol in (("vit_b16_graph", "train", "winvit"),
                        ("bert_base_graph", "train", "winbert"),
                        ("bert_base_graph", "fill", "winbert")):
        model_rows(s, lc, be, ("default", pol, "winauto"), "winauto")
    return s


def model_rows(s, lc, be, pols, tag):
    """A CUDA-graph model (pinned, on time, no CUDA events, traced) beside
    one BE under each policy, and alone unless s has it already."""
    model = ["--busy-wait-us", "200", "--no-events"]
    info = {"GPUQOS_LOG": "info"}
    name = f"{lc} alone pinned"
    if not any(x["name"] == name for x in s):
        s.append(sc(name, lc, nbe=0, mode="alone", lc_args=model, tag=tag, trace=True, pin=True))
    for p in pols:
        s.append(sc(f"{lc} gq:{p} 1x{be} pinned", lc, be, 1, f"gq:{p}", lc_args=model,
                    lc_env=info, be_env=info, tag=tag, trace=True, pin=True))


def set_winauto3():
    """Windows sized by the LC's span beside three training BEs (with the
    rotation), against the default policy; BERT-base beside a be_fill under
    winauto with the node agent killed at 2 s (the schedule must end with
    the connection); each LC alone and the BEs alone."""
    model = ["--busy-wait-us", "200", "--no-events"]
    info = {"GPUQOS_LOG": "info"}
    s = [sc("be alone fill", None, "fill", 1, "be_alone", pin=True),
         sc("be alone train", None, "train", 1, "be_alone", pin=True),
         sc("be alone 3xtrain", None, "train", 3, "be_alone", pin=True)]
    for lc in ("vit_b16_graph", "bert_base_graph"):
        s.append(sc(f"{lc} alone pinned", lc, nbe=0, mode="alone", lc_args=model,
                    tag="winauto3", trace=True, pin=True))
        for p in ("default", "winauto"):
            s.append(sc(f"{lc} gq:{p} 3xtrain pinned", lc, "train", 3, f"gq:{p}",
                        lc_args=model, lc_env=info, be_env=info, tag="winauto3", trace=True,
                        pin=True))
    s.append(sc("bert_base_graph gq:winauto 1xfill pinned, agent killed at 2 s",
                "bert_base_graph", "fill", 1, "gq:winauto", lc_args=model, lc_env=info,
                be_env=info, tag="winauto3", pin=True, event=("kill", 2.0)))
    return s


def set_winbefore():
    """How late a window may open: windows.afterUs "auto" with beforeUs
    1200 (the default), 900, 700 and 500, beside the default policy, for
    BERT-base beside a be_fill and a training BE and ViT-B/16 beside a
    training BE. The disable (0.7 ms at the median) and the preempt
    (0.3 ms) are issued from the window's start; if the BE leaves the
    engine early in them, a shorter beforeUs keeps the request's solo GPU
    time and gives the BE back the difference every period."""
    s = [sc("be alone fill", None, "fill", 1, "be_alone", pin=True),
         sc("be alone train", None, "train", 1, "be_alone", pin=True)]
    for lc, be in (("bert_base_graph", "fill"), ("bert_base_graph", "train"),
                   ("vit_b16_graph", "train")):
        model_rows(s, lc, be, ("default", "winauto", "winb900", "winb700", "winb500"),
                   "winbefore")
    return s


def set_winnotice():
    """Where in a take-off the BE leaves the engine: rm_probe's windows
    (no node agent) beside BERT-base every 5 ms, the request due A us into
    each window (A = 1200, 900, 700, 500) and the window A + 850 us long,
    with the disable followed by a PREEMPT (as gpuqos does) and without
    (GQP_NO_PREEMPT=1: the disabled BE leaves at its 50 us timeslice's
    end, if at all); beside a be_fill and a training BE."""
    busy = ["--busy-wait-us", "200", "--no-events"]
    lc = "bert_base_graph"
    s = [sc("be alone fill", None, "fill", 1, "be_alone", pin=True),
         sc("be alone train", None, "train", 1, "be_alone", pin=True),
         sc(f"{lc} alone pinned", lc, nbe=0, mode="alone", lc_args=busy, tag="winnotice",
            trace=True, pin=True)]
    for be in ("fill", "train"):
        s.append(sc(f"{lc} probe BE {be} 50", lc, be, 1, "probe", lc_args=busy, lc_env=LC_TS,
                    be_env={"GQP_TIMESLICE_US": "50"}, tag="winnotice", trace=True, pin=True))
        for pre in (1, 0):
            for at in (1200, 900, 700, 500):
                env = {"GQP_TIMESLICE_US": "50", "GQP_WIN_PERIOD_US": "5000",
                       "GQP_WIN_OFF_US": "0", "GQP_WIN_LEN_US": str(at + 850)}
                if not pre:
                    env["GQP_NO_PREEMPT"] = "1"
                s.append(sc(f"{lc} probe BE {be} 50 off {at + 850} us, request at {at}"
                            f"{'' if pre else ', no preempt'}", lc, be, 1, "probe",
                            lc_args=busy + ["--phase-us", str(at)], lc_env=LC_TS, be_env=env,
                            tag="winnotice", trace=True, pin=True))
    return s


def set_winshort():
    """Windows that end before the LC's request does: the LC's 100 ms
    timeslice keeps a running request on the GPU when the BE comes back,
    and the BE's enable takes 0.35-0.5 ms to act, so a window may only
    need to cover the request's start. BERT-base beside a be_fill and a
    training BE, ViT-B/16 beside a training BE, each with afterUs 300,
    500 and "auto", under the default policy and alone; the micro LC
    without the wake beside a be_fill (the switch cost the physical limit
    takes)."""
    busy = ["--busy-wait-us", "200"]
    s = [sc("be alone fill", None, "fill", 1, "be_alone", pin=True),
         sc("be alone train", None, "train", 1, "be_alone", pin=True),
         sc("micro alone pinned", "micro", nbe=0, mode="alone", lc_args=busy,
            tag="winshort", pin=True),
         sc("micro gq:nowake 1xfill pinned", "micro", "fill", 1, "gq:nowake",
            lc_args=busy, tag="winshort", pin=True)]
    for lc, be in (("bert_base_graph", "fill"), ("bert_base_graph", "train"),
                   ("vit_b16_graph", "train")):
        model_rows(s, lc, be, ("default", "win300", "win500", "winauto"), "winshort")
    return s


def set_windows2():
    """windows again: the shorter window for ViT-B/16 (request 1.2 ms in,
    2.3 ms off) and two for BERT-base (1.2 ms in, 2.0 ms off; 1.5 in, 2.4
    off), each beside its model alone and the same BE without windows."""
    return windows_set((("vit_b16_graph", 10000, ((1200, 2300),)),
                        ("bert_base_graph", 5000, ((1200, 2000), (1500, 2400)))))


def set_windows():
    """What keeping the BE off the GPU around each request would give a
    CUDA-graph model and cost the BE (the one switch ViT-B/16 and BERT-base
    still pay): rm_probe disables the BE's channels (and preempts it) from
    the start of every window on CLOCK_MONOTONIC, for WIN us, and enables
    them again; the model's requests are due PHASE us into the same
    windows (lc_models --phase-us). LC at 100 ms, BE at 50 us (probe mode:
    no wake), pinned, on time, no CUDA events; beside the same BE without
    windows, and each model alone."""
    return windows_set((("vit_b16_graph", 10000, ((1500, 2600), (1200, 2300))),
                        ("bert_base_graph", 5000, ((1500, 2400),))))


def windows_set(rows):
    """The windows sets' scenarios: for each (LC, period us, ((phase us,
    window us), ...)) the LC alone, beside a training BE, and beside it
    with each window."""
    busy = ["--busy-wait-us", "200", "--no-events"]
    s = [sc("be alone train", None, "train", 1, "be_alone", pin=True)]
    for lc, per, wins in rows:
        s.append(sc(f"{lc} alone pinned", lc, nbe=0, mode="alone", lc_args=busy,
                    tag="windows", trace=True, pin=True))
        s.append(sc(f"{lc} probe BE train 50", lc, "train", 1, "probe", lc_args=busy,
                    lc_env=LC_TS, be_env={"GQP_TIMESLICE_US": "50"}, tag="windows",
                    trace=True, pin=True))
        for phase, win in wins:
            env = {"GQP_TIMESLICE_US": "50", "GQP_WIN_PERIOD_US": str(per),
                   "GQP_WIN_OFF_US": "0", "GQP_WIN_LEN_US": str(win)}
            s.append(sc(f"{lc} probe BE train 50 off {win} us from 0, request at {phase}",
                        lc, "train", 1, "probe", lc_args=busy + ["--phase-us", str(phase)],
                        lc_env=LC_TS, be_env=env, tag="windows", trace=True, pin=True))
    return s


SETS = {"winnotice": set_winnotice, "winbefore": set_winbefore, "winauto3": set_winauto3, "winshort": set_winshort, "winauto": set_winauto, "bewin3be": set_bewin3be, "bewinfill": set_bewinfill, "bewinproof": set_bewinproof, "bewindows2": set_bewindows2, "bewindows": set_bewindows, "windows2": set_windows2, "windows": set_windows, "turngap": set_turngap, "graphsaves": set_graphsaves, "acquire": set_acquire, "latch": set_latch, "lead125": set_lead125, "rotturn": set_rotturn, "rotconfirm": set_rotconfirm, "betotal": set_betotal, "modelbe20": set_modelbe20, "rotperiod": set_rotperiod, "keepin2": set_keepin2, "alonewake2": set_alonewake2, "keepin": set_keepin, "alonewake": set_alonewake, "be20multi": set_be20multi, "targets": set_targets, "exactlead": set_exactlead, "trainhold": set_trainhold, "graphtrain": set_graphtrain, "holdprobe2": set_holdprobe2, "holdprobe": set_holdprobe, "graphhold": set_graphhold, "graphlead": set_graphlead, "graphevents": set_graphevents, "graphbe20": set_graphbe20, "graphpin": set_graphpin, "graphwake": set_graphwake, "wakelag": set_wakelag, "wake": set_wake, "wakehold": set_wakehold, "wakestops": set_wakestops, "waketrace": set_waketrace, "wakepolicy": set_wakepolicy,
        "wakedefault": set_wakedefault, "proof": set_proof, "preempt_mode": set_preempt_mode, "stall": set_stall, "key": set_key,
        "quick": set_quick, "models": set_models, "full": set_full, "switch": set_switch, "puzzle": set_puzzle, "multibe": set_multibe, "rotate": set_rotate,
        "fourbe": set_fourbe, "policies": set_policies}

MODEL_PERIOD_MS = {"resnet50": 5, "vit_b16": 10, "bert_base": 5}


class Runner:
    def __init__(self, a):
        self.a = a
        self.bin = os.path.abspath(a.bin)
        self.build = os.path.abspath(a.build)
        self.out = a.out
        self.jsonl = open(os.path.join(a.out, "suite.jsonl"), "a")
        self.log = open(os.path.join(a.out, "suite.log"), "a")
        self.agent = None
        self.agent_policy = None
        self.tmp = tempfile.mkdtemp(prefix="gq-suite-")
        os.chmod(self.tmp, 0o755)
        self.be_iters = None
        self.children = []

    def say(self, msg):
        line = f"suite: {time.strftime('%H:%M:%S')} {msg}"
        print(line, file=sys.stderr, flush=True)
        print(line, file=self.log, flush=True)

    # --- commands -------------------------------------------------------
    def lc_cmd(self, lc, dur):
        py = [sys.executable, os.path.join(HERE, "lc_models.py")]
        if lc in ("micro", "micro_poisson"):
            c = [os.path.join(self.bin, "lc_micro"), "--period-us", "2000", "--kernel-us", "35",
                 "--duration-s", str(dur), "--warmup-s", "1"]
            return c + (["--arrival", "poisson"] if lc == "micro_poisson" else [])
        m = re.fullmatch(r"(resnet50|vit_b16|bert_base)_(graph|eager)(_poisson)?", lc)
        if not m:
            raise SystemExit(f"suite: unknown LC {lc}")
        return py + ["--model", m.group(1), "--mode", m.group(2), "--period-ms",
                     str(MODEL_PERIOD_MS[m.group(1)]), "--duration-s", str(dur),
                     "--warmup-s", "2"] + (["--arrival", "poisson"] if m.group(3) else [])

    def calibrate_fill(self):
        """be_fill's iteration count, calibrated once with the GPU to itself,
        for every later be_fill: a be_fill that calibrates beside others (or
        while gated) picks far fewer iterations, and its kernels per second
        mean nothing beside the others'. A set without a 'be alone fill' row
        gets it here."""
        try:
            r = subprocess.run([os.path.join(self.bin, "be_fill"), "--duration-s", "1"],
                               capture_output=True, text=True, timeout=60)
            j = json.loads(r.stdout.strip().splitlines()[-1])
            self.be_iters = int(j["iters"])
            self.say(f"be_fill calibrated alone: {self.be_iters} iterations a kernel")
        except (OSError, subprocess.SubprocessError, ValueError, KeyError, IndexError) as e:
            raise SystemExit(f"suite: be_fill calibration failed: {e}")

    def be_cmd(self, be, dur, extra):
        if be == "fill":
            c = [os.path.join(self.bin, "be_fill"), "--duration-s", str(dur)]
            if self.be_iters and "--kernel-ms" not in extra:
                c += ["--iters", str(self.be_iters)]
            return c + list(extra)
        if be == "train":
            return [sys.executable, os.path.join(HERE, "be_train.py"), "--duration-s", str(dur)]
        raise SystemExit(f"suite: unknown BE {be}")

    # --- the node agent -------------------------------------------------
    def gq_env(self):
        d = os.path.join(self.tmp, "gq")
        return {"GPUQOS_SOCKET": os.path.join(d, "agent.sock"),
                "GPUQOS_CTL_SOCKET": os.path.join(d, "ctl.sock"),
                "GPUQOS_PREEMPT_LIB": os.path.join(self.build, "agent/preempt/libgpuqos-preempt.so")}

    def ensure_agent(self, policy, keep_state=False):
        """A node agent with this policy; keep_state: a restart that keeps
        its state directory (and socket folder) as a node would."""
        if self.agent and self.agent_policy == policy and self.agent.poll() is None:
            return True
        self.stop_agent()
        exe = os.path.join(self.build, "agent/gpuqos-agent")
        if not os.access(exe, os.X_OK):
            self.say(f"no agent at {exe} (run tests/gpu/bundle.sh): gq modes skipped")
            return False
        d = os.path.join(self.tmp, "gq")
        if not keep_state:
            shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d, exist_ok=True)
        os.chmod(d, 0o755)
        pol = {"version": 1, "defaultClass": "unmanaged", "trustRunClass": True}
        known = dict(POLICIES, **SET_POLICIES)
        if policy not in known:
            raise SystemExit(f"suite: unknown policy {policy}")
        pol.update(known[policy])
        pfile = os.path.join(d, f"policy-{policy}.json")
        with open(pfile, "w") as f:
            json.dump(pol, f)
        env = dict(os.environ, **self.gq_env(), LD_LIBRARY_PATH=os.path.join(self.build, "lib"))
        alog = open(os.path.join(self.out, f"agent-{policy}.log"), "a")
        self.agent = subprocess.Popen([exe, "--standalone", "--config", pfile, "--state-dir",
                                       os.path.join(d, "state"), "--log-level", "info"],
                                      env=env, stdout=alog, stderr=alog)
        for _ in range(100):
            if os.path.exists(self.gq_env()["GPUQOS_SOCKET"]):
                break
            if self.agent.poll() is not None:
                self.say(f"agent exited with {self.agent.returncode}")
                return False
            time.sleep(0.05)
        self.agent_policy = policy
        self.say(f"agent up, policy {policy}: {json.dumps(pol)}")
        return True

    def stop_agent(self):
        if self.agent and self.agent.poll() is None:
            self.agent.send_signal(signal.SIGTERM)
            try:
                self.agent.wait(5)
            except subprocess.TimeoutExpired:
                self.agent.kill()
                self.agent.wait()
        self.agent = None

    def eager_event(self, ev, mode, tmp, go):
        """("eager", AT_S, FOR_S): an eager ResNet-50 LC started AT_S after
        the window began (under gpuqos run in gq modes), in a folder of its
        own whose start file exists: it measures as soon as it is warm."""
        time.sleep(max(0.0, ev[1] - (time.monotonic() - go)))
        etmp = os.path.join(tmp, "eager")
        os.makedirs(etmp, exist_ok=True)
        open(os.path.join(etmp, "go"), "w").close()
        return self.spawn(self.lc_cmd("resnet50_eager", ev[2]), {}, mode, "lc", etmp, "eager")

    def agent_event(self, ev):
        """Kill or stop the node agent mid-window; returns what was done."""
        time.sleep(ev[1])
        if not self.agent or self.agent.poll() is not None:
            return {"event": ev[0], "done": False}
        if ev[0] == "kill":
            self.agent.kill()
            self.agent.wait()
            self.agent = None  # the next gq run starts a new one
            return {"event": "kill", "at_s": ev[1], "done": True}
        self.agent.send_signal(signal.SIGSTOP)
        time.sleep(ev[2])
        self.agent.send_signal(signal.SIGCONT)
        return {"event": "stop", "at_s": ev[1], "for_s": ev[2], "done": True}

    def activity(self):
        """Every process's launch reading, its wake counts and its window
        schedule, as the agent holds them now (gpuqosctl --json list)."""
        exe = os.path.join(self.build, "agent/cli/gpuqosctl")
        env = dict(os.environ, **self.gq_env(), LD_LIBRARY_PATH=os.path.join(self.build, "lib"))
        keys = ("pid", "class", "launchActivePercent", "launchesPerSecond", "launchBound", "wake",
                "window")
        try:
            j = subprocess.run([exe, "--json", "list"], env=env, capture_output=True, text=True,
                               timeout=10)
            return [{k: p.get(k) for k in keys} for p in json.loads(j.stdout).get("processes", [])]
        except (OSError, ValueError, subprocess.TimeoutExpired):
            return []

    def ctl_trace(self, path, stop):
        """Until stop is set, every 20 ms: each GR TSG's class, applied
        timeslice and gate, and each process's launch reading, one JSON line
        with the wall-clock time (a timeline of what the agent held while
        an event row ran), read from the control socket directly."""
        sock_path = self.gq_env()["GPUQOS_CTL_SOCKET"]
        with open(path, "a") as f:
            while not stop.wait(0.02):
                try:
                    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as c:
                        c.settimeout(2)
                        c.connect(sock_path)
                        c.sendall(b'{"cmd":"list"}\n')
                        buf = b""
                        while True:
                            chunk = c.recv(65536)
                            if not chunk:
                                break
                            buf += chunk
                    j = json.loads(buf)
                except (OSError, ValueError):
                    continue
                # Stamped when the answer came: a stopped agent answers
                # after it resumes, with what it holds then.
                t = time.time()
                tsgs = []
                for x in j.get("tsgs", []):
                    if x.get("engineName") != "GR0":
                        continue
                    g = x.get("gate") or {}
                    tsgs.append([x.get("pid"), (x.get("class") or "?")[:2],
                                 (x.get("timeslice") or {}).get("applied"),
                                 int(bool(g.get("desired"))), int(bool(g.get("applied"))),
                                 g.get("longestMs")])
                procs = [[p.get("pid"), p.get("launchActivePercent"), int(bool(p.get("launchBound")))]
                         for p in j.get("processes", [])]
                f.write(json.dumps({"t": round(t, 3), "tsg": tsgs, "proc": procs},
                                   separators=(",", ":")) + "\n")

    def ctl_list(self):
        exe = os.path.join(self.build, "agent/cli/gpuqosctl")
        env = dict(os.environ, **self.gq_env(), LD_LIBRARY_PATH=os.path.join(self.build, "lib"))
        try:
            r = subprocess.run([exe, "list"], env=env, capture_output=True, text=True, timeout=10)
            j = subprocess.run([exe, "--json", "list"], env=env, capture_output=True, text=True,
                               timeout=10)
            try:
                procs = json.loads(j.stdout).get("processes", [])
                busy = "\n".join(f"pid {p.get('pid')} {p.get('class')}: launches keep it active "
                                 f"{p.get('launchActivePercent')} %, "
                                 f"{p.get('launchesPerSecond')}/s, launch-bound "
                                 f"{p.get('launchBound')}, phase {p.get('phase')}"
                                 for p in procs)
                cnt = json.loads(j.stdout).get("agent", {}).get("counters", {})
                busy += (f"\nturns {cnt.get('turns')}, in an LC's gap {cnt.get('turnsInGap')}, "
                         f"badPhase {cnt.get('badPhase')}")
            except ValueError:
                busy = "gpuqosctl --json list: " + j.stdout[:200]
            return r.stdout + r.stderr + busy + "\n"
        except (OSError, subprocess.TimeoutExpired) as e:
            return f"gpuqosctl list failed: {e}"

    # --- one run --------------------------------------------------------
    def spawn(self, cmd, env_extra, mode, cls, tmp, tag, cpus=None):
        env = dict(os.environ)
        prefix = []
        if mode.startswith("gq:"):
            env.update(self.gq_env())
            prefix = [os.path.join(self.build, "agent/cli/gpuqos"), "run", "--class", cls, "--"]
            # The preempt agent's own settings (rm_probe's GQP_* go unread).
            env.update({k: v for k, v in (env_extra or {}).items() if k.startswith("GPUQOS_")})
        elif mode == "probe" and env_extra:
            env["LD_PRELOAD"] = os.path.join(self.bin, "rm_probe.so")
            env["GQP_ROT_START_FILE"] = os.path.join(tmp, "go")
            env.update(env_extra)
        out = open(os.path.join(tmp, f"{tag}.out"), "w")
        err = open(os.path.join(tmp, f"{tag}.err"), "w")
        p = subprocess.Popen(prefix + cmd + ["--ready-file", os.path.join(tmp, f"{tag}.ready"),
                                             "--start-file", os.path.join(tmp, "go")],
                             env=env, stdout=out, stderr=err,
                             preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None)
        self.children.append(p)
        return p

    def wait_ready(self, procs, tmp, timeout):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if all(os.path.exists(os.path.join(tmp, f"{t}.ready")) for t, _ in procs):
                return True
            if any(p.poll() is not None for _, p in procs):
                return False
            time.sleep(0.05)
        return False

    @staticmethod
    def result(tmp, tag):
        try:
            with open(os.path.join(tmp, f"{tag}.out")) as f:
                lines = [ln for ln in f if ln.startswith("{")]
            return json.loads(lines[-1]) if lines else None
        except (OSError, ValueError):
            return None

    def run(self, s, rep):
        a = self.a
        dur = s.get("duration_s") or a.duration_s
        if s["mode"].startswith("gq:") and not self.ensure_agent(s["mode"][3:]):
            return None
        if s["be"] == "fill" and s["nbe"] and not self.be_iters and \
                not any("--kernel-ms" in x for x in s["be_args"]):
            self.calibrate_fill()
        tmp = tempfile.mkdtemp(dir=self.tmp)
        procs, eager, trace = [], None, None
        pin = lc_cpus() if s.get("pin") else None
        if s.get("pin") and not pin:
            self.say(f"{s['name']}: fewer than four CPUs; not pinned")
        for i in range(s["nbe"]):
            procs.append((f"be{i}", self.spawn(self.be_cmd(s["be"], dur, s["be_args"]),
                                               s["be_env"][i], s["mode"], "be", tmp, f"be{i}",
                                               pin[1] if pin else None)))
        lc_trace = []
        if s.get("trace") and s["lc"]:
            slug = re.sub(r"[^a-z0-9]+", "-", s["name"].lower()).strip("-")
            lc_trace = ["--trace", os.path.join(self.out, f"trace-{slug}-{rep}.txt")]
        if s["lc"]:
            procs.append(("lc", self.spawn(self.lc_cmd(s["lc"], dur) + s["lc_args"] + lc_trace,
                                           s["lc_env"], s["mode"], "lc", tmp, "lc",
                                           pin[0] if pin else None)))
        rec = {"scenario": s["name"], "rep": rep, "lc": s["lc"], "be": s["be"], "nbe": s["nbe"],
               "pids": {t: p.pid for t, p in procs},
               "mode": s["mode"], "lc_args": s["lc_args"], "be_args": s["be_args"],
               "lc_env": s["lc_env"], "be_env": s["be_env"], "tag": s["tag"],
               "pinned": {"lc": sorted(pin[0]), "be": sorted(pin[1])} if pin else None,
               "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        torch = s["be"] == "train" or (s["lc"] and not s["lc"].startswith("micro"))
        ok = self.wait_ready(procs, tmp, 200 if torch else 45)
        if not ok:
            self.say(f"{s['name']}: not every process got ready")
        else:
            if s["mode"].startswith("gq:"):
                time.sleep(1.0)  # the agent's reconcile (200 ms) settles the BEs
                with open(os.path.join(self.out, "gpuqosctl-list.log"), "a") as f:
                    f.write(f"== {s['name']} rep {rep}\n{self.ctl_list()}\n")
            elif s["mode"] == "probe":
                time.sleep(0.7)  # rm_probe applies after a 500 ms settle
            if s.get("event") and s["mode"].startswith("gq:"):
                stop = threading.Event()
                slug = re.sub(r"[^a-z0-9]+", "-", s["name"].lower()).strip("-")
                tpath = os.path.join(self.out, f"ctltrace-{slug}-{rep}.jsonl")
                th = threading.Thread(target=self.ctl_trace, args=(tpath, stop), daemon=True)
                th.start()
                trace = (stop, th)
                rec["ctl_trace"] = os.path.basename(tpath)
            open(os.path.join(tmp, "go"), "w").close()
            go = time.monotonic()
            rec["go_unix"] = round(time.time(), 3)
            if s.get("event") and s["event"][0] == "eager":
                eager = self.eager_event(s["event"], s["mode"], tmp, go)
                rec["event"] = {"event": "eager", "at_s": s["event"][1], "for_s": s["event"][2],
                                "started_s": round(time.monotonic() - go, 3)}
            elif s.get("event"):
                rec["event"] = self.agent_event(s["event"])
            if a.clocks or s["mode"].startswith("gq:"):
                time.sleep(dur / 2)
            if a.clocks:
                rec["clocks_mid"] = gpu_clocks()
            if s["mode"].startswith("gq:"):
                rec["activity_mid"] = self.activity()
                self.say(f"{s['name']}: launches mid-window: " + ", ".join(
                    f"{x['class']} {x['launchActivePercent']} % {x['launchesPerSecond']}/s"
                    f"{' BOUND' if x['launchBound'] else ''}" for x in rec["activity_mid"]))
                for x in rec["activity_mid"]:
                    if x.get("wake"):
                        self.say(f"{s['name']}: pid {x['pid']}'s wakes mid-window, as the agent "
                                 f"holds them: {x['wake']}")
                    if x.get("window"):
                        self.say(f"{s['name']}: pid {x['pid']}'s window mid-window: "
                                 f"{x['window']}")
        deadline = time.monotonic() + dur + 60
        for _, p in procs + ([("eager", eager)] if eager else []):
            try:
                p.wait(max(1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        if trace:
            trace[0].set()
            trace[1].join(10)
        if eager:
            r = self.result(os.path.join(tmp, "eager"), "eager")
            rec["event"]["eager_result"] = {k: r.get(k) for k in ("n", "p50_us", "p99_us", "late",
                                                                  "phases_unix")} \
                if r else None
        rec["lc_result"] = self.result(tmp, "lc") if s["lc"] else None
        rec["be_results"] = [self.result(tmp, f"be{i}") for i in range(s["nbe"])]
        if trace:
            rec["gating"] = gating(os.path.join(self.out, rec["ctl_trace"]), rec)
        probe, timings = [], {}
        for t, _ in procs:
            try:
                with open(os.path.join(tmp, f"{t}.err")) as f:
                    txt = f.read()
                lines = [ln for ln in txt.splitlines() if ln.startswith("rm_probe")]
                probe += [f"{t}: {ln}" for ln in lines if not PROBE_SUMMARY.match(ln)
                          and not PROBE_CTXSW.match(ln)][:20]
                # Context-switch counts (cumulative: the last counts) and the
                # compute preemption modes the RM was asked for, by status.
                cs = [m.group(1) for m in map(PROBE_CTXSW.match, lines) if m]
                if cs:
                    rec.setdefault("ctxsw", {})[t] = cs[-1]
                    # Every second's cumulative saves: saves a second, against
                    # the LC's requests a second, is saves per request.
                    rec.setdefault("ctxsw_saves", {})[t] = [int(c.split()[1]) for c in cs
                                                            if c.startswith("saves ")]
                pm = sorted({f"{m.group(1)}:{m.group(3)}" for m in map(PROBE_PMODE.match, lines) if m})
                if pm:
                    rec.setdefault("preemption_modes", {})[t] = pm
                for ln in lines:  # cumulative: the last one of each kind counts
                    m = PROBE_SUMMARY.match(ln)
                    if m:
                        timings.setdefault(t, {})[m.group(1)] = {
                            "n": int(m.group(2)), "p50_us": int(m.group(3)),
                            "p99_us": int(m.group(4)), "max_us": int(m.group(5))}
                wake = [ln.split(": ", 1)[1] for ln in txt.splitlines()
                        if ln.startswith("gpuqos-preempt") and ": wake: " in ln]
                if wake:
                    rec.setdefault("wake_log", {})[t] = wake[-5:]
                win = [ln.split(": ", 1)[1] for ln in txt.splitlines()
                       if ln.startswith("gpuqos-preempt") and ": windows " in ln]
                if win:
                    rec.setdefault("window_log", {})[t] = win[-5:]
                if not ok or (t == "lc" and not rec["lc_result"]):
                    rec.setdefault("stderr", {})[t] = txt[-2000:]
            except OSError:
                pass
        rec["probe_log"] = probe
        if timings:
            rec["probe_timings"] = timings
        if s["be"] == "fill" and s["mode"] == "be_alone" and not self.be_iters:
            r = rec["be_results"][0] if rec["be_results"] else None
            if r and r.get("iters"):
                self.be_iters = r["iters"]
        self.jsonl.write(json.dumps(rec) + "\n")
        self.jsonl.flush()
        shutil.rmtree(tmp, ignore_errors=True)
        self.children = []
        return rec

    def close(self):
        for p in self.children:
            if p.poll() is None:
                p.kill()
        self.stop_agent()
        shutil.rmtree(self.tmp, ignore_errors=True)


def be_rate(r):
    if not r:
        return None
    return r.get("kernels_per_s", r.get("steps_per_s"))


def derive(recs, switch_override):
    """Ratios against alone, BE kept, switch cost and the physical limit."""
    def key(r):
        # A pinned LC against the same LC pinned alone.
        return (r["lc"], json.dumps(r["lc_args"]) + (" pinned" if r.get("pinned") else ""))

    alone = {}
    for r in recs:
        if r["mode"] == "alone" and r.get("lc_result"):
            alone.setdefault(key(r), []).append(r["lc_result"])
    be_alone = {}
    for r in recs:
        if r["mode"] == "be_alone" and r["nbe"] == 1 and be_rate(r["be_results"][0]):
            be_alone.setdefault(r["be"], []).append(be_rate(r["be_results"][0]))

    def med(v):
        v = sorted(v)
        return v[len(v) // 2] if v else None

    def lc_alone(r, field):
        # The same LC with the same arguments alone, else its plain alone run.
        ref = alone.get(key(r)) or alone.get((r["lc"], "[]"), [])
        return med([x.get(field) for x in ref if x.get(field) is not None])

    def woken(r):
        # The preempt agent started the switch ahead of the request: what
        # the request waits for is no longer the whole switch. The
        # workload's environment decides first, else the policy (the
        # agent's default lead is 100 us).
        env = r.get("lc_env", {}).get("GPUQOS_WAKE_LEAD_US")
        if env is not None:
            return env != "0"
        if not r["mode"].startswith("gq:"):
            return False
        return POLICIES.get(r["mode"][3:], {}).get("wake", {}).get("leadUs", 100) != 0

    switch = switch_override
    if switch is None:
        cand = [r for r in recs if r["lc"] == "micro" and r["mode"].startswith("gq:")
                and r["nbe"] == 1 and r["be"] == "fill" and r.get("lc_result") and not woken(r)]
        cand = cand or [r for r in recs if r["lc"] == "micro" and r["mode"].startswith("gq:")
                        and r["nbe"] == 1 and r.get("lc_result") and not woken(r)]
        cand = cand or [r for r in recs if r["lc"] == "micro" and r["mode"] == "probe"
                        and r["nbe"] == 1 and r["be_env"][0].get("GQP_TIMESLICE_US") == "50"
                        and not r["lc_args"] and r.get("lc_result")]
        # No micro row (the models set alone): the CUDA graphs' own switch
        # beside one all-SM BE; eager LCs are CPU-bound and not used.
        cand = cand or [r for r in recs if r["lc"] and r["lc"].endswith("_graph")
                        and r["mode"].startswith("gq:") and r["nbe"] == 1 and r["be"] == "fill"
                        and r.get("lc_result") and not woken(r)]
        vals = []
        for r in cand:
            base = lc_alone(r, "outside_p50_us")
            if base is not None and r["lc_result"].get("outside_p50_us") is not None:
                vals.append(r["lc_result"]["outside_p50_us"] - base)
        switch = med(vals)
    for r in recs:
        d = {}
        lr = r.get("lc_result")
        if lr and r["mode"] != "alone":
            ap99 = lc_alone(r, "p99_us")
            if ap99:
                d["p99_vs_alone"] = round(lr["p99_us"] / ap99, 2)
            ao = lc_alone(r, "outside_p50_us")
            if ao is not None and lr.get("outside_p50_us") is not None:
                d["switch_us"] = round(lr["outside_p50_us"] - ao, 1)
        rates = [be_rate(x) for x in r["be_results"]]
        base = med(be_alone.get(r["be"], []))
        if r["nbe"] and base and all(x is not None for x in rates):
            d["be_kept"] = round(sum(rates) / base, 3)
            d["be_each"] = [round(x / base, 3) for x in rates]
        if lr and r["nbe"] and switch is not None and lr.get("duration_s"):
            # (A model without CUDA events: the GPU side of its traced
            # requests alone, from the submit call's return to the end.)
            work = (lc_alone(r, "run_p50_us") or lc_alone(r, "gpu_p50_us")
                    or lc_alone(r, "after_call_p50_us"))
            if work:
                rate = lr["n"] / lr["duration_s"]
                limit = 1 - rate * (work + 2 * switch) / 1e6
                d["be_limit"] = round(limit, 3)
                if "be_kept" in d and limit > 0:
                    d["be_vs_limit"] = round(d["be_kept"] / limit, 3)
        r["derived"] = d
    return switch


# ctltrace samples every 20 ms; a hole longer than this is not read across.
SAMPLE_HOLE_S = 0.1


def gating(path, rec):
    """What the agent held while each BE waited, from an event row's
    ctltrace samples (every 20 ms): each BE's longest gated run (its gate
    desired or applied in consecutive samples; n - 1 turns in a rotation of
    n BEs), the agent's own longest period (the last sample with the TSG),
    and for
    every stall of 300 ms or more the share of the samples inside it where
    that BE was gated and the highest launch reading of any LC. A stall
    with the BE schedulable (gated 0 %) beside a busy LC is the LC keeping
    the GPU, not a gate left closed."""
    try:
        with open(path) as f:
            samples = [json.loads(ln) for ln in f if ln.strip()]
    except (OSError, ValueError):
        return None
    def gated(x, pid):
        return any(y[0] == pid and (y[3] or y[4]) for y in x["tsg"])

    out = {"samples": len(samples), "longest_gated_ms": [], "agent_longest_ms": [], "stalls": []}
    for i, be in enumerate(rec["be_results"]):
        pid = rec["pids"].get(f"be{i}")
        longest, since, own, prev = 0.0, None, None, None
        for x in samples:
            # No sample for a while (the agent stopped answering, as while
            # SIGSTOPped): what it held meanwhile is unknown, so a gated
            # run ends at the last sample before the hole.
            if since is not None and prev is not None and x["t"] - prev > SAMPLE_HOLE_S:
                longest, since = max(longest, prev - since), None
            prev = x["t"]
            if gated(x, pid) and since is None:
                since = x["t"]
            elif not gated(x, pid) and since is not None:
                longest, since = max(longest, x["t"] - since), None
            # The agent's own count (agents since 2026-11-25).
            own = next((y[5] for y in x["tsg"] if y[0] == pid and len(y) > 5), own)
        out["longest_gated_ms"].append(round(longest * 1e3))
        out["agent_longest_ms"].append(own)
        stalls = []
        for end, ms in (be or {}).get("long_gaps") or []:
            if be.get("start_unix") is None:
                break
            t1 = be["start_unix"] + end
            t0 = t1 - ms / 1e3
            inside = [x for x in samples if t0 <= x["t"] <= t1]
            lcs = {y[0] for x in inside for y in x["tsg"] if y[1] == "la"}
            busy = [p[1] for x in inside for p in x["proc"] if p[0] in lcs and p[1] is not None]
            stalls.append({"end_s": end, "ms": ms, "samples": len(inside),
                           "gated_pct": round(100 * sum(gated(x, pid) for x in inside) / len(inside))
                           if inside else None,
                           "lc_busy_max": max(busy) if busy else None,
                           "lc_bound": any(p[2] for x in inside for p in x["proc"] if p[0] in lcs)})
        out["stalls"].append(stalls)
    return out


def fmt(v, nd=0):
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.{nd}f}"
    return str(v)


def table(recs, switch):
    rows = ["| scenario | rep | LC p50 µs | p99 µs | p99.9 µs | p99 vs alone | outside p50 µs "
            "| switch µs | late/n | BE kept | BE each | BE limit | BE vs limit |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in recs:
        lr = r.get("lc_result") or {}
        d = r.get("derived", {})
        each = d.get("be_each")
        if not each and r["be_results"] and r["mode"] == "be_alone":
            each = [be_rate(x) for x in r["be_results"]]
        rows.append("| " + " | ".join([
            r["scenario"], str(r["rep"]), fmt(lr.get("p50_us")), fmt(lr.get("p99_us")),
            fmt(lr.get("p999_us")), fmt(d.get("p99_vs_alone"), 2),
            fmt(lr.get("outside_p50_us")), fmt(d.get("switch_us")),
            f"{lr['late']}/{lr['n']}" if "late" in lr else "–",
            fmt(d.get("be_kept"), 2), " ".join(fmt(x, 2) for x in each) if each else "–",
            fmt(d.get("be_limit"), 2), fmt(d.get("be_vs_limit"), 2)]) + " |")
    rows.append(f"\nswitch cost used for the limit: {fmt(switch, 1)} µs")
    def stall(r, i, at, ms):
        g = ((r.get("gating") or {}).get("stalls") or [[]] * (i + 1))[i]
        g = next((x for x in g if x["end_s"] == at), None)
        if not g or g["gated_pct"] is None:
            return f"{ms:.0f}@{at:.1f}"
        return f"{ms:.0f}@{at:.1f} (gated {g['gated_pct']} %, LC {fmt(g['lc_busy_max'])} %" + \
            (" bound" if g["lc_bound"] else "") + ")"

    extra = [f"| {r['scenario']} | {r['rep']} | " + " ".join(
        fmt(x.get("max_gap_ms") if x else None, 1) for x in r["be_results"]) + " | " + (
        " ".join(str(v) for v in r["gating"]["longest_gated_ms"]) + (
            " (agent: " + " ".join(fmt(v) for v in r["gating"]["agent_longest_ms"]) + ")"
            if any(v is not None for v in r["gating"].get("agent_longest_ms", [])) else "")
        if r.get("gating") else "–")
        + " | " + "; ".join(
        f"be{i} " + " ".join(stall(r, i, at, ms) for at, ms in (x or {}).get("long_gaps") or [])
        for i, x in enumerate(r["be_results"]) if (x or {}).get("long_gaps")) + " |"
        for r in recs if r["be"] == "fill" and r["nbe"] >= 1 and r["mode"] != "be_alone"]
    if extra:
        rows += ["\n| scenario | rep | each BE's longest stall, ms | longest gated, ms (agent, "
                 "20 ms samples) | stalls ≥ 300 ms: ms@s into the window (share of it gated, "
                 "highest LC launch reading) |",
                 "| --- | --- | --- | --- | --- |"] + extra
    extra = [f"| {r['scenario']} | {r['rep']} | "
             + "; ".join(f"{t} {' '.join(v)}" for t, v in sorted((r.get("preemption_modes") or {}).items()))
             + " | " + "; ".join(f"{t} {v}" for t, v in sorted((r.get("ctxsw") or {}).items())) + " |"
             for r in recs if r.get("ctxsw") or r.get("preemption_modes")]
    if extra:
        rows += ["\n| scenario | rep | compute preemption asked: mode:status | context switches "
                 "(GET_CTXSW_STATS, last) |", "| --- | --- | --- | --- |"] + extra
    extra = [f"| {r['scenario']} | {r['rep']} | started {r['event'].get('started_s')} s | "
             f"{r['event'].get('eager_result')} |" for r in recs
             if (r.get("event") or {}).get("event") == "eager"]
    if extra:
        rows += ["\n| scenario | rep | eager LC | its latency |", "| --- | --- | --- | --- |"] + extra
    extra = [f"| {r['scenario']} | {r['rep']} | {fmt(lr.get('lag_p50_us'))} | "
             f"{fmt(lr.get('lag_late_pct'), 2)} % |"
             for r in recs for lr in [r.get("lc_result") or {}] if "lag_late_pct" in lr]
    if extra:
        rows += ["\n| scenario | rep | LC submit lag p50 µs | submitted > 60 µs past that |",
                 "| --- | --- | --- | --- |"] + extra
    extra = [f"| {r['scenario']} | {r['rep']} | {fmt(lr.get('gpu_p50_us'))} / {fmt(lr.get('gpu_p99_us'))} | "
             f"{fmt(lr.get('outside_p50_us'))} / {fmt(lr.get('outside_p99_us'))} | "
             f"{fmt(lr.get('submit_call_p50_us'))} / {fmt(lr.get('submit_call_p99_us'))} | "
             f"{fmt(lr.get('after_call_p50_us'))} / {fmt(lr.get('after_call_p99_us'))} | "
             f"{((r.get('wake_log') or {}).get('lc') or ['–'])[-1]} |"
             for r in recs for lr in [r.get("lc_result") or {}] if "submit_call_p50_us" in lr]
    if extra:
        rows += ["\n| scenario | rep | model GPU time p50 / p99 µs | outside p50 / p99 µs | "
                 "submit call p50 / p99 µs | after the call p50 / p99 µs | "
                 "the wake, as the LC's library counted it |",
                 "| --- | --- | --- | --- | --- | --- | --- |"] + extra
    extra = [f"| {r['scenario']} | {r['rep']} | {r['clocks_mid']} |"
             for r in recs if r.get("clocks_mid")]
    if extra:
        rows += ["\n| scenario | rep | mid-window SM MHz, mem MHz, W, P-state, °C, throttle |",
                 "| --- | --- | --- |"] + extra
    extra = []
    for r in recs:
        for t, kinds in sorted((r.get("probe_timings") or {}).items()):
            extra.append(f"| {r['scenario']} | {r['rep']} | {t} | " + " | ".join(
                "{n} / {p50_us} / {p99_us} / {max_us}".format(**kinds[k]) if k in kinds else "–"
                for k in ("disable", "preempt", "enable")) + " |")
    if extra:
        rows += ["\n| scenario | rep | process | disable n / p50 / p99 / max µs | preempt "
                 "| enable |", "| --- | --- | --- | --- | --- | --- |"] + extra
    extra = targets(recs)
    if extra:
        rows += ["\n| target | scenario | rep | value | met |", "| --- | --- | --- | --- | --- |"] + [
            f"| {t} | {n} | {rep} | {v} | {'yes' if ok else 'no'} |" for t, n, rep, v, ok in extra]
    return "\n".join(rows)


# What gpuqos is held to (tests/gpu/README.md, "Targets"), by the rows of
# a run under gpuqos (gq: modes).
MICRO_P99_US = {1: 250, 3: 300}
GRAPH_P99_X = {1: 1.05, 3: 1.10}
BE_SHARE_SPREAD = 0.10
BE_VS_LIMIT_MIN = 0.97


def targets(recs):
    """(target, scenario, rep, value, met) for every gq row a target is
    about: the micro LC's p99 with one and three BEs, a CUDA graph's p99
    against the same LC alone, several BEs' total against one BE beside
    the same LC under the same policy and their shares within 10 % of each
    other, one BE against its physical limit. Rows without the numbers a
    target needs are left out."""
    def key(r):
        return (r["lc"], r["be"], r["mode"], json.dumps(r["lc_args"]), bool(r.get("pinned")))

    def bes(n):
        return f"{n} BE" + ("s" if n > 1 else "")

    one_be = {}
    for r in recs:
        d = r.get("derived") or {}
        if r["mode"].startswith("gq:") and r["nbe"] == 1 and d.get("be_kept") is not None:
            one_be.setdefault(key(r), []).append(d["be_kept"])
    out = []
    for r in recs:
        if not r["mode"].startswith("gq:") or not r["lc"]:
            continue
        lr, d, n = r.get("lc_result") or {}, r.get("derived") or {}, r["nbe"]
        name, rep = r["scenario"], r["rep"]
        if r["lc"] == "micro" and n in MICRO_P99_US and lr.get("p99_us") is not None:
            out.append((f"micro LC p99 ≤ {MICRO_P99_US[n]} µs with {bes(n)}", name, rep,
                        f"{lr['p99_us']:.0f} µs", lr["p99_us"] <= MICRO_P99_US[n]))
        if r["lc"].endswith("_graph") and n in GRAPH_P99_X and d.get("p99_vs_alone") is not None:
            out.append((f"CUDA graph p99 ≤ {GRAPH_P99_X[n]:.2f}× alone with {bes(n)}", name, rep,
                        f"{d['p99_vs_alone']:.2f}×", d["p99_vs_alone"] <= GRAPH_P99_X[n]))
        each = d.get("be_each") or []
        if n >= 2 and len(each) == n and min(each) > 0:
            spread = max(each) / min(each) - 1
            out.append((f"{n} BEs' shares within {BE_SHARE_SPREAD * 100:.0f} % of each other", name,
                        rep, f"{spread * 100:.1f} % apart", spread <= BE_SHARE_SPREAD))
            base = sorted(one_be.get(key(r), []))
            if base and d.get("be_kept") is not None:
                ref = base[len(base) // 2]
                out.append((f"{n} BEs' total ≥ one BE beside the same LC", name, rep,
                            f"{d['be_kept']:.2f} vs {ref:.2f}", d["be_kept"] >= ref))
        if n == 1 and d.get("be_vs_limit") is not None:
            out.append((f"one BE ≥ {BE_VS_LIMIT_MIN * 100:.0f} % of its physical limit", name, rep,
                        f"{d['be_vs_limit']:.2f}", d["be_vs_limit"] >= BE_VS_LIMIT_MIN))
    return out


def gpu_clocks():
    """SM and memory clocks, power and P-state now (one nvidia-smi query)."""
    try:
        q = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,clocks.mem,power.draw,pstate,"
                            "temperature.gpu,clocks_throttle_reasons.active",
                            "--format=csv,noheader,nounits"],
                           capture_output=True, text=True, timeout=10)
        return q.stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return None


def environment():
    env = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    try:
        q = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                            "--format=csv,noheader"], capture_output=True, text=True, timeout=20)
        env["gpu"] = q.stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        env["gpu"] = "unknown"
    try:
        q = subprocess.run(["nvcc", "--version"], capture_output=True, text=True, timeout=20)
        env["nvcc"] = q.stdout.strip().splitlines()[-1]
    except (OSError, subprocess.TimeoutExpired, IndexError):
        env["nvcc"] = "unknown"
    env["kernel"] = os.uname().release
    return env


def is_baseline(s):
    return s["mode"] in ("be_alone", "alone")


def select(scen, only):
    """The scenarios whose name matches ONLY and the baselines they are
    compared with: the same LC alone (same arguments, or none), one BE of each
    kind alone and the same number of BEs of that kind alone. Set order is
    kept (the first one-BE `fill` baseline calibrates every later be_fill)."""
    picked = [s for s in scen if not is_baseline(s) and re.search(only, s["name"])]
    lcs = {(s["lc"], json.dumps(s["lc_args"])) for s in picked if s["lc"]}
    bes = {(s["be"], n) for s in picked if s["nbe"] for n in (1, s["nbe"])}

    def needed(s):
        if s["mode"] == "alone":
            return (s["lc"], json.dumps(s["lc_args"])) in lcs or (
                not s["lc_args"] and any(lc == s["lc"] for lc, _ in lcs))
        if s["mode"] == "be_alone":
            return (s["be"], s["nbe"]) in bes or re.search(only, s["name"]) is not None
        return any(s is p for p in picked)

    return [s for s in scen if needed(s)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", default="quick", help="comma list of " + ", ".join(SETS))
    ap.add_argument("--out")
    ap.add_argument("--bin", default=os.path.join(HERE, "bin"))
    ap.add_argument("--build", default=os.path.join(ROOT, "build-gpu"))
    ap.add_argument("--duration-s", type=float, default=3.0)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--only", help="run only scenarios whose name matches this regex")
    ap.add_argument("--max-s", type=float, default=1e9,
                    help="start no new scenario after this many seconds")
    ap.add_argument("--switch-us", type=float)
    ap.add_argument("--clocks", action="store_true",
                    help="record SM/memory clocks, power and P-state mid-window (nvidia-smi)")
    ap.add_argument("--list", action="store_true", help="print the scenarios and exit")
    ap.add_argument("--report", nargs="+", metavar="JSONL",
                    help="print the table of earlier runs' suite.jsonl files and exit")
    a = ap.parse_args()
    if a.report:
        recs = []
        for path in a.report:
            with open(path) as f:
                recs += [json.loads(ln) for ln in f if ln.strip()]
        print(table(recs, derive(recs, a.switch_us)))
        return 0
    if a.duration_s <= 0 or a.repeat < 1:
        ap.error("bad --duration-s or --repeat")
    scen, seen = [], set()
    for name in a.sets.split(","):
        if name not in SETS:
            ap.error(f"unknown set {name}")
        for s in SETS[name]():
            k = json.dumps(s, sort_keys=True)
            if k not in seen:
                seen.add(k)
                scen.append(s)
    if a.only:
        scen = select(scen, a.only)
    if a.list:
        for s in scen:
            print(s["name"])
        return 0
    if not a.out:
        ap.error("--out is required")
    os.makedirs(a.out, exist_ok=True)
    env = environment()
    runner = Runner(a)
    runner.say(f"{len(scen)} scenarios x {a.repeat}, {a.duration_s} s each; {env}")
    t0 = time.monotonic()
    recs = []
    try:
        for s in scen:
            # Baselines run once; everything else --repeat times.
            reps = 1 if s["mode"] in ("be_alone",) and s["nbe"] == 1 else a.repeat
            for rep in range(reps):
                if time.monotonic() - t0 > a.max_s:
                    runner.say("time budget spent: stopping")
                    raise StopIteration
                runner.say(f"{s['name']} (rep {rep})")
                r = runner.run(s, rep)
                if r:
                    recs.append(r)
    except StopIteration:
        pass
    except KeyboardInterrupt:
        runner.say("interrupted")
    finally:
        runner.close()
    switch = derive(recs, a.switch_us)
    with open(os.path.join(a.out, "suite.json"), "w") as f:
        json.dump({"env": env, "switch_us": switch, "runs": recs}, f, indent=1)
    runner.say(f"done in {time.monotonic() - t0:.0f} s")
    print(f"\n{env}\n")
    print(table(recs, switch))
    return 0


if __name__ == "__main__":
    sys.exit(main())
