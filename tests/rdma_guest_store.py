"""The store and the Python package over rdma, end to end on rxe0 in the RDMA guest (docs/testing.md, "The RDMA
guest"; run by tests/rdma_guest_suite.sh after test_rdma_guest): a mooncake_master with its HTTP metadata
server, a holder process (a store client with a 64 MiB segment) and a client process without a segment, both
set up with protocol "rdma" and device_name "rxe0", MC_SAME_HOST_PATH=0 so that the holder is reached over
rdma. The client puts and gets 1 B .. 8 MiB byte-exact and its log must say the holder's segment uses rdma;
then two Python TransferEngine objects initialized with protocol "rdma" write and read each other byte-exact.

  python3 rdma_guest_store.py BIN_DIR          (the driver; BIN_DIR holds mooncake_master)
"""
import os
import socket
import subprocess
import sys
import time

SIZES = (1, 4096, 65537, 1 << 20, 8 << 20)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc, timeout=60):
    end = time.monotonic() + timeout
    while time.monotonic() < end and proc.poll() is None:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return True
        time.sleep(0.1)
    return False


def data(n, seed):
    return bytes((i * 31 + seed) & 0xFF for i in range(min(n, 1 << 16))) * (n // (1 << 16) + 1)


def holder(meta, addr):
    from mooncake.store import MooncakeDistributedStore
    s = MooncakeDistributedStore()
    rc = s.setup("127.0.0.1", meta, 64 << 20, 16 << 20, "rdma", "rxe0", addr)
    print("ready %d" % rc, flush=True)
    sys.stdin.read()  # until the driver closes it
    s.close()


def client(meta, addr):
    from mooncake.store import MooncakeDistributedStore
    s = MooncakeDistributedStore()
    assert s.setup("127.0.0.1", meta, 0, 16 << 20, "rdma", "rxe0", addr) == 0
    for i, n in enumerate(SIZES):
        v = data(n, i)[:n]
        assert s.put("k%d" % n, v) == 0, n
        got = s.get("k%d" % n)
        assert got == v, (n, len(got))
    s.close()
    print("store ok", flush=True)


def engines():
    import ctypes
    from mooncake.engine import TransferEngine
    a, b = TransferEngine(), TransferEngine()
    assert a.initialize("127.0.0.1", "P2PHANDSHAKE", "rdma", "rxe0") == 0
    assert b.initialize("127.0.0.1", "P2PHANDSHAKE", "rdma", "rxe0") == 0
    n = 1 << 20
    src, dst, tgt = (ctypes.create_string_buffer(n) for _ in range(3))
    src.raw = data(n, 7)[:n]
    for buf, e in ((src, a), (dst, a), (tgt, b)):
        assert e.register_memory(ctypes.addressof(buf), n) == 0
    peer = "127.0.0.1:%d" % b.get_rpc_port()
    assert a.transfer_sync_write(peer, ctypes.addressof(src), ctypes.addressof(tgt), n) == 0
    assert tgt.raw == src.raw
    assert a.transfer_sync_read(peer, ctypes.addressof(dst), ctypes.addressof(tgt), n) == 0
    assert dst.raw == src.raw
    print("engine ok", flush=True)


def driver(bin_dir):
    env = dict(os.environ, MC_SAME_HOST_PATH="0")
    rpc, metrics, mport = free_port(), free_port(), free_port()
    master = subprocess.Popen([os.path.join(bin_dir, "mooncake_master"), "--rpc_port=%d" % rpc,
                               "--metrics_port=%d" % metrics, "--enable_http_metadata_server",
                               "--http_metadata_server_port=%d" % mport], env=env, stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    hold = None
    try:
        assert wait_port(rpc, master) and wait_port(mport, master), "the master did not start"
        meta, addr = "http://127.0.0.1:%d/metadata" % mport, "127.0.0.1:%d" % rpc
        hold = subprocess.Popen([sys.executable, __file__, "--holder", meta, addr], env=env, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True)
        line = hold.stdout.readline()
        assert line.strip() == "ready 0", "the holder did not set up: %r" % line
        t0 = time.monotonic()
        c = subprocess.run([sys.executable, __file__, "--client", meta, addr], env=dict(env, MC_LOG_LEVEL="INFO"),
                           capture_output=True, text=True, timeout=240)
        sys.stderr.write(c.stderr[-3000:])
        assert c.returncode == 0 and "store ok" in c.stdout, "the store client failed"
        paths = [ln for ln in c.stderr.splitlines() if "using protocol" in ln]
        assert paths and all(ln.endswith("using protocol rdma") for ln in paths), paths
        assert "requested but unavailable" not in c.stderr
        print("PASS: store put/get over rdma, %d sizes up to 8 MiB (%.1f s)" % (len(SIZES), time.monotonic() - t0))
        e = subprocess.run([sys.executable, __file__, "--engines"], env=dict(env, MC_LOG_LEVEL="INFO"),
                           capture_output=True, text=True, timeout=120)
        assert e.returncode == 0 and "engine ok" in e.stdout, e.stderr[-3000:]
        assert "using protocol rdma" in e.stderr and "requested but unavailable" not in e.stderr, e.stderr[-3000:]
        print("PASS: Python TransferEngine protocol=rdma write/read 1 MiB")
    finally:
        if hold:
            hold.stdin.close()
            hold.wait(30)
        master.terminate()
        master.wait(30)


if __name__ == "__main__":
    if sys.argv[1] == "--holder":
        holder(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "--client":
        client(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "--engines":
        engines()
    else:
        driver(sys.argv[1])
