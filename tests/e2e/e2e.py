#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""e2e.py - end-to-end tests of a gpuqos node without a GPU.

Real parts only: the FUSE GPU simulator stands in for /dev/nvidiactl, the
real node agent (standalone), the real preempt agent injected by
`gpuqos run`, a libcuda-like workload (fakecuda) and gpuqosctl. Every
assertion about GPU settings reads the simulator's own state or call log,
not what the agent believes.

Usage: e2e.py --build BUILD SCENARIO      (exit 77 = skipped, with a reason)

The bpf_* scenarios run the agent with its eBPF tracker (--bpf on, a pin
directory of their own); the others with --bpf off, or with the tracker too
when E2E_BPF=on is in the environment. Not all pass that way: liar
expects the read-back of a tracker-off agent (and leaves its simulator
behind when it fails), and classes expects the LC's own process to make
the first SET, where the tracker lets the direct path come first (about
one run in five); the bpf_* scenarios are the tracker's tests.
"""
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

# The test library (tests/lib, PYTHONPATH from ctest): the node harness is
# gpuqos_test.node. Fail and expect are its Failure and check under the
# names these scenarios were written with.
from gpuqos_test import Failure as Fail
from gpuqos_test import check as expect
from gpuqos_test import wait_for
from gpuqos_test.gq_proto import TSG_F_GATED, TSG_F_LEASED
from gpuqos_test.node import (EAGER, Node, agent_tsgs, copy_timeslices, gr_timeslice, h, proc_row,
                              run_scenario, sim_client_of_pid, sim_tsgs_by_client)


# --------------------------------------------------------------------------
# Scenarios
# --------------------------------------------------------------------------


def t_classes(node):
    """LC and BE get their settings; the LC's GR TSG is created at the LC
    value (libcuda's own SET 2048 rewritten); BE restored when LC leaves."""
    node.start_agent()
    be = node.workload("be", ["--hold", "30"])
    wait_for(lambda: len(agent_tsgs(node, be.pid)) == 4, what="BE's 4 TSGs listed")
    # Alone, the BE keeps libcuda's values.
    expect(gr_timeslice(node, be.pid) == [2048], "BE alone keeps 2048: %r" % gr_timeslice(node, be.pid))
    node.sim_control("reset-log")
    lc = node.workload("lc", ["--hold", "30"])
    wait_for(lambda: gr_timeslice(node, be.pid) == [50], what="BE GR TSG shortened to 50 us in the simulator")
    wait_for(lambda: gr_timeslice(node, lc.pid) == [100000], what="LC GR TSG at 100000 us in the simulator")
    expect(copy_timeslices(node, be.pid) == [1024] * 3, "copy TSGs untouched")
    # The LC's copy TSGs come after its GR TSG: wait for them to exist.
    wait_for(lambda: copy_timeslices(node, lc.pid) == [1024] * 3, what="LC copy TSGs untouched")
    # No window: every SET_TIMESLICE the RM saw on the LC's GR TSG carried
    # the LC value, including the one libcuda issued right after creating it.
    lc_clients = set(sim_client_of_pid(node, lc.pid))
    gr = [(h(t["client"]), h(t["handle"])) for c in lc_clients for t in sim_tsgs_by_client(node)[c]
          if t["engineType"] == 1]
    sets = [r for r in node.sim_log()
            if r.get("cmd") == "0xa06c0103" and (h(r.get("client", "0")), h(r.get("object", "0"))) in gr]
    expect(sets and all(r["params"]["timesliceUs"] == 100000 for r in sets),
           "LC GR SET_TIMESLICE values seen by the RM: %r" % [r["params"] for r in sets])
    expect(sets[0]["pid"] == lc.pid, "the first SET came from libcuda's own call in the LC process")
    wait_for(lambda: all(t["state"] in ("converged", "unmanaged") for t in agent_tsgs(node)),
             what="agent reports converged")
    rows = {(t["pid"], t["engine"]): t for t in agent_tsgs(node)}
    expect(rows[(be.pid, 1)]["timeslice"]["applied"] == 50, "agent view of BE applied")
    expect(rows[(lc.pid, 1)]["timeslice"]["baseline"] == 2048, "LC baseline is libcuda's 2048")
    lc.kill()
    lc.wait()
    wait_for(lambda: gr_timeslice(node, be.pid) == [2048], what="BE restored to 2048 after LC left")
    wait_for(lambda: agent_tsgs(node, lc.pid) == [], what="LC's TSGs dropped from the table")


def t_restart(node):
    """The agent restarts while workloads run: same table, nothing lost,
    no control re-issued for TSGs that were already right."""
    node.start_agent()
    be = node.workload("be", ["--hold", "40", "--contexts", "2"])
    lc = node.workload("lc", ["--hold", "40"])
    # Two BE contexts of one process are two BE TSGs on one runlist: turns
    # are per process, so they do not rotate but sit at the several-BE
    # floor, both schedulable.
    wait_for(lambda: gr_timeslice(node, be.pid) == [1000, 1000] and gr_timeslice(node, lc.pid) == [100000],
             what="settings applied")
    # Every claim reported and read back (applied known) before the table
    # is taken: the settings above can converge before the last copy TSG
    # is reported.
    def table():
        ts = agent_tsgs(node)
        known = len(ts) == 12 and all(t["timeslice"]["applied"] is not None for t in ts)
        return known and sorted((t["pid"], t["tsg"], t["timeslice"]["applied"]) for t in ts)

    before = wait_for(table, what="all 12 TSGs with their timeslice known")
    expect(len(before) == 12, "12 TSGs before restart, got %d" % len(before))
    node.ctl("set-class", str(be.pid), "be")
    node.stop_agent(signal.SIGKILL)
    node.sim_control("reset-log")
    node.start_agent()
    wait_for(lambda: len(agent_tsgs(node)) == 12, what="all 12 TSGs re-reported")
    wait_for(lambda: all(t["state"] in ("converged", "unmanaged") for t in agent_tsgs(node)), what="converged")
    after = sorted((t["pid"], t["tsg"], t["timeslice"]["applied"]) for t in agent_tsgs(node))
    expect(before == after, "table differs after restart:\n%r\n%r" % (before, after))
    # Nothing rotated, so no lease ended with the agent: nothing needed a
    # SET after the restart.
    sets = [r for r in node.sim_log() if r.get("cmd") == "0xa06c0103"]
    expect(not sets, "no TSG set after restart, saw %r" % sets)
    procs = {p["pid"]: p for p in node.ctl("list")["processes"]}
    expect(procs.get(be.pid, {}).get("classSource") == "override", "override survived restart: %r" % procs.get(be.pid))
    expect(gr_timeslice(node, be.pid) == [1000, 1000], "simulator unchanged")


def run_plain(node, args, inject, extra_env=None):
    p = subprocess.run(
        ([node.bin("agent/cli/gpuqos"), "run", "--class", "be", "--"] if inject else []) +
        [node.bin("tests/e2e/e2e-fakecuda"), "--dev", node.dev] + args,
        env=dict(node.env, **(extra_env or {})), capture_output=True, timeout=60)
    return p.returncode, p.stdout


def t_failopen(node):
    """No agent, a garbage-speaking agent, controls refused: the workload's
    output and exit status are exactly those of a run without gpuqos."""
    args = ["--contexts", "2", "--print-state"]
    ref = run_plain(node, args, inject=False)
    expect(ref[0] == 0, "reference run failed")

    def same(tag, res):
        expect(res[0] == ref[0], "%s: exit %d != %d" % (tag, res[0], ref[0]))
        # Handles are generated per run; compare the shape of the output.
        a = json.loads(res[1])
        b = json.loads(ref[1])
        expect(json.dumps(a, sort_keys=True).count("timeslice") == json.dumps(b, sort_keys=True).count("timeslice"),
               "%s: output shape differs" % tag)
        expect(strip_handles(a) == strip_handles(b), "%s: output differs:\n%r\n%r" % (tag, a, b))

    same("no agent", run_plain(node, args, inject=True))
    same("socket is a regular file", run_plain(node, args, True, {"GPUQOS_SOCKET": node.dev}))

    # An "agent" that answers everything with garbage.
    gs = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    gs.bind(node.sock)
    gs.listen(8)
    gs.settimeout(0.2)
    stop = time.time() + 20
    child = subprocess.Popen(
        [node.bin("agent/cli/gpuqos"), "run", "--class", "be", "--", node.bin("tests/e2e/e2e-fakecuda"),
         "--dev", node.dev, "--set-delay-ms", "300"] + args,
        env=node.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    conns = []
    garbage = [b"", b"\x00" * 3, b"GQOS" * 20, struct.pack("<IHHII", 0x534f5147, 1, 5, 40, 1),
               struct.pack("<IHHII", 0x534f5147, 9, 2, 32, 1) + b"\x00" * 16,
               struct.pack("<IHHII", 0x534f5147, 1, 99, 16, 1), os.urandom(255)]
    while child.poll() is None and time.time() < stop:
        try:
            c, _ = gs.accept()
            conns.append(c)
        except socket.timeout:
            pass
        for c in conns:
            for g in garbage:
                try:
                    c.send(g)
                except OSError:
                    pass
    out, _ = child.communicate(timeout=30)
    gs.close()
    os.unlink(node.sock)
    expect(conns, "the preempt agent connected to the garbage agent")
    same("garbage agent", (child.returncode, out))

    # A real agent, but the RM refuses every SET_TIMESLICE: with gpuqos the
    # workload sees exactly what it sees without gpuqos on that RM.
    node.start_agent()
    lc = node.workload("lc", ["--hold", "20"], inject=True)
    wait_for(lambda: len(agent_tsgs(node, lc.pid)) == 4, what="LC listed")
    node.sim_control("fail 0xa06c0103 0x1f")
    ref2 = run_plain(node, args, inject=False)
    got2 = run_plain(node, args, inject=True)
    expect(ref2[0] == got2[0] and ref2[0] != 0, "refused SET: exit %d with gpuqos, %d without" % (got2[0], ref2[0]))
    expect(got2[1] == ref2[1], "refused SET: output differs: %r vs %r" % (got2[1], ref2[1]))
    node.sim_control("clear")


def strip_handles(obj):
    if isinstance(obj, dict):
        return {k: strip_handles(v) for k, v in obj.items() if k not in ("handle", "client", "device", "pid", "tsg", "h_client", "h_tsg")}
    if isinstance(obj, list):
        return [strip_handles(v) for v in obj]
    if isinstance(obj, str) and obj.startswith("0x"):
        return "0x"
    return obj


def t_many(node):
    """Fifty processes (200 TSGs) plus forked children, some exiting while
    their controls are in flight: the table converges to exactly the live
    TSGs and the simulator holds the settings."""
    node.start_agent()
    node.sim_control("latency 0xa06c0103 2000")
    lc = node.workload("lc", ["--hold", "60"])
    bes = [node.workload("be", ["--hold", "60"]) for _ in range(49)]
    wait_for(lambda: len(agent_tsgs(node)) == 200, timeout=40, what="200 TSGs listed")
    # Exit ten BEs while the agent's controls to them are slow in the RM.
    for p in bes[:10]:
        p.kill()
    for p in bes[:10]:
        p.wait()
    node.sim_control("clear")
    live = [lc] + bes[10:]
    wait_for(lambda: len(agent_tsgs(node)) == 4 * len(live), timeout=30, what="exited TSGs dropped")
    # Several BEs beside an LC, every one gateable: all at the sole-BE
    # value, taking turns.
    wait_for(lambda: all(gr_timeslice(node, p.pid) == [50] for p in bes[10:]), timeout=40,
             what="every live BE at the sole-BE value")
    expect(gr_timeslice(node, lc.pid) == [100000], "LC at 100000")
    # fork(): the child is a process of its own with its own TSGs.
    fk = node.workload("be", ["--hold", "30", "--fork"])
    n = len(live) + 2
    wait_for(lambda: len({t["pid"] for t in agent_tsgs(node)}) == n and len(agent_tsgs(node)) == 4 * n,
             what="forked parent and child listed as two processes with 4 TSGs each")
    expect(fk.pid in {t["pid"] for t in agent_tsgs(node)}, "parent listed")
    # Killing the workload the test started leaves no process behind.
    child = ({t["pid"] for t in agent_tsgs(node)} - {p.pid for p in live} - {fk.pid}).pop()
    fk.kill()
    fk.wait()
    wait_for(lambda: not pid_running(child), timeout=5,
             what="the forked child %d to end with its parent" % child)
    stray = [pid for pid in map(int, filter(str.isdigit, os.listdir("/proc")))
             if pid != os.getpid() and pid_running(pid) and pgid_of(pid) == fk.pid]
    expect(not stray, "processes left in the workload's group: %r" % stray)


def pid_running(pid):
    """True while pid exists and is not a zombie."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def pgid_of(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return int(f.read().rsplit(")", 1)[1].split()[2])
    except (OSError, ValueError, IndexError):
        return None


def t_nonroot(node):
    """A non-root workload with interleave forced onto its preempt agent:
    timeslice applied through its own fd; the interleave request is refused
    by the RM (0x1b) and reported as needing CAP_SYS_NICE, not silently
    dropped. (With "auto" the node agent sets it: see direct_interleave.)"""
    node.start_agent(config={"version": 1, "interleave": {"lc": "high", "be": "low"},
                             "controlPath": {"interleave": "in-process"}})
    lc = node.workload("lc", ["--hold", "30"])
    nr = node.workload("be", ["--hold", "30"], nonroot=True)
    wait_for(lambda: gr_timeslice(node, nr.pid) == [50], what="non-root BE timeslice applied in the simulator")
    st = [t for t in node.sim_state()["tsgs"] if h(t["client"]) in sim_client_of_pid(node, nr.pid) and t["engineType"] == 1][0]
    expect(not st["interleave_set"], "the RM did not accept interleave from the non-root process")
    row = wait_for(lambda: [t for t in agent_tsgs(node, nr.pid) if t["engine"] == 1 and "CAP_SYS_NICE" in json.dumps(t)],
                   what="agent reports CAP_SYS_NICE for the non-root interleave")[0]
    expect(row["interleave"]["applied"] is None, "interleave not claimed as applied")
    st_lc = [t for t in node.sim_state()["tsgs"] if h(t["client"]) in sim_client_of_pid(node, lc.pid) and t["engineType"] == 1][0]
    expect(st_lc["interleave"] == 2, "root LC got interleave HIGH")


def t_deadline(node):
    """A control that does not return for a long time blocks neither the
    agent's loop nor the workload's own ioctls."""
    node.start_agent(config={"version": 1, "controlDeadlineMs": 300})
    be = node.workload("be", ["--hold", "30", "--poll-ms", "50"])
    wait_for(lambda: len(agent_tsgs(node, be.pid)) == 4, what="BE listed")
    node.sim_control("latency 0xa06c0103 20000000")
    # The LC's arrival makes the agent shorten the BE: that control hangs.
    node.workload("lc", ["--hold", "30"])
    t0 = time.time()
    wait_for(lambda: any(t["state"] == "stalled" or "timeout" in json.dumps(t) for t in agent_tsgs(node, be.pid)),
             timeout=10, what="agent records the timeout")
    expect(time.time() - t0 < 5, "timeout recorded promptly")
    t1 = time.time()
    node.ctl("list")
    expect(time.time() - t1 < 1.0, "ctl list answers while the control hangs")
    node.sim_control("clear")


def t_verify(node):
    """A control the RM answers NV_OK but does not keep (the simulator's
    `drop`): the agent believes it until its read-back, 1 s after the SET,
    finds the RM's value; it says so, counts it and sets the TSG again.
    Then the TSG is read back every verifyIntervalS."""
    cfg = {"version": 1, "verifyIntervalS": 2}
    node.start_agent(config=cfg)
    be = node.workload("be", ["--hold", "30"])
    lc = node.workload("lc", ["--hold", "30"])

    def be_gr():
        return next((t for t in agent_tsgs(node, be.pid) if t["engine"] == 1), None)

    wait_for(lambda: gr_timeslice(node, be.pid) == [50] and gr_timeslice(node, lc.pid) == [100000],
             what="BE at 50, LC at 100000")
    wait_for(lambda: be_gr()["timeslice"]["verifiedMsAgo"] is not None, timeout=5,
             what="the BE's first read-back")
    expect(be_gr()["timeslice"]["verifyMismatches"] == 0, "no mismatch yet: %r" % be_gr())
    # The BE's next SET is answered NV_OK and not kept.
    node.sim_control("drop 0xa06c0103 1")
    cfg["timeslices"] = {"beUs": 60}
    with open(os.path.join(node.dir, "policy.json"), "w") as f:
        json.dump(cfg, f)
    node.agent.send_signal(signal.SIGHUP)
    wait_for(lambda: be_gr()["timeslice"]["verifyMismatches"] == 1, timeout=5,
             what="the read-back finding the RM at 50")
    wait_for(lambda: gr_timeslice(node, be.pid) == [60] and be_gr()["state"] == "converged"
             and be_gr()["timeslice"]["applied"] == 60, what="the BE set again to 60")
    # The BE's first read and the one that found 50 (the LC's own first
    # read may still be on its way on a busy machine).
    counters = node.ctl("list")["agent"]["counters"]
    expect(counters["verifyMismatches"] == 1 and counters["verifyReads"] >= 2,
           "counters: %r" % counters)
    with open(node.agent_logs[-1]) as f:
        log = f.read()
    expect("the RM holds 50 us, not the 60 us believed" in log, "the warning is logged")
    # Converged, it is read again every 2 s: never much older than that.
    reads = counters["verifyReads"]
    end = time.monotonic() + 3.0
    while time.monotonic() < end:
        ago = be_gr()["timeslice"]["verifiedMsAgo"]
        expect(ago is not None and ago < 2000 + 1000, "read back %r ms ago" % ago)
        time.sleep(0.1)
    expect(node.ctl("list")["agent"]["counters"]["verifyReads"] >= reads + 2,
           "read again every 2 s (LC and BE)")
    expect(gr_timeslice(node, be.pid) == [60] and
           node.ctl("list")["agent"]["counters"]["verifyMismatches"] == 1, "no other mismatch")


# ---- the direct control path ----------------------------------------------


def sim_gr_tsg(node, pid):
    """The simulator's GR TSG of pid (its only context)."""
    clients = sim_client_of_pid(node, pid)
    gr = [t for t in node.sim_state()["tsgs"] if h(t["client"]) in clients and t["engineType"] == 1]
    return gr[0] if len(gr) == 1 else None


def sim_calls(node, cmd, tsg):
    """Log records of control cmd on the simulator TSG dict tsg."""
    return [r for r in node.sim_log() if r.get("cmd") == cmd and
            h(r.get("client", "0")) == h(tsg["client"]) and h(r.get("object", "0")) == h(tsg["handle"])]


def agent_gr(node, pid):
    rows = [t for t in agent_tsgs(node, pid) if t["engine"] == 1]
    return rows[0] if rows else None


def agent_fds_on(node, path):
    """How many of the agent's open fds point to path right now."""
    fd_dir = "/proc/%d/fd" % node.agent.pid
    n = 0
    for fd in os.listdir(fd_dir):
        try:
            n += os.readlink(os.path.join(fd_dir, fd)) == path
        except OSError:
            pass
    return n


def t_direct_interleave(node):
    """(a) A NON-ROOT BE beside an LC, policy interleave be=low, controlPath
    auto: the node agent sets the BE's level through the direct path (the
    workload could not: the RM wants CAP_SYS_NICE in the calling task)."""
    node.start_agent(config={"version": 1, "interleave": {"be": "low"}})
    lc = node.workload("lc", ["--hold", "30"])
    nr = node.workload("be", ["--hold", "30"], nonroot=True)
    wait_for(lambda: (sim_gr_tsg(node, nr.pid) or {}).get("interleave_set"),
             what="the BE's GR TSG got an interleave level in the simulator")
    st = sim_gr_tsg(node, nr.pid)
    expect(st["interleave"] == 0, "level LOW in the simulator: %r" % st)
    calls = [r for r in sim_calls(node, "0xa06c0107", st) if r.get("status") == "0x00"]
    expect(calls and all(r["pid"] == node.agent.pid for r in calls),
           "SET_INTERLEAVE came from the agent (pid %d), not the workload (pid %d): %r"
           % (node.agent.pid, nr.pid, [(r["pid"], r["status"]) for r in sim_calls(node, "0xa06c0107", st)]))
    row = wait_for(lambda: (lambda t: t if t and t["state"] == "converged" else None)(agent_gr(node, nr.pid)),
                   what="agent shows the BE converged")
    expect(row["interleave"] == {"desired": 0, "applied": 0, "reverts": 0, "revertWaitMs": 0},
           "agent view: %r" % row["interleave"])
    expect(row["paths"]["interleave"] == "direct" and row["error"] is None,
           "interleave path direct, no error: %r" % row)
    # The timeslice never needs the direct path here: its preempt agent set
    # it at TSG creation (then the agent sends nothing: path None) or took
    # the agent's command (path "in-process"), depending on who was first.
    expect(row["paths"]["timeslice"] in (None, "in-process"),
           "timeslice through its preempt agent: %r" % row["paths"])
    expect(gr_timeslice(node, nr.pid) == [50], "timeslice still applied: %r" % gr_timeslice(node, nr.pid))
    # The LC's level is left alone by this policy.
    expect(not sim_gr_tsg(node, lc.pid)["interleave_set"], "LC level untouched")


def t_direct_forced(node):
    """(b) timeslice, get-timeslice and preempt forced onto the direct path.
    The agent cannot discover a process without a preempt agent yet (that
    needs the eBPF tracker), so the TSG comes from a preempt agent's report
    and the path is forced. (c) The duplicate is closed at once: no fd on
    the control device stays open in the agent, and once the workload is
    killed the simulator frees its client."""
    node.start_agent(config={"version": 1, "controlPath": {"timeslice": "direct", "preempt": "direct"}})
    be = node.workload("be", ["--hold", "30"], nonroot=True)
    wait_for(lambda: len(agent_tsgs(node, be.pid)) == 4, what="BE's 4 TSGs listed")
    node.sim_control("reset-log")
    lc = node.workload("lc", ["--hold", "30"])
    wait_for(lambda: gr_timeslice(node, be.pid) == [50], what="BE shortened to 50 us in the simulator")
    st = sim_gr_tsg(node, be.pid)
    sets = [r for r in sim_calls(node, "0xa06c0103", st)]
    expect(sets and all(r["pid"] == node.agent.pid and r["params"]["timesliceUs"] == 50 for r in sets),
           "SET_TIMESLICE on the BE came from the agent: %r" % [(r["pid"], r["params"]) for r in sets])
    wait_for(lambda: (agent_gr(node, be.pid) or {}).get("state") == "converged", what="BE converged")
    expect(agent_gr(node, be.pid)["path"] == "direct", "path direct: %r" % agent_gr(node, be.pid))
    r = node.ctl("get-timeslice", str(be.pid))
    expect(r.get("ok") and len(r["results"]) == 4 and all(x["path"] == "direct" for x in r["results"]),
           "get-timeslice via direct: %r" % r)
    expect(sorted(x["value"] for x in r["results"]) == [50, 1024, 1024, 1024], "read-back: %r" % r)
    before = sim_gr_tsg(node, be.pid)["preempts"]
    r = node.ctl("preempt", str(be.pid))
    expect(r.get("ok") and [(x["path"], x["rmStatusName"]) for x in r["results"]] == [("direct", "NV_OK")],
           "preempt via direct: %r" % r)
    expect(sim_gr_tsg(node, be.pid)["preempts"] == before + 1, "the simulator counted the PREEMPT")
    pre = sim_calls(node, "0xa06c0105", st)
    expect(pre and pre[-1]["pid"] == node.agent.pid, "PREEMPT came from the agent")
    expect(agent_fds_on(node, node.dev) == 0, "no duplicate of the control device left open in the agent")
    # (c) killed: nothing of ours keeps its client alive.
    be.kill()
    lc.kill()
    be.wait()
    lc.wait()
    wait_for(lambda: node.sim_state()["clients"] == [], what="the simulator freed every client")


def t_direct_hang(node):
    """(d) A direct control that does not return: the loop keeps answering,
    the control is reported as a timeout, the stuck worker is replaced,
    and after more than 4 lost the direct path reports itself stalled."""
    node.start_agent(config={"version": 1, "controlDeadlineMs": 300,
                             "interleave": {"lc": "high", "be": "low"}})
    node.sim_control("latency 0xa06c0107 20000000")
    node.workload("lc", ["--hold", "30"])
    be = node.workload("be", ["--hold", "30"], nonroot=True)
    t0 = time.time()
    row = wait_for(lambda: (lambda t: t if t and t["lastErrno"] == "timeout" else None)(agent_gr(node, be.pid)),
                   timeout=10, what="the hung SET_INTERLEAVE reported as a timeout")
    expect(time.time() - t0 < 5, "timeout recorded promptly")
    expect("no result within the deadline (direct path)" in row["error"], "error: %r" % row["error"])
    for _ in range(5):
        t1 = time.time()
        lst = node.ctl("list")
        expect(time.time() - t1 < 1.0, "ctl list answers while direct controls hang")
        time.sleep(0.2)
    d = wait_for(lambda: (lambda d: d if d.get("stalled") else None)(node.ctl("list")["agent"]["direct"]),
                 timeout=15, what="direct path stalled after more than 4 workers lost")
    # Controls already running when it stalled may be lost too.
    expect(d["lost"] >= 5 and d["stuck"] >= 5 and d["workers"] >= 1, "lost workers counted: %r" % d)
    row = wait_for(lambda: (lambda t: t if t and t["state"] == "stalled" else None)(agent_gr(node, be.pid)),
                   what="TSG shown stalled")
    # auto then tries the preempt agent, whose control hangs the same way.
    expect("stalled" in row["error"], "error says stalled: %r" % row["error"])
    # The workloads' own controls still pass: their timeslices were set.
    expect(gr_timeslice(node, be.pid) == [50], "BE timeslice still applied by its preempt agent")
    t1 = time.time()
    node.ctl("list")
    expect(time.time() - t1 < 1.0, "ctl list answers with the direct path stalled")


def t_direct_nocaps(node):
    """(e) The agent runs without CAP_SYS_PTRACE: it says so in its list,
    on each TSG that needs the direct path and in answers to ctl, instead
    of failing inside pidfd_getfd."""
    drop = ["setpriv", "--bounding-set=-sys_ptrace", "--inh-caps=-sys_ptrace", "--"]
    if not shutil.which("setpriv"):
        raise Fail("setpriv (util-linux) is needed to drop CAP_SYS_PTRACE")
    node.start_agent(config={"version": 1, "controlPath": {"timeslice": "direct", "preempt": "direct"}},
                     prefix=drop)
    ag = node.ctl("list")["agent"]
    expect(ag["capabilities"]["direct"] is False, "capabilities.direct false: %r" % ag["capabilities"])
    expect(ag["capabilitiesMissing"].get("direct") == "CAP_SYS_PTRACE", repr(ag["capabilitiesMissing"]))
    expect(ag["direct"]["running"] is False and ag["direct"]["off"] == "direct path needs CAP_SYS_PTRACE",
           repr(ag["direct"]))
    # Same capabilities as the agent, so it may still read their /proc. The
    # BE is in place first: only a control can shorten it then.
    be = node.workload("be", ["--hold", "30"], prefix=drop)
    wait_for(lambda: len(agent_tsgs(node, be.pid)) == 4, what="BE's 4 TSGs listed")
    node.workload("lc", ["--hold", "30"], prefix=drop)
    row = wait_for(lambda: (lambda t: t if t and t["state"] == "failed" else None)(agent_gr(node, be.pid)),
                   what="the BE's TSG reports the missing capability")
    expect(row["error"] == "SET_TIMESLICE: direct path needs CAP_SYS_PTRACE", "error in words: %r" % row)
    expect(row["timeslice"]["applied"] == 2048, "not applied: %r" % row["timeslice"])
    r = node.ctl("preempt", str(be.pid))
    expect(not r.get("ok") and "direct path needs CAP_SYS_PTRACE" in r.get("error", ""), repr(r))
    # Only the preempt agent's rewrite of libcuda's own call can have set
    # it (POLICY); the agent itself issued nothing on a TSG (its own GPU
    # table query, on a client of its own, is not a TSG control).
    expect(not [r for r in node.sim_log() if r["pid"] == node.agent.pid and
                r.get("cmd", "").startswith("0xa06c")],
           "no control from the agent's pid")
    expect("direct path needs CAP_SYS_PTRACE" in open(node.agent_logs[-1]).read(), "logged at start")


# ---- the eBPF tracker in the node agent ------------------------------------
# Each runs the agent with --bpf on and a pin directory of its own (removed
# at the end); exit 77 when the tracer cannot be opened here.

BE_ENV = {"GPUQOS_RUN_CLASS": "best-effort"}
LC_ENV = {"GPUQOS_RUN_CLASS": "latency-critical"}


def tracker(node):
    return node.ctl("list")["agent"]["tracker"]


def bare(node, env, args=("--hold", "30")):
    """fakecuda without the preempt agent, its class in its environment."""
    return node.workload(None, list(args), inject=False, env_extra=env)


def sim_pids(node):
    """client handle -> the pid that opened the simulator file it lives on."""
    out = {}
    for f in node.sim_state().get("files", []):
        for c in f.get("clients", []):
            out[h(c)] = f["opener_pid"]
    return out


def sim_table(node):
    """(pid, client, tsg, engine, gpu, timeslice) of every TSG the simulator holds."""
    st = node.sim_state()
    owner = sim_pids(node)
    dev = {(h(d["client"]), h(d["handle"])): d["deviceId"] for d in st.get("devices", [])}
    return sorted((owner.get(h(t["client"])), h(t["client"]), h(t["handle"]), t["engineType"],
                   dev.get((h(t["client"]), h(t["device"]))), t["timeslice_us"])
                  for t in st.get("tsgs", []))


def agent_table(node):
    """The same from the agent; a TSG never set runs at its baseline."""
    return sorted((t["pid"], h(t["client"]), h(t["tsg"]), t["engine"], t["gpu"],
                   t["timeslice"]["applied"] if t["timeslice"]["applied"] is not None
                   else t["timeslice"]["baseline"]) for t in agent_tsgs(node))


def all_settled(node):
    rows = agent_tsgs(node)
    return rows and all(t["state"] in ("converged", "unmanaged") for t in rows)


def t_bpf_bare(node):
    """(a) A BE without the preempt agent, its class from GPUQOS_RUN_CLASS,
    beside an injected LC: found through the tracker alone, and its GR TSG
    shortened through the direct path by the agent's own pid."""
    node.start_agent(bpf=True)
    tr = tracker(node)
    expect(tr["mode"] in ("tp_btf", "tracepoint") and tr["off"] is None, "tracker running: %r" % tr)
    be = bare(node, BE_ENV)
    wait_for(lambda: len(agent_tsgs(node, be.pid)) == 4, what="the bare BE's 4 TSGs, from the tracker")
    expect(all(t["sources"] == ["bpf"] for t in agent_tsgs(node, be.pid)),
           "sources: %r" % [t["sources"] for t in agent_tsgs(node, be.pid)])
    procs = {p["pid"]: p for p in node.ctl("list")["processes"]}
    expect(procs[be.pid]["class"] == "best-effort" and procs[be.pid]["classSource"] == "gpuqos-run"
           and not procs[be.pid]["connected"], "bare BE classified from its environment: %r" % procs[be.pid])
    expect(gr_timeslice(node, be.pid) == [2048], "BE alone keeps libcuda's 2048")
    lc = node.workload("lc", ["--hold", "30"])
    wait_for(lambda: gr_timeslice(node, be.pid) == [50], what="bare BE shortened to 50 us in the simulator")
    wait_for(lambda: gr_timeslice(node, lc.pid) == [100000], what="LC at 100000 us")
    sets = [r for r in sim_calls(node, "0xa06c0103", sim_gr_tsg(node, be.pid))
            if r["params"]["timesliceUs"] == 50]
    expect(sets and all(r["pid"] == node.agent.pid for r in sets),
           "the SET to 50 came from the agent (pid %d): %r" % (node.agent.pid, [r["pid"] for r in sets]))
    row = wait_for(lambda: (lambda t: t if t and t["state"] == "converged" else None)(agent_gr(node, be.pid)),
                   what="the agent shows the bare BE converged")
    ts = row["timeslice"]
    expect(row["path"] == "direct" and (ts["desired"], ts["applied"], ts["baseline"]) == (50, 50, 2048),
           "direct path, applied from the tracker: %r" % row)
    wait_for(lambda: all(t["sources"] == ["bpf", "preempt"] for t in agent_tsgs(node, lc.pid)),
             what="the injected LC's TSGs seen by both")
    expect(tracker(node)["refusedClaims"] == 0, "no claim refused")
    lc.kill()
    lc.wait()
    wait_for(lambda: gr_timeslice(node, be.pid) == [2048], what="bare BE restored to 2048 after the LC left")
    wait_for(lambda: agent_tsgs(node, lc.pid) == [], what="LC's TSGs dropped")


def t_bpf_forms(node):
    """(b) The tracker's table agrees with the simulator's state, TSG for TSG
    and value for value, for the three alloc forms and a forked workload."""
    node.start_agent(bpf=True)
    ws = [bare(node, LC_ENV, ["--hold", "30", "--form", "64"]),
          bare(node, BE_ENV, ["--hold", "30", "--form", "21"]),
          bare(node, BE_ENV, ["--hold", "30", "--form", "xfer"]),
          bare(node, BE_ENV, ["--hold", "30", "--form", "64", "--fork"])]
    wait_for(lambda: len(sim_table(node)) == 20, what="20 TSGs in the simulator")
    wait_for(lambda: len(agent_tsgs(node)) == 20 and all_settled(node), timeout=20,
             what="20 TSGs listed and settled")
    # One LC and four BEs (the fork's child is one): the several-BE floor.
    wait_for(lambda: agent_table(node) == sim_table(node), timeout=10,
             what="agent table == simulator state:\n%r\n%r" % (agent_table(node), sim_table(node)))
    tab = sim_table(node)
    expect(len({r[0] for r in tab}) == 5, "five processes (the fork's child among them): %r" % tab)
    gr = sorted(r[5] for r in tab if r[3] == 1)
    expect(gr == [1000, 1000, 1000, 1000, 100000], "GR values in the simulator: %r" % gr)
    expect(all(t["sources"] == ["bpf"] for t in agent_tsgs(node)), "all from the tracker")
    keys = [(t["pid"], t["client"], t["tsg"]) for t in agent_tsgs(node)]
    expect(len(keys) == len(set(keys)), "no duplicates")
    # The fork's child is no Popen of ours: end it too, or it holds the mount.
    for pid in {r[0] for r in tab} - {p.pid for p in ws}:
        os.kill(pid, signal.SIGKILL)


def t_bpf_restart(node):
    """(c) The agent is killed; workloads start (and one exits) while it is
    down; the restarted agent rebuilds the table from the pinned maps and
    the gap's events: everything listed once, settings applied."""
    node.start_agent(bpf=True)
    a = bare(node, BE_ENV, ["--hold", "40"])
    gone = bare(node, BE_ENV, ["--hold", "40"])
    wait_for(lambda: len(agent_tsgs(node)) == 8, what="8 TSGs before the restart")
    node.stop_agent(signal.SIGKILL)
    lc = bare(node, LC_ENV, ["--hold", "40"])
    b = bare(node, BE_ENV, ["--hold", "40"])
    gone.kill()
    gone.wait()
    wait_for(lambda: gr_timeslice(node, lc.pid) == [2048] and gr_timeslice(node, b.pid) == [2048],
             what="the gap's workloads created their TSGs")
    expect(gr_timeslice(node, a.pid) == [2048], "nothing touched while the agent was down")
    node.start_agent(bpf=True)
    tr = tracker(node)
    expect(tr["inherited"]["tables"] and tr["inherited"]["links"], "pins inherited: %r" % tr)
    wait_for(lambda: len(agent_tsgs(node)) == 12, what="12 TSGs after the restart")
    keys = [(t["pid"], t["client"], t["tsg"]) for t in agent_tsgs(node)]
    expect(len(keys) == len(set(keys)), "no duplicates: %r" % keys)
    expect({t["pid"] for t in agent_tsgs(node)} == {a.pid, lc.pid, b.pid},
           "the process that exited in the gap is not listed")
    wait_for(lambda: gr_timeslice(node, a.pid) == [1000] and gr_timeslice(node, b.pid) == [1000]
             and gr_timeslice(node, lc.pid) == [100000], what="settings applied after the restart")
    wait_for(lambda: all_settled(node) and agent_table(node) == sim_table(node),
             what="agent table == simulator state after the restart")
    # Copy TSGs nobody ever SET: the kernel saw them created, so the agent
    # knows the RM's creation value, before and after a restart alike.
    copies = [t for t in agent_tsgs(node) if t["engine"] != 1]
    expect(len(copies) == 9 and all(t["timeslice"]["applied"] == 1024 for t in copies),
           "copy TSGs at the RM's creation value after the restart: %r"
           % [(t["pid"], t["tsg"], t["timeslice"]["applied"]) for t in copies])


def t_bpf_liar(node):
    """(d) A preempt agent claims a TSG that was never allocated: held,
    then refused and counted, and no control is ever issued for it."""
    node.start_agent(bpf=True)
    # Alone, the LC keeps libcuda's value; a BE beside it would move both.
    lc = node.workload("lc", ["--hold", "30"])
    wait_for(lambda: len(agent_tsgs(node, lc.pid)) == 4 and all_settled(node), what="LC listed")
    out = open(os.path.join(node.dir, "liar.out"), "w")
    env = dict(node.env, **BE_ENV)
    liar = subprocess.Popen(["/usr/bin/python3", os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                              "..", "agent", "fake_peer.py"), node.sock, node.dev],
                            stdin=subprocess.PIPE, stdout=out, env=env)
    node.procs.append(liar)
    fake = {"op": "tsg", "client": 0xC1D0BEEF, "tsg": 0x5C0000EE, "engine": 1, "gpu": 0,
            "ts": 2048, "app": 2048}
    liar.stdin.write((json.dumps(fake) + "\n").encode())
    liar.stdin.flush()
    held = wait_for(lambda: agent_tsgs(node, liar.pid) or tracker(node)["refusedClaims"], timeout=10,
                    what="the claim reached the agent")
    if isinstance(held, list):
        expect(held[0]["state"] == "unverified" and held[0]["sources"] == ["preempt"], "held: %r" % held)
    wait_for(lambda: tracker(node)["refusedClaims"] == 1, what="the claim refused and counted")
    expect(agent_tsgs(node, liar.pid) == [], "the refused TSG is not listed")
    time.sleep(0.5)
    liar.kill()
    liar.wait()
    out.close()
    cmds = [json.loads(line) for line in open(out.name) if '"command"' in line]
    expect(not cmds, "no COMMAND was sent for the claimed TSG: %r" % cmds)
    expect(not [r for r in node.sim_log() if r["pid"] == node.agent.pid and h(r.get("client", "0")) == 0xC1D0BEEF],
           "no control from the agent on the claimed client")
    log = open(node.agent_logs[-1]).read()
    expect("pid %d: preempt agent's TSG 0xc1d0beef/0x5c0000ee refused" % liar.pid in log, "refusal logged with the pid")
    expect(node.ctl("list")["agent"]["counters"]["refusedTsgs"] == 0, "not an fd refusal")
    expect(gr_timeslice(node, lc.pid) == [2048], "the LC is untouched: the claim moved nothing")


def t_liar(node):
    """Without the tracker, a preempt agent claiming a TSG that was never
    allocated, and answering every COMMAND with success, moves nobody: the
    node agent reads the claim back itself on the direct path, the RM (the
    simulator) says the client does not exist, and the claim is refused.
    (It used to make a sole root BE one of "several" and set it to 1000.)"""
    node.start_agent()
    lc = node.workload("lc", ["--hold", "30"])
    be = node.workload("be", ["--hold", "30"])
    wait_for(lambda: gr_timeslice(node, be.pid) == [50] and all_settled(node),
             what="a sole BE beside an LC at 50")
    out = open(os.path.join(node.dir, "liar.out"), "w")
    liar = subprocess.Popen(["/usr/bin/python3", os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                              "..", "agent", "fake_peer.py"), node.sock, node.dev],
                            stdin=subprocess.PIPE, stdout=out, env=dict(node.env, **BE_ENV))
    node.procs.append(liar)
    fake = {"op": "tsg", "client": 0xC1D0BEEF, "tsg": 0x5C0000EE, "engine": 1, "gpu": 0,
            "ts": 2048, "app": 2048}
    liar.stdin.write((json.dumps(fake) + "\n").encode())
    liar.stdin.flush()
    row = wait_for(lambda: [t for t in agent_tsgs(node, liar.pid) if t["state"] == "refused"],
                   what="the claim refused")[0]
    expect("claim refused" in (row["error"] or ""), "the reason in view: %r" % row)
    time.sleep(1.0)
    expect(gr_timeslice(node, be.pid) == [50], "the BE still at 50: %r" % gr_timeslice(node, be.pid))
    expect(not [r for r in node.sim_log() if r.get("cmd") == "0xa06c0103" and
                r.get("params", {}).get("timesliceUs") == 1000],
           "no SET_TIMESLICE 1000 reached the RM")
    liar.kill()
    liar.wait()
    out.close()
    cmds = [json.loads(line) for line in open(out.name) if '"command"' in line]
    expect(not [c for c in cmds if c["op"] != 2], "only a read-back went to the liar: %r" % cmds)
    expect(gr_timeslice(node, lc.pid) == [100000], "the LC untouched")


