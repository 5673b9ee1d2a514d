# SPDX-License-Identifier: Apache-2.0
"""apiserver - a test double of the Kubernetes API server limited to
what gpuqos uses: discovery (/version, /api, /apis, /api/v1), pods list
(plain List or meta.k8s.io/v1 Table, fieldSelector, limit/continue), watch
(chunked, resourceVersion semantics, bookmarks, timeoutSeconds, 410 Gone as
an HTTP status or as an ERROR event inside a 200 stream), GET and merge
PATCH of a pod, POST of events.k8s.io/v1 Events with the server's
validation, bearer tokens, forced disconnects, and the faults of broken
servers a test asks for (Retry-After, a lagging watch, a list without a
usable resourceVersion, a fieldSelector ignored, one pod's PATCHes refused,
a watch from a version ahead of the server's answered 504 "Too large
resource version", as after etcd is restored from a backup).

Tests steer it through /_test/... (JSON, no token needed) or, in-process,
through the Server object. Does not own: persistence, RBAC, any other
resource, protobuf or OpenAPI. /usr/bin/python3 stdlib only. The real
kubectl proves it faithful (tests/kube/test_kubectl.py).

In process: `Server(0, token).start()` (gpuqos_test.kube's KubeNode).
As a program (the kube tests' C harness): tests/kube/fake_apiserver.py
--port-file F [--token T] [--tls-cert C --tls-key K], which runs main()
here; it writes its port to F once listening.
"""

import argparse
import copy
import datetime
import json
import os
import queue
import re
import socket
import ssl
import sys
import threading
import time
import urllib.parse
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

KINDS = ("list", "watch", "get", "patch", "event")


def now_rfc3339():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def status(code, reason, message, details=None):
    st = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
          "message": message, "reason": reason, "code": code}
    if details:
        st["details"] = details
    return st


def merge_patch(target, patch):
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if not isinstance(target, dict):
        target = {}
    out = dict(target)
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


def field_value(obj, path):
    for part in path.split("."):
        if not isinstance(obj, dict):
            return ""
        obj = obj.get(part, "")
    return obj if isinstance(obj, str) else ""


def parse_selector(sel):
    """fieldSelector "a=b,c!=d" -> [(path, op, value)]; None if malformed."""
    terms = []
    for t in filter(None, (sel or "").split(",")):
        m = re.match(r"^([A-Za-z.]+)(==|=|!=)(.*)$", t)
        if not m:
            return None
        terms.append((m.group(1), "!=" if m.group(2) == "!=" else "=", m.group(3)))
    return terms


def selector_matches(terms, obj):
    for path, op, value in terms:
        if (field_value(obj, path) == value) != (op == "="):
            return False
    return True


