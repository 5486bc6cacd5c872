"""Standalone client mode (docs/standalone.md) from Python: a real mooncake_client process, and SGLang's
standalone_storage call sequence in two dummy processes -- setup_dummy(required_bytes, 16 MiB, client_addr),
the warm-up put/is_exist/get, register_buffer of the pool, batch_is_exist, batch_put_from and batch_get_into
with alloc_from_mem_pool buffers -- each reading the other's keys byte for byte; then the forwarded families
(layer-wise sessions, get_into_ranges, grouped and metadata puts, copy/move tasks, the refused mount calls,
the tensor helpers) between two dummies, and the replica descriptors a dummy gets from the real client."""

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


FORWARDED = textwrap.dedent('''
    import ctypes, sys, time
    from mooncake.store import MooncakeDistributedStore, ReplicateConfig, TaskStatus, TaskType
    me, other, port, holder = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    MiB = 1 << 20
    n, h = 3 * MiB + 5, (3 * MiB + 5) // 2
    s = MooncakeDistributedStore()
    assert s.setup_dummy(16 * MiB, 8 * MiB, "127.0.0.1:%d" % port) == 0
    mine = s.get_hostname()

    def pattern(tag, size):
        return (tag.encode() * (size // len(tag) + 1))[:size]

    pool = s.alloc_from_mem_pool(4 * n)
    assert pool != 0
    heap = ctypes.create_string_buffer(n)
    # a layer-wise put: the first half from the shared pool, the second from the heap (through staging)
    v = pattern(me + "_s", n)
    ctypes.memmove(pool, v[:h], h)
    ctypes.memmove(heap, v[h:], n - h)
    key = me + "_s"
    r = s.batch_put_session_start([key], [n])
    assert r == [0], r
    r = s.batch_put_from_multi_buffer_ranges([key], [[pool, ctypes.addressof(heap)]], [[h, n - h]], [[0, h]])
    assert r == [n], r
    r = s.batch_put_session_end([key])
    assert r == [0], r
    assert s.batch_put_session_start([me + "_r"], [100]) == [0] and s.batch_put_session_revoke([me + "_r"]) == [0]
    assert s.is_exist(me + "_r") == 0
    # grouped batch put and put_from_with_metadata (multi-buffer put)
    cfg = ReplicateConfig()
    cfg.group_ids = ["grp_" + me, "grp_" + me]
    ctypes.memmove(pool + n, pattern(me + "_g", 2 * MiB), 2 * MiB)
    r = s.batch_put_from([me + "_g1", me + "_g2"], [pool + n, pool + n + MiB], [MiB, MiB], cfg)
    assert r == [0, 0], r
    r = s.put_from_with_metadata(me + "_meta", pool + n + 64, pool + n, 1000, 64)
    assert r == 0, r
    # the extra-segment calls: a dummy owns no segment
    assert s.allocate_and_mount_segment(16 * MiB) == {"ret": -1012, "segment_ids": [], "allocated_size": 0}
    assert s.mount_segment("/proc/self/exe", 4096)["ret"] == -1012
    assert s.unmount_segment(["00000000-0000-0000-0000-000000000000"]) == -1012
    # a task onto the real client's segment, from the holder's
    if me == "alpha":
        tid, rc = s.create_move_task("pyfwd_mv", holder, mine)
    else:
        tid, rc = s.create_copy_task("pyfwd_cp", [mine])
    assert rc == 0 and tid != (0, 0), rc
    end = time.time() + 60
    while True:
        r, rc = s.query_task(tid)
        assert rc == 0 and r.id == tid, rc
        if r.status in (TaskStatus.SUCCESS, TaskStatus.FAILED) or time.time() > end:
            break
        time.sleep(0.05)
    assert r.status == TaskStatus.SUCCESS, r.message
    assert r.type == (TaskType.REPLICA_MOVE if me == "alpha" else TaskType.REPLICA_COPY)
    assert s.get("pyfwd_mv" if me == "alpha" else "pyfwd_cp") == pattern("task", MiB)
    assert s.create_copy_task("pyfwd_none", [mine]) == ((0, 0), -704) and s.query_task((1, 2)) == (None, -1400)
    print("put", flush=True)
    sys.stdin.readline()  # the other dummy has written its keys
    okey = other + "_s"
    ov = pattern(okey, n)
    # a layer-wise get of the other's object: into the pool and the heap
    assert s.batch_get_session_start([okey]) == [0]
    ctypes.memset(pool + 2 * n, 0, h)
    ctypes.memset(heap, 0, n)
    assert s.batch_get_into_multi_buffer_ranges([okey], [[pool + 2 * n, ctypes.addressof(heap)]], [[h, n - h]],
                                                [[0, h]]) == [n]
    assert s.batch_get_session_end([okey]) == 0
    assert ctypes.string_at(pool + 2 * n, h) == ov[:h] and ctypes.string_at(heap, n - h) == ov[h:]
    assert s.batch_get_into_multi_buffer_ranges([okey], [[pool]], [[10]], [[0]]) == [-600]  # session ended
    got = s.get_into_ranges([pool + 3 * n], [[okey]], [[[0, 100]]], [[[5, 2 * MiB]]], [[[50, 60]]])
    assert got == [[[50, 60]]], got
    assert ctypes.string_at(pool + 3 * n, 50) == ov[5:55] and ctypes.string_at(pool + 3 * n + 100, 60) == \\
        ov[2 * MiB:2 * MiB + 60]
    og = pattern(other + "_g", 2 * MiB)
    assert s.get_batch([other + "_g1", other + "_g2"]) == [og[:MiB], og[MiB:]]
    assert s.get(other + "_meta") == og[:64] + og[64:1064]
    print("ok", flush=True)
''')