def t_bpf_exit(node):
    """(e) A process's exit removes its TSGs: killed (the tracer's EXIT) or
    after freeing its clients and exiting normally (FREE)."""
    node.start_agent(bpf=True)
    killed = bare(node, BE_ENV, ["--hold", "30"])
    done = bare(node, BE_ENV, ["--hold", "1"])
    wait_for(lambda: len(agent_tsgs(node, killed.pid)) == 4 and len(agent_tsgs(node, done.pid)) == 4,
             what="both processes listed")
    killed.kill()
    killed.wait()
    wait_for(lambda: agent_tsgs(node, killed.pid) == [], what="the killed process's TSGs dropped")
    expect(done.wait(10) == 0, "the workload exited cleanly")
    wait_for(lambda: agent_tsgs(node, done.pid) == [], what="the exited process's TSGs dropped")
    wait_for(lambda: not [p for p in node.ctl("list")["processes"] if p["pid"] in (killed.pid, done.pid)],
             what="both process entries forgotten")
    expect(agent_tsgs(node) == [], "table empty")


def gr_channels(node, pids):
    """pid -> the simulator's channels under that process's GR TSGs, and
    the snapshot's time."""
    st = node.sim_state()
    owner = {h(c): f["opener_pid"] for f in st.get("files", []) for c in f.get("clients", [])}
    gr = {(h(t["client"]), h(t["handle"])) for t in st.get("tsgs", []) if t["engineType"] == 1}
    out = {pid: [] for pid in pids}
    for ch in st.get("channels", []):
        key = (h(ch["client"]), h(ch["parent"]))
        if key in gr and owner.get(key[0]) in out:
            out[owner[key[0]]].append(ch)
    return out, st["t_us"]


