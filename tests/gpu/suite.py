#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""suite.py - the gpuqos benchmark suite: one command on any NVIDIA GPU.

    PYTHONPATH=tests/lib python3 tests/gpu/suite.py --sets proof --out DIR
        [--duration-s 3] [--repeat 1] [--only REGEX] [--max-s 540] [--list]
    python3 tests/gpu/suite.py --report DIR/suite.jsonl [--switch-us N]
    python3 tests/gpu/suite.py --sets soak --out DIR -- --minutes 6

Runs scenarios (an LC workload, 0-4 BE processes, a mode), prints a table and
writes DIR/suite.json (every record and the derived figures) and
DIR/suite.jsonl (one line per run, as it happens). The named suites
(tests/gpu/README.md, "The suites", has what each runs and how long):

  proof     the rows the default policy is judged by: micro LC and ResNet-50
            graph beside 1 and 3 BEs of both kinds, the driver defaults and
            the floor, the agent killed and stopped mid-rotation, eager
            ResNet-50 with and without the launch-bound rule, ViT and BERT
  quick     micro LC and ResNet-50 graph beside 1 and 3 all-SM BEs and a
            training BE: alone, driver defaults, the default policy
  models    ResNet-50, ViT-B/16 and BERT-base graphs (fixed and Poisson
            arrivals) and eager ResNet-50 beside both BE kinds
  multibe   several BEs at once (rm_probe.so): timeslices kept, one short
            BE, interleave levels
  policies  one BE: policies default, be20, interleave
  fourbe    four all-SM BEs: defaults, policies default / leave / floor200,
            rotation every 100 ms (rm_probe.so)
  stall     an eager LC arriving beside a micro LC and three rotating BEs
  targets   the issue's targets under the default policy, pinned, on time
  net       the LC as a server over loopback (net_lc_server.py, net_load.py:
            open loop, fixed and Poisson arrivals), ResNet-50 and an LLM
            decode loop beside both BE kinds; ViT-B/16 and BERT-base
  soak      soak.py: mixed load, eager LCs coming and going, agent restarts
  first     first_start.py: a fresh machine's first runs, one part of
            gpuqos added per row

--only REGEX keeps the matching scenarios and the baselines they are
compared with (the same LC alone, the BEs alone). soak and first run alone,
with --bin, --build and DIR/<suite> as their --out; what follows `--` is
theirs.

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
import shlex
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

