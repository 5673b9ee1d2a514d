#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""End-to-end tests of gpuqos-sim: mount it, drive it with fakecuda,
sim_probe and gpuqos-replay (the traces recorded on a real GPU), and check
the simulator's own truth (its `state` and `log` files) against the RM
behaviour measured in docs/rm-facts.md and recorded in tests/fixtures/traces.

Owns: the expectations. Does not own: the calls (fakecuda, sim_probe,
gpuqos-replay).

    test_sim.py --bin BUILD_DIR CASE      (CASE: see CASES below)

Needs root and /dev/fuse; without them it says why and exits 77 (skip).
The mount is always removed, on failure and on SIGTERM/SIGINT too.
"""
import argparse
import errno
import json
import os
import re
import signal
import subprocess
import time

from gpuqos_test import SKIP, Failure, check, run_main, wait_for
from gpuqos_test.sim import Sim, close_all, needs

CLIENT_BASE = 0xC1D00000
SET_TIMESLICE = 0xA06C0103
GET_TIMESLICE = 0xA06C0104


def hexint(s):
    return int(s, 16)


def expect_cases(results, expected):
    """expected: case -> (errno, status) or dict of fields."""
    for case, want in expected.items():
        check(case in results, "case %s did not run" % case)
        got = results[case]
        if isinstance(want, tuple):
            want = {"errno": want[0], "status": want[1]}
        for k, v in want.items():
            g = got[k]
            if k == "status":
                g, v = hexint(g), v
            check(g == v, "%s: %s is %r, want %r" % (case, k, got[k], v))


# --------------------------------------------------------------------------
# cases
# --------------------------------------------------------------------------

def tsgs_by_client(state):
    out = {}
    for t in state["tsgs"]:
        out.setdefault(t["client"], []).append(t)
    return out


def case_basic(b):
    with Sim(b, gpus=2) as sim:
        flag = os.path.join(sim.tmp, "go")
        p = sim.fakecuda_bg("--contexts", "2", "--gpu", "1", "--wait-file", flag,
                            "--print-state")
        # A TSG's channel comes after it: the last one's too.
        s = wait_for(lambda: (lambda st: st if len(st["tsgs"]) == 8 and len(st["channels"]) == 8
                              else None)(sim.state()), "8 TSGs and their channels", 5.0)
        check(s["gpus"] == 2, "gpus in state")
        check([(g["deviceInstance"], g["gpuId"], g["uuid"], g["pciBusId"]) for g in s["attached_gpus"]] ==
              [(0, "0x00000006", "GPU-73696d30-0000-4000-8000-000000000000", "00000000:00:06.0"),
               (1, "0x00000106", "GPU-73696d30-0000-4000-8000-000000000001", "00000000:01:06.0")],
              "attached GPUs in state: %r" % s["attached_gpus"])
        clients = sorted(hexint(c["handle"]) for c in s["clients"])
        # Generated upward from the start of this simulator's own block of
        # the RM's range (0xc1d00000 + n * 0x1000: parallel simulators
        # never give out the same client handle, as one RM does not).
        check(len(clients) == 2 and clients[1] == clients[0] + 1 and clients[0] & 0xFFF == 0
              and clients[0] & 0xFFF00000 == CLIENT_BASE, "client handles %s" % clients)
        check(len(s["files"]) == 1 and len(s["files"][0]["clients"]) == 2, "one open file")
        check([d["deviceId"] for d in s["devices"]] == [1, 1], "deviceId")
        check(len(s["subdevices"]) == 2, "subdevices")
        for client, tsgs in tsgs_by_client(s).items():
            check(sorted(t["engineType"] for t in tsgs) == [1, 11, 12, 13],
                  "engine types of %s" % client)
            for t in tsgs:
                want = 2048 if t["engineType"] == 1 else 1024
                check(t["timeslice_us"] == want, "timeslice of TSG %s" % t["handle"])
        tsg_handles = {t["handle"] for t in s["tsgs"]}
        check(len(s["channels"]) == 8 and all(c["parent"] in tsg_handles and c["class"] == "0xc86f"
                                              for c in s["channels"]), "a channel per TSG")
        # libcuda's SET_TIMESLICE comes right after the GR TSG is allocated.
        log = sim.log()
        for i, e in enumerate(log):
            if e["kind"] == "alloc" and e["params"].get("engineType") == 1:
                nxt = log[i + 1]
                check(nxt["kind"] == "control" and hexint(nxt["cmd"]) == SET_TIMESLICE and
                      nxt["params"]["timesliceUs"] == 2048 and nxt["object"] == e["object"],
                      "SET_TIMESLICE 2048 follows the GR TSG: %r" % nxt)
        open(flag, "w").close()
        out, err = p.communicate(timeout=10)
        check(p.returncode == 0, "fakecuda failed: " + err)
        fc = json.loads(out)
        seen = {t["handle"]: t["timesliceUs"] for c in fc["contexts"] for t in c["tsgs"]}
        check(seen == {t["handle"]: t["timeslice_us"] for t in s["tsgs"]},
              "fakecuda's read-back matches the simulator")
        sim.wait_empty()
        # A deviceId beyond --gpus fails with a message naming call and status.
        p = sim.fakecuda("--gpu", "2", check_rc=False)
        check(p.returncode != 0 and "device" in p.stderr and "0x1f" in p.stderr,
              "deviceId out of range: %s" % p.stderr)


def normalized_state(s):
    s = dict(s)
    s["files"] = [dict(f, opener_pid=0) for f in s["files"]]
    s.pop("t_us", None)  # the snapshot's time
    # Each simulator gives out client handles from a block of its own
    # (0xc1d00000 + n * 0x1000): compare them by their place in it.
    def client_place(v):
        if isinstance(v, dict):
            return {k: client_place(x) for k, x in v.items()}
        if isinstance(v, list):
            return [client_place(x) for x in v]
        if isinstance(v, str) and re.fullmatch(r"0xc1d[0-9a-f]{5}", v):
            return "0xc1d00%s" % v[-3:]
        return v
    return client_place(s)


def case_forms(b):
    states = {}
    for form in ("64", "21", "xfer"):
        with Sim(b) as sim:
            flag = os.path.join(sim.tmp, "go")
            p = sim.fakecuda_bg("--form", form, "--contexts", "2", "--wait-file", flag)
            wait_for(lambda: len(sim.state()["tsgs"]) == 8, "8 TSGs (form %s)" % form, 5.0)
            # libcuda's SET follows the TSG: wait for the last context's too,
            # and for the channel of its last TSG (made after the TSG).
            wait_for(lambda: (lambda st: sum(t["timeslice_sets"] for t in st["tsgs"]) == 2
                              and len(st["channels"]) == 8)(sim.state()),
                     "both SET_TIMESLICE calls and every channel", 5.0)
            states[form] = normalized_state(sim.state())
            log = sim.log()
            open(flag, "w").close()
            _, err = p.communicate(timeout=10)
            check(p.returncode == 0, "fakecuda --form %s: %s" % (form, err))
            rm_calls = [e for e in log if e["kind"] != "other"]
            check(all(e["status"] == "0x00" and e["errno"] == 0 for e in rm_calls),
                  "form %s: every call succeeded" % form)
            allocs = {e["form"] for e in rm_calls if e["kind"] == "alloc"}
            check(allocs == {"nvos21" if form == "21" else "nvos64"}, "alloc form %s" % allocs)
            check(all(e["xfer"] == (form == "xfer") for e in rm_calls), "xfer flag")
            sim.wait_empty()
    check(states["64"] == states["21"] == states["xfer"],
          "the three encodings give identical states:\n%s" % json.dumps(states, indent=1))


def case_ownership(b):
    with Sim(b) as sim:
        r = sim.probe("ownership")
        ok, bad = (0, 0), (0, 0x23)
        expect_cases(r, {
            "own.same_fd.get": {"errno": 0, "status": 0, "value": 1024},
            "own.fresh_open.get": bad, "own.fresh_open.set": bad,
            "own.fresh_open.preempt": bad, "own.fresh_open.alloc": bad,
            "own.fresh_open.free": bad,
            "own.dup.set": ok,
            "own.dup.readback_on_original": {"errno": 0, "status": 0, "value": 512},
            "own.fork_child.set": ok,
            "own.fork_child.get": {"errno": 0, "status": 0, "value": 768},
            "own.fork_child.preempt": ok,
            "own.fork.readback_on_original": {"errno": 0, "status": 0, "value": 768},
            "own.pidfd.set": ok,
            "own.pidfd.get": {"errno": 0, "status": 0, "value": 300},
            "own.pidfd.preempt": ok,
            "own.pidfd_fresh.get": bad, "own.pidfd_fresh.set": bad,
            "own.pidfd.after_owner_exit": {"errno": 0, "status": 0, "value": 300},
            "own.pidfd.present_while_dup_open": {"present": True},
            "own.pidfd.present_after_dup_close": {"present": False},
        })
        # The log names the foreign caller's own file handle.
        denied = [e for e in sim.log() if e.get("status") == "0x23"]
        check(denied and len({e["fh"] for e in denied}) == 1, "0x23 answered on one fh")
        sim.wait_empty()


def case_release(b):
    with Sim(b) as sim:
        r = sim.probe("release")
        expect_cases(r, {
            "release.dup_still_open": {"present": True},
            "release.last_close": {"present": False},
            "release.fork_child_holds": {"present": True},
            "release.fork_child_exited": {"present": False},
            "release.free_device": (0, 0),
            "release.tsg_gone_with_device": (0, 0x33),
            "release.free_client": (0, 0),
            "release.client_gone_after_free": {"present": False},
        })
        sim.wait_empty()
        sim.fakecuda("--contexts", "3", "--exit-without-free")
        sim.wait_empty()
        p = sim.fakecuda_bg("--contexts", "2", "--hold", "30")
        wait_for(lambda: len(sim.state()["tsgs"]) == 8, "8 TSGs", 5.0)
        p.kill()
        p.wait(timeout=5)
        sim.wait_empty()


def case_interleave(b):
    with Sim(b) as sim:
        expect_cases(sim.probe("interleave", "2"), {
            "interleave.set": (0, 0), "interleave.get": (0, 0x56),
            "interleave.preempt": (0, 0), "interleave.set_timeslice": (0, 0)})
        tsgs = [t for t in sim.state()["tsgs"]]
        check(not tsgs, "probe's TSGs freed on exit")
        nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                  "--inh-caps=-all"]
        expect_cases(sim.probe("interleave", "0", prefix=nobody), {
            "interleave.set": (0, 0x1b), "interleave.get": (0, 0x56),
            "interleave.preempt": (0, 0), "interleave.set_timeslice": (0, 0)})
        # The calling task's CAP_SYS_NICE alone is enough.
        nice = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                "--inh-caps=-all,+sys_nice", "--ambient-caps=-all,+sys_nice"]
        expect_cases(sim.probe("interleave", "0", prefix=nice), {"interleave.set": (0, 0)})
        sets = [e for e in sim.log() if e.get("cmd") == "0xa06c0107"]
        check([e["status"] for e in sets] == ["0x00", "0x1b", "0x00"],
              "interleave statuses in the log: %r" % [e["status"] for e in sets])
        check([e["params"]["tsgInterleaveLevel"] for e in sets] == [2, 0, 0], "levels logged")
        sim.wait_empty()


def controls(log, cmd):
    return [e for e in log if e["kind"] == "control" and hexint(e["cmd"]) == cmd]


def case_inject(b):
    with Sim(b) as sim:
        inject_latency(sim)
        inject_fail(sim)
        inject_stuck(sim)
        inject_bad_commands(sim)


def inject_latency(sim):
    sim.control("latency a06c0104 30000\n")
    sim.fakecuda()
    log = sim.log()
    gets, sets = controls(log, GET_TIMESLICE), controls(log, SET_TIMESLICE)
    check(len(gets) == 4 and all(e["dur_us"] >= 30000 for e in gets), "GET delayed: %r" % gets)
    check(sets and all(e["dur_us"] < 30000 for e in sets), "SET not delayed")
    sim.control("clear\nreset-log\nlatency all 3000")
    check(sim.log() == [], "reset-log empties the log")
    sim.fakecuda()
    log = sim.log()
    check(log[0]["seq"] > gets[-1]["seq"], "seq keeps counting after reset-log")
    ctl = [e for e in log if e["kind"] == "control"]
    check(len(ctl) == 5 and all(e["dur_us"] >= 3000 for e in ctl), "latency all")
    check(all(e["dur_us"] < 3000 for e in log if e["kind"] == "alloc"), "allocs not delayed")
    sim.control("clear")
    check(sim.injections() == [], "clear")


def inject_fail(sim):
    sim.control("fail a06c0104 1f")
    fc = json.loads(sim.fakecuda("--print-state").stdout)
    check(all(t["status"] == "0x1f" for t in fc["contexts"][0]["tsgs"]), "GET fails with 0x1f")
    check(fc["poll_failures"] == 4, "four failed reads")
    sim.control("clear\nfail 0xa06c0103 0x65 1")
    p = sim.fakecuda(check_rc=False)
    check(p.returncode != 0 and "SET_TIMESLICE" in p.stderr and "0x65" in p.stderr,
          "failing call named: %s" % p.stderr)
    sim.fakecuda()  # the counted failure is used up
    sim.control("clear\nunsupported a06c0104")
    fc = json.loads(sim.fakecuda("--print-state").stdout)
    check(all(t["status"] == "0x56" for t in fc["contexts"][0]["tsgs"]), "unsupported")
    sim.control("clear")
    sim.wait_empty()


def inject_stuck(sim):
    """A control that does not return stalls only its caller."""
    sim.control("latency a06c0103 60000000")
    stuck = sim.fakecuda_bg("--hold", "0")
    wait_for(lambda: len(sim.state()["tsgs"]) >= 1, "the stuck process's GR TSG", 5.0)
    t0 = time.monotonic()
    sim.fakecuda("--libcuda-set", "none", "--contexts", "2")
    # The stuck call lasts 60 s: other callers blocked behind it would take
    # that long; the room below it is for a loaded 2-core machine.
    check(time.monotonic() - t0 < 30.0, "other callers are not blocked")
    check(stuck.poll() is None, "the stuck caller is still in its ioctl")
    stuck.kill()
    stuck.wait(timeout=3)
    sim.control("clear")
    sim.wait_empty()


def inject_bad_commands(sim):
    sim.control("latency a06c0105 250")
    before = sim.injections()
    for bad in ["\n", " \t\n", "latency", "latency xyz 10", "latency all -5", "latency all 1 2",
                "fail a06c0103 0", "fail a06c0103", "clear extra", "bogus",
                "unsupported all", "latency a06c0103 10\nbogus", "latency 0 5",
                "latency a06c0103 99999999999999"]:
        try:
            sim.control(bad)
        except OSError as e:
            check(e.errno == errno.EINVAL, "%r: errno %d" % (bad, e.errno))
        else:
            raise Failure("control command %r was accepted" % bad)
        check(sim.injections() == before, "%r changed the injections" % bad)
    sim.control("clear")


def case_malformed(b):
    with Sim(b, gpus=1) as sim:
        r = sim.probe("malformed")
        E, F, T = errno.EINVAL, errno.EFAULT, errno.ENOTTY
        expect_cases(r, {
            "esc.unknown_nr": (E, 0), "esc.card_info": (E, 0), "esc.alloc_size40": (E, 0),
            "esc.control_size24": (E, 0), "esc.free_size8": (E, 0), "esc.not_rm_type": (T, 0),
            "esc.top_level_bad_pointer": (F, 0), "xfer.bad_ptr": (F, 0),
            "xfer.too_big": (E, 0), "xfer.nested": (E, 0), "xfer.inner_wrong_size": (E, 0),
            "ctrl.null_cmd": (0, 0), "ctrl.params_bad_ptr": (0, 0x1e),
            "ctrl.params_null_with_size": (0, 0x1f), "ctrl.params_too_big": (0, 0x1f),
            "ctrl.wrong_size": (0, 0x3a), "ctrl.unknown_object": (0, 0x33),
            "ctrl.unknown_client": (0, 0x23), "ctrl.unknown_cmd_on_tsg": (0, 0),
            "ctrl.other_cmd_on_device": (0, 0), "ctrl.tsg_cmd_on_device": (0, 0x56),
            "ctrl.get_interleave": (0, 0x56), "ctrl.set_interleave_level3": (0, 0x1f),
            "ctrl.set_timeslice_max": (0, 0), "ctrl.set_timeslice_over": (0, 0x1f),
            "ctrl.timeslice_after_over": {"status": 0, "value": 1000000},
            "ctrl.set_timeslice_zero": (0, 0),
            "ctrl.timeslice_after_zero": {"status": 0, "value": 0},
            "alloc.bad_params_ptr": (0, 0x1e), "alloc.null_params": (0, 0x1f),
            "alloc.device_id_out_of_range": (0, 0x1f), "alloc.duplicate_handle": (0, 0x34),
            "alloc.handle_equals_client": (0, 0x34), "alloc.unknown_parent": (0, 0x36),
            "alloc.tsg_under_client": (0, 0x36),
            "alloc.generated_handle": {"status": 0, "value": 0xCAF00000},
            "alloc.client_duplicate_handle": (0, 0x34), "free.unknown": (0, 0),
            "free.tsg": (0, 0), "free.channel_gone_with_tsg": (0, 0x33),
        })
        # Still up and still right.
        fc = json.loads(sim.fakecuda("--print-state").stdout)
        check(fc["contexts"][0]["tsgs"][0]["timesliceUs"] == 2048, "simulator still serves")
        log = sim.log()
        check(any(e["errno"] == errno.EINVAL for e in log), "escape errors logged")
        sim.wait_empty()


def case_fork(b):
    with Sim(b) as sim:
        flag = os.path.join(sim.tmp, "go")
        p = sim.fakecuda_bg("--fork", "--wait-file", flag, "--print-state", "--form", "xfer")
        s = wait_for(lambda: (lambda st: st if len(st["tsgs"]) == 8 else None)(sim.state()),
                     "8 TSGs from parent and child", 5.0)
        check(len(s["files"]) == 2 and len({f["opener_pid"] for f in s["files"]}) == 2,
              "two processes, two open files")
        check(len({c["fh"] for c in s["clients"]}) == 2, "a client per open file")
        open(flag, "w").close()
        out, err = p.communicate(timeout=10)
        check(p.returncode == 0, "fakecuda --fork: " + err)
        outs = [json.loads(line) for line in out.splitlines()]
        check(len(outs) == 2 and len({o["pid"] for o in outs}) == 2, "both printed their TSGs")
        sim.wait_empty()


# --------------------------------------------------------------------------
# replaying the traces recorded on a real GPU (tests/fixtures/traces)
# --------------------------------------------------------------------------

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "traces")
ENGINE_TYPES = [1, 11, 12, 13]


def fixtures(suffix):
    """Every recorded trace of one workload (one per driver recorded)."""
    names = sorted(f for f in os.listdir(FIXTURES) if f.endswith(suffix))
    check(names, "no fixture *%s in %s" % (suffix, FIXTURES))
    return [os.path.join(FIXTURES, f) for f in names]


def read_trace(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def replay_bg(sim, trace, *args):
    cmd = [os.path.join(sim.bindir, "gpuqos-replay"), "--dev", sim.dev, "--trace", trace,
           "--check"] + list(args)
    # Its own session, so SIGTERM reaches a --fork child too.
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    sim.background.append(p)
    return p


def replay_summaries(p, n):
    """The first n summary lines (printed before the hold)."""
    out = []
    for _ in range(n):
        line = p.stdout.readline()
        if not line:
            p.wait(timeout=10)
            raise Failure("gpuqos-replay exited %s: %s" % (p.returncode, p.stderr.read()))
        out.append(json.loads(line))
    return out


def replay_end(p):
    os.killpg(p.pid, signal.SIGTERM)
    out, err = p.communicate(timeout=20)
    check(p.returncode == 0, "gpuqos-replay exited %d: %s%s" % (p.returncode, out, err))
    check("Sanitizer" not in err and "runtime error" not in err, "sanitizer report:\n" + err)
    return out


def check_summary(summary, recs, passes=1):
    rm_calls = sum(1 for r in recs if r["kind"] != "other")
    check(summary["differences"] == 0 and summary["different"] == [],
          "statuses differ from the real GPU: %s" % json.dumps(summary["different"], indent=1))
    check(summary["calls"] == summary["same"] == passes * rm_calls,
          "calls %d same %d, want %d" % (summary["calls"], summary["same"], passes * rm_calls))
    check(summary["skipped_other"] == passes * (len(recs) - rm_calls), "skipped_other")


def check_replayed_context(state, client):
    """One replayed CUDA context: its four TSGs as the real GPU left them."""
    tsgs = sorted((t for t in state["tsgs"] if t["client"] == client),
                  key=lambda t: t["engineType"])
    check([t["engineType"] for t in tsgs] == ENGINE_TYPES,
          "engine types of %s: %r" % (client, [t["engineType"] for t in tsgs]))
    devices = {t["device"] for t in tsgs}
    check(len(devices) == 1, "the TSGs of %s share one device" % client)
    dev = [d for d in state["devices"] if d["client"] == client and d["handle"] in devices]
    check(len(dev) == 1 and dev[0]["deviceId"] == 0, "deviceId 0 for %s" % client)
    for t in tsgs:
        # libcuda's own SET_TIMESLICE 2048 reaches the GR TSG only.
        want = (2048, 1) if t["engineType"] == 1 else (1024, 0)
        check((t["timeslice_us"], t["timeslice_sets"]) == want,
              "timeslice of %s: %r" % (t["handle"], t))
        check(t["gpfifo_enabled"] and t["gpfifo_schedules"] == 1, "GPFIFO_SCHEDULE replayed")
    return tsgs


def tsg_clients(state):
    return sorted({t["client"] for t in state["tsgs"]})


def check_client_share(log, pid):
    """Handles inside parameters are renumbered: a device's hClientShare
    names the replayed client (the fixture holds the recorded one)."""
    devs = [e for e in log if e["pid"] == pid and e["kind"] == "alloc" and
            e.get("class") == "0x0080"]
    check(devs, "device allocs in the log")
    shared = [e for e in devs if e["params"]["hClientShare"] != 0]
    check(shared, "a device alloc with hClientShare")
    for e in shared:
        check(e["params"]["hClientShare"] == hexint(e["client"]),
              "hClientShare 0x%x of %s" % (e["params"]["hClientShare"], e["client"]))


def replay_one(sim, trace):
    recs = read_trace(trace)
    p = replay_bg(sim, trace, "--hold", "30")
    summary = replay_summaries(p, 1)[0]
    check_summary(summary, recs)
    s = sim.state()
    check(len(s["files"]) == 1, "one open file")
    check(sorted(c["handle"] for c in s["clients"]) == sorted(summary["clients"]),
          "the clients the trace leaves are the replayed ones")
    recorded = {hexint(r["hNew"]) for r in recs if r["kind"] == "alloc" and
                hexint(r["hClass"]) == 0x41}
    check(not recorded & {hexint(c) for c in summary["clients"]},
          "client handles come from the simulator, not the recording")
    clients = tsg_clients(s)
    check(len(clients) == 1 and len(s["tsgs"]) == 4, "4 TSGs in one client: %r" % s["tsgs"])
    check_replayed_context(s, clients[0])
    check(all(d["deviceId"] == 0 for d in s["devices"]), "every device is GPU 0")
    check_client_share(sim.log(), summary["pid"])
    replay_end(p)
    sim.wait_empty()
    # The trace leaves its clients allocated; the replay frees them at exit.
    frees = [e for e in sim.log() if e["pid"] == summary["pid"] and e["kind"] == "free"]
    traced = sum(1 for r in recs if r["kind"] == "free")
    check(len(frees) == traced + len(summary["clients"]) and
          all(e["status"] == "0x00" for e in frees), "frees at exit: %r" % frees)
    return recs


def replay_detects_difference(sim, trace, recs):
    """--check is a real comparison: a status the GPU did not return fails it."""
    sets = [r for r in recs if r["kind"] == "control" and hexint(r["cmd"]) == SET_TIMESLICE]
    check(sets, "the fixture holds libcuda's SET_TIMESLICE")
    sim.control("fail a06c0103 1f")
    p = subprocess.run([os.path.join(sim.bindir, "gpuqos-replay"), "--dev", sim.dev,
                        "--trace", trace, "--check"], capture_output=True, text=True,
                       timeout=30)
    sim.control("clear")
    check(p.returncode == 1, "--check exit %d with a difference" % p.returncode)
    d = json.loads(p.stdout)["different"]
    check([(x["seq"], x["recorded"]["status"], x["replayed"]["status"]) for x in d] ==
          [(r["seq"], "0x00", "0x1f") for r in sets], "the difference reported: %r" % d)
    sim.wait_empty()


def replay_fixture(b, suffix):
    for trace in fixtures(suffix):
        with Sim(b) as sim:
            recs = replay_one(sim, trace)
            replay_detects_difference(sim, trace, recs)


def case_replay_micro(b):
    replay_fixture(b, "-lc_micro.jsonl")


def case_replay_resnet50(b):
    replay_fixture(b, "-resnet50.jsonl")


def case_replay_contexts(b):
    trace = fixtures("-lc_micro.jsonl")[0]
    with Sim(b) as sim:
        p = replay_bg(sim, trace, "--contexts", "3", "--hold", "30")
        summary = replay_summaries(p, 1)[0]
        check_summary(summary, read_trace(trace), passes=3)
        s = sim.state()
        clients = tsg_clients(s)
        check(len(s["tsgs"]) == 12 and len(clients) == 3, "12 TSGs in 3 clients")
        check(len(s["files"]) == 1 and len({c["fh"] for c in s["clients"]}) == 1,
              "every context on one open file")
        for c in clients:
            check_replayed_context(s, c)
        replay_end(p)
        sim.wait_empty()


def case_replay_fork(b):
    trace = fixtures("-lc_micro.jsonl")[0]
    with Sim(b) as sim:
        p = replay_bg(sim, trace, "--fork", "--hold", "30")
        summaries = replay_summaries(p, 2)
        for summary in summaries:
            check_summary(summary, read_trace(trace))
        check(len({x["pid"] for x in summaries}) == 2, "two processes")
        s = sim.state()
        check(len(s["files"]) == 2 and len({f["opener_pid"] for f in s["files"]}) == 2,
              "an open file per process")
        by_fh = {f["fh"]: f["clients"] for f in s["files"]}
        owners = {t["client"]: c["fh"] for t in s["tsgs"] for c in s["clients"]
                  if c["handle"] == t["client"]}
        check(len(s["tsgs"]) == 8 and len(set(owners.values())) == 2,
              "4 TSGs in a client of each open file")
        for client, fh in owners.items():
            check(client in by_fh[fh], "client %s belongs to fh %d" % (client, fh))
            check_replayed_context(s, client)
        replay_end(p)
        sim.wait_empty()


def case_replay_exit(b):
    """Without frees, exit (the last close) frees everything."""
    trace = fixtures("-lc_micro.jsonl")[0]
    recs = read_trace(trace)
    with Sim(b) as sim:
        p = replay_bg(sim, trace, "--exit-without-free")
        summary = replay_summaries(p, 1)[0]
        out, err = p.communicate(timeout=20)
        check(p.returncode == 0, "gpuqos-replay --exit-without-free: %s" % err)
        check_summary(summary, recs)
        sim.wait_empty()
        frees = [e for e in sim.log() if e["pid"] == summary["pid"] and e["kind"] == "free"]
        check(len(frees) == sum(1 for r in recs if r["kind"] == "free"),
              "no frees beyond the trace's own")


def case_teardown(b):
    """Files still open when the simulator stops get no RELEASE (the kernel
    drops it with the connection): the simulator frees them itself, so its
    leak check stays quiet. This is what an unmount right after a reader
    closed `state` looks like, made certain."""
    with Sim(b) as sim:
        held = [os.open(os.path.join(sim.mnt, n), os.O_RDONLY) for n in ("state", "log", "control")]
        held.append(os.open(sim.dev, os.O_RDWR))
        sim.proc.send_signal(signal.SIGTERM)
        sim.proc.wait(timeout=10)
        for fd in held:
            try:
                os.close(fd)
            except OSError as e:  # the flush finds the connection gone
                check(e.errno == errno.ENOTCONN, "close: %s" % e)
        check("Sanitizer" not in sim.stderr(), "open files leaked at exit:\n" + sim.stderr())
        check(sim.proc.returncode == 0, "gpuqos-sim exited with %d" % sim.proc.returncode)


# --------------------------------------------------------------------------
# DISABLE_CHANNELS (channel gating)
# --------------------------------------------------------------------------

DISABLE_CHANNELS = 0x2080110B
DISABLE_SIZE = 536


class DisableProbe:
    """sim_probe disable: its own client on open file 1, another client on
    open file 2; one DISABLE_CHANNELS (or free) per request."""

    def __init__(self, sim):
        cmd = [os.path.join(sim.bindir, "sim_probe"), "disable", sim.mnt]
        self.p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, start_new_session=True)
        sim.background.append(self.p)
        self.setup = self._reply()
        check(self.setup["case"] == "setup", "sim_probe disable setup: %r" % self.setup)

    def _reply(self):
        line = self.p.stdout.readline()
        if not line:
            self.p.wait(timeout=10)
            raise Failure("sim_probe disable exited %s: %s" % (self.p.returncode,
                                                               self.p.stderr.read()))
        return json.loads(line)

    def ask(self, text):
        self.p.stdin.write(text + "\n")
        self.p.stdin.flush()
        r = self._reply()
        return r["errno"], hexint(r["status"])

    def disable(self, pairs, disable=1, only=0, num=None, fd=1, obj=None, size=DISABLE_SIZE,
                event=0):
        """pairs: (client, channel) hex strings or ints."""
        obj = self.setup["subdevice"] if obj is None else obj
        num = len(pairs) if num is None else num
        words = ["disable", fd, obj, size, event, disable, only, num]
        for c, ch in pairs:
            words += [c, ch]
        return self.ask(" ".join(str(w) for w in words))

    def end(self):
        self.p.stdin.write("quit\n")
        self.p.stdin.close()
        self.p.wait(timeout=10)
        err = self.p.stderr.read()
        check(self.p.returncode == 0, "sim_probe disable exited %d: %s" % (self.p.returncode, err))


def channel(state, client, handle):
    found = [c for c in state["channels"] if c["client"] == client and c["handle"] == handle]
    check(len(found) == 1, "channel %s of %s in the state" % (handle, client))
    return found[0]


def tsg_of(state, client, handle):
    found = [t for t in state["tsgs"] if t["client"] == client and t["handle"] == handle]
    check(len(found) == 1, "TSG %s of %s in the state" % (handle, client))
    return found[0]


def disable_refusals(sim, pr):
    """Every refusal answers its status and changes nothing."""
    su = pr.setup
    own = [(su["client"], ch) for ch in su["channels"]]
    foreign = (su["other_client"], su["other_channel"])
    before = normalized_state(sim.state())
    cases = {
        "on the TSG": (pr.disable(own, obj=su["tsg"]), 0x56),
        "on the device": (pr.disable(own, obj=su["device"]), 0x56),
        "on the client": (pr.disable(own, obj=su["client"]), 0x56),
        "on a channel": (pr.disable(own, obj=su["channels"][0]), 0x56),
        "size 535": (pr.disable(own, size=535), 0x3a),
        "size 537": (pr.disable(own, size=537), 0x3a),
        "size 0": (pr.disable(own, size=0), 0x1f),  # a pointer without a size
        "an event": (pr.disable(own, event=0x1000), 0x1b),
        "65 channels": (pr.disable(own, num=65), 0x1f),
        "0xffffffff channels": (pr.disable(own, num=0xFFFFFFFF), 0x1f),
        "another file's client": (pr.disable(own + [foreign]), 0x23),
        "another file's client first": (pr.disable([foreign] + own), 0x23),
        "an unknown client": (pr.disable(own + [("0x12345678", su["channels"][0])]), 0x23),
        "an unknown channel": (pr.disable(own + [(su["client"], "0x5c0000ee")]), 0x33),
        "a TSG for a channel": (pr.disable(own + [(su["client"], su["tsg"])]), 0x33),
        "the subdevice for a channel": (pr.disable([(su["client"], su["subdevice"])]), 0x33),
        "a zero entry within numChannels": (pr.disable(own, num=3), 0x23),
        "through another open file": (pr.disable(own, fd=2), 0x23),
    }
    sim.control("fail 2080110b 65 1")
    cases["an injected failure"] = (pr.disable(own), 0x65)
    for name, (got, want) in cases.items():
        check(got == (0, want), "%s: errno/status %r, want (0, 0x%x)" % (name, got, want))
    check(normalized_state(sim.state()) == before, "a refused call changed the state")
    log = [e for e in controls(sim.log(), DISABLE_CHANNELS) if e["status"] == "0x3a"]
    check(len(log) == 2 and all("bDisable" not in e["params"] for e in log),
          "a wrong-sized block is not logged as parameters: %r" % log)


def disable_own(sim, pr):
    su = pr.setup
    c, (ch0, ch1) = su["client"], su["channels"]
    s = sim.state()
    check(isinstance(s["t_us"], int) and s["t_us"] > 0, "the state's t_us: %r" % s.get("t_us"))
    for ch in (ch0, ch1):
        check({k: channel(s, c, ch)[k] for k in ("enabled", "disables", "enables",
                                                  "disabled_since_us")} ==
              {"enabled": True, "disables": 0, "enables": 0, "disabled_since_us": None},
              "a new channel is enabled: %r" % channel(s, c, ch))
    check(tsg_of(s, c, su["tsg"])["channels_disabled"] == 0, "no channel disabled yet")

    check(pr.disable([(c, ch0), (c, ch1)]) == (0, 0), "disabling own channels")
    rec = controls(sim.log(), DISABLE_CHANNELS)[-1]
    check(rec["status"] == "0x00" and rec["object"] == su["subdevice"] and
          rec["params"] == {"bDisable": 1, "numChannels": 2, "bOnlyDisableScheduling": 0,
                            "hClient0": hexint(c), "hChannel0": hexint(ch0),
                            "hClient1": hexint(c), "hChannel1": hexint(ch1)},
          "the disable's log record: %r" % rec)
    check(rec["dur_us"] >= 500, "a disable takes at least 500 us: %r" % rec)
    s = sim.state()
    for ch in (ch0, ch1):
        x = channel(s, c, ch)
        check(not x["enabled"] and x["disables"] == 1 and x["enables"] == 0 and
              not x["onlyScheduling"], "disabled: %r" % x)
        check(rec["t_us"] <= x["disabled_since_us"] <= s["t_us"],
              "disabled since %r, call at %d, snapshot at %d" %
              (x["disabled_since_us"], rec["t_us"], s["t_us"]))
    since = channel(s, c, ch0)["disabled_since_us"]
    check(tsg_of(s, c, su["tsg"])["channels_disabled"] == 2, "the TSG counts 2 disabled")
    check(channel(s, su["other_client"], su["other_channel"])["enabled"],
          "the other file's channel is untouched")

    # Again, scheduling only: counted, still disabled since the first.
    check(pr.disable([(c, ch0)], only=1) == (0, 0), "disabling a disabled channel")
    x = channel(sim.state(), c, ch0)
    check(x["disables"] == 2 and x["onlyScheduling"] and x["disabled_since_us"] == since,
          "a second disable: %r" % x)
    # Enabling one, with an injected latency on top of the modelled one.
    sim.control("latency 2080110b 20000")
    check(pr.disable([(c, ch1)], disable=0) == (0, 0), "enabling a channel")
    sim.control("clear")
    rec = controls(sim.log(), DISABLE_CHANNELS)[-1]
    check(rec["params"]["bDisable"] == 0 and rec["dur_us"] >= 20400,
          "the enable's record: %r" % rec)
    s = sim.state()
    x = channel(s, c, ch1)
    check(x["enabled"] and x["enables"] == 1 and x["disables"] == 1 and
          x["disabled_since_us"] is None, "enabled again: %r" % x)
    check(tsg_of(s, c, su["tsg"])["channels_disabled"] == 1, "the TSG counts 1 disabled")
    check(pr.disable([(c, ch1)], disable=0) == (0, 0), "enabling an enabled channel")
    x = channel(sim.state(), c, ch1)
    check(x["enabled"] and x["enables"] == 2, "a second enable is counted: %r" % x)


def disable_free(sim, pr):
    """Freeing the TSG of a disabled channel takes the channel's state along."""
    su = pr.setup
    c = su["client"]
    check(not channel(sim.state(), c, su["channels"][0])["enabled"], "ch0 still disabled")
    check(pr.ask("free %s" % su["tsg"]) == (0, 0), "freeing the TSG")
    s = sim.state()
    check(not [x for x in s["channels"] if x["client"] == c], "the channels went with their TSG")
    check(not [t for t in s["tsgs"] if t["client"] == c], "the TSG is gone")
    check(all(x["enabled"] for x in s["channels"]), "no disabled channel is left")
    # Nothing of it is left to name.
    check(pr.disable([(c, su["channels"][0])]) == (0, 0x33), "a freed channel is unknown")