def schedulable(node, pids):
    """The pids whose GR channels are all enabled now."""
    chans, _ = gr_channels(node, pids)
    return {pid for pid, cs in chans.items() if cs and all(c["enabled"] for c in cs)}


def longest_disabled_ms(node, pids):
    chans, now = gr_channels(node, pids)
    since = [c["disabled_since_us"] for cs in chans.values() for c in cs if not c["enabled"]]
    return max((now - s for s in since), default=0) / 1000.0


def t_rotate(node):
    """Three BEs beside an LC take turns: one schedulable at a time (the
    simulator's channel state says so), each gets its turn. The agent
    SIGKILLed: every BE enabled and back at libcuda's 2048 at once. The agent
    stopped: no channel stays disabled much beyond one lease (500 ms), the
    leases renewed through their lease pages as by COMMAND. Restarted or
    continued: the rotation resumes."""
    node.start_agent()
    bes = [node.workload("be", ["--hold", "60"]) for _ in range(3)]
    lc = node.workload("lc", ["--hold", "60"])
    pids = [p.pid for p in bes]
    wait_for(lambda: all(gr_timeslice(node, pid) == [50] for pid in pids)
             and len(schedulable(node, pids)) == 1, timeout=20, what="three BEs rotating at 50")
    expect(gr_timeslice(node, lc.pid) == [100000], "LC at 100000")
    seen, one, samples, sim_worst = set(), 0, 0, 0.0
    end = time.monotonic() + 1.5
    while time.monotonic() < end:
        s = schedulable(node, pids)
        samples += 1
        one += len(s) == 1
        seen |= s
        sim_worst = max(sim_worst, longest_disabled_ms(node, pids))
        time.sleep(0.01)
    expect(seen == set(pids), "every BE had a turn in 1.5 s: %r of %r" % (seen, pids))
    expect(one >= 0.8 * samples, "one BE schedulable in %d of %d samples" % (one, samples))
    rows = [t for t in agent_tsgs(node) if t["pid"] in pids and t["engine"] == 1]
    expect(all(t["gate"]["rotating"] and t["state"] == "converged" for t in rows),
           "rotating and converged: %r" % rows)
    # How long each was held off, as the agent counts it from its preempt
    # agent's word: gated two turns of three, each period two turns of the
    # default 250 ms (500 ms), never past the promise of two turns and one
    # lease (1000 ms: a late renewal lapses), and no shorter than what the
    # simulator's channels showed (sampled every 10 ms, and the agent hears
    # of each change a message later).
    gates = [t["gate"] for t in rows]
    expect(len(gates) == 3 and all(g["count"] >= 2 and 400 <= g["longestMs"] <= 2 * 250 + 500
                                   and g["gatedMs"] >= g["longestMs"] for g in gates),
           "the agent's gate counts: %r" % gates)
    expect(max(g["longestMs"] for g in gates) >= sim_worst - 50,
           "the agent's longest gated %r ms against the simulator's %.0f ms"
           % ([g["longestMs"] for g in gates], sim_worst))
    # The BEs' leases were renewed through their lease pages (docs/protocol.md,
    # "Lease page"); the stop below shows they still lapse without the agent.
    renewed = node.ctl("status")["agent"]["counters"]["pageRenewals"]
    expect(renewed > 0, "no lease renewed through a lease page (%r)" % renewed)
    # Killed: the preempt agents end the rotation themselves.
    node.stop_agent(signal.SIGKILL)
    wait_for(lambda: schedulable(node, pids) == set(pids)
             and all(gr_timeslice(node, pid) == [2048] for pid in pids), timeout=2, step=0.02,
             what="every BE enabled at libcuda's 2048 after the agent was killed")
    node.start_agent()
    wait_for(lambda: len(schedulable(node, pids)) == 1
             and all(gr_timeslice(node, pid) == [50] for pid in pids), timeout=20,
             what="rotating again after the restart")
    # Stopped: leases lapse in the preempt agents.
    node.agent.send_signal(signal.SIGSTOP)
    try:
        worst, end = 0.0, time.monotonic() + 2.0
        while time.monotonic() < end:
            worst = max(worst, longest_disabled_ms(node, pids))
            time.sleep(0.02)
        expect(schedulable(node, pids) == set(pids), "every BE enabled with the agent stopped")
        # The lease runs from the last renewal (at most a quarter lease
        # earlier), plus scheduling slack on a loaded CI machine.
        expect(worst < 500 + 125 + 400, "a channel stayed disabled %.0f ms" % worst)
    finally:
        node.agent.send_signal(signal.SIGCONT)
    wait_for(lambda: len(schedulable(node, pids)) == 1
             and all(gr_timeslice(node, pid) == [50] for pid in pids), timeout=20,
             what="rotating again after SIGCONT")
    # The agent's own count of how long each BE was gated does not take in
    # the 2 s it was stopped: a gate that lapsed is counted to its lease's
    # end (at most two turns before the stop, 500 ms, and one lease after
    # the last renewal), not to when the agent read of it.
    gates = [t["gate"] for t in agent_tsgs(node) if t["pid"] in pids and t["engine"] == 1]
    expect(len(gates) == 3 and all(g["longestMs"] < 500 + 520 + 300 for g in gates),
           "gate counts across the stop: %r" % gates)
    # The LC goes: every BE enabled, back at libcuda's 2048.
    lc.kill()
    lc.wait()
    wait_for(lambda: schedulable(node, pids) == set(pids)
             and all(gr_timeslice(node, pid) == [2048] for pid in pids), timeout=10,
             what="BEs enabled and restored after the LC left")


