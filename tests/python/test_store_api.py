"""Every P0/P1 method of MooncakeDistributedStore and its conventions (docs/python.md), including each
invariant (docs/python.md, "Invariants"), against a real mooncake_master (500 ms lease) and real clients."""

import gc
import json
import re
import threading
import time
import urllib.error
import urllib.request

import numpy as np
import pytest

import mooncake
from mooncake import _tensor, store as ms
from mooncake.store import MooncakeDistributedStore, ReplicateConfig, SoftPinAction
from conftest import Master, free_port, run_py

LEASE_S = 0.6  # the master's 500 ms lease, plus margin


def addr(a):
    return a.ctypes.data


# ------------------------------------------------------------------ names, enums, config


def test_package_names():
    assert mooncake.BufferPool is mooncake.RegisteredBufferPool
    for n in ["MooncakeDistributedStore", "ReplicateConfig", "SoftPinAction", "ReplicaStatus", "BufferHandle",
              "ReplicaDescriptor", "MemoryDescriptor", "DiskDescriptor", "Descriptor", "ObjectDataType",
              "MooncakeHostMemAllocator", "TaskType", "TaskStatus", "QueryTaskResponse", "bind_to_numa_node",
              "get_alloc_func_addr", "get_free_func_addr", "ParallelAxis", "TensorParallelism", "ReadTarget",
              "BufferPool", "MooncakeDistributedNoFRegister"]:
        assert hasattr(ms, n), n
    assert ms.COMPLETE == ms.ReplicaStatus.COMPLETE == 3 and ms.KVCACHE == 1
    e = ms.SoftPinAction(1)
    assert e is SoftPinAction.ENABLE and int(e) == 1 and e.value == 1 and e.name == "ENABLE"
    assert {SoftPinAction.ENABLE: 1}[SoftPinAction(1)] == 1


# Methods whose docstrings come with work done elsewhere at the same time (copy/move tasks, dummy clients);
# empty this list once they have theirs.
_DOC_PENDING = set()


def test_every_public_method_has_a_docstring():
    """help() and integrations read docstrings (one probes batch_remove.__doc__ for "force")."""
    import inspect
    from mooncake.engine import TransferEngine
    missing = []
    for cls in (MooncakeDistributedStore, TransferEngine):
        for name in dir(cls):
            f = getattr(cls, name)
            if name.startswith("_") or not inspect.isroutine(f) or name in _DOC_PENDING:
                continue
            if not (f.__doc__ or "").strip():
                missing.append("%s.%s" % (cls.__name__, name))
    assert missing == []
    assert "force" in MooncakeDistributedStore.batch_remove.__doc__
    assert "group_ids" in MooncakeDistributedStore.batch_put_from.__doc__


def test_replicate_config_fields():
    c = ReplicateConfig()
    assert (c.replica_num, c.nof_replica_num, c.dfs_replica_num) == (1, 0, 0)
    assert c.soft_pin_action == SoftPinAction.PRESERVE and c.soft_pin_ttl_ms is None
    assert c.with_hard_pin is False and c.preferred_segments == [] and c.preferred_segment == ""
    assert c.prefer_alloc_in_same_node is False and c.data_type == ms.ObjectDataType.UNKNOWN
    assert c.group_ids is None and hasattr(ReplicateConfig, "group_ids")
    assert str(c).startswith("ReplicateConfig: {") and "replica_num" in str(c)
    for bad in (-1, 1 << 64):
        with pytest.raises(TypeError):
            c.soft_pin_ttl_ms = bad
        with pytest.raises(TypeError):
            c.replica_num = bad
    c.soft_pin_ttl_ms = 1000
    c.soft_pin_ttl_ms = None
    with pytest.raises(TypeError):
        ReplicateConfig(1)


def test_host_mem_allocator():
    a = ms.MooncakeHostMemAllocator()
    p = a.alloc(4096)
    assert p > 0 and a.free(p) == 0 and a.alloc(0) == 0


# ------------------------------------------------------------------ lifecycle


def test_not_initialized_values():
    s = MooncakeDistributedStore()
    keys = ["a", "b"]
    assert s.put("k", b"v") == -600 and s.get("k") == b"" and s.get_batch(["k"]) == [b""]
    assert s.get_buffer("k") is None and s.batch_get_buffer(keys) == [None, None]
    assert s.batch_put_from(keys, [1, 2], [1, 1]) == [-600, -600]
    assert s.batch_get_into(keys, [1, 2], [1, 1]) == [-600, -600]
    assert s.batch_is_exist(keys) == [-600, -600] and s.is_exist("k") == -600
    assert s.health_check() == 1 and s.get_hostname() == "" and s.close() == 0
    assert s.register_buffer(4096, 10) == -600 and s.remove_all() == -600 and s.get_size("k") == -600
    assert s.batch_put_from_multi_buffers(keys, [[1], [2]], [[1], [1]]) == [-600, -600]
    assert s.get_replica_desc("k") == [] and s.batch_get_replica_desc(keys) == {}


def test_lifecycle_close_setup_again(master):
    s = MooncakeDistributedStore()
    assert s.setup("127.0.0.1", master.metadata, 16 << 20, 16 << 20, "tcp", "", master.addr) == 0
    assert s.health_check() == 0
    assert s.put("life_k", b"v1") == 0
    assert s.close() == 0 and s.close() == 0
    assert s.health_check() == 1 and s.put("life_k", b"x") == -600
    # invariant 5: keys stored only in this client's segment are gone after close + setup
    assert s.setup("127.0.0.1", master.metadata, 16 << 20, 16 << 20, "tcp", "", master.addr) == 0
    assert s.get("life_k") == b"" and s.is_exist("life_k") == 0
    # setup on a READY instance tears the old client down first
    name = s.get_hostname()
    assert s.setup("127.0.0.1", master.metadata, 16 << 20, 16 << 20, "tcp", "", master.addr) == 0
    assert s.get_hostname() != name
    s.close()