def case_disable(b):
    with Sim(b) as sim:
        pr = DisableProbe(sim)
        disable_refusals(sim, pr)
        disable_own(sim, pr)
        disable_free(sim, pr)
        pr.end()
        sim.wait_empty()


def fb_used(sim):
    return sim.state()["fb"]["usedBytes"][0]


def case_memory(b):
    """Video memory as the RM has it (docs/rm-facts.md, "Video memory"):
    NV01_MEMORY_LOCAL_USER takes its size from the GPU's heap, one that
    does not fit is NV_ERR_NO_MEMORY and takes nothing, FB_GET_INFO_V2
    answers the heap's size and what is free (KiB), and a free, or the
    client's end, gives it back."""
    with Sim(b, extra=("--fb-mib", "1024")) as sim:
        p = sim.fakecuda_bg("--alloc-mib", "256,512,512,128", "--hold", "30")
        out = []
        for _ in range(5):
            out.append(p.stdout.readline().split())
        check(out[:4] == [["alloc", "256", "NV_OK"], ["alloc", "512", "NV_OK"],
                          ["alloc", "512", "NV_ERR_NO_MEMORY"], ["alloc", "128", "NV_OK"]],
              "allocations: %r" % out)
        check(out[4] == ["fbinfo", str(1024 * 1024), str(128 * 1024), str(1024 * 1024), "NV_OK"],
              "FB info: %r" % out[4])
        st = sim.state()
        check(st["fb"]["totalBytes"] == 1 << 30 and fb_used(sim) == 896 << 20, "state: %r" % st["fb"])
        mem = [o for o in st["others"] if o["class"] == "0x0040"]
        check(sorted(o["bytes"] for o in mem) == [128 << 20, 256 << 20, 512 << 20], "objects: %r" % mem)
        p.kill()
        p.wait(timeout=5)
        sim.wait_empty()
        check(fb_used(sim) == 0, "freed with the client: %r" % sim.state()["fb"])


