"""Self-tests of tests/servers/servers.py (ctest `servers` runs them through it):

    python3 tests/servers/test_servers.py --make-data DIR
    python3 tests/servers/servers.py --root DIR --state STATE --s3-upload -- \
        python3 -m pytest -q -p no:cacheprovider tests/servers/test_servers.py

The servers must hand back the exact bytes of the shards users write (GNU tar, Python's tarfile,
webdataset's TarWriter) for any byte range, over HTTP, HTTPS (certificate verified, HTTP/2
offered) and S3 (signed, anonymous), each fault of the proxy must do what docs/testing.md says
with the attempt counts its log shows, and the runner must leave no process behind whatever
ends it. Outside the runner (RF_TEST_* unset) the tests that need its servers are skipped.
"""
import http.client
import json
import os
import random
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tarfile
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
RUNNER = os.path.join(HERE, "servers.py")
PHOTOS = "/usr/share/backgrounds/mate/nature"  # Debian's mate-backgrounds (tools/deps.sh)
EMPTY_SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


# ------------------------------------------------------------------------------- the data

def sample_images(n):
    """n real photographs when mate-backgrounds is installed (the kind of bytes users serve),
    else deterministic pseudo-random bytes of photo-like sizes."""
    photos = sorted(os.path.join(PHOTOS, f) for f in os.listdir(PHOTOS)) \
        if os.path.isdir(PHOTOS) else []
    if len(photos) >= n:
        return [open(p, "rb").read() for p in photos[:n]]
    rng = random.Random(12345)
    return [rng.randbytes(150_000 + 97_003 * i) for i in range(n)]


def make_data(root):
    """Shards written three ways, an odd-sized blob and a name that needs URL escaping."""
    images = sample_images(6)
    src = os.path.join(root, "src")
    os.makedirs(src, exist_ok=True)
    names = []
    for i, img in enumerate(images):
        for ext, data in (("jpg", img), ("cls", f"{i % 3}\n".encode())):
            with open(os.path.join(src, f"{i:06d}.{ext}"), "wb") as f:
                f.write(data)
            names.append(f"{i:06d}.{ext}")
    for d in ("gnu", "py", "wds"):
        os.makedirs(os.path.join(root, d), exist_ok=True)
    subprocess.run(["tar", "--format=gnu", "-cf", os.path.join(root, "gnu", "train-0000.tar"),
                    "-C", src, *names], check=True)
    with tarfile.open(os.path.join(root, "py", "train-0000.tar"), "w") as tf:
        for name in names:
            tf.add(os.path.join(src, name), arcname=name)
    try:
        import webdataset
        with webdataset.TarWriter(os.path.join(root, "wds", "train-0000.tar")) as sink:
            for i, img in enumerate(images):
                sink.write({"__key__": f"{i:06d}", "jpg": img, "cls": f"{i % 3}".encode()})
    except ImportError:
        shutil.rmtree(os.path.join(root, "wds"))  # no third writer here
    shutil.rmtree(src)
    blob = b"".join(images) + images[1][:17]
    with open(os.path.join(root, "blob.bin"), "wb") as f:
        f.write(blob)
    with open(os.path.join(root, "odd name 1.bin"), "wb") as f:
        f.write(images[2][:5000])


def files():
    root = env("RF_TEST_ROOT")
    out = []
    for dirpath, _, names in os.walk(root):
        out += [os.path.relpath(os.path.join(dirpath, n), root).replace(os.sep, "/")
                for n in names]
    return sorted(out)


def local(rel):
    with open(os.path.join(env("RF_TEST_ROOT"), rel), "rb") as f:
        return f.read()


def ranges(size):
    """(header value, first, last) of ranges a loader asks for: a tar header block, a span in
    the middle, the last byte, an open end and a suffix."""
    mid = size // 2
    end = min(mid + 70_000, size - 1)
    return [("bytes=0-511", 0, 511), (f"bytes={mid - 7}-{end}", mid - 7, end),
            (f"bytes={size - 1}-{size - 1}", size - 1, size - 1),
            (f"bytes={size - 1000}-", size - 1000, size - 1), ("bytes=-333", size - 333, size - 1)]


