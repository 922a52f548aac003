#!/usr/bin/env python3
"""servers.py — real servers for the remote-shard tests, started around one command.

    python3 tests/servers/servers.py --root DATA_DIR --state STATE_DIR [--s3-upload]
                                     [--only http,https,s3,fault,creds] [--nginx PATH]
                                     -- CMD ARGS...

starts on free loopback ports, as the current user, with every file they write under STATE_DIR:
nginx serving DATA_DIR over HTTP/1.1 (RF_TEST_HTTP) and over HTTPS with HTTP/2 and a self-signed
certificate (RF_TEST_HTTPS, RF_TEST_CA); moto's S3 server with IAM authentication on
(RF_TEST_S3_ENDPOINT, RF_TEST_S3_KEY, RF_TEST_S3_SECRET, RF_TEST_S3_REGION; --s3-upload fills
the buckets rf-test, private, and rf-public, public-read, with DATA_DIR); a fault-injection proxy
in front of nginx's HTTP (RF_TEST_FAULT: /f/<spec>/<path>, GET /_log, POST /_reset); with "creds"
(--only ...,s3,creds) a stand-in for instance metadata and the container credentials endpoint
handing out moto's temporary credentials (RF_TEST_CREDS, creds_server.py) and the IAM roles
it and a web identity assume (RF_TEST_ROLE_ARN, RF_TEST_ROLE_DENIED_ARN). It runs CMD
with those variables, writes them to STATE_DIR/env, stops every server however CMD or the runner
ends, and exits with CMD's status; 77 when a needed program is missing, 2 when a server does not
come up. docs/testing.md is the manual: each variable, the fault specs, the log, the statuses.
"""
import argparse
import ctypes
import http.client
import json
import os
import pwd
import grp
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import creds_server  # beside this file: the script's folder is on sys.path
import fault_proxy

SKIP = 77             # ctest's SKIP_RETURN_CODE: a missing program is not a failure of the code
START_FAIL = 2        # a server did not come up
START_TIMEOUT_S = 60  # moto imports for several seconds on a loaded 2-core machine
STOP_TIMEOUT_S = 10   # then SIGKILL to the server's whole process group
REGION = "us-east-1"
BUCKETS = ("rf-test", "rf-public")
DEFAULT_SERVERS = ("http", "https", "s3", "fault")
SERVERS = DEFAULT_SERVERS + ("creds",)  # the stand-in only where asked: it adds IAM roles
ACCOUNT = "123456789012"  # moto's default account: the roles' ARNs name it
HANDLED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)  # passed to CMD, then cleanup


class Missing(Exception):
    """A program or module the chosen servers need is not installed (exit 77)."""


class StartError(Exception):
    """A server did not come up (exit 2)."""


class Interrupted(Exception):
    """SIGINT/SIGTERM/SIGHUP arrived before CMD ran."""


def die_with_parent():
    # Runs in each child before exec: if this runner is killed outright (SIGKILL, so no cleanup
    # runs) the kernel sends the child SIGTERM, so no server outlives its runner.
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def spawn(argv, log_path, env=None):
    """A server in its own session: a terminal's ^C reaches this runner (which stops it in
    order), and the session's process group lets stop() reach nginx's workers too."""
    with open(log_path, "ab") as log:
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                start_new_session=True, preexec_fn=die_with_parent, env=env)


