"""Cross-process: one Python process puts, another reads with get / get_into / batch_get_into; a
TransferEngine pair in two processes does batch_transfer_sync_write under P2PHANDSHAKE."""

import json
import subprocess
import sys
import textwrap
import time

from conftest import run_py
import os


def test_store_put_in_one_process_read_in_another(master):
    writer = textwrap.dedent('''
        import sys, time
        import numpy as np
        from mooncake.store import MooncakeDistributedStore
        s = MooncakeDistributedStore()
        assert s.setup("127.0.0.1", %r, 64 << 20, 16 << 20, "tcp", "", %r) == 0
        data = np.arange(300000, dtype=np.uint8)
        assert s.put("xp_small", b"from-writer") == 0
        assert s.put_from("xp_big", data.ctypes.data, data.nbytes) == 0
        assert s.batch_put_from(["xp_b%%d" %% i for i in range(8)], [data.ctypes.data + i * 1000 for i in range(8)],
                                [1000] * 8) == [0] * 8
        print("ready", flush=True)
        sys.stdin.readline()  # hold the segment until the reader is done
        s.close()
    ''') % (master.metadata, master.addr)
    reader = textwrap.dedent('''
        import numpy as np
        from mooncake.store import MooncakeDistributedStore
        s = MooncakeDistributedStore()
        assert s.setup("127.0.0.1", %r, 0, 16 << 20, "tcp", "", %r) == 0
        data = np.arange(300000, dtype=np.uint8)
        assert s.get("xp_small") == b"from-writer"
        out = np.zeros(300000, dtype=np.uint8)
        assert s.get_into("xp_big", out.ctypes.data, out.nbytes) == 300000 and (out == data).all()
        dst = np.zeros(8000, dtype=np.uint8)
        r = s.batch_get_into(["xp_b%%d" %% i for i in range(8)], [dst.ctypes.data + i * 1000 for i in range(8)],
                             [1000] * 8)
        assert r == [1000] * 8, r
        assert all((dst[i * 1000:(i + 1) * 1000] == data[i * 1000:(i + 1) * 1000]).all() for i in range(8))
        print("reader ok")
    ''') % (master.metadata, master.addr)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    w = subprocess.Popen([sys.executable, "-c", writer], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
    try:
        assert w.stdout.readline().strip() == b"ready"
        for forced_tcp in ({}, {"MC_FORCE_TCP": "1"}):  # same-host path, then real TCP
            r = run_py(reader, env=forced_tcp)
            assert r.returncode == 0 and b"reader ok" in r.stdout, r.stderr.decode()
    finally:
        w.stdin.write(b"\n")
        w.stdin.close()
        assert w.wait(30) == 0


ENGINE_TARGET = textwrap.dedent('''
    import json, sys
    from mooncake.engine import TransferEngine
    e = TransferEngine()
    assert e.initialize("127.0.0.1", "P2PHANDSHAKE", "tcp", "") == 0
    buf = e.allocate_managed_buffer(1 << 20)
    assert buf != 0
    print(json.dumps({"session": "127.0.0.1:%d" % e.get_rpc_port(), "addr": buf}), flush=True)
    sys.stdin.readline()
    print(json.dumps({"data": e.read_bytes_from_buffer(buf, 64).hex(),
                      "notifies": [[n.name, n.msg] for n in e.get_notifies()]}), flush=True)
''')


def start_engine_target():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    p = subprocess.Popen([sys.executable, "-c", ENGINE_TARGET], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         env=env)
    info = json.loads(p.stdout.readline())
    return p, info


def finish_engine_target(p):
    p.stdin.write(b"\n")
    p.stdin.flush()
    out = json.loads(p.stdout.readline())
    p.stdin.close()
    assert p.wait(30) == 0
    return out


def test_engine_pair_batch_transfer_sync_write_p2p():
    p, info = start_engine_target()
    try:
        code = textwrap.dedent('''
            from mooncake.engine import TransferEngine, TransferNotify, TransferOpcode
            e = TransferEngine()
            assert e.initialize("127.0.0.1", "P2PHANDSHAKE", "tcp", "") == 0
            src = e.allocate_managed_buffer(4096)
            assert e.write_bytes_to_buffer(src, bytes(range(64)), 64) == 0
            peer, base = %r, %d
            assert e.batch_transfer_sync_write(peer, [src, src + 32], [base, base + 32], [32, 32]) == 0
            assert e.transfer_sync(peer, src, base + 1000, 8, TransferOpcode.Write, TransferNotify("n", "done")) == 0
            assert e.batch_transfer_sync_write(peer, [src], [base, base], [1]) == -1  # length mismatch
            assert e.batch_transfer_sync_write(peer, [], [], []) == 0
            assert e.batch_transfer_sync_write("127.0.0.1:1", [src], [base], [8]) == -1
            assert e.send_probe(peer) == 0
            assert e.get_first_buffer_address(peer) == base
            print("initiator ok")
        ''') % (info["session"], info["addr"])
        r = run_py(code)
        assert r.returncode == 0 and b"initiator ok" in r.stdout, r.stderr.decode()
    finally:
        out = finish_engine_target(p)
    assert bytes.fromhex(out["data"]) == bytes(range(64))
    assert ["n", "done"] in out["notifies"] or any(n[1] == "done" for n in out["notifies"]), out["notifies"]