class State:
    """All server state, guarded by one lock."""

    def __init__(self, token=None):
        self.lock = threading.RLock()
        self.rv = 100
        self.compacted_rv = 0     # a watch from an RV below this gets 410
        self.pods = {}            # (namespace, name) -> pod
        self.history = []         # (rv, type, pod) after compacted_rv
        self.events = []          # events.k8s.io/v1 objects posted
        self.token = token        # None: no authentication
        self.gone_mode = "event"  # how a too-old watch RV is refused
        self.bookmark_interval = 0.0
        self.watchers = set()
        self.requests = []        # one dict per API request
        self.faults = []          # [{"kind", "status", "count", "delay"}]
        self.patch_answer_delay = 0.0  # seconds a PATCH answer waits after the write
        self.watch_delay = 0.0    # seconds each watch event is held back
        # A broken server: list answers carry this as metadata.resourceVersion
        # (any JSON value) when set.
        self.list_rv_override = None
        self.ignore_field_selector = False  # a server that returns every pod

    def next_rv(self):
        self.rv += 1
        return self.rv

    def record(self, etype, pod):
        self.history.append((int(pod["metadata"]["resourceVersion"]), etype,
                             copy.deepcopy(pod)))
        for w in list(self.watchers):
            w.offer(etype, pod)

    def upsert(self, pod):
        with self.lock:
            meta = pod.setdefault("metadata", {})
            meta.setdefault("namespace", "default")
            key = (meta["namespace"], meta["name"])
            old = self.pods.get(key)
            if old:
                meta["uid"] = old["metadata"]["uid"]
                meta["creationTimestamp"] = old["metadata"]["creationTimestamp"]
            else:
                meta.setdefault("uid", str(uuid.uuid4()))
                meta.setdefault("creationTimestamp", now_rfc3339())
            pod.setdefault("apiVersion", "v1")
            pod.setdefault("kind", "Pod")
            meta["resourceVersion"] = str(self.next_rv())
            self.pods[key] = pod
            self.record("MODIFIED" if old else "ADDED", pod)
            return copy.deepcopy(pod)

    def delete(self, ns, name):
        with self.lock:
            pod = self.pods.pop((ns, name), None)
            if pod is None:
                return None
            pod["metadata"]["resourceVersion"] = str(self.next_rv())
            self.record("DELETED", pod)
            return pod

    def restore(self, rv):
        """Like etcd restored from an older backup: the revision goes back
        to rv and what came after it is forgotten (the pods keep their
        contents, at version rv at most)."""
        with self.lock:
            self.rv = rv
            self.history = [h for h in self.history if h[0] <= rv]
            for p in self.pods.values():
                if int(p["metadata"]["resourceVersion"]) > rv:
                    p["metadata"]["resourceVersion"] = str(rv)

    def bulk(self, arg):
        """count pods named prefix-N on node, each with the annotations
        given and a "pad" annotation of pad bytes, all sharing one string
        so that thousands of large pods cost the server little memory."""
        pad = "x" * int(arg.get("pad", 0))
        for i in range(int(arg["count"])):
            ann = dict(arg.get("annotations") or {})
            if pad:
                ann["pad"] = pad
            name = "%s-%d" % (arg.get("prefix", "bulk"), i)
            self.upsert({"metadata": {"name": name, "namespace": "default",
                                      "annotations": ann},
                         "spec": {"nodeName": arg["node"], "containers": [{"name": "main"}]},
                         "status": {"phase": "Running", "containerStatuses": [
                             {"name": "main", "containerID": "containerd://%s-c0ffee" % name}]}})

    def compact(self):
        """Forget history: any watch from an older RV now gets 410."""
        with self.lock:
            self.compacted_rv = self.rv
            self.history = []

    def take_fault(self, kind, name=None):
        """The first fault of this kind with answers left (and, if it names
        a pod, for that pod's requests only), counted down; else None."""
        with self.lock:
            for f in self.faults:
                if f.get("name") and f["name"] != name:
                    continue
                if f["kind"] == kind and f["count"] > 0:
                    f["count"] -= 1
                    return f
        return None

    def broadcast(self, what):
        with self.lock:
            for w in list(self.watchers):
                w.q.put((what,))


class Watcher:
    def __init__(self, state, terms, bookmarks):
        self.state = state
        self.terms = terms
        self.bookmarks = bookmarks
        self.q = queue.Queue()

    def offer(self, etype, pod):
        if selector_matches(self.terms, pod):
            self.q.put(("event", etype, copy.deepcopy(pod),
                        time.monotonic() + self.state.watch_delay))


def pod_table(pods):
    rows = []
    for p in pods:
        st = p.get("status", {})
        cs = st.get("containerStatuses", [])
        ready = sum(1 for c in cs if c.get("ready"))
        rows.append({"cells": [p["metadata"]["name"], "%d/%d" % (ready, len(p.get("spec", {}).get("containers", [])) or len(cs)),
                               st.get("phase", "Pending"),
                               sum(c.get("restartCount", 0) for c in cs), "1m"],
                     "object": p})
    cols = [{"name": n, "type": t, "format": f, "description": n, "priority": 0}
            for n, t, f in (("Name", "string", "name"), ("Ready", "string", ""),
                            ("Status", "string", ""), ("Restarts", "integer", ""),
                            ("Age", "string", ""))]
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {},
            "columnDefinitions": cols, "rows": rows}


