"""The long-tail (P2) store methods with real behaviour (docs/python.md, "Sessions"): layer-wise put and
get sessions, against a real master and real store clients; byte checks throughout."""
import ctypes
import time

import numpy as np
import pytest

from mooncake.store import MooncakeDistributedStore, ReplicateConfig
from conftest import Master, run_py

LEASE_S = 0.6  # the master's 500 ms lease, plus margin


def addr(a):
    return a.ctypes.data


@pytest.fixture(scope="module")
def p2master():
    """500 ms read leases; an unfinished put may be taken over after 1 s (a dead writer's session)."""
    m = Master("--default_kv_lease_ttl=500", "--put_start_discard_timeout_sec=1")
    yield m
    m.stop()


@pytest.fixture
def store(p2master):
    made = []

    def make(gss=64 << 20):
        s = MooncakeDistributedStore()
        assert s.setup("127.0.0.1", p2master.metadata, gss, 16 << 20, "tcp", "", p2master.addr) == 0
        made.append(s)
        return s

    yield make
    for s in made:
        s.close()


def _data(n, seed):
    return np.random.default_rng(seed).integers(0, 255, n, dtype=np.uint8)


def test_put_session_layer_by_layer(store):
    s, reader = store(), store()
    src = _data(8192, 1)
    assert s.register_buffer(addr(src), src.nbytes) == 0
    keys = ["ps_a", "ps_b"]
    assert s.batch_put_session_start(keys, [4096, 1000]) == [0, 0]
    assert s.is_exist("ps_a") == 0  # started, not readable yet
    # "layer" 1: the first halves; "layer" 2: the rest, in two fragments for ps_a
    assert s.batch_put_from_multi_buffer_ranges(keys, [[addr(src)], [addr(src) + 5000]], [[2048], [500]],
                                                [[0], [0]]) == [2048, 500]
    assert s.batch_put_from_multi_buffer_ranges(
        keys, [[addr(src) + 2048, addr(src) + 3072], [addr(src) + 5500]], [[1024, 1024], [500]],
        [[2048, 3072], [500]]) == [2048, 500]
    assert s.batch_put_session_end(keys) == [0, 0]
    out = np.zeros(4096, dtype=np.uint8)
    assert reader.get_into("ps_a", addr(out), 4096) == 4096 and (out == src[:4096]).all()
    assert reader.get("ps_b") == src[5000:6000].tobytes()
    # the session is gone: writing, ending or revoking it again fails
    assert s.batch_put_from_multi_buffer_ranges(["ps_a"], [[addr(src)]], [[8]], [[0]]) == [-600]
    assert s.batch_put_session_end(["ps_a"]) == [-600] and s.batch_put_session_revoke(["ps_a"]) == [-600]
    # an existing key cannot start (nor a key twice in one batch: the master has it already); bad sizes
    assert s.batch_put_session_start(["ps_a", "ps_c", "ps_c", "ps_d", ""], [10, 10, 10, 0, 5]) == \
        [-705, 0, -705, -600, -600]
    assert s.batch_put_session_start(["ps_c"], [10]) == [-600]  # a session is open for it
    assert s.batch_put_session_start(["x"], [1, 2]) == [-600]
    assert s.batch_put_session_revoke(["ps_c"]) == [0]


def test_put_session_revoke_leaves_nothing(store):
    s, other = store(), store()
    src = _data(4096, 2)
    assert s.register_buffer(addr(src), src.nbytes) == 0
    assert s.batch_put_session_start(["rv_a", "rv_b"], [4096, 4096]) == [0, 0]
    assert s.batch_put_from_multi_buffer_ranges(["rv_a"], [[addr(src)]], [[4096]], [[0]]) == [4096]
    assert s.batch_put_session_revoke(["rv_a", "rv_b", "rv_none"]) == [0, 0, -600]
    assert other.is_exist("rv_a") == 0 and other.get_size("rv_a") == -704 and other.get("rv_a") == b""
    # the key is free again, for anyone
    assert other.put("rv_a", b"fresh") == 0 and s.get("rv_a") == b"fresh"


