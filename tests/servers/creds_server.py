"""creds_server.py — a stand-in for the EC2 instance metadata service (IMDSv2) and the container
credentials endpoint (ECS, EKS Pod Identity), in front of moto (servers.py runs it as the
"creds" server, RF_TEST_CREDS). Each set of credentials it hands out is a fresh AssumeRole of
moto's STS with the configured lifetime, which moto's S3 (as servers.py runs it) refuses once
expired, as AWS does: a client that does not refresh in time gets HTTP 400 ExpiredToken.

    PUT  /latest/api/token                          IMDSv2's session token (the TTL header is
                                                    required); 404 when imds is "v1"
    GET  /latest/meta-data/iam/security-credentials/       the role's name   } with the token
    GET  /latest/meta-data/iam/security-credentials/ROLE   its credentials  } (401 without)
    GET  /ecs/ANYTHING                              the container endpoint's credentials; 403
                                                    unless Authorization equals container_auth
                                                    (when set)
    GET  /issue                                     credentials for a test to put in a file or
                                                    the environment (same JSON)
    POST /_config  {"lifetime_s": 3600, "role": "ringfeed-reader", "container_auth": null,
                    "imds": "v2" | "v1" | "no-role"}    (keys left out keep their value)
    GET  /_log     {"requests": [{"arrival", "time", "method", "path", "imds_token",
                                  "authorization", "issued", "expiration"}]}
    POST /_reset   an empty log and the default config

Any other request is logged and answered 404, so a test that points an S3 endpoint here can
tell that a request was sent at all. docs/testing.md describes the variables.
"""
import datetime
import http.server
import json
import secrets
import socketserver
import threading
import time

DEFAULTS = {"lifetime_s": 3600, "role": "ringfeed-reader", "container_auth": None,
            "imds": "v2"}
IMDS_CREDS = "/latest/meta-data/iam/security-credentials/"


class CredsServer(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True

    def __init__(self, sts_client, account):
        super().__init__(("127.0.0.1", 0), Handler)
        self.sts, self.account = sts_client, account
        self.lock = threading.Lock()
        self.config, self.log, self.tokens, self.arrival = dict(DEFAULTS), [], set(), 0

    def issue(self):
        """A fresh AssumeRole of the configured role for the configured lifetime (moto takes
        any duration; the real STS would want 900 s or more)."""
        with self.lock:
            role, lifetime = self.config["role"], int(self.config["lifetime_s"])
        arn = f"arn:aws:iam::{self.account}:role/{role}"
        got = self.sts.assume_role(RoleArn=arn, RoleSessionName=f"stand-in-{int(time.time())}",
                                   DurationSeconds=lifetime)["Credentials"]
        exp = got["Expiration"].astimezone(datetime.timezone.utc)
        return {"Code": "Success", "Type": "AWS-HMAC", "AccessKeyId": got["AccessKeyId"],
                "SecretAccessKey": got["SecretAccessKey"], "Token": got["SessionToken"],
                "Expiration": exp.strftime("%Y-%m-%dT%H:%M:%SZ"),
                "LastUpdated": datetime.datetime.now(datetime.timezone.utc)
                .strftime("%Y-%m-%dT%H:%M:%SZ"), "RoleArn": arn}


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, status, body=b"", ctype="text/plain"):
        if isinstance(body, (dict, list)):
            body, ctype = json.dumps(body).encode(), "application/json"
        elif isinstance(body, str):
            body = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def record(self, **more):
        s = self.server
        with s.lock:
            s.arrival += 1
            entry = {"arrival": s.arrival, "time": time.time(), "method": self.command,
                     "path": self.path,
                     "imds_token": self.headers.get("x-aws-ec2-metadata-token"),
                     "authorization": self.headers.get("Authorization"), **more}
            s.log.append(entry)
        return entry

    def credentials(self):
        try:
            creds = self.server.issue()
        except Exception as e:  # moto's STS refused: say so rather than drop the connection
            self.record(error=str(e))
            return self.answer(500, f"{type(e).__name__}: {e}")
        self.record(issued=creds["AccessKeyId"], expiration=creds["Expiration"])
        self.answer(200, creds)

    def imds_token_ok(self):
        with self.server.lock:
            v1 = self.server.config["imds"] == "v1"
            return v1 or self.headers.get("x-aws-ec2-metadata-token") in self.server.tokens

    def do_PUT(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path != "/latest/api/token":
            self.record()
            return self.answer(404)
        self.record()
        with self.server.lock:
            v1 = self.server.config["imds"] == "v1"
        if v1:
            return self.answer(404)
        if not self.headers.get("x-aws-ec2-metadata-token-ttl-seconds"):
            return self.answer(400)
        token = secrets.token_urlsafe(24)
        with self.server.lock:
            self.server.tokens.add(token)
        self.answer(200, token)

    def do_GET(self):
        s = self.server
        if self.path == "/_log":
            with s.lock:
                return self.answer(200, {"requests": list(s.log)})
        if self.path == "/issue":
            try:
                return self.answer(200, s.issue())
            except Exception as e:
                return self.answer(500, f"{type(e).__name__}: {e}")
        if self.path.startswith(IMDS_CREDS):
            if not self.imds_token_ok():
                self.record()
                return self.answer(401)
            with s.lock:
                role, no_role = s.config["role"], s.config["imds"] == "no-role"
            if self.path == IMDS_CREDS:
                self.record()
                return self.answer(404) if no_role else self.answer(200, role)
            if self.path != IMDS_CREDS + role:
                self.record()
                return self.answer(404)
            return self.credentials()
        if self.path.startswith("/ecs/"):
            with s.lock:
                want = s.config["container_auth"]
            if want is not None and self.headers.get("Authorization") != want:
                self.record()
                return self.answer(403, {"Code": "AccessDenied"})
            return self.credentials()
        self.record()
        self.answer(404)

    def do_POST(self):
        s = self.server
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path == "/_config":
            with s.lock:
                s.config.update(json.loads(body or b"{}"))
                return self.answer(200, s.config)
        if self.path == "/_reset":
            with s.lock:
                s.config, s.log, s.tokens = dict(DEFAULTS), [], set()
            return self.answer(200)
        self.record()
        self.answer(404)
