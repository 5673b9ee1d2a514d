#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""e2e_probes.py - what a cluster's network can do to a node's endpoints.

  agent_probes   the node agent (standalone, on the GPU simulator) with its
                 metrics on one port and /healthz, /readyz on the health
                 listener: 40 slow clients on the metrics port (each sends
                 a header byte every 2 s, reconnecting when dropped) for
                 60 s, and meanwhile 4 connections from the probes' own
                 address and 4 from each of 8 others trickling a header
                 byte every 0.25 s into the health listener. The metrics
                 port is full for their address but still serves a scrape
                 from another address, and at least 99 % of the health
                 probes made meanwhile (one every 0.5 s, the kubelet's 1 s
                 timeout each) are answered 200 in time.
                 Then a GET with a body is answered 400 on both listeners.
  plugin_probes  the same for the device plugin (inject mode, registered
                 with the grpc-go test kubelet as tests/plugin does), whose
                 health listener serves /healthz.
  agent_names    a workload whose process name (comm, through a symlink)
                 and executable path hold invalid UTF-8, quotes, a
                 backslash and a newline: /metrics passes promtool and
                 carries U+FFFD for the invalid bytes, a real Prometheus
                 scrapes it (up 1), and `gpuqosctl --json list` is strict
                 UTF-8 JSON with the same name.

--health-on-metrics-port probes /healthz and /readyz on the metrics port and
passes no --health-address: how a build from before the health listener
is tested (it fails there).

Root and /dev/fuse for the simulator (agent scenarios), the grpc-go test
kubelet (plugin), Debian's prometheus (agent_names); exit 77 otherwise.

Usage: e2e_probes.py --build BUILD [--kubelet-build SCRIPT:OUT]
                     [--health-on-metrics-port] SCENARIO
