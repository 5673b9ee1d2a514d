# SPDX-License-Identifier: Apache-2.0
"""test_agent.py - scenario tests of the real gpuqos-agent against fake
preempt agents. Usage: GPUQOS_AGENT_BIN=... test_agent.py <test-name>."""
import json
import os
import signal
import socket
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import UNKNOWN, check, run, standard_process, wait_for  # noqa: E402

OP_SET_TS, OP_GET_TS, OP_SET_IL, OP_PREEMPT = 1, 2, 3, 4
GR = 0x5C000010
LC_ENV = {"GPUQOS_RUN_CLASS": "latency-critical"}


def config(**kw):
    c = {"version": 1, "defaultClass": "unmanaged", "trustRunClass": True,
         "rules": [{"exe": "*python3*", "class": "best-effort"}],
         "controlDeadlineMs": 1000, "reconcileIntervalMs": 100}
    c.update(kw)
    return c


def gr_of(agent, pid):
    ts = [t for t in agent.tsgs(pid) if t["engineName"] == "GR0"]
    return ts[0] if len(ts) == 1 else None


def converged(agent, pid, want):
    t = gr_of(agent, pid)
    return t and t["state"] == "converged" and t["timeslice"]["applied"] == want


def be_and_lc(agent):
    be = agent.peer()
    standard_process(be)
    lc = agent.peer(LC_ENV)
    standard_process(lc, client=0xC1D00002)
    return be, lc


def t_policy_converge(make_agent):
    a = make_agent(config())
    a.start()
    be = a.peer()
    wait_for(lambda: be.evs("policy"), "POLICY answers HELLO")
    check(be.evs("policy")[0] == {"ev": "policy", "gr": 0, "copy": 0}, "first POLICY is 0/0")
    standard_process(be)
    wait_for(lambda: len(a.tsgs(be.pid)) == 4, "4 TSGs of the BE process listed")
    time.sleep(0.3)
    check(not be.commands(), "a BE alone is left at its baseline: %r" % be.commands())
    lc = a.peer(LC_ENV)
    standard_process(lc, client=0xC1D00002)
    wait_for(lambda: be.commands(OP_SET_TS, GR), "BE GR TSG gets SET_TIMESLICE")
    cmd = be.commands(OP_SET_TS, GR)[0]
    check(cmd["arg"] == 50, "BE gets the sole-BE timeslice: %r" % cmd)
    check(cmd["deadline"] == 1000 * 1000, "deadline_us from controlDeadlineMs: %r" % cmd)
    wait_for(lambda: converged(a, be.pid, 50), "BE GR converged at 50")
    wait_for(lambda: converged(a, lc.pid, 100000), "LC GR converged at 100000")
    check(not be.commands(None, 0x5C000011), "copy TSGs are not managed by default")
    t = gr_of(a, be.pid)
    check(t["class"] == "best-effort" and t["classSource"] == "rule", "BE by rule: %r" % t)
    check(t["timeslice"] == {"desired": 50, "applied": 50, "baseline": 2048}, repr(t))
    check(t["lastOp"] == "SET_TIMESLICE" and t["lastStatusName"] == "NV_OK", repr(t))
    # The tracker is off here (harness: --bpf off): the preempt agent is the only source.
    check(t["sources"] == ["agent"], "sources without the tracker: %r" % t["sources"])
    tr = a.list()["agent"]["tracker"]
    check(tr["mode"] == "off" and tr["off"] == "off (--bpf off)" and tr["refusedClaims"] == 0, repr(tr))
    tl = gr_of(a, lc.pid)
    check(tl["class"] == "latency-critical" and tl["classSource"] == "gpuqos-run", repr(tl))
    procs = {p["pid"]: p for p in a.list()["processes"]}
    check(procs[be.pid]["connected"] and procs[be.pid]["tsgs"] == 4, repr(procs))
    # POLICY is what the process's NEXT GR TSG would be given: beside its
    # existing one that makes two BE TSGs on the runlist, so the floor.
    wait_for(lambda: be.evs("policy")[-1]["gr"] == 1000, "BE's POLICY predicts its next GR TSG")
    # The LC arrived when a BE already ran: its first POLICY, the answer to
    # its HELLO, already carries the LC value, so its first TSG is created
    # right.
    check(lc.evs("policy")[0]["gr"] == 100000, "LC's first POLICY: %r" % lc.evs("policy")[:1])
    # idempotent: nothing more is sent while nothing changes
    be.sync()
    lc.sync()
    n = len(be.commands()) + len(lc.commands())
    time.sleep(0.5)
    check(len(be.commands()) + len(lc.commands()) == n, "reconcile is idempotent")
    lc.close()
    wait_for(lambda: converged(a, be.pid, 2048), "BE restored to baseline after LC left")
    check(be.commands(OP_SET_TS, GR)[-1]["arg"] == 2048, "restore sends the baseline")
    wait_for(lambda: be.evs("policy")[-1]["gr"] == 0, "POLICY back to 0")