def env(name):
    value = os.environ.get(name)
    if not value:
        pytest.skip(f"{name} is unset: run through tests/servers/servers.py (ctest servers)")
    return value


def quote(rel):
    return urllib.parse.quote(rel)


# -------------------------------------------------------------------------- HTTP / HTTPS

def check_ranges(conn):
    """Every range of every file byte-exact on one connection, which must stay open."""
    for rel in files():
        data = local(rel)
        for header, first, last in ranges(len(data)):
            sock = conn.sock
            conn.request("GET", "/" + quote(rel), headers={"Range": header})
            r = conn.getresponse()
            body = r.read()
            assert r.status == 206, (rel, header, r.status)
            assert r.getheader("Content-Range") == f"bytes {first}-{last}/{len(data)}"
            assert body == data[first:last + 1], (rel, header)
            assert sock is None or conn.sock is sock, "the server closed a keep-alive connection"


def test_http_ranges_keepalive():
    url = urllib.parse.urlsplit(env("RF_TEST_HTTP"))
    check_ranges(http.client.HTTPConnection(url.hostname, url.port, timeout=30))


def test_https_ranges_verified():
    url = urllib.parse.urlsplit(env("RF_TEST_HTTPS"))
    ctx = ssl.create_default_context(cafile=env("RF_TEST_CA"))
    check_ranges(http.client.HTTPSConnection(url.hostname, url.port, context=ctx, timeout=30))
    # the certificate names localhost too, and without RF_TEST_CA it is refused
    r = urllib.request.urlopen(f"https://localhost:{url.port}/blob.bin", context=ctx)
    assert r.read() == local("blob.bin")
    with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
        urllib.request.urlopen(env("RF_TEST_HTTPS") + "/blob.bin",
                               context=ssl.create_default_context())


def curl(*args):
    if not shutil.which("curl"):
        pytest.skip("the curl command is not installed")
    return subprocess.run(["curl", "-sS", *args], capture_output=True, timeout=60)


def test_https_http2():
    r = curl("--http2", "--cacert", env("RF_TEST_CA"), "-r", "100-199", "-o", "-",
             "-w", "\n%{http_version} %{http_code}", env("RF_TEST_HTTPS") + "/blob.bin")
    body, _, tail = r.stdout.rpartition(b"\n")
    assert tail == b"2 206" and body == local("blob.bin")[100:200], r.stderr


# ----------------------------------------------------------------------------- the proxy

@pytest.fixture
def proxy():
    url = urllib.parse.urlsplit(env("RF_TEST_FAULT"))
    urllib.request.urlopen(urllib.request.Request(env("RF_TEST_FAULT") + "/_reset",
                                                  method="POST")).read()
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    yield conn
    conn.close()


def fetch(conn, path, rng=None, headers=None, method="GET"):
    h = dict(headers or {}, **({"Range": rng} if rng else {}))
    conn.request(method, path, headers=h)
    r = conn.getresponse()
    return r.status, r, r.read()


def proxy_log():
    with urllib.request.urlopen(env("RF_TEST_FAULT") + "/_log") as r:
        return json.loads(r.read())


def attempts(spec, rel, rng):
    return [(e["attempt"], e["fault"], e["status"]) for e in proxy_log()["requests"]
            if e["path"] == f"/f/{spec}/{quote(rel)}" and e["range"] == rng]


@pytest.mark.parametrize("code", [503, 429, 500])
def test_fault_status_then_success(proxy, code):
    data, rng = local("gnu/train-0000.tar"), "bytes=512-2047"
    spec, path = f"{code}x2", f"/f/{code}x2/gnu/train-0000.tar"
    for _ in range(2):
        status, r, _ = fetch(proxy, path, rng)
        assert status == code
        assert r.getheader("Retry-After") == ("1" if code in (503, 429) else None)
    status, r, body = fetch(proxy, path, rng)
    assert status == 206 and body == data[512:2048]
    # another range of the same file has its own count; every attempt kept the connection
    assert fetch(proxy, path, "bytes=0-511")[0] == code
    assert attempts(spec, "gnu/train-0000.tar", rng) == [
        (1, str(code), code), (2, str(code), code), (3, None, 206)]
    assert len({e["conn"] for e in proxy_log()["requests"]}) == 1