def gr_rows(node, pids):
    """(pid, client, tsg) -> the agent's row of each GR TSG of pids."""
    return {(t["pid"], h(t["client"]), h(t["tsg"])): t for t in agent_tsgs(node)
            if t["pid"] in pids and t["engine"] == 1}


def sim_disabled(node):
    """(client, tsg) -> [channel enabled, ...] of every TSG the simulator holds."""
    st = node.sim_state()
    out = {}
    for ch in st.get("channels", []):
        out.setdefault((h(ch["client"]), h(ch["parent"])), []).append(ch["enabled"])
    return out


def gated_but_on(node, pids):
    """The GR TSGs of pids the agent reports gated while the simulator
    holds one of their channels enabled, and how many it reports gated
    (the agent read first: the simulator's state is the later one)."""
    rows = gr_rows(node, pids)
    chans = sim_disabled(node)
    gated = [k for k, t in rows.items() if t["gate"]["applied"]]
    return [k for k in gated if any(chans.get(k[1:], [True]))], len(gated)


def t_bpf_gate(node):
    """A gate as the RM holds it: with the eBPF tracker, the agent reports
    a BE gated only while the simulator holds its channels disabled (the
    tracker maps each DISABLE_CHANNELS the RM accepts to the TSGs whose
    channels it names). Two BEs rotate beside an LC: stopped (SIGSTOP) at
    random points, no BE the agent calls gated has a channel on, and some
    are gated. A peer that owns a real TSG with a channel and says it is
    gated (GATED|LEASED) without disabling it is not reported gated (it
    was, by its word alone). The LC goes: every BE enabled and reported
    ungated."""
    node.start_agent(bpf=True)
    bes = [node.workload("be", ["--hold", "60"]) for _ in range(2)]
    lc = node.workload("lc", ["--hold", "60"])
    pids = [p.pid for p in bes]
    wait_for(lambda: len(schedulable(node, pids)) == 1 and len(gr_rows(node, pids)) == 2
             and all(t["gate"]["rotating"] for t in gr_rows(node, pids).values()), timeout=20,
             what="two BEs rotating")
    seen_gated = 0
    for i in range(12):
        for p in bes:
            p.send_signal(signal.SIGSTOP)
        try:
            # Stopped, neither BE changes its channels: what the agent
            # still has to read (the tracker's ring, the last report)
            # comes in, and no gate it reports is one the RM does not hold.
            last = []

            def clean():
                last[:] = [gated_but_on(node, pids)]
                return not last[0][0]
            wait_for(clean, timeout=5, what="no BE reported gated with a channel on (sample %d; "
                     "gated with a channel on, gated: %r)" % (i, last))
            seen_gated += last[0][1]
        finally:
            for p in bes:
                p.send_signal(signal.SIGCONT)
        time.sleep(0.05 + 0.037 * i)
    expect(seen_gated >= 1, "no BE was ever reported gated in 12 samples")

    peer = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "agent", "fake_peer.py")
    liar = subprocess.Popen(["/usr/bin/python3", peer, node.sock, node.dev], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, env=dict(node.env, **BE_ENV))
    node.procs.append(liar)
    try:
        bpf_gate_liar(node, liar)
    finally:
        liar.kill()
        liar.wait()

    lc.kill()
    lc.wait()
    wait_for(lambda: schedulable(node, pids) == set(pids)
             and not any(t["gate"]["applied"] for t in gr_rows(node, pids).values()), timeout=10,
             what="every BE enabled and reported ungated after the LC left")