def t_lies(make_agent):
    a = make_agent(config())
    a.start()
    p = a.peer()
    p.send(op="set", hello_pid=1)
    p.send(op="reconnect")
    wait_for(lambda: len(p.evs("connected")) == 2, "reconnected with a lying HELLO")
    devnull = os.open("/dev/null", os.O_RDONLY)
    os.close(devnull)
    # fd 0 of the fake peer is a pipe, not the control device
    p.add_tsg(0xC1D00001, 0x5C000099, 1, fd=0, ts=2048, app=2048)
    wait_for(lambda: a.counters()["refusedTsgs"] == 1, "TSG with a foreign fd refused")
    p.add_tsg(0xC1D00001, GR, 1, ts=2048, app=2048)
    wait_for(lambda: a.tsgs(), "honest TSG accepted")
    ts = a.tsgs()
    check(len(ts) == 1 and ts[0]["pid"] == p.pid and ts[0]["tsg"] == "0x5c000010",
          "identity from SO_PEERCRED, lie not listed: %r" % ts)
    check(not a.tsgs(1), "nothing attributed to pid 1")
    p.send(op="result", seq=777777, cmd=OP_SET_TS, client=0xC1D00001, tsg=GR)
    wait_for(lambda: a.counters()["unknownResults"] == 1, "RESULT with unknown seq counted")
    p.send(op="gone", client=0xC1D00001, tsg=0x5C0000AA)
    wait_for(lambda: a.counters()["unknownTsgGone"] == 1, "TSG_GONE of unknown TSG counted")
    check(len(p.evs("disconnected")) == 1, "liar only ignored, not disconnected")
    check(len(a.tsgs(p.pid)) == 1, "TSG kept")
    p.send(op="gone", client=0xC1D00001, tsg=GR)
    wait_for(lambda: not a.tsgs(p.pid), "TSG_GONE drops the TSG")


def hexmsg(mtype, length, body=b"", magic=0x534F5147, version=1):
    return (struct.pack("=IHHII", magic, version, mtype, length, 1) + body).hex()


def t_garbage(make_agent):
    a = make_agent(config())
    a.start()
    good = a.peer()
    standard_process(good)
    bad = a.peer()
    wait_for(lambda: len(a.tsgs(good.pid)) == 4 and bad.evs("policy"), "both connected")
    cases = [
        b"\x01\x02\x03".hex(),                         # shorter than a header
        hexmsg(1, 48, b"\0" * 32, magic=0xDEADBEEF),   # bad magic
        hexmsg(1, 48, b"\0" * 32, version=9),          # other version
        hexmsg(42, 16),                                # unknown type
        hexmsg(3, 56, b"\0" * 10),                     # length disagrees
        hexmsg(5, 40, b"\0" * 24),                     # COMMAND is A->P only
        hexmsg(2, 32, b"\0" * 16),                     # POLICY is A->P only
        (struct.pack("=IHHII", 0x534F5147, 1, 3, 56, 1) + b"\0" * 240).hex(),  # too long
    ]
    for i, h in enumerate(cases):
        n = len(bad.evs("disconnected"))
        bad.send(op="raw", hex=h)
        wait_for(lambda: len(bad.evs("disconnected")) > n, "garbage %d closes the peer" % i)
        wait_for(lambda: a.counters()["malformed"] == i + 1, "garbage %d counted" % i)
        wait_for(lambda: len(bad.evs("connected")) > i + 1, "bad peer reconnects")
    check(a.alive(), "agent alive")
    check(len(a.tsgs(good.pid)) == 4, "other peer unaffected")
    check(not good.evs("disconnected"), "good peer never disconnected")
    # a TSG before HELLO is a protocol error too
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.connect(a.sock)
    s.send(struct.pack("=IHHII", 0x534F5147, 1, 7, 24, 1) + b"\0" * 8)
    s.settimeout(5)
    check(s.recv(256) == b"", "message before HELLO closes the connection")
    s.close()