def _two_dummies(script, port, *extra, timeout=120):
    import subprocess
    import sys
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    procs = [subprocess.Popen([sys.executable, "-c", script, me, other, str(port)] + list(extra),
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
             for me, other in (("alpha", "beta"), ("beta", "alpha"))]
    try:
        for p in procs:
            line = p.stdout.readline().strip()
            assert line == b"put", p.communicate(timeout=30)[1].decode()[-3000:] if not line else line
        for p in procs:
            p.stdin.write(b"go\n")
            p.stdin.flush()
        for p in procs:
            out, err = p.communicate(timeout=timeout)
            assert p.returncode == 0 and b"ok" in out, err.decode()
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()


def test_forwarded_sessions_tasks_and_mounts(real_client, make_store):
    """Sessions, grouped and metadata puts, copy/move tasks and the (refused) mount calls from two dummies."""
    from mooncake.store import ReplicateConfig
    holder = make_store(gss=16 << 20)
    cfg = ReplicateConfig()
    cfg.preferred_segment = holder.get_hostname()
    value = (b"task" * (1 << 18))[:1 << 20]
    for k in ("pyfwd_mv", "pyfwd_cp"):
        assert holder.put(k, value, cfg) == 0
    _two_dummies(FORWARDED, real_client.port, holder.get_hostname())
    assert holder.get("pyfwd_mv") == value and holder.get("pyfwd_cp") == value


REPLICAS = textwrap.dedent('''
    import ctypes, json
    from mooncake.store import MooncakeDistributedStore
    s = MooncakeDistributedStore()
    assert s.setup_dummy(8 << 20, 8 << 20, "127.0.0.1:PORT") == 0
    assert s.put("pyrd_copy", b"r" * 5000) == 0
    buf = s.alloc_from_mem_pool(70000)
    ctypes.memset(buf, 7, 70000)
    assert s.batch_put_from(["pyrd_pool"], [buf], [70000]) == [0]
    flat = lambda ds: [[int(d.status), d.get_memory_descriptor().buffer_descriptor.size,
                        d.get_memory_descriptor().buffer_descriptor.buffer_address,
                        d.get_memory_descriptor().buffer_descriptor.transport_endpoint] for d in ds]
    batch = s.batch_get_replica_desc(["pyrd_copy", "pyrd_pool", "pyrd_missing"])
    print(json.dumps({"raw": {k: s._replica_desc(k) for k in ("pyrd_copy", "pyrd_pool", "pyrd_missing")},
                      "single": {k: flat(s.get_replica_desc(k)) for k in ("pyrd_copy", "pyrd_pool", "pyrd_missing")},
                      "batch": {k: flat(v) for k, v in batch.items()}}))
''')


def test_replica_desc_forwarded(real_client, make_store):
    """get_replica_desc / batch_get_replica_desc on a dummy are the real client's answers: the same
    descriptors a real client of the cluster gets for keys put through the dummy, -704 (no descriptors)
    for a missing key."""
    import json
    r = run_py(REPLICAS.replace("PORT", str(real_client.port)))
    assert r.returncode == 0, r.stderr.decode()[-3000:]
    got = json.loads(r.stdout.decode().strip().splitlines()[-1])
    real = make_store(gss=0)
    want = {k: real._replica_desc(k) for k in ("pyrd_copy", "pyrd_pool", "pyrd_missing")}
    assert want["pyrd_missing"] == -704 and got["raw"]["pyrd_missing"] == -704
    for k, size in (("pyrd_copy", 5000), ("pyrd_pool", 70000)):
        assert want[k] and all(st == 3 and sz == size for st, sz, _a, _e, _s in want[k]), want[k]
        assert got["raw"][k] == [list(d) for d in want[k]], (got["raw"][k], want[k])
        flat = [[st, sz, addr, ep] for st, sz, addr, ep, _seg in want[k]]
        assert got["single"][k] == flat and got["batch"][k] == flat
    assert got["single"]["pyrd_missing"] == [] and "pyrd_missing" not in got["batch"]


TENSORS = textwrap.dedent('''
    import ctypes, sys
    import torch
    from mooncake.store import MooncakeDistributedStore
    me, other, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
    s = MooncakeDistributedStore()
    assert s.setup_dummy(64 << 20, 16 << 20, "127.0.0.1:%d" % port) == 0
    g = torch.Generator().manual_seed(len(me))
    t = {"f": torch.randn((3, 5, 7), generator=g), "i": torch.randint(-9, 9, (1000,), generator=g).to(torch.int16)}
    for name, x in t.items():
        assert s.put_tensor("%s_t_%s" % (me, name), x) == 0
    assert s.batch_put_tensor_with_tp([me + "_tp"], [t["f"]], tp_rank=0, tp_size=1) == [0]
    print("put", flush=True)
    sys.stdin.readline()
    og = torch.Generator().manual_seed(len(other))
    ot = {"f": torch.randn((3, 5, 7), generator=og),
          "i": torch.randint(-9, 9, (1000,), generator=og).to(torch.int16)}
    for name, x in ot.items():
        y = s.get_tensor("%s_t_%s" % (other, name))
        assert y is not None and y.dtype == x.dtype and y.shape == x.shape and torch.equal(y, x), name
    buf = s.alloc_from_mem_pool(1 << 20)
    y = s.get_tensor_into("%s_t_f" % other, buf, 1 << 20)
    assert y is not None and torch.equal(y, ot["f"])
    assert torch.equal(s.batch_get_tensor_with_tp([other + "_tp"], tp_rank=0, tp_size=1)[0], ot["f"])
    print("ok", flush=True)
''')


def test_tensors_through_dummies(real_client):
    """The tensor helpers build on put_from / get_into and their batches, which a dummy forwards: tensors
    written by one dummy read back equal in another."""
    pytest.importorskip("torch", reason="python3-torch is not installed (scripts/install-deps.sh installs it)")
    _two_dummies(TENSORS, real_client.port)


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
