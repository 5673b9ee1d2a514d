# SPDX-License-Identifier: Apache-2.0
"""gpuqosctl against a fake control socket (fake_ctl.py).

usage: test_gpuqosctl.py GPUQOSCTL GROUP
GROUP: requests | table | json | exit_codes | malformed | all

Checks the request each subcommand sends, what is printed for the answer
shapes of docs/ctl.md, and that every bad argument, refusal, unreachable
agent or malformed answer ends in the documented exit status, never a crash
(the binary is built with AddressSanitizer and UBSan).
"""
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

from gpuqos_test import check, run_main
from gpuqos_test.fake_ctl import FakeCtl

CTL = None

AGENT = {"version": "0.1.0", "mode": "standalone", "pid": 77, "uptimeS": 3600,
         "peers": 2, "tsgs": 3, "config": "/etc/gpuqos/agent.conf"}


def tsg(**kw):
    t = {"pid": 1234, "comm": "python3", "gpu": 0, "engine": 1, "engineName": "GR0",
         "client": "0xc1d00004", "tsg": "0x5c000013", "class": "best-effort",
         "classSource": "gpuqos-run",
         "timeslice": {"desired": 50, "applied": 50, "baseline": 2048},
         "interleave": {"desired": None, "applied": None}, "path": "in-process",
         "lastOp": "SET_TIMESLICE", "lastStatus": 0, "lastStatusName": "NV_OK",
         "lastErrno": 0, "lastElapsedUs": 212, "state": "converged",
         "reason": "sole BE beside an LC"}
    t.update(kw)
    return t


TSGS = [
    tsg(),
    tsg(pid=1300, comm="server", engine=1, engineName="GR0", tsg="0x5c000020",
        **{"class": "latency-critical", "classSource": "rule",
           "timeslice": {"desired": 1000000, "applied": None, "baseline": 2048},
           "interleave": {"desired": 2, "applied": None}, "path": "direct",
           "lastOp": "SET_TIMESLICE", "lastStatus": None, "lastStatusName": None,
           "lastErrno": "timeout", "lastElapsedUs": None, "state": "stalled",
           "reason": "LC"}),
    tsg(pid=1400, comm="trainer", gpu=1, engine=11, engineName="CE0", tsg="0x5c000030",
        **{"lastStatus": 27, "lastStatusName": "NV_ERR_INSUFFICIENT_PERMISSIONS",
           "lastErrno": 0, "state": "failed", "lastOp": "SET_INTERLEAVE_LEVEL"}),
    tsg(pid=1500, comm="other", gpu=None, engineName="GR1", tsg="0x5c000040",
        **{"class": "unmanaged", "timeslice": {"desired": None, "applied": 2048,
                                               "baseline": 2048},
           "path": None, "lastOp": None, "lastStatus": None, "lastStatusName": None,
           "lastErrno": 1, "lastElapsedUs": None, "state": "unmanaged"}),
]

PROCS = [
    {"pid": 1234, "comm": "python3", "exe": "/usr/bin/python3.11",
     "cgroup": "/kubepods/besteffort/pod1/abc", "class": "best-effort",
     "classSource": "gpuqos-run", "connected": True, "tsgs": 4,
     "launchActivePercent": 87, "launchesPerSecond": 41580, "launchBound": False,
     "wakeLeadUs": 0},
    {"pid": 999, "comm": "idle-job", "exe": "/opt/idle", "cgroup": "/",
     "class": "latency-critical", "classSource": "override", "connected": False, "tsgs": 0},
]


def line(obj):
    return (json.dumps(obj, separators=(",", ":")) + "\n").encode()


LIST = line({"ok": True, "agent": AGENT, "tsgs": TSGS, "processes": PROCS})
WAKE = {"requests": 5000, "wakes": 4800, "hits": 4700, "wasted": 60, "beaten": 20,
        "notIssued": 150, "stops": 2, "stopped": False}
SHOW = line({"ok": True, "agent": AGENT, "tsgs": [TSGS[0]], "processes": [PROCS[0]]})
RESULTS = line({"ok": True, "results": [
    {"tsg": "0x5c000013", "op": "GET_TIMESLICE", "rmStatus": 0, "rmStatusName": "NV_OK",
     "errno": 0, "value": 50, "elapsedUs": 180},
    {"tsg": "0x5c000014", "op": "GET_TIMESLICE", "rmStatus": None, "rmStatusName": None,
     "errno": "timeout", "value": None, "elapsedUs": None},
    {"tsg": "0x5c000015", "op": "GET_TIMESLICE", "rmStatus": 0, "rmStatusName": "NV_OK",
     "errno": 22, "value": None, "elapsedUs": 5},
]})


