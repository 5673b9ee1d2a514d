#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""e2e_memory.py - video-memory QoS of a node without a GPU (docs/policy.md,
"Memory").

Real parts only, as in e2e.py: the FUSE GPU simulator with a small heap
(--fb-mib), the real node agent (standalone), the real preempt agent
injected by `gpuqos run`, fakecuda allocating video memory as libcuda does
(--alloc-mib, --alloc-wait) and gpuqosctl. What was allocated is read from
the simulator's own state and fakecuda's answers, never from the agent.

Usage: e2e_memory.py --build BUILD SCENARIO      (exit 77 = skipped)
"""
import os
import re
import select
import subprocess
import sys
import time
import urllib.request

from gpuqos_test import Failure, free_port
from gpuqos_test import check as expect
from gpuqos_test import wait_for
from gpuqos_test.node import Node, proc_row, run_scenario

MI = 1 << 20
FB_MIB = 1024


def lines(p, n, timeout=20.0):
    """The next n lines fakecuda prints, split in words."""
    buf = getattr(p, "gq_buf", b"")
    end = time.monotonic() + timeout
    while buf.count(b"\n") < n:
        left = end - time.monotonic()
        if left <= 0 or not select.select([p.stdout], [], [], left)[0]:
            raise Failure("fakecuda printed %r, then nothing for %.0f s" % (buf, timeout))
        chunk = os.read(p.stdout.fileno(), 4096)
        if not chunk:
            raise Failure("fakecuda ended after %r: %s" % (buf, p.stderr.read()))
        buf += chunk
    out = buf.split(b"\n")
    p.gq_buf = b"\n".join(out[n:])
    return [line.decode().split() for line in out[:n]]


def mem(node, pid, gpu=0):
    rows = (proc_row(node, pid) or {}).get("memory") or []
    return next((m for m in rows if m["gpu"] == gpu), None)


def fb_used(node):
    return node.sim_state()["fb"]["usedBytes"][0]


def allocating(node, cls, sizes):
    """fakecuda under `gpuqos run --class cls`: its allocations wait for
    a file (go()) so they come after its budget."""
    go = os.path.join(node.dir, "go-%s-%d" % (cls, len(node.procs)))
    p = node.workload(cls, ["--alloc-mib", ",".join(str(s) for s in sizes), "--alloc-wait", go,
                            "--hold", "60"], stdout=subprocess.PIPE)
    return p, lambda: open(go, "w").close()


def scrape(port):
    return urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=5).read().decode()


def t_memory_reserve(node):
    """The LC reserve on a GPU whose size the agent read from the RM: a
    1024 MiB heap with 512 MiB kept for LCs leaves the BEs 512 MiB. A BE
    is budgeted 512 MiB, its FB info shows 512 MiB, its 256+256 MiB go and
    the next 64 MiB are refused by its preempt agent (the RM, which has
    room, never sees them). An LC that starts after the BE filled its part
    still gets its 448 MiB from the RM. A second BE then gets a budget of
    nothing (the BEs hold all they may) and is refused its first 16 MiB.
    gpuqosctl and /metrics show the GPU's size and the reserve."""
    port = free_port()
    node.start_agent(config={"version": 1, "memory": {"lcReserve": "512Mi"}},
                     extra=["--metrics-address", "127.0.0.1:%d" % port, "--health-address", "off"])
    g = node.ctl("list")["agent"]["gpus"][0]
    expect(g["memoryBytes"] == FB_MIB * MI and g["lcReserveBytes"] == 512 * MI, "the GPU: %r" % g)

    be, be_go = allocating(node, "be", [256, 256, 64])
    wait_for(lambda: (mem(node, be.pid) or {}).get("limitBytes") == 512 * MI,
             what="the BE's 512 MiB budget")
    wait_for(lambda: (mem(node, be.pid) or {}).get("enforcedBytes") == 512 * MI,
             what="its preempt agent enforcing it")
    be_go()
    out = lines(be, 4)
    expect(out == [["alloc", "256", "NV_OK"], ["alloc", "256", "NV_OK"],
                   ["alloc", "64", "NV_ERR_NO_MEMORY"],
                   ["fbinfo", str(512 * 1024), "0", str(512 * 1024), "NV_OK"]],
           "the BE's allocations and FB info: %r" % out)
    expect(fb_used(node) == 512 * MI, "the RM holds %r" % node.sim_state()["fb"])
    wait_for(lambda: (mem(node, be.pid) or {}).get("refused") == 1, what="the refusal reported")

    lc, lc_go = allocating(node, "lc", [448])
    lc_go()
    out = lines(lc, 2)
    expect(out[0] == ["alloc", "448", "NV_OK"], "the LC's allocation: %r" % out)
    expect(fb_used(node) == 960 * MI, "the RM holds %r" % node.sim_state()["fb"])
    wait_for(lambda: (mem(node, lc.pid) or {}).get("usedBytes") == 448 * MI,
             what="the LC's report")
    # The BE holds more than the BEs may now (1024 - 512 - 448 = 64): it
    # keeps what it holds and gets no more.
    wait_for(lambda: (mem(node, be.pid) or {}).get("limitBytes") == 512 * MI and
             (mem(node, be.pid) or {}).get("reportedTotalBytes") == 64 * MI,
             what="the BE held at what it holds")

    be2, be2_go = allocating(node, "be", [16])
    wait_for(lambda: (mem(node, be2.pid) or {}).get("enforcedBytes") == 0,
             what="the second BE's budget of nothing enforced")
    be2_go()
    out = lines(be2, 1)
    expect(out == [["alloc", "16", "NV_ERR_NO_MEMORY"]], "the second BE: %r" % out)
    expect(fb_used(node) == 960 * MI, "nothing more reached the RM: %r" % node.sim_state()["fb"])

    text = scrape(port)
    for name, v in (("gpu_total_bytes", FB_MIB * MI), ("lc_reserve_bytes", 512 * MI)):
        expect(re.search(r'^gpuqos_memory_%s\{gpu="0"[^}]*\} %d$' % (name, v), text, re.M),
               "gpuqos_memory_%s: %s" % (name, [l for l in text.splitlines() if name in l]))


