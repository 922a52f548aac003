#!/usr/bin/env python3
"""What the binary wheel bundles besides ringfeed, with the licence text and an SBOM entry of each
(issue 45): tools/wheel.sh runs `finish` on the repaired wheel, then `check`; tests/wheel_test.sh
runs `check` again and python/tests/test_wheel.py checks the installed copy against ALLOWED.

    wheel_bundle.py finish WHEEL --components TSV [--cmake-cache FILE]
    wheel_bundle.py check WHEEL

finish rewrites WHEEL in place: each library auditwheel grafted into ringfeed.libs/ and each
archive linked statically into libringfeed.so.0 (TSV: tools/wheel_curl.sh's curl, nghttp2 and
OpenSSL; FILE: the CMake cache naming the static CUDA runtime, when the build had CUDA) gets its
copyright file in .dist-info/licenses/bundled/NAME/ (Debian's /usr/share/doc/PACKAGE/copyright of
the package dpkg says owns it, or the toolkit's licence), a License-File line, its licence in
License-Expression, and a component in .dist-info/sboms/ringfeed.cdx.json (CycloneDX 1.5: package,
version, licence, SHA-256 of the file), which replaces auditwheel's SBOM (the same grafted files,
without licences or the static code). A library outside ALLOWED fails it.

check fails on anything bundled that is not in ALLOWED (grafted files, NEEDED entries outside
what manylinux lets a wheel assume, static code found by its marker bytes), and on a bundled
file or archive without its SBOM component, matching hash or licence text."""
import argparse
import base64
import csv
import glob
import hashlib
import io
import json
import os
import re
import subprocess
import sys
import uuid
import zipfile

# Everything the wheel may carry that is not ringfeed's: the name a file starts with, what the
# loader uses it for, and its licence (SPDX, from the Debian copyright file's stanzas for what is
# compiled in). Adding a library means a row here, reviewed like code.
ALLOWED = {
    # grafted into ringfeed.libs/ by auditwheel
    "liburing": ("the io_uring I/O engine",
                 "(LGPL-2.1-or-later OR MIT) AND (GPL-2.0-only WITH Linux-syscall-note OR MIT)"),
    "libjpeg": ("JPEG decode (libjpeg-turbo)", "IJG AND BSD-3-Clause AND Zlib"),
    "libspng": ("PNG decode", "BSD-2-Clause AND libpng-2.0"),
    "libwebp": ("WebP decode", "BSD-3-Clause"),
    # linked into libringfeed.so.0 (tools/wheel_curl.sh, the CUDA build)
    "libcurl": ("http://, https:// and s3:// shards, built for HTTP and HTTPS only", "curl"),
    "libnghttp2": ("HTTP/2 for https:// shards", "MIT"),
    "libssl": ("TLS for https:// and S3 (OpenSSL)", "Apache-2.0"),
    "libcrypto": ("TLS and S3's SigV4 signatures (OpenSSL)", "Apache-2.0"),
    "libcudart_static": ("the CUDA backend: the CUDA runtime, linked statically",
                         "LicenseRef-NVIDIA-Proprietary"),
}
GRAFTED = ("liburing", "libjpeg", "libspng", "libwebp")
# Bytes that only the static code puts into libringfeed.so.0: finding one without the
# component in the SBOM means code is bundled unaccounted for.
MARKERS = {
    "libcurl": b"not supported or disabled in libcurl",  # url.c's refusal of a scheme
    "libnghttp2": b"nghttp2/",       # curl's text for the HTTP/2 library it is built with
    "libcrypto": b"OpenSSL 3.",      # OPENSSL_VERSION_TEXT
    "libssl": b"OpenSSL 3.",
    "libcudart_static": b"libcuda.so.1",  # the driver the static runtime opens
}
# NEEDED entries a manylinux_2_34 wheel may leave to the system (auditwheel's policy); anything
# else must be grafted.
SYSTEM = re.compile(r"^(libc|libm|libdl|librt|libpthread|libgcc_s|libstdc\+\+|libz|"
                    r"ld-linux-x86-64)\.so(\.\d+)*$")
LIBRARY = "ringfeed/libringfeed.so.0"
SBOM = "sboms/ringfeed.cdx.json"
PROP = "ringfeed:"  # the SBOM properties this script writes and reads


def stem(filename):
    """liburing-2f6aaaea.so.2.3 (auditwheel's grafted name) or libssl.a -> liburing, libssl."""
    return re.sub(r"-[0-9a-f]{8}$", "", re.split(r"\.(so|a)(\.|$)", filename)[0])


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def needed(data):
    """The NEEDED entries of an ELF file's bytes (readelf)."""
    import tempfile
    with tempfile.NamedTemporaryFile() as f:
        f.write(data)
        f.flush()
        out = subprocess.run(["readelf", "-d", f.name], capture_output=True, text=True,
                             check=True).stdout
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)


