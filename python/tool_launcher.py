#!/usr/bin/env python3
"""ringfeed-gen, ringfeed-pack, ringfeed-inspect and ringfeed-bench on PATH, for `pip install .`
and the binary wheel: CMakeLists.txt installs this file under each command's name into the
scripts folder (pip rewrites the first line to the environment's Python), and it runs the binary
of that name in ringfeed/bin/, which finds libringfeed.so.0 and the wheel's grafted libraries
relative to itself (CMakeLists.txt says why the binaries are not in the scripts folder).

The package is looked for on sys.path, the order `import ringfeed` follows, without importing it:
the commands need neither the binding nor numpy, and a binding that fails to load (RINGFEED_LIB
pointing elsewhere) must not stop them. A ringfeed folder without bin/ (a source checkout on
PYTHONPATH) is passed over for the next one."""
import os
import sys


def main():
    name = os.path.basename(__file__)
    for entry in sys.path:
        exe = os.path.join(entry or os.curdir, "ringfeed", "bin", name)
        if os.path.isfile(exe) and os.access(exe, os.X_OK):
            os.execv(exe, [sys.argv[0]] + sys.argv[1:])
    sys.stderr.write(f"{name}: no ringfeed/bin/{name} in any ringfeed package on this Python's "
                     f"path ({sys.executable}): reinstall ringfeed with pip, or build the commands "
                     "with CMake (README.md)\n")
    return 127


if __name__ == "__main__":
    sys.exit(main())