def uncapped(node, pid=None):
    return [r for r in node.ctl("list").get("uncappedMemory", []) if pid is None or r["pid"] == pid]


def t_memory_uncapped(node):
    """Processes without a preempt agent that counts memory: the agent reads
    what the RM counts per process (GET_PIDS, GET_PID_INFO, every 3 s) and
    shows it as used, not capped, in gpuqosctl list (JSON and text) and
    /metrics; a process whose preempt agent counts memory, and the agent
    itself, are not among them; a process that ends leaves the list; a GPU
    whose count cannot be read says why, in words, and keeps its last
    reading (here with none uncapped): a process started meanwhile is not
    shown until a reading succeeds."""
    port = free_port()
    node.start_agent(config={"version": 1, "memory": {"defaults": {"best-effort": "512Mi"}}},
                     extra=["--metrics-address", "127.0.0.1:%d" % port, "--health-address", "off"])
    be, be_go = allocating(node, "be", [64])
    wait_for(lambda: (mem(node, be.pid) or {}).get("enforcedBytes") == 512 * MI,
             what="the BE's budget enforced")
    be_go()
    expect(lines(be, 1) == [["alloc", "64", "NV_OK"]], "the BE's allocation")
    bare = node.workload("be", ["--alloc-mib", "100", "--hold", "60"], inject=False,
                         stdout=subprocess.PIPE)
    expect(lines(bare, 1) == [["alloc", "100", "NV_OK"]], "the bare process's allocation")
    rows = wait_for(lambda: uncapped(node, bare.pid), timeout=20,
                    what="the bare process's memory read from the RM")
    expect(rows == [{"gpu": 0, "uuid": rows[0]["uuid"], "pid": bare.pid, "usedBytes": 100 * MI,
                     "why": "no preempt agent"}] and rows[0]["uuid"],
           "the row: %r" % rows)
    pids = {r["pid"] for r in uncapped(node)}
    expect(be.pid not in pids and node.agent.pid not in pids,
           "neither the counted BE nor the agent: %r" % pids)
    out = subprocess.run([node.bin("agent/cli/gpuqosctl"), "list"], capture_output=True,
                         text=True, env=node.env, timeout=20).stdout
    expect("video memory used, not capped" in out and
           re.search(r"^0\s+%d\s+-\s+100Mi\s+no preempt agent$" % bare.pid, out, re.M),
           "gpuqosctl list: %s" % out)
    def samples():
        return [l for l in scrape(port).splitlines()
                if l.startswith("gpuqos_memory_uncapped_used_bytes{")]

    mine = wait_for(samples, what="the sample in /metrics (a snapshot behind at most)")
    expect(len(mine) == 1 and re.match(r'gpuqos_memory_uncapped_used_bytes\{gpu="0",pid="%d",'
                                       r'UUID="GPU-[^"]+",Hostname="[^"]+"\} %d$'
                                       % (bare.pid, 100 * MI), mine[0]),
           "the sample: %r" % mine)
    bare.kill()
    bare.wait()
    wait_for(lambda: not uncapped(node, bare.pid), timeout=20, what="the ended process gone")
    node.sim_control("fail 2080018d 56")
    bare2 = node.workload("be", ["--alloc-mib", "32", "--hold", "60"], inject=False,
                          stdout=subprocess.PIPE)
    lines(bare2, 1)
    wait_for(lambda: node.ctl("list")["agent"]["gpus"][0].get("processesError") ==
             "GET_PIDS (0x2080018d): NV_ERR_NOT_SUPPORTED (0x56)", timeout=20,
             what="the failure in words")
    expect(not uncapped(node), "nothing new shown from a GPU not read: %r" % uncapped(node))
    log = open(node.agent_logs[-1]).read()
    expect(log.count("cannot read what the RM counts per process") == 1, "said once: %s" % log[-3000:])
    node.sim_control("clear")
    wait_for(lambda: uncapped(node, bare2.pid), timeout=20, what="read again after the failure")


