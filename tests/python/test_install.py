"""Installation without network: `pip install --no-index --no-build-isolation .` into a fresh virtual
environment (with the system site packages: Debian's setuptools), reusing the test build through
MC_BUILD_DIR; and `cmake --install` into a prefix. Each must give an importable package and the binaries
mooncake_master, mooncake_http_metadata_server, transfer_engine_bench and mooncake_client in its bin directory."""

import os
import subprocess
import sys
import tempfile

import pytest

from conftest import REPO

BUILD = os.environ.get("MC_BUILD_DIR", os.path.join(REPO, "build"))
BINARIES = ["mooncake_master", "mooncake_http_metadata_server", "transfer_engine_bench", "mooncake_client"]
CHECK = ("import mooncake, mooncake.store, mooncake.engine, os\n"
         "s = mooncake.store.MooncakeDistributedStore(); assert s.health_check() == 1\n"
         "assert mooncake.engine.TransferEngine().get_rpc_port() == -1\n"
         "print(os.path.dirname(mooncake.__file__))")


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "PIP_INDEX_URL")}
    env.update(extra)
    return env


def check_bin_dir(bindir, env):
    for b in BINARIES:
        r = subprocess.run([os.path.join(bindir, b), "--help"], capture_output=True, timeout=30, env=env)
        assert r.returncode == 0, (b, r.stderr.decode())
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