def raw_get(path, rng):
    """(status line, Content-Length, body bytes read, how it ended) over a raw socket, so a
    reset and a clean close can be told apart."""
    url = urllib.parse.urlsplit(env("RF_TEST_FAULT"))
    with socket.create_connection((url.hostname, url.port), timeout=30) as s:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nRange: {rng}\r\nConnection: close\r\n"
                  "\r\n".encode())
        buf, end = b"", "eof"
        try:
            while True:
                chunk = s.recv(1 << 16)
                if not chunk:
                    break
                buf += chunk
        except ConnectionResetError:
            end = "reset"
    head, _, body = buf.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    length = next(int(v) for k, _, v in (h.partition(": ") for h in lines[1:])
                  if k.lower() == "content-length")
    return lines[0], length, body, end


@pytest.mark.parametrize("kind", ["reset", "short"])
def test_fault_half_body(proxy, kind):
    data, rng, path = local("blob.bin"), "bytes=1000-400999", f"/f/{kind}x1/blob.bin"
    status, length, body, end = raw_get(path, rng)
    assert status.endswith("206 Partial Content") and length == 400_000
    assert end == ("reset" if kind == "reset" else "eof")
    assert body == data[1000:1000 + len(body)]
    if kind == "short":  # a clean close after exactly half
        assert len(body) == 200_000
    status, _, body = fetch(proxy, path, rng)
    assert status == 206 and body == data[1000:401000]
    log = [e for e in proxy_log()["requests"] if e["path"] == path]
    assert [(e["attempt"], e["fault"], e["bytes"]) for e in log] == [
        (1, kind, 200_000), (2, None, 400_000)]


def test_fault_sequence_and_delay(proxy):
    rel, rng = "py/train-0000.tar", "bytes=0-1023"
    path = f"/f/503x1,resetx1,delay=300x2/{rel}"
    t0 = time.monotonic()
    assert fetch(proxy, path, rng)[0] == 503
    assert time.monotonic() - t0 >= 0.3
    with pytest.raises((ConnectionResetError, http.client.IncompleteRead)):
        fetch(proxy, path, rng)
    proxy.close()
    status, _, body = fetch(proxy, path, rng)
    assert status == 206 and body == local(rel)[:1024]
    assert attempts("503x1,resetx1,delay=300x2", rel, rng) == [
        (1, "503", 503), (2, "reset", 206), (3, None, 206)]


@pytest.mark.parametrize("code", [403, 404])
def test_fault_always(proxy, code):
    for _ in range(3):
        assert fetch(proxy, f"/f/{code}/blob.bin", "bytes=0-9")[0] == code
    assert [a for a, _, _ in attempts(str(code), "blob.bin", "bytes=0-9")] == [1, 2, 3]


def test_fault_noranges_and_plain(proxy):
    data = local("odd name 1.bin")
    status, _, body = fetch(proxy, "/f/noranges/" + quote("odd name 1.bin"), "bytes=10-19")
    assert status == 200 and body == data
    status, _, body = fetch(proxy, "/" + quote("odd name 1.bin"), "bytes=10-19")
    assert status == 206 and body == data[10:20]
    status, r, body = fetch(proxy, "/blob.bin", method="HEAD")
    assert status == 200 and body == b"" and int(r.getheader("Content-Length")) == \
        len(local("blob.bin"))
    assert fetch(proxy, "/f/noranges/missing.tar")[0] == 404  # nginx's own answer
    log = proxy_log()["requests"]
    assert [(e["range"], e["status"], e["bytes"]) for e in log[:2]] == [
        ("bytes=10-19", 200, len(data)), ("bytes=10-19", 206, 10)]


def post(what):
    urllib.request.urlopen(urllib.request.Request(env("RF_TEST_FAULT") + what,
                                                  method="POST")).read()