def test_put_session_ranges_are_checked(store):
    s = store()
    src = _data(4096, 3)
    unreg = _data(4096, 4)
    assert s.register_buffer(addr(src), src.nbytes) == 0
    assert s.batch_put_session_start(["rg"], [1024]) == [0]
    w = s.batch_put_from_multi_buffer_ranges
    assert w(["rg"], [[addr(unreg)]], [[16]], [[0]]) == [-600]  # not registered
    assert w(["rg"], [[addr(src) + 4000]], [[200]], [[0]]) == [-600]  # runs past the registered buffer
    assert w(["rg"], [[addr(src)]], [[16]], [[1020]]) == [-600]  # past the object's end
    assert w(["rg"], [[addr(src)]], [[16]], [[1 << 63]]) == [-600]
    assert w(["rg"], [[0]], [[16]], [[0]]) == [-600]  # null pointer
    assert w(["rg"], [[addr(src)]], [[16, 16]], [[0]]) == [-600]  # rows of different lengths
    assert w(["rg", "nosession"], [[addr(src)], [addr(src)]], [[1024], [4]], [[0], [0]]) == [1024, -600]
    assert w(["rg"], [[addr(src)], [addr(src)]], [[1]], [[0]]) == [-600]  # top-level mismatch
    with pytest.raises(TypeError):
        w(["rg"], [[-1]], [[1]], [[0]])
    assert s.batch_put_session_end(["rg"]) == [0]
    assert s.get("rg") == src[:1024].tobytes()


def test_get_session(store):
    s, reader = store(), store()
    src = _data(10000, 5)
    assert s.put_from is not None and s.register_buffer(addr(src), src.nbytes) == 0
    assert s.put_from("gs_a", addr(src), 10000) == 0 and s.put_from("gs_b", addr(src) + 100, 300) == 0
    dst = np.zeros(10000, dtype=np.uint8)
    unreg = np.zeros(100, dtype=np.uint8)
    assert reader.register_buffer(addr(dst), dst.nbytes) == 0
    assert reader.batch_get_session_start(["gs_a", "gs_b", "gs_none"]) == [0, 0, -704]
    r = reader.batch_get_into_multi_buffer_ranges(
        ["gs_a", "gs_b", "gs_none"], [[addr(dst), addr(dst) + 100], [addr(dst) + 1000], [addr(dst)]],
        [[50, 70], [300], [1]], [[9000, 0], [0], [0]])
    assert r == [120, 300, -600]
    assert (dst[:50] == src[9000:9050]).all() and (dst[100:170] == src[:70]).all()
    assert (dst[1000:1300] == src[100:400]).all()
    g = reader.batch_get_into_multi_buffer_ranges
    assert g(["gs_b"], [[addr(dst)]], [[10]], [[295]]) == [-600]  # past the object's end
    assert g(["gs_b"], [[addr(unreg)]], [[10]], [[0]]) == [-600]  # destination not registered
    assert g(["gs_b"], [[addr(dst) + 9995]], [[10]], [[0]]) == [-600]  # runs past the registered buffer
    assert reader.batch_get_session_end(["gs_b"]) == 0
    assert g(["gs_b"], [[addr(dst)]], [[10]], [[0]]) == [-600]  # ended
    time.sleep(LEASE_S)
    assert g(["gs_a"], [[addr(dst)]], [[10]], [[0]]) == [-707]  # the lookup's lease is over
    assert g(["gs_a"], [[addr(dst)]], [[10]], [[0]]) == [-600]  # and the session went with it
    assert reader.batch_get_session_end(["gs_a", "never"]) == 0


def test_sessions_before_setup_and_after_close(store):
    s = MooncakeDistributedStore()
    assert s.batch_put_session_start(["k"], [1]) == [-600]
    assert s.batch_put_from_multi_buffer_ranges(["k"], [[1]], [[1]], [[0]]) == [-600]
    assert s.batch_put_session_end(["k"]) == [-600] and s.batch_put_session_revoke(["k"]) == [-600]
    assert s.batch_get_session_start(["k"]) == [-600] and s.batch_get_session_end(["k"]) == 0
    assert s.batch_get_into_multi_buffer_ranges(["k"], [[1]], [[1]], [[0]]) == [-600]
    # close() revokes the open put sessions: the key is free at once
    a, b = store(), store()
    assert a.batch_put_session_start(["cl_k"], [64]) == [0]
    a.close()
    assert b.put("cl_k", b"after close") == 0 and b.get("cl_k") == b"after close"


