#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""test_gpuinfo.py - the node agent's GPU table against the simulator.

Real parts only, as in tests/e2e: gpuqos-sim with two GPUs, the real
gpuqos-agent (standalone, --nvidiactl at the simulator), fakecuda
workloads under `gpuqos run`, gpuqosctl. The UUIDs expected are the ones
the simulator's `state` file shows, never the agent's own idea.

Usage: test_gpuinfo.py --build BUILD SCENARIO   (exit 77 = skipped)
"""
import json
import signal
import subprocess
import sys
import time

# The test library (tests/lib, PYTHONPATH from ctest).
from gpuqos_test import check as expect
from gpuqos_test import wait_for
from gpuqos_test.node import Node, agent_tsgs, gr_timeslice, run_scenario

SKIP = 77
ATTACHED, ID_INFO, UUID_FROM_ID = "0x00000201", "0x00000205", "0x00000275"


def sim_gpus(node):
    """deviceInstance -> the simulator's attached GPU entry."""
    return {g["deviceInstance"]: g for g in node.sim_state()["attached_gpus"]}


def agent_calls(node, cmd):
    return [r for r in node.sim_log() if r.get("cmd") == cmd and r["pid"] == node.agent.pid]


def check_table(node, lst):
    """The agent's "gpus" array is the simulator's GPU table."""
    want = sim_gpus(node)
    got = {g["deviceInstance"]: g for g in lst["agent"]["gpus"]}
    expect(sorted(got) == sorted(want), "device instances %r vs %r" % (sorted(got), sorted(want)))
    for di, g in want.items():
        expect(got[di]["uuid"] == g["uuid"] and got[di]["pciBusId"] == g["pciBusId"] and
               int(got[di]["gpuId"], 16) == int(g["gpuId"], 16),
               "GPU %d: agent %r, simulator %r" % (di, got[di], g))
    expect(lst["agent"]["gpusError"] is None, "no error: %r" % lst["agent"]["gpusError"])


def check_tsg_uuids(node, pids):
    """Every TSG of pids names the UUID of its device instance."""
    uuids = {di: g["uuid"] for di, g in sim_gpus(node).items()}
    rows = [t for t in agent_tsgs(node) if t["pid"] in pids]
    expect(rows, "TSGs of %r listed" % pids)
    for t in rows:
        expect(t["gpuUuid"] == uuids.get(t["gpu"]),
               "TSG %s of pid %d on GPU %r: gpuUuid %r, simulator %r" %
               (t["tsg"], t["pid"], t["gpu"], t["gpuUuid"], uuids.get(t["gpu"])))
    return rows


def t_tool(node):
    """gpuqos-gpus prints the simulator's table, and fails cleanly
    without a driver or with an RM error."""
    p = subprocess.run([node.bin("tests/gpuinfo/gpuqos-gpus"), "--dev", node.dev],
                       capture_output=True, text=True, timeout=20, env=node.env)
    expect(p.returncode == 0, "exit %d: %s" % (p.returncode, p.stderr))
    out = json.loads(p.stdout)
    want = sim_gpus(node)
    expect(out["ok"] and out["error"] is None and len(out["gpus"]) == 2, repr(out))
    for g in out["gpus"]:
        w = want[g["deviceInstance"]]
        expect((g["uuid"], g["pciBusId"]) == (w["uuid"], w["pciBusId"]), "%r vs %r" % (g, w))
    expect(want[0]["uuid"] != want[1]["uuid"], "two distinct UUIDs")
    # The query frees its client: nothing is left in the simulator.
    wait_for(lambda: node.sim_state()["clients"] == [], what="the tool's client freed")
    p = subprocess.run([node.bin("tests/gpuinfo/gpuqos-gpus"), "--dev", "/nonexistent/nvidiactl"],
                       capture_output=True, text=True, timeout=20, env=node.env)
    out = json.loads(p.stdout)
    expect(p.returncode == 1 and not out["ok"] and out["gpus"] == [] and
           "No such file or directory" in out["error"], repr((p.returncode, out)))
    node.sim_control("fail 0x275 0x59")
    p = subprocess.run([node.bin("tests/gpuinfo/gpuqos-gpus"), "--dev", node.dev],
                       capture_output=True, text=True, timeout=20, env=node.env)
    node.sim_control("clear")
    out = json.loads(p.stdout)
    expect(p.returncode == 0 and [g["uuid"] for g in out["gpus"]] == [None, None] and
           "GET_UUID_FROM_GPU_ID (0x275) for gpuId 0x6: NV_ERR_OPERATING_SYSTEM (0x59)" in out["error"],
           "an RM failure named in words: %r" % out)