def t_deadline(make_agent):
    # The preempt agent's own path: with "auto" a stalled peer's TSGs would
    # move to the direct path (see t_path_stall_fallback).
    a = make_agent(config(controlDeadlineMs=100, controlPath="agent"))
    a.start()
    be = a.peer()
    be.send(op="set", answer=False)
    be, lc = be, a.peer(LC_ENV)
    standard_process(be)
    standard_process(lc, client=0xC1D00002)
    wait_for(lambda: be.commands(OP_SET_TS, GR), "BE command sent")
    t0 = time.monotonic()
    wait_for(lambda: (gr_of(a, be.pid) or {}).get("state") == "stalled", "BE TSG stalled")
    check(time.monotonic() - t0 < 2.0, "deadline fired promptly")
    t = gr_of(a, be.pid)
    check(t["lastErrno"] == "timeout", "timeout recorded: %r" % t)
    check(a.counters()["timeouts"] == 1, "timeout counted")
    t0 = time.monotonic()
    a.list()
    check(time.monotonic() - t0 < 0.5, "list answers promptly while a peer is stalled")
    be.sync()
    n = len(be.commands())
    be.add_tsg(0xC1D00001, 0x5C000020, 1, ts=2048, app=2048)  # a second GR TSG
    time.sleep(0.4)
    check(len(be.commands()) == n, "no more commands to a stalled peer")
    r = a.ctl({"cmd": "preempt", "pid": be.pid, "wait": True})
    check(not r["ok"] and "stalled" in r["error"], "preempt refused on stalled path: %r" % r)
    be.send(op="set", answer=True)
    be.send(op="release")
    # two GR TSGs of BEs beside the LC now: both get the several-BE floor
    wait_for(lambda: [t["timeslice"]["applied"] for t in a.tsgs(be.pid)
                      if t["engineName"] == "GR0" and t["state"] == "converged"] == [1000, 1000],
             "late RESULT un-stalls; commands flow and converge again")
    check(be.commands(OP_SET_TS, 0x5C000020), "the new TSG got its command")


def t_reconnect(make_agent):
    a = make_agent(config())
    a.start()
    be, lc = be_and_lc(a)
    wait_for(lambda: converged(a, be.pid, 50), "converged")
    be.sync()
    n = len(be.commands())
    be.send(op="reconnect")
    wait_for(lambda: len(be.evs("connected")) == 2, "reconnected")
    wait_for(lambda: len(a.tsgs(be.pid)) == 4, "re-reported")
    time.sleep(0.3)
    check(len(a.tsgs(be.pid)) == 4, "no duplicate TSGs: %d" % len(a.tsgs(be.pid)))
    check(len(be.commands()) == n, "re-reported applied value needs no command")
    check(converged(a, be.pid, 50), "still converged")
    # a TSG freed while disconnected is dropped at SYNCED
    be.send(op="forget", client=0xC1D00001, tsg=0x5C000013)
    be.send(op="reconnect")
    wait_for(lambda: len(be.evs("connected")) == 3, "reconnected again")
    wait_for(lambda: len(a.tsgs(be.pid)) == 3, "TSG not re-reported is dropped")
    # a second HELLO on the same connection starts a new complete set
    be.send(op="resync", keep=1)
    wait_for(lambda: len(a.tsgs(be.pid)) == 1, "SYNCED drops TSGs not re-reported")
    check(not be.evs("disconnected")[2:], "resync keeps the connection")
    procs = {p["pid"]: p for p in a.list()["processes"]}
    check(procs[be.pid]["connected"], "connected")


