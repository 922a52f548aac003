"""No path of a development machine belongs in the project: code and docs name paths inside
the checkout (or take them as arguments), never a home, a workspace or a fixed name under the
system's temporary folder, which exist on one machine only (train_resnet.py's --anchor
defaulted to a workspace path)."""
import os
import re
import subprocess

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

# An absolute path under a machine's own folders: not preceded by a name, a dot or an
# expansion (build/tmp/x, ./tmp/x and ${DIR}/tmp/x are relative).
MACHINE_PATH = re.compile(
    rb"(?<![\w.}$)])/(?:" + b"|".join([b"work", b"root", b"home", b"Users", b"mnt"]) +
    rb")/[\w.-]+|(?<![\w.}$)])/" + b"tmp" + rb"/[\w.-]+")


def tracked_files():
    try:
        out = subprocess.run(["git", "-C", REPO, "ls-files", "-z"], capture_output=True,
                             check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    return [p.decode() for p in out.split(b"\0") if p]


def test_no_machine_paths_in_code_or_docs():
    hits = []
    itself = os.path.relpath(os.path.abspath(__file__), REPO)  # its examples below
    for rel in tracked_files():
        path = os.path.join(REPO, rel)
        if rel == itself or not os.path.isfile(path):
            continue
        with open(path, "rb") as f:
            data = f.read(1 << 20)
        if b"\0" in data:  # binary (figures)
            continue
        for n, line in enumerate(data.split(b"\n"), 1):
            for m in MACHINE_PATH.finditer(line):
                hits.append(f"{rel}:{n}: {m.group().decode(errors='replace')}")
    assert not hits, "paths of one machine:\n" + "\n".join(hits)


def test_the_pattern_finds_what_it_should():
    for text in (b'default="/work/shared/anchors/x.py"', b"out=${OUT:-/tmp/rf-out}",
                 b"cd /home/me/data", b"-d /tmp/nvj"):
        assert MACHINE_PATH.search(text), text
    for text in (b"build-test/tmp", b"${CMAKE_CURRENT_BINARY_DIR}/tmp/x", b"scratch/perf-data",
                 b"base = \"/tmp\";", b"docs/reliability.md"):
        assert not MACHINE_PATH.search(text), text