def peer_say(peer, **m):
    """One line to a fake_peer.py process (its stdin)."""
    peer.stdin.write((json.dumps(m) + "\n").encode())
    peer.stdin.flush()


def peer_alloc(peer):
    """fake_peer.py's real objects (client, device, a GR TSG, a channel):
    its "alloc" event."""
    peer_say(peer, op="alloc", engine=1)
    line = {}
    for raw in peer.stdout:
        line = json.loads(raw)
        if line.get("ev") == "alloc":
            break
    expect(line.get("ev") == "alloc", "the peer's objects: %r" % line)
    return line


def bpf_gate_liar(node, liar):
    """t_bpf_gate's liar: real objects, a GATED|LEASED report, commands
    left unanswered; never reported gated."""
    def say(**m):
        peer_say(liar, **m)
    say(op="set", answer=False)
    line = peer_alloc(liar)
    say(op="tsg", client=line["client"], tsg=line["tsg"], device=line["device"], engine=1, gpu=0,
        ts=2048, app=2048, flags=TSG_F_GATED | TSG_F_LEASED)
    key = (liar.pid, line["client"], line["tsg"])
    wait_for(lambda: [t for t in agent_tsgs(node, liar.pid) if "bpf" in t["sources"]
                      and "preempt" in t["sources"]], timeout=10,
             what="the liar's TSG seen by the tracker and reported")
    expect(sim_disabled(node).get(key[1:]) == [True], "the liar's channel is on: %r"
           % sim_disabled(node).get(key[1:]))
    for _ in range(10):
        row = gr_rows(node, [liar.pid]).get(key)
        expect(row is not None and not row["gate"]["applied"],
               "a TSG whose channel the RM holds on is reported gated: %r" % row)
        time.sleep(0.05)