def case_memory_budget(b):
    """The preempt library's budget (docs/protocol.md, "Memory") over the
    simulated RM: under a 300 MiB MEMORY, 256 MiB go, the next 64 MiB are
    answered NV_ERR_NO_MEMORY by the library and never reach the RM (its
    heap holds 256 MiB), 32 MiB still fit; FB_GET_INFO_V2 shows the budget
    and what is left of it; MEM_USAGE tells the agent what is held and
    refused; the workload runs to its end."""
    from gpuqos_test import gq_proto
    from gpuqos_test.mini_agent import MiniAgent

    lib = os.environ.get("GPUQOS_PREEMPT_LIB")
    if not lib or not os.path.exists(lib):
        raise Failure("GPUQOS_PREEMPT_LIB not set to the built library")
    with Sim(b, extra=("--fb-mib", "4096")) as sim:
        agent = MiniAgent(os.path.join(sim.tmp, "agent.sock"), budget=300 << 20)
        env = dict(os.environ, LD_PRELOAD=lib, GPUQOS_SOCKET=agent.path, GPUQOS_LOG="info",
                   ASAN_OPTIONS="verify_asan_link_order=0:detect_leaks=0")
        # The library connects on the first client: the allocations wait
        # until its budget is in.
        wait = os.path.join(sim.tmp, "go")
        cmd = [os.path.join(b, "fakecuda"), "--dev", sim.dev, "--alloc-wait", wait,
               "--alloc-mib", "256,64,32", "--hold", "30"]
        p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        sim.background.append(p)
        try:
            wait_for(lambda: agent.of(gq_proto.MEM_USAGE), "the library's first MEM_USAGE", 10.0)
            with open(wait, "w"):
                pass
            out = [p.stdout.readline().split() for _ in range(4)]
            check(out[:3] == [["alloc", "256", "NV_OK"], ["alloc", "64", "NV_ERR_NO_MEMORY"],
                              ["alloc", "32", "NV_OK"]], "allocations: %r" % out)
            check(out[3] == ["fbinfo", str(300 * 1024), str(12 * 1024), str(300 * 1024), "NV_OK"],
                  "FB info under the budget: %r" % out[3])
            check(fb_used(sim) == 288 << 20, "the RM holds %r" % sim.state()["fb"])

            def reported():
                u = agent.of(gq_proto.MEM_USAGE)
                return u and u[-1]["used"] == 288 << 20 and u[-1]["refused"] == 1
            wait_for(reported, "MEM_USAGE: 288 MiB held, one refused", 5.0)
            u = agent.of(gq_proto.MEM_USAGE)[-1]
            check(u["limit"] == 300 << 20 and u["refused_bytes"] == 64 << 20 and u["peak"] == 288 << 20
                  and u["device_instance"] == 0 and u["unknown"] == 0, "MEM_USAGE: %r" % u)
            check(p.poll() is None, "the workload runs on after its refusal")
        finally:
            p.kill()
            p.wait(timeout=5)
            agent.close()
        sim.wait_empty()
        check(fb_used(sim) == 0, "freed: %r" % sim.state()["fb"])


CASES = {
    "basic": case_basic, "forms": case_forms, "ownership": case_ownership,
    "release": case_release, "interleave": case_interleave, "inject": case_inject,
    "malformed": case_malformed, "fork": case_fork, "disable": case_disable,
    "replay_micro": case_replay_micro, "replay_resnet50": case_replay_resnet50,
    "replay_contexts": case_replay_contexts, "replay_fork": case_replay_fork,
    "replay_exit": case_replay_exit, "teardown": case_teardown,
    "memory": case_memory, "memory_budget": case_memory_budget,
}


def on_signal(signum, frame):
    raise SystemExit("interrupted by signal %d" % signum)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True, help="directory holding gpuqos-sim, fakecuda, sim_probe, gpuqos-replay")
    ap.add_argument("case", choices=sorted(CASES) + ["all"])
    a = ap.parse_args()
    why = needs()
    if why:
        print("SKIP: " + why)
        return SKIP
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    names = sorted(CASES) if a.case == "all" else [a.case]
    try:
        for name in names:
            t0 = time.monotonic()
            CASES[name](a.bin)
            print("ok %s (%.2fs)" % (name, time.monotonic() - t0))
    finally:
        close_all()
    return 0


if __name__ == "__main__":
    run_main(main)
