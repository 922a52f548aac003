"""`import ringfeed` loads libringfeed and refuses one that does not match the binding: another
version (a real library whose version string was patched), another struct layout (a binding
whose mirror was edited), or none at all; each in a fresh interpreter, as a user meets it."""
import os
import re
import struct

import pytest

import ringfeed
from ringfeed import _capi as C
from conftest import REPO, run_python


def header_version():
    with open(os.path.join(REPO, "include", "ringfeed.h"), encoding="utf-8") as f:
        return ".".join(C._HEADER_VERSION.search(f.read()).groups())


def test_version_has_one_source():
    # include/ringfeed.h's RF_VERSION_* are the version of the library (rf_version), of the
    # binding (__version__, what import checks against) and of CMake's project(), which reads
    # them (so the library's file is named after them) instead of spelling a number.
    assert ringfeed.__version__ == ringfeed.version() == header_version()
    with open(os.path.join(REPO, "CMakeLists.txt"), encoding="utf-8") as f:
        cmake = f.read()
    assert not re.search(r"project\(ringfeed VERSION [0-9]", cmake)
    assert "RF_VERSION_" in cmake
    real = os.path.realpath(ringfeed.library_path())
    if re.search(r"\.so\.[0-9]+\.[0-9]+\.[0-9]+$", real):  # a build tree's, not the wheel's
        assert real.endswith(".so." + header_version())


def test_import_loads_the_library():
    r = run_python("from ringfeed import _capi; print(_capi._lib is not None, _capi.RF_EINVAL)")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["True", str(C.RF_EINVAL)]


def test_installed_package_is_tested_when_asked():
    # RINGFEED_TEST_INSTALLED=1 (docs/gpu.md): the package pip installed, not the checkout's.
    inside = os.path.abspath(ringfeed.__file__).startswith(os.path.join(REPO, "python") + os.sep)
    assert inside != (os.environ.get("RINGFEED_TEST_INSTALLED") == "1"), ringfeed.__file__


