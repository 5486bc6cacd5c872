"""Standalone client mode (docs/standalone.md) from Python: a real mooncake_client process, and SGLang's
standalone_storage call sequence in two dummy processes -- setup_dummy(required_bytes, 16 MiB, client_addr),
the warm-up put/is_exist/get, register_buffer of the pool, batch_is_exist, batch_put_from and batch_get_into
with alloc_from_mem_pool buffers -- each reading the other's keys byte for byte."""

import os
import socket
import textwrap
import time

import pytest

from conftest import Proc, binary, run_py


def _abstract_listening(port):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect("\0mooncake_client_%d.sock" % port)
        return True
    except OSError:
        return False
    finally:
        s.close()


@pytest.fixture(scope="module")
def real_client(master):
    port = 30000 + os.getpid() % 20000  # names the abstract socket only
    p = Proc([binary("mooncake_client"), "--host=127.0.0.1", "--metadata_server=" + master.metadata,
              "--master_server_address=" + master.addr, "--port=%d" % port, "--global_segment_size=128MB"],
             "mooncake_client")
    end = time.monotonic() + 20
    while not _abstract_listening(port):
        assert p.p.poll() is None and time.monotonic() < end, "mooncake_client did not start:\n" + p.output()
        time.sleep(0.05)
    p.port = port
    yield p
    p.stop()


DUMMY = textwrap.dedent('''
    import ctypes, sys
    from mooncake.store import MooncakeDistributedStore, ReplicateConfig
    me, other, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
    MiB = 1 << 20
    n, size = 8, 256 * 1024
    s = MooncakeDistributedStore()
    required_bytes = n * size * 2
    assert s.setup_dummy(required_bytes, 16 * MiB, "127.0.0.1:%d" % port) == 0
    assert s.get_hostname().startswith("127.0.0.1:"), s.get_hostname()
    # SGLang's warm-up
    wk, wv = "warmup_" + me, bytes(range(256)) * 16
    assert s.put(wk, wv) == 0 and s.is_exist(wk) == 1 and s.get(wk) == wv
    # the host pool lives in the shared memory pool
    pool = s.alloc_from_mem_pool(n * size * 2)
    assert pool != 0 and s.alloc_from_mem_pool(1) == 0  # exactly the required bytes
    assert s.register_buffer(pool, n * size * 2) == 0
    src = [pool + i * size for i in range(n)]
    dst = [pool + (n + i) * size for i in range(n)]
    for i in range(n):
        ctypes.memmove(src[i], bytes([(i * 7 + ord(me[0])) & 255]) * size, size)
    keys = ["%s_%d_k" % (me, i) for i in range(n)]
    assert s.batch_is_exist(keys) == [0] * n
    cfg = ReplicateConfig()
    assert s.batch_put_from(keys, src, [size] * n, cfg) == [0] * n
    assert s.batch_is_exist(keys) == [1] * n
    assert s.batch_put_from([], [], []) == []
    print("put", flush=True)
    sys.stdin.readline()  # the other dummy has written its keys
    okeys = ["%s_%d_k" % (other, i) for i in range(n)]
    assert s.batch_get_into(okeys, dst, [size] * n) == [size] * n
    for i in range(n):
        got = ctypes.string_at(dst[i], size)
        assert got == bytes([(i * 7 + ord(other[0])) & 255]) * size, (i, got[:4])
    # multi-buffer forms: two halves of one object
    halves = [[src[0], src[1]]], [[size // 2, size // 2]]
    assert s.batch_put_from_multi_buffers(["%s_multi" % me], *halves) == [0]
    assert s.batch_get_into_multi_buffers(["%s_multi" % me], [[dst[0], dst[1]]], [[size // 2, size // 2]]) == [size]
    assert ctypes.string_at(dst[0], size // 2) == ctypes.string_at(src[0], size // 2)
    assert ctypes.string_at(dst[1], size // 2) == ctypes.string_at(src[1], size // 2)
    # a buffer outside the pool goes through staging; the result is the same
    heap = ctypes.create_string_buffer(size)
    assert s.get_into(okeys[3], ctypes.addressof(heap), size) == size
    assert heap.raw == bytes([(3 * 7 + ord(other[0])) & 255]) * size
    assert s.get_size(okeys[2]) == size and s.remove("missing_" + me) == -704
    # copying forms through the dummy's staging area
    assert s.put(me + "_empty", b"") < 0 and s.is_exist(me + "_empty") == 0
    assert s.put(me + "_big", b"z" * (16 * MiB + 1)) == -600
    assert s.upsert(wk, b"new value") == 0 and s.get(wk) == b"new value"
    assert s.put_batch([me + "_p1", me + "_p2"], [b"one", b"two" * 1000]) == 0
    assert s.get_batch([me + "_p1", me + "_p2", "nothing"]) == [b"one", b"two" * 1000, b""]
    h = s.get_buffer(me + "_p2")
    assert h is not None and bytes(h) == b"two" * 1000
    assert s.batch_remove([me + "_p1", me + "_p1"], True) == [0, -704]
    # a batch larger than one frame (16 MiB) is sent as several requests
    many = ["%s_%0120d" % (me, i) for i in range(150000)]
    assert s.batch_is_exist(many) == [0] * len(many)
    assert s.health_check() == 0
    print("ok", flush=True)
    s.close()
    assert s.is_exist(keys[0]) == -600 and s.alloc_from_mem_pool(8) == 0
''')


