# SPDX-License-Identifier: Apache-2.0
"""mini_agent - the least node agent a preempt library can talk to: on its
own socket it answers each HELLO with an empty POLICY and, to a library
whose HELLO has MEMORY, a MEMORY budget for one device instance; it keeps
every message it is sent. For tests of the library's memory budget on the
simulator and on a real GPU (tests/gpu/mem_cap_check.py), where the real
node agent's placement decisions are not under test."""
import os
import socket
import threading
import time

from gpuqos_test import gq_proto


class MiniAgent(threading.Thread):
    def __init__(self, path, budget=None, device_instance=0, flags=gq_proto.MEMORY_F_REPORT):
        super().__init__(daemon=True)
        self.path, self.budget, self.device, self.flags = path, budget, device_instance, flags
        self.msgs, self.lock = [], threading.Lock()
        if os.path.exists(path):
            os.unlink(path)
        self.srv = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.srv.bind(path)
        self.srv.listen(16)
        self.start()

    def run(self):
        while True:
            try:
                c, _ = self.srv.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _serve(self, c):
        with c:
            while True:
                try:
                    buf = c.recv(4096)
                except OSError:
                    return
                if not buf:
                    return
                d = gq_proto.parse(buf)
                d["t"] = time.monotonic()
                with self.lock:
                    self.msgs.append(d)
                if d["type"] == gq_proto.HELLO:
                    c.send(gq_proto.hdr(gq_proto.POLICY) + bytes(16))
                    if self.budget is not None and d["flags"] & gq_proto.F_MEMORY:
                        c.send(gq_proto.memory(self.device, self.budget, flags=self.flags))

    def of(self, mtype):
        with self.lock:
            return [m for m in self.msgs if m["type"] == mtype]

    def close(self):
        self.srv.close()
        if os.path.exists(self.path):
            os.unlink(self.path)