def dpkg_owner(filename):
    """(package, version, copyright path) of the Debian package owning a file named filename
    (its place: /lib or /usr/lib, with or without usrmerge, is whatever dpkg recorded)."""
    out = subprocess.run(["dpkg", "-S", f"*/{filename}"], capture_output=True, text=True)
    owners = {line.split(":")[0] for line in out.stdout.splitlines()
              if line.rstrip().endswith("/" + filename)}
    if len(owners) != 1:
        return None
    pkg = owners.pop()
    version = subprocess.run(["dpkg-query", "-W", "-f=${Version}", pkg], capture_output=True,
                             text=True, check=True).stdout
    return pkg, version, f"/usr/share/doc/{pkg.split(':')[0]}/copyright"


def distro():
    try:
        with open("/etc/os-release") as f:
            return dict(re.findall(r'^(\w+)="?([^"\n]*)"?$', f.read(), re.M)).get("ID", "debian")
    except OSError:
        return "debian"


def purl(pkg, version, arch=None):
    """A Debian package's purl: a binary package of this machine's architecture, or a source."""
    from urllib.parse import quote
    arch = arch or subprocess.run(["dpkg", "--print-architecture"], capture_output=True,
                                  text=True, check=True).stdout.strip()
    return f"pkg:deb/{distro()}/{pkg.split(':')[0]}@{quote(version, safe='')}?arch={arch}"


def cuda_component(cache):
    """The static CUDA runtime the build linked (CMake cache) with its licence text, or None."""
    text = open(cache).read()
    if not re.search(r"^CMAKE_CUDA_COMPILER:\w+=.+$", text, re.M):
        return None
    m = re.search(r"^CUDA_cudart_static_LIBRARY:\w+=(.+)$", text, re.M)
    if not m:
        return None
    archive = os.path.realpath(m.group(1))
    owner = dpkg_owner(os.path.basename(archive))
    if owner and os.path.exists(owner[2]):
        pkg, version, lic = owner
        return dict(stem="libcudart_static", name=pkg, version=version,
                    purl=purl(pkg, version), archives=[archive], licence=lic)
    # An NVIDIA installer's toolkit (EULA.txt) or one assembled from NVIDIA's wheels (a
    # dist-info per component), above lib/ or lib64/ or targets/ARCH/lib.
    root = os.path.dirname(os.path.dirname(archive))
    for up in range(3):
        licence = (glob.glob(os.path.join(root, "EULA.txt")) +
                   glob.glob(os.path.join(root, "dist-info", "nvidia_cuda_runtime-*.dist-info",
                                          "licenses", "*")))
        if licence:
            break
        root = os.path.dirname(root)
    else:
        sys.exit(f"wheel_bundle: no licence text for the CUDA runtime {archive} "
                 "(EULA.txt or an nvidia_cuda_runtime dist-info near it)")
    m = re.search(r"nvidia_cuda_runtime-([^-]+)\.dist-info", licence[0])
    version = m.group(1) if m else json.load(open(os.path.join(root, "version.json")))[
        "cuda_cudart"]["version"]
    return dict(stem="libcudart_static", name="nvidia-cuda-runtime", version=version,
                purl=f"pkg:generic/nvidia/cuda-runtime@{version}", archives=[archive],
                licence=licence[0])


def component(stem_, name, version, purl_, data, where, licence_file):
    why, spdx = ALLOWED[stem_]
    return {
        "type": "library",
        "bom-ref": f"{purl_}#{os.path.basename(where)}",
        "name": name,
        "version": version,
        "purl": purl_,
        "licenses": [{"expression": spdx}],
        "hashes": [{"alg": "SHA-256", "content": sha256(data)}],
        "properties": [
            {"name": PROP + "file", "value": where},
            {"name": PROP + "purpose", "value": why},
            {"name": PROP + "license-file", "value": licence_file},
        ],
    }


def and_terms(expression):
    """The top-level AND terms of an SPDX expression: "A AND (B OR C)" -> ["A", "(B OR C)"]."""
    terms, depth, start = [], 0, 0
    for i, ch in enumerate(expression):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth == 0 and expression.startswith(" AND ", i):
            terms.append(expression[start:i].strip())
            start = i + 5
    terms.append(expression[start:].strip())
    return terms


def prop(comp, key):
    return next((p["value"] for p in comp.get("properties", [])
                 if p["name"] == PROP + key), None)


def record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return [name, f"sha256={digest}", str(len(data))]


