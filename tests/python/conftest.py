"""Fixtures for the Python package tests: real etcd and mooncake_master processes on free ports (never
mocks), each killed when its fixture ends or when pytest dies (PR_SET_PDEATHSIG). Binaries come from
$MC_TEST_BIN_DIR (default build/tools); the package from $PYTHONPATH (ctest points it at build/python)."""

import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import pytest

from ports import free_port  # noqa: F401  (re-exported for the tests)

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.environ.get("MC_TEST_BIN_DIR", os.path.join(REPO, "build", "tools"))


def port_busy(port):
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def wait_port(port, timeout=15.0, proc=None):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if port_busy(port):
            return True
        if proc is not None and proc.poll() is not None:
            return False
        time.sleep(0.05)
    return False


def _die_with_parent():
    ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class Proc:
    """A child process with its output in a log file."""

    def __init__(self, argv, name, env=None):
        self.dir = tempfile.mkdtemp(prefix="mc_pytest_%s_" % name)
        self.log = os.path.join(self.dir, "log")
        with open(self.log, "wb") as out:
            self.p = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                      preexec_fn=_die_with_parent, env=env)

    def output(self):
        with open(self.log, "rb") as f:
            return f.read().decode(errors="replace")

    def stop(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(5)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait(5)
        shutil.rmtree(self.dir, ignore_errors=True)


def binary(name):
    path = os.path.join(BIN, name)
    assert os.access(path, os.X_OK), "missing binary %s (build first)" % path
    return path


def start_etcd(port=None):
    exe = shutil.which("etcd") or "/usr/bin/etcd"
    assert os.access(exe, os.X_OK), "etcd not installed (scripts/install-deps.sh installs etcd-server)"
    port = port or free_port()
    peer = free_port()
    d = tempfile.mkdtemp(prefix="mc_pytest_etcd_data_")
    client, peer_url = "http://127.0.0.1:%d" % port, "http://127.0.0.1:%d" % peer
    p = Proc([exe, "--name", "t", "--data-dir", d, "--listen-client-urls", client, "--advertise-client-urls", client,
              "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url, "--initial-cluster",
              "t=" + peer_url, "--heartbeat-interval", "20", "--election-timeout", "200", "--log-level", "warn"],
             "etcd")
    p.data_dir = d
    assert wait_port(port, 15, p.p), "etcd did not start:\n" + p.output()
    end = time.monotonic() + 15
    while time.monotonic() < end:  # accepting connections is not the same as having a leader
        try:
            import urllib.request
            if b"true" in urllib.request.urlopen(client + "/health", timeout=1).read():
                break
        except OSError:
            pass
        time.sleep(0.1)
    p.port = port
    return p


class Master:
    def __init__(self, *extra, rpc_port=None, http_metadata=True):
        self.rpc_port = rpc_port or free_port()
        self.meta_port = free_port()
        self.metrics_port = free_port()
        argv = [binary("mooncake_master"), "--rpc_port=%d" % self.rpc_port, "--metrics_port=%d" % self.metrics_port]
        if http_metadata:
            argv += ["--enable_http_metadata_server", "--http_metadata_server_port=%d" % self.meta_port]
        self.proc = Proc(argv + list(extra), "master")
        assert wait_port(self.rpc_port, 15, self.proc.p), "master did not start:\n" + self.proc.output()
        if http_metadata:
            assert wait_port(self.meta_port, 15, self.proc.p)
        self.addr = "127.0.0.1:%d" % self.rpc_port
        self.metadata = "http://127.0.0.1:%d/metadata" % self.meta_port

    def stop(self):
        self.proc.stop()


@pytest.fixture(scope="module")
def master():
    """A master with a 500 ms read lease (as upstream's store tests run it) and the embedded metadata server."""
    m = Master("--default_kv_lease_ttl=500")
    yield m
    m.stop()


@pytest.fixture
def make_store(master):
    """make_store(global_segment_size=64 MiB, local_buffer_size=16 MiB, m=master) -> a READY store."""
    from mooncake.store import MooncakeDistributedStore
    made = []

    def make(gss=64 << 20, lbs=16 << 20, m=None, host="127.0.0.1"):
        m = m or master
        s = MooncakeDistributedStore()
        rc = s.setup(host, m.metadata, gss, lbs, "tcp", "", m.addr)
        assert rc == 0, "setup failed: %d" % rc
        made.append(s)
        return s

    yield make
    for s in made:
        s.close()


def run_py(code, timeout=60, env=None):
    """Runs code in a fresh interpreter (same sys.path); returns CompletedProcess."""
    e = dict(os.environ)
    e["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    if env:
        e.update(env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=timeout, env=e)
