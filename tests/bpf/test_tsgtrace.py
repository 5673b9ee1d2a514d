#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Tests of gpuqos's eBPF RM tracer (bpf/): load and attach in both modes,
see exactly what a fake CUDA workload does on the GPU simulator (checked
against the simulator's own log), keep the live TSG and channel tables
across a process exit, an agent restart and a full ring, forget processes
gone while detached (a reused tgid too), recreate incompatible pins (and
pins of an older layout), report the verifier's words when a program is
refused.

Owns: the expectations. Does not own: the calls (fakecuda, rm_dup) or the
simulator.

    test_tsgtrace.py --tracer BIN --sim DIR --dup BIN CASE

Needs root, kernel BTF, and /dev/fuse for the simulator cases; without them
it says why and exits 77 (skip). Each case pins under its own directory in
/sys/fs/bpf and removes it, and the simulator mount, in all cases.
"""
import argparse
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time

from gpuqos_test import SKIP, Skip, check, run_main, wait_for
from gpuqos_test import Failure as Fail
from gpuqos_test.rmcall import (CLASS_CHANNEL, CLASS_CLIENT, CLASS_SUBDEVICE, rm_alloc, rm_device, rm_disable,
                                rm_free, rm_tsg)
from gpuqos_test.sim import Sim as LibSim
from gpuqos_test.sim import close_all

CLIENT_CLASSES = (0x0, 0x1, 0x41)
SET_TIMESLICE = 0xA06C0103
SET_INTERLEAVE = 0xA06C0107
TRACEFS = "/sys/kernel/tracing"


def h(x):
    return int(x, 16) if isinstance(x, str) else x


_CLEANUP = []


def Sim(simdir):
    """The test library's simulator launcher, with one GPU."""
    return LibSim(simdir, gpus=1)


class Tracer:
    """gpuqos-tsgtrace printing events; stop() returns them."""

    def __init__(self, args, pin_dir, *extra):
        self.cmd = [args.tracer, "--pin-dir", pin_dir] + list(extra)
        self.proc = None
        self.ready = None
        self.stderr = ""

    def __enter__(self):
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        _CLEANUP.append(self.kill)
        # Raw reads only: communicate() later reads the raw fd, so nothing
        # may sit in a Python-side buffer.
        buf, fd, end = b"", self.proc.stdout.fileno(), time.monotonic() + 20
        while b"\n" not in buf and time.monotonic() < end:
            r, _, _ = select.select([fd], [], [], 0.5)
            chunk = os.read(fd, 65536) if r else b""
            if r and not chunk:
                break
            buf += chunk
        if b"\n" not in buf:
            self.kill()
            raise Fail("tracer did not start: " + self.proc.stderr.read().decode())
        line, self.rest = buf.split(b"\n", 1)
        self.ready = json.loads(line)
        check(self.ready.get("ready") is True, "first line is not ready: %r" % line)
        return self

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        out, err = self.proc.communicate(timeout=20)
        out, self.stderr = (self.rest + out).decode(), err.decode()
        check(self.proc.returncode == 0, "tracer exited %d: %s" % (self.proc.returncode,
                                                                   self.stderr))
        lines = [json.loads(x) for x in out.splitlines() if x.strip()]
        check(lines and "counters" in lines[-1], "no counters line at the end")
        self.counters = lines[-1]["counters"]
        return lines[:-1]

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def __exit__(self, *exc):
        self.kill()
        return False


def dump(args, pin_dir):
    out = subprocess.run([args.tracer, "--pin-dir", pin_dir, "--dump"], capture_output=True,
                         text=True, timeout=20)
    check(out.returncode == 0, "dump failed: " + out.stderr)
    rows = [json.loads(x) for x in out.stdout.splitlines() if x.strip()]
    return ([r for r in rows if r.get("kind") == "tsg"],
            [r for r in rows if r.get("kind") == "client"],
            rows[-1]["counters"])


def channels_of(args, pin, pid):
    """pid's live channels: handle -> (its TSG, disabled)."""
    out = subprocess.run([args.tracer, "--pin-dir", pin, "--dump"], capture_output=True,
                         text=True, timeout=20)
    check(out.returncode == 0, "dump failed: " + out.stderr)
    rows = [json.loads(x) for x in out.stdout.splitlines() if x.strip()]
    return {h(r["channel"]): (h(r["tsg"]), r["disabled"]) for r in rows
            if r.get("kind") == "channel" and r["tgid"] == pid}


def new_pin_dir(case):
    d = "/sys/fs/bpf/gpuqos-test-%d-%s" % (os.getpid(), case)
    _CLEANUP.append(lambda: unpin(d))
    return d


_TRACER_BIN = [None]


def unpin(d):
    if os.path.isdir(d) and _TRACER_BIN[0]:
        subprocess.call([_TRACER_BIN[0], "--pin-dir", d, "--unpin"])
    shutil.rmtree(d, ignore_errors=True)


def fakecuda(args, sim, *extra, wait=True):
    cmd = [os.path.join(args.sim, "fakecuda"), "--dev", sim.dev] + list(extra)
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _CLEANUP.append(lambda: p.poll() is None and (p.kill(), p.wait()))
    if wait:
        out, err = p.communicate(timeout=30)
        check(p.returncode == 0, "fakecuda %s failed: %s" % (" ".join(extra), err))
    return p


# ------------------------------------------------------------------
# Expectations from the simulator's log
# ------------------------------------------------------------------

def expected_from_log(log, pid):
    """The events the tracer must send for pid, from the simulator's truth."""
    exp = []
    for r in log:
        if r["pid"] != pid or r["errno"] != 0 or r.get("status") != "0x00":
            continue
        if r["kind"] == "alloc":
            cls = h(r["class"])
            p = r.get("params", {})
            if cls in CLIENT_CLASSES:
                exp.append(("client", h(r["object"]), h(r["object"]), cls, None, r["xfer"]))
            elif cls == 0x80:
                exp.append(("device", h(r["client"]), h(r["object"]), cls, p["deviceId"],
                            r["xfer"]))
            elif cls == 0xA06C:
                exp.append(("tsg", h(r["client"]), h(r["object"]), cls, p["engineType"],
                            r["xfer"]))
            elif (cls & 0xFF) == 0x6F and 0xA06F <= cls <= 0xCF6F:
                exp.append(("channel", h(r["client"]), h(r["object"]), cls, h(r["parent"]),
                            r["xfer"]))
        elif r["kind"] == "free":
            exp.append(("free", h(r["client"]), h(r["object"]), None, None, r["xfer"]))
        elif r["kind"] == "control":
            cmd = h(r["cmd"])
            if cmd == SET_TIMESLICE:
                exp.append(("timeslice", h(r["client"]), h(r["object"]), None,
                            r["params"]["timesliceUs"], r["xfer"]))
            elif cmd == SET_INTERLEAVE:
                exp.append(("interleave", h(r["client"]), h(r["object"]), None,
                            r["params"]["tsgInterleaveLevel"], r["xfer"]))
    return exp


def project(ev):
    t = ev["type"]
    cls = h(ev["class"])
    extra = None
    if t == "device":
        extra = ev["deviceId"]
    elif t == "tsg":
        extra = ev["engineType"]
    elif t == "channel":
        extra = h(ev["parent"])
    elif t in ("timeslice", "interleave"):
        extra = ev["value"]
    if t in ("free", "timeslice", "interleave"):
        cls = None
    return (t, h(ev["client"]), h(ev["object"]), cls, extra, ev["xfer"])


def rm_events(events, pid):
    return [e for e in events if e.get("tgid") == pid and e.get("type") != "exit"]


def compare(events, log, pid, what):
    got = [project(e) for e in rm_events(events, pid)]
    exp = expected_from_log(log, pid)
    check(exp, "%s: the simulator logged nothing for pid %d" % (what, pid))
    if got != exp:
        raise Fail("%s: tracer and simulator disagree for pid %d\n tracer: %s\n sim:    %s"
                   % (what, pid, got, exp))


def check_context_shape(events, pid, contexts, what):
    tsgs = [e for e in events if e.get("tgid") == pid and e["type"] == "tsg"]
    check(sorted(e["engineType"] for e in tsgs) == sorted([1, 11, 12, 13] * contexts),
          "%s: TSG engine types %s" % (what, [e["engineType"] for e in tsgs]))
    check(all(e["deviceId"] == 0 for e in tsgs), "%s: TSG device instance not 0" % what)
    devs = [e for e in events if e.get("tgid") == pid and e["type"] == "device"]
    check(len(devs) == contexts and all(d["deviceId"] == 0 for d in devs),
          "%s: device events %s" % (what, devs))
    chans = [e for e in events if e.get("tgid") == pid and e["type"] == "channel"]
    tsg_handles = {(e["client"], e["object"]): e["engineType"] for e in tsgs}
    check(len(chans) == 4 * contexts, "%s: %d channels" % (what, len(chans)))
    for c in chans:
        check(tsg_handles.get((c["client"], c["parent"])) == c["engineType"],
              "%s: channel %s not under a TSG it names" % (what, c["object"]))
    for e in rm_events(events, pid):
        check(e["fd"] >= 0 and e["owner_tgid"] == pid and not e["foreign"],
              "%s: fd/owner wrong in %s" % (what, e))


# ------------------------------------------------------------------
# Cases
# ------------------------------------------------------------------

def ensure_tracefs():
    if os.path.exists(os.path.join(TRACEFS, "events/syscalls/sys_enter_ioctl")):
        return
    if subprocess.call(["mount", "-t", "tracefs", "tracefs", TRACEFS]) != 0:
        raise Skip("cannot mount tracefs on " + TRACEFS)
    _CLEANUP.append(lambda: subprocess.call(["umount", TRACEFS]))
    if not os.path.exists(os.path.join(TRACEFS, "events/syscalls/sys_enter_ioctl")):
        raise Skip("no syscall tracepoints (CONFIG_FTRACE_SYSCALLS?)")


def case_load(args, mode):
    if mode == "tracepoint":
        ensure_tracefs()
    pin = new_pin_dir("load-" + mode)
    with Tracer(args, pin, "--mode", mode) as t:
        check(t.ready["mode"] == mode, "attached in %s, wanted %s" % (t.ready["mode"], mode))
        check(not t.ready["inherited_links"], "fresh pin dir has links")
        names = sorted(os.listdir(pin))
        for n in ("link_ioctl_enter", "link_ioctl_exit", "link_process_exit", "tt_tsgs",
                  "tt_clients", "tt_devices", "tt_events", "tt_counters", "tt_meta"):
            check(n in names, "pin %s missing: %s" % (n, names))
        t.stop()
    if mode == "tracepoint":
        # auto picks the syscall tracepoints when tracefs shows them.
        with Tracer(args, pin, "--mode", "auto") as t:
            check(t.ready["mode"] == "tracepoint", "auto chose " + t.ready["mode"])
            check(t.ready["inherited_links"] and t.ready["inherited_tables"],
                  "second open did not find the first one's pins")
            t.stop()


def case_forms(args, mode):
    if mode == "tracepoint":
        ensure_tracefs()
    pin = new_pin_dir("forms-" + mode)
    with Sim(args.sim) as sim, Tracer(args, pin, "--mode", mode) as t:
        procs = []
        for form in ("64", "21", "xfer"):
            procs.append((form, fakecuda(args, sim, "--hold", "0", "--form", form,
                                         "--contexts", "2")))
        fork = fakecuda(args, sim, "--hold", "0", "--fork")
        time.sleep(0.2)
        log = sim.log()
        events = t.stop()
    for form, p in procs:
        what = "%s form %s" % (mode, form)
        compare(events, log, p.pid, what)
        check_context_shape(events, p.pid, 2, what)
        xfer = form == "xfer"
        forms = {"64": "nvos64", "21": "nvos21", "xfer": "nvos64"}
        for e in rm_events(events, p.pid):
            check(e["xfer"] == xfer, "%s: xfer flag %s" % (what, e))
            if e["type"] in ("client", "device", "tsg", "channel"):
                check(e["form"] == forms[form], "%s: form %s" % (what, e["form"]))
        exits = [e for e in events if e["type"] == "exit" and e["tgid"] == p.pid]
        check(len(exits) == 1 and exits[0]["value"] == 0,
              "%s: exit event after freeing everything: %s" % (what, exits))
    pids = sorted({r["pid"] for r in log} - {p.pid for _, p in procs})
    check(len(pids) == 2 and fork.pid in pids, "fork: pids in the log %s" % pids)
    for pid in pids:
        compare(events, log, pid, "%s fork pid %d" % (mode, pid))
        check_context_shape(events, pid, 1, "%s fork" % mode)
    check(t.counters["ringbuf_full"] == 0 and t.counters["read_fault"] == 0,
          "drops: %s" % t.counters)
    tsgs, clients, _ = dump(args, pin)
    mine = {p.pid for _, p in procs} | set(pids)
    check(not [x for x in tsgs + clients if x["tgid"] in mine],
          "freed objects still in the live table")


def case_dup(args):
    pin = new_pin_dir("dup")
    with Sim(args.sim) as sim, Tracer(args, pin, "--mode", "tp_btf") as t:
        wf = os.path.join(sim.tmp, "release")
        p = subprocess.Popen([args.dup, "owner", sim.dev, wf], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        _CLEANUP.append(lambda: p.poll() is None and (p.kill(), p.wait()))
        info = json.loads(p.stdout.readline())
        check(info["fd2"] != info["fd"], "dup gave the same fd")
        # The node agent's direct path: another process, a pidfd_getfd duplicate.
        f = subprocess.run([args.dup, "foreign", str(info["pid"]), str(info["fd"]),
                            info["client"], info["tsg"], "7000"], capture_output=True,
                           text=True, timeout=20)
        check(f.returncode == 0, "foreign SET_TIMESLICE failed: " + f.stdout + f.stderr)
        fpid = json.loads(f.stdout)["pid"]
        tsgs, _, _ = dump(args, pin)
        mine = [x for x in tsgs if x["tgid"] == info["pid"]]
        check(len(mine) == 1, "live TSGs of the dup owner: %s" % mine)
        m = mine[0]
        check(m["fd"] == info["fd2"] and m["tsg"] == info["tsg"] and m["deviceId"] == 0 and
              m["engineType"] == 1 and m["device"] == info["device"],
              "live TSG entry %s vs %s" % (m, info))
        check(m["timesliceUs"] == 7000 and m["interleave"] == 2,
              "last accepted values not recorded: %s" % m)
        open(wf, "w").close()
        p.communicate(timeout=20)
        check(p.returncode == 0, "rm_dup owner failed")
        time.sleep(0.1)
        log = sim.log()
        events = t.stop()
    compare(events, log, info["pid"], "dup")
    ev = rm_events(events, info["pid"])
    by = {(e["type"], e["object"]): e for e in ev}
    check(by[("client", info["client"])]["fd"] == info["fd"], "client fd")
    check(by[("device", info["device"])]["fd"] == info["fd2"], "device not on the dup fd")
    check(by[("device", info["device"])]["deviceId"] == 0, "device id with paramsSize 0")
    check(by[("tsg", info["tsg"])]["engineType"] == 1, "engine type with paramsSize 0")
    check(by[("timeslice", info["tsg"])]["fd"] == info["fd2"], "timeslice fd")
    check(by[("interleave", info["tsg"])]["fd"] == info["fd"], "interleave fd")
    frees = [e for e in ev if e["type"] == "free"]
    check([(e["object"], e["class"]) for e in frees] ==
          [(info["tsg"], "0xa06c"), (info["client"], "0x0041")], "frees %s" % frees)
    fe = [e for e in events if e.get("tgid") == fpid]
    check(len(fe) == 1 and fe[0]["type"] == "timeslice" and fe[0]["value"] == 7000 and
          fe[0]["foreign"] and fe[0]["owner_tgid"] == info["pid"],
          "foreign control event: %s" % fe)
    compare(events, log, fpid, "foreign")
    tsgs, clients, _ = dump(args, pin)
    check(not [x for x in tsgs + clients if x["tgid"] == info["pid"]], "dup owner left entries")


def live_of(args, pin, pid):
    tsgs, clients, _ = dump(args, pin)
    return ([x for x in tsgs if x["tgid"] == pid], [x for x in clients if x["tgid"] == pid])


def case_exit(args):
    pin = new_pin_dir("exit")
    with Sim(args.sim) as sim, Tracer(args, pin, "--mode", "tp_btf") as t:
        wf = os.path.join(sim.tmp, "go")
        p = fakecuda(args, sim, "--exit-without-free", "--hold", "30", "--wait-file", wf,
                     wait=False)
        tsgs = wait_for(lambda: len(live_of(args, pin, p.pid)[0]) == 4 and
                        live_of(args, pin, p.pid)[0], "4 live TSGs", 10)
        check(sorted(x["engineType"] for x in tsgs) == [1, 11, 12, 13], "engines %s" % tsgs)
        gr = [x for x in tsgs if x["engineType"] == 1][0]
        check(gr["timesliceUs"] == 2048, "libcuda's SET 2048 not recorded: %s" % gr)
        check(all(x["timesliceUs"] is None for x in tsgs if x["engineType"] != 1),
              "copy TSGs have a recorded timeslice")
        check(len(live_of(args, pin, p.pid)[1]) == 1, "one live client")
        chans = channels_of(args, pin, p.pid)
        check(sorted(chans.values()) == sorted((h(x["tsg"]), False) for x in tsgs),
              "one enabled channel under each TSG: %s" % chans)
        open(wf, "w").close()
        p.communicate(timeout=20)
        check(p.returncode == 0, "fakecuda failed")
        wait_for(lambda: live_of(args, pin, p.pid) == ([], []),
                 "the exited process's entries to go", 5)
        check(channels_of(args, pin, p.pid) == {}, "the exited process's channels left")
        time.sleep(0.1)
        events = t.stop()
    ex = [e for e in events if e["type"] == "exit" and e["tgid"] == p.pid]
    check(len(ex) == 1 and ex[0]["value"] == 4, "exit event %s" % ex)
    check(not [e for e in events if e["tgid"] == p.pid and e["type"] == "free"],
          "exit-without-free sent frees")


def case_restart(args, detach):
    """Agent restart. Default: links are pinned, programs stay attached while
    no agent runs, so TSGs made in the gap are in the table and their events
    wait in the pinned ring. With --detach-on-close the gap is blind: TSGs
    made before the restart survive in the table, those made in the gap do
    not appear (documented)."""
    pin = new_pin_dir("restart-" + ("detach" if detach else "pinned"))
    extra = ["--mode", "tp_btf"] + (["--detach-on-close"] if detach else [])
    with Sim(args.sim) as sim:
        wa, wb = os.path.join(sim.tmp, "a"), os.path.join(sim.tmp, "b")
        with Tracer(args, pin, *extra) as t1:
            a = fakecuda(args, sim, "--hold", "60", "--wait-file", wa, wait=False)
            wait_for(lambda: len(live_of(args, pin, a.pid)[0]) == 4 and
                     len(channels_of(args, pin, a.pid)) == 4, "A's TSGs and channels", 10)
            t1.stop()
        links = [n for n in os.listdir(pin) if n.startswith("link_")]
        check(bool(links) != detach, "link pins after close: %s" % links)
        b = fakecuda(args, sim, "--hold", "60", "--wait-file", wb, wait=False)
        wait_for(lambda: len([x for x in sim.state()["tsgs"]]) == 8, "B's TSGs in the sim", 10)
        time.sleep(0.1)
        check(len(live_of(args, pin, a.pid)[0]) == 4, "A's TSGs lost over the restart")
        check(len(channels_of(args, pin, a.pid)) == 4, "A's channels lost over the restart")
        gap = live_of(args, pin, b.pid)[0]
        if detach:
            check(gap == [], "detached, yet the gap's TSGs were seen: %s" % gap)
        else:
            check(len(gap) == 4 and len(channels_of(args, pin, b.pid)) == 4,
                  "pinned links, yet the gap's TSGs or channels are missing: %s" % gap)
        with Tracer(args, pin, "--mode", "tp_btf") as t2:
            check(t2.ready["inherited_tables"], "tables not inherited")
            check(t2.ready["inherited_links"] != detach, "inherited_links %s" % t2.ready)
            open(wa, "w").close()
            open(wb, "w").close()
            a.communicate(timeout=20)
            b.communicate(timeout=20)
            wait_for(lambda: live_of(args, pin, a.pid) == ([], []), "A's entries to go", 5)
            time.sleep(0.1)
            log = sim.log()
            events = t2.stop()
        # The gap's events waited in the pinned ring.
        bt = [e for e in events if e["tgid"] == b.pid and e["type"] == "tsg"]
        check(len(bt) == (0 if detach else 4), "B's TSG events after restart: %d" % len(bt))
        if not detach:
            compare(events, log, b.pid, "restart gap")
        af = [e for e in events if e["tgid"] == a.pid and e["type"] == "free"]
        check(len(af) == 1 and af[0]["class"] == "0x0041", "A's client free %s" % af)
        check(live_of(args, pin, b.pid) == ([], []), "B left entries")


def case_incompatible(args):
    pin = new_pin_dir("incompat")
    os.makedirs(pin, exist_ok=True)
    r = subprocess.run(["bpftool", "map", "create", os.path.join(pin, "tt_tsgs"), "type",
                        "hash", "key", "4", "value", "4", "entries", "8", "name", "tt_tsgs"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise Skip("bpftool map create failed: " + r.stderr)
    with Tracer(args, pin, "--mode", "tp_btf") as t:
        check(t.ready["recreated"] and not t.ready["inherited_tables"],
              "incompatible pin not recreated: %s" % t.ready)
        t.stop()
    check("does not match this build" in t.stderr, "no clear log line: " + t.stderr)
    dump(args, pin)


def case_verifier(args):
    pin = new_pin_dir("verifier")
    r = subprocess.run([args.tracer, "--pin-dir", pin, "--mode", "tp_btf",
                        "--test-verifier-reject"], capture_output=True, text=True, timeout=30)
    check(r.returncode == 1, "a refused program still loaded (rc %d)" % r.returncode)
    msg = [x for x in r.stderr.split("gpuqos-tsgtrace: ") if x.startswith("load BPF programs")]
    check(msg and "verifier says" in msg[0] and "bpf_probe_read_user" in msg[0] and
          "processed" in msg[0], "no verifier log in the error: " + r.stderr[-2000:])
    left = os.listdir(pin) if os.path.isdir(pin) else []
    check(not left, "pins left after a failed load: %s" % left)


def case_channels(args):
    """The channel table, call by call, from this process's own RM calls:
    each channel under its TSG, enabled; DISABLE_CHANNELS accepted sets and
    clears its state; a channel's free removes it; a TSG's free removes the
    channels left under it, a device's free those under its TSGs, a
    client's free the rest."""
    pin = new_pin_dir("channels")
    with Sim(args.sim) as sim, Tracer(args, pin, "--mode", "tp_btf"):
        fd = os.open(sim.dev, os.O_RDWR)
        try:
            channel_calls(args, pin, fd)
        finally:
            os.close(fd)  # before the simulator's unmount


def channel_calls(args, pin, fd):
    me = os.getpid()
    c = rm_alloc(fd, 0, 0, 0, CLASS_CLIENT)
    dev = rm_device(fd, c, 0x5E000001)
    sub = rm_alloc(fd, c, dev, 0x5E000002, CLASS_SUBDEVICE)
    t1 = rm_tsg(fd, c, dev, 0x5E000010)
    t2 = rm_tsg(fd, c, dev, 0x5E000011, engine=11)
    ch = [rm_alloc(fd, c, t1, 0x5E000020, CLASS_CHANNEL), rm_alloc(fd, c, t1, 0x5E000021, CLASS_CHANNEL),
          rm_alloc(fd, c, t2, 0x5E000022, CLASS_CHANNEL), rm_alloc(fd, c, t1, 0x5E000023, CLASS_CHANNEL)]
    want = {ch[0]: (t1, False), ch[1]: (t1, False), ch[2]: (t2, False), ch[3]: (t1, False)}
    check(channels_of(args, pin, me) == want, "after the allocs: %s" % channels_of(args, pin, me))
    rm_disable(fd, c, sub, ch[1], 1)
    want[ch[1]] = (t1, True)
    check(channels_of(args, pin, me) == want, "after a disable: %s" % channels_of(args, pin, me))
    rm_disable(fd, c, sub, ch[1], 0)
    rm_disable(fd, c, sub, ch[0], 1)
    want[ch[1]], want[ch[0]] = (t1, False), (t1, True)
    check(channels_of(args, pin, me) == want, "after an enable: %s" % channels_of(args, pin, me))
    rm_free(fd, c, t1, ch[3])
    del want[ch[3]]
    check(channels_of(args, pin, me) == want, "after a channel's free: %s" % channels_of(args, pin, me))
    rm_free(fd, c, dev, t1)
    del want[ch[0]], want[ch[1]]
    check(channels_of(args, pin, me) == want, "after its TSG's free: %s" % channels_of(args, pin, me))
    t3 = rm_tsg(fd, c, dev, 0x5E000012)
    want[rm_alloc(fd, c, t3, 0x5E000024, CLASS_CHANNEL)] = (t3, False)
    check(channels_of(args, pin, me) == want, "a new TSG's channel: %s" % channels_of(args, pin, me))
    rm_free(fd, c, c, dev)
    check(channels_of(args, pin, me) == {}, "after the device's free: %s" % channels_of(args, pin, me))
    dev = rm_device(fd, c, 0x5E000003)
    t4 = rm_tsg(fd, c, dev, 0x5E000013)
    rm_alloc(fd, c, t4, 0x5E000025, CLASS_CHANNEL)
    check(len(channels_of(args, pin, me)) == 1, "a channel again")
    rm_free(fd, c, 0, c)
    check(channels_of(args, pin, me) == {}, "after the client's free: %s" % channels_of(args, pin, me))
    check(live_of(args, pin, me) == ([], []), "this process left entries")


def case_ring_full(args):
    """A ring too small for the gap's events: the events are lost (and
    counted), the live tables are not. With the programs left attached
    (pinned links), processes make their TSGs while no one reads the ring;
    every TSG and channel is in the tables."""
    pin = new_pin_dir("ring")
    ring = ["--mode", "tp_btf", "--test-ring-bytes", "4096"]  # ~39 records
    with Sim(args.sim) as sim:
        with Tracer(args, pin, *ring) as t:
            t.stop()
        ps = [fakecuda(args, sim, "--hold", "60", "--wait-file", os.path.join(sim.tmp, "w%d" % i),
                       wait=False) for i in range(6)]
        wait_for(lambda: len(sim.state()["tsgs"]) == 24, "the 24 TSGs in the simulator", 20)
        tsgs, _, counters = dump(args, pin)
        check(counters["ringbuf_full"] > 0, "the ring did not fill: %s" % counters)
        for p in ps:
            check(len([x for x in tsgs if x["tgid"] == p.pid]) == 4 and
                  len(channels_of(args, pin, p.pid)) == 4,
                  "pid %d's TSGs or channels missing from the tables after the ring filled: %s"
                  % (p.pid, [x for x in tsgs if x["tgid"] == p.pid]))
        for i in range(len(ps)):
            open(os.path.join(sim.tmp, "w%d" % i), "w").close()
        for p in ps:
            p.communicate(timeout=20)


def bpftool_map(pin, name, *cmd):
    r = subprocess.run(["bpftool", "-j", "map"] + [cmd[0], "pinned", os.path.join(pin, name)] +
                       list(cmd[1:]), capture_output=True, text=True, timeout=20)
    if r.returncode != 0:
        raise Skip("bpftool map %s failed: %s" % (cmd[0], r.stderr))
    return json.loads(r.stdout) if r.stdout.strip() else None


def le_bytes(v, n):
    return [str(b) for b in v.to_bytes(n, "little")]


def case_older_layout(args):
    """Pins of a layout this build cannot read (tt_meta with layout version
    1, every map otherwise alike): not read; removed, with a log line that
    says so, and the tables start empty; a process made before is not
    misread."""
    pin = new_pin_dir("older")
    with Sim(args.sim) as sim:
        wf = os.path.join(sim.tmp, "go")
        with Tracer(args, pin, "--mode", "tp_btf") as t:
            p = fakecuda(args, sim, "--hold", "60", "--wait-file", wf, wait=False)
            wait_for(lambda: len(live_of(args, pin, p.pid)[0]) == 4, "the TSGs", 10)
            t.stop()
        bpftool_map(pin, "tt_meta", "update", "key", *le_bytes(0, 4), "value",
                    *(le_bytes(1, 4) + le_bytes(96, 4)))
        with Tracer(args, pin, "--mode", "tp_btf") as t:
            check(t.ready["recreated"] and not t.ready["inherited_tables"],
                  "older pins not recreated: %s" % t.ready)
            check(live_of(args, pin, p.pid) == ([], []) and channels_of(args, pin, p.pid) == {},
                  "entries of the older pins read")
            t.stop()
        check("layout version 1 (event 96 bytes), this build has" in t.stderr and
              "does not match this build" in t.stderr, "no clear log line: " + t.stderr)
        open(wf, "w").close()
        p.communicate(timeout=20)


def case_upgrade(args):
    """Pins of layout version 2 (no channel table, no start times; every
    other map alike), programs still attached: kept and upgraded in place,
    with a log line. The TSGs made before are still there, their channels
    are not known; a process made after has its channels; tt_meta says 3."""
    pin = new_pin_dir("upgrade")
    with Sim(args.sim) as sim:
        wa, wb = os.path.join(sim.tmp, "a"), os.path.join(sim.tmp, "b")
        with Tracer(args, pin, "--mode", "tp_btf") as t:
            a = fakecuda(args, sim, "--hold", "60", "--wait-file", wa, wait=False)
            wait_for(lambda: len(live_of(args, pin, a.pid)[0]) == 4, "A's TSGs", 10)
            t.stop()
        for name in ("tt_channels", "tt_tsg_chans", "tt_starts"):
            os.unlink(os.path.join(pin, name))
        bpftool_map(pin, "tt_meta", "update", "key", *le_bytes(0, 4), "value",
                    *(le_bytes(2, 4) + le_bytes(96, 4)))
        tsgs, _, _ = dump(args, pin)  # what an inspection tool of this build reads of them
        check(len([x for x in tsgs if x["tgid"] == a.pid]) == 4, "version 2 pins not dumped")
        with Tracer(args, pin, "--mode", "tp_btf") as t:
            check(t.ready["inherited_tables"] and t.ready["inherited_links"] and not t.ready["recreated"],
                  "version 2 pins not kept: %s" % t.ready)
            check(len(live_of(args, pin, a.pid)[0]) == 4, "A's TSGs lost in the upgrade")
            check(channels_of(args, pin, a.pid) == {}, "channels made before the upgrade invented")
            b = fakecuda(args, sim, "--hold", "60", "--wait-file", wb, wait=False)
            wait_for(lambda: len(channels_of(args, pin, b.pid)) == 4, "B's channels", 10)
            t.stop()
        check("pinned tables of layout version 2 under %s kept and upgraded to 3" % pin in t.stderr,
              "no log line: " + t.stderr)
        meta = bpftool_map(pin, "tt_meta", "lookup", "key", *le_bytes(0, 4))
        check([int(x, 16) for x in meta["value"][:4]] == [3, 0, 0, 0], "tt_meta now: %r" % meta)
        for w, p in ((wa, a), (wb, b)):
            open(w, "w").close()
            p.communicate(timeout=20)


def case_reused(args):
    """A tgid the tables hold that now names another process (its start
    time is not the one recorded): the next open forgets its entries, and
    keeps those of a process that is still itself."""
    pin = new_pin_dir("reused")
    detach = ["--mode", "tp_btf", "--detach-on-close"]
    with Sim(args.sim) as sim:
        wa, wb = os.path.join(sim.tmp, "a"), os.path.join(sim.tmp, "b")
        with Tracer(args, pin, *detach) as t:
            a = fakecuda(args, sim, "--hold", "60", "--wait-file", wa, wait=False)
            b = fakecuda(args, sim, "--hold", "60", "--wait-file", wb, wait=False)
            wait_for(lambda: len(live_of(args, pin, a.pid)[0]) == 4 and
                     len(live_of(args, pin, b.pid)[0]) == 4, "the TSGs", 10)
            t.stop()
        # A's start as if another process had started under its tgid one
        # second later.
        v = bpftool_map(pin, "tt_starts", "lookup", "key", *le_bytes(a.pid, 4))
        start = int.from_bytes(bytes(int(x, 16) for x in v["value"]), "little")
        check(start > 0, "no start time recorded: %r" % v)
        bpftool_map(pin, "tt_starts", "update", "key", *le_bytes(a.pid, 4), "value",
                    *le_bytes(start + 10 ** 9, 8))
        with Tracer(args, pin, *detach) as t:
            check(live_of(args, pin, a.pid) == ([], []) and channels_of(args, pin, a.pid) == {},
                  "the reused tgid's entries kept")
            check(len(live_of(args, pin, b.pid)[0]) == 4 and len(channels_of(args, pin, b.pid)) == 4,
                  "a process still itself lost its entries")
            t.stop()
        check("tgid(s) reused by another process" in t.stderr, "no log line: " + t.stderr)
        for w, p in ((wa, a), (wb, b)):
            open(w, "w").close()
            p.communicate(timeout=20)


CASES = {
    "load_tp_btf": lambda a: case_load(a, "tp_btf"),
    "load_tracepoint": lambda a: case_load(a, "tracepoint"),
    "forms_tp_btf": lambda a: case_forms(a, "tp_btf"),
    "forms_tracepoint": lambda a: case_forms(a, "tracepoint"),
    "dup": case_dup,
    "exit": case_exit,
    "restart_pinned": lambda a: case_restart(a, False),
    "restart_detached": lambda a: case_restart(a, True),
    "incompatible": case_incompatible,
    "older_layout": case_older_layout,
    "upgrade": case_upgrade,
    "channels": case_channels,
    "ring_full": case_ring_full,
    "reused": case_reused,
    "verifier_log": case_verifier,
}
NEEDS_SIM = {"forms_tp_btf", "forms_tracepoint", "dup", "exit", "restart_pinned",
             "restart_detached", "older_layout", "upgrade", "channels", "ring_full",
             "reused"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tracer", required=True)
    ap.add_argument("--sim", required=True, help="directory with gpuqos-sim and fakecuda")
    ap.add_argument("--dup", required=True)
    ap.add_argument("case", choices=sorted(CASES))
    args = ap.parse_args()
    _TRACER_BIN[0] = args.tracer

    if os.geteuid() != 0:
        print("skip: needs root (BPF, bpffs, FUSE)")
        return SKIP
    if not os.path.exists("/sys/kernel/btf/vmlinux"):
        print("skip: no kernel BTF at /sys/kernel/btf/vmlinux")
        return SKIP
    if args.case in NEEDS_SIM and not (os.path.exists("/dev/fuse") and
                                       os.path.exists(os.path.join(args.sim, "gpuqos-sim"))):
        print("skip: needs /dev/fuse and the simulator")
        return SKIP

    def on_signal(signum, frame):
        raise SystemExit(1)
    signal.signal(signal.SIGTERM, on_signal)
    try:
        CASES[args.case](args)
        print("ok")
        return 0
    finally:
        for fn in reversed(_CLEANUP):
            try:
                fn()
            except Exception as e:  # cleanup must go on
                print("cleanup: %s" % e, file=sys.stderr)
        close_all()


if __name__ == "__main__":
    run_main(main)