def t_two_gpus(node):
    """A BE on GPU 0 and an LC on GPU 1: each TSG names its own GPU's UUID,
    and the LC does not shorten the BE on the other GPU; a BE that joins
    the LC on GPU 1 is shortened."""
    node.start_agent()
    lst = node.ctl("list")
    check_table(node, lst)
    for c in (ATTACHED, ID_INFO, UUID_FROM_ID):
        calls = agent_calls(node, c)
        expect(calls and all(r["status"] == "0x00" for r in calls), "agent issued %s: %r" % (c, calls))
    be0 = node.workload("be", ["--gpu", "0", "--hold", "30"])
    lc1 = node.workload("lc", ["--gpu", "1", "--hold", "30"])
    wait_for(lambda: len(agent_tsgs(node, be0.pid)) == 4 and len(agent_tsgs(node, lc1.pid)) == 4,
             what="both workloads' TSGs listed")
    rows = check_tsg_uuids(node, {be0.pid, lc1.pid})
    expect({t["gpu"] for t in rows if t["pid"] == be0.pid} == {0} and
           {t["gpu"] for t in rows if t["pid"] == lc1.pid} == {1}, "device instances of the TSGs")
    expect(len({t["gpuUuid"] for t in rows}) == 2, "the two GPUs are told apart")
    wait_for(lambda: all(t["state"] in ("converged", "unmanaged") for t in agent_tsgs(node)),
             what="agent converged")
    time.sleep(0.5)
    expect(gr_timeslice(node, be0.pid) == [2048],
           "BE on GPU 0 untouched by the LC on GPU 1: %r" % gr_timeslice(node, be0.pid))
    be1 = node.workload("be", ["--gpu", "1", "--hold", "30"])
    wait_for(lambda: gr_timeslice(node, be1.pid) == [50], what="BE on GPU 1 shortened beside the LC")
    check_tsg_uuids(node, {be1.pid})
    expect(gr_timeslice(node, be0.pid) == [2048], "BE on GPU 0 still at 2048")


def t_failure(node):
    """An RM error leaves UUIDs unknown (null) and is shown in words;
    the agent works on; SIGHUP queries again and fills them in."""
    node.sim_control("fail 0x201 0x56")
    node.start_agent()
    lst = node.ctl("list")
    expect(lst["agent"]["gpus"] == [] and
           "GET_ATTACHED_IDS (0x201): NV_ERR_NOT_SUPPORTED (0x56)" in (lst["agent"]["gpusError"] or ""),
           "failure in words: %r" % lst["agent"]["gpusError"])
    expect("NV_ERR_NOT_SUPPORTED" in open(node.agent_logs[-1]).read(), "logged with the status")
    wait_for(lambda: node.sim_state()["clients"] == [], what="the failed query freed its client")
    be = node.workload("be", ["--gpu", "1", "--hold", "30"])
    wait_for(lambda: len(agent_tsgs(node, be.pid)) == 4, what="BE listed")
    expect(all(t["gpuUuid"] is None and t["gpu"] == 1 for t in agent_tsgs(node, be.pid)),
           "UUID unknown, device instance still known: %r" % agent_tsgs(node, be.pid))
    node.sim_control("clear")
    node.agent.send_signal(signal.SIGHUP)
    wait_for(lambda: all(t["gpuUuid"] for t in agent_tsgs(node, be.pid)), what="UUIDs after SIGHUP")
    check_tsg_uuids(node, {be.pid})
    check_table(node, node.ctl("list"))


