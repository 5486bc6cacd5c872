"""mooncake.engine.TransferEngine (docs/python.md, "What is there"): names, failure values before initialize,
registration codes, sync/async transfers and upstream's engine test pattern (random small
write_bytes_to_buffer / transfer_sync_write / transfer_sync_read / read_bytes_from_buffer rounds; 100-entry
batch sync and async transfers checked with get_batch_transfer_status)."""

import json
import random
import time

import numpy as np
import pytest

from mooncake import engine as me
from mooncake.engine import TransferEngine, TransferNotify, TransferOpcode


def test_names():
    assert me.Read is TransferOpcode.Read == 0 and me.Write == TransferOpcode.Write == 1
    assert TransferEngine.TransferOpcode is TransferOpcode
    n = TransferNotify("a", "b")
    assert (n.name, n.msg) == ("a", "b") and TransferNotify().name == ""
    for f in ("SUPPORT_CUDA", "SUPPORT_EFA", "SUPPORT_HIP", "SUPPORT_MNNVL", "SUPPORT_MUSA", "SUPPORT_INTRA_NVLINK"):
        assert getattr(me, f) is False
    assert me.InnerTransferEngine


def test_not_initialized():
    e = TransferEngine()
    assert e.get_rpc_port() == -1 and e.register_memory(4096, 10) == -1 and e.unregister_memory(4096) == -1
    assert e.transfer_sync_write("x", 1, 2, 3) == -1 and e.batch_transfer_sync_read("x", [1], [2], [3]) == -1
    assert e.batch_transfer_async_write("x", [1], [2], [3]) == 0 and e.transfer_submit_write("x", 1, 2, 3) == 0
    assert e.get_batch_transfer_status([1]) == -1 and e.transfer_check_status(1) == -1
    assert e.allocate_managed_buffer(100) == 0 and e.get_first_buffer_address("x") == 0
    assert e.get_notifies() == [] and e.send_probe("x") == -1 and e.get_engine_ptr() == 0
    assert e.get_engine() is None and e.batch_register_memory([1], [1]) == -1


@pytest.fixture
def pair():
    a, b = TransferEngine(), TransferEngine()
    assert a.initialize("127.0.0.1", "P2PHANDSHAKE", "tcp", "") == 0
    assert b.initialize_ext("127.0.0.1", "P2PHANDSHAKE", "tcp", "", "p2p") == 0
    yield a, b


def session(e):
    return "127.0.0.1:%d" % e.get_rpc_port()


def test_registration_codes(pair):
    a, _ = pair
    buf = np.zeros(16384, dtype=np.uint8)
    p = buf.ctypes.data
    assert a.register_memory(p, 0) == -1
    assert a.register_memory(p, 8192) == 0 and a.register_memory(p + 10, 10) == -7
    assert a.register_memory(p + 8192, 4096, "cpu:0") == 0  # adjacent
    assert a.unregister_memory(p + 1) == -3 and a.unregister_memory(p) == 0
    assert a.batch_register_memory([p, p + 100], [200, 200]) == -7  # overlap within the list: nothing registered
    assert a.batch_register_memory([p], [1, 2]) == -1
    assert a.batch_register_memory([p, p + 4096], [4096, 4096]) == 0
    assert a.batch_unregister_memory([p, p + 4096, p + 8192]) == 0
    with pytest.raises(TypeError):
        a.register_memory(-1, 10)