def test_session_of_a_dying_client_is_cleaned_up(p2master, store):
    other = store()
    # the dying client contributes no segment: a dead one would stay listed until the master's liveness
    # timeout, and later tests' puts could be placed on it (-800)
    code = ("import os\nfrom mooncake.store import *\ns = MooncakeDistributedStore()\n"
            "assert s.setup('127.0.0.1', %r, 0, 16 << 20, 'tcp', '', %r) == 0\n"
            "assert s.batch_put_session_start(['dead_k'], [4096]) == [0]\n"
            "os._exit(0)\n") % (p2master.metadata, p2master.addr)
    r = run_py(code)
    assert r.returncode == 0, r.stderr.decode()
    assert other.is_exist("dead_k") == 0  # started, never ended: not readable
    deadline = time.time() + 10
    while other.put("dead_k", b"taken over") != 0 or other.get("dead_k") != b"taken over":
        assert time.time() < deadline, "the abandoned session was never cleaned up"
        time.sleep(0.2)
    assert other.get_size("dead_k") == len(b"taken over")


def test_put_from_with_metadata(store):
    s, reader = store(), store()
    data, meta = _data(3000, 6), _data(100, 7)
    assert s.register_buffer(addr(data), data.nbytes) == 0 and s.register_buffer(addr(meta), meta.nbytes) == 0
    assert s.put_from_with_metadata("pm_k", addr(data), addr(meta), 3000, 100) == 0
    assert reader.get("pm_k") == meta.tobytes() + data.tobytes()  # metadata first, as upstream
    assert s.put_from_with_metadata("pm_k", addr(data), addr(meta), 10, 10) == 0  # exists: kept
    assert reader.get_size("pm_k") == 3100
    assert s.put_from_with_metadata("pm_zero", addr(data), addr(meta), 0, 100) == 0 and s.is_exist("pm_zero") == 0
    assert s.put_from_with_metadata("pm_bad", 0, addr(meta), 10, 10) == 600  # failure: the positive code
    cfg = ReplicateConfig()
    cfg.prefer_alloc_in_same_node = True
    assert s.put_from_with_metadata("pm_bad", addr(data), addr(meta), 10, 10, cfg) == -1
    assert MooncakeDistributedStore().put_from_with_metadata("pm_k", addr(data), addr(meta), 1, 1) == -1
    with pytest.raises(TypeError):
        s.put_from_with_metadata("pm_k", -1, 0, 1, 1)


