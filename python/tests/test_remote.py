"""Remote shards from Python (docs/remote.md): ringfeed.Loader and TokenLoader take http:// URLs
as they take paths, against a real nginx and the fault proxy started by
tests/servers/servers.py around this module (skipped when nginx is missing). Torch-free."""
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import ringfeed
from conftest import REPO, make_shards, run_python, write_webdataset, shard_jpegs

KW = dict(size=24, device="cpu", decode_threads=2, array_type="numpy", seed=5)
SECRET = "pw-Py-s3cr3t"


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """(root, env): shards under root, served by nginx (RF_TEST_HTTP) and the fault proxy
    (RF_TEST_FAULT) until the module's tests are done."""
    root = str(tmp_path_factory.mktemp("remote-root"))
    state = str(tmp_path_factory.mktemp("remote-state"))
    make_shards(os.path.join(root, "gen"), 30, 5, 10)
    jpegs = shard_jpegs(os.path.join(root, "gen", "train-*.tar"), 12)
    write_webdataset(os.path.join(root, "wds.tar"), jpegs, "cls",
                     [str(i % 3).encode() for i in range(12)])
    proc = subprocess.Popen(
        [sys.executable, os.path.join(REPO, "tests", "servers", "servers.py"), "--root", root,
         "--state", state, "--only", "http,fault", "--", sys.executable, "-c",
         "import sys; sys.stdin.read()"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE)
    envfile = os.path.join(state, "env")
    deadline = time.monotonic() + 120
    while not os.path.exists(envfile):
        if proc.poll() is not None:
            err = proc.stderr.read().decode(errors="replace")
            if proc.returncode == 77:
                pytest.skip(f"servers for remote shards: {err.strip()}")
            raise RuntimeError(f"tests/servers/servers.py exited {proc.returncode}: {err}")
        if time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError("tests/servers/servers.py did not come up in 120 s")
        time.sleep(0.1)
    time.sleep(0.2)  # the file is written whole before the command starts
    env = dict(line.split("=", 1) for line in open(envfile).read().split())
    yield root, env
    proc.stdin.close()
    proc.wait(timeout=60)


def epoch(loader):
    keys, labels, images = [], [], []
    for b in loader:
        keys += list(b.keys)
        labels += [int(x) for x in b.labels]
        images.append(np.array(b.images, copy=True))
    return keys, labels, np.concatenate(images)


@pytest.mark.parametrize("rel", ["gen/train-{000000..000002}.tar", "wds.tar"])
def test_url_equals_local(served, rel):
    root, env = served
    with ringfeed.Loader(os.path.join(root, rel), 4, **KW) as ld:
        local = epoch(ld)
    with ringfeed.Loader(f"{env['RF_TEST_HTTP']}/{rel}", 4, **KW) as ld:
        remote = epoch(ld)
        st = ld.stats()
    assert remote[0] == local[0] and remote[1] == local[1]
    assert np.array_equal(remote[2], local[2])
    assert st["io_engine"] == "curl"
    assert st["remote_requests"] >= st["reads"] > 0
    assert st["remote_bytes"] >= st["bytes_read"] > 0


def test_retried_fault_gives_the_same_batches(served):
    root, env = served
    rel = "gen/train-{000000..000001}.tar"
    with ringfeed.Loader(os.path.join(root, rel), 4, **KW) as ld:
        local = epoch(ld)
    with ringfeed.Loader(f"{env['RF_TEST_FAULT']}/f/500x1,shortx1/{rel}", 4, **KW) as ld:
        remote = epoch(ld)
        st = ld.stats()
    assert remote[0] == local[0] and np.array_equal(remote[2], local[2])
    assert st["remote_retries"] > 0


def test_remote_retries_and_timeout(served):
    """remote_retries and remote_timeout reach rf_config: one retry is not enough for three
    500s (the error names the URL and the byte range), and a 0.5 s timeout retries an answer
    held back 2.5 s, giving the same batches as the local files."""
    root, env = served
    rel = "gen/train-000000.tar"
    with ringfeed.Loader(os.path.join(root, rel), 4, **KW) as ld:
        local = epoch(ld)
        assert ld.config["remote_retries"] == 5  # the library's default, untouched
    with pytest.raises(ringfeed.RingfeedError) as ei:
        with ringfeed.Loader(f"{env['RF_TEST_FAULT']}/f/500x3/{rel}", 4, remote_retries=1,
                             **KW) as ld:
            epoch(ld)
    assert f"/f/500x3/{rel}" in str(ei.value) and "bytes" in str(ei.value)
    with ringfeed.Loader(f"{env['RF_TEST_FAULT']}/f/delay=2500x1/{rel}", 4, remote_timeout=0.5,
                         **KW) as ld:
        assert ld.config["remote_timeout_ms"] == 500
        remote = epoch(ld)
        st = ld.stats()
    assert remote[0] == local[0] and np.array_equal(remote[2], local[2])
    assert st["remote_retries"] > 0
    for bad in (dict(remote_retries=0), dict(remote_retries=101), dict(remote_timeout=0),
                dict(remote_timeout=3601)):
        with pytest.raises(ValueError, match="remote_"):
            ringfeed.Loader(os.path.join(root, rel), 4, **bad, **KW)


def test_errors_name_the_url_without_credentials(served):
    _, env = served
    host = env["RF_TEST_HTTP"][len("http://"):]
    url = f"http://user:{SECRET}@{host}/gen/missing.tar?X-Amz-Signature={SECRET}"
    with pytest.raises(ringfeed.RingfeedError) as ei:
        ringfeed.Loader(url, 4, **KW)
    msg = str(ei.value)
    assert f"http://{host}/gen/missing.tar" in msg and "HTTP 404" in msg
    assert SECRET not in msg and "X-Amz-Signature" not in msg
    with pytest.raises(ringfeed.RingfeedError, match="brace ranges"):
        ringfeed.Loader(f"{env['RF_TEST_HTTP']}/gen/train-*.tar", 4, **KW)


def _proxy_sample_gets(env, root, prefix):
    """Sample reads in the fault proxy's log since its last reset under prefix: not create's
    (one-byte opens, reads to a shard's end) and not a fill's (the whole object)."""
    import json
    import urllib.request
    log = json.load(urllib.request.urlopen(f"{env['RF_TEST_FAULT']}/_log"))["requests"]
    n = 0
    for q in log:
        t, rng = q["target"].split("?")[0], q["range"] or ""
        if t.startswith(prefix) and not t.endswith(".idx") and rng != "bytes=0-0" and \
                not rng.endswith("-%d" % (os.path.getsize(root + t) - 1)):
            n += 1
    return n


def _reset_proxy(env):
    import urllib.request
    urllib.request.urlopen(urllib.request.Request(f"{env['RF_TEST_FAULT']}/_reset",
                                                  method="POST")).read()


def _wait_fills(ld, n):
    for _ in range(3000):
        st = ld.stats()
        if st["shard_cache_fills"] + st["shard_cache_fill_failures"] >= n:
            return st
        time.sleep(0.01)
    raise AssertionError(f"cache fills did not end: {ld.stats()['shard_cache_why']}")


def test_cache_fills_then_serves_without_sample_gets(served, tmp_path):
    """The first loader misses and fills both shards, the second hits: the proxy's log has no
    sample GET for it, and both equal the local run."""
    root, env = served
    rel = "gen/train-{000000..000001}.tar"
    cache = tmp_path / "cache"
    with ringfeed.Loader(os.path.join(root, rel), 4, **KW) as ld:
        local = epoch(ld)
    runs = []
    for n in range(2):
        _reset_proxy(env)
        with ringfeed.Loader(f"{env['RF_TEST_FAULT']}/{rel}", 4, cache_dir=cache,
                             cache_bytes=1 << 26, **KW) as ld:
            runs.append(epoch(ld))
            st = _wait_fills(ld, 2 if n == 0 else 0)
            assert ld.config["cache_dir"] == str(cache)
        assert (st["shard_cache_hits"], st["shard_cache_misses"]) == ((0, 2) if n == 0 else (2, 0))
        assert st["shard_cache_fills"] == (2 if n == 0 else 0)
        assert st["shard_cache_on"] == 1
        # the first loader read samples from the server before its fills ended
        assert (_proxy_sample_gets(env, root, "/gen/") > 0) == (n == 0)
    for r in runs:
        assert r[0] == local[0] and r[1] == local[1] and np.array_equal(r[2], local[2])


def test_cache_refusals(served, tmp_path):
    root, env = served
    url = f"{env['RF_TEST_HTTP']}/wds.tar"
    with pytest.raises(ringfeed.RingfeedError, match="cache_bytes must be > 0"):
        ringfeed.Loader(url, 4, cache_dir=tmp_path, **KW)
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(ringfeed.RingfeedError, match="cache_dir: .*file/sub"):
        ringfeed.Loader(url, 4, cache_dir=blocker / "sub", cache_bytes=1 << 20, **KW)
    with ringfeed.Loader(url, 4, cache_dir=tmp_path / "c", cache_bytes=1000, **KW) as ld:
        epoch(ld)
        for _ in range(3000):
            st = ld.stats()
            if st["shard_cache_bypasses"]:
                break
            time.sleep(0.01)
    assert st["shard_cache_bypasses"] == 1 and "budget" in st["shard_cache_why"]



def _token_windows(path, token_bytes=2, **kw):
    """Every window of one epoch (int64), the loader's stats and its config."""
    with ringfeed.TokenLoader(path, token_bytes, 64, 8, device="cpu", array_type="numpy",
                              seed=4, **kw) as ld:
        windows = np.concatenate([np.array(b.tokens, copy=True) for b in ld])
        st = _wait_fills(ld, 1) if "cache_dir" in kw else ld.stats()
        return windows, st, ld.config


@pytest.mark.parametrize("shuffle", [True, False])
def test_token_loader_url_equals_local(served, shuffle):
    """TokenLoader over an http URL gives the local file's windows (nanoGPT's uint16
    train.bin, written by numpy), random and sequential windows."""
    root, env = served
    path = os.path.join(root, "train.bin")
    if not os.path.exists(path):
        np.random.default_rng(3).integers(0, 50257, 5000).astype(np.uint16).tofile(path)
    local = _token_windows(path, shuffle=shuffle)[0]
    remote, st, _ = _token_windows(f"{env['RF_TEST_HTTP']}/train.bin", shuffle=shuffle)
    assert local.dtype == np.int64 and local.shape == (78, 65)
    assert np.array_equal(remote, local)
    assert st["io_engine"] == "curl"
    # the open and a GET per window (the next epoch's prefetched reads may be in flight)
    assert st["remote_requests"] >= 78 + 1 and st["remote_retries"] == 0


def test_token_loader_url_cache_and_retries(served, tmp_path):
    """TokenLoader's cache_dir, remote_retries and remote_timeout reach the library: a reset
    on every window is retried to the same windows, and the file is filled into the cache."""
    root, env = served
    path = os.path.join(root, "train4.bin")
    np.arange(3000, dtype=np.uint32).tofile(path)
    local = _token_windows(path, 4, shuffle=False)[0]
    remote, st, cfg = _token_windows(f"{env['RF_TEST_FAULT']}/f/resetx1/train4.bin", 4,
                                     shuffle=False, cache_dir=tmp_path / "c",
                                     cache_bytes=1 << 20, remote_retries=3, remote_timeout=10)
    assert np.array_equal(remote, local) and local[0, 64] == 64
    assert cfg["remote_retries"] == 3 and cfg["remote_timeout_ms"] == 10000
    assert st["remote_retries"] > 0
    assert (st["shard_cache_misses"], st["shard_cache_fills"]) == (1, 1)


# ---- closing, interrupting and exiting while a server stalls (docs/python.md "Threads,
# interrupts and exit") -------------------------------------------------------------------------

def _post(env, what):
    import urllib.request
    urllib.request.urlopen(urllib.request.Request(f"{env['RF_TEST_FAULT']}/{what}",
                                                  method="POST")).read()


def test_close_from_another_thread_wakes_next(served):
    """next() waits for a batch the server never sends (remote_timeout a minute): close() from
    another thread makes it raise RuntimeError ("closed") at once, not after the timeouts."""
    _, env = served
    _reset_proxy(env)
    url = f"{env['RF_TEST_FAULT']}/f/armed,silent/gen/train-{{000000..000002}}.tar"
    ld = ringfeed.Loader(url, 4, prefetch_depth=1, remote_timeout=60, **KW)
    _post(env, "_arm")
    outcome = []

    def iterate():
        try:
            for _ in ld:
                pass
            outcome.append("epoch ended")
        except Exception as e:  # noqa: BLE001  (what the thread met is the test's result)
            outcome.append(e)

    t = threading.Thread(target=iterate, daemon=True)
    t.start()
    time.sleep(1.0)
    ld.close()
    t.join(10)
    _reset_proxy(env)
    assert not t.is_alive(), "next() still waits 10 s after close()"
    assert isinstance(outcome[0], RuntimeError) and "closed" in str(outcome[0]), outcome


# The child registers an exit handler before importing ringfeed (exit handlers run last
# registered first, so it runs after ringfeed's): it prints the threads left then. argv[1]:
# the shards' URL pattern; argv[2]: "stall" to arm the proxy (argv[3]) and leave a daemon
# thread waiting in next() for a server that never answers.
EXIT = r"""
import atexit, os, sys, threading, time, urllib.request
atexit.register(lambda: print("threads at exit", len(os.listdir("/proc/self/task")), flush=True))
import ringfeed
alone = len(os.listdir("/proc/self/task"))
ld = ringfeed.Loader(sys.argv[1], 4, size=32, device="cpu", decode_threads=2,
                     array_type="numpy", prefetch_depth=1, remote_timeout=60)
b = next(iter(ld))
if sys.argv[2] == "stall":
    urllib.request.urlopen(urllib.request.Request(sys.argv[3] + "/_arm", method="POST")).read()
    threading.Thread(target=lambda: [None for _ in ld], daemon=True).start()
    time.sleep(1.0)
    alone += 1  # that thread, ending
print("threads alone", alone, flush=True)
"""


@pytest.mark.parametrize("how", ["idle", "stall"])
def test_exit_without_close_stops_every_thread(served, how):
    """A script that ends without close(), its loader prefetching (or a thread of it waiting
    in next() for a silent server): the exit status is 0, and the loader's threads are gone
    before the process's own exit handlers run (those tear down the libraries the threads
    use: libcrypto's for signed S3 requests)."""
    _, env = served
    _reset_proxy(env)
    spec = "f/armed,silent/" if how == "stall" else ""
    url = f"{env['RF_TEST_FAULT']}/{spec}gen/train-{{000000..000002}}.tar"
    r = run_python(EXIT, url, how, env["RF_TEST_FAULT"], timeout=120)
    _reset_proxy(env)
    assert r.returncode == 0, r.stderr[-3000:]
    counts = dict(line.rsplit(" ", 1) for line in r.stdout.splitlines())
    assert int(counts["threads at exit"]) <= int(counts["threads alone"]), r.stdout


# The child: SIGINT while Loader(...) waits for a server that holds create's first answer back
# 1.5 s; the KeyboardInterrupt is caught, and then no thread or descriptor of the loader is
# left, without close() or gc.collect().
CREATE_CTRL_C = r"""
import os, signal, sys, threading
import ringfeed
def counts():
    return len(os.listdir("/proc/self/task")), len(os.listdir("/proc/self/fd"))
before = counts()
threading.Timer(0.3, lambda: signal.pthread_kill(threading.main_thread().ident,
                                                 signal.SIGINT)).start()
try:
    ringfeed.Loader(sys.argv[1], 4, size=32, device="cpu", decode_threads=2, array_type="numpy")
    print("no interrupt")
except KeyboardInterrupt:
    pass
after = counts()
assert after == before, (before, after)
print("ok")
"""


def test_ctrl_c_during_create_leaves_nothing_running(served):
    _, env = served
    _reset_proxy(env)
    url = f"{env['RF_TEST_FAULT']}/f/delay=1500x1/gen/train-000000.tar"
    r = run_python(CREATE_CTRL_C, url, timeout=120)
    _reset_proxy(env)
    assert r.returncode == 0 and r.stdout.strip() == "ok", (r.stdout, r.stderr[-3000:])