def test_gc_tears_down(master, make_store):
    other = make_store()
    s = MooncakeDistributedStore()
    assert s.setup("127.0.0.1", master.metadata, 16 << 20, 16 << 20, "tcp", "", master.addr) == 0
    cfg = ReplicateConfig()
    cfg.preferred_segment = s.get_hostname()
    assert s.put("gc_k", b"v", cfg) == 0
    del s
    gc.collect()
    assert other.is_exist("gc_k") == 0


def test_atexit_tears_down(master, make_store):
    other = make_store()
    code = ("from mooncake.store import *\ns = MooncakeDistributedStore()\n"
            "assert s.setup('127.0.0.1', %r, 16 << 20, 16 << 20, 'tcp', '', %r) == 0\n"
            "c = ReplicateConfig(); c.preferred_segment = s.get_hostname()\n"
            "assert s.put('exit_k', b'v', c) == 0\nassert s.is_exist('exit_k') == 1\n") % (master.metadata, master.addr)
    r = run_py(code)
    assert r.returncode == 0, r.stderr.decode()
    assert other.is_exist("exit_k") == 0  # unmounted at exit, not after a liveness timeout


# ------------------------------------------------------------------ setup forms


def test_setup_forms(master):
    s = MooncakeDistributedStore()
    with pytest.raises(TypeError):
        s.setup()
    with pytest.raises(TypeError):
        s.setup(local_hostname="127.0.0.1")
    with pytest.raises(TypeError, match="device_name"):
        s.setup("127.0.0.1", master.metadata, rdma_devices="", device_name="")
    with pytest.raises(TypeError, match="master_server_address"):
        s.setup("127.0.0.1", master.metadata, master_server_addr=master.addr, master_server_address=master.addr)
    with pytest.raises(TypeError, match="bogus_kw"):
        s.setup("127.0.0.1", master.metadata, bogus_kw=1)
    assert s.setup("", master.metadata, master_server_address=master.addr) == -600
    # keywords only, with the aliases (the guide's form)
    assert s.setup(local_hostname="127.0.0.1", metadata_server=master.metadata, global_segment_size=16 << 20,
                   local_buffer_size=16 << 20, protocol="tcp", device_name="", master_server_address=master.addr,
                   tenant_id="default", enable_ssd_offload=False, enable_client_http_server=False,
                   client_http_port=9300) == 0
    assert re.fullmatch(r"127\.0\.0\.1:(\d+)", s.get_hostname())
    port = int(s.get_hostname().split(":")[1])
    assert 12300 <= port <= 14300  # invariant 7
    assert s.setup("127.0.0.1", master.metadata, 0, 0, "tcp", "", master.addr, enable_client_http_server=True,
                   client_http_port=70000) == -600
    # rdma without a NIC falls back to tcp
    assert s.setup("127.0.0.1", master.metadata, 16 << 20, 16 << 20, "rdma", "mlx5_0", master.addr) == 0
    p = free_port()
    assert s.setup("127.0.0.1:%d" % p, master.metadata, 16 << 20, 16 << 20, "tcp", "", master.addr) == 0
    assert s.get_hostname() == "127.0.0.1:%d" % p
    s.close()


def test_setup_dict_form(master):
    s = MooncakeDistributedStore()
    base = {"local_hostname": "127.0.0.1", "metadata_server": master.metadata, "master_server_address": master.addr,
            "protocol": "tcp", "device_name": "", "unknown_key": object()}
    assert s.setup(dict(base, global_segment_size="16MB", local_buffer_size="16 MB",
                        enable_client_http_server=False)) == 0
    assert s.put("dict_k", b"x" * 100) == 0 and s.get("dict_k") == b"x" * 100
    assert s.setup(dict(base, global_segment_size=" 1.5 MB ", local_buffer_size=4096)) == 0
    for bad in ("50%", "16XB", "-5", "16GiB", "100"):
        assert s.setup(dict(base, global_segment_size=bad)) != 0, bad
    assert s.setup(dict(base, local_buffer_size="2TB")) != 0
    assert s.setup(dict(base, local_hostname="")) == -600
    assert s.setup({"metadata_server": master.metadata}) == -600
    assert s.setup(dict(base, client_http_port="abc")) == -600
    s.close()


def _ssd_sums(master):
    body = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % master.metrics_port, timeout=5).read().decode()
    got = {}
    for name in ("master_ssd_capacity_bytes", "master_ssd_used_bytes"):
        m = re.search(r"^%s (\d+)" % name, body, re.M)
        got[name] = int(m.group(1)) if m else None
    return got


