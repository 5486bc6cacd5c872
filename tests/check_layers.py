#!/usr/bin/env python3
"""A folder is a library is a layer (docs/architecture.md, "Layers").

usage: check_layers.py <source dir> <build dir>/layers.txt

layers.txt is written by src/CMakeLists.txt (mc_layer): one line "<layer>: <deps;...>" per layer, lowest
first. Checks that
  - every folder of src/ with C files is a declared layer, and every layer a folder;
  - a layer depends only on layers declared before it (no cycle, nothing from above);
  - every #include "x/..." in src/<layer>/ names the layer itself, a declared dependency, or the public
    headers (mooncake/); <...> includes are system headers;
  - the public headers include nothing but public headers and system headers.
Prints every violation; exit 1 when there is one."""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def main():
    src_root, layers_file = sys.argv[1], sys.argv[2]
    layers, order = {}, []
    with open(layers_file) as f:
        for line in f:
            if not line.strip():
                continue
            name, deps = line.split(":", 1)
            layers[name.strip()] = [d for d in deps.strip().split(";") if d]
            order.append(name.strip())
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
    pub = os.path.join(src_root, "include", "mooncake")
    for fn in sorted(os.listdir(pub)):
        with open(os.path.join(pub, fn)) as f:
            for inc in INCLUDE.findall(f.read()):
                checked += 1
                if not inc.startswith("mooncake/"):
                    bad.append('include/mooncake/%s includes "%s": a public header includes only public headers'
                               % (fn, inc))
    for b in bad:
        print("LAYER VIOLATION:", b)
    print("%d layers, %d includes checked, %d violations" % (len(order), checked, len(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
