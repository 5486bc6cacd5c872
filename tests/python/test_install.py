"""Installation without network: `pip install --no-index --no-build-isolation .` (pyproject.toml, the
setuptools backend) into a fresh virtual environment (with the system site packages: Debian's setuptools),
reusing the test build through MC_BUILD_DIR; and `cmake --install` into a prefix. Each must give an
importable package and the programs mooncake_master, mooncake_http_metadata_server, transfer_engine_bench,
mooncake, mooncake_store_node, mooncake_client and mooncake_p2p in its bin directory. The pip install is the distribution integrations
look up, mooncake-transfer-engine, at a version that orders against upstream's releases
(docs/packaging.md, "Version"). tests/test_packaging.py checks the rest of `cmake --install`."""

import os
import re
import subprocess
import sys
import tempfile

import pytest

from conftest import REPO

BUILD = os.environ.get("MC_BUILD_DIR", os.path.join(REPO, "build"))
BINARIES = ["mooncake_master", "mooncake_http_metadata_server", "transfer_engine_bench", "mooncake",
            "mooncake_store_node", "mooncake_client", "mooncake_p2p"]
CHECK = ("import mooncake, mooncake.store, mooncake.engine, os\n"
         "s = mooncake.store.MooncakeDistributedStore(); assert s.health_check() == 1\n"
         "assert mooncake.engine.TransferEngine().get_rpc_port() == -1\n"
         "print(os.path.dirname(mooncake.__file__))")
DIST = ("import importlib.metadata as md\n"
        "print(md.version('mooncake-transfer-engine'))\n"
        "print(' '.join(e.name for e in md.distribution('mooncake-transfer-engine').entry_points"
        " if e.group == 'console_scripts'))")


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "PIP_INDEX_URL")}
    env.update(extra)
    return env


def expected_version():
    """<upstream release we answer to>+c.<our version>: setup.py's UPSTREAM_API, include/mooncake/version.h."""
    with open(os.path.join(REPO, "setup.py")) as f:
        upstream = re.search(r'^UPSTREAM_API = "([^"]+)"', f.read(), re.M).group(1)
    with open(os.path.join(REPO, "include", "mooncake", "version.h")) as f:
        own = re.search(r'#define MOONCAKE_VERSION_STRING "([0-9.]+)"', f.read()).group(1)
    return upstream, own, "%s+c.%s" % (upstream, own)


def test_version_orders_against_upstream():
    """What integrations do with the version: compare it with upstream's releases (PEP 440)."""
    from packaging.specifiers import SpecifierSet
    from packaging.version import Version
    upstream, own, v = expected_version()
    assert str(Version(v)) == v  # already in normal form: pip reports it as written
    assert Version(v).public == upstream and Version(v).local == "c." + own
    assert Version(v) > Version(upstream) >= Version("0.3.10.post1")  # e.g. SGLang's batch_remove(force=) gate
    rel = Version(upstream).release
    assert Version(v) < Version("%d.%d.%d" % (rel[0], rel[1], rel[2] + 1))  # below upstream's next release
    assert v in SpecifierSet(">=0.3.10.post1") and v in SpecifierSet("==" + upstream)
    # our own releases order among themselves by their version.h numbers
    assert Version("%s+c.0.10.0" % upstream) > Version("%s+c.0.9.0" % upstream)


def check_bin_dir(bindir, env):
    for b in BINARIES:
        r = subprocess.run([os.path.join(bindir, b), "--help"], capture_output=True, timeout=30, env=env)
        assert r.returncode == 0, (b, r.stderr.decode())
        r = subprocess.run([os.path.join(bindir, b), "--version"], capture_output=True, timeout=30, env=env)
        assert r.returncode == 0 and r.stdout.decode().startswith(b + " "), (b, r.stdout, r.stderr)
    r = subprocess.run([os.path.join(bindir, "mooncake_master"), "--help"], capture_output=True, env=env)
    assert b"rpc_port" in r.stdout + r.stderr


def test_pip_install_offline():
    if not os.path.exists(os.path.join(BUILD, "python", "mooncake")):
        pytest.fail("no build at %s (set MC_BUILD_DIR)" % BUILD)
    with tempfile.TemporaryDirectory(prefix="mc_pip_") as d:
        venv = os.path.join(d, "venv")
        subprocess.run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", venv], check=True, timeout=120)
        env = clean_env(MC_BUILD_DIR=BUILD, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
        r = subprocess.run([os.path.join(venv, "bin", "pip"), "install", "--no-index", "--no-build-isolation",
                            "--no-cache-dir", REPO], capture_output=True, timeout=240, env=env, cwd=d)
        assert r.returncode == 0, r.stdout.decode()[-3000:] + r.stderr.decode()[-3000:]
        r = subprocess.run([os.path.join(venv, "bin", "python"), "-c", CHECK], capture_output=True, timeout=60,
                           env=clean_env(), cwd=d)
        assert r.returncode == 0, r.stderr.decode()
        assert r.stdout.decode().strip().startswith(venv)  # the installed copy, not the source tree
        check_bin_dir(os.path.join(venv, "bin"), clean_env())
        # the distribution integrations look up, with its console scripts
        r = subprocess.run([os.path.join(venv, "bin", "python"), "-c", DIST], capture_output=True, timeout=60,
                           env=clean_env(), cwd=d)
        assert r.returncode == 0, r.stderr.decode()
        version, scripts = r.stdout.decode().split("\n")[:2]
        assert version == expected_version()[2]
        assert sorted(scripts.split()) == sorted(BINARIES)


def test_cmake_install_prefix():
    with tempfile.TemporaryDirectory(prefix="mc_prefix_") as prefix:
        subprocess.run(["cmake", "--install", BUILD, "--prefix", prefix], check=True, capture_output=True,
                       timeout=120)
        site = [os.path.join(prefix, "lib", v, s) for v in os.listdir(os.path.join(prefix, "lib"))
                if v.startswith("python") for s in ("dist-packages", "site-packages")]
        site = [s for s in site if os.path.isdir(s)]
        assert site, "no Python site directory under %s/lib" % prefix
        r = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, timeout=60,
                           env=clean_env(PYTHONPATH=site[0]), cwd=prefix)
        assert r.returncode == 0, r.stderr.decode()
        assert r.stdout.decode().strip().startswith(prefix)
        check_bin_dir(os.path.join(prefix, "bin"), clean_env())
