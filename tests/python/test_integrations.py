"""The integration call sequences (docs/python.md, "Integrations"), replayed end to end with numpy arrays standing in
for KV-cache memory: vLLM's MooncakeStoreConnector, SGLang HiCache, LMCache's mooncakestore:// connector
and the prefill/decode connectors' TransferEngine writes."""

import asyncio
import threading
import time

import numpy as np

from mooncake.engine import TransferEngine
from mooncake.store import MooncakeDistributedStore, ReplicateConfig
from conftest import run_py


def addr(a):
    return a.ctypes.data


def test_vllm_store_connector(master):
    # 1-3: setup (7 positional), config, register the KV storage
    store = MooncakeDistributedStore()
    assert store.setup("127.0.0.1", master.metadata, 128 << 20, 64 << 20, "tcp", "", master.addr) == 0
    cfg = ReplicateConfig()
    cfg.preferred_segment = store.get_hostname()
    layers, blocks, block_bytes = 4, 32, 16 * 1024
    kv = [np.random.default_rng(l).integers(0, 255, blocks * block_bytes, dtype=np.uint8) for l in range(2 * layers)]
    restored = [np.zeros_like(t) for t in kv]
    for t in kv + restored:
        assert store.register_buffer(addr(t), t.nbytes) == 0
    key = lambda b: "model@tp_rank:0@pcp0@dcp0@pp_rank:0@%016x" % (b * 7919)
    errors = []

    def sender(lo, hi):  # 4: exist -> put the missing blocks from all layers' K/V
        keys = [key(b) for b in range(lo, hi)]
        ex = store.batch_is_exist(keys)
        todo = [k for k, e in zip(keys, ex) if e != 1]
        idx = [b for b, e in zip(range(lo, hi), ex) if e != 1]
        res = store.batch_put_from_multi_buffers(
            todo, [[addr(t) + b * block_bytes for t in kv] for b in idx], [[block_bytes] * len(kv) for _ in idx], cfg)
        if any(r < 0 for r in res):
            errors.append(("save", res))

    def receiver(lo, hi):  # 5: load into the (restored) KV memory
        keys = [key(b) for b in range(lo, hi)]
        res = store.batch_get_into_multi_buffers(
            keys, [[addr(t) + b * block_bytes for t in restored] for b in range(lo, hi)],
            [[block_bytes] * len(kv) for _ in range(lo, hi)])
        if res != [block_bytes * len(kv)] * (hi - lo):
            errors.append(("load", res))

    sender(0, 16)
    threads = [threading.Thread(target=sender, args=(16, 32))]
    threads += [threading.Thread(target=receiver, args=(i * 4, i * 4 + 4)) for i in range(4)]
    [t.start() for t in threads]
    [t.join(60) for t in threads]
    receiver(16, 32)
    assert not errors, errors
    assert all((a == b).all() for a, b in zip(kv, restored))
    assert len(store.batch_get_replica_desc([key(0)])[key(0)]) == 1
    # 6: lookup in a subprocess with its own store; a hit needs == 1
    code = ("from mooncake.store import MooncakeDistributedStore\ns = MooncakeDistributedStore()\n"
            "assert s.setup('127.0.0.1', %r, 64 << 20, 64 << 20, 'tcp', '', %r) == 0\n"
            "print(sum(1 for r in s.batch_is_exist(%r) if r == 1))") % (
                master.metadata, master.addr, [key(b) for b in range(40)])
    r = run_py(code)
    assert r.returncode == 0 and r.stdout.split()[-1] == b"32", r.stderr.decode()
    assert store.remove_all(force=True) >= 32
    assert store.close() == 0