def test_fault_silent_until_client_closes(proxy):
    """silent: the request is read and nothing is sent, not a status line, until the client
    hangs up; the log has it from the start. 'armed' holds the other items back until
    POST /_arm, and /_reset disarms."""
    url = urllib.parse.urlsplit(env("RF_TEST_FAULT"))
    path = "/f/armed,silent/blob.bin"
    status, _, body = fetch(proxy, path, "bytes=0-9")
    assert status == 206 and body == local("blob.bin")[:10]  # not armed: forwarded
    post("/_arm")
    with socket.create_connection((url.hostname, url.port), timeout=30) as s:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nRange: bytes=0-9\r\n\r\n".encode())
        s.settimeout(1.0)
        with pytest.raises(socket.timeout):
            s.recv(1)
        held = [e for e in proxy_log()["requests"] if e["fault"] == "silent"]
        assert len(held) == 1 and held[0]["status"] is None
    deadline = time.monotonic() + 10
    while proxy_log()["requests"][-1]["fault"] != "silent, client closed":
        assert time.monotonic() < deadline, proxy_log()
        time.sleep(0.05)
    post("/_reset")
    assert fetch(proxy, path, "bytes=0-9")[0] == 206  # disarmed again


def test_fault_rangestar_bighdr_trickle_listloop(proxy):
    data = local("blob.bin")
    status, r, body = fetch(proxy, "/f/rangestar/blob.bin", "bytes=5-14")
    assert status == 206 and body == data[5:15]
    assert r.getheader("Content-Range") == "bytes 5-14/*"
    status, _, body, _ = raw_get("/f/bighdr/blob.bin", "bytes=0-3")
    assert status.endswith("206 Partial Content") and body == data[:4]
    t0 = time.monotonic()
    status, _, body = fetch(proxy, "/f/trickle/blob.bin", "bytes=10-13")
    assert status == 206 and body == data[10:14] and time.monotonic() - t0 >= 0.9
    status, _, page = fetch(proxy, "/f/listloop/rf-test/?list-type=2&prefix=loop%2F")
    assert status == 200 and b"<Key>loop/a.tar</Key>" in page
    token = "<NextContinuationToken>rf-same-token</NextContinuationToken>"
    assert token.encode() in page and b"<IsTruncated>true</IsTruncated>" in page
    status, _, page = fetch(proxy, "/f/listloop/rf-test/?continuation-token=rf-same-token"
                                   "&list-type=2&prefix=loop%2F")
    assert status == 200 and b"<Key>" not in page and token.encode() in page


def test_fault_bad_spec(proxy):
    status, _, body = fetch(proxy, "/f/503x2,flaky/blob.bin")
    assert status == 400 and b"'flaky'" in body


def test_fault_log_hides_signature(proxy):
    auth = ("AWS4-HMAC-SHA256 Credential=AKIDSECRETLESS/20260101/us-east-1/s3/aws4_request, "
            "SignedHeaders=host;x-amz-content-sha256;x-amz-date, Signature=0123abcd")
    fetch(proxy, "/blob.bin", "bytes=0-0", headers={"Authorization": auth,
                                                    "x-amz-content-sha256": EMPTY_SHA256})
    fetch(proxy, "/blob.bin", "bytes=1-1")
    with urllib.request.urlopen(env("RF_TEST_FAULT") + "/_log") as r:
        raw = r.read().decode()
    assert "0123abcd" not in raw and "AKIDSECRETLESS" not in raw and EMPTY_SHA256 not in raw
    first, second = json.loads(raw)["requests"]
    assert first["authorization"] and first["signed_headers"] == [
        "host", "x-amz-content-sha256", "x-amz-date"]
    assert "x-amz-content-sha256" in first["headers"]
    assert not second["authorization"] and second["signed_headers"] is None


def test_fault_reset_endpoint(proxy):
    assert fetch(proxy, "/f/503x1/blob.bin")[0] == 503
    assert fetch(proxy, "/f/503x1/blob.bin")[0] == 200
    urllib.request.urlopen(urllib.request.Request(env("RF_TEST_FAULT") + "/_reset",
                                                  method="POST")).read()
    assert proxy_log() == {"requests": [], "dropped": 0}
    assert fetch(proxy, "/f/503x1/blob.bin")[0] == 503  # the counters start again


