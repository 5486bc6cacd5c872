"""The tensor helpers of MooncakeDistributedStore (docs/python.md, "Tensors") with Debian's python3-torch,
against a real mooncake_master and real store clients: every method round-trips dtype, shape and bytes,
the stored object is upstream's 304-byte header byte for byte, tp and parallelism shards reassemble, hostile
objects are refused, and without torch every name answers with its documented failure value."""

import ctypes
import json
import os
import random
import struct
import types

import numpy as np
import pytest

from conftest import run_py

torch = pytest.importorskip("torch", reason="python3-torch is not installed (scripts/install-deps.sh installs it)")

from mooncake.store import MooncakeDistributedStore, ParallelAxis, ReadTarget, ReplicateConfig  # noqa: E402
from mooncake.store import SoftPinAction, TensorParallelism  # noqa: E402

HDR = 304
DTYPES = [(torch.float32, 0), (torch.float64, 1), (torch.int8, 2), (torch.uint8, 3), (torch.int16, 4),
          (torch.int32, 6), (torch.int64, 8), (torch.bool, 10), (torch.float16, 11), (torch.bfloat16, 12)]
SHAPES = [(), (0,), (5,), (2, 3, 4), (1, 2, 1, 2, 1, 2, 1, 2), (3, 0, 2)]


def raw(t):
    """The tensor's bytes in row-major order."""
    t = t.contiguous()
    return ctypes.string_at(t.data_ptr(), t.numel() * t.element_size()) if t.numel() else b""