def test_upstream_engine_pattern(pair):
    target, init = pair
    tbuf = target.allocate_managed_buffer(64 << 20)
    ibuf = init.allocate_managed_buffer(1 << 20)
    assert tbuf and ibuf and session(target) == target.get_session_id()
    peer = session(target)
    rng = random.Random(7)
    for _ in range(200):
        n = rng.randint(16, 256)
        off = rng.randrange(0, (64 << 20) - n)
        data = bytes(rng.getrandbits(8) for _ in range(n))
        assert init.write_bytes_to_buffer(ibuf, data, n) == 0
        assert init.transfer_sync_write(peer, ibuf, tbuf + off, n) == 0
        assert target.read_bytes_from_buffer(tbuf + off, n) == data
        assert init.write_bytes_to_buffer(ibuf, b"\0" * n, n) == 0
        assert init.transfer_sync_read(peer, ibuf, tbuf + off, n) == 0
        assert init.read_bytes_from_buffer(ibuf, n) == data
    # 100-entry batches, sync and async, each entry 4 KiB
    n, sz = 100, 4096
    src = [ibuf + i * sz for i in range(n)]
    dst = [tbuf + i * sz for i in range(n)]
    payload = bytes(rng.getrandbits(8) for _ in range(n * sz))
    init.write_bytes_to_buffer(ibuf, payload, len(payload))
    assert init.batch_transfer_sync_write(peer, src, dst, [sz] * n) == 0
    assert target.read_bytes_from_buffer(tbuf, n * sz) == payload
    init.write_bytes_to_buffer(ibuf, b"\0" * (n * sz), n * sz)
    assert init.batch_transfer_sync_read(peer, src, dst, [sz] * n) == 0
    assert init.read_bytes_from_buffer(ibuf, n * sz) == payload
    ids = [init.batch_transfer_async_write(peer, src, [d + (8 << 20) for d in dst], [sz] * n),
           init.batch_transfer_async_read(peer, src, dst, [sz] * n),
           init.batch_transfer_async(peer, src, dst, [sz] * n, TransferOpcode.Write)]
    assert all(ids) and init.get_batch_transfer_status(ids) == 0
    assert target.read_bytes_from_buffer(tbuf + (8 << 20), n * sz) == payload
    bid = init.transfer_submit_write(peer, ibuf, tbuf, 64)
    st = 0
    for _ in range(1000):
        st = init.transfer_check_status(bid)
        if st:
            break
        time.sleep(0.005)
    assert st == 1
    assert init.transfer_sync_write(peer, ibuf, 12345, 8) == -1  # outside the peer's registered memory
    assert init.free_managed_buffer(ibuf, 1 << 20) == 0


def test_rdma_protocol_falls_back():
    """initialize(..., "rdma", device) on a host with no RDMA device: the engine installs tcp (logged and counted,
    docs/transfer-engine.md, "Path choice") and works; the RDMA guest runs the same call on rxe0 over rdma
    (tests/rdma_guest_store.py)."""
    a, b = TransferEngine(), TransferEngine()
    assert a.initialize("127.0.0.1", "P2PHANDSHAKE", "rdma", "mlx5_0") == 0
    assert b.initialize("127.0.0.1", "P2PHANDSHAKE", "rdma", "") == 0
    tbuf, ibuf = b.allocate_managed_buffer(1 << 20), a.allocate_managed_buffer(1 << 20)
    assert a.write_bytes_to_buffer(ibuf, b"rdma-or-tcp", 11) == 0
    assert a.transfer_sync_write(session(b), ibuf, tbuf, 11) == 0
    assert b.read_bytes_from_buffer(tbuf, 11) == b"rdma-or-tcp"


def test_local_topology(tmp_path):
    """get_local_topology: upstream's NIC priority matrix of the RDMA devices found (docs/python.md, "Topology"),
    read from a sysfs tree: here a fake one with two NUMA nodes, and this host's."""
    ib = tmp_path / "class" / "infiniband"
    for dev, node in (("mlx5_0", "1"), ("mlx5_1", "0"), ("rxe0", None)):
        (ib / dev / "device").mkdir(parents=True)
        if node is not None:
            (ib / dev / "device" / "numa_node").write_text(node + "\n")
    for n in ("node0", "node1", "possible"):
        (tmp_path / "devices" / "system" / "node" / n).mkdir(parents=True)
    assert me._topology("", str(tmp_path)) == {"cpu:0": [["mlx5_1", "rxe0"], ["mlx5_0"]],
                                               "cpu:1": [["mlx5_0"], ["mlx5_1", "rxe0"]]}
    assert me._topology("mlx5_0, nope", str(tmp_path)) == {"cpu:0": [[], ["mlx5_0"]], "cpu:1": [["mlx5_0"], []]}
    assert me._topology("", str(tmp_path / "none")) == {}
    e = TransferEngine()
    assert json.loads(e.get_local_topology()) == me._topology("")  # works before initialize, too
    assert json.loads(e.get_local_topology("mlx5_0")) == me._topology("mlx5_0")
    with pytest.raises(TypeError):
        e.get_local_topology(3)