def gate_peer(node, off):
    """A fake preempt agent (BE) with real objects, its channel disabled
    by a real DISABLE_CHANNELS when off, that says GATED|LEASED and
    answers no command (an UNGATE answered would end what it says).
    Returns (its Popen, (pid, client, tsg))."""
    peer = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "agent", "fake_peer.py")
    # A session of its own: the node's close kills it (killpg) however the test ends.
    p = subprocess.Popen(["/usr/bin/python3", peer, node.sock, node.dev], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, env=dict(node.env, **BE_ENV), start_new_session=True)
    node.procs.append(p)

    def say(**m):
        p.stdin.write((json.dumps(m) + "\n").encode())
        p.stdin.flush()

    def until(ev, op=None):
        for raw in p.stdout:
            line = json.loads(raw)
            if line.get("ev") == ev and (op is None or line.get("op") == op):
                return line
        raise Fail("fake peer %d ended before %r" % (p.pid, ev))
    say(op="set", answer=False)
    say(op="alloc", engine=1)
    objs = until("alloc")
    if off:
        say(op="disable", off=1)
        until("done", op="disable")
    say(op="tsg", client=objs["client"], tsg=objs["tsg"], device=objs["device"], engine=1, gpu=0,
        ts=2048, app=2048, flags=TSG_F_GATED | TSG_F_LEASED)
    # Read on, or its lines (a command each) fill the pipe and stop it.
    threading.Thread(target=lambda: [None for _ in p.stdout], daemon=True).start()
    return p, (p.pid, objs["client"], objs["tsg"])


def t_bpf_restart_chans(node):
    """After the agent is killed and restarted, the channels processes made
    before the restart are known again (the tracer's pinned channel table),
    in the state the RM holds them: a bare BE's four channels are counted;
    a peer that says GATED|LEASED with its channel enabled is not reported
    gated (with no channel known it would be, by its word alone); a peer
    that disabled its channel and says so is."""
    node.start_agent(bpf=True)
    be = bare(node, BE_ENV, ["--hold", "60"])
    _, lkey = gate_peer(node, off=False)
    _, hkey = gate_peer(node, off=True)
    expect(sim_disabled(node).get(lkey[1:]) == [True] and sim_disabled(node).get(hkey[1:]) == [False],
           "the simulator holds the liar's channel on, the other's off: %r" % sim_disabled(node))

    def known():
        """Both peers' TSGs seen by the tracker and reported, the BE's 4
        from the tracker alone, and the six channels under them known."""
        rows = gr_rows(node, [lkey[0], hkey[0]])
        tr = tracker(node)
        ok = (all("bpf" in rows.get(k, {}).get("sources", []) and "preempt" in rows[k]["sources"]
                  for k in (lkey, hkey))
              and len(agent_tsgs(node, be.pid)) == 4
              and all(t["sources"] == ["bpf"] for t in agent_tsgs(node, be.pid))
              and (tr["channels"], tr["channelsDisabled"]) == (6, 1))
        return ok and rows
    wait_for(known, timeout=10, what="the peers' TSGs and 6 channels known")
    wait_for(lambda: gr_rows(node, [hkey[0]])[hkey]["gate"]["applied"], timeout=5,
             what="the peer whose channel is disabled reported gated")
    expect(not gr_rows(node, [lkey[0]])[lkey]["gate"]["applied"], "the liar reported gated")

    node.stop_agent(signal.SIGKILL)
    node.start_agent(bpf=True)
    tr = tracker(node)
    expect(tr["inherited"]["tables"] and tr["inherited"]["links"] and not tr["inherited"]["recreated"],
           "pins inherited: %r" % tr)
    wait_for(known, timeout=10, what="after the restart: the peers' TSGs and the 6 channels known again")
    wait_for(lambda: gr_rows(node, [hkey[0]])[hkey]["gate"]["applied"], timeout=5,
             what="after the restart: the peer whose channel is disabled reported gated")
    for _ in range(10):
        row = gr_rows(node, [lkey[0]]).get(lkey)
        expect(row is not None and not row["gate"]["applied"],
               "after the restart, a TSG whose channel the RM holds on is reported gated: %r" % row)
        time.sleep(0.05)
    expect(sim_disabled(node).get(lkey[1:]) == [True] and sim_disabled(node).get(hkey[1:]) == [False],
           "the simulator unchanged: %r" % sim_disabled(node))


LOG_UNMADE = re.compile(r"pid (\d+): TSG 0x[0-9a-f]+: its preempt agent says it is gated, the RM holds "
                        r"its channels enabled \(\d+ GATEs running\): out of the rotation")


def sim_channel_records(node, chans):
    """chans: {(client, channel)}. Every DISABLE_CHANNELS the simulated RM
    accepted that names one of them, oldest first: (t_us, disabled)."""
    out = []
    for r in node.sim_log():
        p = r.get("params", {})
        if r.get("cmd") != "0x2080110b" or r.get("status") != "0x00":
            continue
        named = [(p.get("hClient%d" % i), p.get("hChannel%d" % i)) for i in range(min(2, p.get("numChannels", 0)))]
        if any(k in chans for k in named):
            out.append((r["t_us"], bool(p["bDisable"])))
    return out


def disabled_us(records, start, end):
    """How long of [start, end) (the simulator's clock) a channel whose
    records these are was disabled: enabled before its first."""
    total, since = 0, None
    for t, off in records:
        t = min(max(t, start), end)
        if off and since is None:
            since = t
        elif not off and since is not None:
            total, since = total + t - since, None
    return total + (end - since if since is not None else 0)


