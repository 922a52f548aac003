#!/usr/bin/env python3
"""remote_users.py — rewrite one WebDataset shard the way users write theirs, for ctest
`remote` (tests/test_remote.c): with Python's tarfile (PAX format, as tarfile writes by
default) and with webdataset's TarWriter, the same samples in the same order.

    tests/remote_users.py SOURCE.tar OUT_DIR

writes OUT_DIR/tarfile.tar and OUT_DIR/wds.tar (webdataset 1.x must be importable; without
it only tarfile.tar is written and the script says so on stderr).
"""
import io
import os
import sys
import tarfile


def samples(path):
    """[(key, {ext: bytes})] in archive order, a sample being a run of members of one key."""
    out = []
    with tarfile.open(path) as tar:
        for m in tar:
            if not m.isfile():
                continue
            base = os.path.basename(m.name)
            key = os.path.join(os.path.dirname(m.name), base.split(".", 1)[0])
            ext = base.split(".", 1)[1]
            if not out or out[-1][0] != key:
                out.append((key, {}))
            out[-1][1][ext] = tar.extractfile(m).read()
    return out


def write_tarfile(items, path):
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tar:
        for key, members in items:
            for ext, data in members.items():
                info = tarfile.TarInfo(f"{key}.{ext}")
                info.size = len(data)
                info.mtime = 1700000000
                tar.addfile(info, io.BytesIO(data))


def write_wds(items, path):
    try:
        import webdataset
    except ImportError:
        print("remote_users.py: webdataset not installed: wds.tar not written", file=sys.stderr)
        return
    with webdataset.TarWriter(path) as w:
        for key, members in items:
            w.write({"__key__": key, **members})


def main():
    src, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    items = samples(src)
    write_tarfile(items, os.path.join(out, "tarfile.tar"))
    write_wds(items, os.path.join(out, "wds.tar"))


if __name__ == "__main__":
    main()