"""
import argparse
import http.client
import json
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))


from gpuqos_test import SKIP, Failure, Skip, check, run_main, wait_for  # noqa: E402

SLOW_CLIENTS = 40
SLOW_BYTE_EVERY_S = 2.0
ATTACK_S = 60.0
PROBE_EVERY_S = 0.5
PROBE_TIMEOUT_S = 1.0  # the kubelet's default timeoutSeconds
# The product's promise: probes keep being answered in time.
PROBES_ANSWERED = 0.99
# Another loopback address: a scraper that is not the slow clients.
OTHER_ADDRESS = "127.0.0.2"
# Trickling into the health listener: from the probes' own address (the
# kubelet's is the node's, which every host-network pod shares) and from
# others, each connection a header byte at a time, faster than any idle
# timeout.
TRICKLE_SOURCES = ["127.0.0.1"] + ["127.0.0.%d" % i for i in range(3, 11)]
TRICKLE_PER_SOURCE = 4
TRICKLE_BYTE_EVERY_S = 0.25


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class SlowClients:
    """n connections to host:port, each sending a request's start and then
    one header byte every SLOW_BYTE_EVERY_S; a dropped one reconnects on
    the next tick. Its thread runs until stop()."""

    def __init__(self, host, port, n=SLOW_CLIENTS, every=SLOW_BYTE_EVERY_S, sources=None,
                 path="/metrics"):
        self.addr = (host, port)
        self.every = every
        self.path = path
        # The source address of each connection (None: the kernel's choice).
        self.sources = [sources[i % len(sources)] if sources else None for i in range(n)]
        self.socks = [None] * n
        self.connects = 0
        self.held_max = 0
        self.done = threading.Event()
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def tick(self):
        for i, s in enumerate(self.socks):
            try:
                if s is None:
                    src = (self.sources[i], 0) if self.sources[i] else None
                    s = socket.create_connection(self.addr, timeout=1, source_address=src)
                    self.connects += 1
                    s.sendall(b"GET " + self.path.encode() + b" HTTP/1.1\r\nHost: gpuqos\r\nX-Slow: ")
                    self.socks[i] = s
                else:
                    s.sendall(b"a")
            except OSError:
                if s is not None:
                    s.close()
                self.socks[i] = None

    def held(self):
        """Connections the server has not closed (a closed one reads EOF)."""
        n = 0
        for s in self.socks:
            if s is None:
                continue
            try:
                s.setblocking(False)
                if s.recv(1, socket.MSG_PEEK) == b"":
                    continue
            except BlockingIOError:
                n += 1
            except OSError:
                continue
            finally:
                s.settimeout(1)
        return n

    def run(self):
        self.tick()
        while not self.done.wait(self.every):
            # What the server kept of the last tick's connections (one over
            # a limit is closed at once), before this tick's bytes.
            self.held_max = max(self.held_max, self.held())
            self.tick()

    def stop(self):
        self.done.set()
        self.t.join()
        for s in self.socks:
            if s is not None:
                s.close()


def probe(port, path):
    """One kubelet-like httpGet: a fresh connection, PROBE_TIMEOUT_S in all
    (connect, send and the whole answer, as the kubelet counts it). (status,
    seconds), status 0 when no complete answer came in that time."""
    t0 = time.monotonic()
    end = t0 + PROBE_TIMEOUT_S
    req = ("GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUser-Agent: kube-probe/1.30\r\n"
           "Connection: close\r\n\r\n" % (path, port)).encode()
    buf = b""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=PROBE_TIMEOUT_S) as s:
            s.settimeout(max(0.001, end - time.monotonic()))
            s.sendall(req)
            while True:
                left = end - time.monotonic()
                if left <= 0:
                    return 0, time.monotonic() - t0
                s.settimeout(left)
                got = s.recv(4096)
                if not got:
                    break
                buf += got
    except OSError:
        return 0, time.monotonic() - t0
    head, sep, _ = buf.partition(b"\r\n\r\n")
    parts = head.split(b"\r\n", 1)[0].split()
    if not sep or len(parts) < 2 or not parts[1].isdigit():
        return 0, time.monotonic() - t0
    return int(parts[1]), time.monotonic() - t0


def scrape_raw(port, source="127.0.0.1", timeout=5):
    """GET /metrics from a source address of our choosing: (status, bytes)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout, source_address=(source, 0))
    try:
        c.request("GET", "/metrics")
        r = c.getresponse()
        return r.status, r.read()
    except (OSError, http.client.HTTPException) as e:
        return 0, str(e).encode()
    finally:
        c.close()


def scrape(port, source="127.0.0.1", timeout=5):
    status, body = scrape_raw(port, source, timeout)
    return status, body.decode("utf-8", "replace")


def raw_request(port, data, within_s=15.0):
    """The status line of the answer to raw request bytes. A connection
    closed or reset before any answer is tried again for up to within_s:
    right after the slow clients stop, the server may not yet have reaped
    their connections, and past 8 from one address it closes a new one at
    once (the limit under test in starve); the request itself sends no
    bytes the server leaves unread, so an answer that comes is complete."""
    end = time.monotonic() + within_s
    while True:
        buf = b""
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                s.sendall(data)
                while b"\r\n" not in buf:
                    got = s.recv(4096)
                    if not got:
                        break
                    buf += got
        except (ConnectionResetError, BrokenPipeError):
            buf = b""
        if buf or time.monotonic() >= end:
            return buf.split(b"\r\n", 1)[0].decode("latin-1")
        time.sleep(0.2)


