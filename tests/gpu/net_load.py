#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""net_load - an open-loop load generator for net_lc_server.py (stdlib only).

    python3 tests/gpu/net_load.py --server "python3 tests/gpu/net_lc_server.py --model llm" \\
        --arrival poisson --period-ms 100 --duration-s 10

Requests are due on a schedule: every --period-ms (fixed) or with
exponential gaps of that mean (poisson; the window's gaps are the same in
every run with the same --seed, whatever the warm-up drew). Each is sent
when due whatever is outstanding, on a connection with no request in
flight: --conns persistent HTTP/1.1 connections, one request each at a
time, so a late reply holds back only its own connection. A request due
while every connection waits is dropped and counted (the bound on requests
in flight). One thread, one selector: due times, sends and replies are
seen by the same loop, on CLOCK_MONOTONIC.

With --server CMD, the server is started here (CMD plus --port 0
--ready-file --die-with-parent), its ready file read (port, request size,
endpoint), and it is killed at the end; otherwise --port and
--request-bytes / --endpoint name a server already up.

The pattern runs --warmup-s first, then --ready-file is created and, with
--start-file, the pattern goes on until that file exists; the measured
window is --duration-s from then, and the replies still out at its end are
waited for --drain-s.

Measured per request, as the client sees it: latency = from the send to
the reply's last byte; lag = from the due time to the send; for /generate
TTFT (send to the first token's chunk) and TPOT (each gap between two
tokens' chunks). Each reply is checked (status, size; for the echo model
the bytes or the tokens it must hold; tokens in order, as many as the
server says); one that is not right counts in errors.