def test_setup_ssd_offload(master, tmp_path, monkeypatch, caplog):
    """enable_ssd_offload opens the local-disk tier (docs/disk-tier.md); the master sees its capacity; a store
    that does not ask for the tier never opens one, whatever the environment says."""
    base = dict(local_hostname="127.0.0.1", metadata_server=master.metadata, global_segment_size=16 << 20,
                local_buffer_size=16 << 20, protocol="tcp", device_name="", master_server_address=master.addr)
    monkeypatch.setenv("MOONCAKE_OFFLOAD_FILE_STORAGE_PATH", str(tmp_path / "from_env"))
    plain = MooncakeDistributedStore()
    assert plain.setup(**base) == 0
    assert not (tmp_path / "from_env").exists()
    plain.close()
    s = MooncakeDistributedStore()
    with caplog.at_level("WARNING"):
        assert s.setup(**base, enable_ssd_offload=True, ssd_offload_path=str(tmp_path / "ssd")) == 0
    assert not [r for r in caplog.records if "not supported" in r.getMessage()]
    assert (tmp_path / "ssd").is_dir()
    deadline = time.time() + 10
    while _ssd_sums(master)["master_ssd_capacity_bytes"] in (None, 0) and time.time() < deadline:
        time.sleep(0.1)
    sums = _ssd_sums(master)
    assert sums["master_ssd_capacity_bytes"] > 0 and sums["master_ssd_used_bytes"] == 0
    # a second store cannot take the directory the first one holds
    other = MooncakeDistributedStore()
    assert other.setup(**base, enable_ssd_offload=True, ssd_offload_path=str(tmp_path / "ssd")) == -1105
    # asked for without a path: the environment names it
    third = MooncakeDistributedStore()
    assert third.setup(**base, enable_ssd_offload=True) == 0
    assert (tmp_path / "from_env").is_dir()
    third.close()
    s.close()
    deadline = time.time() + 10
    while _ssd_sums(master)["master_ssd_capacity_bytes"] not in (None, 0) and time.time() < deadline:
        time.sleep(0.1)
    assert _ssd_sums(master)["master_ssd_capacity_bytes"] in (None, 0)


def test_setup_unreachable_master_is_bounded(master):
    s = MooncakeDistributedStore()
    t0 = time.monotonic()
    rc = s.setup("127.0.0.1", master.metadata, 16 << 20, 16 << 20, "tcp", "", "127.0.0.1:%d" % free_port())
    assert rc == -900 and time.monotonic() - t0 < 11
    assert s.health_check() == 1


def test_health_check_master_down():
    m = Master()
    s = MooncakeDistributedStore()
    assert s.setup("127.0.0.1", m.metadata, 0, 16 << 20, "tcp", "", m.addr) == 0
    assert s.health_check() == 0
    m.stop()
    assert s.health_check() == 2
    assert s.is_exist("x") in (-900, -901)
    s.close()


# ------------------------------------------------------------------ P0 data methods and the invariants


def test_put_get_invariant_1(make_store):
    s = make_store()
    v = b"value-1" * 10
    assert s.put("inv1", v) == 0 and s.get_size("inv1") == len(v) and s.get("inv1") == v
    assert s.put("inv1", b"other") == 0 and s.get("inv1") == v
    # any buffer-protocol object
    assert s.put("inv1_ba", bytearray(b"abc")) == 0 and s.get("inv1_ba") == b"abc"
    arr = np.arange(100, dtype=np.float32)
    assert s.put("inv1_np", arr) == 0 and s.get("inv1_np") == arr.tobytes()
    assert s.put("inv1_mv", memoryview(b"xyz")[1:]) == 0 and s.get("inv1_mv") == b"yz"
    assert s.put("inv1_empty", b"") < 0 and s.get("missing_key") == b""
    with pytest.raises(TypeError):
        s.put("k", 123)
    with pytest.raises(TypeError):
        s.put(None, b"x")


def test_no_staging_invariant_2(make_store):
    s = make_store(lbs=0)
    assert s.put("inv2", b"abc") != 0 and s.is_exist("inv2") == 0


def test_larger_than_staging_invariant_3(make_store):
    s = make_store(lbs=64 * 1024)
    big = np.full(128 * 1024, 7, dtype=np.uint8)
    assert s.put("inv3", big) == -600 and s.is_exist("inv3") == 0
    assert s.register_buffer(addr(big), big.nbytes) == 0
    assert s.put_from("inv3", addr(big), big.nbytes) == 0
    assert s.get("inv3") == b"" and s.get_buffer("inv3") is None and s.get_batch(["inv3"]) == [b""]
    out = np.zeros_like(big)
    assert s.get_into("inv3", addr(out), out.nbytes) == big.nbytes and (out == big).all()


def test_pure_client_only_invariant_4():
    m = Master()
    try:
        s = MooncakeDistributedStore()
        assert s.setup("127.0.0.1", m.metadata, 0, 16 << 20, "tcp", "", m.addr) == 0
        assert s.put("inv4", b"abc") == -200
        s.close()
    finally:
        m.stop()


def test_two_replicas_survive_writer_close_invariant_6(make_store):
    holder, writer = make_store(), make_store()
    cfg = ReplicateConfig()
    cfg.replica_num = 2
    assert writer.put("inv6", b"twice", cfg) == 0
    assert len(writer.get_replica_desc("inv6")) == 2
    writer.close()
    assert holder.get("inv6") == b"twice"


def test_leases_invariant_8(make_store):
    s = make_store()
    for i, grant in enumerate([lambda k: s.is_exist(k), lambda k: s.batch_is_exist([k]), lambda k: s.get(k),
                               lambda k: s.get_size(k), lambda k: s.get_replica_desc(k),
                               lambda k: s.get_batch([k]), lambda k: s.get_buffer(k)]):
        k = "lease_%d" % i
        assert s.put(k, b"v") == 0
        assert s.remove(k) == 0, "a put grants no lease"
        assert s.put(k, b"v") == 0
        grant(k)
        assert s.remove(k) == -706, i
        time.sleep(LEASE_S)
        assert s.remove(k) == 0, i
    assert s.remove("lease_missing") == -704
    assert s.put("lease_f", b"v") == 0 and s.is_exist("lease_f") == 1 and s.remove("lease_f", force=True) == 0


