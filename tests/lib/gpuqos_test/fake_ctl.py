# SPDX-License-Identifier: Apache-2.0
"""A stand-in for gpuqos-agent's control socket (docs/ctl.md).

Serves one connection at a time, records each request line it receives,
and answers as the test asks: canned bytes, nothing (close), or never
(hold the connection open until the client gives up).
"""
import os
import socket
import threading


class FakeCtl:
    def __init__(self, path):
        self.path = path
        self.requests = []
        self.answer = b'{"ok":true}\n'
        self.mode = "answer"  # "answer" | "close" | "hang"
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.bind(path)
        self._sock.listen(8)
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self):
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return  # closed by close()
            with conn:
                try:
                    self._handle(conn)
                except OSError:
                    pass  # the client went away: nothing to record

    def _handle(self, conn):
        conn.settimeout(10)
        data = b""
        while b"\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                break
            data += chunk
        self.requests.append(data)
        if self.mode == "answer":
            conn.sendall(self.answer)
        elif self.mode == "hang":
            conn.settimeout(60)
            while conn.recv(4096):  # until the client closes
                pass

    def close(self):
        try:
            self._sock.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept()
        except OSError:
            pass
        self._sock.close()
        self._thread.join(5)
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