# ------------------------------------------------------------------------------------- S3

def s3(secret=None, key=None, anonymous=False):
    boto3 = pytest.importorskip("boto3")
    from botocore import UNSIGNED
    from botocore.config import Config
    return boto3.client("s3", endpoint_url=env("RF_TEST_S3_ENDPOINT"),
                        region_name=env("RF_TEST_S3_REGION"),
                        aws_access_key_id=key or env("RF_TEST_S3_KEY"),
                        aws_secret_access_key=secret or env("RF_TEST_S3_SECRET"),
                        config=Config(signature_version=UNSIGNED) if anonymous else None)


def s3_error(call):
    from botocore.exceptions import ClientError
    with pytest.raises(ClientError) as e:
        call()
    return e.value.response["ResponseMetadata"]["HTTPStatusCode"], e.value.response["Error"]["Code"]


def test_s3_buckets_hold_root():
    client = s3()
    for bucket in (env("RF_TEST_S3_BUCKET"), env("RF_TEST_S3_PUBLIC_BUCKET")):
        listed = client.list_objects_v2(Bucket=bucket)
        assert sorted(o["Key"] for o in listed["Contents"]) == files()
        for rel in files():
            assert client.get_object(Bucket=bucket, Key=rel)["Body"].read() == local(rel)


def test_s3_signed_ranges():
    client, bucket = s3(), env("RF_TEST_S3_BUCKET")
    for rel in files():
        data = local(rel)
        for header, first, last in ranges(len(data)):
            r = client.get_object(Bucket=bucket, Key=rel, Range=header)
            assert r["ContentRange"] == f"bytes {first}-{last}/{len(data)}"
            assert r["Body"].read() == data[first:last + 1], (rel, header)


def test_s3_wrong_credentials_refused():
    bucket = env("RF_TEST_S3_BUCKET")
    assert s3_error(lambda: s3(secret="wrong").get_object(Bucket=bucket, Key="blob.bin")) == \
        (403, "SignatureDoesNotMatch")
    assert s3_error(lambda: s3(key="AKIANOSUCHKEY0000000").get_object(
        Bucket=bucket, Key="blob.bin")) == (403, "InvalidAccessKeyId")


def test_s3_anonymous_public_only():
    anon, data = s3(anonymous=True), local("blob.bin")
    private, public = env("RF_TEST_S3_BUCKET"), env("RF_TEST_S3_PUBLIC_BUCKET")
    assert s3_error(lambda: anon.get_object(Bucket=private, Key="blob.bin"))[0] == 403
    assert s3_error(lambda: anon.list_objects_v2(Bucket=private))[0] == 403
    assert anon.get_object(Bucket=public, Key="blob.bin")["Body"].read() == data
    r = anon.get_object(Bucket=public, Key="blob.bin", Range="bytes=7-99")
    assert r["Body"].read() == data[7:100]
    assert sorted(o["Key"] for o in anon.list_objects_v2(Bucket=public)["Contents"]) == files()


def test_s3_curl_sigv4():
    """What the libcurl engine sends: CURLOPT_AWS_SIGV4 "aws:amz:REGION:s3" with the key pair.
    curl 7.88 does not add x-amz-content-sha256 by itself and moto then computes another
    signature (AWS S3 requires the header too), so the request carries it, signed."""
    url = f"{env('RF_TEST_S3_ENDPOINT')}/{env('RF_TEST_S3_BUCKET')}/{quote('odd name 1.bin')}"
    sign = ["--aws-sigv4", f"aws:amz:{env('RF_TEST_S3_REGION')}:s3",
            "-H", f"x-amz-content-sha256: {EMPTY_SHA256}", "-r", "10-4009", "-o", "-",
            "-w", "\n%{http_code}"]
    r = curl(*sign, "--user", f"{env('RF_TEST_S3_KEY')}:{env('RF_TEST_S3_SECRET')}", url)
    body, _, code = r.stdout.rpartition(b"\n")
    assert code == b"206" and body == local("odd name 1.bin")[10:4010], r.stderr
    r = curl(*sign, "--user", f"{env('RF_TEST_S3_KEY')}:wrong", url)
    assert r.stdout.rpartition(b"\n")[2] == b"403" and b"SignatureDoesNotMatch" in r.stdout