def test_batch_conventions_invariant_9(make_store):
    s = make_store()
    buf = np.zeros(4096, dtype=np.uint8)
    assert s.register_buffer(addr(buf), buf.nbytes) == 0
    assert s.batch_put_from(["a", "b"], [addr(buf)], [10, 10]) == [-600, -600]
    assert s.batch_get_into(["a", "b"], [addr(buf)], [10]) == [-600, -600]
    assert s.batch_put_from([], [], []) == [] and s.batch_get_into([], [], []) == [] and s.batch_is_exist([]) == []
    assert s.batch_put_from_multi_buffers(["a"], [[addr(buf)]], [[1, 2]]) == [-600]
    assert s.batch_get_into_multi_buffers(["a", "b"], [[addr(buf)]], [[1]]) == [-600, -600]
    assert s.put_from("inv9", addr(buf), 100) == 0
    assert s.get_into("inv9", addr(buf) + 1000, 50) < 0
    assert s.batch_get_into(["inv9"], [addr(buf) + 1000], [50]) == [-600]
    with pytest.raises(TypeError):
        s.batch_put_from(None, [], [])
    with pytest.raises(TypeError):
        s.batch_get_into(["a"], [-1], [1])
    with pytest.raises(TypeError):
        s.batch_put_from(["a"], [1 << 64], [1])


def test_soft_pin_ttl_invariant_10(make_store):
    s = make_store()
    buf = np.ones(64, dtype=np.uint8)
    for action, want in ((SoftPinAction.PRESERVE, -600), (SoftPinAction.DISABLE, -600), (SoftPinAction.ENABLE, 0)):
        c = ReplicateConfig()
        c.soft_pin_action = action
        c.soft_pin_ttl_ms = 60000
        assert s.put("inv10_%d" % action, b"v", c) == want
        assert s.upsert("inv10u_%d" % action, b"v", c) == want
        assert s.batch_put_from(["inv10b_%d" % action], [addr(buf)], [64], c) == [want]
    c = ReplicateConfig()
    c.soft_pin_action = SoftPinAction.ENABLE
    assert s.put("inv10_default_ttl", b"v", c) == 0


def test_config_validation(make_store):
    s = make_store()
    buf = np.ones(64, dtype=np.uint8)
    c = ReplicateConfig()
    c.replica_num = 0
    assert s.put("cfg_a", b"v", c) == -600
    c = ReplicateConfig()
    c.dfs_replica_num = 2
    assert s.put("cfg_b", b"v", c) == -600
    c = ReplicateConfig()
    c.prefer_alloc_in_same_node = True
    assert s.put("cfg_c", b"v", c) == -600
    c = ReplicateConfig()
    c.group_ids = ["g"]
    assert s.batch_put_from(["cfg_d", "cfg_e"], [addr(buf), addr(buf)], [8, 8], c) == [-600, -600]
    c.group_ids = ["g", ""]
    assert s.batch_put_from(["cfg_d", "cfg_e"], [addr(buf), addr(buf)], [8, 8], c) == [0, 0]
    c = ReplicateConfig()
    c.preferred_segment = s.get_hostname()
    c.with_hard_pin = True
    c.data_type = ms.ObjectDataType.KVCACHE
    assert s.put("cfg_f", b"v", c) == 0
    assert s.get_replica_desc("cfg_f")[0].get_memory_descriptor().buffer_descriptor.transport_endpoint


def test_register_buffer_rules(make_store):
    s = make_store()
    buf = np.zeros(8192, dtype=np.uint8)
    assert s.register_buffer(0, 10) == -600 and s.register_buffer(addr(buf), 0) == -600
    assert s.register_buffer(addr(buf), 4096) == 0
    assert s.register_buffer(addr(buf), 4096) == -600  # same range twice
    assert s.register_buffer(addr(buf) + 100, 100) == -600  # overlap
    assert s.register_buffer(addr(buf) + 4096, 4096) == 0  # adjacent is fine
    assert s.unregister_buffer(addr(buf) + 1) == -600
    assert s.unregister_buffer(addr(buf)) == 0 and s.unregister_buffer(addr(buf)) == -600
    assert s.unregister_buffer(addr(buf) + 4096) == 0


def test_zero_copy_batches(make_store):
    s = make_store()
    src = np.random.default_rng(1).integers(0, 255, 1 << 20, dtype=np.uint8)
    dst = np.zeros_like(src)
    assert s.register_buffer(addr(src), src.nbytes) == 0 and s.register_buffer(addr(dst), dst.nbytes) == 0
    keys = ["zc_%d" % i for i in range(16)]
    n = 64 * 1024
    assert s.batch_put_from(keys, [addr(src) + i * n for i in range(16)], [n] * 16) == [0] * 16
    assert s.batch_is_exist(keys + ["zc_none"]) == [1] * 16 + [0]
    assert s.batch_get_into(keys, [addr(dst) + i * n for i in range(16)], [n] * 16) == [n] * 16
    assert (dst == src).all()
    # existing key: 0 and unchanged; repeated key in one batch: both 0, first buffer wins
    assert s.batch_put_from(["zc_0"], [addr(src) + 5], [n]) == [0]
    assert s.batch_put_from(["zc_dup", "zc_dup"], [addr(src), addr(src) + 1], [100, 100]) == [0, 0]
    out = np.zeros(100, dtype=np.uint8)
    assert s.get_into("zc_dup", addr(out), 100) == 100 and (out == src[:100]).all()
    assert s.batch_put_from(["zc_zero"], [addr(src)], [0]) == [-600]
    assert s.put_from("zc_zero", addr(src), 0) == 0 and s.is_exist("zc_zero") == 0
    # buffer larger than the object: bytes read = object size; unregistered destination works too
    big = np.zeros(2 * n, dtype=np.uint8)
    assert s.batch_get_into(["zc_1", "zc_none"], [addr(big), addr(big)], [2 * n, 10]) == [n, -704]
    assert (big[:n] == src[n:2 * n]).all()


