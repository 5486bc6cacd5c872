#!/usr/bin/env python3
"""The shared libraries export their public headers and nothing else (docs/architecture.md, "Versions
and symbols").

usage: check_exports.py <source dir> <build dir>

Checks, with nm and readelf (binutils):
  - `nm -D --defined-only` of libmooncake_te.so lists exactly the MC_API names of transfer_engine.h and
    runtime.h, that of libmooncake_store.so exactly those of store.h and store_errors.h, and that of
    libmooncake_p2p.so exactly those of p2p_store.h;
  - libmooncake_store.so and libmooncake_p2p.so hold no code of the engine layer nor the runtime (common/log.c,
    common/lifecycle.c): it calls them in libmooncake_te, so a process has one instance of their state;
  - each library's SONAME is libmooncake_<name>.so.<MOONCAKE_VERSION_MAJOR>, and the file version is
    MOONCAKE_VERSION_STRING;
  - the Python package's __version__ is MOONCAKE_VERSION_STRING.
Exit 1 on any difference (each printed)."""
import os
import re
import subprocess
import sys

LIBS = {
    "mooncake_te": ["transfer_engine.h", "runtime.h"],
    "mooncake_store": ["store.h", "store_errors.h"],
    "mooncake_p2p": ["p2p_store.h"],
}
# MC_API <type words and stars> name(   or   MC_API extern <type> name;
DECL = re.compile(r"MC_API\s+(?:extern\s+)?[\w\s\*]*?\b(\w+)\s*(?:\(|;)")


def header_names(src, headers):
    names = set()
    for h in headers:
        with open(os.path.join(src, "include", "mooncake", h)) as f:
            text = re.sub(r"/\*.*?\*/", "", f.read(), flags=re.S)
        names |= set(DECL.findall(text))
    return names


def nm(args, path):
    out = subprocess.run(["nm"] + args + [path], check=True, capture_output=True, text=True).stdout
    rows = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 2 and len(parts[-2]) == 1:
            rows.append((parts[-2], parts[-1].split("@")[0]))
    return rows


def main():
    src, build = sys.argv[1], sys.argv[2]
    libdir = os.path.join(build, "src")
    with open(os.path.join(src, "include", "mooncake", "version.h")) as f:
        version = re.search(r'#define MOONCAKE_VERSION_STRING "([0-9.]+)"', f.read()).group(1)
    major = version.split(".")[0]
    bad = []
    for lib, headers in LIBS.items():
        path = os.path.join(libdir, "lib%s.so" % lib)
        want = header_names(src, headers)
        got = {n for t, n in nm(["-D", "--defined-only"], path) if t in "TDBRVWi"
               and n not in ("_init", "_fini") and not n.startswith("_")}
        for n in sorted(got - want):
            bad.append("%s exports %s, which its public headers do not declare" % (lib, n))
        for n in sorted(want - got):
            bad.append("%s does not export %s, declared MC_API in %s" % (lib, n, "/".join(headers)))
        dyn = subprocess.run(["readelf", "-d", path], check=True, capture_output=True, text=True).stdout
        soname = re.search(r"\(SONAME\)\s+Library soname: \[([^\]]+)\]", dyn)
        if not soname or soname.group(1) != "lib%s.so.%s" % (lib, major):
            bad.append("%s: SONAME %s, expected lib%s.so.%s" % (lib, soname and soname.group(1), lib, major))
        real = os.path.basename(os.path.realpath(path))
        if real != "lib%s.so.%s" % (lib, version):
            bad.append("%s: file %s, expected lib%s.so.%s" % (lib, real, lib, version))
        print("%s: %d symbols exported, as its headers declare; SONAME %s" % (lib, len(got), soname and soname.group(1)))

    # No engine or runtime code in libmooncake_store: the global names those objects define must be
    # undefined there (resolved in libmooncake_te), not defined, hidden or not.
    engine_and_runtime = set()
    for t, n in nm(["--defined-only"], os.path.join(libdir, "libmc_te.a")):
        if t.isupper():
            engine_and_runtime.add(n)
    common = os.path.join(libdir, "libmc_common.a")
    out = subprocess.run(["nm", "--defined-only", common], check=True, capture_output=True, text=True).stdout
    member = None
    for line in out.splitlines():
        m = re.match(r"^(\S+\.o):$", line)
        if m:
            member = m.group(1)
            continue
        parts = line.split()
        if member in ("log.c.o", "lifecycle.c.o") and len(parts) == 3 and parts[1].isupper():
            engine_and_runtime.add(parts[2])
    for name in ("libmooncake_store.so", "libmooncake_p2p.so"):
        defined = {n for t, n in nm(["--defined-only"], os.path.join(libdir, name))}
        copies = sorted(engine_and_runtime & defined)
        for n in copies:
            bad.append("%s holds its own copy of %s (engine or runtime code)" % (name, n))
        print("%s: none of the %d engine and runtime symbols defined in it" % (name, len(engine_and_runtime))
              if not copies else "%s: %d copies" % (name, len(copies)))

    init = os.path.join(src, "python", "mooncake", "__init__.py")
    with open(init) as f:
        pyver = re.search(r'__version__ = "([^"]+)"', f.read())
    if not pyver or pyver.group(1) != version:
        bad.append("python/mooncake/__init__.py __version__ %s, expected %s" % (pyver and pyver.group(1), version))
    for b in bad:
        print("EXPORT:", b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