def test_env_file_lists_exports():
    with open(os.path.join(env("RF_TEST_STATE"), "env")) as f:
        pairs = dict(line.rstrip("\n").split("=", 1) for line in f)
    assert {"RF_TEST_HTTP", "RF_TEST_HTTPS", "RF_TEST_CA", "RF_TEST_FAULT", "RF_TEST_S3_ENDPOINT",
            "RF_TEST_S3_KEY", "RF_TEST_S3_SECRET", "RF_TEST_S3_REGION", "RF_TEST_S3_BUCKET",
            "RF_TEST_S3_PUBLIC_BUCKET", "RF_TEST_STATE", "RF_TEST_ROOT"} <= set(pairs)
    assert all(os.environ[k] == v for k, v in pairs.items())
    assert not any(k.startswith("AWS_") for k in pairs)  # tests set those themselves


# ----------------------------------------------------------------------- the runner itself

def processes_of(state):
    """{pid: command line} of every live process whose command line names state, and of
    their children (nginx's worker does not name it)."""
    procs = {}
    for d in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{d}/stat") as f:
                stat = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{d}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, ValueError):
            continue
        if stat[0] != "Z":  # a zombie has ended; only its parent has not reaped it yet
            procs[int(d)] = (int(stat[1]), cmd)
    named = {pid for pid, (_, cmd) in procs.items() if state in cmd}
    return {pid: procs[pid][1] for pid in procs if pid in named or procs[pid][0] in named}


def wait_gone(pids, timeout=15):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        left = {p: c for p, c in processes_of("").items() if p in pids}
        if not left:
            return {}
        time.sleep(0.1)
    return left


