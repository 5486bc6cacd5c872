"""Console entry points of the pip package (pyproject.toml, [project.scripts]): run the binaries shipped in
mooncake/bin."""

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def _run(name):
    path = os.path.join(_HERE, "bin", name)
    if not os.access(path, os.X_OK):
        sys.stderr.write("mooncake: %s is not part of this installation (%s missing)\n" % (name, path))
        sys.exit(127)
    os.execv(path, [name] + sys.argv[1:])


def mooncake_master():
    _run("mooncake_master")


def mooncake_http_metadata_server():
    _run("mooncake_http_metadata_server")


def transfer_engine_bench():
    _run("transfer_engine_bench")


def mooncake_client():
    _run("mooncake_client")


def mooncake():
    _run("mooncake")


def mooncake_store_node():
    _run("mooncake_store_node")


def mooncake_p2p():
    _run("mooncake_p2p")