def gr_channel_keys(node, pid):
    """(client, channel) of every channel under pid's GR TSGs, as the
    simulator holds them."""
    chans, _ = gr_channels(node, [pid])
    return {(h(c["client"]), h(c["handle"])) for c in chans[pid]}


def t_bpf_gate_share(node):
    """A lying BE leaves the honest BE its share. With the eBPF tracker, an
    honest BE and a peer that lies about its gates (it offers GATE, answers
    every GATE done and reports GATED|LEASED, and never disables its
    channel) beside an LC: the liar leaves the rotation (the log says why,
    gate.possible is false) once the RM's record contradicts its word, the
    runlist goes to the floor, and from then on the honest BE is held off
    for nobody: no GATE to it and no turn after the liar left in the
    agent's log, and in the simulator no disable of its channel beyond one
    for each turn the liar was given before it left, none after. Prints
    the share of time each was disabled, from the simulator's log."""
    node.start_agent(bpf=True)
    lc = node.workload("lc", ["--hold", "60"])
    wait_for(lambda: gr_timeslice(node, lc.pid) == [2048] and all_settled(node), what="the LC alone")
    # The liar first: the older process (the lower pid) has the first turn
    # once the two rotate, so the honest BE is held off for it at least once.
    peer = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "agent", "fake_peer.py")
    liar = subprocess.Popen(["/usr/bin/python3", peer, node.sock, node.dev], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, env=dict(node.env, **BE_ENV), start_new_session=True)
    node.procs.append(liar)
    try:
        gate_share_liar(node, lc, liar)
    finally:
        liar.kill()
        liar.wait()
    lc.kill()
    lc.wait()


def gate_share_liar(node, lc, liar):
    """t_bpf_gate_share from the liar's arrival on."""
    def say(**m):
        peer_say(liar, **m)
    # Offers GATE (and ACTIVITY, as the library), from a new connection.
    say(op="set", hello_flags=0x2 | 0x4, gate_reports=True)
    say(op="reconnect")
    line = peer_alloc(liar)
    lied = {(line["client"], line["channel"])}
    start = node.sim_state()["t_us"]
    say(op="tsg", client=line["client"], tsg=line["tsg"], device=line["device"], engine=1, gpu=0,
        ts=2048, app=2048)
    wait_for(lambda: [t for t in agent_tsgs(node, liar.pid) if t["sources"] == ["bpf", "preempt"]
                      and t["state"] == "converged"], timeout=10, what="the liar's TSG confirmed and set")
    be = node.workload("be", ["--hold", "60"])
    wait_for(lambda: gr_channel_keys(node, be.pid), what="the BE's GR channel")
    honest = gr_channel_keys(node, be.pid)
    expect(len(honest) == 1, "the BE's GR channel: %r" % honest)
    log = node.agent_logs[-1]
    out = wait_for(lambda: [l for l in log_lines(log) if LOG_UNMADE.search(l)
                            and int(LOG_UNMADE.search(l).group(1)) == liar.pid], timeout=30,
                   what="the liar out of the rotation (its gates never made)")[0]
    rows = {t["pid"]: t for t in agent_tsgs(node) if t["engine"] == 1 and t["pid"] in (be.pid, liar.pid)}
    expect(not rows[liar.pid]["gate"]["possible"], "the liar still gateable: %r" % rows[liar.pid])
    # The floor: the honest BE enabled, at severalBeUs, rotating no more.
    wait_for(lambda: schedulable(node, [be.pid]) == {be.pid} and gr_timeslice(node, be.pid) == [1000]
             and not any(t["gate"]["rotating"] for t in gr_rows(node, [be.pid, liar.pid]).values()),
             timeout=10, what="the honest BE enabled at the floor, nobody rotating")
    left = node.sim_state()["t_us"]
    # Held at the floor: sampled for six turns' time.
    end = time.monotonic() + 1.5
    while time.monotonic() < end:
        expect(schedulable(node, [be.pid]) == {be.pid}, "the honest BE disabled after the liar left")
        time.sleep(0.02)
    lines = log_lines(log)
    cut = lines.index(out)
    after = [l for l in lines[cut + 1:] if LOG_TURN.search(l) or
             (LOG_GATE.search(l) and LOG_GATE.search(l).group(2) == "GATE")]
    expect(not after, "a turn or a GATE after the liar left: %r" % after)
    liar_turns = sum(1 for l in lines[:cut] if LOG_TURN.search(l)
                     and int(LOG_TURN.search(l).group(1)) == liar.pid)
    recs = sim_channel_records(node, honest)
    offs = [t for t, off in recs if off]
    expect(len(offs) <= liar_turns, "the honest BE disabled %d times for %d turns of the liar"
           % (len(offs), liar_turns))
    expect(not [t for t in offs if t >= left], "the honest BE disabled after the liar left: %r" % recs)
    expect(not sim_channel_records(node, lied), "the liar's channel was disabled")
    now = node.sim_state()["t_us"]
    be_off = disabled_us(recs, start, now)
    print("disabled share since the liar came (simulator, %d ms): honest BE %.1f %% (%d ms, %d disable(s) "
          "for %d turn(s) of the liar before it left), after it left %d of %d ms; the liar %.1f %%"
          % ((now - start) / 1000, 100.0 * be_off / (now - start), be_off / 1000, len(offs), liar_turns,
             disabled_us(recs, left, now) / 1000, (now - left) / 1000,
             100.0 * disabled_us(sim_channel_records(node, lied), start, now) / (now - start)))


BUSY_PCT = 25


def t_busy_lc(node):
    """busyLcPercent: an LC whose preempt agent reports launches without
    pause (through cuGetProcAddress, as the CUDA runtime reaches them) is
    launch-bound and leaves its BE at baseline (and says why); one that
    launches every 2 ms is not; with the rule off a launch-bound LC
    shortens its BE like any other, and its launches are still read."""
    lib = node.bin("tests/preempt/fake-libcuda/libcuda.so.1")

    def row(pid):
        return proc_row(node, pid) or {}

    # 25 %, not the default 50: a loop that launches without pause is
    # active only while it gets the CPU, and a loaded 2-core machine gives
    # it less (the threshold itself is agent.core_lcbusy's).
    node.start_agent(config={"version": 1, "busyLcPercent": BUSY_PCT})
    be = node.workload("be", ["--hold", "30", "--libcuda", lib, "--launch-every-us", "2000"])
    lc = node.workload("lc", ["--hold", "30", "--libcuda", lib, "--launch-every-us", "0"], prefix=EAGER)
    wait_for(lambda: row(lc.pid).get("launchBound"), timeout=10,
             what="the LC launching without pause counted as launch-bound")
    r = row(lc.pid)
    # At least busyLcPercent: how far above depends on the CPU the loop gets.
    expect(r["launchActivePercent"] >= BUSY_PCT and r["launchesPerSecond"] > 10000, "its launches: %r" % r)
    wait_for(lambda: gr_timeslice(node, be.pid) == [2048] and gr_timeslice(node, lc.pid) == [2048],
             timeout=5, what="the BE and the launch-bound LC at baseline (driver defaults)")
    t = next(t for t in agent_tsgs(node, be.pid) if t["engine"] == 1)
    expect("launch-bound LC" in t["reason"], "reason: %r" % t)
    # The BE's own launches are read too, and change nothing.
    r = row(be.pid)
    expect(r["launchActivePercent"] is not None and 5 <= r["launchActivePercent"] <= 15
           and not r["launchBound"], "the BE launching every 2 ms: %r" % r)
    lc.kill()
    lc.wait()
    # An LC launching every 2 ms (about 10 % active) shortens its BE.
    lc2 = node.workload("lc", ["--hold", "30", "--libcuda", lib, "--launch-every-us", "2000"])
    wait_for(lambda: gr_timeslice(node, be.pid) == [50] and gr_timeslice(node, lc2.pid) == [100000],
             timeout=10, what="BE at 50, LC at 100000")
    wait_for(lambda: row(lc2.pid).get("launchActivePercent") is not None, timeout=5,
             what="the LC's launches read")
    time.sleep(1.5)
    r = row(lc2.pid)
    expect(not r["launchBound"] and r["launchActivePercent"] < 30, "an LC every 2 ms: %r" % r)
    expect(gr_timeslice(node, be.pid) == [50], "BE still at 50")
    lc2.kill()
    lc2.wait()
    # The rule off: read, never judged.
    node.stop_agent()
    node.start_agent(config={"version": 1, "busyLcPercent": 0})
    lc3 = node.workload("lc", ["--hold", "30", "--libcuda", lib, "--launch-every-us", "0"], prefix=EAGER)
    wait_for(lambda: gr_timeslice(node, be.pid) == [50], timeout=10, what="BE at 50, rule off")
    # Over the share that would make it launch-bound with the rule on (how
    # far over depends on the CPU its loop gets).
    wait_for(lambda: (row(lc3.pid).get("launchActivePercent") or 0) >= BUSY_PCT, timeout=10,
             what="the launches read with the rule off")
    time.sleep(1.0)
    expect(not row(lc3.pid)["launchBound"], "rule off: %r" % row(lc3.pid))
    expect(gr_timeslice(node, be.pid) == [50], "BE still at 50 with the rule off")


LOG_TURN = re.compile(r"rotation: GPU \d+ engine 1: turn of pid (\d+) \((\d+) processes; "
                      r"served ms:([ \d=]*)\)")
LOG_BUSY = re.compile(r"pid \d+ \(.*\): LC launch-bound")
LOG_GATE = re.compile(r"pid (\d+): COMMAND \d+ (GATE|UNGATE) TSG")


def log_lines(path, upto=None):
    with open(path) as f:
        return f.read(upto).splitlines() if upto is not None else f.read().splitlines()


def log_time(line):
    """A log line's time, in ms (of the day: a test spans no midnight)."""
    hms = line.split("T", 1)[1].split("Z", 1)[0]
    h, m, sec = hms.split(":")
    return int(round((int(h) * 3600 + int(m) * 60 + float(sec)) * 1000))