def nested(tmp_path, then, only="http,fault", extra=()):
    """A runner of its own (state under tmp_path) whose command records the processes of that
    state in tmp_path/pids, then does `then`: exit3, kill9 (kills itself) or sleep."""
    data = tmp_path / "da ta;\"x"  # one nginx argument however it is spelled
    data.mkdir()
    (data / "a.bin").write_bytes(b"x" * 1000)
    state = str(tmp_path / "st ate")
    cmd = [sys.executable, __file__, "--record-pids", str(tmp_path / "pids"), then]
    return state, subprocess.Popen(
        [sys.executable, RUNNER, "--root", str(data), "--state", state, "--only", only, *extra,
         "--", *cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def recorded(tmp_path, runner, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(tmp_path / "pids") as f:
                return json.load(f)
        except (OSError, ValueError):
            if runner.poll() is not None and not (tmp_path / "pids").exists():
                raise AssertionError(f"the runner exited {runner.returncode} before its "
                                     f"command recorded: {runner.stderr.read()}")
            time.sleep(0.1)
    raise AssertionError("the runner's command never ran")


def need_servers(*what):
    if "nginx" in what and not (shutil.which("nginx") or os.access("/usr/sbin/nginx", os.X_OK)):
        pytest.skip("nginx is not installed (tools/deps.sh installs nginx-light)")
    if "moto" in what:
        pytest.importorskip("moto.server", reason="moto is not installed (tools/deps.sh)")


def test_runner_command_fails_all_servers(tmp_path):
    need_servers("nginx", "moto")
    state, runner = nested(tmp_path, "exit3", only="http,https,s3,fault")
    out, err = runner.communicate(timeout=120)
    assert runner.returncode == 3, err
    rec = recorded(tmp_path, runner)
    servers = [c for c in rec["procs"].values() if "nginx" in c or "--moto-child" in c]
    assert len(servers) >= 3, rec  # nginx's master and worker, moto
    assert wait_gone({int(p) for p in rec["procs"]}, timeout=1) == {}
    assert processes_of(state) == {}
    # without --s3-upload: the key, no buckets
    assert "RF_TEST_S3_KEY" in rec["env"] and "RF_TEST_S3_BUCKET" not in rec["env"]
    assert rec["a.bin"] == "x" * 1000  # nginx served the oddly named root


@pytest.mark.parametrize("how", ["command_killed", "runner_terminated", "runner_killed"])
def test_runner_leaves_no_process(tmp_path, how):
    need_servers("nginx")
    state, runner = nested(tmp_path, "kill9" if how == "command_killed" else "sleep")
    rec = recorded(tmp_path, runner)
    if how != "command_killed":
        runner.send_signal(signal.SIGTERM if how == "runner_terminated" else signal.SIGKILL)
    runner.communicate(timeout=60)
    expect = {"command_killed": 128 + 9, "runner_terminated": 128 + signal.SIGTERM,
              "runner_killed": -signal.SIGKILL}[how]
    assert runner.returncode == expect
    assert any("nginx: worker" in c for c in rec["procs"].values()), rec
    # after SIGKILL no cleanup runs: the kernel's parent-death signal ends the servers
    assert wait_gone({int(p) for p in rec["procs"]}) == {}
    assert processes_of(state) == {}


def test_runner_state_in_use(tmp_path):
    need_servers("nginx")
    state, runner = nested(tmp_path, "sleep", only="http")
    recorded(tmp_path, runner)
    r = subprocess.run([sys.executable, RUNNER, "--root", str(tmp_path), "--state", state,
                        "--only", "http", "--", "true"], capture_output=True, text=True)
    env_kept = os.path.exists(os.path.join(state, "env"))  # the live runner's, left alone
    runner.terminate()
    runner.communicate(timeout=60)
    assert r.returncode == 2 and f"{state} is in use by the runner with pid {runner.pid}" in \
        r.stderr
    assert env_kept


def test_runner_missing_program_skips(tmp_path):
    empty = tmp_path / "bin"
    empty.mkdir()
    stub = tmp_path / "stub" / "moto"
    stub.mkdir(parents=True)
    (stub / "__init__.py").write_text("raise ImportError('hidden by the test', name='moto')\n")
    (tmp_path / "data").mkdir()
    base = [sys.executable, RUNNER, "--root", str(tmp_path / "data"), "--state",
            str(tmp_path / "state")]
    r = subprocess.run(base + ["--only", "https", "--", "true"], capture_output=True, text=True,
                       env=dict(os.environ, PATH=str(empty)))
    assert r.returncode == 77 and "skipped: missing openssl" in r.stderr
    r = subprocess.run(base + ["--only", "s3", "--", "true"], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=str(stub.parent)))
    assert r.returncode == 77 and "skipped: missing Python module moto" in r.stderr


def test_runner_nginx_from_env_without_moto(tmp_path):
    """NGINX names the binary when no nginx is on PATH (a machine without the package, given
    Debian's binary carried elsewhere), which starts with the generated config alone; and
    --only http imports neither moto nor boto3 (stubs that fail on import)."""
    need_servers("nginx")
    carried = tmp_path / "carried" / "nginx-bin"
    carried.parent.mkdir()
    shutil.copy(shutil.which("nginx") or "/usr/sbin/nginx", carried)
    empty = tmp_path / "bin"
    empty.mkdir()
    for mod in ("moto", "boto3"):
        (tmp_path / "stub" / mod).mkdir(parents=True)
        (tmp_path / "stub" / mod / "__init__.py").write_text(
            f"raise ImportError('hidden by the test', name='{mod}')\n")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "a.bin").write_bytes(bytes(range(100)))
    fetch = ("import os, urllib.request as u; print(u.urlopen(u.Request(os.environ["
             "'RF_TEST_HTTP'] + '/a.bin', headers={'Range': 'bytes=10-19'})).read().hex()); "
             "pid = open(os.environ['RF_TEST_STATE'] + '/nginx.pid').read().strip(); "
             "print(os.readlink(f'/proc/{pid}/exe'))")
    r = subprocess.run([sys.executable, RUNNER, "--root", str(tmp_path / "data"), "--state",
                        str(tmp_path / "state"), "--only", "http", "--", sys.executable, "-c",
                        fetch], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, PATH=str(empty), NGINX=str(carried),
                                PYTHONPATH=str(tmp_path / "stub")))
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [bytes(range(10, 20)).hex(), str(carried)]
    r = subprocess.run([sys.executable, RUNNER, "--root", str(tmp_path / "data"), "--state",
                        str(tmp_path / "state"), "--only", "http", "--", "true"],
                       capture_output=True, text=True,
                       env=dict(os.environ, PATH=str(empty), NGINX=str(tmp_path / "none")))
    assert r.returncode == 77 and "is not an executable file" in r.stderr