def t_restart(make_agent):
    a = make_agent(config())
    a.start()
    p1 = a.peer()
    standard_process(p1)
    p2 = a.peer()
    standard_process(p2, client=0xC1D00002)
    wait_for(lambda: len(a.tsgs()) == 8, "two BE processes")
    r = a.ctl({"cmd": "set-class", "pid": p2.pid, "class": "lc"})
    check(r == {"ok": True, "pid": p2.pid, "class": "latency-critical"}, repr(r))
    wait_for(lambda: converged(a, p1.pid, 50) and converged(a, p2.pid, 100000),
             "override makes p2 LC")
    with open(os.path.join(a.state, "state.json")) as f:
        check(str(p2.pid) in f.read(), "override persisted")
    p1.sync()
    p2.sync()
    n1, n2 = len(p1.commands()), len(p2.commands())
    check(a.stop(signal.SIGKILL) == -signal.SIGKILL, "agent killed")
    a.start()
    wait_for(lambda: len(a.tsgs()) == 8, "peers reconnected and re-reported")
    procs = {p["pid"]: p for p in a.list()["processes"]}
    check(procs[p2.pid]["class"] == "latency-critical" and
          procs[p2.pid]["classSource"] == "override", "override survived: %r" % procs[p2.pid])
    wait_for(lambda: converged(a, p1.pid, 50) and converged(a, p2.pid, 100000),
             "same state after restart")
    check(len(p1.commands()) == n1 and len(p2.commands()) == n2,
          "converged state needs no new command after restart")
    r = a.ctl({"cmd": "set-class", "pid": p2.pid, "class": "auto"})
    check(r["ok"] and r["class"] == "best-effort", "auto removes the override: %r" % r)
    wait_for(lambda: converged(a, p1.pid, 2048) and converged(a, p2.pid, 2048),
             "two BEs and no LC: both back at baseline")


def t_sighup(make_agent):
    a = make_agent(config())
    a.start()
    p = a.peer()
    standard_process(p)
    wait_for(lambda: gr_of(a, p.pid), "TSG listed")
    check(gr_of(a, p.pid)["class"] == "best-effort", "BE by rule")
    for bad in ("{not json", '{"version": 2}', '{"version": 1, "defaultClass": "gold"}'):
        a.write_config(bad)
        n = a.counters()["configErrors"]
        a.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: a.counters()["configErrors"] == n + 1, "invalid config refused")
        check(a.alive(), "agent alive after invalid config")
        check(gr_of(a, p.pid)["class"] == "best-effort", "old config kept")
    a.write_config(config(rules=[{"exe": "*python3*", "class": "unmanaged"}]))
    a.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: a.counters()["configReloads"] == 1, "valid config reloaded")
    wait_for(lambda: gr_of(a, p.pid)["class"] == "unmanaged", "new rule applies")
    check(gr_of(a, p.pid)["state"] == "unmanaged", "state unmanaged")
    check(a.stop() == 0, "SIGTERM exits 0")
    check(not os.path.exists(a.sock) and not os.path.exists(a.ctl_sock), "sockets removed")