DISCOVERY = {
    "/version": {"major": "1", "minor": "32", "gitVersion": "v1.32.0-gpuqos-fake",
                 "platform": "linux/amd64"},
    "/api": {"kind": "APIVersions", "versions": ["v1"],
             "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0",
                                             "serverAddress": "127.0.0.1"}]},
    "/apis": {"kind": "APIGroupList", "apiVersion": "v1", "groups": []},
    "/api/v1": {"kind": "APIResourceList", "groupVersion": "v1", "resources": [
        {"name": "pods", "singularName": "pod", "namespaced": True, "kind": "Pod",
         "verbs": ["get", "list", "watch", "patch"], "shortNames": ["po"]}]},
}

POD_PATH = re.compile(r"^/api/v1/(?:namespaces/([^/]+)/)?pods(?:/([^/]+))?$")
EVENT_PATH = re.compile(r"^/apis/events\.k8s\.io/v1/namespaces/([^/]+)/events$")
MICROTIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}(Z|[+-]\d\d:\d\d)$")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # else every answer waits ~40 ms

    def log_message(self, fmt, *args):
        if os.environ.get("FAKE_APISERVER_DEBUG"):
            sys.stderr.write("fake-apiserver: " + fmt % args + "\n")

    @property
    def st(self):
        return self.server.state

    # ---- plumbing ----

    def send_json(self, code, obj, ctype="application/json", headers=()):
        body = json.dumps(obj).encode()
        # Recorded before the answer leaves, so a test that saw the
        # answer also sees the record.
        self.note_status(code)
        self.send_response(code)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def note_status(self, code):
        if getattr(self, "req_record", None) is not None:
            self.req_record["status"] = code

    def read_body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def split(self):
        u = urllib.parse.urlsplit(self.path)
        return u.path, dict(urllib.parse.parse_qsl(u.query, keep_blank_values=True))

    def authorized(self):
        tok = self.st.token
        if tok is None:
            return True
        got = self.headers.get("Authorization", "")
        return got == "Bearer " + tok

    def wants_table(self):
        return "as=Table" in self.headers.get("Accept", "")

    def begin(self, kind, q, name=None):
        rec = {"kind": kind, "method": self.command, "path": self.path, "name": name,
               "t": time.monotonic(), "rv": q.get("resourceVersion"),
               "auth": self.headers.get("Authorization", ""), "status": None}
        with self.st.lock:
            self.st.requests.append(rec)
        self.req_record = rec
        if not self.authorized():
            self.send_json(401, status(401, "Unauthorized", "Unauthorized"))
            return False
        fault = self.st.take_fault(kind, name)
        if fault:
            code, delay, retry_after = fault["status"], fault["delay"], fault.get("retry_after")
            # A slow failure (a hung server, a timeout) keeps the request
            # in flight long enough for the client to queue more work.
            if delay:
                time.sleep(delay)
            st = status(code, fault.get("reason") or
                        ("InternalError" if code >= 500 else "Injected"),
                        fault.get("message") or "fault injected by the test",
                        fault.get("details"))
            # A watch refused inside its 200 stream, as a watch cache does.
            if fault.get("stream") and kind == "watch":
                self.note_status(200)
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                self.chunk({"type": "ERROR", "object": st})
                self.end_stream()
                return False
            self.send_json(code, st,
                           headers=(("Retry-After", str(retry_after)),) if retry_after else ())
            return False
        return True

    # ---- verbs ----

    def do_GET(self):
        path, q = self.split()
        self.req_record = None
        if path.startswith("/_test/"):
            return self.control_get(path)
        if path in DISCOVERY:
            if path != "/version" and not self.begin("discovery", q):
                return
            return self.send_json(200, DISCOVERY[path])
        m = POD_PATH.match(path)
        if not m:
            return self.send_json(404, status(404, "NotFound", "the server could not find "
                                              "the requested resource"))
        ns, name = m.groups()
        if name:
            if not self.begin("get", q, name):
                return
            return self.get_pod(ns, name)
        if q.get("watch") in ("1", "true"):
            if not self.begin("watch", q):
                return
            return self.watch(ns, q)
        if not self.begin("list", q):
            return
        return self.list_pods(ns, q)

    def do_PATCH(self):
        path, q = self.split()
        self.req_record = None
        m = POD_PATH.match(path)
        if not m or not m.group(2) or not m.group(1):
            body = self.read_body()
            return self.send_json(405, status(405, "MethodNotAllowed", "PATCH not allowed here"))
        body = self.read_body()
        if not self.begin("patch", q, m.group(2)):
            return
        self.patch_pod(m.group(1), m.group(2), body)

    def do_POST(self):
        path, q = self.split()
        self.req_record = None
        body = self.read_body()
        if path.startswith("/_test/"):
            return self.control_post(path, body)
        m = EVENT_PATH.match(path)
        if not m:
            return self.send_json(405, status(405, "MethodNotAllowed", "POST not allowed here"))
        if not self.begin("event", q):
            return
        self.create_event(m.group(1), body)

    def do_DELETE(self):
        path, _ = self.split()
        self.req_record = None
        m = re.match(r"^/_test/pods/([^/]+)/([^/]+)$", path)
        if not m:
            return self.send_json(405, status(405, "MethodNotAllowed", "DELETE not allowed"))
        pod = self.st.delete(m.group(1), m.group(2))
        self.send_json(200 if pod else 404, pod or {})

    # ---- pods ----

    def selected(self, ns, q):
        terms = parse_selector(q.get("fieldSelector"))
        if terms is None:
            return None
        if self.st.ignore_field_selector:
            terms = []
        if ns:
            terms.append(("metadata.namespace", "=", ns))
        return terms

    def list_pods(self, ns, q):
        terms = self.selected(ns, q)
        if terms is None:
            return self.send_json(400, status(400, "BadRequest", "bad fieldSelector"))
        with self.st.lock:
            pods = sorted((copy.deepcopy(p) for p in self.st.pods.values()
                           if selector_matches(terms, p)),
                          key=lambda p: (p["metadata"]["namespace"], p["metadata"]["name"]))
            rv = self.st.rv
        start, cont_rv = 0, rv
        if q.get("continue"):
            try:
                cont_rv, start = (int(x) for x in q["continue"].split(":"))
            except ValueError:
                return self.send_json(400, status(400, "BadRequest", "bad continue token"))
            if cont_rv < self.st.compacted_rv:
                return self.send_json(410, status(410, "Expired", "The provided continue "
                                                  "parameter is too old"))
        limit = int(q.get("limit") or 0)
        page = pods[start:start + limit] if limit else pods[start:]
        meta = {"resourceVersion": str(cont_rv)}
        if self.st.list_rv_override is not None:
            meta["resourceVersion"] = self.st.list_rv_override[0]
        if limit and start + limit < len(pods):
            meta["continue"] = "%d:%d" % (cont_rv, start + limit)
        if self.wants_table():
            t = pod_table(page)
            t["metadata"] = meta
            return self.send_json(200, t)
        self.send_json(200, {"kind": "PodList", "apiVersion": "v1", "metadata": meta,
                             "items": page})

    def get_pod(self, ns, name):
        with self.st.lock:
            pod = copy.deepcopy(self.st.pods.get((ns, name)))
        if not pod:
            return self.send_json(404, status(404, "NotFound", 'pods "%s" not found' % name,
                                              {"name": name, "kind": "pods"}))
        self.send_json(200, pod_table([pod]) if self.wants_table() else pod)

    def patch_pod(self, ns, name, body):
        ctype = self.headers.get("Content-Type", "").split(";")[0].strip()
        if ctype not in ("application/merge-patch+json",
                         "application/strategic-merge-patch+json"):
            return self.send_json(415, status(415, "UnsupportedMediaType",
                                              "the body of the request was in an unknown "
                                              "format - accepted media types include: "
                                              "application/merge-patch+json"))
        try:
            patch = json.loads(body or b"null")
        except ValueError as e:
            return self.send_json(400, status(400, "BadRequest", "invalid JSON: %s" % e))
        with self.st.lock:
            pod = self.st.pods.get((ns, name))
            if not pod:
                return self.send_json(404, status(404, "NotFound",
                                                  'pods "%s" not found' % name))
            pmeta = patch.get("metadata", {}) if isinstance(patch, dict) else {}
            uid = pmeta.get("uid") if isinstance(pmeta, dict) else None
            if uid and uid != pod["metadata"]["uid"]:
                return self.send_json(409, status(409, "Conflict", "Precondition failed: UID "
                                                  "in precondition: %s, UID in object meta: %s"
                                                  % (uid, pod["metadata"]["uid"])))
            new = merge_patch(pod, patch)
            new["metadata"]["name"], new["metadata"]["namespace"] = name, ns
            out = self.st.upsert(new)
            delay = self.st.patch_answer_delay
        # A slow answer: the write is done (and watched) but the client
        # hears about it late, maybe after later writes by others.
        if delay:
            time.sleep(delay)
        self.send_json(200, out)

    # ---- watch ----

    def watch(self, ns, q):
        terms = self.selected(ns, q)
        if terms is None:
            return self.send_json(400, status(400, "BadRequest", "bad fieldSelector"))
        rv_s = q.get("resourceVersion", "")
        w = Watcher(self.st, terms, q.get("allowWatchBookmarks") in ("1", "true"))
        with self.st.lock:
            initial, gone = [], False
            if rv_s in ("", "0"):
                initial = [("ADDED", copy.deepcopy(p)) for p in self.st.pods.values()
                           if selector_matches(terms, p)]
            else:
                try:
                    rv = int(rv_s)
                except ValueError:
                    return self.send_json(400, status(400, "BadRequest",
                                                      "invalid resourceVersion"))
                if rv < self.st.compacted_rv:
                    gone = True
                elif rv > self.st.rv:
                    # Ahead of the server (etcd restored from a backup, a
                    # lagging watch cache): the API server's 504.
                    return self.send_json(504, status(
                        504, "Timeout", "Too large resource version: %d, current: %d"
                        % (rv, self.st.rv), {"causes": [{"reason": "ResourceVersionTooLarge",
                                                         "message": "Too large resource version"}],
                                             "retryAfterSeconds": 1}))
                else:
                    initial = [(t, copy.deepcopy(p)) for r, t, p in self.st.history
                               if r > rv and selector_matches(terms, p)]
            if gone and self.st.gone_mode == "http":
                msg = "too old resource version: %s (%d)" % (rv_s, self.st.compacted_rv)
                return self.send_json(410, status(410, "Expired", msg))
            # A watch refused with an ERROR event is never live: while its
            # stream closes it must not count, nor take a test's expire
            # meant for the watch that follows it.
            if not gone:
                self.st.watchers.add(w)
        try:
            self.stream(w, q, initial, gone, rv_s)
        finally:
            with self.st.lock:
                self.st.watchers.discard(w)

    def chunk(self, obj):
        data = (json.dumps(obj) + "\n").encode()
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def event_obj(self, etype, pod):
        if self.wants_table() and etype != "ERROR":
            pod = pod_table([pod])
        return {"type": etype, "object": pod}

    def bookmark(self):
        with self.st.lock:
            rv = self.st.rv
        self.chunk({"type": "BOOKMARK", "object": {"kind": "Pod", "apiVersion": "v1",
                                                   "metadata": {"resourceVersion": str(rv)}}})

    def stream(self, w, q, initial, gone, rv_s):
        self.note_status(200)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        if gone:
            self.chunk({"type": "ERROR", "object": status(
                410, "Expired", "too old resource version: %s (%d)" % (rv_s,
                                                                       self.st.compacted_rv))})
            return self.end_stream()
        for etype, pod in initial:
            self.chunk(self.event_obj(etype, pod))
        timeout = float(q.get("timeoutSeconds") or 1800)
        end = time.monotonic() + timeout
        next_bm = time.monotonic() + (self.st.bookmark_interval or 1e9)
        while True:
            wait = min(end, next_bm) - time.monotonic()
            try:
                item = w.q.get(timeout=max(wait, 0.0))
            except queue.Empty:
                if time.monotonic() >= end:
                    return self.end_stream()
                if w.bookmarks:
                    self.bookmark()
                next_bm = time.monotonic() + (self.st.bookmark_interval or 1e9)
                continue
            if item[0] == "event":
                # Held back (a lagging watch cache): delivered in order.
                if item[3] > time.monotonic():
                    time.sleep(item[3] - time.monotonic())
                self.chunk(self.event_obj(item[1], item[2]))
            elif item[0] == "bookmark" and w.bookmarks:
                self.bookmark()
            elif item[0] == "close":
                return self.end_stream()
            elif item[0] == "expire":
                self.chunk({"type": "ERROR", "object": status(
                    410, "Expired", "too old resource version: %s" % rv_s)})
                return self.end_stream()
            elif item[0] == "drop":
                # No terminating chunk: the client sees a cut connection.
                self.close_connection = True
                try:
                    self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                return

    def end_stream(self):
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    # ---- events ----

    def event_invalid(self, ns, ev):
        errs = []
        meta = ev.get("metadata") or {}
        if not meta.get("name") and not meta.get("generateName"):
            errs.append("metadata.name: Required value")
        if meta.get("namespace", ns) != ns:
            errs.append("metadata.namespace: does not match the namespace of the request")
        if not MICROTIME.match(str(ev.get("eventTime", ""))):
            errs.append("eventTime: Required value (MicroTime)")
        for f, limit in (("reportingController", 253), ("reportingInstance", 128),
                         ("action", 128), ("reason", 128)):
            v = ev.get(f)
            if not isinstance(v, str) or not v:
                errs.append("%s: Required value" % f)
            elif len(v) > limit:
                errs.append("%s: Too long" % f)
        if ev.get("type") not in ("Normal", "Warning"):
            errs.append("type: Unsupported value: %r" % ev.get("type"))
        if len(str(ev.get("note", "")).encode()) > 1024:
            errs.append("note: Too long: can have at most 1024 bytes")
        reg = ev.get("regarding") or {}
        if reg.get("namespace") and reg.get("namespace") != ns:
            errs.append("regarding.namespace: does not match event.namespace")
        return errs

    def create_event(self, ns, body):
        try:
            ev = json.loads(body)
        except ValueError as e:
            return self.send_json(400, status(400, "BadRequest", "invalid JSON: %s" % e))
        if ev.get("apiVersion") != "events.k8s.io/v1" or ev.get("kind") != "Event":
            return self.send_json(400, status(400, "BadRequest", "not an events.k8s.io/v1 Event"))
        errs = self.event_invalid(ns, ev)
        if errs:
            return self.send_json(422, status(422, "Invalid", "Event is invalid: " +
                                              ", ".join(errs)))
        with self.st.lock:
            meta = ev["metadata"]
            meta.setdefault("name", meta.get("generateName", "") + uuid.uuid4().hex[:5])
            if any(e["metadata"]["name"] == meta["name"] and e["metadata"]["namespace"] == ns
                   for e in self.st.events):
                return self.send_json(409, status(409, "AlreadyExists", 'events.events.k8s.io '
                                                  '"%s" already exists' % meta["name"]))
            meta.update({"namespace": ns, "uid": str(uuid.uuid4()),
                         "resourceVersion": str(self.st.next_rv()),
                         "creationTimestamp": now_rfc3339()})
            self.st.events.append(ev)
        self.send_json(201, ev)

    # ---- test control ----

    def control_get(self, path):
        st = self.st
        with st.lock:
            if path == "/_test/requests":
                return self.send_json(200, st.requests)
            if path == "/_test/events":
                return self.send_json(200, st.events)
            if path == "/_test/state":
                return self.send_json(200, {"rv": st.rv, "watchers": len(st.watchers),
                                            "pods": len(st.pods)})
        self.send_json(404, {})

    def control_post(self, path, body):
        arg = json.loads(body) if body else {}
        st = self.st
        if path == "/_test/pods":
            return self.send_json(200, st.upsert(arg))
        with st.lock:
            if path == "/_test/compact":
                st.compact()
            elif path == "/_test/token":
                st.token = arg.get("token")
            elif path == "/_test/gone_mode":
                st.gone_mode = arg["mode"]
            elif path == "/_test/bookmark_interval":
                st.bookmark_interval = float(arg["seconds"])
            elif path == "/_test/fault":
                # name: only this pod's requests; reason, message, details:
                # the Status answered; stream: a watch's 200 stream that
                # carries the Status as an ERROR event.
                st.faults.append({"kind": arg["kind"], "status": int(arg["status"]),
                                  "count": int(arg.get("count", 1)),
                                  "delay": float(arg.get("delay", 0)),
                                  "retry_after": arg.get("retry_after"),
                                  "name": arg.get("name"), "reason": arg.get("reason"),
                                  "message": arg.get("message"),
                                  "details": arg.get("details"),
                                  "stream": bool(arg.get("stream"))})
            elif path == "/_test/restore":
                st.restore(int(arg["rv"]))
            elif path == "/_test/pods_bulk":
                st.bulk(arg)
            elif path == "/_test/clear_faults":
                st.faults = []
            elif path == "/_test/patch_answer_delay":
                st.patch_answer_delay = float(arg["seconds"])
            elif path == "/_test/watch_delay":
                st.watch_delay = float(arg["seconds"])
            elif path == "/_test/list_rv":
                # {"value": V} sets it (null included); {} clears it.
                st.list_rv_override = (arg["value"],) if "value" in arg else None
            elif path == "/_test/ignore_field_selector":
                st.ignore_field_selector = bool(arg["on"])
            elif path == "/_test/reset_requests":
                st.requests = []
            elif path in ("/_test/disconnect", "/_test/close", "/_test/expire",
                          "/_test/bookmark"):
                st.broadcast({"/_test/disconnect": "drop", "/_test/close": "close",
                              "/_test/expire": "expire",
                              "/_test/bookmark": "bookmark"}[path])
            else:
                return self.send_json(404, {"error": "no such control " + path})
            return self.send_json(200, {"rv": st.rv, "watchers": len(st.watchers)})


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, port=0, token=None, tls_cert=None, tls_key=None):
        super().__init__(("127.0.0.1", port), Handler)
        self.state = State(token)
        self.scheme = "http"
        if tls_cert:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(tls_cert, tls_key)
            # Handshake in the handler thread, not in accept().
            self.socket = ctx.wrap_socket(self.socket, server_side=True,
                                          do_handshake_on_connect=False)
            self.scheme = "https"
        self.thread = None
        self.conns = set()  # open client connections, for crash()
        self.conns_lock = threading.Lock()

    def process_request_thread(self, request, client_address):
        with self.conns_lock:
            self.conns.add(request)
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self.conns_lock:
                self.conns.discard(request)

    def handle_error(self, request, client_address):
        # A client that went away mid-answer is normal here (kubectl -w
        # killed, forced disconnects); anything else is worth a trace.
        if not isinstance(sys.exc_info()[1], (ConnectionError, ssl.SSLError, OSError)):
            super().handle_error(request, client_address)

    @property
    def url(self):
        return "%s://127.0.0.1:%d" % (self.scheme, self.server_address[1])

    def start(self):
        self.thread = threading.Thread(target=self.serve_forever, daemon=True)
        self.thread.start()
        return self

    def stop(self):
        self.state.broadcast("drop")
        self.shutdown()
        self.server_close()

    def crash(self):
        """Like a killed API server: stop, and cut every open connection,
        kept-alive ones included, so no request reaches this instance
        again. The state object survives for a successor (etcd does)."""
        self.stop()
        with self.conns_lock:
            conns = list(self.conns)
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--token")
    ap.add_argument("--tls-cert")
    ap.add_argument("--tls-key")
    a = ap.parse_args()
    srv = Server(a.port, a.token, a.tls_cert, a.tls_key)
    tmp = a.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % srv.server_address[1])
    os.rename(tmp, a.port_file)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass

