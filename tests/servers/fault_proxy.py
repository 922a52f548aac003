"""fault_proxy.py — the fault-injection proxy of tests/servers/servers.py (RF_TEST_FAULT).

GET or HEAD /f/<spec>/<path> is forwarded to nginx as /<path> with the client's Range header,
unless the spec faults it (503xN, 429xN, 500xN, resetxN, shortxN, delay=MSxN, 403, 404,
silent, noranges, rangestar, bighdr, listloop, trickle; `armed`: only after POST /_arm); GET /_log
returns what was answered, POST /_reset starts a new log. It runs in the
runner's process (servers.py start_fault); docs/testing.md is the manual.
"""
import http.client
import http.server
import itertools
import json
import re
import select
import socket
import struct
import threading
import time

LOG_MAX = 100_000     # log entries (and attempt counters) kept
CONN_MAX = 256        # client connections served at once; more wait to be served
CHUNK = 1 << 16       # body copy unit
COUNT_MAX = 1000      # the largest N of an xN fault item
DELAY_MAX_MS = 600_000


FAULT_ITEM = re.compile(r"^(?:(503|429|500|reset|short)x(\d+)|delay=(\d+)x(\d+)"
                        r"|(403|404|silent)|(noranges|rangestar|bighdr|listloop|trickle|armed))$")
HOP = {"connection", "keep-alive", "transfer-encoding", "proxy-connection", "te", "upgrade"}
BIG_HEADER = 200 << 10  # bighdr: one header line this long, over libcurl's 100 KiB limit
LIST_TOKEN = "rf-same-token"  # listloop: the continuation token every page names
FLAGS = ("noranges", "rangestar", "bighdr", "listloop", "trickle", "armed")
TRICKLE_S = 0.25  # trickle: one body byte each this long (4 bytes/s)


def parse_spec(spec):
    """'503x2,delay=100x1,noranges' -> {"seq": [("503", 2)], "delay": (100, 1), "always": None,
    "noranges": True, ...the other flags False}; ValueError names the item it cannot read."""
    out = {"seq": [], "delay": None, "always": None, **{f: False for f in FLAGS}}
    for item in filter(None, spec.split(",")):
        m = FAULT_ITEM.match(item)
        if not m:
            raise ValueError(f"fault spec item {item!r} is not one of 503xN 429xN 500xN resetxN "
                             "shortxN delay=MSxN 403 404 silent noranges rangestar bighdr "
                             "listloop trickle armed")
        kind, n, ms, dn, always, flag = m.groups()
        count = int(n or dn or 0)
        if count > COUNT_MAX or int(ms or 0) > DELAY_MAX_MS:
            raise ValueError(f"fault spec item {item!r} is over the limits (N <= {COUNT_MAX}, "
                             f"MS <= {DELAY_MAX_MS})")
        if kind:
            out["seq"].append((kind, count))
        elif ms:
            out["delay"] = (int(ms), count)
        elif always:
            out["always"] = always
        else:
            out[flag] = True
    return out


def list_page(query):
    """listloop's answer to a ListObjectsV2 request: the first page names one key, every page
    says IsTruncated with the same continuation token, so a client that only follows tokens
    never ends."""
    first = "continuation-token=" not in query
    key = "<Contents><Key>loop/a.tar</Key><Size>10240</Size></Contents>" if first else ""
    return ('<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult '
            'xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>rf-loop</Name>'
            f'<KeyCount>{1 if first else 0}</KeyCount><MaxKeys>1000</MaxKeys>'
            f'<IsTruncated>true</IsTruncated>{key}'
            f'<NextContinuationToken>{LIST_TOKEN}</NextContinuationToken>'
            '</ListBucketResult>').encode()


class FaultState:
    def __init__(self):
        self.lock = threading.Condition()
        self.busy = 0  # requests being answered: recorded when their answer has been sent
        self.log, self.dropped, self.attempts = [], 0, {}
        self.arrived = 0      # requests received since the start: each entry's "arrival"
        self.armed = False    # POST /_arm: the items of `armed` specs apply
        self.generation = 0   # bumped by /_reset: silent requests held before it are let go

    def reset(self):
        """A new log, once the requests being answered are recorded (up to 10 s): a request
        is recorded after its answer's last byte, so a client that got its answers and
        stopped can still have entries on the way, which would land in the new log."""
        with self.lock:
            self.lock.wait_for(lambda: self.busy == 0, timeout=10)
            self.log, self.dropped, self.attempts = [], 0, {}
            self.armed = False
            self.generation += 1

    def arm(self):
        with self.lock:
            self.armed = True

    def begin(self):
        """A request arrived: its arrival number (1, 2, ...; never reset)."""
        with self.lock:
            self.busy += 1
            self.arrived += 1
            return self.arrived

    def attempt(self, key):
        with self.lock:
            if key not in self.attempts and len(self.attempts) >= LOG_MAX:
                del self.attempts[next(iter(self.attempts))]  # the oldest count goes
            self.attempts[key] = self.attempts.get(key, 0) + 1
            return self.attempts[key]

    def record(self, entry):
        with self.lock:
            if len(self.log) < LOG_MAX:
                self.log.append(entry)
            else:
                self.dropped += 1
            self.busy -= 1
            self.lock.notify_all()

    def snapshot(self):
        """The log, once the requests being answered are recorded (up to 2 s, as reset)."""
        with self.lock:
            self.lock.wait_for(lambda: self.busy == 0, timeout=2)
            return json.dumps({"requests": self.log, "dropped": self.dropped}).encode()


def signed_headers(auth):
    m = re.search(r"SignedHeaders=([^,\s]+)", auth or "")
    return m.group(1).split(";") if m else None


def pick_fault(spec, attempt):
    """Which fault, if any, the attempt-th request for this (spec, path, range) gets."""
    if spec["always"]:
        return spec["always"]
    first = 1
    for kind, count in spec["seq"]:
        if first <= attempt < first + count:
            return kind
        first += count
    return None


class FaultHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: a client's connection serves many requests
    server_version = "ringfeed-fault-proxy"

    def setup(self):
        super().setup()
        self.conn_id = next(self.server.conn_ids)  # not reset by /_reset: ids stay unique
        self.upstream = None

    def log_message(self, fmt, *args):  # the /_log endpoint is the record; stderr stays quiet
        pass

    def do_GET(self):
        if self.path == "/_log":
            return self.answer(200, self.server.state.snapshot(), "application/json")
        self.forward()

    def do_HEAD(self):
        self.forward()

    def do_POST(self):
        if self.path == "/_arm":
            self.server.state.arm()
            return self.answer(200, b"armed\n")
        if self.path != "/_reset":
            return self.answer(405, b"only POST /_reset or /_arm\n")
        self.server.state.reset()
        self.answer(200, b"reset\n")

    def answer(self, status, body, ctype="text/plain", extra=()):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        return len(body) if self.command != "HEAD" else 0

    def forward(self):
        path, spec_text = self.path, ""
        if path.startswith("/f/"):
            spec_text, _, rest = path[3:].partition("/")
            path = "/" + rest
        rng = self.headers.get("Range")
        entry = {"conn": self.conn_id, "method": self.command, "path": self.path,
                 "target": path, "range": rng, "headers": sorted(k.lower() for k in self.headers),
                 "authorization": "Authorization" in self.headers,
                 "signed_headers": signed_headers(self.headers.get("Authorization")),
                 "attempt": None, "fault": None, "status": None, "bytes": 0}
        entry["arrival"] = self.server.state.begin()
        recorded = False
        try:
            got = self.serve(entry, spec_text, path, rng)
            if got is None:  # silent: logged now (a held request never blocks /_log), then held
                self.server.state.record(entry)
                recorded = True
                self.hold(entry)
            else:
                entry["status"], entry["bytes"] = got
        except (BrokenPipeError, ConnectionResetError):
            # The client gave up mid-answer (its timeout, say): logged, not a traceback.
            entry["fault"] = entry["fault"] or "client closed"
            self.close_connection = True
            if self.upstream is not None:
                self.upstream.close()
                self.upstream = None
        finally:
            if not recorded:
                self.server.state.record(entry)

    def hold(self, entry):
        """Answer nothing, not even a status line, until the client hangs up, /_reset comes or
        the proxy stops; then close the connection. entry (already logged) says which."""
        state, gen = self.server.state, self.server.state.generation
        self.close_connection = True
        while state.generation == gen:
            ready, _, _ = select.select([self.connection], [], [], 0.1)
            try:
                if ready and not self.connection.recv(1, socket.MSG_PEEK):
                    entry["arrivals_at_close"] = state.arrived
                    entry["fault"] = "silent, client closed"
                    return
            except OSError:
                return
            if ready:
                time.sleep(0.1)  # the client sent more on this connection: still nothing back

    def serve(self, entry, spec_text, path, rng):
        try:
            spec = parse_spec(spec_text)
        except ValueError as e:
            return 400, self.answer(400, f"{e}\n".encode())
        if spec["armed"] and not self.server.state.armed:
            spec = parse_spec("")  # not armed yet: the request is forwarded untouched
        attempt = entry["attempt"] = self.server.state.attempt((spec_text, path, rng))
        if spec["delay"] and attempt <= spec["delay"][1]:
            time.sleep(spec["delay"][0] / 1000)
        fault = entry["fault"] = pick_fault(spec, attempt)
        if fault == "silent":
            return None
        if spec["listloop"]:
            entry["fault"] = "listloop"
            return 200, self.answer(200, list_page(path.partition("?")[2]), "application/xml")
        if fault in ("503", "429", "500", "403", "404"):
            extra = [("Retry-After", "1")] if fault in ("503", "429") else []
            body = f"fault proxy: {fault} for {path} attempt {attempt}\n".encode()
            return int(fault), self.answer(int(fault), body, extra=extra)
        headers = {"Range": rng} if rng and not spec["noranges"] else {}
        for flag in ("rangestar", "bighdr", "trickle"):
            if spec[flag]:
                entry["fault"] = entry["fault"] or flag
        return self.relay(path, headers, fault, spec)

    def relay(self, path, headers, fault, spec):
        """nginx's answer passed on; 'reset' and 'short' stop after half its body; 'rangestar'
        writes a 206's total length as '*', 'bighdr' adds a header line of BIG_HEADER bytes."""
        try:
            resp = self.fetch(path, headers)
        except (OSError, http.client.HTTPException) as e:
            self.upstream = None
            return 502, self.answer(502, f"fault proxy: upstream nginx: {e}\n".encode())
        length = int(resp.getheader("Content-Length", "0"))
        self.send_response(resp.status)
        for k, v in resp.getheaders():
            if k.lower() == "content-range" and spec["rangestar"]:
                v = v.rpartition("/")[0] + "/*"
            if k.lower() not in HOP:
                self.send_header(k, v)
        if spec["bighdr"]:
            self.send_header("X-Fault-Big", "b" * BIG_HEADER)
        self.end_headers()
        if self.command == "HEAD":
            length = 0
        limit = length // 2 if fault in ("reset", "short") else length
        sent = 0
        while sent < limit:
            if spec["trickle"]:  # fast enough for a client's stall rule, too slow to finish
                time.sleep(TRICKLE_S)
            chunk = resp.read(1 if spec["trickle"] else min(CHUNK, limit - sent))
            if not chunk:
                break
            self.wfile.write(chunk)
            sent += len(chunk)
        if sent == length:
            resp.read()  # marks the answer complete (a HEAD's too): the connection is reusable
        else:
            # The rest of nginx's answer is not read: that connection cannot be reused.
            self.upstream.close()
            self.upstream = None
            self.close_connection = True
            if fault == "reset":
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                           struct.pack("ii", 1, 0))
                self.connection.close()  # with linger 0 the kernel sends RST, not FIN
        return resp.status, sent

    def fetch(self, path, headers):
        # One upstream keep-alive connection per client connection; a kept one that nginx
        # closed between requests is replaced once by a fresh one, whose failure is final.
        for fresh in (self.upstream is None, True):
            if fresh:
                self.upstream = http.client.HTTPConnection("127.0.0.1", self.server.upstream_port,
                                                           timeout=60)
            try:
                self.upstream.request(self.command, path, headers=headers)
                return self.upstream.getresponse()
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                self.upstream.close()
                if fresh:
                    raise


class FaultServer(http.server.ThreadingHTTPServer):
    """A thread per client connection (keep-alive holds it), at most CONN_MAX at once."""
    daemon_threads = True
    # socketserver's listen backlog is 5: a burst of new connections beyond it had their SYNs
    # dropped and connected a second later, which a client with a 1 s connect timeout took
    # for a server that is down.
    request_queue_size = CONN_MAX

    def __init__(self, upstream_port):
        super().__init__(("127.0.0.1", 0), FaultHandler)
        self.state, self.upstream_port = FaultState(), upstream_port
        self.conn_ids = itertools.count(1)  # next() on it is atomic under the GIL
        self.slots = threading.BoundedSemaphore(CONN_MAX)

    def process_request(self, request, client_address):
        self.slots.acquire()  # the accepted connection waits here for a free thread
        super().process_request(request, client_address)

    def process_request_thread(self, request, client_address):
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()