class Env:
    """A fake agent in a temporary directory, and a way to run gpuqosctl."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="gpuqos-cli-")
        self.path = os.path.join(self.dir, "ctl.sock")
        self.fake = FakeCtl(self.path)

    def run(self, *args, answer=None, mode="answer", env=None, sock=True, timeout=20):
        self.fake.mode = mode
        if answer is not None:
            self.fake.answer = answer
        before = len(self.fake.requests)
        argv = [CTL] + (["--socket", self.path] if sock else []) + list(args)
        e = dict(os.environ)
        e.pop("GPUQOS_CTL_SOCKET", None)
        e.update(env or {})
        p = subprocess.run(argv, capture_output=True, env=e, timeout=timeout)
        out, err = p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")
        check("Sanitizer" not in err and "runtime error" not in err,
              f"{args}: sanitizer report:\n{err}")
        reqs = self.fake.requests[before:]
        return p.returncode, out, err, reqs

    def close(self):
        self.fake.close()


def request_of(reqs, what):
    check(len(reqs) == 1, f"{what}: expected one request, got {reqs}")
    if len(reqs) != 1:
        return None
    raw = reqs[0]
    check(raw.endswith(b"\n") and raw.count(b"\n") == 1,
          f"{what}: request is not one line: {raw!r}")
    try:
        return json.loads(raw)
    except ValueError:
        check(False, f"{what}: request is not JSON: {raw!r}")
        return None


def parse_table(text, header_word):
    """Rows of the table whose header line starts with header_word, as dicts,
    cut at the header's column offsets."""
    lines = text.splitlines()
    for i, ln in enumerate(lines):
        if ln.startswith(header_word):
            break
    else:
        return None, []
    head = lines[i]
    names = head.split()
    starts, pos = [], 0
    for n in names:
        pos = head.index(n, pos)
        starts.append(pos)
        pos += len(n)
    rows = []
    for ln in lines[i + 1:]:
        if not ln.strip():
            break
        cells = [ln[s:(starts[k + 1] if k + 1 < len(starts) else None)].strip()
                 for k, s in enumerate(starts)]
        rows.append(dict(zip(names, cells)))
    return names, rows


def t_requests(env):
    cases = [
        (["list"], LIST, {"cmd": "list"}),
        (["status"], LIST, {"cmd": "status"}),
        (["show", "1234"], SHOW, {"cmd": "show", "pid": 1234}),
        (["set-class", "1234", "lc"], None, {"cmd": "set-class", "pid": 1234, "class": "lc"}),
        (["set-class", "1234", "latency-critical"], None,
         {"cmd": "set-class", "pid": 1234, "class": "lc"}),
        (["set-class", "1234", "be"], None, {"cmd": "set-class", "pid": 1234, "class": "be"}),
        (["set-class", "1234", "best-effort"], None,
         {"cmd": "set-class", "pid": 1234, "class": "be"}),
        (["set-class", "1234", "unmanaged"], None,
         {"cmd": "set-class", "pid": 1234, "class": "unmanaged"}),
        (["set-class", "1234", "auto"], None, {"cmd": "set-class", "pid": 1234, "class": "auto"}),
        (["preempt", "1234"], RESULTS, {"cmd": "preempt", "pid": 1234, "wait": True}),
        (["preempt", "1234", "--no-wait"], RESULTS,
         {"cmd": "preempt", "pid": 1234, "wait": False}),
        (["--no-wait", "preempt", "4194304"], RESULTS,
         {"cmd": "preempt", "pid": 4194304, "wait": False}),
        (["get-timeslice", "1234"], RESULTS, {"cmd": "get-timeslice", "pid": 1234}),
    ]
    for args, answer, want in cases:
        if answer is None:
            answer = line({"ok": True, "pid": 1234, "class": "latency-critical"})
        rc, out, err, reqs = env.run(*args, answer=answer)
        check(rc == 0, f"{args}: rc {rc}, stderr {err}")
        got = request_of(reqs, args)
        check(got == want, f"{args}: request {got}, want {want}")
        if got and "pid" in got:
            check(type(got["pid"]) is int, f"{args}: pid sent as {got['pid']!r}, not an integer")
    # Where the socket comes from: --socket beats GPUQOS_CTL_SOCKET beats the default.
    rc, _, err, reqs = env.run("list", answer=LIST, sock=False, env={"GPUQOS_CTL_SOCKET": env.path})
    check(rc == 0 and len(reqs) == 1, f"GPUQOS_CTL_SOCKET not used: rc {rc} {err}")
    rc, _, err, reqs = env.run("list", answer=LIST,
                               env={"GPUQOS_CTL_SOCKET": os.path.join(env.dir, "nope")})
    check(rc == 0 and len(reqs) == 1, f"--socket did not override the environment: {err}")
    rc, _, _, reqs = env.run("--socket=" + env.path, "list", answer=LIST, sock=False)
    check(rc == 0 and len(reqs) == 1, "--socket=PATH form not accepted")


def t_table(env):
    rc, out, err, _ = env.run("list", answer=LIST)
    check(rc == 0, f"list: rc {rc} {err}")
    names, rows = parse_table(out, "PID")
    check(names == ["PID", "COMM", "GPU", "ENGINE", "CLASS", "TIMESLICE", "INTERLEAVE",
                    "PATH", "STATUS", "STATE"], f"list: header {names}\n{out}")
    want = [
        ["1234", "python3", "0", "GR0", "BE", "50/50", "-", "in-process", "NV_OK", "converged"],
        ["1300", "server", "0", "GR0", "LC", "?/1000000", "?/HIGH", "direct", "timeout",
         "stalled"],
        ["1400", "trainer", "1", "CE0", "BE", "50/50", "-", "in-process",
         "NV_ERR_INSUFFICIENT_PERMISSIONS", "failed"],
        ["1500", "other", "?", "GR1", "-", "2048/-", "-", "-", "Operation not permitted",
         "unmanaged"],
    ]
    got = [[r[n] for n in names] for r in rows] if names else []
    check(got == want, f"list rows:\n{got}\nwant\n{want}\n{out}")
    check("processes without TSGs:" in out, f"list: no idle-process section\n{out}")
    _, prows = parse_table(out.split("processes without TSGs:")[-1], "PID")
    check([(r["PID"], r["COMM"], r["CLASS"], r["CONNECTED"]) for r in prows] ==
          [("999", "idle-job", "LC", "no")], f"list: idle processes {prows}")

    rc, out, err, _ = env.run("list", answer=line({"ok": True, "agent": AGENT, "tsgs": [],
                                                    "processes": []}))
    check(rc == 0 and "no TSGs" in out and "processes" not in out, f"empty list: {out} {err}")

    rc, out, err, _ = env.run("show", "1234", answer=SHOW)
    check(rc == 0, f"show: rc {rc} {err}")
    for s in ["1234", "python3", "TSG 0x5c000013", "client 0xc1d00004",
              "best-effort (from gpuqos-run)", "sole BE beside an LC", "baseline 2048",
              "SET_TIMESLICE: NV_OK, 212 µs", "/usr/bin/python3.11",
              "/kubepods/besteffort/pod1/abc", "connected",
              "launches       active 87 % of the time, 41580/s\n"]:
        check(s in out, f"show: {s!r} missing from\n{out}")
    # A launch-bound LC says so; a process without a reading (older agents
    # send no such keys, newer ones null) says it is not known.
    for extra, says in [({"class": "latency-critical", "launchBound": True},
                         "active 87 % of the time, 41580/s: launch-bound"),
                        ({"launchActivePercent": None, "launchesPerSecond": None}, "not known"),
                        ({"launchActivePercent": 0, "launchesPerSecond": 0}, "active 0 %"),
                        ({}, "wake           none asked\n"),
                        ({"class": "latency-critical", "wakeLeadUs": 100},
                         "wake           asked for, 100 µs ahead of its requests\n"),
                        ({"class": "latency-critical", "wakeLeadUs": 100, "wake": WAKE},
                         "wakes          4800 of 5000 requests woken: 4700 hit, 60 wasted, "
                         "20 beaten; 150 not issued; 2 stops\n"),
                        ({"wake": dict(WAKE, stopped=True)}, "; 2 stops, stopped now\n")]:
        rc, out, err, _ = env.run("show", "1234", answer=line(
            {"ok": True, "agent": AGENT, "tsgs": [TSGS[0]], "processes": [dict(PROCS[0], **extra)]}))
        check(rc == 0 and says in out, f"show: {says!r} missing from\n{out}{err}")
    rc, out, err, _ = env.run("show", "999", answer=line(
        {"ok": True, "agent": AGENT, "tsgs": [], "processes": [PROCS[1]]}))
    check(rc == 0 and "launches       not known" in out, f"show: no launch keys\n{out}{err}")
    check("wake" not in out, f"show: an older agent's process says nothing of a wake\n{out}")
    rc, out, err, _ = env.run("show", "1234", answer=line(
        {"ok": True, "agent": AGENT, "tsgs": [TSGS[0]], "processes": [dict(PROCS[0], wake=None)]}))
    check(rc == 0 and "wakes" not in out, f"show: no report yet, no wakes line\n{out}{err}")
    # The agent's read-backs of a TSG (agents since 2026-11-26; an older
    # one's TSG says nothing of them).
    for ts, says in [({"verifiedMsAgo": 5120, "verifyMismatches": 1},
                      "read back      5120 ms ago; 1 found the RM holding another value\n"),
                     ({"verifiedMsAgo": None, "verifyMismatches": 0},
                      "read back      not yet; 0 found the RM holding another value\n")]:
        t = tsg(timeslice=dict(TSGS[0]["timeslice"], **ts))
        rc, out, err, _ = env.run("show", "1234", answer=line(
            {"ok": True, "agent": AGENT, "tsgs": [t], "processes": [PROCS[0]]}))
        check(rc == 0 and says in out, f"show: {says!r} missing from\n{out}{err}")
    # Settings set back behind the agent (agents since 2026-11-26): shown
    # once it happened.
    for ts, il, says in [({"reverts": 5, "revertWaitMs": 2000}, {},
                          "set back       timeslice 5 times; next SET in 2000 ms\n"),
                         ({"reverts": 0, "revertWaitMs": 0}, {"reverts": 3, "revertWaitMs": 0},
                          "set back       interleave 3 times\n"),
                         ({"reverts": 0, "revertWaitMs": 0}, {}, None)]:
        t = tsg(timeslice=dict(TSGS[0]["timeslice"], **ts),
                interleave=dict(TSGS[0]["interleave"], **il))
        rc, out, err, _ = env.run("show", "1234", answer=line(
            {"ok": True, "agent": AGENT, "tsgs": [t], "processes": [PROCS[0]]}))
        check(rc == 0 and (says in out if says else "set back" not in out),
              f"show: {says!r} / none expected in\n{out}{err}")
    rc, out, err, _ = env.run("show", "1234", answer=line(
        {"ok": True, "agent": AGENT, "tsgs": [TSGS[0]], "processes": [PROCS[0]]}))
    check(rc == 0 and "read back" not in out, f"show: an older agent's TSG\n{out}{err}")
    check("set back" not in out, f"show: an older agent's TSG says nothing of reverts\n{out}")
    check("rotation" not in out, f"show: a TSG outside any rotation says nothing of it\n{out}")
    for desired, applied, says in [(True, True, "gated: another BE's turn"),
                                   (False, False, "its turn: schedulable"),
                                   (False, True, "gated, its turn next")]:
        gated = tsg(gate={"rotating": True, "desired": desired, "applied": applied,
                          "possible": True})
        rc, out, err, _ = env.run("show", "1234", answer=line(
            {"ok": True, "agent": AGENT, "tsgs": [gated], "processes": [PROCS[0]]}))
        check(rc == 0 and says in out, f"show: rotation {says!r} missing from\n{out}{err}")
    # How long it was held off: shown once it was gated at all.
    for extra, says in [({"count": 12, "gatedMs": 2410, "longestMs": 214},
                         "gated          12 times, 2410 ms in all, longest 214 ms\n"),
                        ({"count": 0, "gatedMs": 0, "longestMs": 0}, None), ({}, None)]:
        g = dict({"rotating": True, "desired": False, "applied": False, "possible": True}, **extra)
        rc, out, err, _ = env.run("show", "1234", answer=line(
            {"ok": True, "agent": AGENT, "tsgs": [tsg(gate=g)], "processes": [PROCS[0]]}))
        check(rc == 0 and (says in out if says else "times," not in out),
              f"show: gate counts {extra}: {says!r}\n{out}{err}")
    rc, out, err, _ = env.run("show", "1234", answer=line(
        {"ok": True, "agent": AGENT, "processes": [PROCS[0]],
         "tsgs": [tsg(gate={"rotating": True, "desired": False, "applied": False,
                            "count": "many"})]}))
    check(rc != 0 and "tsgs[0].gate" in err and "count" in err,
          f"show: a bad gate count is refused: {out}{err}")
    rc, out, err, _ = env.run("show", "1234", answer=line(
        {"ok": True, "agent": AGENT, "processes": [PROCS[0]],
         "tsgs": [tsg(gate={"rotating": "yes", "desired": False, "applied": False})]}))
    check(rc != 0 and "tsgs[0].gate" in err and "rotating" in err,
          f"show: a bad gate object is refused: {out}{err}")

    rc, out, err, _ = env.run("get-timeslice", "1234", answer=RESULTS)
    names, rows = parse_table(out, "TSG")
    check(rc == 0 and names == ["TSG", "OP", "STATUS", "VALUE", "ELAPSED_US", "ERRNO"],
          f"results header {names}\n{out}{err}")
    got = [[r[n] for n in names] for r in rows] if names else []
    want = [["0x5c000013", "GET_TIMESLICE", "NV_OK", "50", "180", "0"],
            ["0x5c000014", "GET_TIMESLICE", "-", "-", "-", "timeout"],
            ["0x5c000015", "GET_TIMESLICE", "NV_OK", "-", "5", "22 (Invalid argument)"]]
    check(got == want, f"results rows {got}")
    rc, out, _, _ = env.run("preempt", "1234", answer=line({"ok": True, "results": []}))
    check(rc == 0 and "no TSGs" in out, f"preempt with no results: {out}")

    rc, out, err, _ = env.run("status", answer=LIST)
    for s in ["version  0.1.0", "mode     standalone", "pid      77", "uptime   3600 s",
              "peers    2", "tsgs     3", "config   /etc/gpuqos/agent.conf"]:
        check(s in out, f"status: {s!r} missing from\n{out}{err}")

    rc, out, err, _ = env.run("set-class", "1234", "lc",
                              answer=line({"ok": True, "pid": 1234, "class": "latency-critical"}))
    check(rc == 0 and out == "pid 1234: class latency-critical\n", f"set-class: {out!r} {err}")

    # A process names itself: its comm must not reach the terminal as controls.
    evil = dict(TSGS[0], comm="\x1b[31mred\x07\u009b")
    rc, out, err, _ = env.run("list", answer=line({"ok": True, "agent": AGENT, "tsgs": [evil],
                                                    "processes": []}))
    check(rc == 0 and "\x1b" not in out and "\x07" not in out and "\u009b" not in out
          and "?[31mred??" in out, f"control characters not replaced: {out!r}")


def t_json(env):
    for args, answer in [(["list"], LIST), (["show", "1234"], SHOW),
                         (["get-timeslice", "1234"], RESULTS), (["status"], LIST)]:
        rc, out, err, _ = env.run("--json", *args, answer=answer)
        check(rc == 0 and out.encode() == answer, f"--json {args}: rc {rc} {out!r} {err}")
    refused = line({"ok": False, "error": "pid 42: no such process known to the agent"})
    rc, out, err, _ = env.run("show", "42", "--json", answer=refused)
    check(rc == 1 and out.encode() == refused and "no such process" in err,
          f"--json refusal: rc {rc} {out!r} {err}")
    rc, out, err, _ = env.run("--json", "list", answer=b"garbage\n")
    check(rc == 1 and out == "" and "malformed" in err, f"--json garbage: rc {rc} {out!r}")


def t_exit_codes(env):
    refused = line({"ok": False, "error": "pid 42: no such process known to the agent"})
    for args in (["show", "42"], ["set-class", "42", "be"], ["preempt", "42"], ["list"]):
        rc, out, err, _ = env.run(*args, answer=refused)
        check(rc == 1 and "pid 42: no such process known to the agent" in err and out == "",
              f"{args} refused: rc {rc} out {out!r} err {err}")
    rc, _, err, _ = env.run("list", answer=line({"ok": False}))
    check(rc == 1 and "refused" in err, f"ok:false without error: rc {rc} {err}")

    bad = [[], ["frobnicate"], ["show"], ["show", "abc"], ["show", "0"], ["show", "-5"],
           ["show", "12x"], ["show", " 12"], ["show", "+12"], ["show", "99999999999"],
           ["show", "1", "2"], ["list", "extra"], ["set-class", "1"],
           ["set-class", "1", "fast"], ["set-class", "x", "lc"], ["preempt"],
           ["list", "--no-wait"], ["--bogus", "list"], ["--timeout-ms", "x", "list"],
           ["--timeout-ms", "0", "list"], ["list", "--timeout-ms"], ["--socket", "", "list"],
           ["--socket", "/" + "x" * 200, "list"]]
    for args in bad:
        rc, out, err, reqs = env.run(*args, answer=LIST)
        check(rc == 2, f"{args}: rc {rc}, want 2 ({err})")
        check(not reqs, f"{args}: a request was sent despite the usage error: {reqs}")
        check(err.strip() != "", f"{args}: usage error without a message")
    rc, out, _, reqs = env.run("--help")
    check(rc == 0 and "usage: gpuqosctl" in out and "set-class" in out and not reqs,
          f"--help: rc {rc}")

    missing = os.path.join(env.dir, "missing.sock")
    rc, out, err, _ = env.run("--socket", missing, "list", sock=False)
    check(rc == 3, f"no socket: rc {rc}")
    for s in [missing, "No such file or directory", "is gpuqos-agent running?",
              "sudo gpuqos-agent --standalone"]:
        check(s in err, f"no socket: {s!r} missing from {err!r}")
    # A socket file nobody listens on: connection refused.
    dead = os.path.join(env.dir, "dead.sock")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(dead)
    rc, _, err, _ = env.run("--socket", dead, "status", sock=False)
    s.close()
    check(rc == 3 and "Connection refused" in err and dead in err, f"refused: rc {rc} {err}")
    rc, _, err, _ = env.run("list", sock=False, env={"GPUQOS_CTL_SOCKET": missing})
    check(rc == 3 and missing in err, f"env socket missing: rc {rc} {err}")


