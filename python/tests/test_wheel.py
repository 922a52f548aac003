"""The installed binary wheel, as tests/wheel_test.sh runs it: ringfeed imported from a fresh
venv with no RINGFEED_LIB or PYTHONPATH, the system's liburing, libjpeg, libspng, libwebp,
libcurl, libnghttp2 and OpenSSL hidden, so every library it loads must come from the wheel; its
commands run from PATH (the venv's bin/ first); shards read from disk and from the servers the
script started (RINGFEED_WHEEL_SERVERS: their env file). Skipped in a checkout's run (the script
sets RINGFEED_WHEEL_SHARDS to shards it generated before hiding the libraries)."""
import glob
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile

import pytest

import ringfeed
from conftest import REPO, labels_once, rewrite_shards, shard_labels

SHARDS = os.environ.get("RINGFEED_WHEEL_SHARDS")
SERVERS = os.environ.get("RINGFEED_WHEEL_SERVERS")
pytestmark = pytest.mark.skipif(not SHARDS, reason="run by tests/wheel_test.sh on the wheel")

BUNDLED = ("liburing", "libjpeg", "libspng", "libwebp")
COMMANDS = ("ringfeed-gen", "ringfeed-pack", "ringfeed-inspect", "ringfeed-bench")
SITE = sysconfig.get_paths()["platlib"]