def finish(args):
    with zipfile.ZipFile(args.wheel) as z:
        infos = z.infolist()
        files = {i.filename: z.read(i) for i in infos}
    distinfo = next(n.split("/")[0] for n in files if n.endswith(".dist-info/METADATA"))
    components, licences = [], {}

    def add_licence(name, path):
        if not os.path.isfile(path) or os.path.getsize(path) == 0:
            sys.exit(f"wheel_bundle: no licence text for {name} at {path}")
        rel = f"bundled/{name}/{os.path.basename(path)}"
        with open(path, "rb") as f:
            licences[rel] = f.read()
        return rel

    for path in sorted(n for n in files if n.startswith("ringfeed.libs/") and not n.endswith("/")):
        base = os.path.basename(path)
        s = stem(base)
        if s not in ALLOWED or s not in GRAFTED:
            sys.exit(f"wheel_bundle: auditwheel grafted {base}, which is not in ALLOWED: the "
                     "loader does not use it; find what pulls it in (readelf -d)")
        original = re.sub(r"-[0-9a-f]{8}(?=\.so)", "", base)
        owner = dpkg_owner(original)
        if not owner:
            sys.exit(f"wheel_bundle: dpkg knows no single package owning {original}")
        pkg, version, copyright_ = owner
        rel = add_licence(pkg.split(":")[0], copyright_)
        components.append(component(s, pkg.split(":")[0], version, purl(pkg, version),
                                    files[path], path, f"{distinfo}/licenses/{rel}"))

    static = []
    with open(args.components) as f:
        for name, version, archives, copyright_ in csv.reader(f, delimiter="\t"):
            for archive in archives.split():
                owner = dpkg_owner(os.path.basename(archive))
                if owner and os.path.realpath(archive).startswith("/usr/"):
                    pkg, version_, _ = owner
                    static.append(dict(stem=stem(os.path.basename(archive)), name=pkg,
                                       version=version_, purl=purl(pkg, version_),
                                       archives=[archive], licence=copyright_, dir=name))
                else:  # built by tools/wheel_curl.sh from Debian's source package
                    static.append(dict(stem=stem(os.path.basename(archive)), name=name,
                                       version=version, purl=purl(name, version, "source"),
                                       archives=[archive], licence=copyright_, dir=name))
    if args.cmake_cache:
        cuda = cuda_component(args.cmake_cache)
        if cuda:
            cuda["dir"] = "cuda-runtime"
            static.append(cuda)
    for c in static:
        if c["stem"] not in ALLOWED or c["stem"] in GRAFTED:
            sys.exit(f"wheel_bundle: {c['archives'][0]} is not an allowed static library")
        rel = add_licence(c["dir"], c["licence"])
        for archive in c["archives"]:
            with open(archive, "rb") as f:
                data = f.read()
            components.append(component(c["stem"], c["name"], c["version"], c["purl"], data,
                                        f"{LIBRARY} ({os.path.basename(archive)})",
                                        f"{distinfo}/licenses/{rel}"))

    # Metadata: ringfeed's own licence first, then each other term of the bundled ones once.
    meta = files[f"{distinfo}/METADATA"].decode()
    own = re.search(r"^License-Expression: (.+)$", meta, re.M).group(1)
    terms = and_terms(own)
    for t in sorted({t for c in components for t in and_terms(c["licenses"][0]["expression"])}):
        if t not in terms:
            terms.append(t)
    expression = " AND ".join(terms)
    try:
        from packaging.licenses import canonicalize_license_expression
        expression = canonicalize_license_expression(expression)
    except ImportError:
        pass
    meta = re.sub(r"^License-Expression: .+$", f"License-Expression: {expression}", meta,
                  count=1, flags=re.M)
    last = list(re.finditer(r"^License-File: .+\n", meta, re.M))[-1]
    meta = (meta[:last.end()] + "".join(f"License-File: {rel}\n" for rel in sorted(licences)) +
            meta[last.end():])

    name, version = re.search(r"^Name: (.+)$", meta, re.M).group(1), \
        re.search(r"^Version: (.+)$", meta, re.M).group(1)
    me = f"pkg:pypi/{name}@{version}"
    bom = {
        "bomFormat": "CycloneDX",
        "specVersion": "1.5",
        "serialNumber": "urn:uuid:" + str(uuid.uuid5(uuid.NAMESPACE_URL, me + "#" + sha256(
            json.dumps(components, sort_keys=True).encode()))),
        "version": 1,
        "metadata": {
            "tools": [{"name": "tools/wheel_bundle.py"}],
            "component": {"type": "library", "bom-ref": me, "name": name, "version": version,
                          "purl": me, "licenses": [{"expression": own}],
                          "hashes": [{"alg": "SHA-256", "content": sha256(files[LIBRARY])}]},
        },
        "components": components,
        "dependencies": [{"ref": me, "dependsOn": [c["bom-ref"] for c in components]}],
    }

    out = {}
    for i in infos:
        n = i.filename
        if n.startswith(f"{distinfo}/sboms/") or n == f"{distinfo}/RECORD":
            continue  # auditwheel's SBOM is superseded; RECORD is rewritten below
        out[n] = (i, meta.encode() if n == f"{distinfo}/METADATA" else files[n])
    for rel, data in sorted(licences.items()):
        out[f"{distinfo}/licenses/{rel}"] = (None, data)
    out[f"{distinfo}/{SBOM}"] = (None, (json.dumps(bom, indent=2) + "\n").encode())
    record = io.StringIO()
    w = csv.writer(record, lineterminator="\n")
    for n, (_, data) in out.items():
        if not n.endswith("/"):
            w.writerow(record_line(n, data))
    w.writerow([f"{distinfo}/RECORD", "", ""])
    out[f"{distinfo}/RECORD"] = (None, record.getvalue().encode())

    tmp = args.wheel + ".tmp"
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        for n, (info, data) in out.items():
            if info is None:
                info = zipfile.ZipInfo(n, date_time=(1980, 1, 1, 0, 0, 0))
                info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    os.replace(tmp, args.wheel)
    for c in components:
        print(f"bundled: {prop(c, 'file')}  {c['name']} {c['version']}  "
              f"{c['licenses'][0]['expression']}")