def gpu0(node):
    return node.ctl("list")["agent"]["gpus"][0]


def t_memory_uncapped_reserve(node):
    """What a process without a preempt agent holds counts against the BEs'
    part: on the 1024 MiB heap with 512 MiB kept for LCs, a bare process
    holding 128 MiB (read from the RM) leaves the BEs 384 MiB. A BE is
    budgeted 384 MiB, its FB info shows 384 MiB, its 256+128 MiB go and
    the next 64 MiB are refused by its preempt agent. When the bare
    process ends, the next reading gives the 128 MiB back: the BE's
    preempt agent is sent (and enforces) 512 MiB. gpuqosctl shows the
    count per GPU (uncappedBytes, bePartBytes)."""
    node.start_agent(config={"version": 1, "memory": {"lcReserve": "512Mi"}})
    bare = node.workload("be", ["--alloc-mib", "128", "--hold", "60"], inject=False,
                         stdout=subprocess.PIPE)
    expect(lines(bare, 1) == [["alloc", "128", "NV_OK"]], "the bare process's allocation")
    g = wait_for(lambda: (lambda g: g.get("uncappedBytes") == 128 * MI and g)(gpu0(node)),
                 timeout=20, what="the bare process's 128 MiB counted")
    expect(g["bePartBytes"] == 384 * MI and g["lcUsedBytes"] == 0 and
           g["lcReserveBytes"] == 512 * MI, "the GPU: %r" % g)

    be, be_go = allocating(node, "be", [256, 128, 64])
    wait_for(lambda: (mem(node, be.pid) or {}).get("enforcedBytes") == 384 * MI,
             what="the BE's 384 MiB budget enforced by its preempt agent")
    be_go()
    out = lines(be, 4)
    expect(out == [["alloc", "256", "NV_OK"], ["alloc", "128", "NV_OK"],
                   ["alloc", "64", "NV_ERR_NO_MEMORY"],
                   ["fbinfo", str(384 * 1024), "0", str(384 * 1024), "NV_OK"]],
           "the BE's allocations and FB info: %r" % out)
    expect(fb_used(node) == 512 * MI, "the RM holds %r" % node.sim_state()["fb"])
    pids = {r["pid"] for r in uncapped(node)}
    expect(pids == {bare.pid}, "only the bare process is uncapped, the BE not twice: %r" % pids)

    bare.kill()
    bare.wait()
    wait_for(lambda: (mem(node, be.pid) or {}).get("enforcedBytes") == 512 * MI,
             timeout=20, what="the BE's budget back at 512 MiB after the next reading")
    m = mem(node, be.pid)
    expect(m["limitBytes"] == 512 * MI and m["reportedTotalBytes"] == 512 * MI,
           "the BE's memory: %r" % m)
    g = gpu0(node)
    expect(g["uncappedBytes"] == 0 and g["bePartBytes"] == 512 * MI, "the GPU: %r" % g)


SCENARIOS = {"memory_reserve": t_memory_reserve, "memory_uncapped": t_memory_uncapped,
             "memory_uncapped_reserve": t_memory_uncapped_reserve}


def main():
    return run_scenario(SCENARIOS, lambda build: Node(build, sim_extra=("--fb-mib", str(FB_MIB))))


if __name__ == "__main__":
    sys.exit(main())