def sample(dtype, shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if dtype.is_floating_point:
        return (torch.randn(shape, generator=g) * 100).to(dtype)
    return torch.randint(-100 if dtype != torch.uint8 else 0, 100, shape, generator=g).to(dtype)


def same(a, b):
    return a is not None and a.dtype == b.dtype and tuple(a.shape) == tuple(b.shape) and raw(a) == raw(b)


def header(dtype, gshape, lshape=None, layout=0, axes=(), nbytes=None, offset=HDR, magic=0x4d4f4f4e, version=1,
           hsize=HDR, ndim=None, axis_count=None):
    """Upstream's TensorMetadata, packed field by field at its C offsets (independent of mooncake._tensor)."""
    lshape = gshape if lshape is None else lshape
    esz = {0: 4, 1: 8, 2: 1, 3: 1, 4: 2, 6: 4, 8: 8, 10: 1, 11: 2, 12: 2}.get(dtype, 1)
    if nbytes is None:
        nbytes = int(np.prod(lshape, dtype=np.int64)) * esz if lshape else esz
    b = bytearray(HDR)
    struct.pack_into("<I", b, 0, magic)
    struct.pack_into("<H", b, 4, version)
    struct.pack_into("<H", b, 6, hsize)
    struct.pack_into("<i", b, 8, dtype)
    struct.pack_into("<i", b, 12, len(gshape) if ndim is None else ndim)
    struct.pack_into("<I", b, 16, layout)
    struct.pack_into("<Q", b, 24, offset)
    struct.pack_into("<Q", b, 32, nbytes)
    for i in range(8):
        struct.pack_into("<q", b, 40 + 8 * i, gshape[i] if i < len(gshape) else -1)
        struct.pack_into("<q", b, 104 + 8 * i, lshape[i] if i < len(lshape) else -1)
    struct.pack_into("<I", b, 168, len(axes) if axis_count is None else axis_count)
    for i, (kind, rank, count, split_dim, r0, r1) in enumerate(axes):
        struct.pack_into("<iiiiiiq", b, 176 + 32 * i, kind, i, rank, count, split_dim, r0, r1)
    return bytes(b)


@pytest.fixture
def s(make_store):
    return make_store(lbs=32 << 20)


def buf(n):
    a = np.zeros(n, dtype=np.uint8)
    return a, a.ctypes.data


# ------------------------------------------------------------------ put / get, the object format


def test_header_is_upstreams_layout(s):
    t = torch.arange(6, dtype=torch.int32).reshape(2, 3)
    assert s.put_tensor("hdr", t) == 0
    obj = s.get("hdr")
    assert len(obj) == HDR + 24 and obj[:4] == b"NOOM"
    assert obj[:HDR] == header(6, (2, 3)) and obj[HDR:] == raw(t)


@pytest.mark.parametrize("dtype,code", DTYPES)
def test_put_get_round_trip(s, dtype, code):
    for i, shape in enumerate(SHAPES):
        t = sample(dtype, shape, i)
        k = "rt_%s_%d" % (str(dtype)[6:], i)
        assert s.put_tensor(k, t) == 0, shape
        got = s.get_tensor(k)
        assert same(got, t), (dtype, shape)
        obj = s.get(k)
        assert obj[:HDR] == header(code, shape) and obj[HDR:] == raw(t)


def test_non_contiguous_and_views(s):
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    for k, t in (("nc_t", base.t()), ("nc_step", base[:, ::2]), ("nc_slice", base[1:3, 2:5])):
        assert not t.is_contiguous()
        assert s.put_tensor(k, t) == 0
        assert same(s.get_tensor(k), t.contiguous()) and s.get(k)[HDR:] == raw(t)


def test_larger_than_the_staging_buffer(make_store):
    s = make_store(lbs=1 << 20)
    t = sample(torch.float32, (1 << 20,), 3)  # 4 MiB through a 1 MiB staging buffer
    assert s.put_tensor("big", t) == 0 and same(s.get_tensor("big"), t)
    assert s.put_tensor_with_tp("big", t, tp_size=2) == 0
    assert same(s.get_tensor_with_parallelism("big_tp_1", None), t[1 << 19:])


def test_threads_share_one_store(s):
    import threading
    errors = []

    def worker(n):
        for i in range(15):
            t = sample(torch.float32, (64, 16), 100 * n + i)
            k = "thr_%d_%d" % (n, i)
            if s.put_tensor(k, t) != 0 or not same(s.get_tensor(k), t):
                errors.append(k)
            if s.put_tensor_with_tp(k + "t", t, tp_size=4) != 0 or \
                    not same(s.get_tensor_with_parallelism(k + "t", full_tp(4)), t):
                errors.append(k + " tp")

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []


def test_get_is_an_independent_tensor(s):
    t = torch.ones(4, dtype=torch.int64)
    assert s.put_tensor("indep", t) == 0
    a, b = s.get_tensor("indep"), s.get_tensor("indep")
    a += 5
    assert same(b, t) and same(s.get_tensor("indep"), t)


def test_batch_put_get(s):
    ts = [sample(torch.float16, (3, 5), 1), sample(torch.int8, (7,), 2), sample(torch.bfloat16, (2, 2, 2), 3)]
    keys = ["bt_0", "bt_1", "bt_2"]
    assert s.batch_put_tensor(keys, ts) == [0, 0, 0]
    got = s.batch_get_tensor(keys + ["bt_missing"])
    assert all(same(g, t) for g, t in zip(got, ts)) and got[3] is None
    assert s.batch_put_tensor(["bt_x", "bt_y"], [ts[0], "not a tensor"]) == [0, -600]
    assert same(s.get_tensor("bt_x"), ts[0]) and s.get_tensor("bt_y") is None
    assert s.batch_put_tensor(["a", "b"], [ts[0]]) == [-600, -600]
    assert s.batch_put_tensor([], []) == [] and s.batch_get_tensor([]) == []


def test_put_refuses_what_it_cannot_store(s):
    assert s.put_tensor("bad", None) == -600 and s.put_tensor("bad", b"bytes") == -600
    assert s.put_tensor("bad", torch.zeros(3, dtype=torch.complex64)) == -600
    assert s.put_tensor("bad", torch.empty(3, device="meta")) == -600  # not host memory, no GPU path
    assert s.put_tensor("bad", torch.eye(3).to_sparse()) == -600
    assert s.put_tensor("bad", torch.zeros([1] * 9)) == -600  # the header holds at most 8 dimensions
    assert s.put_tensor_with_tp("bad", torch.zeros([2] * 9), tp_size=2) == -600
    assert s.is_exist("bad") == 0 and s.get_tensor("bad") is None
    assert s.put_tensor("", torch.zeros(2)) == -600


def test_pub_and_upsert(s):
    t1, t2 = sample(torch.float32, (4, 4), 1), sample(torch.float32, (2, 8), 2)
    cfg = ReplicateConfig()
    cfg.with_hard_pin = True
    assert s.pub_tensor("pub", t1, cfg) == 0 and same(s.get_tensor("pub"), t1)
    assert s.pub_tensor("pub_d", t1) == 0 and same(s.get_tensor("pub_d"), t1)
    bad = ReplicateConfig()
    bad.soft_pin_ttl_ms = 1000  # a TTL without ENABLE: the put refuses the config
    assert s.pub_tensor("pub_bad", t1, bad) == -600 and s.batch_pub_tensor(["pub_b1"], [t1], bad) == [-600]
    assert s.batch_pub_tensor(["pub_b1", "pub_b2"], [t1, t2], cfg) == [0, 0]
    assert same(s.get_tensor("pub_b2"), t2)
    # put keeps the first value, upsert replaces it (shape and dtype too)
    assert s.put_tensor("pub", t2) == 0 and same(s.get_tensor("pub"), t1)
    assert s.upsert_tensor("pub", t2) == 0 and same(s.get_tensor("pub"), t2)
    t3 = t2.to(torch.int16)
    assert s.upsert_pub_tensor("pub", t3, cfg) == 0 and same(s.get_tensor("pub"), t3)
    assert s.batch_upsert_tensor(["pub_b1", "pub_new"], [t3, t1]) == [0, 0]
    assert same(s.get_tensor("pub_b1"), t3) and same(s.get_tensor("pub_new"), t1)
    assert s.batch_upsert_pub_tensor(["pub_b2"], [t1], cfg) == [0] and same(s.get_tensor("pub_b2"), t1)
    grouped = ReplicateConfig()
    grouped.group_ids = ["g1", ""]  # one per key, also when a key is written as several shards
    assert s.batch_pub_tensor(["pub_g1", "pub_g2"], [t1, "no"], grouped) == [0, -600]
    assert s.batch_pub_tensor_with_tp(["pub_g3", "pub_g4"], [t1, t2], grouped, tp_size=2) == [0, 0]
    assert same(s.get_tensor_with_parallelism("pub_g4", full_tp(2)), t2)
    assert s.batch_pub_tensor(["pub_g5"], [t1], grouped) == [-600] and s.is_exist("pub_g5") == 0
    on = ReplicateConfig()
    on.soft_pin_action, on.soft_pin_ttl_ms = SoftPinAction.ENABLE, 60000
    assert s.upsert_pub_tensor("pub_b2", t2, on) == 0 and same(s.get_tensor("pub_b2"), t2)


# ------------------------------------------------------------------ into / from a caller's buffer


def test_get_into(s):
    t = sample(torch.float64, (3, 7), 5)
    assert s.put_tensor("into", t) == 0
    a, p = buf(HDR + t.numel() * 8 + 64)
    assert s.register_buffer(p, a.nbytes) == 0
    got = s.get_tensor_into("into", p, a.nbytes)
    assert same(got, t) and got.data_ptr() == p + HDR  # a view of the caller's buffer
    assert a[:HDR].tobytes() == header(1, (3, 7))
    assert s.get_tensor_into("into", p, HDR + 8) is None  # buffer too small
    assert s.get_tensor_into("nothing", p, a.nbytes) is None and s.get_tensor_into("into", 0, 10) is None
    u, q = buf(4096)  # unregistered memory works too (bounced through staging)
    assert same(s.get_tensor_into("into", q, u.nbytes), t)
    ts = [sample(torch.int32, (9,), 1), sample(torch.bool, (2, 3), 2)]
    assert s.batch_put_tensor(["into_a", "into_b"], ts) == [0, 0]
    b1, p1 = buf(1024)
    b2, p2 = buf(1024)
    got = s.batch_get_tensor_into(["into_a", "into_b", "nothing"], [p1, p2, p], [1024, 1024, a.nbytes])
    assert same(got[0], ts[0]) and same(got[1], ts[1]) and got[2] is None
    assert s.batch_get_tensor_into(["into_a"], [p1, p2], [1024]) == [None]
    s.unregister_buffer(p)


def test_put_from(s):
    t = sample(torch.bfloat16, (4, 3), 7)
    obj = header(12, (4, 3)) + raw(t)
    a = np.frombuffer(bytearray(obj), dtype=np.uint8)
    p = a.ctypes.data
    assert s.put_tensor_from("from", p, a.nbytes) == 0 and same(s.get_tensor("from"), t)
    assert s.get("from") == obj
    t2 = sample(torch.bfloat16, (4, 3), 8)
    a2 = np.frombuffer(bytearray(header(12, (4, 3)) + raw(t2)), dtype=np.uint8)
    assert s.upsert_tensor_from("from", a2.ctypes.data, a2.nbytes) == 0 and same(s.get_tensor("from"), t2)
    assert s.put_tensor_from("from_short", p, a.nbytes - 1) == -600  # size does not match the header
    assert s.put_tensor_from("from_short", p, 100) == -600 and s.put_tensor_from("from_null", 0, 400) == -600
    junk = np.frombuffer(bytearray(b"\x00" * HDR + raw(t)), dtype=np.uint8)
    assert s.put_tensor_from("from_junk", junk.ctypes.data, junk.nbytes) == -600 and s.is_exist("from_junk") == 0
    assert s.batch_put_tensor_from(["from_b1", "from_b2", "from_b3"], [p, junk.ctypes.data, a2.ctypes.data],
                                   [a.nbytes, junk.nbytes, a2.nbytes]) == [0, -600, 0]
    assert same(s.get_tensor("from_b1"), t) and same(s.get_tensor("from_b3"), t2)
    assert s.batch_upsert_tensor_from(["from_b1"], [a2.ctypes.data], [a2.nbytes]) == [0]
    assert same(s.get_tensor("from_b1"), t2)
    assert s.batch_put_tensor_from(["x", "y"], [p], [a.nbytes]) == [-600, -600]


# ------------------------------------------------------------------ tensor parallelism


def tp_header(code, gshape, lshape, rank, count, split_dim):
    return header(code, gshape, lshape, 1, [(1, rank, count, split_dim, 0, lshape[split_dim])])


@pytest.mark.parametrize("split_dim", [0, 1, 2])
def test_put_get_with_tp(s, split_dim):
    t = sample(torch.float32, (4, 8, 12), split_dim)
    k = "tp%d" % split_dim
    assert s.put_tensor_with_tp(k, t, tp_rank=0, tp_size=4, split_dim=split_dim) == 0
    assert s.is_exist(k) == 0
    shards = [s.get_tensor_with_tp(k, r, 4, split_dim) for r in range(4)]
    assert same(torch.cat(shards, split_dim), t)
    for r, sh in enumerate(shards):
        ref = torch.chunk(t, 4, split_dim)[r]
        assert same(sh, ref.contiguous())
        assert s.get("%s_tp_%d" % (k, r))[:HDR] == tp_header(0, t.shape, ref.shape, r, 4, split_dim)
    # a full read of the shard set (put_tensor_with_tp writes no manifest: the set is found from rank 0's header)
    assert same(s.get_tensor_with_parallelism(k, full_tp(4, split_dim)), t)
    assert s.is_exist(k + "__parallelism_manifest") == 0


def test_tp_edge_cases(s):
    t = sample(torch.int64, (6, 4), 1)
    assert s.put_tensor_with_tp("tp_one", t, tp_size=1) == 0 and same(s.get_tensor("tp_one"), t)
    assert same(s.get_tensor_with_tp("tp_one", 0, 1), t)
    assert s.put_tensor_with_tp("tp_uneven", t, tp_size=4, split_dim=0) == -600  # 6 rows into 4 shards
    assert s.put_tensor_with_tp("tp_dim", t, tp_size=2, split_dim=2) == -600
    assert s.is_exist("tp_uneven_tp_0") == 0
    assert s.get_tensor_with_tp("tp_one", 1, 2) is None  # no such shard


def test_tp_families(s):
    ts = [sample(torch.float16, (4, 6), 1), sample(torch.uint8, (8, 2), 2)]
    assert s.batch_put_tensor_with_tp(["btp_a", "btp_b"], ts, tp_size=2, split_dim=0) == [0, 0]
    for r in range(2):
        got = s.batch_get_tensor_with_tp(["btp_a", "btp_b", "btp_none"], tp_rank=r, tp_size=2)
        assert same(got[0], ts[0][2 * r:2 * r + 2]) and same(got[1], ts[1][4 * r:4 * r + 4]) and got[2] is None
    assert s.batch_put_tensor_with_tp(["btp_c", "btp_d"], [ts[0], sample(torch.float16, (3, 6))], tp_size=2) == \
        [0, -600]
    cfg = ReplicateConfig()
    assert s.pub_tensor_with_tp("ptp", ts[0], cfg, tp_size=3, split_dim=1) == 0
    assert same(torch.cat([s.get_tensor_with_tp("ptp", r, 3, 1) for r in range(3)], 1), ts[0])
    assert s.batch_pub_tensor_with_tp(["ptp2"], [ts[1]], cfg, tp_size=2, split_dim=1) == [0]
    assert same(torch.cat([s.get_tensor_with_tp("ptp2", r, 2, 1) for r in range(2)], 1), ts[1])
    new = ts[0] + 1
    assert s.upsert_tensor_with_tp("ptp", new, tp_size=3, split_dim=1) == 0
    assert same(torch.cat([s.get_tensor_with_tp("ptp", r, 3, 1) for r in range(3)], 1), new)
    assert s.batch_upsert_tensor_with_tp(["ptp2"], [ts[1] * 2], tp_size=2, split_dim=1) == [0]
    assert same(s.get_tensor_with_parallelism("ptp2", full_tp(2, 1)), ts[1] * 2)
    # into a buffer
    a, p = buf(4096)
    assert same(s.get_tensor_with_tp_into("btp_a", p, a.nbytes, 1, 2), ts[0][2:])
    b1, p1 = buf(1024)
    b2, p2 = buf(1024)
    got = s.batch_get_tensor_with_tp_into(["btp_a", "btp_b"], [p1, p2], [1024, 1024], tp_rank=0, tp_size=2)
    assert same(got[0], ts[0][:2]) and same(got[1], ts[1][:4])
    # from a [header][full data] buffer
    full = np.frombuffer(bytearray(header(11, (4, 6)) + raw(ts[0])), dtype=np.uint8)
    assert s.put_tensor_with_tp_from("tpf", full.ctypes.data, full.nbytes, tp_size=2, split_dim=1) == 0
    assert same(torch.cat([s.get_tensor_with_tp("tpf", r, 2, 1) for r in range(2)], 1), ts[0])
    assert s.batch_put_tensor_with_tp_from(["tpf2", "tpf3"], [full.ctypes.data, full.ctypes.data],
                                           [full.nbytes, full.nbytes - 2], tp_size=2) == [0, -600]
    assert same(s.get_tensor_with_tp("tpf2", 1, 2), ts[0][2:])


# ------------------------------------------------------------------ unified parallelism API
#
# Where the expected values below come from (read in upstream Mooncake's store integration,
# mooncake-integration/store/store_py_internal.h and store_py_parallel_{write,read}.h):
# - keys: one tp axis keeps the old "<key>_tp_<rank>"; otherwise each axis, sorted dp < tp < ep < pp, appends
#   "__<kind>_<rank>of<size>" plus "_sd<n>" / "_eid<n>" / "_sid<n>" for the fields that are set; a writer
#   partition is "<key>__writer_<rank>of<size>_sd<dim>"; manifests "<key>__parallelism_manifest" and
#   "<key>__writer_manifest";
# - shard headers: the axes are copied in the order the caller listed them (not sorted), reserved0 holds the
#   ep expert id / pp stage id, reserved1 the shard's length along its split dim;
# - which writes add a manifest (tensor writes with a tp axis or a writer partition), with which shape and
#   count (the whole tensor's shape; the tp size or partition count), and that buffer (_from) writes with a
#   tp axis write every rank and no manifest;
# - reads: a single-tp shard request also looks under the writer key, "full" without axes falls back to the
#   object under the key, and a single-tp shard request that nothing matches returns "<key>_tp_<rank>" as is.


def tp_par(rank, size, split_dim=0):
    a = ParallelAxis()
    a.kind, a.rank, a.size, a.split_dim = "tp", rank, size, split_dim
    p = TensorParallelism()
    p.axes = [a]
    return p


def full_tp(size, split_dim=0):
    """ReadTarget("full") of a single-tp layout (any tp size: the stored one is found)."""
    return ReadTarget("full", tp_par(0, size, split_dim))


def test_module_helpers(s):
    from mooncake import store as ms
    t = sample(torch.bfloat16, (2, 3, 4), 6)[:, 1]  # non-contiguous
    head, ptr, size, owner = ms._serialize_tensor(t)
    assert ms._tensor_metadata_size() == HDR and head == header(12, (2, 4)) and size == 16
    assert ctypes.string_at(ptr, size) == raw(t) and owner.data_ptr() == ptr
    back = ms._deserialize_tensor(head + raw(t))
    assert same(back, t.contiguous())
    assert s.put("ser", head + raw(t)) == 0 and same(s.get_tensor("ser"), t.contiguous())  # a valid object
    for bad in (b"", head, head + raw(t)[:-1], b"\x00" * HDR + raw(t)):
        with pytest.raises(ValueError):
            ms._deserialize_tensor(bad)
    for bad in (None, torch.zeros(2, dtype=torch.complex64), torch.zeros([1] * 9)):
        with pytest.raises(ValueError):
            ms._serialize_tensor(bad)


def test_request_shapes():
    a = ParallelAxis()
    assert (a.kind, a.rank, a.size, a.split_dim, a.expert_id, a.stage_id) == ("", 0, 1, None, None, None)
    assert TensorParallelism().axes == [] and ReadTarget().mode == "as_stored" and ReadTarget().parallelism is None
    r = ReadTarget()
    r.mode = "full"
    assert r.mode == "full"
    with pytest.raises(ValueError):
        r.mode = "sideways"


def manifest(dtype, gshape, split_dim, count):
    """Upstream's shard manifest, packed field by field (independent of mooncake._parallel). Its layout, read
    from upstream's store_py_internal.h: a header of u32 magic 0x574d414e, u16 version 1, u16 size, then five
    i32 (dtype, ndim, split_dim, shard count, reserved 0), then the global shape as eight i64 (unused -1);
    the shape array is 8-byte aligned, so 4 zero bytes follow the 28-byte header and the size is 96."""
    b = bytearray(96)
    struct.pack_into("<IHHiiiii", b, 0, 0x574d414e, 1, 96, dtype, len(gshape), split_dim, count, 0)
    for i in range(8):
        struct.pack_into("<q", b, 32 + 8 * i, gshape[i] if i < len(gshape) else -1)
    return bytes(b)


def wpart(rank, size, split_dim):
    """A writer_partition: upstream takes any object with int rank, size and split_dim (no class of its own)."""
    return types.SimpleNamespace(rank=rank, size=size, split_dim=split_dim)


def test_with_parallelism(s):
    t = sample(torch.float32, (6, 4), 3)
    assert s.put_tensor_with_parallelism("par_full", t) == 0
    assert same(s.get_tensor_with_parallelism("par_full"), t)
    # "full" without axes: the writer_partition set when there is one, else the object under the key
    assert same(s.get_tensor_with_parallelism("par_full", ReadTarget("full")), t)
    # a single tp axis: the tensor is that rank's shard, "<key>_tp_<rank>" (upstream's legacy tp key), with
    # the global shape it implies and the manifest every rank writes (a put keeps the first)
    for r in range(3):
        assert s.put_tensor_with_parallelism("par", t[2 * r:2 * r + 2], tp_par(r, 3, 0)) == 0
    assert s.get("par_tp_1")[:HDR] == tp_header(0, (6, 4), (2, 4), 1, 3, 0)
    assert s.get("par__parallelism_manifest") == manifest(0, (6, 4), 0, 3)
    for r in range(3):
        assert same(s.get_tensor_with_parallelism("par", ReadTarget("shard", tp_par(r, 3))), t[2 * r:2 * r + 2])
    assert same(s.get_tensor_with_parallelism("par_tp_2", ReadTarget("as_stored")), t[4:])
    assert same(s.get_tensor_with_parallelism("par", full_tp(3)), t)
    assert same(s.get_tensor_with_parallelism("par", full_tp(2)), t)  # the stored tp size comes from the manifest
    assert s.get_tensor_with_parallelism("par", ReadTarget("full")) is None  # no object, no writer set
    assert s.get_tensor_with_parallelism("par", ReadTarget("as_stored", tp_par(0, 3))) is None  # upstream too
    assert s.get_tensor_with_parallelism("par", full_tp(3, 1)) is None  # stored split along 0
    # another layout than written: shards of a 2- or 6-way split cut from the 3-way one
    for size in (2, 6):
        n = 6 // size
        for r in range(size):
            got = s.get_tensor_with_parallelism("par", ReadTarget("shard", tp_par(r, size)))
            assert same(got, t[n * r:n * r + n]), (size, r)
    # 6 rows do not cut into 4: upstream's last resort is "par_tp_0" as stored (not for the _into form)
    assert same(s.get_tensor_with_parallelism("par", ReadTarget("shard", tp_par(0, 4))), t[:2])
    a, p = buf(4096)
    assert s.get_tensor_with_parallelism_into("par", p, a.nbytes, ReadTarget("shard", tp_par(0, 4))) is None
    got = s.batch_get_tensor_with_parallelism(["par", "par_full", "par_none"], [full_tp(3), None, full_tp(3)])
    assert same(got[0], t) and same(got[1], t) and got[2] is None
    assert s.batch_get_tensor_with_parallelism(["par", "par"], [full_tp(3)]) == [None, None]
    # upsert, batch and _from forms
    t2 = t * 2
    assert s.upsert_tensor_with_parallelism("par", t2[:2], tp_par(0, 3, 0)) == 0
    assert same(s.get_tensor_with_parallelism("par", ReadTarget("shard", tp_par(0, 3))), t2[:2])
    assert s.batch_put_tensor_with_parallelism(["bpar", "bpar"], [t[:, :2], t[:, 2:]],
                                               [tp_par(0, 2, 1), tp_par(1, 2, 1)]) == [0, 0]
    assert s.get("bpar__parallelism_manifest") == manifest(0, (6, 4), 1, 2)
    assert same(s.get_tensor_with_parallelism("bpar", full_tp(2, 1)), t)
    assert s.batch_upsert_tensor_with_parallelism(["bpar"], [t2[:, 2:]], [tp_par(1, 2, 1)]) == [0]
    assert same(s.get_tensor_with_parallelism("bpar", full_tp(2, 1)), torch.cat([t[:, :2], t2[:, 2:]], 1))
    obj = np.frombuffer(bytearray(header(0, (6, 4)) + raw(t)), dtype=np.uint8)
    assert s.put_tensor_with_parallelism_from("parf", obj.ctypes.data, obj.nbytes) == 0
    assert same(s.get_tensor("parf"), t)
    # from a buffer a tp axis writes every rank's shard of the (full) object, and no manifest
    assert s.upsert_tensor_with_parallelism_from("parf", obj.ctypes.data, obj.nbytes, tp_par(1, 3)) == 0
    for r in range(3):
        assert s.get("parf_tp_%d" % r)[:HDR] == tp_header(0, (6, 4), (2, 4), r, 3, 0)
    assert s.is_exist("parf__parallelism_manifest") == 0 and same(s.get_tensor_with_parallelism("parf", full_tp(3)), t)
    assert s.batch_put_tensor_with_parallelism_from(["parf2"], [obj.ctypes.data], [obj.nbytes]) == [0]
    assert s.batch_upsert_tensor_with_parallelism_from(["parf2"], [obj.ctypes.data], [obj.nbytes - 4]) == [-600]
    assert same(s.get_tensor("parf2"), t)
    shard_obj = np.frombuffer(bytearray(tp_header(0, (6, 4), (2, 4), 0, 3, 0) + raw(t[:2])), dtype=np.uint8)
    assert s.put_tensor_with_parallelism_from("parf3", shard_obj.ctypes.data, shard_obj.nbytes,
                                              tp_par(0, 3)) == -600  # a shard cannot be cut again
    # into a buffer: a reassembled tensor lands with a full header, a cut shard with its own shard header
    a, p = buf(4096)
    got = s.get_tensor_with_parallelism_into("par", p, a.nbytes, full_tp(3))
    assert same(got, torch.cat([t2[:2], t[2:]])) and a[:HDR].tobytes() == header(0, (6, 4))
    assert s.get_tensor_with_parallelism_into("par", p, 64, full_tp(3)) is None
    got = s.get_tensor_with_parallelism_into("par", p, a.nbytes, ReadTarget("shard", tp_par(1, 2)))
    assert same(got, t[3:]) and a[:HDR].tobytes() == tp_header(0, (6, 4), (3, 4), 1, 2, 0)
    b1, p1 = buf(1024)
    got = s.batch_get_tensor_with_parallelism_into(["par", "par_full"], [p1, p], [1024, a.nbytes],
                                                   [ReadTarget("shard", tp_par(2, 3)), None])
    assert same(got[0], t[4:]) and same(got[1], t) and b1[:HDR].tobytes() == s.get("par_tp_2")[:HDR]


def test_writer_partition(s):
    """writer_partition: each writer passes the full tensor and stores its slice under
    "<key>__writer_<rank>of<size>_sd<split_dim>", plus "<key>__writer_manifest"; "full" reads them back."""
    t = sample(torch.int16, (4, 6), 21)
    for r in range(2):
        assert s.put_tensor_with_parallelism("wp", t, writer_partition=wpart(r, 2, 1)) == 0
        assert s.get("wp__writer_%dof2_sd1" % r) == header(4, (4, 6), (4, 3), 1, [(1, r, 2, 1, 0, 3)]) + \
            raw(t[:, 3 * r:3 * r + 3])
    assert s.get("wp__writer_manifest") == manifest(4, (4, 6), 1, 2) and s.is_exist("wp") == 0
    assert same(s.get_tensor_with_parallelism("wp", ReadTarget("full")), t)
    # a single-tp shard read also finds a writer shard
    assert same(s.get_tensor_with_parallelism("wp", ReadTarget("shard", tp_par(1, 2, 1))), t[:, 3:])
    a, p = buf(4096)
    got = s.get_tensor_with_parallelism_into("wp", p, a.nbytes, ReadTarget("full"))
    assert same(got, t) and a[:HDR].tobytes() == header(4, (4, 6))
    # batches, upserts, the buffer form
    t2 = t + 1
    assert s.batch_upsert_tensor_with_parallelism(["wp", "wp"], [t2, t2], None, None,
                                                  [wpart(0, 2, 1), wpart(1, 2, 1)]) == [0, 0]
    assert same(s.get_tensor_with_parallelism("wp", ReadTarget("full")), t2)
    obj = np.frombuffer(bytearray(header(4, (4, 6)) + raw(t)), dtype=np.uint8)
    assert s.batch_put_tensor_with_parallelism_from(["wpf", "wpf"], [obj.ctypes.data] * 2, [obj.nbytes] * 2, None,
                                                    None, [wpart(0, 4, 0), wpart(3, 4, 0)]) == [0, 0]
    assert s.get("wpf__writer_3of4_sd0") == header(4, (4, 6), (1, 6), 1, [(1, 3, 4, 0, 0, 1)]) + raw(t[3:])
    assert s.get("wpf__writer_manifest") == manifest(4, (4, 6), 0, 4)
    assert s.get_tensor_with_parallelism("wpf", ReadTarget("full")) is None  # ranks 1 and 2 never written
    for r in (1, 2):
        assert s.put_tensor_with_parallelism_from("wpf", obj.ctypes.data, obj.nbytes, None, None, wpart(r, 4, 0)) == 0
    assert same(s.get_tensor_with_parallelism("wpf", ReadTarget("full")), t)
    # refused: combined with a parallelism, bad fields, a split that is not even
    for bad in (wpart(2, 2, 0), wpart(0, 0, 0), wpart(0, 2, -1), wpart(0, 2, 2), wpart(0, 4, 1), wpart("0", 2, 0),
                types.SimpleNamespace(rank=0, size=2)):
        assert s.put_tensor_with_parallelism("wpx", t, writer_partition=bad) == -600, bad
    assert s.put_tensor_with_parallelism("wpx", t, tp_par(0, 2), writer_partition=wpart(0, 2, 0)) == -600
    assert s.batch_put_tensor_with_parallelism(["wpx"], [t], [None], None, [wpart(0, 2, 0)]) == [-600]
    assert s.batch_put_tensor_with_parallelism(["wpx", "wpy"], [t, t], None, None, [wpart(0, 2, 0)]) == [-600] * 2
    assert [k for k in ("wpx__writer_0of2_sd0", "wpx__writer_manifest") if s.is_exist(k) == 1] == []


def axis(kind, rank, size, split_dim=None, expert_id=None, stage_id=None):
    return ParallelAxis(kind, rank, size, split_dim, expert_id, stage_id)


def test_with_parallelism_tag_axes(s):
    """dp / ep / pp axes (no split_dim; ep names its expert, pp its stage) tag a shard stored as it is: the
    key lists the axes in the order dp, tp, ep, pp, the header in the caller's order (upstream's)."""
    t = sample(torch.float16, (3, 4), 11)
    par = TensorParallelism([axis("PP", 0, 2, stage_id=3), axis("ep", 1, 4, expert_id=7), axis("dp", 0, 2)])
    assert s.put_tensor_with_parallelism("tag", t, par) == 0
    k = "tag__dp_0of2__ep_1of4_eid7__pp_0of2_sid3"
    assert s.is_exist(k) == 1 and s.is_exist("tag") == 0 and s.is_exist("tag__parallelism_manifest") == 0
    assert s.get(k) == header(11, (3, 4), (3, 4), 1, [(3, 0, 2, -1, 3, 0), (2, 1, 4, -1, 7, 0),
                                                     (0, 0, 2, -1, 0, 0)]) + raw(t)
    same_axes = TensorParallelism([axis("dp", 0, 2), axis("pp", 0, 2, stage_id=3), axis("ep", 1, 4, expert_id=7)])
    assert same(s.get_tensor_with_parallelism("tag", ReadTarget("shard", same_axes)), t)
    assert same(s.get_tensor_with_parallelism(k, ReadTarget("as_stored")), t)
    other = TensorParallelism([axis("dp", 1, 2), axis("pp", 0, 2, stage_id=3), axis("ep", 1, 4, expert_id=7)])
    assert s.get_tensor_with_parallelism("tag", ReadTarget("shard", other)) is None
    other_expert = TensorParallelism([axis("dp", 0, 2), axis("pp", 0, 2, stage_id=3), axis("ep", 1, 4, expert_id=8)])
    assert s.get_tensor_with_parallelism("tag", ReadTarget("shard", other_expert)) is None
    assert s.get_tensor_with_parallelism("tag", ReadTarget("full", same_axes)) is None  # full needs a tp axis
    # a lying object under the right key is refused
    assert s.upsert(k, header(11, (3, 4), (3, 4), 1, [(0, 1, 2, -1, 0, 0)]) + raw(t)) == 0
    assert s.get_tensor_with_parallelism("tag", ReadTarget("shard", same_axes)) is None
    assert s.batch_upsert_tensor_with_parallelism(["tag"], [t * 2], [same_axes]) == [0]
    assert same(s.get_tensor_with_parallelism("tag", ReadTarget("shard", par)), t * 2)
    # the buffer form keeps the buffer's shapes and puts the new axes in the header
    obj = np.frombuffer(bytearray(header(11, (6, 4), (3, 4), 1, [(1, 0, 2, 0, 0, 3)]) + raw(t)), dtype=np.uint8)
    ep = TensorParallelism([axis("ep", 0, 2, expert_id=5)])
    assert s.put_tensor_with_parallelism_from("tagf", obj.ctypes.data, obj.nbytes, ep) == 0
    assert s.get("tagf__ep_0of2_eid5") == header(11, (6, 4), (3, 4), 1, [(2, 0, 2, -1, 5, 0)]) + raw(t)
    # refused as upstream refuses them
    for bad in ([axis("ep", 0, 2, split_dim=0, expert_id=1)], [axis("dp", 0, 2, split_dim=0)],
                [axis("pp", 0, 2, split_dim=0, stage_id=0)], [axis("ep", 0, 2)], [axis("pp", 0, 2)],
                [axis("dp", 0, 2), axis("dp", 1, 2)], [axis("xp", 0, 2)], [axis("dp", 0, 2)] * 5, [],
                [axis("dp", -1, 2)], [axis("dp", 0, 1 << 31)]):
        assert s.put_tensor_with_parallelism("tag2", t, TensorParallelism(bad)) == -600, bad
    assert s.put_tensor_with_parallelism("tag2", t, axis("dp", 0, 2)) == -600  # a bare axis is no parallelism


def test_with_parallelism_tp_and_other_axes(s):
    """tp with other axes: the caller passes the full tensor, the tp rank's slice is stored, the manifest
    records the layout; reads with another tp size are cut from it."""
    t = sample(torch.int32, (4, 6), 12)
    pars = [TensorParallelism([axis("tp", r, 2, split_dim=1), axis("dp", 1, 2)]) for r in range(2)]
    assert s.batch_put_tensor_with_parallelism(["m", "m"], [t, t], pars) == [0, 0]
    for r in range(2):
        k = "m__dp_1of2__tp_%dof2_sd1" % r
        assert s.get(k) == header(6, (4, 6), (4, 3), 1, [(1, r, 2, 1, 0, 3), (0, 1, 2, -1, 0, 0)]) + \
            raw(t[:, 3 * r:3 * r + 3])
        assert same(s.get_tensor_with_parallelism("m", ReadTarget("shard", pars[r])), t[:, 3 * r:3 * r + 3])
    assert s.get("m__parallelism_manifest") == manifest(6, (4, 6), 1, 2)
    assert same(s.get_tensor_with_parallelism("m", ReadTarget("full", pars[1])), t)
    for r in range(3):  # a 3-way tp read of the 2-way layout
        p3 = TensorParallelism([axis("dp", 1, 2), axis("tp", r, 3, split_dim=1)])
        assert same(s.get_tensor_with_parallelism("m", ReadTarget("shard", p3)), t[:, 2 * r:2 * r + 2])
        a, p = buf(1024)
        got = s.get_tensor_with_parallelism_into("m", p, a.nbytes, ReadTarget("shard", p3))
        assert same(got, t[:, 2 * r:2 * r + 2])
        assert a[:HDR].tobytes() == header(6, (4, 6), (4, 2), 1, [(0, 1, 2, -1, 0, 0), (1, r, 3, 1, 0, 2)])
    p3 = TensorParallelism([axis("dp", 1, 2), axis("tp", 0, 3, split_dim=1)])
    assert same(s.get_tensor_with_parallelism("m", ReadTarget("full", p3)), t)
    other_dp = TensorParallelism([axis("tp", 0, 2, split_dim=1), axis("dp", 0, 2)])
    assert s.get_tensor_with_parallelism("m", ReadTarget("shard", other_dp)) is None
    assert s.get_tensor_with_parallelism("m", ReadTarget("full", other_dp)) is None
    assert s.put_tensor_with_parallelism("m_odd", t, TensorParallelism([axis("tp", 0, 4, split_dim=1),
                                                                        axis("pp", 0, 1, stage_id=0)])) == -600
    # from a buffer: every tp rank of the scope, no manifest
    obj = np.frombuffer(bytearray(header(6, (4, 6)) + raw(t)), dtype=np.uint8)
    assert s.put_tensor_with_parallelism_from("mf", obj.ctypes.data, obj.nbytes, pars[0]) == 0
    assert s.get("mf__dp_1of2__tp_1of2_sd1")[:HDR] == header(6, (4, 6), (4, 3), 1, [(1, 1, 2, 1, 0, 3),
                                                                                    (0, 1, 2, -1, 0, 0)])
    assert s.is_exist("mf__parallelism_manifest") == 0 and same(s.get_tensor_with_parallelism(
        "mf", ReadTarget("full", pars[0])), t)
    # a member that lies about its rank breaks the set
    assert s.upsert("m__dp_1of2__tp_1of2_sd1", header(6, (4, 6), (4, 3), 1, [(0, 1, 2, -1, 0, 0), (1, 0, 2, 1, 0, 3)])
                    + raw(t[:, 3:])) == 0  # claims to be rank 0
    assert s.get_tensor_with_parallelism("m", ReadTarget("full", pars[0])) is None
    assert s.get_tensor_with_parallelism("m", ReadTarget("shard", p3)) is None


COMBOS = [(), ("dp",), ("pp",), ("ep",), ("dp", "pp"), ("ep", "dp"), ("pp", "ep", "dp")]


def tagged(kind, i):
    return axis(kind, i % 2, 2, expert_id=5 if kind == "ep" else None, stage_id=1 if kind == "pp" else None)


@pytest.mark.parametrize("others", COMBOS, ids=lambda c: "+".join(c) or "tp")
def test_every_combination_reassembles(s, others):
    """tp with every set of other axes, the tp axis first or last, every split dim, tp sizes 2 and 4: each
    rank's stored object is the rank's slice (torch.cat of them is the original), its key and header are
    upstream's, and full / shard reads with another tp size give the original back."""
    t = sample(torch.float32, (4, 8, 4), 40 + len(others))
    for size in (2, 4):
        for sd in range(3):
            for tp_first in (True, False):
                k = "combo_%s_%d_%d_%d" % ("_".join(others), size, sd, tp_first)
                tags = [tagged(o, i) for i, o in enumerate(others)]
                pars = []
                for r in range(size):
                    tp = axis("tp", r, size, split_dim=sd)
                    par = TensorParallelism([tp] + tags if tp_first else tags + [tp])
                    # one tp axis: the caller passes its shard; with other axes: the full tensor
                    src = torch.chunk(t, size, sd)[r] if not others else t
                    assert s.put_tensor_with_parallelism(k, src, par) == 0
                    pars.append(par)
                objs = []
                for r, par in enumerate(pars):
                    canon = sorted(par.axes, key=lambda a: ["dp", "tp", "ep", "pp"].index(a.kind))
                    key = "%s_tp_%d" % (k, r) if not others else k + "".join(
                        "__%s_%dof%d" % (a.kind, a.rank, a.size) + ("_sd%d" % a.split_dim if a.split_dim is not None
                                                                    else "") +
                        ("_eid%d" % a.expert_id if a.expert_id is not None else "") +
                        ("_sid%d" % a.stage_id if a.stage_id is not None else "") for a in canon)
                    ref = torch.chunk(t, size, sd)[r].contiguous()
                    kinds = {"dp": 0, "tp": 1, "ep": 2, "pp": 3}
                    hdr_axes = [(kinds[a.kind], a.rank, a.size, -1 if a.split_dim is None else a.split_dim,
                                 a.expert_id or a.stage_id or 0, ref.shape[sd] if a.kind == "tp" else 0)
                                for a in par.axes]
                    assert s.get(key) == header(0, t.shape, ref.shape, 1, hdr_axes) + raw(ref), key
                    objs.append(s.get_tensor(key))
                assert same(torch.cat(objs, sd), t)
                assert s.get(k + "__parallelism_manifest") == manifest(0, t.shape, sd, size)
                assert same(s.get_tensor_with_parallelism(k, ReadTarget("full", pars[0])), t)
                other = 4 if size == 2 else 2
                tp = axis("tp", 1, other, split_dim=sd)
                got = s.get_tensor_with_parallelism(k, ReadTarget("shard", TensorParallelism([tp] + tags)))
                assert same(got, torch.chunk(t, other, sd)[1])


def test_parallelism_limits(s):
    t = torch.zeros(4, 4)
    splitting_dp = TensorParallelism([axis("dp", 0, 2, split_dim=0), axis("tp", 0, 2, split_dim=1)])
    assert s.put_tensor_with_parallelism("lim", t, splitting_dp) == -600
    no_split = TensorParallelism([axis("dp", 0, 2), axis("tp", 0, 2)])
    assert s.put_tensor_with_parallelism("lim", t, no_split) == -600  # a tp axis needs its split_dim
    assert s.put_tensor_with_parallelism("lim", t, writer_partition=object()) == -600
    assert s.put_tensor_with_parallelism("lim", t, tp_par(2, 2)) == -600  # rank outside size
    assert s.put_tensor_with_parallelism("lim", t, tp_par(0, 2, None)) == -600  # a shard write needs split_dim
    assert s.put_tensor_with_parallelism("lim", t, tp_par(0, 2, 2)) == -600  # outside the shape
    assert s.put_tensor_with_parallelism("lim", t, TensorParallelism()) == -600  # no axes
    assert s.is_exist("lim_tp_0") == 0 and s.is_exist("lim") == 0
    assert s.get_tensor_with_parallelism("lim", ReadTarget("shard")) is None  # shard without axes
    assert s.get_tensor_with_parallelism("lim", ReadTarget("shard", tp_par(0, 1 << 20))) is None
    assert s.batch_put_tensor_with_parallelism(["a", "b"], [t], None) == [-600, -600]
    assert s.batch_put_tensor_with_parallelism(["a", "b"], [t, t], [None]) == [-600, -600]
    assert s.batch_put_tensor_with_parallelism(["a", "b"], [t, t], [None, None], None, [None, None]) == [-600] * 2


def test_hostile_manifests(s):
    """Manifests are read from the store like any object: one that is not upstream's 96-byte layout, or that
    disagrees with the shards it names, reads as nothing (never an exception, never a read of thousands of
    keys, never a tensor bigger than the shards read)."""
    t = sample(torch.float32, (4, 6), 31)
    pars = [TensorParallelism([axis("tp", r, 2, split_dim=1), axis("pp", 0, 1, stage_id=0)]) for r in range(2)]
    assert s.batch_put_tensor_with_parallelism(["hm", "hm"], [t, t], pars) == [0, 0]
    for r in range(2):
        assert s.put_tensor_with_parallelism("hw", t, writer_partition=wpart(r, 2, 1)) == 0
    p3 = TensorParallelism([axis("pp", 0, 1, stage_id=0), axis("tp", 0, 3, split_dim=1)])  # needs the manifest
    assert same(s.get_tensor_with_parallelism("hm", ReadTarget("full", p3)), t)
    assert same(s.get_tensor_with_parallelism("hw", ReadTarget("full")), t)
    good = manifest(0, (4, 6), 1, 2)
    bad = {
        "short": good[:95], "bad magic": b"XXXX" + good[4:], "bad version": good[:4] + b"\x02\x00" + good[6:],
        "bad size field": good[:6] + b"\x60\x01" + good[8:], "ndim 9": manifest(0, (4, 6), 1, 2)[:12] +
        struct.pack("<i", 9) + good[16:], "split_dim out": manifest(0, (4, 6), 2, 2),
        "split_dim -1": manifest(0, (4, 6), -1, 2), "count 0": manifest(0, (4, 6), 1, 0),
        "count huge": manifest(0, (4, 1 << 40), 1, 1 << 30), "dtype 99": manifest(99, (4, 6), 1, 2),
        "negative dim": manifest(0, (-4, 6), 1, 2), "too big": good + b"\x00" * 5000,
        "shape too big": manifest(0, (400, 6), 1, 2), "other dtype": manifest(8, (4, 6), 1, 2),
        "other count": manifest(0, (4, 6), 1, 3), "uneven": manifest(0, (4, 7), 1, 7),
    }
    for why, m in bad.items():
        assert s.upsert("hm__parallelism_manifest", m) == 0 and s.upsert("hw__writer_manifest", m) == 0
        assert s.get_tensor_with_parallelism("hm", ReadTarget("full", p3)) is None, why
        assert s.get_tensor_with_parallelism("hw", ReadTarget("full")) is None, why
        # the request's own tp size still finds the shards without the manifest, unless the manifest is a
        # valid one naming the shards but lying about the whole (it is taken first, as upstream takes it)
        got = s.get_tensor_with_parallelism("hm", ReadTarget("full", pars[0]))
        assert got is None if why in ("shape too big", "other dtype") else same(got, t), why
    assert s.upsert("hm__parallelism_manifest", good) == 0 and s.upsert("hw__writer_manifest", good) == 0
    assert same(s.get_tensor_with_parallelism("hm", ReadTarget("full", p3)), t)
    assert same(s.get_tensor_with_parallelism("hw", ReadTarget("full")), t)
    # a writer shard that lies (other split, other rank, other dtype) breaks the writer set
    for lie in (header(0, (4, 6), (4, 3), 1, [(1, 1, 2, 0, 0, 3)]), header(0, (4, 6), (4, 3), 1, [(1, 0, 2, 1, 0, 3)]),
                header(6, (4, 6), (4, 3), 1, [(1, 1, 2, 1, 0, 3)])):
        assert s.upsert("hw__writer_1of2_sd1", lie + raw(t[:, 3:])) == 0
        assert s.get_tensor_with_parallelism("hw", ReadTarget("full")) is None


# ------------------------------------------------------------------ hostile objects


def hostile_objects():
    good = header(0, (2, 2)) + b"\x01" * 16
    yield "short", b"\x00" * 10
    yield "header only, no payload", good[:HDR]
    yield "bad magic", b"XXXX" + good[4:]
    yield "bad version", header(0, (2, 2), version=2) + b"\x01" * 16
    yield "bad header size", header(0, (2, 2), hsize=300) + b"\x01" * 16
    yield "ndim 9", header(0, (2, 2), ndim=9) + b"\x01" * 16
    yield "ndim -1", header(0, (2, 2), ndim=-1) + b"\x01" * 16
    yield "dtype 15", header(15, (2, 2), nbytes=16) + b"\x01" * 16
    yield "dtype -1", header(-1, (2, 2), nbytes=16) + b"\x01" * 16
    yield "shape too big", header(0, (2, 3), nbytes=16) + b"\x01" * 16
    yield "payload longer", good + b"\x00"
    yield "offset past end", header(0, (2, 2), offset=1 << 40) + b"\x01" * 16
    yield "offset in header", header(0, (2, 2), offset=16) + b"\x01" * 16
    yield "negative dim", header(0, (-2, -2), nbytes=16) + b"\x01" * 16
    yield "huge dims", header(0, (1 << 62, 1 << 62), nbytes=16) + b"\x01" * 16
    yield "5 axes", header(0, (2, 2), axis_count=5) + b"\x01" * 16
    yield "layout 2", header(0, (2, 2), layout=2) + b"\x01" * 16
    yield "axis rank >= count", header(0, (2, 2), layout=1, axes=[(1, 3, 2, 0, 0, 2)]) + b"\x01" * 16
    yield "axis kind 9", header(0, (2, 2), layout=1, axes=[(9, 0, 2, 0, 0, 2)]) + b"\x01" * 16


def test_hostile_objects_are_refused(s):
    a, p = buf(1 << 16)
    for i, (why, obj) in enumerate(hostile_objects()):
        k = "hostile_%d" % i
        assert s.put(k, obj) == 0, why
        assert s.get_tensor(k) is None, why
        assert s.batch_get_tensor([k]) == [None], why
        assert s.get_tensor_into(k, p, a.nbytes) is None, why
        assert s.get_tensor_with_parallelism(k) is None, why
        assert s.get_tensor_with_parallelism(k, ReadTarget("full")) is None, why
        h = s.get_buffer(k)  # held while its address is in use
        assert s.put_tensor_from(k + "_c", h.ptr(), len(obj)) == -600, why
    # a shard set with a lying member does not reassemble
    t = torch.arange(8, dtype=torch.float32).reshape(4, 2)
    assert s.put_tensor_with_tp("lying", t, tp_size=2) == 0
    assert same(s.get_tensor_with_parallelism("lying", full_tp(2)), t)
    assert s.upsert("lying_tp_1", header(0, (4, 2), (2, 2), 1, [(1, 1, 2, 1, 0, 1)]) + raw(t[2:])) == 0
    assert s.get_tensor_with_parallelism("lying", full_tp(2)) is None
    # ... nor one whose member has another local shape, nor one whose "rank 0" says it is rank 1
    assert s.upsert("lying_tp_1", header(0, (4, 2), (2, 1), 1, [(1, 1, 2, 0, 0, 2)]) + raw(t[2:, :1])) == 0
    assert s.get_tensor_with_parallelism("lying", full_tp(2)) is None
    assert s.upsert("lying_tp_1", header(0, (4, 2), (2, 2), 1, [(1, 1, 2, 0, 0, 2)]) + raw(t[2:])) == 0
    assert same(s.get_tensor_with_parallelism("lying", full_tp(2)), t)
    assert same(s.get_tensor_with_parallelism("lying", ReadTarget("shard", tp_par(1, 4))), t[1:2])  # cut
    assert s.upsert("lying_tp_0", header(0, (4, 2), (2, 2), 1, [(1, 1, 2, 0, 0, 2)]) + raw(t[:2])) == 0
    assert s.get_tensor_with_parallelism("lying", full_tp(2)) is None
    # no set to cut from: upstream's last resort returns "lying_tp_1" as it is
    assert same(s.get_tensor_with_parallelism("lying", ReadTarget("shard", tp_par(1, 4))), t[2:])
    # a shard read of the rank's own object checks its header; when that fails and nothing can be cut,
    # upstream's last resort returns the rank's object as it is (the _into form does not)
    assert same(s.get_tensor_with_parallelism("lying", ReadTarget("shard", tp_par(1, 2))), t[2:])
    assert same(s.get_tensor_with_parallelism("lying", ReadTarget("shard", tp_par(1, 2, 1))), t[2:])
    assert s.get_tensor_with_parallelism_into("lying", p, a.nbytes, ReadTarget("shard", tp_par(1, 2, 1))) is None


def test_upstream_objects_read(s):
    """What upstream may write and we do not: a payload after padding (data_offset > 304)."""
    t = sample(torch.int16, (3, 3), 4)
    assert s.put("padded", header(4, (3, 3), offset=HDR + 16) + b"\xee" * 16 + raw(t)) == 0
    assert same(s.get_tensor("padded"), t)
    assert s.put("odd", header(4, (3, 3), offset=HDR + 1) + b"\xee" + raw(t)) == 0
    assert same(s.get_tensor("odd"), t)


def test_mutated_headers_never_crash(s):
    t = torch.arange(12, dtype=torch.int32).reshape(3, 4)
    good = bytearray(header(6, (3, 4)) + raw(t))
    rng = random.Random(16)
    keys = []
    for i in range(150):
        m = bytearray(good)
        for _ in range(rng.randint(1, 4)):
            m[rng.randrange(HDR)] = rng.randrange(256)
        keys.append("mut_%d" % i)
        assert s.put(keys[-1], bytes(m)) == 0
    for k, got in zip(keys, s.batch_get_tensor(keys)):
        if got is not None:  # a mutation that kept the header valid: the size still matches the object
            assert got.numel() * got.element_size() == len(good) - HDR


# ------------------------------------------------------------------ CUDA, safetensors, lifecycle


def test_cuda_destinations_fail_clearly(s):
    assert s.put_tensor("cu", torch.ones(4)) == 0
    assert s.get_tensor_into_cuda("cu", torch.zeros(4)) == -600  # a CPU destination
    assert s.batch_get_tensor_into_cuda(["cu", "cu"], [torch.zeros(4), None]) == [-600, -600]
    assert s.batch_get_tensor_into_cuda(["cu"], []) == [-600]
    if not torch.cuda.is_available():
        with pytest.raises((RuntimeError, AssertionError)):
            torch.zeros(1, device="cuda")  # no GPU: such a tensor cannot even be made


def test_safetensors(s, tmp_path):
    t = sample(torch.bfloat16, (3, 5), 9)
    assert s.put_tensor("st", t) == 0
    path = str(tmp_path / "one.safetensors")
    assert s.save_tensor_to_safetensor("st", path) == 0
    data = open(path, "rb").read()
    (hlen,) = struct.unpack_from("<Q", data)
    meta = json.loads(data[8:8 + hlen])
    assert meta == {"st": {"dtype": "BF16", "shape": [3, 5], "data_offsets": [0, 30]}} and hlen % 8 == 0
    assert data[8 + hlen:] == raw(t)
    got = s.load_tensor_from_safetensor("st_back", path)  # no entry of that name: the first one
    assert same(got, t) and same(s.get_tensor("st_back"), t)
    assert same(s.load_tensor_from_safetensor(key="st", file_name=path), t)
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        assert s.save_tensor_to_safetensor("st") == 0 and os.path.exists("st")  # file named after the key
        assert same(s.load_tensor_from_safetensor(file_name="st"), t)  # stored under the file's name
    finally:
        os.chdir(cwd)
    # a file written by hand with two entries, one int64 scalar
    two = {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
           "b": {"dtype": "I64", "shape": [], "data_offsets": [8, 16]}}
    hdr = json.dumps(two).encode()
    p2 = str(tmp_path / "two.safetensors")
    with open(p2, "wb") as f:
        f.write(struct.pack("<Q", len(hdr)) + hdr + struct.pack("<2f", 1.5, -2.0) + struct.pack("<q", -7))
    b = s.load_tensor_from_safetensor("b", p2)
    assert b.dtype == torch.int64 and b.shape == () and int(b) == -7 and same(s.get_tensor("b"), b)
    assert s.save_tensor_to_safetensor("missing_key", str(tmp_path / "x")) == -1100  # upstream's code
    assert s.save_tensor_to_safetensor("st", str(tmp_path / "no_such_dir" / "f")) == -600
    for bad in (b"", b"\xff" * 8, struct.pack("<Q", 4) + b"{}  ", struct.pack("<Q", 2) + b"[]",
                struct.pack("<Q", len(hdr)) + hdr):  # the last: payload missing
        with open(p2, "wb") as f:
            f.write(bad)
        assert s.load_tensor_from_safetensor("bad", p2) is None
    assert s.load_tensor_from_safetensor("bad", str(tmp_path / "absent")) is None


def test_not_initialized():
    s = MooncakeDistributedStore()
    t = torch.ones(2)
    assert s.put_tensor("k", t) == -600 and s.get_tensor("k") is None
    assert s.batch_put_tensor(["a", "b"], [t, t]) == [-600, -600] and s.batch_get_tensor(["a"]) == [None]
    assert s.put_tensor_with_tp("k", t, tp_size=2) == -600 and s.get_tensor_with_parallelism("k") is None
    assert s.save_tensor_to_safetensor("k") == -600 and s.load_tensor_from_safetensor("k", "f") is None


NO_TORCH = r"""
import sys
sys.modules["torch"] = None  # makes "import torch" fail, as on a host without python3-torch
from mooncake import store as ms
from mooncake import _tensor
s = ms.MooncakeDistributedStore()
names = _tensor.PUT_NAMES + _tensor.BATCH_PUT_NAMES + _tensor.GET_NAMES + _tensor.BATCH_GET_NAMES
out = {"torch_available": _tensor.torch_available(), "missing": [n for n in names if not hasattr(s, n)]}
out["put"] = [getattr(s, n)("k", None) for n in _tensor.PUT_NAMES]
out["batch_put"] = [getattr(s, n)(["a", "b"], [1, 2]) for n in _tensor.BATCH_PUT_NAMES]
out["get"] = [getattr(s, n)("k") for n in _tensor.GET_NAMES]
out["batch_get"] = [getattr(s, n)(["a", "b", "c"]) for n in _tensor.BATCH_GET_NAMES]
a = ms.ParallelAxis(); a.kind = "tp"; p = ms.TensorParallelism(); p.axes = [a]; r = ms.ReadTarget(); r.mode = "full"
out["shapes"] = [a.kind, len(p.axes), r.mode]
out["torch_loaded"] = sys.modules.get("torch") is not None
out["meta_size"] = ms._tensor_metadata_size()
try:
    ms._deserialize_tensor(b"x" * 400)
except ValueError:
    out["deserialize"] = "ValueError"
import json; print(json.dumps(out))
"""


def test_without_torch():
    r = run_py(NO_TORCH)
    assert r.returncode == 0, r.stderr.decode()
    out = json.loads(r.stdout.decode().strip().splitlines()[-1])
    assert out["torch_available"] is False and out["missing"] == [] and out["torch_loaded"] is False
    assert set(out["put"]) == {-1012}
    assert all(v == [-1012, -1012] for v in out["batch_put"])
    assert set(out["get"]) == {None} and all(v == [None, None, None] for v in out["batch_get"])
    assert out["shapes"] == ["tp", 1, "full"]
    assert out["meta_size"] == 304 and out["deserialize"] == "ValueError"


def test_import_does_not_load_torch():
    r = run_py("import sys, mooncake.store; print('torch' in sys.modules)")
    assert r.returncode == 0 and r.stdout.decode().strip() == "False"