def t_ctl_malformed(make_agent):
    a = make_agent(config())
    a.start()
    p = a.peer()
    standard_process(p)
    wait_for(lambda: len(a.tsgs()) == 4, "listed")
    st = os.stat(a.ctl_sock).st_mode & 0o777
    check(st == 0o600, "ctl socket mode 0600: %o" % st)
    check(os.stat(a.sock).st_mode & 0o777 == 0o666, "agent socket mode 0666")
    before = a.list()
    reqs = [b"{not json\n", b"[1,2]\n", b"\"list\"\n", b'{"cmd":42}\n', b'{"cmd":"nope"}\n',
            b'{"cmd":"show"}\n', b'{"cmd":"show","pid":1}\n', b'{"cmd":"show","pid":-3}\n',
            b'{"cmd":"set-class","pid":%d,"class":"gold"}\n' % p.pid,
            b'{"cmd":"set-class","pid":%d}\n' % p.pid,
            b'{"cmd":"set-class","pid":99999999,"class":"lc"}\n',
            b'{"cmd":"preempt","pid":1}\n', b'{"cmd":"preempt","pid":%d,"wait":3}\n' % p.pid,
            b'{"cmd":"get-timeslice","pid":"x"}\n',
            b'{"cmd":"list","pad":"' + b"x" * 5000 + b'"}\n', b"x" * 10000]
    for r in reqs:
        ans = a.ctl_raw(r)
        check(ans.get("ok") is False and isinstance(ans.get("error"), str),
              "malformed %r answered with an error: %r" % (r[:60], ans))
    after = a.list()
    for k in ("tsgs", "processes"):
        check(before[k] == after[k], "malformed requests changed nothing (%s)" % k)
    with open(os.path.join(a.state, "state.json")) as f:
        check(json.load(f)["overrides"] == [], "no override written")
    # a client that connects and leaves without a request does no harm
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(a.ctl_sock)
    s.close()
    r = a.ctl({"cmd": "show", "pid": p.pid})
    check(r["ok"] and len(r["tsgs"]) == 4 and r["processes"][0]["pid"] == p.pid, repr(r))


def t_preempt(make_agent):
    a = make_agent(config(controlPath={"preempt": "auto", "timeslice": "agent"}))
    a.start()
    p = a.peer()
    standard_process(p)
    p.add_tsg(0xC1D00003, 0x5C000030, 1, ts=2048, app=2048)  # a second context
    wait_for(lambda: len(a.tsgs(p.pid)) == 5, "listed")
    r = a.ctl({"cmd": "preempt", "pid": p.pid, "wait": True})
    check(r["ok"] and len(r["results"]) == 2, "one PREEMPT per GR TSG: %r" % r)
    check(all(x["path"] == "agent" for x in r["results"]), "auto: through the preempt agent")
    check(all(x["op"] == "PREEMPT" and x["errno"] == 0 and x["rmStatusName"] == "NV_OK"
              for x in r["results"]), repr(r))
    check(all(c["arg"] == 1 for c in p.commands(OP_PREEMPT)), "wait bit set")
    r = a.ctl({"cmd": "get-timeslice", "pid": p.pid})
    check(r["ok"] and len(r["results"]) == 5, "GET_TIMESLICE on every TSG: %r" % r)
    vals = sorted(x["value"] for x in r["results"])
    check(vals == [1024, 1024, 1024, 2048, 2048], "read-back values: %r" % vals)
    # a silent peer: the answer comes when the deadline passes
    p.send(op="set", answer=False)
    t0 = time.monotonic()
    r = a.ctl({"cmd": "preempt", "pid": p.pid, "wait": False})
    check(r["ok"] and all(x["errno"] == "timeout" for x in r["results"]), repr(r))
    check(time.monotonic() - t0 < 5, "answered at the deadline")
    # a failing control is recorded with its status in words
    p.send(op="set", answer=True, status={"2": 0x1F})
    p.send(op="release")
    r = wait_for(lambda: ok_or_none(a.ctl({"cmd": "get-timeslice", "pid": p.pid})),
                 "late results un-stall")
    check(r["ok"] and all(x["rmStatusName"] == "NV_ERR_INVALID_ARGUMENT"
                          for x in r["results"]), repr(r))


def ok_or_none(r):
    return r if r.get("ok") else None


def gr_of_state(a, pid):
    return [t["state"] for t in a.tsgs(pid) if t["engineName"] == "GR0"][0]


def t_interleave(make_agent):
    # Through the preempt agents: with "auto" interleave goes direct.
    a = make_agent(config(interleave={"lc": "high", "be": "low"}, controlPath={"interleave": "agent"}))
    a.start()
    be = a.peer()
    be.send(op="set", status={"3": 0x1B})  # SET_INTERLEAVE: insufficient permissions
    standard_process(be)
    lc = a.peer(LC_ENV)
    standard_process(lc, client=0xC1D00002)
    wait_for(lambda: be.commands(OP_SET_IL, GR), "BE interleave command")
    wait_for(lambda: "CAP_SYS_NICE" in ((gr_of(a, be.pid) or {}).get("error") or ""),
             "needs CAP_SYS_NICE recorded")
    time.sleep(0.5)
    check(len(be.commands(OP_SET_IL, GR)) == 1, "0x1b not retried")
    check(gr_of(a, be.pid)["state"] == "failed", "shown as failed")
    wait_for(lambda: (gr_of(a, lc.pid) or {}).get("interleave") == {"desired": 2, "applied": 2},
             "LC interleave applied")