def test_group_ids_share_a_segment(make_store):
    """ReplicateConfig.group_ids: the keys of a group land on one segment (docs/master.md, "Key groups");
    with two segments, 8 keys of a group on one by chance is 1 in 128 per group, 3 groups 1 in 2M."""
    a, b = make_store(), make_store()
    src = np.random.default_rng(7).integers(0, 255, 64 * 1024, dtype=np.uint8)
    assert a.register_buffer(addr(src), src.nbytes) == 0
    groups = ["g1"] * 8 + ["g2"] * 8 + ["g3"] * 8 + ["", ""]
    keys = ["grp_%d" % i for i in range(len(groups))]
    n = 2048
    cfg = ReplicateConfig()
    cfg.group_ids = groups[:-1]  # one short: every key -600, nothing written
    assert a.batch_put_from(keys, [addr(src) + i * n for i in range(len(keys))], [n] * len(keys), cfg) == \
        [-600] * len(keys)
    assert a.batch_is_exist(keys) == [0] * len(keys)
    # interleaved groups: the client splits the batch by group, results come back in request order
    order = list(range(0, len(keys), 2)) + list(range(1, len(keys), 2))
    got = a.batch_put_from([keys[i] for i in order], [addr(src) + i * n for i in order], [n] * len(keys),
                           _cfg_groups([groups[i] for i in order]))
    assert got == [0] * len(keys)
    for g in ("g1", "g2", "g3"):
        eps = {a.get_replica_desc(k)[0].get_memory_descriptor().buffer_descriptor.transport_endpoint
               for k, kg in zip(keys, groups) if kg == g}
        assert len(eps) == 1, (g, eps)
    out = np.zeros(n, dtype=np.uint8)
    for i, k in enumerate(keys):
        assert b.get_into(k, addr(out), n) == n and (out == src[i * n:(i + 1) * n]).all(), k
    # multi-buffer batches take them too
    mk = ["grp_m%d" % i for i in range(8)]
    assert a.batch_put_from_multi_buffers(mk, [[addr(src) + i * n, addr(src)] for i in range(8)], [[n, 16]] * 8,
                                          _cfg_groups(["gm"] * 8)) == [0] * 8
    eps = {a.get_replica_desc(k)[0].get_memory_descriptor().buffer_descriptor.transport_endpoint for k in mk}
    assert len(eps) == 1
    assert b.get("grp_m3") == src[3 * n:4 * n].tobytes() + src[:16].tobytes()
    # the copying batch takes them too
    assert b.put_batch(["grp_c0", "grp_c1"], [b"x" * 10, b"y" * 20], _cfg_groups(["gc", "gc"])) == 0
    assert b.get("grp_c0") == b"x" * 10 and b.get("grp_c1") == b"y" * 20
    assert b.put_batch(["grp_c2"], [b"z"], _cfg_groups(["gc", "gc"])) == -600


def _cfg_groups(groups):
    cfg = ReplicateConfig()
    cfg.group_ids = groups
    return cfg


def test_multi_buffers(make_store):
    s = make_store()
    parts = [np.full(1000 + i, i, dtype=np.uint8) for i in range(4)]
    out = [np.zeros(p.nbytes, dtype=np.uint8) for p in parts]
    ptrs, sizes = [addr(p) for p in parts], [p.nbytes for p in parts]
    assert s.batch_put_from_multi_buffers(["mb_a", "mb_b"], [ptrs[:2], ptrs[2:]], [sizes[:2], sizes[2:]]) == [0, 0]
    assert s.get_size("mb_a") == sizes[0] + sizes[1]
    assert s.get("mb_b") == parts[2].tobytes() + parts[3].tobytes()
    res = s.batch_get_into_multi_buffers(["mb_a", "mb_b", "mb_x"], [[addr(out[0]), addr(out[1])],
                                         [addr(out[2]), addr(out[3])], [addr(out[0])]],
                                         [sizes[:2], sizes[2:], [10]])
    assert res == [sizes[0] + sizes[1], sizes[2] + sizes[3], -704]
    assert all((o == p).all() for o, p in zip(out, parts))
    assert s.batch_get_into_multi_buffers(["mb_a"], [[addr(out[0])]], [[10]]) == [-600]  # too small
    assert s.batch_put_from_multi_buffers(["mb_e"], [[addr(out[0])]], [[0]]) == [-600]


def test_copying_p1_methods(make_store):
    s = make_store()
    assert s.put_batch(["pb_1", "pb_2"], [b"one", bytearray(b"two")]) == 0
    assert s.put_batch(["pb_1"], [b"a", b"b"]) == -600 and s.put_batch([], []) == 0
    assert s.get_batch(["pb_1", "pb_2", "pb_none"]) == [b"one", b"two", b""] and s.get_batch([]) == [b""]
    h = s.get_buffer("pb_1")
    assert isinstance(h, ms.BufferHandle) and h.size() == len(h) == 3 and h.ptr() != 0
    mv = memoryview(h)
    assert bytes(h) == b"one" and mv.format == "b" and mv.ndim == 1 and not mv.readonly
    hs = s.batch_get_buffer(["pb_2", "pb_none"])
    assert bytes(hs[0]) == b"two" and hs[1] is None and s.batch_get_buffer([]) == []
    assert s.put_parts("pp", b"head", memoryview(b"-"), np.frombuffer(b"tail", dtype=np.uint8)) == 0
    assert s.get("pp") == b"head-tail" and s.put_parts("pp_empty") == 0 and s.is_exist("pp_empty") == 0
    with pytest.raises(RuntimeError):
        s.put_parts("pp_bad", np.zeros((2, 2), dtype=np.uint8))
    with pytest.raises(RuntimeError):
        s.put_parts("pp_bad", np.zeros(4, dtype=np.float32))


