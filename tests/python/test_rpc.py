"""mooncake.engine.RpcInterface / CoroRPCInterface (docs/python.md, "RpcInterface") between real processes:
bytes and tensors sent to a peer arrive byte for byte (an echo process sends each back), the async forms
resolve their futures, failures are -1 / RuntimeError, hostile frames are refused with the server alive."""

import asyncio
import ctypes
import hashlib
import os
import subprocess
import sys
import threading
import time
import types

import pytest

from mooncake import _mooncake
from mooncake import engine as me
from mooncake.engine import RpcInterface
from ports import free_port

UPSTREAM_METHODS = {"initialize", "initialize_client", "initialize_server", "start_server", "start_server_async",
                    "stop_server", "send_data", "send_data_async", "send_tensor", "send_tensor_async",
                    "set_data_receive_callback", "set_tensor_receive_callback"}

# The echo peer: listens on argv[1]; every DATA message goes back to argv[2] prefixed with b"D"; every
# TENSOR comes back as DATA: b"T" + "<dtype>|<shape>|" + its bytes.
ECHO = r"""
import sys, time
from mooncake.engine import RpcInterface
srv, back = RpcInterface(), RpcInterface()
assert back.initialize_client()
def on_data(d):
    assert d["source"] == "" and isinstance(d["data"], bytes)
    back.send_data(sys.argv[2], b"D" + d["data"])
def on_tensor(t):
    head = ("%s|%s|" % (t.dtype, ",".join(map(str, t.shape)))).encode()
    assert t.total_bytes == t.get_data_size() == len(t.get_data_as_bytes()) == len(t.get_memory_view())
    back.send_data(sys.argv[2], b"T" + head + t.get_data_as_bytes())
srv.set_data_receive_callback(on_data)
srv.set_tensor_receive_callback(on_tensor)
assert srv.initialize_server(sys.argv[1], thread_count=2)
print("ready", flush=True)
srv.start_server()  # blocks until stop_server (never: the test kills this process)
"""


class Inbox:
    """A listening RpcInterface collecting what arrives."""

    def __init__(self):
        self.got, self.cv = [], threading.Condition()
        self.rpc = RpcInterface()
        self.addr = "127.0.0.1:%d" % free_port()
        assert self.rpc.initialize_server(self.addr, thread_count=2)
        self.rpc.set_data_receive_callback(self._put)
        assert self.rpc.start_server_async()

    def _put(self, d):
        with self.cv:
            self.got.append(d["data"])
            self.cv.notify_all()

    def take(self, n, timeout=60):
        with self.cv:
            assert self.cv.wait_for(lambda: len(self.got) >= n, timeout), "only %d of %d messages" % (len(self.got), n)
            out, self.got = self.got[:n], self.got[n:]
            return out