# ------------------------------------------------------------------ upstream's names
# The names upstream's bindings define (its store and transfer-engine pybind modules, read from its
# sources): ours must have every one. Data, written out so a change on either side shows here.
UPSTREAM_STORE_METHODS = {
    "_get_pyclient_capsule", "alloc_from_mem_pool", "allocate_and_mount_segment", "batch_get_buffer",
    "batch_get_into", "batch_get_into_multi_buffer_ranges", "batch_get_into_multi_buffers",
    "batch_get_replica_desc", "batch_get_session_end", "batch_get_session_start", "batch_get_tensor",
    "batch_get_tensor_into", "batch_get_tensor_into_cuda", "batch_get_tensor_with_parallelism",
    "batch_get_tensor_with_parallelism_into", "batch_get_tensor_with_tp", "batch_get_tensor_with_tp_into",
    "batch_is_exist", "batch_pub_tensor", "batch_pub_tensor_with_tp", "batch_put_from",
    "batch_put_from_multi_buffer_ranges", "batch_put_from_multi_buffers", "batch_put_session_end",
    "batch_put_session_revoke", "batch_put_session_start", "batch_put_tensor", "batch_put_tensor_from",
    "batch_put_tensor_with_parallelism", "batch_put_tensor_with_parallelism_from", "batch_put_tensor_with_tp",
    "batch_put_tensor_with_tp_from", "batch_remove", "batch_replica_clear", "batch_upsert_from",
    "batch_upsert_pub_tensor", "batch_upsert_tensor", "batch_upsert_tensor_from",
    "batch_upsert_tensor_with_parallelism", "batch_upsert_tensor_with_parallelism_from", "close",
    "create_copy_task", "create_move_task", "get", "get_batch", "get_buffer", "get_hostname", "get_into",
    "get_into_ranges", "get_offload_rpc_read_count", "get_replica_desc", "get_size", "get_tensor",
    "get_tensor_into", "get_tensor_into_cuda", "get_tensor_with_parallelism", "get_tensor_with_parallelism_into",
    "get_tensor_with_tp", "get_tensor_with_tp_into", "health_check", "init_all", "is_exist",
    "load_tensor_from_safetensor", "mount_segment", "pub_tensor", "pub_tensor_with_tp", "put", "put_batch",
    "put_from", "put_from_with_metadata", "put_parts", "put_tensor", "put_tensor_from",
    "put_tensor_with_parallelism", "put_tensor_with_parallelism_from", "put_tensor_with_tp",
    "put_tensor_with_tp_from", "query_task", "register_buffer", "remove", "remove_all", "remove_by_regex",
    "save_tensor_to_safetensor", "setup", "setup_dummy", "unmount_and_free_segment", "unmount_local_disk_segment",
    "unmount_segment", "unregister_buffer", "upsert", "upsert_batch", "upsert_from", "upsert_parts",
    "upsert_pub_tensor", "upsert_tensor", "upsert_tensor_from", "upsert_tensor_with_parallelism",
    "upsert_tensor_with_parallelism_from"
}
UPSTREAM_ENGINE_METHODS = {
    "allocate_managed_buffer", "batch_register_memory", "batch_transfer_async", "batch_transfer_async_read",
    "batch_transfer_async_write", "batch_transfer_read_on_cuda", "batch_transfer_sync",
    "batch_transfer_sync_read", "batch_transfer_sync_write", "batch_transfer_write_on_cuda",
    "batch_unregister_memory", "free_managed_buffer", "get_batch_transfer_status", "get_engine", "get_engine_ptr",
    "get_first_buffer_address", "get_local_topology", "get_notifies", "get_rpc_port", "initialize",
    "initialize_ext", "read_bytes_from_buffer", "register_memory", "send_probe", "transfer_check_status",
    "transfer_read_on_cuda", "transfer_submit_write", "transfer_sync", "transfer_sync_read",
    "transfer_sync_write", "transfer_write_on_cuda", "unregister_memory", "warmup_efa_segment",
    "write_bytes_to_buffer"
}
UPSTREAM_STORE_MODULE = {
    "Descriptor", "DiskDescriptor", "MemoryDescriptor", "MooncakeDistributedNoFRegister",
    "MooncakeDistributedStore", "MooncakeHostMemAllocator", "ObjectDataType", "ParallelAxis", "QueryTaskResponse",
    "ReadTarget", "ReplicaDescriptor", "ReplicaStatus", "ReplicateConfig", "SoftPinAction", "TaskStatus",
    "TaskType", "TensorParallelism", "_deserialize_tensor", "_get_pyclient_from_wrapper", "_serialize_tensor",
    "_tensor_metadata_size", "bind_to_numa_node", "get_alloc_func_addr", "get_free_func_addr"
}
UPSTREAM_ENGINE_MODULE = {  # (the RPC names: what upstream's bind_rpc_interface / bind_coro_rpc_interface add)
    "CoroRPCInterface", "RpcInterface", "ReceivedData", "ReceivedTensor", "create_rpc_client", "create_rpc_server",
    "SUPPORT_CUDA", "SUPPORT_EFA", "SUPPORT_HIP", "SUPPORT_INTRA_NVLINK",
    "SUPPORT_MNNVL", "SUPPORT_MUSA", "TransferEngine", "TransferNotify"
}
# Names not built yet (docs/python.md): none.
PENDING = set()


def test_upstream_names_present():
    import mooncake.engine as me
    import mooncake.store as ms
    for have, want in ((ms.MooncakeDistributedStore, UPSTREAM_STORE_METHODS),
                       (me.TransferEngine, UPSTREAM_ENGINE_METHODS), (ms, UPSTREAM_STORE_MODULE),
                       (me, UPSTREAM_ENGINE_MODULE)):
        assert sorted(want - PENDING - set(dir(have))) == [], have