def test_upserts(make_store):
    s = make_store()
    buf = np.arange(256, dtype=np.uint8)
    assert s.put("up", b"old") == 0 and s.upsert("up", b"new") == 0 and s.get("up") == b"new"
    assert s.upsert("up", b"longer value") == 0 and s.get("up") == b"longer value"
    assert s.upsert_from("up", addr(buf), 16) == 0 and s.get("up") == buf[:16].tobytes()
    assert s.upsert_parts("up", b"a", b"b") == 0 and s.get("up") == b"ab"
    assert s.batch_upsert_from(["up", "up2"], [addr(buf), addr(buf) + 8], [4, 4]) == [0, 0]
    assert s.get("up2") == buf[8:12].tobytes()
    assert s.upsert_batch(["up", "up3"], [b"x", b"y"]) == 0 and s.get("up3") == b"y"


def test_removal(make_store):
    s = make_store()
    for i in range(5):
        assert s.put("rm_%d" % i, b"v") == 0
    assert s.batch_remove(["rm_0", "rm_0", "rm_none"]) == [0, -704, -704]
    assert s.remove_by_regex("^rm_[12]$") == 2 and s.remove_by_regex("(") == -600
    for k in ("key1", "key22", "keyx"):
        assert s.put(k, b"v") == 0
    assert s.remove_by_regex(r"^key\d+$") == 2 and s.is_exist("keyx") == 1  # ECMAScript-style \d
    assert s.remove_by_regex(r"key\d+(") == -600
    assert s.remove_by_regex(r"^key[a-z]$", force=True) == 1  # keyx, leased by is_exist
    assert s.is_exist("rm_3") == 1  # leased
    assert s.remove_all() >= 1 and s.is_exist("rm_4") == 0 and s.is_exist("rm_3") == 1
    assert s.remove_all(force=True) >= 1 and s.is_exist("rm_3") == 0


def test_get_into_ranges(make_store):
    s = make_store()
    data = np.arange(1000, dtype=np.uint16).view(np.uint8)
    assert s.put("gr", data) == 0
    dst = np.zeros(4096, dtype=np.uint8)
    unreg = np.zeros(64, dtype=np.uint8)
    assert s.register_buffer(addr(dst), dst.nbytes) == 0
    r = s.get_into_ranges([addr(dst)], [["gr", "gr_none"]], [[[0, 100], [200]]], [[[10, 0], [0]]], [[[20, 5], [4]]])
    assert r == [[[20, 5], [-704]]]
    assert (dst[:20] == data[10:30]).all() and (dst[100:105] == data[:5]).all()
    r = s.get_into_ranges([addr(dst)], [["gr"]], [[[0]]], [[[1990]]], [[[20]]])  # past the object end
    assert r == [[[-600]]]
    assert s.get_into_ranges([addr(unreg)], [["gr"]], [[[0]]], [[[0]]], [[[8]]]) == [[[-600]]]
    assert s.get_into_ranges([addr(dst)], [["gr"]], [[[0, 1]]], [[[0]]], [[[1, 1]]]) == [[[-600, -600]]]
    assert s.get_into_ranges([addr(dst), 1], [["gr"]], [[[0]]], [[[0]]], [[[1]]]) == [[[-600]]]


def test_replica_desc_and_clear(make_store):
    s = make_store()
    assert s.put("rd", b"abc") == 0
    d = s.get_replica_desc("rd")
    assert len(d) == 1 and d[0].status == ms.ReplicaStatus.COMPLETE and d[0].is_memory_replica()
    assert not d[0].is_disk_replica() and not d[0].is_local_disk_replica()
    desc = d[0].get_memory_descriptor().buffer_descriptor
    assert desc.size == 3 and desc.buffer_address > 0 and repr(desc).startswith("<Descriptor size=3")
    assert list(s.batch_get_replica_desc(["rd", "rd_none"])) == ["rd"]
    assert s.get_replica_desc("rd_none") == []
    time.sleep(LEASE_S)  # get_replica_desc leased it
    assert s.batch_replica_clear(["rd"]) == ["rd"] and s.get_replica_desc("rd") == []


def test_batch_replica_clear(make_store, master):
    a, b = make_store(), make_store()
    two = ReplicateConfig()
    two.replica_num = 2
    assert a.put("rc_own", b"1" * 64) == 0 and a.put("rc_leased", b"2" * 64) == 0
    assert a.put("rc_two", b"3" * 64, two) == 0 and b.put("rc_other", b"4" * 64) == 0
    assert len(a.get_replica_desc("rc_two")) == 2
    assert a.get("rc_leased") == b"2" * 64  # leased for 500 ms
    got = a.batch_replica_clear(["rc_own", "rc_leased", "rc_other", "rc_missing", "", "rc_own"])
    assert got == ["rc_own"]
    assert a.is_exist("rc_own") == 0 and b.is_exist("rc_other") == 1 and a.is_exist("rc_leased") == 1
    time.sleep(LEASE_S)
    assert a.batch_replica_clear(["rc_leased"]) == ["rc_leased"] and a.is_exist("rc_leased") == 0
    # segment filter: only the replica on b's segment goes
    assert a.batch_replica_clear(["rc_two"], "no-such-segment:1") == []
    assert a.batch_replica_clear(["rc_two"], b.get_hostname()) == ["rc_two"]
    d = a.get_replica_desc("rc_two")
    assert len(d) == 1 and d[0].get_memory_descriptor().buffer_descriptor.size == 64
    assert a.get("rc_two") == b"3" * 64
    time.sleep(LEASE_S)
    assert a.batch_replica_clear(["rc_two"], a.get_hostname()) == ["rc_two"] and a.is_exist("rc_two") == 0
    assert b.batch_replica_clear(("rc_other",)) == ["rc_other"]
    assert a.batch_replica_clear([]) == []
    with pytest.raises(TypeError):
        a.batch_replica_clear([1])
    with pytest.raises(TypeError):
        a.batch_replica_clear(["x"], None)
    assert MooncakeDistributedStore().batch_replica_clear(["x"]) == []  # not set up: the error value
    body = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % master.metrics_port, timeout=5).read().decode()
    req = re.search(r"^master_batch_replica_clear_requests_total (\d+)$", body, re.M)
    items = re.search(r"^master_batch_replica_clear_items_total (\d+)$", body, re.M)
    assert req and int(req.group(1)) >= 7 and items and int(items.group(1)) >= 10