# The policies the suites' gq:<policy> rows run (over the node agent's
# defaults; the experiments' own are with them in git, see SETS).
POLICIES = {
    # The example policy's values (deploy/gpuqos-policy.example.json).
    "default": {},
    "be20": {"timeslices": {"beUs": 20}},
    "leave": {"severalBe": "leave"},
    "floor200": {"timeslices": {"severalBeUs": 200}, "allowUnsafeSeveralBe": True},
    "interleave": {"interleave": {"lc": "high", "be": "low"}},
    "floor": {"severalBe": "floor"},
    "norule": {"busyLcPercent": 0},
    "lc10ms": {"timeslices": {"lcUs": 10000}},
    # Every LC launch-bound (the micro LC reads 10 %): the whole runlist at
    # the driver's values all the time, with every preempt agent present.
    "allbound": {"busyLcPercent": 1},
    # No wake (docs/policy.md, "Waking a periodic LC"): the switch each
    # request pays, for the BE's physical limit.
    "nowake": {"wake": {"leadUs": 0}},
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
       be_args=(), tag="", event=None, duration_s=None, trace=False, pin=False, run_args=(),
       reps=None):
    """One scenario. be_env: a dict for every BE or a list, one per BE.
    run_args (gq modes): the LC's own `gpuqos run` options, before its
    `--` (["--windows", "auto"]: the windows a pod asks for).
    event (gq modes): ("kill", AT_S) sends the node agent SIGKILL AT_S into
    the window; ("stop", AT_S, FOR_S) stops it (SIGSTOP) for FOR_S seconds;
    ("eager", AT_S, FOR_S) starts an eager ResNet-50 LC AT_S into the window
    that measures FOR_S seconds once built and warm (any mode).
    duration_s: this scenario's window instead of --duration-s.
    reps: at most this many of --repeat's reps (a contrast already known
    well, kept in the run as a baseline)
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
            "trace": trace, "pin": pin, "run_args": list(run_args), "reps": reps}


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


def set_podwindows():
    """Windows a pod asks for (`gpuqos run --windows auto`, as the
    gpuqos.io/windows annotation) against the default policy, for each
    CUDA-graph model beside one training BE: the LC's ratio to its solo p99
    and the BE's share, the trade-off an operator chooses by. The BE alone
    first, then per model: alone, gpuqos, gpuqos with windows."""
    s = [sc("be alone train", None, "train", 1, "be_alone")]
    for lc in ("vit_b16_graph", "bert_base_graph", "resnet50_graph"):
        s.append(sc(f"{lc} alone", lc, nbe=0, mode="alone"))
        s.append(sc(f"{lc} gq:default 1xtrain", lc, "train", 1, "gq:default"))
        s.append(sc(f"{lc} gq:default 1xtrain podwin", lc, "train", 1, "gq:default",
                    run_args=["--windows", "auto"], lc_env={"GPUQOS_LOG": "info"}))
    return s


def set_tail():
    """The LC's-tail targets as the issue judges them, each row beside its
    baselines (run with --repeat 3 --interleave, so that every rep of every
    row runs close in time to the others'): the micro LC beside one and
    four be_fill (defaults, gpuqos; one BE also with the wake rule the
    preempt library at BUILD/old/ has, where one is there: the same
    machine's A/B; and submitting on time, traced: what the wake does
    where the host does not make the LC late), the eager ResNet-50 alone, alone under gpuqos run
    (what the preempt library costs it) and beside a training BE, and the
    three CUDA-graph models beside a training BE with and without the
    windows a pod asks for."""
    old = {"GPUQOS_PREEMPT_LIB": "{build}/old/libgpuqos-preempt.so"}
    s = [sc("be alone fill", None, "fill", 1, "be_alone"),
         sc("be alone 4xfill", None, "fill", 4, "be_alone"),
         sc("be alone train", None, "train", 1, "be_alone"),
         sc("micro alone", "micro", nbe=0, mode="alone")]
    s.append(sc("micro defaults 1xfill", "micro", "fill", 1, "defaults"))
    s.append(sc("micro gq:default 1xfill", "micro", "fill", 1, "gq:default",
                lc_env={"GPUQOS_LOG": "info"}, trace=True))
    s.append(sc("micro gq:default 1xfill formerwake", "micro", "fill", 1, "gq:default",
                lc_env=dict(old, GPUQOS_LOG="info"), tag="formerwake", trace=True))
    # Submitting on time (busy-waiting its last 200 us): what the wake
    # does where the host does not make the LC late.
    s.append(sc("micro gq:default 1xfill busy200", "micro", "fill", 1, "gq:default",
                lc_args=["--busy-wait-us", "200"], lc_env={"GPUQOS_LOG": "info"}, trace=True))
    for mode in ("defaults", "gq:default"):
        s.append(sc(f"micro {mode} 4xfill", "micro", "fill", 4, mode))
    s += [sc("resnet50_eager alone", "resnet50_eager", nbe=0, mode="alone"),
          sc("resnet50_eager gq:default alone", "resnet50_eager", nbe=0, mode="gq:default")]
    for mode in ("defaults", "gq:default"):
        s.append(sc(f"resnet50_eager {mode} 1xtrain", "resnet50_eager", "train", 1, mode))
    for lc in ("vit_b16_graph", "bert_base_graph", "resnet50_graph"):
        s.append(sc(f"{lc} alone", lc, nbe=0, mode="alone"))
        # The defaults' 3-4x is known well: one rep, as the baseline.
        s.append(sc(f"{lc} defaults 1xtrain", lc, "train", 1, "defaults", reps=1))
        s.append(sc(f"{lc} gq:default 1xtrain", lc, "train", 1, "gq:default",
                    lc_env={"GPUQOS_LOG": "info"}, trace=True))
        s.append(sc(f"{lc} gq:default 1xtrain podwin", lc, "train", 1, "gq:default",
                    run_args=["--windows", "auto"], lc_env={"GPUQOS_LOG": "info"}))
    return s


def set_net():
    """The LC as a networked server (net_lc_server.py under the load of
    net_load.py, what a client sees: send to last byte, and TTFT / TPOT
    for the decoder): ResNet-50 and the LLM decode loop, fixed and Poisson
    arrivals, alone, beside each BE kind at the driver defaults and under
    the default policy, and the Poisson ones with the request hint
    (GPUQOS_BENCH_HINT_US); ViT-B/16 and BERT-base alone and under the
    default policy beside a training BE."""
    s = [sc("be alone fill", None, "fill", 1, "be_alone"),
         sc("be alone train", None, "train", 1, "be_alone")]
    for lc in ("net_resnet50", "net_resnet50_poisson", "net_llm", "net_llm_poisson"):
        s.append(sc(f"{lc} alone", lc, nbe=0, mode="alone"))
        for be in ("fill", "train"):
            for mode in ("gq:default", "defaults"):
                s.append(sc(f"{lc} {mode} 1x{be}", lc, be, 1, mode))
    # The request hint (docs/policy.md, "A request that says it comes"): the
    # server calls gpuqos_request_hint(0) as each request is received.
    for lc in ("net_resnet50_poisson", "net_llm_poisson"):
        s.append(sc(f"{lc} gq:default 1xtrain hint", lc, "train", 1, "gq:default",
                    lc_env={"GPUQOS_BENCH_HINT_US": "0"}))
    for lc in ("net_vit_b16", "net_bert_base"):
        s.append(sc(f"{lc} alone", lc, nbe=0, mode="alone"))
        s.append(sc(f"{lc} gq:default 1xtrain", lc, "train", 1, "gq:default"))
    return s


# The named suites (tests/gpu/README.md, "The suites"). The one-off
# experiments that were sets here are listed, with the commit that last
# had them, in docs/perf-log/experiments.md.
SETS = {"proof": set_proof, "quick": set_quick, "models": set_models, "multibe": set_multibe,
        "policies": set_policies, "fourbe": set_fourbe, "stall": set_stall,
        "targets": set_targets, "podwindows": set_podwindows, "tail": set_tail,
        "net": set_net}
# Suites that are programs of their own: run with this suite's --bin,
# --build and --out (a folder of its own under it), and whatever follows
# `--` on the command line.
SCRIPTS = {"soak": "soak.py", "first": "first_start.py"}

MODEL_PERIOD_MS = {"resnet50": 5, "vit_b16": 10, "bert_base": 5}
# A request of the LLM decode loop: a 16-token prompt and 32 tokens.
NET_PERIOD_MS = dict(MODEL_PERIOD_MS, llm=100)


def net_cmd(lc, dur):
    """net_load.py for a net_<model>[_poisson] LC: it starts the server
    (its child: under `gpuqos run` both are the LC) and is the process
    the suite waits for."""
    m = re.fullmatch(r"net_(resnet50|vit_b16|bert_base|llm)(_poisson)?", lc)
    if not m:
        raise SystemExit(f"suite: unknown LC {lc}")
    server = shlex.join([sys.executable, os.path.join(HERE, "net_lc_server.py"), "--model",
                         m.group(1)])
    return [sys.executable, os.path.join(HERE, "net_load.py"), "--server", server,
            "--period-ms", str(NET_PERIOD_MS[m.group(1)]), "--duration-s", str(dur),
            "--warmup-s", "2"] + (["--arrival", "poisson"] if m.group(2) else [])


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
        if lc.startswith("net_"):
            return net_cmd(lc, dur)
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
        if policy not in POLICIES:
            raise SystemExit(f"suite: unknown policy {policy}")
        pol.update(POLICIES[policy])
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
    def spawn(self, cmd, env_extra, mode, cls, tmp, tag, cpus=None, run_args=()):
        env = dict(os.environ)
        prefix = []
        if mode.startswith("gq:"):
            env.update(self.gq_env())
            prefix = ([os.path.join(self.build, "agent/cli/gpuqos"), "run", "--class", cls]
                      + list(run_args) + ["--"])
            # The preempt agent's own settings (rm_probe's GQP_* go unread);
            # "{build}" is the --build folder.
            env.update({k: v.replace("{build}", self.build)
                        for k, v in (env_extra or {}).items() if k.startswith("GPUQOS_")})
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
                                           pin[0] if pin else None, s.get("run_args", ()))))
        rec = {"scenario": s["name"], "rep": rep, "lc": s["lc"], "be": s["be"], "nbe": s["nbe"],
               "pids": {t: p.pid for t, p in procs},
               "mode": s["mode"], "lc_args": s["lc_args"], "be_args": s["be_args"],
               "lc_env": s["lc_env"], "be_env": s["be_env"], "tag": s["tag"],
               "run_args": s.get("run_args", []),
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
            amax = lc_alone(r, "max_us")
            if amax and r["lc"].startswith("net_"):
                d["max_vs_alone"] = round(lr["max_us"] / amax, 2)
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
    rows = ["| scenario | rep | LC p50 µs | p99 µs | p99.9 µs | max µs | p99 vs alone "
            "| outside p50 µs | switch µs | late/n | BE kept | BE each | BE limit | BE vs limit |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in recs:
        lr = r.get("lc_result") or {}
        d = r.get("derived", {})
        each = d.get("be_each")
        if not each and r["be_results"] and r["mode"] == "be_alone":
            each = [be_rate(x) for x in r["be_results"]]
        rows.append("| " + " | ".join([
            r["scenario"], str(r["rep"]), fmt(lr.get("p50_us")), fmt(lr.get("p99_us")),
            fmt(lr.get("p999_us")), fmt(lr.get("max_us")), fmt(d.get("p99_vs_alone"), 2),
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
    extra = [f"| {r['scenario']} | {r['rep']} | {fmt(r.get('derived', {}).get('max_vs_alone'), 2)} | "
             f"{fmt(lr.get('ttft_p50_us'))} / "
             f"{fmt(lr.get('ttft_p99_us'))} / {fmt(lr.get('ttft_max_us'))} | "
             f"{fmt(lr.get('tpot_p50_us'))} / {fmt(lr.get('tpot_p99_us'))} / "
             f"{fmt(lr.get('tpot_max_us'))} | {lr.get('dropped')} / {lr.get('scheduled')} | "
             f"{lr.get('errors')} |"
             for r in recs for lr in [r.get("lc_result") or {}] if "scheduled" in lr]
    if extra:
        rows += ["\n| scenario | rep | client max vs alone | client TTFT p50 / p99 / max µs "
                 "| TPOT p50 / p99 / max µs | dropped / scheduled | bad replies |",
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


def run_script(name, a, extra):
    """A suite that is a program of its own (SCRIPTS): its command, or its
    exit status once run."""
    cmd = [sys.executable, os.path.join(HERE, SCRIPTS[name]), "--bin", a.bin, "--build", a.build,
           "--out", os.path.join(a.out or "OUT", name)] + extra
    if a.list:
        print(" ".join(cmd))
        return 0
    os.makedirs(a.out, exist_ok=True)
    return subprocess.run(cmd).returncode


def main():
    # What follows `--` goes to a SCRIPTS suite (soak.py, first_start.py).
    argv = sys.argv[1:]
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", default="quick",
                    help="comma list of " + ", ".join(list(SETS) + list(SCRIPTS)))
    ap.add_argument("--out")
    ap.add_argument("--bin", default=os.path.join(HERE, "bin"))
    ap.add_argument("--build", default=os.path.join(ROOT, "build-gpu"))
    ap.add_argument("--duration-s", type=float, default=3.0)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--interleave", action="store_true",
                    help="run rep 0 of every scenario, then rep 1, ..., every other round "
                         "backwards (baselines once, first)")
    ap.add_argument("--only", help="run only scenarios whose name matches this regex")
    ap.add_argument("--max-s", type=float, default=1e9,
                    help="start no new scenario after this many seconds")
    ap.add_argument("--switch-us", type=float)
    ap.add_argument("--clocks", action="store_true",
                    help="record SM/memory clocks, power and P-state mid-window (nvidia-smi)")
    ap.add_argument("--list", action="store_true", help="print the scenarios and exit")
    ap.add_argument("--report", nargs="+", metavar="JSONL",
                    help="print the table of earlier runs' suite.jsonl files and exit")
    a = ap.parse_args(argv)
    if a.report:
        recs = []
        for path in a.report:
            with open(path) as f:
                recs += [json.loads(ln) for ln in f if ln.strip()]
        print(table(recs, derive(recs, a.switch_us)))
        return 0
    if a.duration_s <= 0 or a.repeat < 1:
        ap.error("bad --duration-s or --repeat")
    names = a.sets.split(",")
    if any(n in SCRIPTS for n in names):
        if len(names) > 1:
            ap.error("soak and first run alone: one --sets each")
        if not a.out and not a.list:
            ap.error("--out is required")
        return run_script(names[0], a, extra)
    if extra:
        ap.error("arguments after -- are for " + " and ".join(SCRIPTS) + " only")
    scen, seen = [], set()
    for name in names:
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
    # Baselines run once; everything else --repeat times, each scenario's
    # reps together or (--interleave) in rounds.
    order = [(s, rep) for s in scen
             for rep in range(1 if s["mode"] == "be_alone" and s["nbe"] == 1
                              else min(a.repeat, s.get("reps") or a.repeat))]
    if a.interleave:
        # Every other round backwards (A B, B A, A B): a drift of the host
        # over the run does not favour the rows that come first.
        pos = {id(s): i for i, s in enumerate(scen)}
        order.sort(key=lambda x: (x[1], pos[id(x[0])] * (-1 if x[1] % 2 else 1)))
    try:
        for s, rep in order:
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