def stop(proc):
    if proc is None or proc.poll() is not None:
        return
    try:
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait(STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pass
    try:  # the group: nginx's workers, or anything the server left behind
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def tail(path, n=15):
    try:
        with open(path, "rb") as f:
            lines = f.read().decode(errors="replace").splitlines()
    except OSError as e:
        return f"(no log: {e})"
    return "\n".join("    " + line for line in lines[-n:]) or "    (log empty)"


def wait_ready(name, proc, log_path, probe):
    """Polls probe() until it answers; a server that exits or stays silent is a StartError
    naming it with its log's last lines."""
    deadline = time.monotonic() + START_TIMEOUT_S
    last = None
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise StartError(f"{name} exited with status {proc.returncode} while starting; "
                             f"last lines of {log_path}:\n{tail(log_path)}")
        try:
            if probe():
                return
        except (OSError, http.client.HTTPException, ssl.SSLError) as e:
            last = e
        time.sleep(0.05)
    raise StartError(f"{name} did not answer within {START_TIMEOUT_S} s (last error: {last}); "
                     f"last lines of {log_path}:\n{tail(log_path)}")


def free_port():
    # nginx takes its ports from its config, so they are picked here; the short race with
    # another process is handled by start_nginx retrying on "Address already in use".
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_answers(url, context=None):
    """True once anything answers with an HTTP status (404 included)."""
    try:
        urllib.request.urlopen(url, timeout=2, context=context).close()
    except urllib.error.HTTPError:
        pass
    return True


# ---------------------------------------------------------------------------------- nginx

NGINX_CONF = """\
# Generated by tests/servers/servers.py for one run. nginx runs with -p STATE_DIR, so each
# relative path here is under the state directory; every file nginx writes is named here, so
# none of the paths compiled into the binary (nginx -V: /var/lib/nginx, /run, /var/lock) is
# used and a binary carried to another machine starts the same way.
{user}worker_processes {workers};
worker_rlimit_nofile 4096;
daemon off;
pid nginx.pid;
lock_file nginx.lock;
error_log nginx-error.log info;
events {{ worker_connections 1024; }}
http {{
    default_type application/octet-stream;
    access_log nginx-access.log;
    client_body_temp_path nginx-tmp/body;
    proxy_temp_path nginx-tmp/proxy;
    fastcgi_temp_path nginx-tmp/fastcgi;
    uwsgi_temp_path nginx-tmp/uwsgi;
    scgi_temp_path nginx-tmp/scgi;
    sendfile on;
    keepalive_timeout 120s;
    keepalive_requests 100000;
{servers}}}
"""
NGINX_SERVER = {
    "http": "    server {{ listen 127.0.0.1:{port}; root {root}; }}\n",
    "https": ("    server {{ listen 127.0.0.1:{port} ssl http2; root {root};\n"
              "             ssl_certificate ca.pem; ssl_certificate_key key.pem; }}\n")}


def nginx_quote(path):
    """path as one nginx argument, whatever spaces, quotes or ';' it holds."""
    return '"' + path.replace("\\", "\\\\").replace('"', '\\"') + '"'


def make_cert(state):
    """A self-signed certificate that is its own CA, for 127.0.0.1 and localhost, so clients
    verify it (RF_TEST_CA) rather than turning verification off."""
    if not shutil.which("openssl"):
        raise Missing("openssl (Debian package openssl; tools/deps.sh installs it)")
    cmd = ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
           "-nodes", "-keyout", f"{state}/key.pem", "-out", f"{state}/ca.pem", "-days", "7",
           "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise StartError(f"openssl could not make the test certificate: {r.stderr.strip()}")


def nginx_user():
    # A master running as root would hand its workers to "nobody", who may not read DATA_DIR;
    # as any other user the directive is refused with a warning, so it is written only for root.
    if os.geteuid() != 0:
        return ""
    return f"user {pwd.getpwuid(os.geteuid()).pw_name} {grp.getgrgid(os.getegid()).gr_name};\n"


def write_nginx_conf(state, root, ports, workers):
    servers = "".join(NGINX_SERVER[name].format(port=port, root=nginx_quote(root))
                      for name, port in ports.items())
    with open(f"{state}/nginx.conf", "w") as f:
        f.write(NGINX_CONF.format(user=nginx_user(), servers=servers, workers=workers))


def find_nginx(nginx):
    """--nginx, else $NGINX (a binary carried to a machine without the package, with its
    libraries: LD_LIBRARY_PATH reaches it), else nginx on PATH, else Debian's /usr/sbin/nginx.
    The generated config names every path nginx writes, so no compiled-in one is used."""
    nginx = nginx or os.environ.get("NGINX") or shutil.which("nginx") or (
        "/usr/sbin/nginx" if os.access("/usr/sbin/nginx", os.X_OK) else None)
    if not nginx:
        raise Missing("nginx (Debian package nginx-light or nginx; tools/deps.sh installs it; "
                      "or NGINX=path of a binary)")
    if not os.access(nginx, os.X_OK):
        raise Missing(f"nginx: {nginx} is not an executable file")
    return nginx


def start_nginx(state, root, want, nginx, workers="1"):
    nginx = find_nginx(nginx)
    if "https" in want:
        make_cert(state)
    os.makedirs(f"{state}/nginx-tmp", exist_ok=True)
    log = f"{state}/nginx-error.log"
    for attempt in range(3):
        ports = {name: free_port() for name in ("http", "https") if name in want}
        write_nginx_conf(state, root, ports, workers)
        proc = spawn([nginx, "-p", state, "-c", f"{state}/nginx.conf", "-e", log], log)
        env = {f"RF_TEST_{name.upper()}": f"{name}://127.0.0.1:{port}"
               for name, port in ports.items()}
        try:
            for name, url in zip(ports, env.values()):
                ctx = ssl.create_default_context(cafile=f"{state}/ca.pem") \
                    if name == "https" else None
                wait_ready(f"nginx ({name})", proc, log, lambda: http_answers(url + "/", ctx))
        except StartError:
            stop(proc)
            if attempt == 2 or "Address already in use" not in tail(log, 5):
                raise
            continue
        if "https" in ports:
            env["RF_TEST_CA"] = f"{state}/ca.pem"
        return proc, env


# ----------------------------------------------------------------------------------- moto

def moto_child(state):
    """The S3 server process (servers.py --moto-child): moto in server mode with three changes,
    each making it answer as AWS does where the tests look.
    With IAM authentication on, moto 5.2 checks every request's signature (what the tests
    need: a wrong secret gets 403) but fails an anonymous request with a 500 (it reads the
    missing Authorization header), so public buckets could not be read. S3 authorizes an
    anonymous request by the bucket policy alone; that is what s3_anonymous does, and signed
    requests go through moto's own check unchanged. STS's AssumeRoleWithWebIdentity is an
    unsigned call (the web identity token is the proof), which moto would refuse the same way:
    web_identity_unsigned lets it through. And moto accepts temporary credentials after their
    Expiration; expiring() refuses them with AWS's 400 ExpiredToken, so a client that does not
    refresh them in time fails."""
    from moto import settings
    from moto.core.authorization import ActionAuthenticatorMixin as Auth
    from moto.iam.access_control import PermissionResult
    from moto.s3.exceptions import BucketAccessDeniedError, S3AccessDeniedError
    from moto.server import ThreadedMotoServer

    signed_check = Auth._authenticate_and_authorize_s3_action
    normal_check = Auth._authenticate_and_authorize_normal_action

    def web_identity_unsigned(self, resource="*"):
        if self._get_action() != "AssumeRoleWithWebIdentity":
            normal_check(self, resource)

    Auth._authenticate_and_authorize_normal_action = web_identity_unsigned
    expiring()

    def s3_anonymous(self, bucket_name=None, key_name=None):
        anonymous = ("Authorization" not in self.headers
                     and "X-Amz-Credential" not in self.querystring)
        if not anonymous or Auth.request_count < settings.INITIAL_NO_AUTH_ACTION_COUNT:
            return signed_check(self, bucket_name, key_name)
        if not bucket_name:
            raise S3AccessDeniedError()
        bucket = self.backend.get_bucket(bucket_name)
        arn = f"{bucket_name}/{key_name}" if key_name else bucket_name
        action = f"s3:{self._get_action()}"
        if bucket.get_permission(action, f"arn:aws:s3:::{arn}") != PermissionResult.PERMITTED:
            raise BucketAccessDeniedError(bucket=bucket_name)

    Auth._authenticate_and_authorize_s3_action = s3_anonymous
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    port = server.get_host_and_port()[1]
    with open(f"{state}/moto.port.tmp", "w") as f:
        f.write(str(port))
    os.rename(f"{state}/moto.port.tmp", f"{state}/moto.port")  # the parent reads it whole
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    done.wait()
    server.stop()


def expiring():
    """moto's check of temporary credentials, plus their expiry (moto_child's docstring)."""
    from moto.core.utils import utcnow
    from moto.iam import access_control
    from moto.s3.exceptions import S3ClientError
    from moto.sts.models import sts_backends

    class Expiring(access_control.AssumedRoleAccessKey):
        def __init__(self, account_id, partition, access_key_id, headers):
            super().__init__(account_id, partition, access_key_id, headers)
            for role in sts_backends[account_id][partition].assumed_roles:
                if role.access_key_id == access_key_id and role.expiration < utcnow():
                    raise S3ClientError("ExpiredToken", "The provided token has expired.")

    access_control.AssumedRoleAccessKey = Expiring


def start_moto(state):
    try:
        import moto.server  # noqa: F401  (only to say early that it is missing)
        import boto3  # noqa: F401
    except ImportError as e:
        raise Missing(f"Python module {e.name} (pip install 'moto[server]==5.2.1' boto3; "
                      "tools/deps.sh installs them)")
    log = f"{state}/moto.log"
    try:
        os.unlink(f"{state}/moto.port")
    except FileNotFoundError:
        pass
    env = dict(os.environ, TMPDIR=f"{state}/tmp")
    proc = spawn([sys.executable, os.path.abspath(__file__), "--moto-child", "--state", state],
                 log, env)
    wait_ready("moto (s3)", proc, log, lambda: os.path.exists(f"{state}/moto.port"))
    with open(f"{state}/moto.port") as f:
        endpoint = f"http://127.0.0.1:{int(f.read())}"
    wait_ready("moto (s3)", proc, log, lambda: http_answers(f"{endpoint}/moto-api/"))
    return proc, endpoint


def roles_setup(iam):
    """The roles a web identity and creds_server.py assume (one may read S3, one may not) and
    the user whose key creds_server.py assumes them with."""
    trust = json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Action": "sts:AssumeRoleWithWebIdentity",
         "Principal": {"Federated": f"arn:aws:iam::{ACCOUNT}:oidc-provider/test"}},
        {"Effect": "Allow", "Action": "sts:AssumeRole",
         "Principal": {"AWS": f"arn:aws:iam::{ACCOUNT}:user/ringfeed-creds"}}]})
    for role, action in (("ringfeed-reader", "s3:*"), ("ringfeed-denied", "sqs:*")):
        iam.create_role(RoleName=role, AssumeRolePolicyDocument=trust)
        iam.put_role_policy(RoleName=role, PolicyName="p", PolicyDocument=json.dumps(
            {"Version": "2012-10-17",
             "Statement": [{"Effect": "Allow", "Action": action, "Resource": "*"}]}))
    iam.create_user(UserName="ringfeed-creds")
    iam.put_user_policy(UserName="ringfeed-creds", PolicyName="sts", PolicyDocument=json.dumps(
        {"Version": "2012-10-17",
         "Statement": [{"Effect": "Allow", "Action": "sts:AssumeRole", "Resource": "*"}]}))
    key = iam.create_access_key(UserName="ringfeed-creds")["AccessKey"]
    return {"RF_TEST_ROLE_ARN": f"arn:aws:iam::{ACCOUNT}:role/ringfeed-reader",
            "RF_TEST_ROLE_DENIED_ARN": f"arn:aws:iam::{ACCOUNT}:role/ringfeed-denied"}, key


