#!/usr/bin/env python3
"""The Python twin of `store_bench --mode=client` for batch_put_from / batch_get_into (bench/run_py_bench.sh
compares the two): same cases (--cases=op:size:batch, op put|get), same key layout, same method (put: fresh
keys, written bytes removed untimed every --cap_bytes; get: a --ws_bytes working set read round-robin,
first 8 bytes of each object checked), same RESULT line. One thread, registered buffers."""

import argparse
import os
import sys
import time

import numpy as np

from mooncake.store import MooncakeDistributedStore, ReplicateConfig

UNITS = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}


def size(text):
    for u, m in UNITS.items():
        if text.endswith(u):
            return int(text[:-len(u)]) * m
    return int(text)


def put_case(s, cfg, buf, sz, batch, duration, cap_bytes, case_no):
    ptr = buf.ctypes.data
    ptrs, sizes = [ptr + j * sz for j in range(batch)], [sz] * batch
    cap_keys = max(batch, cap_bytes // sz // batch * batch)
    written, counter, calls, ok, timed = [], 0, 0, 0, 0.0
    start = time.perf_counter()
    while timed + (time.perf_counter() - start) < duration:
        if len(written) + batch > cap_keys:  # untimed: remove what we wrote
            timed += time.perf_counter() - start
            s.batch_remove(written, True)
            written = []
            start = time.perf_counter()
        keys = ["sb/%d/%d/0/%d" % (os.getpid(), case_no, counter + j) for j in range(batch)]
        counter += batch
        res = s.batch_put_from(keys, ptrs, sizes, cfg)
        ok += sum(1 for r in res if r == 0)
        calls += 1
        written += keys
    timed += time.perf_counter() - start
    s.batch_remove(written, True)
    return calls, ok, timed


def get_case(s, cfg, buf, sz, batch, duration, ws_bytes, case_no):
    n = max(2 * batch, ws_bytes // sz)
    keys = ["sbset/%d/%d/%d" % (os.getpid(), case_no, i) for i in range(n)]
    src = np.zeros(sz * batch, dtype=np.uint8)
    assert s.register_buffer(src.ctypes.data, src.nbytes) == 0
    for off in range(0, n, batch):
        chunk = keys[off:off + batch]
        for j in range(len(chunk)):
            src[j * sz:j * sz + 8] = np.frombuffer((off + j).to_bytes(8, "little"), dtype=np.uint8)
        res = s.batch_put_from(chunk, [src.ctypes.data + j * sz for j in range(len(chunk))], [sz] * len(chunk), cfg)
        assert all(r == 0 for r in res), res
    s.unregister_buffer(src.ctypes.data)
    ptr = buf.ctypes.data
    ptrs, sizes = [ptr + j * sz for j in range(batch)], [sz] * batch
    view = buf.view(np.uint64)
    stride = sz // 8
    pos, calls, ok = 0, 0, 0
    start = time.perf_counter()
    while time.perf_counter() - start < duration:
        idx = [(pos + j) % n for j in range(batch)]
        pos = (pos + batch) % n
        res = s.batch_get_into([keys[i] for i in idx], ptrs, sizes)
        ok += sum(1 for j, r in enumerate(res) if r == sz and view[j * stride] == idx[j])
        calls += 1
    timed = time.perf_counter() - start
    s.batch_remove(keys, True)
    return calls, ok, timed


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--metadata_server", required=True)
    p.add_argument("--master_server_addr", required=True)
    p.add_argument("--preferred", default="")
    p.add_argument("--cases", required=True)
    p.add_argument("--duration", type=float, default=2)
    p.add_argument("--cap_bytes", type=size, default=256 << 20)
    p.add_argument("--ws_bytes", type=size, default=256 << 20)
    p.add_argument("--local_buffer_size", type=size, default=16 << 20)
    a = p.parse_args()
    s = MooncakeDistributedStore()
    rc = s.setup("127.0.0.1", a.metadata_server, 0, a.local_buffer_size, "tcp", "", a.master_server_addr)
    if rc:
        sys.exit("setup failed: %d" % rc)
    cfg = ReplicateConfig()
    if a.preferred:
        cfg.preferred_segments = [a.preferred]
    bad = False
    for case_no, case in enumerate(a.cases.split(",")):
        op, sz, batch = case.split(":")
        sz, batch = size(sz), int(batch)
        buf = np.zeros(sz * batch, dtype=np.uint8)
        assert s.register_buffer(buf.ctypes.data, buf.nbytes) == 0
        fn = put_case if op == "put" else get_case
        calls, ok, secs = fn(s, cfg, buf, sz, batch, a.duration, a.cap_bytes if op == "put" else a.ws_bytes,
                             case_no)
        s.unregister_buffer(buf.ctypes.data)
        errors = calls * batch - ok
        bad |= errors > 0
        print("RESULT op=%s size=%d batch=%d threads=1 calls=%d keys=%d bytes=%d secs=%.3f gbps=%.3f errors=%d"
              % (op, sz, batch, calls, ok, ok * sz, secs, ok * sz / secs / 1e9, errors), flush=True)
    s.close()
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
