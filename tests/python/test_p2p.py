"""mooncake.p2p (docs/p2p-store.md) against our standalone HTTP metadata server and etcd: register, list,
get_replica and get_copy with every byte checked, the error codes and texts, unregister / delete_replica."""
import ctypes

import pytest

from conftest import Proc, binary, start_etcd, wait_port
from ports import free_port
from mooncake import p2p

MIB = 1 << 20


@pytest.fixture(scope="module", params=["http", "etcd"])
def meta(request):
    if request.param == "etcd":
        proc = start_etcd()
        yield "etcd://127.0.0.1:%d" % proc.port
    else:
        port = free_port()
        proc = Proc([binary("mooncake_http_metadata_server"), "--port=%d" % port, "--host=127.0.0.1"], "meta")
        assert wait_port(port, 15, proc.p), proc.output()
        yield "http://127.0.0.1:%d/metadata" % port
    proc.stop()


def node(meta):
    s = p2p.P2PStore(meta, "127.0.0.1:%d" % free_port())
    assert s.ok
    return s


def buf(size, seed):
    b = (ctypes.c_ubyte * size)()
    pattern = bytes((i * 7 + seed) & 0xFF for i in range(4096))
    ctypes.memmove(b, pattern * (size // 4096) + pattern[: size % 4096], size)
    return b


def test_register_fetch_list(meta):
    with node(meta) as a, node(meta) as b:
        assert ":" in a.get_local_server_name()
        src = buf(9 * MIB + 5, 3)
        addr = [ctypes.addressof(src)]
        assert a.register("py/one", addr, [len(src)], 4 * MIB) == 0
        assert a.register("py/one", addr, [len(src)], 4 * MIB) == p2p.PAYLOAD_OPENED
        assert a.register("py/bad", addr, [len(src)], 3 * MIB) == p2p.INVALID_ARGUMENT
        assert b.register("py/one", [ctypes.addressof(buf(MIB, 1))], [MIB]) == p2p.ALREADY_EXISTS
        assert b.list("py/") == [{"Name": "py/one", "MaxShardSize": 4 * MIB, "TotalSize": len(src),
                                  "SizeList": [len(src)]}]
        dst = (ctypes.c_ubyte * len(src))()
        assert b.get_replica("py/none", [ctypes.addressof(dst)], [len(dst)]) == p2p.PAYLOAD_NOT_FOUND
        assert b.get_replica("py/one", [ctypes.addressof(dst)], [len(dst) - 1]) == p2p.INVALID_ARGUMENT
        assert b.get_replica("py/one", [ctypes.addressof(dst)], [len(dst)]) == 0
        assert bytes(dst) == bytes(src)
        assert b.get_replica("py/one", [ctypes.addressof(dst)], [len(dst)]) == p2p.PAYLOAD_OPENED
        assert b.unregister("py/one") == p2p.PAYLOAD_NOT_OPENED
        assert a.delete_replica("py/one") == p2p.PAYLOAD_NOT_OPENED
        assert a.unregister("py/one") == 0
        assert b.delete_replica("py/one") == 0
        assert b.list("py/") == []
        with pytest.raises(TypeError):
            b.get_replica(1, [0], [1])


def test_get_copy(meta):
    """get_copy: the bytes, and this node never holds the payload (docs/p2p-store.md, "Operations")."""
    with node(meta) as a, node(meta) as b:
        src = buf(9 * MIB + 5, 4)
        assert a.register("py/copy", [ctypes.addressof(src)], [len(src)], 4 * MIB) == 0
        dst = (ctypes.c_ubyte * len(src))()
        assert b.get_copy("py/none", [ctypes.addressof(dst)], [len(dst)]) == p2p.PAYLOAD_NOT_FOUND
        assert b.get_copy("py/copy", [ctypes.addressof(dst)], [len(dst) - 1]) == p2p.INVALID_ARGUMENT
        assert b.get_copy("py/copy", [ctypes.addressof(dst)], [len(dst)]) == 0
        assert bytes(dst) == bytes(src)
        ctypes.memset(dst, 0, len(dst))
        assert b.get_copy("py/copy", [ctypes.addressof(dst)], [len(dst)]) == 0  # not held: fetched again
        assert bytes(dst) == bytes(src)
        assert b.delete_replica("py/copy") == p2p.PAYLOAD_NOT_OPENED
        assert a.unregister("py/copy") == 0
        # b was never a holder: the producer's leaving removed the record
        assert b.get_copy("py/copy", [ctypes.addressof(dst)], [len(dst)]) == p2p.PAYLOAD_NOT_FOUND
        with pytest.raises(TypeError):
            b.get_copy(1, [0], [1])


def test_error_texts():
    assert p2p.strerror(p2p.INVALID_ARGUMENT) == "error: invalid argument"
    assert p2p.strerror(p2p.ADDRESS_OVERLAPPED) == "error: address overlapped"
    assert p2p.strerror(p2p.PAYLOAD_OPENED) == "error: payload has been replicated"
    assert p2p.strerror(p2p.PAYLOAD_NOT_OPENED) == "error: payload does not replicated"
    assert p2p.strerror(p2p.PAYLOAD_NOT_FOUND) == "error: payload not found in metadata"
    assert p2p.strerror(p2p.TOO_MANY_RETRIES) == "error: too many retries"
    assert p2p.strerror(p2p.TRANSFER_ENGINE) == "error: transfer engine core"
    assert not p2p.P2PStore("P2PHANDSHAKE", "127.0.0.1:1").ok
