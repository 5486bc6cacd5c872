#!/usr/bin/env python3
"""The environment variables: one list, one table.

Checks that the README's table between the knobs markers is exactly what `mooncake env --markdown` prints
(the list in src/common/knobs.h), and that every MC_* environment variable the code reads by name
(getenv / mc_env_* calls with a literal "MC_..." in src/, tools/ and python/ext/) is in that list.

Usage: check_knobs.py <repository root> <mooncake binary>. Exit 0 when both hold, 1 otherwise (with what
differs); regenerate the README's table with the printed command."""
import os
import re
import subprocess
import sys


def main():
    root, cli = sys.argv[1], sys.argv[2]
    table = subprocess.run([cli, "env", "--markdown"], capture_output=True, text=True, check=True).stdout
    names = set(re.findall(r"^\| `(MC_[A-Z0-9_]+)`", table, re.M))
    readme = open(os.path.join(root, "README.md"), encoding="utf-8").read()
    m = re.search(r"<!-- knobs:begin[^>]*-->\n(.*?)<!-- knobs:end -->", readme, re.S)
    bad = 0
    if not m:
        print("README.md has no knobs:begin / knobs:end markers")
        bad = 1
    elif m.group(1) != table:
        print("README.md's table of environment variables differs from `mooncake env --markdown`;")
        print("replace the lines between the knobs markers with that command's output")
        bad = 1
    read = re.compile(r'(?:getenv|mc_env_[a-z]+)\(\s*"(MC_[A-Z0-9_]+)"')
    for top in ("src", "tools", os.path.join("python", "ext")):
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for f in files:
                if not f.endswith((".c", ".h")):
                    continue
                path = os.path.join(dirpath, f)
                for n, line in enumerate(open(path, encoding="utf-8", errors="replace"), 1):
                    for name in read.findall(line):
                        if name not in names:
                            print("%s:%d: %s is read but not in src/common/knobs.h" % (os.path.relpath(path, root), n, name))
                            bad = 1
    print("%d variables in the list" % len(names))
    return bad


if __name__ == "__main__":
    sys.exit(main())