def s3_setup(endpoint, root, upload, roles=False):
    """Before authentication is turned on (moto counts no request until then): an IAM user
    whose key may do anything in S3, the buckets and their objects, and with roles the roles
    and user of roles_setup. Then every request must be signed with such a key or be
    anonymous and allowed by a bucket policy. Returns the variables and roles_setup's key."""
    import boto3
    dummy = dict(endpoint_url=endpoint, region_name=REGION, aws_access_key_id="setup",
                 aws_secret_access_key="setup")
    iam = boto3.client("iam", **dummy)
    iam.create_user(UserName="ringfeed-test")
    iam.put_user_policy(UserName="ringfeed-test", PolicyName="s3-all", PolicyDocument=json.dumps(
        {"Version": "2012-10-17",
         "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}))
    key = iam.create_access_key(UserName="ringfeed-test")["AccessKey"]
    env = {"RF_TEST_S3_ENDPOINT": endpoint, "RF_TEST_S3_KEY": key["AccessKeyId"],
           "RF_TEST_S3_SECRET": key["SecretAccessKey"], "RF_TEST_S3_REGION": REGION}
    creds_key = None
    if roles:
        more, creds_key = roles_setup(iam)
        env.update(more)
    if upload:
        s3 = boto3.client("s3", **dummy)
        for bucket in BUCKETS:
            s3.create_bucket(Bucket=bucket)
        public = {"Version": "2012-10-17", "Statement": [{
            "Effect": "Allow", "Principal": "*", "Action": ["s3:GetObject", "s3:ListBucket"],
            "Resource": [f"arn:aws:s3:::{BUCKETS[1]}", f"arn:aws:s3:::{BUCKETS[1]}/*"]}]}
        s3.put_bucket_policy(Bucket=BUCKETS[1], Policy=json.dumps(public))
        for dirpath, _, names in os.walk(root):
            for name in sorted(names):
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root).replace(os.sep, "/")
                for bucket in BUCKETS:
                    s3.upload_file(path, bucket, rel)
        env["RF_TEST_S3_BUCKET"], env["RF_TEST_S3_PUBLIC_BUCKET"] = BUCKETS
    req = urllib.request.Request(f"{endpoint}/moto-api/reset-auth", data=b"0", method="POST",
                                 headers={"Content-Type": "text/plain"})
    urllib.request.urlopen(req, timeout=10).close()
    return env, creds_key


# ---------------------------------------------------------------------------- fault proxy

def start_creds(endpoint, key):
    """creds_server.py in this process, assuming roles with key through moto's STS (botocore's
    check of DurationSeconds >= 900 off: the tests want credentials that expire in seconds)."""
    import boto3
    from botocore.config import Config
    sts = boto3.client("sts", endpoint_url=endpoint, region_name=REGION,
                       aws_access_key_id=key["AccessKeyId"],
                       aws_secret_access_key=key["SecretAccessKey"],
                       config=Config(parameter_validation=False))
    server = creds_server.CredsServer(sts, ACCOUNT)
    threading.Thread(target=server.serve_forever, name="creds", daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    wait_ready("creds stand-in", None, "(in this process)", lambda: http_answers(f"{url}/_log"))
    return server, {"RF_TEST_CREDS": url}


def start_fault(http_url):
    server = fault_proxy.FaultServer(int(http_url.rsplit(":", 1)[1]))
    threading.Thread(target=server.serve_forever, name="fault-proxy", daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    wait_ready("fault proxy", None, "(in this process)", lambda: http_answers(f"{url}/_log"))
    return server, {"RF_TEST_FAULT": url}


# ----------------------------------------------------------------------------------- main

def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                usage="servers.py --root DATA_DIR --state STATE_DIR "
                                      "[--s3-upload] [--only LIST] -- CMD ARGS...")
    p.add_argument("--root", help="directory served at / and uploaded with --s3-upload")
    p.add_argument("--state", required=True, help="all config, logs, pid files, temp files")
    p.add_argument("--s3-upload", action="store_true",
                   help="create rf-test (private) and rf-public (public-read), upload --root")
    p.add_argument("--only", default=",".join(DEFAULT_SERVERS),
                   help="comma-separated subset of http,https,s3,fault,creds (fault needs "
                        "http, creds needs s3)")
    p.add_argument("--nginx", help="the nginx program (default: $NGINX, nginx on PATH, "
                                   "/usr/sbin/nginx)")
    p.add_argument("--nginx-workers", default="1",
                   help="nginx's worker_processes: 1 (the tests'), a number or auto (a server "
                        "that serves from every CPU, as tools/remote_bench.sh asks for)")
    p.add_argument("--moto-child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("cmd", nargs=argparse.REMAINDER)
    args = p.parse_args(argv)
    args.state = os.path.abspath(args.state)
    if args.moto_child:
        return args
    args.want = set(filter(None, args.only.split(",")))
    if not args.want or args.want - set(SERVERS):
        p.error(f"--only takes a comma-separated subset of {','.join(SERVERS)}")
    if "fault" in args.want:
        args.want.add("http")
    if "creds" in args.want:
        args.want.add("s3")
    if not re.fullmatch(r"auto|[1-9][0-9]{0,2}", args.nginx_workers):
        p.error(f"--nginx-workers takes auto or 1..999, not {args.nginx_workers!r}")
    if args.cmd[:1] == ["--"]:
        args.cmd = args.cmd[1:]
    if not args.cmd:
        p.error("no command after --")
    if not args.root or not os.path.isdir(args.root):
        p.error(f"--root {args.root!r} is not a directory")
    args.root = os.path.abspath(args.root)
    return args


def claim_state(state):
    """Two runners on one state directory would share nginx's pid file and logs: the second
    is refused while the first lives. A stale env of an earlier run is removed first, so it
    never names servers that are gone."""
    try:
        with open(f"{state}/servers.pid") as f:
            pid = int(f.read())
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            if pid != os.getpid() and b"servers.py" in f.read():
                raise StartError(f"the state directory {state} is in use by the runner with "
                                 f"pid {pid}")
    except (OSError, ValueError):
        pass
    try:
        os.unlink(f"{state}/env")
    except FileNotFoundError:
        pass


class Runner:
    def __init__(self, args):
        self.args, self.procs, self.cmd, self.signal = args, [], None, None
        self.threaded = []  # servers running in this process: the fault proxy, creds

    def on_signal(self, signum, _frame):
        self.signal = signum
        if self.cmd is None:
            raise Interrupted()
        if self.cmd.poll() is None:
            self.cmd.send_signal(signum)  # CMD decides how to end; stop() follows its exit

    def start(self):
        a, env = self.args, {"RF_TEST_STATE": self.args.state, "RF_TEST_ROOT": self.args.root}
        if a.want & {"http", "https"}:
            proc, more = start_nginx(a.state, a.root, a.want, a.nginx, a.nginx_workers)
            self.procs.append(proc)
            env.update(more)
        if "s3" in a.want:
            proc, endpoint = start_moto(a.state)
            self.procs.append(proc)
            try:
                more, creds_key = s3_setup(endpoint, a.root, a.s3_upload, "creds" in a.want)
                env.update(more)
            except Exception as e:  # boto3's, urllib's, or a file of the root that cannot be read
                raise StartError(f"moto (s3): the setup failed ({type(e).__name__}: {e}); last "
                                 f"lines of {a.state}/moto.log:\n{tail(f'{a.state}/moto.log')}")
            if "creds" in a.want:
                server, more = start_creds(endpoint, creds_key)
                self.threaded.append(server)
                env.update(more)
        if "fault" in a.want:
            server, more = start_fault(env["RF_TEST_HTTP"])
            self.threaded.append(server)
            env.update(more)
        with open(f"{a.state}/env", "w") as f:
            f.writelines(f"{k}={v}\n" for k, v in sorted(env.items()))
        return env

    def run(self):
        a = self.args
        os.makedirs(f"{a.state}/tmp", exist_ok=True)
        claim_state(a.state)
        with open(f"{a.state}/servers.pid", "w") as f:
            f.write(f"{os.getpid()}\n")
        for sig in HANDLED:
            signal.signal(sig, self.on_signal)
        try:
            env = self.start()
            # RF_TEST_* of an outer runner would name servers that are not this run's.
            inherited = {k: v for k, v in os.environ.items() if not k.startswith("RF_TEST_")}
            self.cmd = subprocess.Popen(a.cmd, env=dict(inherited, **env),
                                        preexec_fn=die_with_parent)
            status = self.cmd.wait()
            return 128 - status if status < 0 else status
        except Interrupted:
            return 128 + self.signal
        finally:
            for sig in HANDLED:  # cleanup runs to its end
                signal.signal(sig, signal.SIG_IGN)
            for server in self.threaded:
                server.shutdown()
                server.server_close()
            for proc in reversed(self.procs):
                stop(proc)


def main(argv):
    args = parse_args(argv)
    if args.moto_child:
        return moto_child(args.state) or 0
    os.makedirs(args.state, exist_ok=True)
    try:
        return Runner(args).run()
    except Missing as e:
        print(f"servers.py: skipped: missing {e}", file=sys.stderr)
        return SKIP
    except StartError as e:
        print(f"servers.py: {e}", file=sys.stderr)
        return START_FAIL


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