def test_pyclient_capsule(store):
    import ctypes as c
    import mooncake.store as ms
    s = store()
    cap = s._get_pyclient_capsule()
    assert type(cap).__name__ == "PyCapsule" and ms._get_pyclient_from_wrapper(s) is not None
    assert ms._get_pyclient_from_wrapper(object()) is None
    get = c.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = c.c_void_p, [c.py_object, c.c_char_p]
    assert get(cap, b"mooncake_store_t")  # the native handle


def test_extra_segments(tmp_path):
    """mount_segment / allocate_and_mount_segment add segments to a client at runtime; unmount_segment (also
    gracefully) and unmount_and_free_segment take them away (docs/python.md, "Extra segments"). Pure clients
    on a master of their own, so the extra segments are the only place objects can go."""
    m = Master("--default_kv_lease_ttl=500")
    made = []
    try:
        def pure():
            s = MooncakeDistributedStore()
            assert s.setup("127.0.0.1", m.metadata, 0, 16 << 20, "tcp", "", m.addr) == 0
            made.append(s)
            return s
        w, r = pure(), pure()
        v1, v2 = _data(100000, 8).tobytes(), _data(70000, 9).tobytes()
        assert w.put("xs_0", v1) == -200  # nowhere to go
        a = w.allocate_and_mount_segment(4 << 20, "tcp", "cpu:0")
        assert a["ret"] == 0 and len(a["segment_ids"]) == 1 and a["allocated_size"] == 4 << 20
        assert w.put("xs_1", v1) == 0
        assert r.get("xs_1") == v1 and w.get("xs_1") == v1  # a peer's read, and the owner's local copy
        path = tmp_path / "segment.bin"
        path.write_bytes(b"\0" * (4 << 20))
        assert w.mount_segment(str(path), 1 << 20, 4097)["ret"] == -600  # offset not page-aligned
        assert w.mount_segment(str(path), 4 << 20, 4096) == {"ret": -600, "segment_ids": []}  # past the end
        assert w.mount_segment(str(tmp_path / "none"), 1 << 20)["ret"] == -600
        f = w.mount_segment(str(path), 2 << 20, 1 << 20)
        assert f["ret"] == 0 and len(f["segment_ids"]) == 1
        assert w.unmount_and_free_segment(a["segment_ids"]) == 0
        assert r.get("xs_1") == b""  # its only replica was there
        assert w.unmount_segment(a["segment_ids"]) == -101  # already gone
        assert w.put("xs_2", v2) == 0 and r.get("xs_2") == v2
        assert v2 in path.read_bytes()[1 << 20:3 << 20]  # the bytes are in the file's mapped range
        # graceful: readable meanwhile, no new allocations, gone after the grace period
        assert w.unmount_segment(f["segment_ids"], 2) == 0
        assert r.get("xs_2") == v2 and w.put("xs_3", b"x" * 100) == -200
        deadline = time.time() + 10
        while r.is_exist("xs_2") == 1:
            assert time.time() < deadline, "the graceful unmount never happened"
            time.sleep(0.2)
        assert w.unmount_segment(["not-an-id"]) == -101 and w.unmount_local_disk_segment() == -101
        assert w.unmount_and_free_segment(f["segment_ids"]) == -101
        with pytest.raises(TypeError):
            w.mount_segment(None, 10)
        # close() unmounts what is still mounted
        b = w.allocate_and_mount_segment(1 << 20)
        assert b["ret"] == 0 and w.put("xs_4", b"v") == 0 and r.get("xs_4") == b"v"
        w.close()
        assert r.is_exist("xs_4") == 0
        assert w.allocate_and_mount_segment(1 << 20)["ret"] == -600 and w.unmount_local_disk_segment() == -1
    finally:
        for s in made:
            s.close()
        m.stop()


