#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""test_net.py - the networked LC benchmark's plumbing without a GPU:
net_load.py against net_lc_server.py --model echo over loopback.

  * Poisson /infer: every request scheduled is sent or dropped, every one
    sent is answered with its own bytes; the schedule's gaps are
    exponential (their mean within 6 standard errors of the period, their
    spread and median those of an exponential) and the seed's, the trace
    and the JSON line agree
  * /generate streamed, fixed arrivals, through the ready/start-file
    handshake: every reply has its tokens in order (the client checks each
    one's index and value), tokens = requests x tokens a request, the
    gaps are the period exactly, TTFT and TPOT are there and the first
    token of some request came before its last (the reply streams)
  * one connection, a server slower than the period: requests past the
    bound are dropped and counted, the others answered
  * hostile requests get their 4xx and a closed connection, and the server
    goes on serving; two requests in one write are answered in order
  * suite.py's net set: its scenarios, the command of a net LC, and its
    table of a net_load line (p99 and max against alone, TTFT, drops)

No latency is asserted. Usage: test_net.py
"""
import json
import math
import os
import random
import socket
import subprocess
import sys
import tempfile

import suite  # beside it
from gpuqos_test import check, run_main, wait_for

HERE = os.path.dirname(os.path.abspath(__file__))
SERVER = [sys.executable, os.path.join(HERE, "net_lc_server.py"), "--model", "echo"]
LOAD = [sys.executable, os.path.join(HERE, "net_load.py")]
FIELDS = ("workload", "n", "p50_us", "p90_us", "p99_us", "p999_us", "max_us", "scheduled",
          "sent", "dropped", "unanswered", "errors", "late", "gap_mean_us", "duration_s")
TOK_FIELDS = tuple(f"{k}_{p}_us" for k in ("ttft", "tpot")
                   for p in ("p50", "p90", "p99", "p999", "max"))


def load(server_args, *args, timeout=120, start=None):
    """net_load.py with the echo server; start: (ready, start) files, the
    start file created once the ready file is there. (JSON line, trace rows)."""
    with tempfile.TemporaryDirectory() as d:
        tr = os.path.join(d, "trace")
        # Replies are waited for as long as a busy host makes them take.
        cmd = LOAD + ["--server", " ".join(SERVER + server_args), "--trace", tr,
                      "--warmup-s", "0.2", "--drain-s", "60"] + list(args)
        if start:
            cmd += ["--ready-file", os.path.join(d, "ready"), "--start-file",
                    os.path.join(d, "go")]
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            if start:
                wait_for(lambda: os.path.exists(os.path.join(d, "ready")) or p.poll() is not None,
                         "net_load's ready file", timeout=60)
                check(not os.path.exists(os.path.join(d, "trace")), "a trace before the window")
                open(os.path.join(d, "go"), "w").close()
            out, err = p.communicate(timeout=timeout)
        finally:
            if p.poll() is None:
                p.kill()
                p.communicate()
        check(p.returncode == 0, f"net_load: rc {p.returncode}\n{out}\n{err}")
        lines = [ln for ln in out.splitlines() if ln.startswith("{")]
        check(len(lines) == 1, f"one JSON line: {out!r}")
        res = json.loads(lines[0])
        with open(tr) as f:
            rows = [[int(x) for x in ln.split()] for ln in f if not ln.startswith("#")]
    for k in FIELDS:
        check(k in res, f"{k} in {res}")
    check(res["errors"] == 0 and res["unanswered"] == 0, f"errors or unanswered: {res}\n{err}")
    check(res["sent"] + res["dropped"] == res["scheduled"] == len(rows),
          f"sent + dropped = scheduled = trace rows ({len(rows)}): {res}")
    check(res["n"] == res["sent"], f"every request sent answered: {res}")
    check([r[0] for r in rows] == list(range(len(rows))), "trace rows in order")
    check(all(r[2] >= 0 and r[3] > 0 for r in rows if r[2] != -1),
          "a sent request has a send time and a latency")
    check(sum(1 for r in rows if r[2] == -1) == res["dropped"], "dropped rows = dropped")
    return res, rows


def gaps(rows):
    return [b[1] - a[1] for a, b in zip(rows, rows[1:])]


def poisson():
    period_ms = 2.0
    res, rows = load(["--work-us", "50", "--work", "sleep"], "--arrival", "poisson", "--period-ms", str(period_ms),
                     "--duration-s", "1.5", "--conns", "32", "--seed", "7")
    g = gaps(rows)
    n = len(g)
    check(n >= 500, f"{n} gaps in 1.5 s at a mean of 2 ms")
    p = period_ms * 1e6
    mean = sum(g) / n
    # The mean of n exponential gaps has a standard error of period / sqrt(n).
    check(abs(mean - p) <= 6 * p / math.sqrt(n), f"Poisson gaps' mean {mean:.0f} ns, n {n}")
    sd = math.sqrt(sum((x - mean) ** 2 for x in g) / (n - 1))
    # An exponential's spread is its mean (a fixed schedule's is 0, gaps
    # uniform on [0, 2 x period] 0.58 of it); the estimate's standard
    # error is about sqrt(2 / n) of it.
    check(abs(sd / mean - 1) <= 4 * math.sqrt(2 / n), f"gaps' sd / mean {sd / mean:.2f}, n {n}")
    # Half an exponential's gaps are below ln 2 of its mean (a third of
    # the uniform's), give or take 0.5 / sqrt(n).
    below = sum(1 for x in g if x < p * math.log(2)) / n
    check(abs(below - 0.5) <= 6 * 0.5 / math.sqrt(n), f"{below:.3f} of the gaps below the median")
    check(abs(res["gap_mean_us"] * 1e3 - mean) <= 2 * p, f"gap_mean_us {res['gap_mean_us']}")
    # The window's schedule is --seed's, whatever the warm-up drew: the
    # same in every run.
    rng = random.Random(7)
    check(g == [int(rng.expovariate(1.0) * p) for _ in g], "the window's gaps are not seed 7's")
    check(res["workload"] == "net_echo" and res["arrival"] == "poisson" and "ttft_p99_us" not in res,
          f"an /infer line: {res}")


def generate():
    res, rows = load(["--generate", "--tokens", "8", "--work-us", "1000", "--work", "sleep"],
                     "--arrival", "fixed", "--period-ms", "20", "--duration-s", "1", "--conns", "16",
                     start=True)
    for k in TOK_FIELDS:
        check(k in res, f"{k} in {res}")
    check(res["endpoint"] == "generate" and res["tokens_per_request"] == 8, f"{res}")
    check(res["tokens"] == 8 * res["n"] and res["n"] >= 1, f"tokens: {res}")
    check(all(r[5] == 8 for r in rows if r[3] != -1), "8 tokens in every answered trace row")
    check(set(gaps(rows)) == {20_000_000}, f"fixed gaps: {sorted(set(gaps(rows)))[:5]}")
    check(all(0 < r[4] <= r[3] for r in rows if r[3] != -1), "TTFT within each latency")
    check(res["ttft_max_us"] <= res["max_us"], f"TTFT within the latency: {res}")
    # 7 ms of sleep between the first token and the last: a server that
    # held its tokens to the end would make every TTFT the whole latency.
    check(any(r[4] < r[3] for r in rows if r[3] != -1), "no reply streamed its tokens")
    return res


def suite_table(res):
    """suite.py carries net_load's line: a row beside the same LC alone
    gets its p99 and max against alone, and the client's table."""
    def rec(mode, lr, nbe):
        return {"scenario": f"net_llm {mode}", "rep": 0, "lc": "net_llm", "be": "fill",
                "nbe": nbe, "mode": mode, "lc_args": [], "lc_env": {}, "be_env": [{}] * nbe,
                "lc_result": lr, "be_results": [{"kernels_per_s": 50.0}] * nbe}
    slow = dict(res, p99_us=res["p99_us"] * 2, max_us=res["max_us"] * 4, dropped=3)
    recs = [rec("alone", res, 0), rec("defaults", slow, 1),
            {**rec("be_alone", None, 1), "lc": None, "be_results": [{"kernels_per_s": 100.0}]}]
    suite.derive(recs, None)
    d = recs[1]["derived"]
    check(d.get("p99_vs_alone") == 2.0 and d.get("max_vs_alone") == 4.0 and
          d.get("be_kept") == 0.5, f"net row derived: {d}")
    t = suite.table(recs, None)
    line = next((ln for ln in t.splitlines() if ln.startswith("| net_llm defaults | 0 | 4.00 |")),
                None)
    check(line and f"3 / {res['scheduled']}" in line and
          f"{suite.fmt(res['ttft_p99_us'])}" in line, f"the client's table:\n{t}")


def drops():
    res, rows = load(["--work-us", "20000", "--work", "sleep"], "--arrival", "fixed",
                     "--period-ms", "2", "--duration-s", "0.5", "--conns", "1")
    # One connection, 20 ms a request: at most 26 of 250 go out.
    check(res["scheduled"] == 250 and res["dropped"] >= 200 and res["n"] >= 1, f"drops: {res}")


def exchange(port, raw):
    """raw bytes to the server on a new connection, and every byte back
    until the server closes it."""
    with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
        s.sendall(raw)
        buf = b""
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    return buf
                buf += chunk
        except TimeoutError:
            check(False, f"{raw[:60]!r}: the server kept the connection open: {buf[:200]!r}")


def post(path, body, extra=b""):
    return (b"POST " + path + b" HTTP/1.1\r\nContent-Length: " + str(len(body)).encode()
            + b"\r\n" + extra + b"\r\n" + body)


def hostile():
    with tempfile.TemporaryDirectory() as d:
        rf = os.path.join(d, "ready")
        p = subprocess.Popen(SERVER + ["--request-bytes", "16", "--work-us", "0", "--max-body",
                                       "1024", "--ready-file", rf],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            wait_for(lambda: os.path.exists(rf) or p.poll() is not None, "the server's ready file")
            check(p.poll() is None, f"the echo server exited: {p.returncode}")
            with open(rf) as f:
                info = json.loads(f.read())
            port = info["port"]
            check(info["endpoint"] == "infer" and info["request_bytes"] == 16, f"{info}")
            for raw, code in ((b"GET /infer HTTP/1.1\r\n\r\n", 400),
                              (post(b"/generate", b"x" * 16), 404),
                              (post(b"/infer", b"x" * 15), 400),
                              (b"POST /infer HTTP/1.1\r\n\r\n", 411),
                              (b"POST /infer HTTP/1.1\r\nContent-Length: 4096\r\n\r\n", 413),
                              (b"POST /infer HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400),
                              (post(b"/infer", b"x" * 16, b"Transfer-Encoding: chunked\r\n"), 400),
                              (b"POST /infer HTTP/1.1\r\n" + b"X: y\r\n" * 2000, 431)):
                buf = exchange(port, raw)
                check(buf.startswith(b"HTTP/1.1 %d " % code), f"{raw[:60]!r}: {buf[:200]!r}, "
                                                              f"{code} expected")
            # Two requests in one write on one connection: both answered, in order.
            buf = exchange(port, post(b"/infer", b"a" * 16) +
                           post(b"/infer", b"b" * 16, b"Connection: close\r\n"))
            replies = buf.split(b"HTTP/1.1 200 OK")
            check(len(replies) == 3 and replies[1].endswith(b"a" * 16) and
                  replies[2].endswith(b"b" * 16), f"two requests on a connection: {buf!r}")
            check(p.poll() is None, "the server is still up")
        finally:
            p.terminate()
            _, err = p.communicate(timeout=20)
        check("2 requests served" in err, f"the server's count: {err[-300:]!r}")


def suite_set():
    names = [s["name"] for s in suite.SETS["net"]()]
    check(names and len(names) == len(set(names)), f"the net set: {names}")
    for lc in ("net_resnet50", "net_llm_poisson"):
        check(any(n.startswith(lc + " ") for n in names), f"{lc} in {names}")
    cmd = suite.net_cmd("net_llm_poisson", 3)
    check(cmd[1].endswith("net_load.py") and cmd[cmd.index("--arrival") + 1] == "poisson" and
          "--model llm" in cmd[cmd.index("--server") + 1], f"net_llm_poisson: {cmd}")
    cmd = suite.net_cmd("net_bert_base", 3)
    check("--arrival" not in cmd and "--model bert_base" in cmd[cmd.index("--server") + 1],
          f"net_bert_base: {cmd}")


def main():
    suite_set()
    hostile()
    drops()
    suite_table(generate())
    poisson()
    print("ok")


if __name__ == "__main__":
    run_main(main)