def elf_section(blob, wanted):
    """(file offset, size) of the ELF64 little-endian section named `wanted`."""
    assert blob[:6] == b"\x7fELF\x02\x01", "not an ELF64 little-endian file"
    shoff, = struct.unpack_from("<Q", blob, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", blob, 0x3A)

    def header(i):  # sh_name, sh_offset, sh_size
        f = struct.unpack_from("<IIQQQQ", blob, shoff + i * shentsize)
        return f[0], f[4], f[5]
    names = header(shstrndx)[1]
    for i in range(shnum):
        name, off, size = header(i)
        if blob[names + name:blob.index(b"\0", names + name)] == wanted:
            return off, size
    raise AssertionError(f"no section {wanted!r}")


def other_version(v):
    """A version of v's length that differs from it (its last digit changed)."""
    return v[:-1] + ("8" if v[-1] == "9" else "9")


def library_copy(dest, real, blob):
    """blob written as dest/ringfeed/libringfeed.so.0, beside a link to the ringfeed.libs/
    folder of the library at `real` when it has one (an installed wheel's: its RPATH is
    $ORIGIN/../ringfeed.libs); returns the copy's path."""
    lib = dest / "ringfeed" / "libringfeed.so.0"
    lib.parent.mkdir(parents=True)
    lib.write_bytes(blob)
    bundled = os.path.join(os.path.dirname(os.path.dirname(real)), "ringfeed.libs")
    if os.path.isdir(bundled):
        os.symlink(bundled, dest / "ringfeed.libs")
    return lib


def test_a_library_of_another_version_fails_import(tmp_path):
    real = os.path.realpath(C.library_path())
    blob = bytearray(open(real, "rb").read())
    off, size = elf_section(blob, b".rodata")
    mine, theirs = ringfeed.version().encode(), other_version(ringfeed.version()).encode()
    at = [m.start() + 1 for m in re.finditer(re.escape(b"\0" + mine + b"\0"),
                                             bytes(blob[off:off + size]))]
    assert len(at) == 1, f"{real}: {mine!r} found {len(at)} times in .rodata"
    same = library_copy(tmp_path / "same", real, bytes(blob))
    blob[off + at[0]:off + at[0] + len(mine)] = theirs
    patched = library_copy(tmp_path / "patched", real, bytes(blob))
    # The copy as it was imports (so the failure below is the version's, not the copy's).
    r = run_python("import ringfeed; print(ringfeed.version())", lib=str(same), cwd=tmp_path)
    assert r.returncode == 0 and r.stdout.strip() == mine.decode(), r.stderr
    r = run_python("import ringfeed", lib=str(patched), cwd=tmp_path)
    assert r.returncode != 0
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith(f"ImportError: {patched}: libringfeed {theirs.decode()} does not match "
                           f"the ringfeed Python package {mine.decode()} ("), last
    assert "RINGFEED_LIB" in last and "pip install ." in last, last


def package_copy(dest, edit_capi=lambda text: text):
    """The ringfeed package's .py files copied under dest/ringfeed, _capi.py through
    edit_capi, with the _version.py a wheel carries (this checkout's version); returns dest."""
    src = os.path.dirname(os.path.abspath(ringfeed.__file__))
    pkg = dest / "ringfeed"
    pkg.mkdir(parents=True)
    for name in os.listdir(src):
        if name.endswith(".py") and name != "_version.py":
            text = open(os.path.join(src, name), encoding="utf-8").read()
            (pkg / name).write_text(edit_capi(text) if name == "_capi.py" else text)
    (pkg / "_version.py").write_text(f'__version__ = "{ringfeed.__version__}"\n')
    return dest


def test_a_binding_with_another_layout_fails_import(tmp_path):
    # The library of this checkout under a binding whose RfStats has two uint64 swapped (same
    # size, same offsets in use): what a library built from another commit looks like.
    def swap(text):
        a, b = '("reads", ctypes.c_uint64),', '("read_retries", ctypes.c_uint64),'
        assert text.count(a) == 1 and text.count(b) == 1
        return text.replace(a, "@@").replace(b, a).replace("@@", b)
    root = package_copy(tmp_path / "good")
    r = run_python("import ringfeed", package_root=str(root), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    root = package_copy(tmp_path / "swapped", swap)
    r = run_python("import ringfeed", package_root=str(root), cwd=tmp_path)
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith(f"ImportError: {C.library_path()}: rf_stats does not match the "
                           "binding's RfStats (field 13: ctypes has read_retries@264+8, the "
                           "library reads@264+8)"), last


def test_the_generated_version_file_is_what_import_checks(tmp_path):
    # An installed package's ringfeed/_version.py (written by the wheel build) is the binding's
    # version; one of another release is refused against this library.
    root = package_copy(tmp_path / "p")
    (root / "ringfeed" / "_version.py").write_text('__version__ = "7.7.7"\n')
    r = run_python("import ringfeed", package_root=str(root), cwd=tmp_path)
    last = r.stderr.strip().splitlines()[-1]
    assert f"libringfeed {ringfeed.version()} does not match the ringfeed Python package " \
           "7.7.7" in last, last


def test_a_package_without_version_or_header_fails_import(tmp_path):
    root = package_copy(tmp_path / "p")
    (root / "ringfeed" / "_version.py").unlink()
    r = run_python("import ringfeed", package_root=str(root), cwd=tmp_path)
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: ringfeed: no ringfeed/_version.py"), last
    assert "pip install ." in last, last


def test_no_library_fails_import_saying_where_to_get_one(tmp_path):
    missing = tmp_path / "libringfeed.so.0"
    r = run_python("import ringfeed", lib=str(missing), cwd=tmp_path)
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: cannot load libringfeed: set RINGFEED_LIB"), last
    assert f"Tried: {missing} (" in last, last