def t_hang(node):
    """GET_ATTACHED_IDS takes 4 s: start-up waits 2 s at most, the loop
    answers meanwhile, and the late answer still fills the table."""
    node.sim_control("latency 0x201 4000000")
    t0 = time.time()
    node.start_agent()
    node.ctl("list")  # queued behind the bounded start-up wait at most
    expect(time.time() - t0 < 3.5, "start-up waited %.1f s" % (time.time() - t0))
    t1 = time.time()
    lst = node.ctl("list")
    expect(time.time() - t1 < 1.0, "ctl list answers while the query hangs")
    expect(lst["agent"]["gpus"] == [] and time.time() - t0 < 4.0,
           "no table yet: %r" % lst["agent"]["gpus"])
    log = open(node.agent_logs[-1]).read()
    expect("no answer from" in log and "within 2000 ms" in log, "the deadline is logged")
    wait_for(lambda: len(node.ctl("list")["agent"]["gpus"]) == 2, timeout=10,
             what="the late answer taken")
    check_table(node, node.ctl("list"))
    node.sim_control("clear")


def t_unknown_device(node):
    """The first query fails once; a TSG on a device instance the table
    lacks makes the agent ask again, without waiting for the retry timer."""
    node.sim_control("fail 0x201 0x56 1")
    node.start_agent()
    expect(node.ctl("list")["agent"]["gpus"] == [], "first query failed")
    t0 = time.time()
    be = node.workload("be", ["--gpu", "1", "--hold", "30"])
    wait_for(lambda: len(agent_tsgs(node, be.pid)) == 4 and
             all(t["gpuUuid"] for t in agent_tsgs(node, be.pid)), timeout=10,
             what="UUIDs once a TSG named device instance 1")
    expect(time.time() - t0 < 10, "asked again at once, not after the 30 s retry")
    check_tsg_uuids(node, {be.pid})
    expect(len(agent_calls(node, ATTACHED)) == 2, "two queries: %r" % agent_calls(node, ATTACHED))


FB_GET_INFO_V2 = "0x20801303"


def t_memory(node):
    """Each GPU's video memory from the RM (docs/gpuinfo.md): the agent asks
    FB_GET_INFO_V2 on a device and subdevice of its own client, frees them,
    and lists each GPU's heap (the simulator's) with the LC reserve kept
    there; when the RM does not answer, the size is null with the reason
    in words, logged, and no reserve is kept; SIGHUP asks again."""
    node.start_agent(config={"version": 1, "memory": {"lcReserve": "25%"}})
    total = node.sim_state()["fb"]["totalBytes"]

    def gpus():
        return {g["deviceInstance"]: g for g in node.ctl("list")["agent"]["gpus"]}

    got = gpus()
    expect(sorted(got) == [0, 1] and
           all(g["memoryBytes"] == total and g["lcReserveBytes"] == total // 4 and
               "memoryError" not in g for g in got.values()), "sizes: %r" % got)
    calls = agent_calls(node, FB_GET_INFO_V2)
    expect(len(calls) == 2 and all(r["status"] == "0x00" for r in calls) and
           len({r["object"] for r in calls}) == 2, "one FB_GET_INFO_V2 per GPU: %r" % calls)
    wait_for(lambda: node.sim_state()["clients"] == [], what="its device objects freed")
    node.sim_control("fail 20801303 56")
    node.agent.send_signal(signal.SIGHUP)
    wait_for(lambda: all(g["memoryBytes"] is None for g in gpus().values()),
             what="sizes unknown after the failed query")
    got = gpus()
    expect(all(g["lcReserveBytes"] is None and
               g["memoryError"] == "FB_GET_INFO_V2 (0x20801303): NV_ERR_NOT_SUPPORTED (0x56)"
               and g["uuid"] for g in got.values()), "the reason, no reserve: %r" % got)
    log = open(node.agent_logs[-1]).read()
    expect("GPU device instance 1: its video-memory size is not known (FB_GET_INFO_V2 "
           "(0x20801303): NV_ERR_NOT_SUPPORTED (0x56)): no LC reserve is kept on it" in log,
           "logged: %s" % log[-2000:])
    node.sim_control("clear")
    node.agent.send_signal(signal.SIGHUP)
    wait_for(lambda: all(g["memoryBytes"] == total for g in gpus().values()), what="sizes again")


SCENARIOS = {"memory": t_memory, "tool": t_tool, "two_gpus": t_two_gpus, "failure": t_failure, "hang": t_hang,
             "unknown_device": t_unknown_device}


def main():
    return run_scenario(SCENARIOS, lambda build: Node(build, gpus=2))


if __name__ == "__main__":
    sys.exit(main())