def check_body_refused(port, path):
    # The body is announced, not sent: the answer comes from the headers,
    # and unread body bytes would make the server's close a reset that can
    # drop the answer before it is read.
    line = raw_request(port, b"GET " + path.encode() + b" HTTP/1.1\r\nHost: gpuqos\r\n"
                       b"Content-Length: 3\r\nConnection: close\r\n\r\n")
    check(line.startswith("HTTP/1.1 400"), "GET %s with a body on port %d: %r" % (path, port, line))
    line = raw_request(port, b"GET " + path.encode() + b" HTTP/1.1\r\nHost: gpuqos\r\n"
                       b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n")
    check(line.startswith("HTTP/1.1 400"), "GET %s with a chunked body on port %d: %r" % (path, port, line))
    line = raw_request(port, b"GET " + path.encode() + b" HTTP/1.1\r\nHost: gpuqos\r\n"
                       b"Content-Length: 0\r\nConnection: close\r\n\r\n")
    check(line.startswith("HTTP/1.1 200"), "GET %s with Content-Length: 0: %r" % (path, line))


def starve(metrics_port, health_port, paths, alive):
    """The 60 s attack, probes meanwhile; asserts what happened."""
    slow = SlowClients("127.0.0.1", metrics_port)
    trickle = None
    results = []
    try:
        # The attack holds the metrics port for its address: a scrape from
        # it is dropped (or never answered) at some point.
        wait_for(lambda: scrape(metrics_port, timeout=3)[0] == 0, timeout=30,
                 what="the slow clients to fill the metrics port for 127.0.0.1")
        if health_port != metrics_port:
            trickle = SlowClients("127.0.0.1", health_port,
                                  n=TRICKLE_PER_SOURCE * len(TRICKLE_SOURCES),
                                  every=TRICKLE_BYTE_EVERY_S, sources=TRICKLE_SOURCES,
                                  path=paths[0])
        end = time.monotonic() + ATTACK_S
        i = 0
        while time.monotonic() < end:
            check(alive(), "the daemon exited during the attack")
            t0 = time.monotonic()
            path = paths[i % len(paths)]
            status, took = probe(health_port, path)
            results.append((path, status, took))
            i += 1
            time.sleep(max(0.0, PROBE_EVERY_S - (time.monotonic() - t0)))
        # Answered: a 200 within the kubelet's timeout (probe() gives up then).
        ok = [r for r in results if r[1] == 200]
        bad = [r for r in results if r not in ok]
        print("%d slow clients (%d connects, at most %d held open by the server); %d of %d probes "
              "answered 200 within %.0f s; failed: %r"
              % (SLOW_CLIENTS, slow.connects, slow.held_max, len(ok), len(results),
                 PROBE_TIMEOUT_S, bad[:10]))
        check(slow.held_max >= 1, "the server never held a slow client: the attack did not happen")
        if trickle:
            print("%d connections trickling into the health listener from %d addresses (%d "
                  "connects, at most %d held open by the server)"
                  % (len(trickle.socks), len(TRICKLE_SOURCES), trickle.connects,
                     trickle.held_max))
            check(trickle.held_max >= 1,
                  "the health listener never held a trickling client: that attack did not happen")
            # Each is cut at its deadline and comes back: without one, a
            # connection that trickles is held for as long as it likes.
            check(trickle.connects > 2 * len(trickle.socks),
                  "the health listener cut no trickling connection (%d connects for %d "
                  "connections)" % (trickle.connects, len(trickle.socks)))
        check(results and len(ok) >= math.ceil(PROBES_ANSWERED * len(results)),
              "only %d of %d health probes answered 200 within %.0f s (want >= %.0f %%); "
              "first failures %r" % (len(ok), len(results), PROBE_TIMEOUT_S,
                                     PROBES_ANSWERED * 100, bad[:10]))
        # A scraper at another address still gets its metrics (the slow
        # clients hold their own address's share only).
        other = wait_for(lambda: (lambda r: r if r[0] == 200 else None)(scrape(metrics_port, OTHER_ADDRESS)),
                         timeout=20, what="a scrape from %s during the attack" % OTHER_ADDRESS)
        check("# TYPE " in other[1], "the scrape from %s: %r" % (OTHER_ADDRESS, other[1][:200]))
    finally:
        slow.stop()
        if trickle:
            trickle.stop()
    # And after it, at once.
    for p in paths:
        status, took = probe(health_port, p)
        check(status == 200, "%s after the attack: %d" % (p, status))


# --------------------------------------------------------------------------
# The node agent
# --------------------------------------------------------------------------

def agent_ports(args):
    mport = free_port()
    hport = mport if args.health_on_metrics_port else free_port()
    extra = ["--metrics-address", "127.0.0.1:%d" % mport]
    if not args.health_on_metrics_port:
        extra += ["--health-address", "127.0.0.1:%d" % hport]
    return mport, hport, extra


def t_agent_probes(node, args):
    mport, hport, extra = agent_ports(args)
    node.start_agent(extra=extra)
    wait_for(lambda: probe(hport, "/readyz")[0] == 200, what="/readyz on port %d" % hport)
    if not args.health_on_metrics_port:
        check(probe(hport, "/metrics")[0] == 404, "the health listener serves no /metrics")
        check(scrape(mport)[0] == 200, "/metrics on the metrics port")
    starve(mport, hport, ["/healthz", "/readyz"], lambda: node.agent.poll() is None)
    for port in {mport, hport}:
        check_body_refused(port, "/healthz")


# The name: a quote, a backslash, a newline, a byte that is never UTF-8, a
# brace (the end of a label set). 10 bytes: comm keeps 15.
BAD_NAME = b'a"b\\c\nd\xff}e'
BAD_NAME_SEEN = 'a"b\\c\nd\ufffd}e'
# The directory of the executable: an overlong '/', a lone surrogate.
BAD_DIR = b"bin\xc0\xaf\xed\xa0\x80"


def t_agent_names(node, args):
    import e2e_kube  # Prometheus

    if not shutil.which("promtool"):
        raise Skip("promtool is not installed (Debian package prometheus)")
    mport, hport, extra = agent_ports(args)
    prom = e2e_kube.Prometheus(node.dir, "127.0.0.1:%d" % mport)
    try:
        node.start_agent(extra=extra)
        d = os.path.join(os.fsencode(node.dir), BAD_DIR)
        os.makedirs(d)
        exe = os.path.join(d, b"fake\xf8cuda")
        shutil.copy(node.bin("tests/e2e/e2e-fakecuda"), exe)
        os.chmod(exe, 0o755)
        link = os.path.join(os.fsencode(node.dir), BAD_NAME)
        os.symlink(exe, link)
        cmd = [node.bin("agent/cli/gpuqos"), "run", "--class", "lc", "--", link,
               "--dev", node.dev, "--hold", "60"]
        w = subprocess.Popen(cmd, env=node.env, cwd=node.dir, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, start_new_session=True)
        node.procs.append(w)
        raw = wait_for(lambda: (lambda b: (b"pid=\"%d\"" % w.pid) in b and b)(scrape_raw(mport)[1]),
                       timeout=30, what="the workload's TSGs in /metrics")
        with open("/proc/%d/comm" % w.pid, "rb") as f:
            check(f.read() == BAD_NAME + b"\n", "the workload's comm is the name given")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise Failure("/metrics is not UTF-8: %s" % e)
        p = subprocess.run(["promtool", "check", "metrics"], input=raw, capture_output=True)
        check(p.returncode == 0, "promtool check metrics: rc %d\n%s%s"
              % (p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")))
        want = 'comm="a\\"b\\\\c\\nd\ufffd}e"'
        check(want in text, "the escaped, replaced comm label (want %r) in %r"
              % (want, [ln for ln in text.splitlines() if 'pid="%d"' % w.pid in ln][:2]))
        # A real Prometheus takes the scrape and has the name.
        wait_for(lambda: [v for _, v in prom.query("up")] == [1.0], timeout=30,
                 what="Prometheus: up == 1 (last %r)" % (prom.query("up"),))
        comms = wait_for(lambda: {s[0].get("comm") for s in
                                  prom.query('gpuqos_tsg_info{pid="%d"}' % w.pid)} or None,
                         timeout=30, what="the workload's gpuqos_tsg_info in Prometheus")
        check(comms == {BAD_NAME_SEEN}, "comm in Prometheus: %r" % comms)
        # gpuqosctl --json list: strict UTF-8, valid JSON, the same name.
        p = subprocess.run([node.bin("agent/cli/gpuqosctl"), "--json", "list"], capture_output=True,
                           env=node.env, timeout=20)
        check(p.returncode == 0, "gpuqosctl --json list: rc %d %r" % (p.returncode, p.stderr[-500:]))
        try:
            doc = json.loads(p.stdout.decode("utf-8"))
        except ValueError as e:
            raise Failure("gpuqosctl --json list is not strict UTF-8 JSON (%s): %r" % (e, p.stdout[-400:]))
        names = set()

        def walk(o):
            if isinstance(o, dict):
                if o.get("pid") == w.pid and "comm" in o:
                    names.add(o["comm"])
                for v in o.values():
                    walk(v)
            elif isinstance(o, list):
                for v in o:
                    walk(v)
        walk(doc)
        check(names == {BAD_NAME_SEEN}, "the workload's comm in gpuqosctl --json list: %r" % names)
        print("comm %r reads %r in /metrics, Prometheus and gpuqosctl --json" % (BAD_NAME, BAD_NAME_SEEN))
    finally:
        prom.stop()


# --------------------------------------------------------------------------
# The device plugin
# --------------------------------------------------------------------------

def t_plugin_probes(env, args):
    import test_plugin

    mport = free_port()
    hport = mport if args.health_on_metrics_port else free_port()
    extra = ["--metrics-address", "127.0.0.1:%d" % mport]
    if not args.health_on_metrics_port:
        extra += ["--health-address", "127.0.0.1:%d" % hport]
    env.install_lib()
    env.start_plugin(test_plugin.INJECT, extra=extra)
    test_plugin.register(env, 1)
    wait_for(lambda: probe(hport, "/healthz")[0] == 200, what="/healthz on port %d" % hport)
    if not args.health_on_metrics_port:
        check(probe(hport, "/metrics")[0] == 404, "the health listener serves no /metrics")
        check(scrape(mport)[0] == 200, "/metrics on the metrics port")
    starve(mport, hport, ["/healthz"], lambda: env.plugin.poll() is None)
    for port in {mport, hport}:
        check_body_refused(port, "/healthz")


def run_plugin(args):
    import test_plugin

    if not args.kubelet_build:
        print("SKIP: --kubelet-build not given")
        return SKIP
    script, out = args.kubelet_build.split(":", 1)
    rc = subprocess.run(["sh", script, out]).returncode
    if rc:
        return SKIP if rc == SKIP else 1
    args.kubelet = os.path.join(out, "kubelet")
    env, ok = None, False
    try:
        env = test_plugin.Env(args, 0)
        t_plugin_probes(env, args)
        ok = True
    except Skip:
        ok = True
        raise
    finally:
        if env:
            env.close(ok)
    print("ok")
    return 0


def run_agent(args, fn):
    import e2e

    if os.geteuid() != 0 or not os.path.exists("/dev/fuse"):
        print("SKIP: the simulator needs root and /dev/fuse")
        return SKIP
    node = e2e.Node(os.path.abspath(args.build))
    try:
        fn(node, args)
    except Failure:
        for log in node.agent_logs:
            sys.stderr.write("---- %s\n%s" % (log, open(log, errors="replace").read()[-4000:]))
        raise
    finally:
        node.close()
    print("ok")
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--kubelet-build", help="build_kubelet.sh and its output dir (plugin_probes)")
    ap.add_argument("--health-on-metrics-port", action="store_true",
                    help="probe the metrics port, no --health-address (a build without the health listener)")
    ap.add_argument("scenario", choices=["agent_probes", "agent_names", "plugin_probes"])
    args = ap.parse_args()
    if args.scenario == "plugin_probes":
        return run_plugin(args)
    return run_agent(args, {"agent_probes": t_agent_probes, "agent_names": t_agent_names}[args.scenario])


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    run_main(main)