def check_turn_order(path, pids):
    """Every turn the agent gave (its log) went to the process it had served
    least, the one whose turn just ended aside (docs/policy.md,
    "Rotation"), by the agent's own account in the turn's line; and that
    account follows the log: between two turns of one rotation only the
    holder's served time grows, by about the time between the lines, and a
    turn cut short by a launch-bound LC counts only up to the verdict.
    Returns how many turns."""
    prev, prev_t, cut_t, n = None, None, None, 0
    for line in log_lines(path):
        if LOG_BUSY.search(line):
            cut_t = log_time(line)
            continue
        m = LOG_TURN.search(line)
        if not m:
            continue
        pid = int(m.group(1))
        served = {int(k): int(v) for k, v in (x.split("=") for x in m.group(3).split())}
        where = "%s: turn %d to pid %d, served %r" % (os.path.basename(path), n, pid, served)
        others = [v for q, v in served.items() if q != pid and
                  (prev is None or q != prev[0] or cut_t is not None or len(served) == 1)]
        expect(pid in served and all(served[pid] <= v for v in others),
               "%s: not the least served" % where)
        if prev is not None and int(m.group(2)) == len(pids) and set(served) == set(prev[1]):
            held = (cut_t or log_time(line)) - prev_t
            grew = served[prev[0]] - prev[1][prev[0]]
            # 20 ms: the line's time is taken after the pass's clock read.
            expect(grew >= held - 20,
                   "%s: the last holder %d held %d ms, served %d more" % (where, prev[0], held, grew))
            expect(all(served[q] >= prev[1][q] for q in served), "%s: served went back" % where)
        prev, prev_t, cut_t = (pid, served), log_time(line), None
        n += 1
    return n


def check_stops_at_once(path, eager, pids, upto, lease_ms=500):
    """From the agent's verdict on the launch-bound LC (in the log) until the
    test let it go (offset upto): every BE gated at the verdict is ungated,
    and no BE is gated again (not even a lease renewal) nor given a turn.
    Order, not time: the passes may come late on a loaded machine, never in
    another order. A BE whose last GATE (or renewal) was sent about a lease
    or more before the verdict may get no UNGATE: its own preempt agent
    ended that gate when the lease ran out and said so (a starved agent
    renews late), so there is nothing left to end. The margin (50 ms) is how
    far a line's time can trail the pass that sent it. Returns the BEs gated
    at the verdict by the agent's commands."""
    lines = log_lines(path, upto)
    verdict = next((i for i, l in enumerate(lines)
                    if "pid %d (" % eager in l and "LC launch-bound" in l), None)
    expect(verdict is not None, "%s: the agent judged pid %d launch-bound"
           % (os.path.basename(path), eager))
    gated = {}
    for line in lines[:verdict]:
        m = LOG_GATE.search(line)
        if m and int(m.group(1)) in pids:
            gated[int(m.group(1))] = log_time(line) if m.group(2) == "GATE" else None
    held = {q for q, t in gated.items() if t is not None}
    want = {q for q in held if gated[q] + lease_ms - 50 > log_time(lines[verdict])}
    ungated = set()
    for line in lines[verdict + 1:]:
        m = LOG_GATE.search(line)
        if m and int(m.group(1)) in pids:
            expect(m.group(2) == "UNGATE", "%s: a BE gated beside a launch-bound LC: %s"
                   % (os.path.basename(path), line))
            ungated.add(int(m.group(1)))
        expect(not LOG_TURN.search(line), "%s: a turn beside a launch-bound LC: %s"
               % (os.path.basename(path), line))
    expect(want <= ungated, "%s: after the verdict the agent ungated %r, gated within a lease were %r"
           % (os.path.basename(path), sorted(ungated), sorted(want)))
    return held


def t_busy_lc_rotate(node):
    """Three BEs rotating beside a micro LC while a launch-bound LC comes and
    goes and the node agent restarts under it: the rotation stops at once
    (the agent ungates every gated BE and gates none; the simulator shows
    every BE enabled, the runlist at libcuda's values) while the
    launch-bound LC is there, no BE gated meanwhile, and resumes when it
    leaves; every turn goes to the BE that waited longest; and through
    every change no BE stays disabled longer than its wait of two turns
    plus one lease."""
    lib = node.bin("tests/preempt/fake-libcuda/libcuda.so.1")
    # The looping LC's launch-active share is the share of a CPU it gets:
    # 75-97 % alone, far less beside four busy loops on two cores. What is
    # checked here is what the verdict does, not where its threshold sits
    # (agent.core_lcbusy, e2e.busy_lc): a threshold any loop that gets some
    # CPU reaches, and the micro LC (no launches reported) never does.
    node.start_agent(config={"version": 1, "busyLcPercent": 20})
    bes = [node.workload("be", ["--hold", "90"]) for _ in range(3)]
    lc = node.workload("lc", ["--hold", "90"])
    pids = [p.pid for p in bes]
    worst = [0.0, "nothing"]
    seen = {}  # what the last check saw, for a failure's message

    def watch(pred, what, timeout):
        """wait_for(pred), sampling the longest disabled channel meanwhile."""
        def step():
            w = longest_disabled_ms(node, pids)
            if w > worst[0]:
                worst[0], worst[1] = w, what
            return pred()
        try:
            return wait_for(step, timeout=timeout, step=0.01, what=what)
        except Fail as e:
            raise Fail("%s; last seen: %r; the agent's GR TSGs: %r" % (
                e, seen, [(t["pid"], t["class"], t["timeslice"], t["gate"], t["state"])
                          for t in agent_tsgs(node) if t["engine"] == 1]))

    def rotating():
        s = schedulable(node, pids)
        ts = {pid: gr_timeslice(node, pid) for pid in pids}
        seen.update(schedulable=sorted(s), timeslices=ts)
        return len(s) == 1 and all(v == [50] for v in ts.values())

    def at_baseline():
        s = schedulable(node, pids)
        ts = {pid: gr_timeslice(node, pid) for pid in pids + [lc.pid]}
        seen.update(schedulable=sorted(s), timeslices=ts)
        return s == set(pids) and all(v == [2048] for v in ts.values())

    def turns_after(n):
        """Waits for n more turns in the agent's log (its own clock sets
        their pace, however late it runs)."""
        log = node.agent_logs[-1]
        base = sum(1 for l in log_lines(log) if LOG_TURN.search(l))
        watch(lambda: sum(1 for l in log_lines(log) if LOG_TURN.search(l)) >= base + n,
              "%d more turns" % n, 30)

    watch(rotating, "three BEs rotating", 30)
    turns_after(4)
    for i, how in enumerate((None, signal.SIGTERM, signal.SIGKILL)):
        eager = node.workload("lc", ["--hold", "90", "--libcuda", lib, "--launch-every-us", "0"],
                              prefix=EAGER)
        watch(lambda: (proc_row(node, eager.pid) or {}).get("launchBound"),
              "a launch-bound LC judged so (%d)" % i, 30)
        watch(at_baseline, "a launch-bound LC arrived (%d)" % i, 30)
        # It came to a rotating node: two BEs were gated at the verdict.
        gated = check_stops_at_once(node.agent_logs[-1], eager.pid, pids,
                                    os.path.getsize(node.agent_logs[-1]))
        expect(len(gated) == 2, "gated at the verdict (%d): %r" % (i, sorted(gated)))
        if how is not None:
            node.stop_agent(how)
            watch(at_baseline, "agent stopped (%s) beside a launch-bound LC" % how.name, 30)
            node.start_agent(config={"version": 1, "busyLcPercent": 20})
            # Back, its restart grace over and the LC judged again.
            watch(lambda: (proc_row(node, eager.pid) or {}).get("launchBound"),
                  "the restarted agent judged the LC launch-bound (%d)" % i, 30)
            watch(at_baseline, "at baseline after the restart (%d)" % i, 30)
        # Held at baseline while the LC stays (sampled, then from the log).
        end = time.monotonic() + 1.0
        watch(lambda: not at_baseline() or time.monotonic() > end, "a second beside the LC", 30)
        expect(at_baseline(), "still at baseline beside the launch-bound LC (%d)" % i)
        upto = os.path.getsize(node.agent_logs[-1])
        check_stops_at_once(node.agent_logs[-1], eager.pid, pids, upto)
        eager.kill()
        eager.wait()
        watch(rotating, "the launch-bound LC left (%d)" % i, 30)
        turns_after(4)
    turns = [check_turn_order(log, pids) for log in node.agent_logs]
    expect(all(n >= 4 for n in turns), "turns in each agent's life: %r" % turns)
    # A BE waits two turns of 250 ms (the policy's default rotatePeriodMs)
    # between its own; a change that forgot it would leave it to its lease
    # (500 ms) after the last renewal. The bound is wait plus lease: the
    # room between them is for a loaded machine's late passes.
    expect(worst[0] < 2 * 250 + 500, "a BE stayed disabled %.0f ms (during: %s)" % tuple(worst))
    print("turns: %r; longest disabled: %.0f ms (during: %s)" % ((turns,) + tuple(worst)))


SCENARIOS = {"classes": t_classes, "restart": t_restart, "failopen": t_failopen,
             "many": t_many, "nonroot": t_nonroot, "deadline": t_deadline,
             "direct_interleave": t_direct_interleave, "direct_forced": t_direct_forced,
             "direct_hang": t_direct_hang, "direct_nocaps": t_direct_nocaps,
             "bpf_bare": t_bpf_bare, "bpf_forms": t_bpf_forms, "bpf_restart": t_bpf_restart,
             "bpf_liar": t_bpf_liar, "bpf_exit": t_bpf_exit, "bpf_gate": t_bpf_gate,
             "bpf_restart_chans": t_bpf_restart_chans, "bpf_gate_share": t_bpf_gate_share,
             "liar": t_liar,
             "rotate": t_rotate, "busy_lc": t_busy_lc,
             "busy_lc_rotate": t_busy_lc_rotate, "verify": t_verify}


def main():
    return run_scenario(SCENARIOS, Node)


if __name__ == "__main__":
    sys.exit(main())