Output: one JSON line (workload "net_<model>", n, p50_us ... max_us,
ttft_*_us and tpot_*_us for /generate, scheduled, sent, dropped,
unanswered, errors, late: sent more than --late-us past its due time,
gap_mean_us: the mean of the window's scheduled gaps); --trace FILE: one
line per request of the window.
"""

import argparse
import json
import os
import random
import selectors
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time

from lc_models import percentile_sorted, touch  # beside it, stdlib only at import

ECHO_VOCAB = 50257


class BadReply(Exception):
    """A reply that is not what the request must get."""


class Conn:
    def __init__(self, sock):
        self.sock = sock
        self.out = b""
        self.buf = bytearray()
        self.req = None  # the request in flight


class Load:
    def __init__(self, a, info):
        self.a, self.info = a, info
        self.sel = selectors.DefaultSelector()
        self.free, self.conns = [], []
        self.generate = info["endpoint"] == "generate"
        self.echo = info.get("model") == "echo"
        self.body = self.make_body(random.Random(a.seed + 1))
        path = "/" + info["endpoint"]
        self.head = (f"POST {path} HTTP/1.1\r\nHost: {a.host}\r\nContent-Length: {len(self.body)}"
                     "\r\nContent-Type: application/octet-stream\r\n\r\n").encode()
        self.records = []
        self.errors = []
        for _ in range(a.conns):
            s = socket.create_connection((a.host, info["port"]), timeout=10)
            s.setblocking(False)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            c = Conn(s)
            self.conns.append(c)
            self.free.append(c)
            self.sel.register(s, selectors.EVENT_READ, c)

    def make_body(self, rng):
        n = self.info["request_bytes"]
        if self.generate or self.info["kind"] == "ids":
            if n % 4:
                raise SystemExit(f"net_load: a request of ids of {n} bytes")
            return b"".join(rng.randrange(1, 1000).to_bytes(4, "little") for _ in range(n // 4))
        if self.info["kind"] == "image":
            return b"\x00\x3c" * (n // 2)  # fp16 1.0
        return rng.randbytes(n)

    def send(self, rec):
        """rec onto a free connection, or False: every connection waits."""
        if not self.free:
            return False
        c = self.free.pop()
        c.req = rec
        rec["send"] = time.monotonic_ns()
        c.out = self.head + self.body
        self.write(c)
        return True

    def write(self, c):
        try:
            n = c.sock.send(c.out)
            c.out = c.out[n:]
        except BlockingIOError:
            pass
        except OSError as e:
            return self.drop(c, f"send: {e}")
        self.sel.modify(c.sock, selectors.EVENT_READ | (selectors.EVENT_WRITE if c.out else 0), c)

    def fail(self, c, what):
        raise BadReply(f"request {c.req['i']}: {what}")

    def drop(self, c, what):
        """A connection whose reply went wrong is closed: what follows on it
        cannot be read; with none left the run ends."""
        self.errors.append(what)
        if c.req:
            c.req["error"] = what
        print(f"net_load: {what}", file=sys.stderr)
        self.sel.unregister(c.sock)
        c.sock.close()
        self.conns.remove(c)
        if c in self.free:
            self.free.remove(c)
        if not self.conns:
            raise SystemExit(f"net_load: no connection left (last: {what})")

    def read(self, c):
        try:
            data = c.sock.recv(1 << 20)
        except BlockingIOError:
            return
        except OSError as e:
            data, err = b"", e
        else:
            err = None
        t = time.monotonic_ns()
        if not data:
            return self.drop(c, f"the server closed a connection ({err or 'EOF'})"
                             + (f" with request {c.req['i']} in flight" if c.req else ""))
        if not c.req:
            return self.drop(c, "bytes from the server with no request out")
        c.buf += data
        try:
            self.parse(c, t)
        except (BadReply, ValueError) as e:
            self.drop(c, str(e))

    def parse(self, c, t):
        r = c.req
        if "status" not in r:
            end = c.buf.find(b"\r\n\r\n")
            if end < 0:
                if len(c.buf) > 8192:
                    self.fail(c, "no end of the reply's header in 8192 bytes")
                return
            lines = bytes(c.buf[:end]).decode("latin-1").split("\r\n")
            del c.buf[:end + 4]
            parts = lines[0].split(" ", 2)
            r["status"] = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
            hdr = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
            if r["status"] != 200:
                self.fail(c, f"{lines[0]!r} {bytes(c.buf[:200])!r}")
            r["chunked"] = hdr.get("transfer-encoding", "").lower() == "chunked"
            r["length"] = int(hdr.get("content-length", "-1"))
            r["tok"] = []
            if r["chunked"] != self.generate:
                self.fail(c, f"chunked {r['chunked']} from /{self.info['endpoint']}")
        if not r["chunked"]:
            if len(c.buf) < r["length"]:
                return
            body = bytes(c.buf[:r["length"]])
            del c.buf[:r["length"]]
            if self.info.get("reply_bytes") not in (None, len(body)) or \
                    (self.echo and body != self.body):
                self.fail(c, f"a reply of {len(body)} bytes, not the one expected")
            return self.done(c, t)
        while True:
            end = c.buf.find(b"\r\n")
            if end < 0:
                return
            size = int(bytes(c.buf[:end]), 16)
            if len(c.buf) < end + 2 + size + 2:
                return
            line = bytes(c.buf[end + 2:end + 2 + size]).decode()
            del c.buf[:end + 2 + size + 2]
            if size == 0:
                if len(r["tok"]) != self.info["tokens"]:
                    self.fail(c, f"{len(r['tok'])} tokens of {self.info['tokens']}")
                return self.done(c, t)
            idx, tok = (int(x) for x in line.split())
            if idx != len(r["tok"]):
                self.fail(c, f"token {idx} where {len(r['tok'])} was due")
            if self.echo and tok != (int.from_bytes(self.body[-4:], "little") + idx + 1) % ECHO_VOCAB:
                self.fail(c, f"token {idx} is {tok}, not the echo's")
            r["tok"].append(t)

    def done(self, c, t):
        c.req["end"] = t
        if c.buf:
            self.fail(c, "bytes past the reply")
        c.req = None
        self.free.append(c)

    def poll(self, until_ns):
        """Handles the connections until until_ns (CLOCK_MONOTONIC). epoll's
        timeout is whole milliseconds (rounded up): the last --busy-wait-us
        before until_ns are spun, so a send is on time."""
        busy = int(self.a.busy_wait_us * 1000)
        while True:
            left = until_ns - time.monotonic_ns()
            if left <= 0:
                return
            for key, ev in self.sel.select(max(0, left - busy) / 1e9):
                c = key.data
                if ev & selectors.EVENT_WRITE and c.out and c in self.conns:
                    self.write(c)
                if ev & selectors.EVENT_READ and c in self.conns:
                    self.read(c)

    def run(self, t0, t_end, rng, measured, stop=None):
        """The schedule from t0 until t_end (or, when stop is given, until
        stop() holds); measured requests go into self.records."""
        nxt, i, gaps = t0, 0, []
        while True:
            if nxt >= t_end:
                return gaps
            if stop:
                # Looked at every 10 ms: the window starts soon after.
                while time.monotonic_ns() < nxt and not stop():
                    self.poll(min(nxt, time.monotonic_ns() + 10_000_000))
                if stop():
                    return gaps
            self.poll(nxt)
            rec = {"i": i, "due": nxt, "measured": measured}
            if measured:
                self.records.append(rec)
            if not self.send(rec):
                rec["dropped"] = True
            g = (int(rng.expovariate(1.0) * self.a.period_ms * 1e6) if self.a.arrival == "poisson"
                 else int(self.a.period_ms * 1e6))
            gaps.append(g)
            nxt += g
            i += 1

    def drain(self, until_ns):
        while any(c.req for c in self.conns) and time.monotonic_ns() < until_ns:
            self.poll(min(until_ns, time.monotonic_ns() + 10_000_000))


def start_server(a, tmp):
    rf = os.path.join(tmp, "server.ready")
    cmd = shlex.split(a.server) + ["--port", "0", "--ready-file", rf, "--die-with-parent"]
    err = open(os.path.join(tmp, "server.err"), "w+")
    p = subprocess.Popen(cmd, stdout=err, stderr=err, stdin=subprocess.DEVNULL)
    end = time.monotonic() + a.server_timeout_s
    while not os.path.exists(rf):
        if p.poll() is not None:
            err.seek(0)
            raise SystemExit(f"net_load: the server exited with {p.returncode} before it was "
                             f"ready: {' '.join(cmd)}\n{err.read()[-3000:]}")
        if time.monotonic() > end:
            p.kill()
            raise SystemExit(f"net_load: the server was not ready in {a.server_timeout_s} s")
        time.sleep(0.02)
    with open(rf) as f:
        return p, err, json.loads(f.read())


def stop_server(p, err):
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    err.seek(0)
    return err.read()


def stats(a, info, load, gaps, t_start, t_stop):
    recs = load.records
    done = [r for r in recs if "end" in r]
    lat = sorted(r["end"] - r["send"] for r in done)
    lag = sorted(r["send"] - r["due"] for r in recs if "send" in r)

    def us(v):
        return round(v / 1e3, 1)

    def pct(prefix, v):
        return {f"{prefix}p50_us": us(percentile_sorted(v, 50)),
                f"{prefix}p90_us": us(percentile_sorted(v, 90)),
                f"{prefix}p99_us": us(percentile_sorted(v, 99)),
                f"{prefix}p999_us": us(percentile_sorted(v, 99.9)),
                f"{prefix}max_us": us(v[-1]) if v else 0.0}

    res = {"workload": f"net_{info['model']}", "endpoint": info["endpoint"], "n": len(done)}
    res.update(pct("", lat))
    res["mean_us"] = us(sum(lat) / len(lat)) if lat else 0.0
    if load.generate:
        ttft = sorted(r["tok"][0] - r["send"] for r in done)
        tpot = sorted(t1 - t0 for r in done for t0, t1 in zip(r["tok"], r["tok"][1:]))
        res.update(pct("ttft_", ttft))
        res.update(pct("tpot_", tpot))
        res["tokens"] = sum(len(r["tok"]) for r in done)
        res["tokens_per_request"] = info["tokens"]
    res.update({
        "scheduled": len(recs), "sent": sum(1 for r in recs if "send" in r),
        "dropped": sum(1 for r in recs if r.get("dropped")),
        "unanswered": sum(1 for r in recs if "send" in r and "end" not in r),
        "errors": len(load.errors),
        "late": sum(1 for v in lag if v > a.late_us * 1000),
        "lag_p50_us": us(percentile_sorted(lag, 50)), "lag_p99_us": us(percentile_sorted(lag, 99)),
        "gap_mean_us": us(sum(gaps) / len(gaps)) if gaps else 0.0,
        "period_us": round(a.period_ms * 1e3), "arrival": a.arrival, "seed": a.seed,
        "conns": a.conns, "duration_s": round((t_stop - t_start) / 1e9, 3),
        "server": {k: info.get(k) for k in ("model", "mode", "batch", "device", "torch",
                                            "request_bytes", "prompt_tokens")}})
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--server", help="the server's command line (one string)")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int)
    ap.add_argument("--endpoint", choices=["infer", "generate"], default="infer",
                    help="without --server")
    ap.add_argument("--request-bytes", type=int, help="without --server")
    ap.add_argument("--tokens", type=int, default=32, help="without --server: tokens a reply has")
    ap.add_argument("--arrival", choices=["fixed", "poisson"], default="fixed")
    ap.add_argument("--period-ms", type=float, default=5.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--conns", type=int, default=8, help="connections: requests in flight at most")
    ap.add_argument("--duration-s", type=float, default=10.0)
    ap.add_argument("--warmup-s", type=float, default=2.0)
    ap.add_argument("--drain-s", type=float, default=5.0)
    ap.add_argument("--late-us", type=float, default=500.0)
    ap.add_argument("--busy-wait-us", type=float, default=1000.0,
                    help="spin this long before each due time")
    ap.add_argument("--server-timeout-s", type=float, default=300.0)
    ap.add_argument("--ready-file")
    ap.add_argument("--start-file")
    ap.add_argument("--start-timeout-s", type=float, default=300.0)
    ap.add_argument("--trace")
    a = ap.parse_args()
    if a.period_ms <= 0 or a.duration_s <= 0 or a.warmup_s < 0 or a.drain_s < 0 or \
            not 1 <= a.conns <= 256 or not 0 <= a.busy_wait_us <= 1e6:
        ap.error("bad --period-ms, --duration-s, --warmup-s, --drain-s, --conns or --busy-wait-us")
    if not a.server and (a.port is None or a.request_bytes is None):
        ap.error("--server, or --port and --request-bytes")
    tmp = tempfile.mkdtemp(prefix="net-load-")
    server = None
    try:
        if a.server:
            server = start_server(a, tmp)
            info = server[2]
        else:
            info = {"model": "unknown", "endpoint": a.endpoint, "port": a.port,
                    "kind": "ids" if a.endpoint == "generate" else "bytes",
                    "request_bytes": a.request_bytes, "reply_bytes": None, "tokens": a.tokens}
        load = Load(a, info)
        # The warm-up draws from a generator of its own: the window's
        # schedule is the same in every run with the same seed.
        rng = random.Random(a.seed + 2)
        t = time.monotonic_ns()
        load.run(t, t + int(a.warmup_s * 1e9), rng, False)
        touch(a.ready_file)
        if a.start_file:
            t = time.monotonic_ns()
            load.run(t, t + int(a.start_timeout_s * 1e9), rng, False,
                     stop=lambda: os.path.exists(a.start_file))
            if not os.path.exists(a.start_file):
                raise SystemExit(f"net_load: start file {a.start_file} did not appear")
        # Warm-up requests still out are waited for, not measured.
        t_start = time.monotonic_ns()
        gaps = load.run(t_start, t_start + int(a.duration_s * 1e9), random.Random(a.seed), True)
        t_stop = time.monotonic_ns()
        load.drain(t_stop + int(a.drain_s * 1e9))
        res = stats(a, info, load, gaps, t_start, t_stop)
        if a.trace:
            with open(a.trace, "w") as f:
                f.write("# i due_ns send_ns latency_ns ttft_ns tokens (ns from the window's "
                        "start; send -1: dropped, latency -1: unanswered)\n")
                for r in load.records:
                    s = r.get("send")
                    e = r.get("end")
                    tok = r.get("tok") or []
                    f.write(f"{r['i']} {r['due'] - t_start} {s - t_start if s else -1} "
                            f"{e - s if e else -1} {tok[0] - s if tok and s else -1} {len(tok)}\n")
    finally:
        if server:
            log = stop_server(server[0], server[1])
            if log.strip():
                print(log.rstrip()[-2000:], file=sys.stderr)
        for name in os.listdir(tmp):
            os.unlink(os.path.join(tmp, name))
        os.rmdir(tmp)
    print(json.dumps(res, separators=(",", ":")), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