def test_sglang_hicache(master):
    store = MooncakeDistributedStore()
    kw = dict(enable_client_http_server=False, client_http_port=9300, enable_ssd_offload=False,
              ssd_offload_path="", tenant_id="default")
    engine = TransferEngine()
    assert engine.initialize("127.0.0.1", "P2PHANDSHAKE", "tcp", "") == 0
    # 1: setup with the engine handed over (tp*pp = 2 shares of 256 MiB)
    assert store.setup("127.0.0.1", master.metadata, (256 << 20) // 2, 16 << 20, "tcp", "", master.addr,
                       engine.get_engine(), **kw) == 0
    # 2: warm-up
    k, v = "sglang_warmup_key", bytes(4096)
    for _ in range(10):
        if store.put(k, v) == 0:
            break
        time.sleep(1)
    assert store.is_exist(k) == 1 and store.get(k) == v
    # 3: host pool
    page, pages = 8192, 64
    pool = np.random.default_rng(3).integers(0, 255, page * pages, dtype=np.uint8)
    assert store.register_buffer(addr(pool), pool.nbytes) == 0
    keys = lambda hashes: [x for h in hashes for x in (f"{h}_0_k", f"{h}_0_v")]
    hashes = ["h%03d" % i for i in range(pages // 2)]

    def exists_prefix(hs):  # 4
        res = store.batch_is_exist(keys(hs))
        n = 0
        for r in res:
            if r != 1:
                break
            n += 1
        return n // 2

    def batch_set(hs, base):  # 5
        ks = keys(hs)
        ex = store.batch_is_exist(ks)
        miss = [i for i, e in enumerate(ex) if e != 1]
        res = store.batch_put_from([ks[i] for i in miss], [addr(pool) + (base + i) * page for i in miss],
                                   [page] * len(miss))
        return all(r == 0 for r in res)

    assert exists_prefix(hashes) == 0
    assert batch_set(hashes[:10], 0) and exists_prefix(hashes) == 10
    assert batch_set(hashes[:16], 0) and exists_prefix(hashes) == 16
    assert store.batch_put_from([], [], []) == []
    out = np.zeros_like(pool)
    ks = keys(hashes[:16])

    async def get_async():  # SGLang calls the store from asyncio.to_thread
        return await asyncio.to_thread(store.batch_get_into, ks, [addr(out) + i * page for i in range(32)],
                                       [page] * 32)

    res = asyncio.run(get_async())
    assert all(r > 0 for r in res) and (out[:32 * page] == pool[:32 * page]).all()
    assert store.remove_all() >= 0
    assert store.close() == 0
    del engine


def test_lmcache_connector(master):
    store = MooncakeDistributedStore()
    store.setup("127.0.0.1", master.metadata, 64 << 20, 32 << 20, "tcp", "", master.addr)
    cfg = ReplicateConfig()
    cfg.replica_num = 1
    cfg.preferred_segment = store.get_hostname()
    pinned = np.random.default_rng(5).integers(0, 255, 1 << 20, dtype=np.uint8)
    out = np.zeros_like(pinned)
    assert store.register_buffer(addr(pinned), pinned.nbytes) == 0
    assert store.register_buffer(addr(out), out.nbytes) == 0
    chunk = 64 * 1024
    keys = ["lmc@chunk%d" % i for i in range(8)]
    assert not store.is_exist(keys[0])
    for i, k in enumerate(keys):  # fast path: put_from
        assert store.put_from(k, addr(pinned) + i * chunk, chunk, cfg) == 0
    assert store.is_exist(keys[0])
    res = store.batch_get_into(keys + ["lmc@miss"], [addr(out) + i * chunk for i in range(9)], [chunk] * 9)
    assert res[:8] == [chunk] * 8 and res[8] <= 0
    assert (out[:8 * chunk] == pinned[:8 * chunk]).all()
    # legacy path: put_parts(header28, kv_bytes) + batch_get_buffer read through memoryview / frombuffer
    header = np.arange(28, dtype=np.uint8).tobytes()
    assert store.put_parts("lmc@legacy", header, pinned[:chunk]) == 0
    (h,) = store.batch_get_buffer(["lmc@legacy"])
    mv = memoryview(h)
    assert mv[:28].tobytes() == header and np.frombuffer(h, dtype=np.uint8)[28:].tobytes() == pinned[:chunk].tobytes()
    assert store.unregister_buffer(addr(pinned)) == 0 and store.unregister_buffer(addr(out)) == 0
    assert store.close() == 0


def test_pd_connector_engine_writes():
    prefill, decode = TransferEngine(), TransferEngine()
    assert prefill.initialize("127.0.0.1", "P2PHANDSHAKE", "tcp", "") == 0
    assert decode.initialize("127.0.0.1", "P2PHANDSHAKE", "tcp", "") == 0
    session = f"127.0.0.1:{decode.get_rpc_port()}"
    layers, nbytes = 4, 256 * 1024
    src = [np.random.default_rng(l).integers(0, 255, nbytes, dtype=np.uint8) for l in range(layers)]
    dst = [np.zeros(nbytes, dtype=np.uint8) for _ in range(layers)]
    assert prefill.batch_register_memory([addr(a) for a in src], [nbytes] * layers) == 0
    assert decode.batch_register_memory([addr(a) for a in dst], [nbytes] * layers) == 0
    assert prefill.register_memory(addr(src[0]) + nbytes + (1 << 30), 0) == -1
    # the decode side sends its base addresses out of band; prefill writes block by block
    block = 16 * 1024
    for b in range(nbytes // block):
        assert prefill.batch_transfer_sync_write(session, [addr(a) + b * block for a in src],
                                                 [addr(a) + b * block for a in dst], [block] * layers) == 0
    assert all((a == b).all() for a, b in zip(src, dst))
    assert prefill.send_probe(session) == 0
    assert prefill.transfer_sync_write(session, addr(src[0]), addr(dst[1]), 64) == 0
    assert dst[1][:64].tobytes() == src[0][:64].tobytes()
    assert decode.batch_unregister_memory([addr(a) for a in dst]) == 0