@pytest.fixture
def echo():
    inbox = Inbox()
    addr = "127.0.0.1:%d" % free_port()
    p = subprocess.Popen([sys.executable, "-c", ECHO, addr, inbox.addr], stdout=subprocess.PIPE,
                         env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    try:
        assert p.stdout.readline().strip() == b"ready"
        client = RpcInterface()
        assert client.initialize_client()
        yield client, addr, inbox
    finally:
        p.kill()
        p.wait()
        inbox.rpc.stop_server()


def test_names():
    assert me.CoroRPCInterface is me.RpcInterface
    assert UPSTREAM_METHODS <= set(dir(RpcInterface))
    for n in ("ReceivedData", "ReceivedTensor", "create_rpc_client", "create_rpc_server"):
        assert hasattr(me, n), n
    c = me.create_rpc_client()
    assert c.send_data("127.0.0.1:%d" % free_port(), b"x") == -1  # nobody there
    s = me.create_rpc_server()
    assert s._listen == ("0.0.0.0", 8080) and s.get_listen_port() == -1  # set up, not started
    d = me.ReceivedData("a", b"xyz")
    assert (d.source_address, d.data_size, d.get_bytes(), bytes(d.get_memory_view())) == ("a", 3, b"xyz", b"xyz")


def test_data_round_trip(echo):
    client, addr, inbox = echo
    payloads = [b"", b"\x00", os.urandom(1000), os.urandom(1025), os.urandom(3 << 20), bytearray(b"ba"),
                memoryview(b"0123456789")[2:7]]
    for p in payloads:
        assert client.send_data(addr, p) == 0
    back = inbox.take(len(payloads))
    assert [hashlib.sha256(b).hexdigest() for b in back] == \
        [hashlib.sha256(b"D" + bytes(p)).hexdigest() for p in payloads]
    # many threads through one client
    errs = []

    def burst(n):
        for i in range(10):
            if client.send_data(addr, b"%d-%d" % (n, i)) != 0:
                errs.append((n, i))

    ts = [threading.Thread(target=burst, args=(n,)) for n in range(4)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    assert errs == [] and sorted(inbox.take(40)) == sorted(b"D%d-%d" % (n, i) for n in range(4) for i in range(10))


def test_tensor_round_trip(echo):
    torch = pytest.importorskip("torch", reason="python3-torch is not installed (scripts/install-deps.sh)")
    client, addr, inbox = echo
    g = torch.Generator().manual_seed(5)
    tensors = [torch.randn(3, 4, generator=g), torch.arange(24, dtype=torch.int64).reshape(2, 3, 4)[:, 1],
               torch.tensor(7, dtype=torch.int16), torch.zeros(0, 5, dtype=torch.bfloat16),
               (torch.rand(17, generator=g) > 0.5), torch.randn(64, 1024, generator=g).to(torch.float16)]
    for t in tensors:
        assert client.send_tensor(addr, t) == 0
    for t, b in zip(tensors, inbox.take(len(tensors))):
        c = t.contiguous()
        raw = ctypes.string_at(c.data_ptr(), c.numel() * c.element_size()) if c.numel() else b""
        name = str(t.dtype).replace("torch.", "")
        assert b == b"T" + ("%s|%s|" % (name, ",".join(map(str, t.shape)))).encode() + raw
        got = torch.frombuffer(bytearray(raw), dtype=t.dtype).reshape(t.shape) if raw else None
        assert got is None or torch.equal(got, c)
    # a tensor that lives elsewhere fails clearly (no GPU transport here)
    fake = types.SimpleNamespace(data_ptr=lambda: 0, numel=lambda: 1, element_size=lambda: 4, shape=(1,),
                                 dtype=torch.float32, device=types.SimpleNamespace(type="cuda"))
    assert client.send_tensor(addr, fake) == -1
    assert client.send_tensor(addr, object()) == -1
    assert client.send_tensor(addr, torch.zeros(2, dtype=torch.complex64)) == 0  # carried as its bytes
    assert inbox.take(1)[0].startswith(b"Tcomplex64|2|")


def test_async_forms(echo):
    client, addr, inbox = echo
    loop = asyncio.new_event_loop()
    try:
        async def go():
            a = client.send_data_async(addr, b"async-1", loop)
            b = client.send_data_async(addr, bytearray(b"async-2"), loop)
            return await asyncio.gather(a, b)
        assert loop.run_until_complete(go()) == [0, 0]
        assert sorted(inbox.take(2)) == [b"Dasync-1", b"Dasync-2"]
        dead = "127.0.0.1:%d" % free_port()
        with pytest.raises(RuntimeError):
            loop.run_until_complete(client.send_data_async(dead, b"x", loop))
        fresh = RpcInterface()
        with pytest.raises(RuntimeError, match="not initialized"):
            loop.run_until_complete(fresh.send_data_async(addr, b"x", loop))
        try:
            import torch
        except ImportError:
            return
        assert loop.run_until_complete(client.send_tensor_async(addr, torch.ones(3), loop)) == 0
        assert inbox.take(1)[0] == b"Tfloat32|3|" + b"\x00\x00\x80\x3f" * 3  # 1.0f little-endian
    finally:
        loop.close()


def test_failures_are_values():
    r = RpcInterface()
    assert r.send_data("127.0.0.1:1", b"x") == -1  # before initialize
    assert r.start_server_async() is False and r.start_server() is False
    assert r.initialize_client()
    assert r.start_server_async() is False  # no listen address
    for bad in ("nowhere", "host:", "host:99999", ":80", "127.0.0.1:0"):
        assert r.send_data(bad, b"x") == -1, bad
    t0 = time.monotonic()
    assert r.send_data("127.0.0.1:%d" % free_port(), b"x") == -1 and time.monotonic() - t0 < 30
    with pytest.raises(TypeError):
        r.send_data("127.0.0.1:1", "a str is not bytes")
    assert r.initialize("not an address") is False
    taken = RpcInterface()
    port = free_port()
    assert taken.initialize_server("127.0.0.1:%d" % port) and taken.start_server_async()
    other = RpcInterface()
    assert other.initialize_server("127.0.0.1:%d" % port) and other.start_server_async() is False
    taken.stop_server()


def test_start_server_blocks_until_stopped():
    r = RpcInterface()
    assert r.initialize_server("127.0.0.1:0")
    out = []
    th = threading.Thread(target=lambda: out.append(r.start_server()))
    th.start()
    deadline = time.monotonic() + 30
    while r.get_listen_port() < 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert r.get_listen_port() > 0 and th.is_alive()
    r.stop_server()
    th.join(30)
    assert out == [True] and r.get_listen_port() == -1


def test_hostile_frames():
    """Frames that are not ours are refused (-600 to the sender), never handed to a callback; a callback
    that raises costs its sender -1 and nothing else."""
    inbox = Inbox()
    tensors = []
    inbox.rpc.set_tensor_receive_callback(tensors.append)
    host, port = inbox.addr.split(":")
    raw = _mooncake.MsgClient(host, int(port), 10000)
    from mooncake._rpc import encode_tensor_frame
    good = encode_tensor_frame("int32", [2, 2], b"\x01" * 16)
    bad = [b"", b"MCTS", b"XXXX" + good[4:], encode_tensor_frame("int32", [2, 2], b"\x01" * 15),
           encode_tensor_frame("int33", [2, 2], b"\x01" * 16), encode_tensor_frame("int32", [1] * 9, b"\x01" * 4),
           good[:10], encode_tensor_frame("int32", [1 << 62, 1 << 62], b"\x01" * 16)]
    try:
        for b in bad:
            assert raw.send(2, b) == -600, b[:16]
        assert raw.send(7, b"unknown kind") == -600
        assert tensors == []
        assert raw.send(2, good) == 0 and len(tensors) == 1
        t = tensors[0]
        assert (t.dtype, t.shape, t.get_data_as_bytes()) == ("int32", [2, 2], b"\x01" * 16)

        def boom(d):
            raise ValueError("callback failure")
        inbox.rpc.set_data_receive_callback(boom)
        client = RpcInterface()
        assert client.initialize_client()
        assert client.send_data(inbox.addr, b"x") == -1
        inbox.rpc.set_data_receive_callback(inbox._put)
        assert client.send_data(inbox.addr, b"still alive") == 0 and inbox.take(1) == [b"still alive"]
    finally:
        raw.close()
        inbox.rpc.stop_server()