def t_options(make_agent):
    import subprocess
    binary = os.environ["GPUQOS_AGENT_BIN"]
    env = {k: v for k, v in os.environ.items() if k not in ("NODE_NAME", "KUBECONFIG")}
    r = subprocess.run([binary], capture_output=True, text=True, timeout=20, env=env)
    check(r.returncode == 2 and "needs --node-name" in r.stderr,
          "Kubernetes mode without a node name: exit 2 (%r)" % r.stderr)
    # Kubernetes mode with a kubeconfig that does not exist stops at start,
    # naming it, before any socket is made.
    missing = os.path.join(os.path.dirname(make_agent("{}").config), "no-such-kubeconfig")
    r = subprocess.run([binary, "--node-name", "n1", "--kubeconfig", missing, "--bpf", "off",
                        "--socket", missing + ".sock", "--ctl-socket", missing + ".ctl",
                        "--state-dir", missing + ".state"],
                       capture_output=True, text=True, timeout=20, env=env)
    check(r.returncode == 1 and missing in r.stderr, "missing kubeconfig: exit 1 naming it (%r)" % r.stderr)
    r = subprocess.run([binary, "--standalone", "--bogus"], capture_output=True, timeout=20)
    check(r.returncode == 2, "unknown option: exit 2")
    a = make_agent("{ broken")
    r = subprocess.run([binary, "--standalone", "--config", a.config, "--socket", a.sock,
                        "--ctl-socket", a.ctl_sock, "--state-dir", a.state],
                       capture_output=True, text=True, timeout=20)
    check(r.returncode == 1 and "not valid JSON" in r.stderr, "invalid config at start: " + r.stderr)
    a = make_agent()
    env = dict(os.environ, GPUQOS_SOCKET=a.sock, GPUQOS_CTL_SOCKET=a.ctl_sock,
               GPUQOS_STATE_DIR=a.state, GPUQOS_NVIDIACTL=a.nvctl, GPUQOS_BPF="off",
               GPUQOS_BPF_PIN_DIR="/sys/fs/bpf/gpuqos-unused")
    proc = subprocess.Popen([binary, "--standalone"], env=env, stderr=subprocess.DEVNULL)
    try:
        r = wait_for(lambda: a.try_ctl({"cmd": "list"}), "options from the environment", 20)
        tr = r["agent"]["tracker"]
        check(tr["setting"] == "off" and tr["mode"] == "off" and tr["off"] and
              tr["pinDir"] == "/sys/fs/bpf/gpuqos-unused", "GPUQOS_BPF=off from the environment: %r" % tr)
    finally:
        proc.terminate()
        proc.wait()
    for bad in (["--bpf", "sometimes"], ["--bpf"]):
        r = subprocess.run([binary, "--standalone"] + bad, capture_output=True, text=True, timeout=20)
        check(r.returncode == 2, "%s: exit 2, got %d" % (bad, r.returncode))
    r = subprocess.run([binary, "--standalone"], capture_output=True, text=True, timeout=20,
                       env=dict(env, GPUQOS_BPF="maybe"))
    check(r.returncode == 2 and "want auto, on or off" in r.stderr, "GPUQOS_BPF=maybe: " + r.stderr)
    # A tracker that cannot be opened (a pin directory off bpffs, or no
    # CAP_BPF): auto says why and runs on; on refuses to start.
    nobpf = os.path.join(a.dir, "not-bpffs")
    r = subprocess.run([binary, "--standalone", "--bpf", "on", "--bpf-pin-dir", nobpf], env=env,
                       capture_output=True, text=True, timeout=20)
    check(r.returncode == 1 and "eBPF tracker" in r.stderr, "--bpf on without a tracker: %d %s"
          % (r.returncode, r.stderr[-500:]))
    b = make_agent()
    b.start(["--bpf", "auto", "--bpf-pin-dir", nobpf])
    tr = b.list()["agent"]["tracker"]
    check(tr["setting"] == "auto" and tr["mode"] == "off" and tr["off"].startswith("the eBPF tracker")
          and tr["counters"] is None, "--bpf auto runs on without it: %r" % tr)