def test_runner_server_start_failure(tmp_path):
    fake = tmp_path / "nginx"
    fake.write_text("#!/bin/sh\necho 'nginx: [emerg] cannot start (the test)' >&2\nexit 1\n")
    fake.chmod(0o755)
    (tmp_path / "data").mkdir()
    r = subprocess.run([sys.executable, RUNNER, "--root", str(tmp_path / "data"), "--state",
                        str(tmp_path / "state"), "--only", "http", "--nginx", str(fake), "--",
                        "touch", str(tmp_path / "ran")], capture_output=True, text=True)
    assert r.returncode == 2
    assert "nginx (http) exited with status 1 while starting" in r.stderr
    assert "[emerg] cannot start (the test)" in r.stderr
    assert not (tmp_path / "ran").exists()


def test_runner_s3_setup_failure(tmp_path):
    need_servers("moto")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "gone.tar").symlink_to(tmp_path / "nowhere.tar")
    r = subprocess.run([sys.executable, RUNNER, "--root", str(tmp_path / "data"), "--state",
                        str(tmp_path / "state"), "--only", "s3", "--s3-upload", "--",
                        "touch", str(tmp_path / "ran")], capture_output=True, text=True)
    assert r.returncode == 2, r.stderr
    assert "moto (s3): the setup failed (FileNotFoundError" in r.stderr and "gone.tar" in r.stderr
    assert not (tmp_path / "ran").exists()
    assert wait_gone(processes_of(str(tmp_path / "state"))) == {}


def test_runner_port_taken_retried(tmp_path):
    """The port picked for nginx can be taken before nginx binds it: a start that fails with
    "Address already in use" is tried again on other ports."""
    need_servers("nginx")
    real = shutil.which("nginx") or "/usr/sbin/nginx"
    flaky = tmp_path / "nginx"
    flaky.write_text(f"""#!/bin/sh
if [ ! -e {tmp_path}/failed ]; then
  touch {tmp_path}/failed
  echo 'nginx: [emerg] bind() to 127.0.0.1:1 failed (98: Address already in use)' >&2
  exit 1
fi
exec {real} "$@"
""")
    flaky.chmod(0o755)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "a.bin").write_bytes(b"abc")
    r = subprocess.run([sys.executable, RUNNER, "--root", str(tmp_path / "data"), "--state",
                        str(tmp_path / "state"), "--only", "http", "--nginx", str(flaky), "--",
                        "sh", "-c", 'curl -s "$RF_TEST_HTTP/a.bin"'],
                       capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout == "abc", r.stderr


def record_pids(path, then):
    """The nested runner's command: what runs under its state, and its environment."""
    state = os.environ["RF_TEST_STATE"]
    rec = {"procs": {str(p): c for p, c in processes_of(state).items() if p != os.getpid()},
           "env": {k: v for k, v in os.environ.items() if k.startswith("RF_TEST_")}}
    with urllib.request.urlopen(os.environ["RF_TEST_HTTP"] + "/a.bin") as r:
        rec["a.bin"] = r.read().decode()
    with open(path + ".tmp", "w") as f:
        json.dump(rec, f)
    os.rename(path + ".tmp", path)
    if then == "exit3":
        sys.exit(3)
    if then == "kill9":
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(120)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--make-data"] and len(sys.argv) == 3:
        make_data(sys.argv[2])
    elif sys.argv[1:2] == ["--record-pids"] and len(sys.argv) == 4:
        record_pids(sys.argv[2], sys.argv[3])
    else:
        sys.exit("usage: test_servers.py --make-data DIR | --record-pids FILE exit3|kill9|sleep")