def t_malformed(env):
    def listing(**kw):
        a = {"ok": True, "agent": AGENT, "tsgs": TSGS, "processes": PROCS}
        a.update(kw)
        return line(a)

    cases = [
        ("not JSON", ["list"], b"hello agent\n", "not valid JSON"),
        ("empty line", ["list"], b"\n", "not valid JSON"),
        ("truncated", ["list"], LIST[:40], "truncated"),
        ("trailing garbage", ["list"], b'{"ok":true} x\n', "not valid JSON"),
        ("NUL byte", ["list"], b'{"ok":true}\x00{}\n', "NUL"),
        ("array", ["list"], b"[1,2]\n", "not a JSON object"),
        ("no ok", ["list"], b'{"tsgs":[]}\n', 'missing "ok"'),
        ("ok string", ["list"], b'{"ok":"yes"}\n', '"ok" is not true or false'),
        ("no tsgs", ["list"], line({"ok": True, "processes": []}), 'missing "tsgs"'),
        ("tsgs object", ["list"], listing(tsgs={}), '"tsgs" is not an array'),
        ("tsg not object", ["list"], listing(tsgs=[5]), "tsgs[0] is not an object"),
        ("pid string", ["list"], listing(tsgs=[tsg(pid="1234")]), '"pid" is not an integer'),
        ("pid fraction", ["list"], listing(tsgs=[tsg(pid=12.5)]), '"pid" is not an integer'),
        ("pid huge", ["list"], listing(tsgs=[tsg(pid=1e300)]), '"pid" is not an integer'),
        ("applied string", ["list"],
         listing(tsgs=[TSGS[0], tsg(timeslice={"desired": 1, "applied": "x"})]),
         'tsgs[1].timeslice: "applied" is not an integer'),
        ("no timeslice", ["show", "1"],
         listing(tsgs=[{k: v for k, v in TSGS[0].items() if k != "timeslice"}]),
         'missing "timeslice"'),
        ("comm null", ["list"], listing(tsgs=[tsg(comm=None)]), '"comm" is null'),
        ("errno word", ["list"], listing(tsgs=[tsg(lastErrno="later")]),
         '"lastErrno" is not an integer or "timeout"'),
        ("reason number", ["show", "1"], listing(tsgs=[tsg(reason=5)]), '"reason" is not a string'),
        ("proc no pid", ["list"], listing(processes=[{"comm": "x", "tsgs": 0}]),
         'processes[0]: missing "pid"'),
        ("connected string", ["list"], listing(processes=[dict(PROCS[1], connected="no")]),
         '"connected" is not true or false'),
        ("launch share string", ["show", "1"],
         listing(processes=[dict(PROCS[0], launchActivePercent="87")]),
         '"launchActivePercent" is not an integer'),
        ("launch-bound number", ["show", "1"], listing(processes=[dict(PROCS[0], launchBound=1)]),
         '"launchBound" is not true or false'),
        ("wake string", ["show", "1"], listing(processes=[dict(PROCS[0], wakeLeadUs="100")]),
         '"wakeLeadUs" is not an integer'),
        ("wake counts string", ["show", "1"],
         listing(processes=[dict(PROCS[0], wake=dict(WAKE, hits="4700"))]), '"hits" is not an integer'),
        ("wake counts missing", ["show", "1"],
         listing(processes=[dict(PROCS[0], wake={"requests": 1})]), '"wakes"'),
        ("read-back string", ["show", "1234"],
         listing(tsgs=[tsg(timeslice={"desired": 50, "applied": 50, "baseline": 2048,
                                      "verifiedMsAgo": "5", "verifyMismatches": 0})]),
         '"verifiedMsAgo" is not an integer'),
        ("no results", ["get-timeslice", "1"], b'{"ok":true}\n', 'missing "results"'),
        ("result no op", ["preempt", "1"],
         line({"ok": True, "results": [{"tsg": "0x1", "errno": 0}]}), 'missing "op"'),
        ("no agent", ["status"], line({"ok": True, "tsgs": [], "processes": []}),
         'missing "agent"'),
        ("agent pid string", ["status"], listing(agent=dict(AGENT, pid="77")),
         '"pid" is not an integer'),
        ("set-class no class", ["set-class", "1", "be"], line({"ok": True, "pid": 1}),
         'missing "class"'),
        ("deep nesting", ["list"], b"[" * 5000 + b"]" * 5000 + b"\n", "not valid JSON"),
    ]
    for what, args, answer, msg in cases:
        rc, out, err, _ = env.run(*args, answer=answer)
        check(rc == 1, f"{what}: rc {rc}, want 1 ({err})")
        check(msg in err, f"{what}: {msg!r} not in {err!r}")
        check(out == "", f"{what}: printed something despite the malformed answer: {out!r}")

    # A complete answer that is not followed by its newline is still taken.
    rc, out, err, _ = env.run("status", answer=LIST[:-1])
    check(rc == 0 and "standalone" in out, f"answer without newline: rc {rc} {err}")
    # Only the first line counts.
    rc, out, err, _ = env.run("status", answer=LIST + b"garbage\n")
    check(rc == 0, f"data after the answer: rc {rc} {err}")

    rc, out, err, _ = env.run("list", mode="close")
    check(rc == 1 and "closed the connection without answering" in err,
          f"close without answer: rc {rc} {err}")

    start = time.monotonic()
    rc, out, err, _ = env.run("--timeout-ms", "300", "list", mode="hang")
    took = time.monotonic() - start
    check(rc == 1 and "timed out" in err, f"hang: rc {rc} {err}")
    check(took < 5, f"hang: took {took:.1f} s with --timeout-ms 300")

    # Larger than any buffer guess: 2 MiB of TSGs arrives in many reads.
    many = line({"ok": True, "agent": AGENT, "processes": [],
                 "tsgs": [tsg(pid=i + 1) for i in range(4000)]})
    rc, out, err, _ = env.run("list", answer=many)
    check(rc == 0 and out.count("\n") == 4001, f"large list: rc {rc} lines {out.count(chr(10))}")


GROUPS = {"requests": t_requests, "table": t_table, "json": t_json,
          "exit_codes": t_exit_codes, "malformed": t_malformed}


def main():
    global CTL
    if len(sys.argv) != 3 or (sys.argv[2] not in GROUPS and sys.argv[2] != "all"):
        sys.exit(__doc__)
    CTL = os.path.abspath(sys.argv[1])
    env = Env()
    try:
        for name, fn in GROUPS.items():
            if sys.argv[2] in (name, "all"):
                fn(env)
    finally:
        env.close()
    print("ok")


if __name__ == "__main__":
    run_main(main)