def test_reopen_same_name_in_one_process(p2master, store):
    """A store opened under the explicit name of an earlier store of this process: while that one is up, the
    name is taken (setup fails, the earlier store unharmed); once it is closed, even with the Python object
    still alive, the name is free at once (close tears down synchronously) and the earlier store's objects
    are gone with its segment, as upstream."""
    from conftest import free_port
    name = "127.0.0.1:%d" % free_port()
    other = store()
    a = MooncakeDistributedStore()
    assert a.setup(name, p2master.metadata, 16 << 20, 16 << 20, "tcp", "", p2master.addr) == 0
    cfg = ReplicateConfig()
    cfg.preferred_segment = name
    assert a.put("same_k", b"first", cfg) == 0 and other.get("same_k") == b"first"
    b = MooncakeDistributedStore()
    assert b.setup(name, p2master.metadata, 16 << 20, 16 << 20, "tcp", "", p2master.addr) != 0
    assert a.get("same_k") == b"first" and a.health_check() == 0
    assert a.close() == 0
    c = MooncakeDistributedStore()
    try:
        assert c.setup(name, p2master.metadata, 16 << 20, 16 << 20, "tcp", "", p2master.addr) == 0
        assert c.get_hostname() == name and other.get("same_k") == b""
        assert c.put("same_k", b"second", cfg) == 0 and other.get("same_k") == b"second"
        assert a.health_check() == 1 and a.get("same_k") == b""  # the closed one stays closed
    finally:
        c.close()


# ------------------------------------------------------------------ BufferPool


def test_buffer_pool_leases_are_registered_memory(store):
    import gc
    import mooncake
    from mooncake.buffer_pool import BufferPool
    assert mooncake.BufferPool is mooncake.RegisteredBufferPool is BufferPool
    s, reader = store(), store()
    pool = BufferPool(s, min_size_class=4096, alignment=4096)
    lease = pool.acquire(1234)
    assert lease.size == 1234 and len(lease.buffer) == 1234 and lease.ptr % 64 == 0
    data = _data(1234, 10).tobytes()
    lease.buffer[:] = data
    assert s.put_from("bp_k", lease.ptr, 1234) == 0 and reader.get("bp_k") == data  # zero-copy from the lease
    with pool.acquire(4000) as into:
        assert s.get_into("bp_k", into.ptr, 4000) == 1234 and bytes(into.buffer[:1234]) == data
    first = lease.ptr
    lease.release()
    lease.release()  # idempotent
    again = pool.acquire(2048)  # the same size class: the released block comes back
    assert again.ptr == first
    view = again.buffer
    with pytest.raises(RuntimeError, match="exported views"):
        again.release()
    del view
    gc.collect()
    again.release()
    dropped = pool.acquire(1)
    del dropped  # released by its destructor
    gc.collect()
    big = pool.acquire(3 << 20)  # any size
    assert big.size == 3 << 20
    with pytest.raises(RuntimeError, match="active leases"):
        pool.close()
    big.release()
    pool.close()
    pool.close()
    assert s.is_exist("bp_k") == 1 and s.register_buffer(first, 4096) == 0  # unregistered by close()
    assert s.unregister_buffer(first) == 0


def test_buffer_pool_caps_and_waits(store):
    import threading
    from mooncake.buffer_pool import BufferPool
    s = store()
    with pytest.raises(RuntimeError, match="alignment"):
        BufferPool(s, 1 << 20, alignment=12345)
    pool = BufferPool(s, min_size_class=4096, max_size_class=4096, alignment=4096, max_regions=1,
                      block_on_exhaustion=False)
    lease = pool.acquire(1)
    with pytest.raises(RuntimeError, match="exhausted"):
        pool.acquire(1)
    with pytest.raises(RuntimeError, match="overflow|capacity"):
        pool.acquire((1 << 64) - 1)
    got = []
    waiter = threading.Thread(target=lambda: got.append(pool.acquire(1, block=True, timeout=5)))
    waiter.start()
    time.sleep(0.1)
    lease.release()
    waiter.join(5)
    assert not waiter.is_alive() and got and got[0].ptr
    with pytest.raises(RuntimeError, match="exhausted"):
        pool.acquire(1, block=True, timeout=0.1)
    got[0].release()
    pool.close()
    capped = BufferPool(s, 8192, min_size_class=4096, prewarm_size=4096, prewarm_count=5)
    a, b = capped.acquire(4096), capped.acquire(10)  # prewarmed as far as max_bytes lets it
    with pytest.raises(RuntimeError, match="capacity"):
        capped.acquire(16384)
    a.release(), b.release()
    capped.close()
    unset = MooncakeDistributedStore()
    with pytest.raises(RuntimeError, match="register"):
        BufferPool(unset).acquire(1)
