#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""net_lc_server - a latency-critical (LC) model served over loopback HTTP/1.1.

    python3 tests/gpu/net_lc_server.py --model resnet50 --port 0 --ready-file F

One process, one serving loop (selectors, persistent connections, at most
--max-conns): requests are taken in the order they are read and run one at
a time, as one GPU queue runs them.

  POST /infer     the body is the model's input, raw: batch x 3 x 224 x 224
                  fp16 NCHW for resnet50 and vit_b16, batch x seq int32
                  token ids for bert_base; it is copied to the GPU, the
                  model runs (a CUDA graph replay, or an eager call with
                  --mode eager), the output (fp16) comes back as the reply
  POST /generate  (llm) the body is a prompt, int32 token ids; each prompt
                  token is one decode step, then --tokens steps follow back
                  to back, greedy, each token sent as one chunk of a chunked
                  reply ("INDEX TOKEN\\n") as soon as it is on the host

--model echo runs the same path on the CPU with no torch import: /infer
replies with the body, /generate with tokens (last prompt id + i + 1) mod
50257, each after --work-us microseconds of spinning (or, --work sleep,
of sleep: a busy host's CPU then stays with the serving path).

The models come from lc_models.py (builders, warm-up, graph capture); llm
is a decoder (GPT-2 small's shape: 12 layers, hidden 768, 12 heads,
vocabulary 50257, random weights) whose one-token step with a static KV
cache is one CUDA graph. --warmup requests run first, then the server
listens and writes --ready-file: one JSON line with the port and what a
request must hold (net_load.py reads it). Bad requests get a 4xx reply and
their connection is closed; nothing reaches the GPU unchecked (sizes, token
ids in the vocabulary).
"""

import argparse
import collections
import ctypes
import json
import os
import selectors
import signal
import socket
import sys
import time

import lc_models  # beside it: builders, warm-up, graph capture

VOCAB = {"bert_base": 30522, "llm": 50257, "echo": 50257}
MAX_HEAD = 8192
MAX_OUT = 16 << 20
REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 411: "Length Required",
           413: "Content Too Large", 431: "Request Header Fields Too Large"}


class BadRequest(Exception):
    def __init__(self, code, what):
        super().__init__(what)
        self.code = code


def work(us, how):
    if how == "sleep":
        time.sleep(us / 1e6)
        return
    end = time.monotonic_ns() + int(us * 1000)
    while time.monotonic_ns() < end:
        pass


def ids_from(body, vocab, what):
    """int32 little-endian token ids, each in [0, vocab)."""
    if len(body) % 4:
        raise BadRequest(400, f"{what}: {len(body)} bytes is not a whole number of int32 ids")
    ids = [int.from_bytes(body[i:i + 4], "little", signed=True) for i in range(0, len(body), 4)]
    if any(not 0 <= t < vocab for t in ids):
        raise BadRequest(400, f"{what}: a token id outside [0, {vocab})")
    return ids


class Echo:
    """The CPU stand-in: the serving path without a model."""

    def __init__(self, a):
        self.a = a
        self.info = {"model": "echo", "endpoint": "generate" if a.generate else "infer",
                     "kind": "ids" if a.generate else "bytes",
                     "request_bytes": a.prompt * 4 if a.generate else a.request_bytes,
                     "reply_bytes": 0 if a.generate else a.request_bytes, "prompt_tokens": a.prompt, "tokens": a.tokens,
                     "device": "cpu"}

    def infer(self, body):
        if len(body) != self.a.request_bytes:
            raise BadRequest(400, f"/infer: {len(body)} bytes, {self.a.request_bytes} expected")
        work(self.a.work_us, self.a.work)
        return bytes(body)

    def generate(self, body):
        ids = ids_from(body, VOCAB["echo"], "/generate")
        if len(ids) != self.a.prompt:
            raise BadRequest(400, f"/generate: {len(ids)} prompt ids, {self.a.prompt} expected")
        for i in range(self.a.tokens):
            work(self.a.work_us, self.a.work)
            yield (ids[-1] + i + 1) % VOCAB["echo"]


def decoder(torch, vocab=50257, h=768, layers=12, heads=12, max_len=512):
    """A decoder of GPT-2 small's shape and one step of it: the step reads
    the token at tok[0] and its position pos[0] (GPU tensors), writes that
    position's keys and values into a static cache, attends over the cache
    up to pos, and leaves the greedy next token in tok and pos + 1 in pos,
    so that steps replay back to back with nothing from the host."""
    nn = torch.nn
    F = torch.nn.functional
    hd = h // heads

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm(h)
            self.qkv = nn.Linear(h, 3 * h)
            self.proj = nn.Linear(h, h)
            self.ln2 = nn.LayerNorm(h)
            self.fc = nn.Linear(h, 4 * h)
            self.out = nn.Linear(4 * h, h)

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok_emb = nn.Embedding(vocab, h)
            self.pos_emb = nn.Embedding(max_len, h)
            self.blocks = nn.ModuleList(Block() for _ in range(layers))
            self.ln = nn.LayerNorm(h)
            self.head = nn.Linear(h, vocab, bias=False)
            self.register_buffer("k", torch.zeros(layers, 1, heads, max_len, hd))
            self.register_buffer("v", torch.zeros(layers, 1, heads, max_len, hd))
            self.register_buffer("tok", torch.zeros(1, dtype=torch.long))
            self.register_buffer("pos", torch.zeros(1, dtype=torch.long))
            self.register_buffer("span", torch.arange(max_len))

        def step(self):
            x = (self.tok_emb(self.tok) + self.pos_emb(self.pos)).view(1, 1, h)
            mask = (self.span <= self.pos).view(1, 1, 1, max_len)
            for i, b in enumerate(self.blocks):
                q, k, v = b.qkv(b.ln1(x)).view(1, 1, 3, heads, hd).unbind(2)
                self.k[i].index_copy_(2, self.pos, k.transpose(1, 2))
                self.v[i].index_copy_(2, self.pos, v.transpose(1, 2))
                a = F.scaled_dot_product_attention(q.transpose(1, 2), self.k[i], self.v[i],
                                                   attn_mask=mask)
                x = x + b.proj(a.transpose(1, 2).reshape(1, 1, h))
                x = x + b.out(F.gelu(b.fc(b.ln2(x))))
            nxt = self.head(self.ln(x)).view(-1).argmax()
            self.tok.copy_(nxt.view(1))
            self.pos.add_(1)
            return self.tok

    return Decoder()


class Model:
    """A model of lc_models.py (or the decoder) on the GPU."""

    def __init__(self, a):
        import torch

        if not torch.cuda.is_available():
            raise SystemExit("net_lc_server: no CUDA device")
        self.torch, self.a = torch, a
        torch.backends.cudnn.benchmark = True
        dev = torch.device("cuda", 0)
        self.max_len = 512
        with torch.no_grad():
            if a.model == "llm":
                self.net = decoder(torch, max_len=self.max_len).to(dev).half().eval()
                fn = self.net.step
                self.tok_host = torch.zeros(1, dtype=torch.long, pin_memory=True)
                self.prompt_gpu = torch.zeros(self.max_len, dtype=torch.long, device=dev)
                req = a.prompt * 4
                reply = 0
            else:
                model, self.x = lc_models.build(torch, a.model, a.batch, a.seq, dev)

                def fn():
                    return model(self.x)
                # fp16 images as they are; token ids as int32 on the wire
                req = self.x.numel() * (2 if self.x.dtype == torch.half else 4)
                reply = None
            lc_models.warm_up(torch, fn)
            if a.mode == "graph":
                self.graph, self.out = lc_models.capture_graph(torch, fn)
                self.run = self.graph.replay
            else:
                self.out = fn()

                def eager():
                    self.out = fn()
                self.run = eager
            if reply is None:
                self.host_out = torch.empty(self.out.shape, dtype=self.out.dtype, pin_memory=True)
                self.host_in = torch.empty(self.x.shape, dtype=self.x.dtype, pin_memory=True)
                reply = self.out.numel() * self.out.element_size()
        self.info = {"model": a.model, "endpoint": "generate" if a.model == "llm" else "infer",
                     "kind": "image" if a.model in ("resnet50", "vit_b16") else "ids",
                     "request_bytes": req, "reply_bytes": reply, "prompt_tokens": a.prompt,
                     "tokens": a.tokens, "mode": a.mode, "batch": a.batch,
                     "device": torch.cuda.get_device_name(dev), "torch": torch.__version__}

    def warm(self, n):
        body = bytearray(self.info["request_bytes"])
        for _ in range(n):
            if self.a.model == "llm":
                for _ in self.generate(body):
                    pass
            else:
                self.infer(body)

    def infer(self, body):
        torch = self.torch
        if len(body) != self.info["request_bytes"]:
            raise BadRequest(400, f"/infer: {len(body)} bytes, {self.info['request_bytes']} expected")
        if self.x.dtype == torch.half:
            src = torch.frombuffer(body, dtype=torch.half).view(self.x.shape)
        else:
            src = torch.tensor(ids_from(body, VOCAB[self.a.model], "/infer"),
                               dtype=self.x.dtype).view(self.x.shape)
        with torch.no_grad():
            self.host_in.copy_(src)
            self.x.copy_(self.host_in, non_blocking=True)
            self.run()
            self.host_out.copy_(self.out, non_blocking=True)
            torch.cuda.synchronize()
        return ctypes.string_at(self.host_out.data_ptr(), self.info["reply_bytes"])

    def generate(self, body):
        torch = self.torch
        ids = ids_from(body, VOCAB["llm"], "/generate")
        if len(ids) != self.a.prompt:
            raise BadRequest(400, f"/generate: {len(ids)} prompt ids, {self.a.prompt} expected")
        with torch.no_grad():
            self.prompt_gpu[:len(ids)].copy_(torch.tensor(ids, dtype=torch.long), non_blocking=True)
            self.net.pos.zero_()
            # The prompt, one step a token (its last step gives the first
            # token), then the rest back to back.
            for i in range(len(ids)):
                self.net.tok.copy_(self.prompt_gpu[i:i + 1])
                self.run()
            for _ in range(self.a.tokens):
                if _:
                    self.run()
                self.tok_host.copy_(self.net.tok, non_blocking=True)
                torch.cuda.synchronize()
                yield int(self.tok_host[0])


class Conn:
    def __init__(self, sock):
        self.sock = sock
        self.inbuf = bytearray()
        self.out = bytearray()
        self.closing = False


class Server:
    def __init__(self, a, model):
        self.a, self.model = a, model
        self.sel = selectors.DefaultSelector()
        self.lsock = socket.create_server((a.host, a.port), backlog=a.max_conns)
        self.lsock.setblocking(False)
        self.sel.register(self.lsock, selectors.EVENT_READ)
        self.conns = set()
        self.queue = collections.deque()
        self.served = 0
        # GPUQOS_BENCH_HINT_US: call the preempt library's
        # gpuqos_request_hint(N) as each request is received (docs/policy.md,
        # "A request that says it comes").
        self.hint = None
        us = os.environ.get("GPUQOS_BENCH_HINT_US")
        if us is not None:
            try:
                f = ctypes.CDLL(None).gpuqos_request_hint
                f.argtypes, f.restype = [ctypes.c_uint], ctypes.c_int
                self.hint = (f, int(us))
            except AttributeError:
                print("net_lc_server: GPUQOS_BENCH_HINT_US is set but no gpuqos_request_hint "
                      "is loaded (no preempt library): no hints", file=sys.stderr)

    def port(self):
        return self.lsock.getsockname()[1]

    def close(self, c):
        if c in self.conns:
            self.conns.discard(c)
            self.sel.unregister(c.sock)
            c.sock.close()

    def flush(self, c):
        """Sends what the socket takes now; the rest waits for EVENT_WRITE."""
        if c.out:
            try:
                n = c.sock.send(c.out)
                del c.out[:n]
            except BlockingIOError:
                pass
            except OSError:
                self.close(c)
                return
        if len(c.out) > MAX_OUT:
            print(f"net_lc_server: a client reads nothing back ({len(c.out)} bytes waiting): "
                  "closed", file=sys.stderr)
            self.close(c)
            return
        if c in self.conns:
            ev = selectors.EVENT_READ | (selectors.EVENT_WRITE if c.out else 0)
            self.sel.modify(c.sock, ev, c)
            if c.closing and not c.out:
                self.close(c)

    def reject(self, c, code, what):
        msg = (what + "\n").encode()
        c.out += (f"HTTP/1.1 {code} {REASONS[code]}\r\nContent-Length: {len(msg)}\r\n"
                  "Connection: close\r\n\r\n").encode() + msg
        c.closing = True
        c.inbuf.clear()
        self.flush(c)

    def parse(self, c):
        """Every whole request in c.inbuf onto the queue."""
        while not c.closing:
            end = c.inbuf.find(b"\r\n\r\n", 0, MAX_HEAD + 4)
            if end < 0:
                if len(c.inbuf) > MAX_HEAD:
                    raise BadRequest(431, f"no end of the header in {MAX_HEAD} bytes")
                return
            lines = bytes(c.inbuf[:end]).decode("latin-1").split("\r\n")
            parts = lines[0].split(" ")
            if len(parts) != 3 or parts[0] != "POST" or parts[2] != "HTTP/1.1":
                raise BadRequest(400, f"not an HTTP/1.1 POST: {lines[0][:80]!r}")
            hdr = {}
            for ln in lines[1:]:
                k, sep, v = ln.partition(":")
                if not sep or not k.strip():
                    raise BadRequest(400, f"bad header line {ln[:80]!r}")
                hdr[k.strip().lower()] = v.strip()
            if "transfer-encoding" in hdr:
                raise BadRequest(400, "a chunked request body is not taken")
            if "content-length" not in hdr:
                raise BadRequest(411, "no Content-Length")
            cl = hdr["content-length"]
            if not cl.isdigit():
                raise BadRequest(400, f"Content-Length {cl[:20]!r}")
            if int(cl) > self.a.max_body:
                raise BadRequest(413, f"Content-Length {cl[:20]}: at most {self.a.max_body}")
            n = int(cl)
            if len(c.inbuf) < end + 4 + n:
                return
            body = c.inbuf[end + 4:end + 4 + n]
            del c.inbuf[:end + 4 + n]
            if parts[1] != "/" + self.model.info["endpoint"]:
                raise BadRequest(404, f"{parts[1][:80]!r}: this server answers "
                                      f"POST /{self.model.info['endpoint']}")
            self.queue.append((c, body, hdr.get("connection", "").lower() == "close"))
            if self.hint:
                self.hint[0](self.hint[1])

    def read(self, c):
        try:
            data = c.sock.recv(1 << 20)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self.close(c)
            return
        c.inbuf += data
        try:
            self.parse(c)
        except BadRequest as e:
            self.reject(c, e.code, str(e))

    def accept(self):
        try:
            s, _ = self.lsock.accept()
        except OSError:
            return
        if len(self.conns) >= self.a.max_conns:
            s.close()
            print(f"net_lc_server: more than {self.a.max_conns} connections: one refused",
                  file=sys.stderr)
            return
        s.setblocking(False)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        c = Conn(s)
        self.conns.add(c)
        self.sel.register(s, selectors.EVENT_READ, c)

    def poll(self, timeout):
        for key, ev in self.sel.select(timeout):
            if key.data is None:
                self.accept()
                continue
            c = key.data
            if ev & selectors.EVENT_WRITE:
                self.flush(c)
            if ev & selectors.EVENT_READ and c in self.conns:
                self.read(c)

    def serve_one(self):
        c, body, close = self.queue.popleft()
        if c not in self.conns:
            return
        try:
            if self.model.info["endpoint"] == "infer":
                out = self.model.infer(body)
                c.out += (f"HTTP/1.1 200 OK\r\nContent-Length: {len(out)}\r\n"
                          "Content-Type: application/octet-stream\r\n\r\n").encode() + out
            else:
                it = self.model.generate(body)
                first = next(it, None)  # a bad prompt is refused before the reply begins
                c.out += b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n" \
                         b"Content-Type: text/plain\r\n\r\n"
                i = 0
                while first is not None:
                    line = f"{i} {first}\n".encode()
                    c.out += f"{len(line):x}\r\n".encode() + line + b"\r\n"
                    self.flush(c)
                    if c not in self.conns:
                        return
                    i += 1
                    first = next(it, None)
                c.out += b"0\r\n\r\n"
        except BadRequest as e:
            self.reject(c, e.code, str(e))
            return
        self.served += 1
        c.closing = close
        self.flush(c)

    def loop(self):
        while True:
            self.poll(0 if self.queue else None)
            if self.queue:
                self.serve_one()


def die_with_parent():
    """SIGKILL when the parent (net_load.py) dies, however it dies: a server
    left behind would hold the GPU."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(1, ctypes.c_ulong(signal.SIGKILL), 0, 0, 0) != 0:  # PR_SET_PDEATHSIG
        raise OSError(ctypes.get_errno(), "PR_SET_PDEATHSIG")
    if os.getppid() == 1:
        raise SystemExit("net_lc_server: the parent is gone")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=["echo", "resnet50", "vit_b16", "bert_base", "llm"],
                    default="echo")
    ap.add_argument("--mode", choices=["graph", "eager"], default="graph")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0, help="0: any free port (in --ready-file)")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--seq", type=int, default=128, help="bert_base's sequence length")
    ap.add_argument("--prompt", type=int, default=16, help="prompt tokens of a /generate request")
    ap.add_argument("--tokens", type=int, default=32, help="tokens a /generate request gets")
    ap.add_argument("--warmup", type=int, default=20, help="requests run before listening")
    ap.add_argument("--generate", action="store_true", help="echo: answer /generate")
    ap.add_argument("--request-bytes", type=int, default=4096, help="echo: /infer's body size")
    ap.add_argument("--work-us", type=float, default=200.0,
                    help="echo: work per request or per token")
    ap.add_argument("--work", choices=["spin", "sleep"], default="spin")
    ap.add_argument("--max-conns", type=int, default=64)
    ap.add_argument("--max-body", type=int, default=64 << 20)
    ap.add_argument("--ready-file")
    ap.add_argument("--die-with-parent", action="store_true")
    a = ap.parse_args()
    if a.batch < 1 or not 1 <= a.seq <= 512 or not 1 <= a.prompt <= 256 or \
            not 1 <= a.tokens <= 256 or a.warmup < 0 or not 1 <= a.request_bytes <= a.max_body or \
            not 0 <= a.work_us <= 1e6 or not 1 <= a.max_conns <= 1024 or not 0 <= a.port < 65536:
        ap.error("bad --batch, --seq, --prompt, --tokens, --warmup, --request-bytes, --work-us, "
                 "--max-conns or --port")
    if a.model == "llm" and a.batch != 1:
        ap.error("llm decodes one sequence: --batch 1")
    if a.die_with_parent:
        die_with_parent()
    model = Echo(a) if a.model == "echo" else Model(a)
    if a.model != "echo":
        model.warm(a.warmup)
    srv = Server(a, model)
    info = dict(model.info, port=srv.port(), pid=os.getpid())
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    if a.ready_file:
        tmp = a.ready_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(json.dumps(info) + "\n")
        os.replace(tmp, a.ready_file)
    print(f"net_lc_server: {json.dumps(info)}", file=sys.stderr, flush=True)
    try:
        srv.loop()
    except SystemExit:
        pass
    print(f"net_lc_server: {srv.served} requests served", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