def test_sglang_standalone_sequence(real_client):
    import subprocess
    import sys
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    procs = [subprocess.Popen([sys.executable, "-c", DUMMY, me, other, str(real_client.port)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
             for me, other in (("alpha", "beta"), ("beta", "alpha"))]
    try:
        for p in procs:
            line = p.stdout.readline().strip()
            assert line == b"put", p.stderr.read().decode() if p.poll() is not None else line
        for p in procs:
            p.stdin.write(b"go\n")
            p.stdin.flush()
        for p in procs:
            out, err = p.communicate(timeout=60)
            assert p.returncode == 0 and b"ok" in out, err.decode()
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()


def test_setup_dummy_without_real_client_fails_and_leaves_store_usable(make_store):
    s = make_store()
    assert s.put("still_here", b"v") == 0
    assert s.setup_dummy(1 << 20, 1 << 20, "127.0.0.1:1") == -900  # nobody serves port 1's socket
    assert s.setup_dummy(1 << 20, 1 << 20, "no-port") == -600
    assert s.get("still_here") == b"v" and s.alloc_from_mem_pool(64) == 0


def test_switching_between_real_setup_and_dummy(real_client, master, make_store):
    s = make_store()
    assert s.put("sw_real", b"abc") == 0
    assert s.setup_dummy(1 << 20, 1 << 20, "127.0.0.1:%d" % real_client.port) == 0  # tears the real client down
    assert s.alloc_from_mem_pool(64) != 0
    assert s.put("sw_dummy", b"held by mooncake_client") == 0 and s.get("sw_dummy") == b"held by mooncake_client"
    assert s.setup("127.0.0.1", master.metadata, 16 << 20, 16 << 20, "tcp", "", master.addr) == 0
    assert s.alloc_from_mem_pool(64) == 0  # a real client again
    assert s.get("sw_dummy") == b"held by mooncake_client"  # it lives in mooncake_client's segment


def test_dummy_fails_cleanly_when_real_client_goes(master):
    # last in this file: the SIGKILLed client's segment stays listed until its liveness timeout
    port = 30000 + (os.getpid() + 7919) % 20000
    p = Proc([binary("mooncake_client"), "--host=127.0.0.1", "--metadata_server=" + master.metadata,
              "--master_server_address=" + master.addr, "--port=%d" % port, "--global_segment_size=32MB"],
             "mooncake_client_b")
    end = time.monotonic() + 20
    while not _abstract_listening(port):
        assert p.p.poll() is None and time.monotonic() < end, p.output()
        time.sleep(0.05)
    code = textwrap.dedent('''
        import os, signal, sys
        from mooncake.store import MooncakeDistributedStore
        s = MooncakeDistributedStore()
        assert s.setup_dummy(1 << 20, 1 << 20, "127.0.0.1:%d") == 0
        assert s.put("gone_k", b"x" * 100) == 0
        os.kill(%d, signal.SIGKILL)
        import time; time.sleep(0.3)
        assert s.put("gone_k2", b"y") == -900 and s.get("gone_k") == b"" and s.health_check() == 2
        assert s.batch_is_exist(["a", "b"]) == [-900, -900]
        print("ok")
    ''') % (port, p.p.pid)
    try:
        r = run_py(code)
        assert r.returncode == 0 and b"ok" in r.stdout, r.stderr.decode()
    finally:
        p.stop()