def t_valgrind(make_agent):
    import shutil
    import subprocess
    vg = shutil.which("valgrind")
    if not vg:
        print("SKIP: valgrind is not installed")
        return 77
    log = "/dev/null"
    # interleave be=low sends controls down the direct path (worker threads).
    a = make_agent(config(controlDeadlineMs=200, interleave={"be": "low"}))
    log = os.path.join(a.dir, "valgrind.log")
    a.prefix = [vg, "--leak-check=full", "--errors-for-leak-kinds=definite",
                "--error-exitcode=99", "--log-file=" + log]
    a.start()
    be, lc = be_and_lc(a)
    wait_for(lambda: converged_ts(a, be.pid, 50), "timeslice applied under valgrind", 20)
    wait_for(lambda: "direct path" in ((gr_of(a, be.pid) or {}).get("error") or ""),
             "a direct control ran under valgrind", 20)
    a.ctl({"cmd": "set-class", "pid": lc.pid, "class": "be"})
    a.ctl({"cmd": "get-timeslice", "pid": be.pid}, timeout=20)
    lc.send(op="set", answer=False)
    a.ctl({"cmd": "preempt", "pid": lc.pid}, timeout=20)  # times out
    be.send(op="raw", hex="00")
    a.ctl_raw(b"{bad\n")
    wait_for(lambda: a.counters()["malformed"] == 1, "garbage handled", 20)
    rc = a.stop()
    with open(log) as f:
        text = f.read()
    check("definitely lost: 0 bytes" in text or "no leaks are possible" in text,
          "valgrind: no definite leak\n" + text[-3000:])
    check(rc == 0, "clean exit under valgrind (rc %s)\n%s" % (rc, text[-3000:]))


# ---- control path selection --------------------------------------------
# The fake peers hold a regular file where the control device would be, so
# a control that takes the direct path really runs pidfd_getfd, the checks
# and the ioctl, and fails there with ENOTTY: enough to see which path was
# taken and that the error names the pid, the fd and the TSG. The real
# mechanics against the GPU simulator are in tests/e2e (direct_*).

ENOTTY = 25


def t_path_auto(make_agent):
    """auto: timeslice through the preempt agent, interleave direct."""
    a = make_agent(config(interleave={"lc": "high", "be": "low"}))
    a.start()
    ag = a.list()["agent"]
    check(ag["capabilities"]["direct"] is True and ag["capabilities"]["interleave"] is True,
          "root test agent holds CAP_SYS_PTRACE and CAP_SYS_NICE: %r" % ag)
    check(ag["controlPath"] == {"timeslice": "auto", "interleave": "auto", "preempt": "auto"},
          repr(ag["controlPath"]))
    check(ag["direct"]["running"] and ag["direct"]["workers"] == 4, repr(ag["direct"]))
    be, lc = be_and_lc(a)
    wait_for(lambda: converged_ts(a, be.pid, 50), "BE timeslice through its preempt agent")
    check(be.commands(OP_SET_TS, GR), "SET_TIMESLICE went to the preempt agent")
    t = wait_for(lambda: with_error(a, be.pid, "SET_INTERLEAVE (direct path)"),
                 "interleave tried on the direct path")
    check(t["path"] == "direct", "path recorded: %r" % t)
    check("pid %d fd " % be.pid in t["error"] and "TSG 0x5c000010" in t["error"] and
          "Inappropriate ioctl" in t["error"], "error names pid, fd, TSG, errno: %r" % t["error"])
    check(t["lastErrno"] == ENOTTY, repr(t))
    check(not be.commands(OP_SET_IL) and not lc.commands(OP_SET_IL),
          "no interleave command went to a preempt agent")
    r = a.ctl({"cmd": "preempt", "pid": be.pid})
    check(r["ok"] and [x["path"] for x in r["results"]] == ["agent"], "preempt via agent: %r" % r)