# ------------------------------------------------------------------ client HTTP server


def _http(port, path):
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def _metric(body, name):
    m = re.search(r"^%s (\S+)$" % re.escape(name), body, re.M)
    return float(m.group(1)) if m else None


def test_client_http_server(master, make_store):
    port = free_port()
    s = MooncakeDistributedStore()
    assert s.setup("127.0.0.1", master.metadata, 16 << 20, 16 << 20, "tcp", "", master.addr,
                   enable_client_http_server=True, client_http_port=port) == 0
    st, body = _http(port, "/health")
    h = json.loads(body)
    assert st == 200 and h["status"] == "ok" and h["segment"] == s.get_hostname() and h["master"] == master.addr
    st, before = _http(port, "/metrics")
    assert st == 200 and "# TYPE te_transfer_latency_seconds histogram" in before
    for n in ("te_transfer_latency_seconds_count", "te_transfer_latency_seconds_sum", "te_transfer_latency_p99",
              "store_client_read_bytes_total", "store_client_written_bytes_total", "store_client_lookup_hits_total"):
        assert _metric(before, n) is not None, n
    assert 'te_transfer_latency_seconds_bucket{le="+Inf"}' in before
    # transfers to another client's segment move the histogram; every put/get moves the byte counters
    other = make_store()
    cfg = ReplicateConfig()
    cfg.preferred_segments = [other.get_hostname()]
    assert s.put("http_k", b"z" * 4096, cfg) == 0 and s.get("http_k") == b"z" * 4096
    st, after = _http(port, "/metrics")
    assert _metric(after, "store_client_written_bytes_total") >= _metric(before, "store_client_written_bytes_total") + 4096
    assert _metric(after, "store_client_read_bytes_total") >= _metric(before, "store_client_read_bytes_total") + 4096
    assert _metric(after, "store_client_lookup_hits_total") >= _metric(before, "store_client_lookup_hits_total") + 1
    assert _metric(after, "te_transfer_latency_seconds_count") >= 2 and _metric(after, "te_transfer_latency_p99") > 0
    st, summ = _http(port, "/metrics/summary")
    assert st == 200 and summ.count("\n") == 1 and "client=%s" % s.get_hostname() in summ
    assert _http(port, "/nope")[0] == 404
    # a port in use: setup still succeeds, without the server
    s2 = MooncakeDistributedStore()
    assert s2.setup("127.0.0.1", master.metadata, 0, 0, "tcp", "", master.addr, enable_client_http_server=True,
                    client_http_port=port) == 0
    assert s2.health_check() == 0
    s2.close()
    assert _http(port, "/health")[0] == 200  # still the first client's
    s.close()
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen("http://127.0.0.1:%d/health" % port, timeout=5)


def test_client_http_health_master_down(make_store):
    m = Master()
    port = free_port()
    s = MooncakeDistributedStore()
    try:
        assert s.setup("127.0.0.1", m.metadata, 0, 0, "tcp", "", m.addr, enable_client_http_server=True,
                       client_http_port=port) == 0
        assert _http(port, "/health")[0] == 200
        m.stop()
        st, body = _http(port, "/health")
        assert st == 503 and json.loads(body)["status"] != "ok"
    finally:
        s.close()
        m.stop()


def test_p2_failure_values(make_store):
    s = make_store()
    assert s.mount_segment("/x", 10)["ret"] < 0 and s.allocate_and_mount_segment(0)["segment_ids"] == []
    assert s.unmount_segment(["nope"]) < 0 and s.setup_dummy(1, 1, "x") < 0 and s.alloc_from_mem_pool(10) == 0
    # tensor helpers: a non-tensor is -600 with torch (tests/python/test_tensor.py), -1012 without it
    bad = -600 if _tensor.torch_available() else -1012
    assert s.put_tensor("t", None) == bad and s.get_tensor("t") is None
    assert s.batch_get_tensor(["a", "b"]) == [None, None] and s.batch_put_tensor(["a"], [None]) == [bad]
    assert s.get_offload_rpc_read_count() == 0 and s.put_from_with_metadata("k", 0, 0, 10, 0) == 600


def _wait_task(s, tid, timeout=15):
    deadline = time.time() + timeout
    while True:
        r, rc = s.query_task(tid)
        assert rc == 0 and r is not None
        if r.status in (ms.TaskStatus.SUCCESS, ms.TaskStatus.FAILED) or time.time() > deadline:
            return r
        time.sleep(0.05)