def problems(files, distinfo):
    """What is wrong with a wheel's (or an install's) bundling: files maps each path (as in the
    wheel) to a function returning its bytes."""
    errors = []
    meta = files[f"{distinfo}/METADATA"]().decode()
    listed = set(re.findall(r"^License-File: (.+)$", meta, re.M))
    try:
        bom = json.loads(files[f"{distinfo}/{SBOM}"]())
    except KeyError:
        return [f"no {distinfo}/{SBOM}"]
    by_file = {prop(c, "file"): c for c in bom["components"]}
    grafted = sorted(n for n in files if n.startswith("ringfeed.libs/") and not n.endswith("/"))
    for c in bom["components"]:
        where = prop(c, "file")
        s = stem(os.path.basename(where.split(" (")[-1].rstrip(")")))
        if s not in ALLOWED:
            errors.append(f"SBOM component {where} ({c['name']}) is not in the allow-list")
            continue
        if c["licenses"] != [{"expression": ALLOWED[s][1]}]:
            errors.append(f"{where}: licence {c['licenses']} is not {ALLOWED[s][1]}")
        lic = prop(c, "license-file")
        rel = lic[len(f"{distinfo}/licenses/"):] if lic else None
        if lic not in files or not files[lic]().strip() or rel not in listed:
            errors.append(f"{where}: its licence text {lic} is missing, empty or not a "
                          "License-File of the metadata")
        if where in files and c["hashes"] != [{"alg": "SHA-256", "content": sha256(files[where]())}]:
            errors.append(f"{where}: the SBOM's SHA-256 is not the file's")
    for path in grafted:
        if stem(os.path.basename(path)) not in GRAFTED:
            errors.append(f"{path} is bundled but not in the allow-list of grafted libraries")
        if path not in by_file:
            errors.append(f"{path} has no SBOM component")
    # Every ELF file of the package needs only the grafted files (by the names auditwheel gave
    # them), the library and what manylinux lets a wheel assume.
    library = files[LIBRARY]()
    ours = {os.path.basename(p) for p in grafted} | {"libringfeed.so.0"}
    elves = [LIBRARY] + grafted + sorted(n for n in files if n.startswith("ringfeed/bin/")
                                         and not n.endswith("/"))
    for path in elves:
        for n in needed(files[path]()):
            if n not in ours and not SYSTEM.match(n):
                errors.append(f"{path} needs {n}, neither bundled nor a manylinux system "
                              "library")
    linked = {stem(prop(c, "file").split(" (")[-1].rstrip(")")) for c in bom["components"]
              if prop(c, "file").startswith(LIBRARY + " (")}
    for s, marker in MARKERS.items():
        if marker in library and s not in linked:
            errors.append(f"{LIBRARY} holds {s} ({marker!r}) without its SBOM component")
    return errors


def check(args):
    with zipfile.ZipFile(args.wheel) as z:
        names = z.namelist()
        files = {n: (lambda n=n: z.read(n)) for n in names}
        distinfo = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
        errors = problems(files, distinfo)
    for e in errors:
        print(f"wheel_bundle: {e}", file=sys.stderr)
    if errors:
        sys.exit(1)
    print(f"wheel_bundle: {args.wheel}: every bundled library allowed, with its licence text "
          "and SBOM component")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("finish")
    f.add_argument("wheel")
    f.add_argument("--components", required=True)
    f.add_argument("--cmake-cache")
    c = sub.add_parser("check")
    c.add_argument("wheel")
    args = ap.parse_args()
    (finish if args.cmd == "finish" else check)(args)


if __name__ == "__main__":
    main()
