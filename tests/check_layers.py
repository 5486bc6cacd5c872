#!/usr/bin/env python3
"""A folder is a library is a layer (docs/architecture.md, "Layers").

usage: check_layers.py <source dir> <build dir>/layers.txt
       check_layers.py --planted <source dir> <build dir>/layers.txt

layers.txt is written by src/CMakeLists.txt (mc_layer): one line "<layer>: <deps;...> | <forbidden;...>"
per layer, lowest first. Checks that
  - every folder of src/ with C files is a declared layer, and every layer a folder;
  - a layer depends only on layers declared before it (no cycle, nothing from above);
  - every #include "x/..." in src/<layer>/ names the layer itself, a declared dependency, or the public
    headers (mooncake/); <...> includes are system headers;
  - no file of a layer includes a header its line forbids (a header of a dependency the layer must not
    use, e.g. the master core and the RPC server's headers);
  - the public headers include nothing but public headers and system headers.
Prints every violation; exit 1 when there is one.

--planted checks the checker: on a copy of the tree it plants, one at a time, an include of every layer
above or beside each layer (and of each header a layer forbids) into that layer's first C file, and
fails unless every planted include is reported."""
import os
import re
import shutil
import sys
import tempfile

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def read_layers(layers_file):
    layers, forbidden, order = {}, {}, []
    with open(layers_file) as f:
        for line in f:
            if not line.strip():
                continue
            name, rest = line.split(":", 1)
            deps, _, forbid = rest.partition("|")
            layers[name.strip()] = [d for d in deps.strip().split(";") if d]
            forbidden[name.strip()] = [h for h in forbid.strip().split(";") if h]
            order.append(name.strip())
    return layers, forbidden, order


def check(src_root, layers_file):
    layers, forbidden, order = read_layers(layers_file)
    bad = []
    src = os.path.join(src_root, "src")
    folders = sorted(d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d))
                     and any(n.endswith(".c") for n in os.listdir(os.path.join(src, d))))
    for d in folders:
        if d not in layers:
            bad.append("src/%s/ is not a declared layer (mc_layer in src/CMakeLists.txt)" % d)
    for name in order:
        if name not in folders:
            bad.append("layer %s has no folder src/%s/" % (name, name))
        for d in layers[name]:
            if d not in layers or order.index(d) >= order.index(name):
                bad.append("layer %s depends on %s, which is not a layer below it" % (name, d))
    checked = 0
    for name in order:
        folder = os.path.join(src, name)
        if not os.path.isdir(folder):
            continue
        allowed = set(layers[name]) | {name, "mooncake"}
        for fn in sorted(os.listdir(folder)):
            if not fn.endswith((".c", ".h")):
                continue
            with open(os.path.join(folder, fn), encoding="utf-8", errors="replace") as f:
                text = f.read()
            for inc in INCLUDE.findall(text):
                checked += 1
                top = inc.split("/", 1)[0] if "/" in inc else None
                if top is None or top not in allowed:
                    bad.append('src/%s/%s includes "%s": not layer %s nor one of its dependencies (%s)'
                               % (name, fn, inc, name, ", ".join(layers[name]) or "none"))
                elif inc in forbidden[name]:
                    bad.append('src/%s/%s includes "%s", which layer %s must not use'
                               % (name, fn, inc, name))
    pub = os.path.join(src_root, "include", "mooncake")
    for fn in sorted(os.listdir(pub)):
        with open(os.path.join(pub, fn)) as f:
            for inc in INCLUDE.findall(f.read()):
                checked += 1
                if not inc.startswith("mooncake/"):
                    bad.append('include/mooncake/%s includes "%s": a public header includes only public headers'
                               % (fn, inc))
    return bad, len(order), checked


def main():
    bad, nlayers, checked = check(sys.argv[1], sys.argv[2])
    for b in bad:
        print("LAYER VIOLATION:", b)
    print("%d layers, %d includes checked, %d violations" % (nlayers, checked, len(bad)))
    return 1 if bad else 0


def planted():
    """Every upward or sideways include, and every forbidden one, planted in turn must be reported."""
    src_root, layers_file = sys.argv[2], sys.argv[3]
    layers, forbidden, order = read_layers(layers_file)
    base, _, _ = check(src_root, layers_file)
    if base:
        print("the tree itself has violations; run check_layers.py without --planted")
        return 1
    missed, tried = [], 0
    with tempfile.TemporaryDirectory() as tmp:
        for d in ("src", "include"):
            shutil.copytree(os.path.join(src_root, d), os.path.join(tmp, d))
        for i, name in enumerate(order):
            folder = os.path.join(tmp, "src", name)
            victim = os.path.join(folder, sorted(n for n in os.listdir(folder) if n.endswith(".c"))[0])
            with open(victim) as f:
                text = f.read()
            plants = ["%s/planted.h" % other for other in order if other != name and other not in layers[name]]
            plants += forbidden[name]
            for inc in plants:
                tried += 1
                with open(victim, "w") as f:
                    f.write('#include "%s"\n' % inc + text)
                found, _, _ = check(tmp, layers_file)
                if not any('"%s"' % inc in b for b in found):
                    missed.append("src/%s/%s including %s" % (name, os.path.basename(victim), inc))
            with open(victim, "w") as f:
                f.write(text)
    for m in missed:
        print("NOT REPORTED:", m)
    print("%d planted includes, %d not reported" % (tried, len(missed)))
    return 1 if missed or not tried else 0


if __name__ == "__main__":
    sys.exit(planted() if sys.argv[1] == "--planted" else main())