def test_copy_move_tasks(make_store):
    """Copy and move tasks (docs/python.md, "Copy and move tasks"): the holder of the target moves the bytes."""
    a, b, c = make_store(gss=16 << 20), make_store(gss=16 << 20), make_store(gss=0)
    an, bn = a.get_hostname(), b.get_hostname()
    cfg = ReplicateConfig()
    cfg.preferred_segment = an
    data = {k: np.random.default_rng(i).integers(0, 256, 1 << 20, dtype=np.uint8).tobytes()
            for i, k in enumerate(("task_cp", "task_mv"))}
    for k, v in data.items():
        assert a.put(k, v, cfg) == 0
        assert [d.get_memory_descriptor().buffer_descriptor.transport_endpoint for d in c.get_replica_desc(k)] \
            == [a.get_replica_desc(k)[0].get_memory_descriptor().buffer_descriptor.transport_endpoint]
    tid, rc = c.create_copy_task("task_cp", [bn])
    assert rc == 0 and isinstance(tid, tuple) and len(tid) == 2 and all(isinstance(x, int) for x in tid)
    assert tid != (0, 0)
    r = _wait_task(c, tid)
    assert isinstance(r, ms.QueryTaskResponse) and r.id == tid and r.type == ms.TaskType.REPLICA_COPY
    assert r.status == ms.TaskStatus.SUCCESS and len(r.assigned_client) == 36
    assert r.last_updated_at_ms_epoch >= r.created_at_ms_epoch > 1600000000000
    with pytest.raises(AttributeError):
        r.status = ms.TaskStatus.FAILED
    assert len(c.get_replica_desc("task_cp")) == 2 and c.get("task_cp") == data["task_cp"]
    assert c.create_copy_task("task_cp", [bn]) == ((0, 0), -711)  # b holds one already
    tid, rc = c.create_move_task("task_mv", an, bn)
    assert rc == 0
    r = _wait_task(c, tid)
    assert r.type == ms.TaskType.REPLICA_MOVE and r.status == ms.TaskStatus.SUCCESS, r.message
    assert len(c.get_replica_desc("task_mv")) == 1 and c.get("task_mv") == data["task_mv"]
    assert c.create_move_task("task_mv", an, bn) == ((0, 0), -710)  # the source holds nothing now
    assert c.create_copy_task("task_none", [bn]) == ((0, 0), -704)
    assert c.create_copy_task("task_cp", ["127.0.0.1:1"]) == ((0, 0), -101)
    assert c.create_move_task("task_mv", bn, bn) == ((0, 0), -600)
    assert c.query_task((1, 2)) == (None, -1400) and c.query_task((0, 0)) == (None, -1400)
    with pytest.raises(TypeError):
        c.query_task([1, 2])
    with pytest.raises(TypeError):
        c.create_copy_task("task_cp", bn)  # a str is not a list of targets
    assert MooncakeDistributedStore().create_copy_task("k", [bn]) == ((0, 0), -600)  # not set up


def test_threads_share_one_store(make_store):
    s = make_store(lbs=32 << 20)
    errors = []

    def worker(t):
        buf = np.full(32 * 1024, t, dtype=np.uint8)
        out = np.zeros_like(buf)
        for i in range(30):
            k = "thr_%d_%d" % (t, i)
            if s.put(k, buf) != 0 or s.get(k) != buf.tobytes():
                errors.append(("put/get", k))
            if s.batch_put_from([k + "z"], [addr(buf)], [buf.nbytes]) != [0]:
                errors.append(("batch_put_from", k))
            if s.batch_get_into([k + "z"], [addr(out)], [out.nbytes]) != [buf.nbytes] or not (out == buf).all():
                errors.append(("batch_get_into", k))

    ts = [threading.Thread(target=worker, args=(t,)) for t in range(6)]
    [t.start() for t in ts]
    [t.join(60) for t in ts]
    assert not errors, errors[:5]


def test_gil_released_during_blocking_calls(master):
    """A setup that waits on a silent master must not stop other Python threads."""
    import socket
    lst = socket.socket()
    lst.bind(("127.0.0.1", 0))
    lst.listen(8)
    ticks = []
    stop = threading.Event()

    def ticker():
        while not stop.is_set():
            ticks.append(1)
            time.sleep(0.01)

    t = threading.Thread(target=ticker)
    t.start()
    s = MooncakeDistributedStore()
    rc = s.setup("127.0.0.1", master.metadata, 0, 0, "tcp", "", "127.0.0.1:%d" % lst.getsockname()[1])
    stop.set()
    t.join()
    lst.close()
    assert rc == -901 and len(ticks) > 20


def test_tenant_namespaces(master, make_store):
    """tenant_id isolates keys; remove_all / remove_by_regex stay inside the namespace."""
    from mooncake.store import MooncakeDistributedStore
    holder = make_store()  # default namespace, holds the bytes
    tenants = []
    for t in ("acme", "beta"):
        s = MooncakeDistributedStore()
        assert s.setup("127.0.0.1", master.metadata, 0, 16 << 20, "tcp", "", master.addr, tenant_id=t) == 0
        tenants.append(s)
    acme, beta = tenants
    assert holder.put("k", b"default") == 0
    assert acme.put("k", b"acme") == 0
    assert beta.put("k", b"beta") == 0
    assert (holder.get("k"), acme.get("k"), beta.get("k")) == (b"default", b"acme", b"beta")
    assert acme.put("x1", b"1") == 0 and acme.put("x2", b"2") == 0
    assert acme.remove_by_regex("^x", force=True) == 2
    assert beta.remove_all(force=True) == 1
    assert acme.is_exist("k") == 1 and holder.is_exist("k") == 1 and beta.is_exist("k") == 0
    assert holder.remove_all(force=True) == 1  # only the default namespace's "k"
    assert acme.get("k") == b"acme"
    # the dict form carries it too; a control character is refused
    s = MooncakeDistributedStore()
    assert s.setup({"local_hostname": "127.0.0.1", "metadata_server": master.metadata, "global_segment_size": "0",
                    "master_server_address": master.addr, "tenant_id": "acme"}) == 0
    assert s.get("k") == b"acme"
    s.close()
    assert MooncakeDistributedStore().setup("127.0.0.1", master.metadata, 0, 16 << 20, "tcp", "", master.addr,
                                            tenant_id="a\x1fb") != 0
    for t in tenants:
        t.close()
