#!/usr/bin/env python3
"""Copy WebDataset shards and corrupt a fraction of their JPEGs in place (sizes unchanged, so
indexes stay valid): half lose their SOI marker (not a JPEG), half get an EOI marker written
into their entropy data at 5% of the file (corrupt data: libjpeg's "premature end" warning). Deterministic: a
sample is chosen when a hash of its key falls under the fraction. For skip-mode benchmarks.

  python3 tools/corrupt.py --fraction 0.01 SRC_DIR DST_DIR
Prints one JSON line: {"samples": N, "corrupted": K, "not_jpeg": a, "corrupt_data": b}."""
import argparse, hashlib, json, os, shutil, tarfile


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--fraction", type=float, default=0.01)
    a = ap.parse_args()
    os.makedirs(a.dst, exist_ok=True)
    n = bad = not_jpeg = 0
    for name in sorted(os.listdir(a.src)):
        src = os.path.join(a.src, name)
        dst = os.path.join(a.dst, name)
        shutil.copyfile(src, dst)
        if not name.endswith(".tar"):
            continue
        with tarfile.open(src) as tf, open(dst, "r+b") as out:
            for m in tf:
                if not m.isfile() or not m.name.endswith(".jpg"):
                    continue
                n += 1
                h = int.from_bytes(hashlib.sha1(m.name.encode()).digest()[:8], "little")
                if h / 2**64 >= a.fraction:
                    continue
                bad += 1
                if bad % 2:
                    out.seek(m.offset_data)
                    out.write(b"\x00\x00")
                    not_jpeg += 1
                else:
                    out.seek(m.offset_data + max(m.size // 20, 2048))
                    out.write(b"\xff\xd9")
    print(json.dumps({"samples": n, "corrupted": bad, "not_jpeg": not_jpeg,
                      "corrupt_data": bad - not_jpeg}))


if __name__ == "__main__":
    main()