def converged_ts(a, pid, want):
    t = gr_of(a, pid)
    return t and t["timeslice"]["applied"] == want


def with_error(a, pid, text):
    t = gr_of(a, pid)
    return t if t and text in (t.get("error") or "") else None


def t_path_forced(make_agent):
    """controlPath per action: timeslice forced direct, preempt forced agent."""
    a = make_agent(config(controlPath={"timeslice": "direct", "preempt": "agent"}))
    a.start()
    be, lc = be_and_lc(a)
    t = wait_for(lambda: with_error(a, be.pid, "SET_TIMESLICE (direct path)"),
                 "timeslice tried on the direct path")
    check(t["path"] == "direct" and t["state"] in ("failed", "pending"), repr(t))
    be.sync()
    check(not be.commands(OP_SET_TS), "forced direct: nothing sent to the preempt agent")
    r = a.ctl({"cmd": "get-timeslice", "pid": be.pid})
    check(r["ok"] and len(r["results"]) == 4 and
          all(x["path"] == "direct" and x["errno"] == ENOTTY and x["value"] is None and
              "pid %d" % be.pid in x["error"] for x in r["results"]), repr(r))
    r = a.ctl({"cmd": "preempt", "pid": be.pid})
    check(r["ok"] and [x["path"] for x in r["results"]] == ["agent"], repr(r))
    # A forced path that is not there is refused in words.
    a.write_config(config(controlPath="agent"))
    a.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: a.counters()["configReloads"] == 1, "reloaded")
    check(a.list()["agent"]["controlPath"]["timeslice"] == "agent", "reload applies controlPath")
    lc.close()
    wait_for(lambda: not a.tsgs(lc.pid), "LC gone")
    wait_for(lambda: converged(a, be.pid, 2048), "back on the agent path, converged")


def t_path_stall_fallback(make_agent):
    """auto: a stalled preempt agent's controls move to the direct path;
    "agent" refuses instead."""
    a = make_agent(config(controlDeadlineMs=100))
    a.start()
    p = a.peer()
    standard_process(p)
    wait_for(lambda: len(a.tsgs(p.pid)) == 4, "listed")
    p.send(op="set", answer=False)
    r = a.ctl({"cmd": "preempt", "pid": p.pid})
    check(r["ok"] and r["results"][0]["errno"] == "timeout" and r["results"][0]["path"] == "agent",
          repr(r))
    r = a.ctl({"cmd": "preempt", "pid": p.pid})
    check(r["ok"] and r["results"][0]["path"] == "direct" and r["results"][0]["errno"] == ENOTTY,
          "stalled peer: auto falls back to direct: %r" % r)
    a.write_config(config(controlDeadlineMs=100, controlPath="agent"))
    a.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: a.counters()["configReloads"] == 1, "reloaded")
    r = a.ctl({"cmd": "preempt", "pid": p.pid})
    check(not r["ok"] and "stalled" in r["error"], repr(r))


def t_path_bad_config(make_agent):
    a = make_agent(config(controlPath="sideways"))
    import subprocess
    r = subprocess.run([os.environ["GPUQOS_AGENT_BIN"], "--standalone", "--config", a.config,
                        "--socket", a.sock, "--ctl-socket", a.ctl_sock, "--state-dir", a.state],
                       capture_output=True, text=True, timeout=20)
    check(r.returncode == 1 and 'field "controlPath" must be "auto", "agent" or "direct"' in r.stderr,
          r.stderr)


TESTS = {
    "path_auto": t_path_auto, "path_forced": t_path_forced,
    "path_stall_fallback": t_path_stall_fallback, "path_bad_config": t_path_bad_config,
    "policy_converge": t_policy_converge, "lies": t_lies, "garbage": t_garbage,
    "deadline": t_deadline, "reconnect": t_reconnect, "restart": t_restart,
    "sighup": t_sighup, "ctl_malformed": t_ctl_malformed, "preempt": t_preempt,
    "interleave": t_interleave, "options": t_options, "valgrind": t_valgrind,
}

if __name__ == "__main__":
    sys.exit(run(TESTS, sys.argv[1] if len(sys.argv) > 1 else ""))