def bundle_rules():
    """tools/wheel_bundle.py: ALLOWED (what the wheel may bundle) and its helpers."""
    spec = importlib.util.spec_from_file_location(
        "wheel_bundle", os.path.join(REPO, "tools", "wheel_bundle.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def mapped():
    with open("/proc/self/maps") as f:
        return {line.split()[-1] for line in f if "/lib" in line}


def test_the_library_and_its_dependencies_come_from_the_wheel():
    assert "RINGFEED_LIB" not in os.environ and "PYTHONPATH" not in os.environ
    assert ringfeed.library_path() == os.path.join(SITE, "ringfeed", "libringfeed.so.0")
    maps = mapped()
    for name in BUNDLED:
        paths = {p for p in maps if os.path.basename(p).startswith(name + "-")
                 or os.path.basename(p).startswith(name + ".")}
        assert paths, f"{name} is not loaded"
        assert all(p.startswith(os.path.join(SITE, "ringfeed.libs") + os.sep)
                   for p in paths), paths


def test_the_metadata_carries_the_version_and_the_licences():
    from importlib import metadata
    md = metadata.metadata("ringfeed")
    assert md["Version"] == ringfeed.__version__ == ringfeed.version()
    # ringfeed's own licence first, then those of what the wheel bundles, as the SBOM says.
    rules = bundle_rules()
    terms = rules.and_terms(md["License-Expression"])
    assert terms[0] == "Apache-2.0"
    (distinfo,) = glob.glob(os.path.join(SITE, "ringfeed-*.dist-info"))
    with open(os.path.join(distinfo, "sboms", "ringfeed.cdx.json")) as f:
        for c in json.load(f)["components"]:
            assert set(rules.and_terms(c["licenses"][0]["expression"])) <= set(terms), c
    files = md.get_all("License-File")
    assert files[0] == "LICENSE" and all(f.startswith("bundled/") for f in files[1:])
    installed = [f for f in metadata.files("ringfeed") if f.name == "LICENSE"]
    assert len(installed) == 1
    with open(os.path.join(REPO, "LICENSE")) as f:
        assert installed[0].read_text() == f.read()
    debian = "/usr/share/common-licenses/Apache-2.0"
    if os.path.exists(debian):
        with open(debian) as f:
            assert installed[0].read_text() == f.read()


def test_every_bundled_library_is_allowed_with_its_licence_and_sbom_entry():
    """Each file in ringfeed.libs/ is one the loader uses (tools/wheel_bundle.py's ALLOWED),
    with a component in the wheel's SBOM (its package, version, licence and this file's
    SHA-256) and its licence text installed; so is each library linked into libringfeed.so.0.
    wheel_test.sh ran the same rules on the wheel file: this is the installed copy."""
    from importlib import metadata
    rules = bundle_rules()
    (distinfo,) = glob.glob(os.path.join(SITE, "ringfeed-*.dist-info"))
    with open(os.path.join(distinfo, "sboms", "ringfeed.cdx.json")) as f:
        bom = json.load(f)
    assert bom["bomFormat"] == "CycloneDX"
    by_file = {rules.prop(c, "file"): c for c in bom["components"]}
    listed = set(metadata.metadata("ringfeed").get_all("License-File"))
    grafted = sorted(os.listdir(os.path.join(SITE, "ringfeed.libs")))
    assert {rules.stem(g) for g in grafted} == set(rules.GRAFTED), grafted
    for name in grafted:
        c = by_file.get(f"ringfeed.libs/{name}")
        assert c, f"{name} has no SBOM component"
        with open(os.path.join(SITE, "ringfeed.libs", name), "rb") as f:
            assert c["hashes"] == [{"alg": "SHA-256", "content": rules.sha256(f.read())}], name
    for where, c in by_file.items():
        s = rules.stem(os.path.basename(where.split(" (")[-1].rstrip(")")))
        assert s in rules.ALLOWED, f"{where} ({c['name']}) is not in the allow-list"
        assert c["licenses"] == [{"expression": rules.ALLOWED[s][1]}]
        assert c["name"] and c["version"] and c["purl"]
        lic = rules.prop(c, "license-file")
        rel = lic.split("/licenses/", 1)[1]
        assert rel in listed
        with open(os.path.join(SITE, lic)) as f:
            assert len(f.read()) > 100, lic
    # The HTTP(S) stack is inside the library, and all of it is accounted for.
    static = {rules.stem(w.split(" (")[-1].rstrip(")")) for w in by_file if w.endswith(".a)")}
    assert {"libcurl", "libnghttp2", "libssl", "libcrypto"} <= static
    with open(ringfeed.library_path(), "rb") as f:
        library = f.read()
    for s, marker in rules.MARKERS.items():
        assert marker not in library or s in static, s


def test_the_commands_are_on_path_and_load_from_the_wheel():
    bin_dir = os.path.dirname(sys.executable)
    for name in COMMANDS:
        assert shutil.which(name) == os.path.join(bin_dir, name), name
        out = subprocess.run([name, "--version"], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, (name, out.stderr)
        assert out.stdout.split() == [name, ringfeed.__version__], out.stdout
        # every library the binary loads is the package's, a grafted one or the system's C/C++
        # runtime (ldd: what the dynamic linker resolves, with the system's copies hidden)
        exe = os.path.join(SITE, "ringfeed", "bin", name)
        ldd = subprocess.run(["ldd", exe], capture_output=True, text=True, check=True).stdout
        for line in ldd.splitlines():
            m = re.match(r"\s*(\S+) => (\S+)", line)
            if not m:
                continue
            lib, path = m.groups()
            assert path != "not", f"{name}: {line.strip()}"
            inside = path.startswith(os.path.join(SITE, "ringfeed"))
            assert inside or re.match(r"lib(c|m|gcc_s|stdc\+\+|z)\.so", lib), f"{name}: {line}"


def run(*cmd):
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, f"{' '.join(cmd)}: exit {out.returncode}\n{out.stdout}\n{out.stderr}"
    return out.stdout


def test_the_commands_make_check_pack_and_read_shards(tmp_path):
    """A Python user's round without a CMake build: ringfeed-gen makes shards, ringfeed-inspect
    decodes and checks them, ringfeed-pack packs a class-folder tree made of their JPEGs, and
    ringfeed-bench reads the packed shards for one epoch on the host."""
    gen = str(tmp_path / "gen" / "train-%04d.tar")
    run("ringfeed-gen", "--output", gen, "--images", "24", "--classes", "3", "--per-shard", "8",
        "--max-side", "64", "--seed", "45", "--quiet")
    made = sorted(glob.glob(str(tmp_path / "gen" / "train-*.tar")))
    assert len(made) == 3
    report = json.loads(run("ringfeed-inspect", "--json", *made).splitlines()[-1])
    assert report["samples"] == 24 and report["problems"] == 0, report

    tree = tmp_path / "tree"
    n = 0
    for path in made:
        with tarfile.open(path) as tf:
            for m in tf:
                if m.name.endswith(".jpg"):
                    cls = tree / f"class{n % 3}"
                    cls.mkdir(parents=True, exist_ok=True)
                    (cls / f"img{n:03d}.jpg").write_bytes(tf.extractfile(m).read())
                    n += 1
    packed = str(tmp_path / "packed" / "part-%02d.tar")
    summary = json.loads(run("ringfeed-pack", "--input", str(tree), "--output", packed,
                             "--quiet", "--json").splitlines()[-1])
    assert summary["ok"] and summary["files"] == n == 24 and summary["bad"] == 0, summary
    shards = sorted(glob.glob(str(tmp_path / "packed" / "part-*.tar")))
    report = json.loads(run("ringfeed-inspect", "--json", *shards).splitlines()[-1])
    assert report["samples"] == 24 and report["problems"] == 0, report

    bench = json.loads(run("ringfeed-bench", "--shards", str(tmp_path / "packed" / "part-*.tar"),
                           "--device", "host", "--batch", "8", "--size", "32", "--epochs", "1",
                           "--threads", "2", "--json").splitlines()[-1])
    assert bench["images"] == 24, bench


@pytest.mark.parametrize("writer", ["ringfeed-gen", "tarfile"])
def test_one_epoch_delivers_every_sample_once_with_its_label(tmp_path, writer):
    pattern = SHARDS if writer == "ringfeed-gen" else rewrite_shards(SHARDS, str(tmp_path))
    want = shard_labels(pattern)
    assert len(want) >= 32
    with ringfeed.Loader(pattern, 8, size=32, device="cpu", decode_threads=2,
                         array_type="numpy") as ld:
        assert labels_once(ld) == want


def servers():
    if not SERVERS:
        pytest.skip("no servers (RINGFEED_WHEEL_SERVERS)")
    with open(SERVERS) as f:
        return dict(line.rstrip("\n").split("=", 1) for line in f if "=" in line)


@pytest.mark.parametrize("scheme", ["http", "https", "s3"])
def test_remote_shards_through_the_wheels_own_libcurl(monkeypatch, scheme):
    """The wheel's libcurl (HTTP and HTTPS only, static, with its own nghttp2 and OpenSSL: no
    system libcurl, libnghttp2, libssl or libcrypto can load here) reads the shards from nginx
    over HTTP/1.1 and HTTPS with HTTP/2, and from moto's S3 with SigV4 signatures."""
    env = servers()
    names = sorted(os.path.basename(p) for p in glob.glob(SHARDS))
    brace = "{%s..%s}" % (names[0][6:12], names[-1][6:12])  # train-NNNNNN.tar
    if scheme == "s3":
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", env["RF_TEST_S3_KEY"])
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", env["RF_TEST_S3_SECRET"])
        monkeypatch.setenv("AWS_REGION", env["RF_TEST_S3_REGION"])
        monkeypatch.setenv("AWS_ENDPOINT_URL_S3", env["RF_TEST_S3_ENDPOINT"])
        url = f"s3://rf-test/train-{brace}.tar"
    else:
        monkeypatch.setenv("SSL_CERT_FILE", env["RF_TEST_CA"])
        url = f"{env['RF_TEST_' + scheme.upper()]}/train-{brace}.tar"
    with ringfeed.Loader(url, 8, size=32, device="cpu", decode_threads=2,
                         array_type="numpy") as ld:
        assert labels_once(ld) == shard_labels(SHARDS)
        st = ld.stats()
    assert st["io_engine"] == "curl" and st["remote_requests"] > 0
    if scheme == "https":  # nghttp2 is in: nginx logged the range GETs as HTTP/2
        with open(os.path.join(env["RF_TEST_STATE"], "nginx-access.log")) as f:
            assert [line for line in f if '"GET /train-' in line and ' HTTP/2.0"' in line]
    assert not [p for p in mapped()
                if re.match(r"lib(curl|nghttp2|ssl|crypto)\b", os.path.basename(p))]
