"""Upstream's RpcInterface / CoroRPCInterface of mooncake.engine (docs/python.md, "RpcInterface"): one-way
messages (bytes, or a tensor with its dtype and shape) sent to a peer's listening RpcInterface and handed to
the callback set there; every send waits for the receiver's acknowledgement.

The transport is the project's message API (include/mooncake/transfer_engine.h, "Messages", through
mooncake._mooncake.MsgServer / MsgClient): framed TCP with the receiver's status as the reply. Two kinds:
DATA (the bytes as they are) and TENSOR (a frame of ours: docs/python.md, "RpcInterface"). Upstream speaks
coro_rpc instead, so the two implementations do not talk to each other; the Python surface is upstream's.
"""

import atexit
import concurrent.futures
import ctypes
import logging
import struct
import threading
import weakref

from . import _mooncake

_log = logging.getLogger("mooncake")

KIND_DATA, KIND_TENSOR = 1, 2
TENSOR_MAGIC = b"MCTS"
_TENSOR_HEAD = struct.Struct("<4sBB")   # magic, dtype name length, ndim; then the name, ndim x u64, the data
MAX_DIMS = 8
MAX_BODY = 256 << 20                    # MC_MSG_MAX_BODY
# torch dtype name -> element size (the dtypes a tensor frame may carry)
DTYPE_SIZES = {"float32": 4, "float64": 8, "float16": 2, "bfloat16": 2, "int8": 1, "uint8": 1, "int16": 2,
               "uint16": 2, "int32": 4, "uint32": 4, "int64": 8, "uint64": 8, "bool": 1, "float8_e4m3fn": 1,
               "float8_e5m2": 1, "complex64": 8, "complex128": 16}
MAX_TARGETS = 1024                      # cached senders (one per target address) at most
_servers = weakref.WeakSet()
_pool = None
_pool_lock = threading.Lock()


def _split_hostport(addr):
    """(host, port) of "host:port" ("[v6]:port" too), or None."""
    if not isinstance(addr, str) or ":" not in addr:
        return None
    host, _, port = addr.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        return None
    return host, int(port)


def encode_tensor_frame(dtype, shape, data):
    """The TENSOR message body: "MCTS", u8 dtype name length, u8 ndim, the name (ASCII, e.g. "float32"),
    ndim little-endian u64 dimensions, then the tensor's bytes in row-major order."""
    name = dtype.encode()
    return _TENSOR_HEAD.pack(TENSOR_MAGIC, len(name), len(shape)) + name + \
        struct.pack("<%dQ" % len(shape), *shape) + data


def decode_tensor_frame(body):
    """(dtype name, shape, data memoryview) of a TENSOR body, or None (logged) for anything else: another
    magic, an unknown dtype, more than 8 dimensions, a size that is not the shape's."""
    if len(body) < _TENSOR_HEAD.size:
        return _bad("tensor frame of %d bytes" % len(body))
    magic, nlen, ndim = _TENSOR_HEAD.unpack_from(body, 0)
    off = _TENSOR_HEAD.size
    if magic != TENSOR_MAGIC or ndim > MAX_DIMS or len(body) < off + nlen + 8 * ndim:
        return _bad("bad tensor frame header")
    name = bytes(body[off:off + nlen]).decode("ascii", "replace")
    shape = list(struct.unpack_from("<%dQ" % ndim, body, off + nlen))
    data = memoryview(body)[off + nlen + 8 * ndim:]
    numel = 1
    for d in shape:
        numel *= d
    if name not in DTYPE_SIZES or numel * DTYPE_SIZES[name] != len(data):
        return _bad("tensor frame: dtype %r, shape %s, %d data bytes" % (name, shape, len(data)))
    return name, shape, data


def _bad(why):
    _log.error("RpcInterface: refused a message: %s", why)
    return None


class ReceivedData:
    """Bytes received (upstream's class; the data callback itself gets a dict {"source", "data"})."""

    def __init__(self, source_address="", data=b""):
        self.source_address = source_address
        self._data = bytes(data)
        self.data_size = len(self._data)

    def get_bytes(self):
        return self._data

    def get_memory_view(self):
        return memoryview(self._data)

    def __repr__(self):
        return "ReceivedData(source_address=%r, data_size=%d)" % (self.source_address, self.data_size)


class ReceivedTensor:
    """A tensor received: source_address, shape (list of int), dtype (torch's name, e.g. "float32"),
    total_bytes, and its bytes (row-major)."""

    def __init__(self, source_address, data, shape, dtype):
        self.source_address = source_address
        self._data = bytes(data)
        self.shape = list(shape)
        self.dtype = dtype
        self.total_bytes = len(self._data)

    def get_data_size(self):
        return len(self._data)

    def get_data_as_bytes(self):
        return self._data

    def get_memory_view(self):
        return memoryview(self._data)

    def __repr__(self):
        return "ReceivedTensor(shape=%r, dtype=%r, total_bytes=%d)" % (self.shape, self.dtype, self.total_bytes)


def _executor():
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = concurrent.futures.ThreadPoolExecutor(max_workers=8, thread_name_prefix="mooncake-rpc")
        return _pool


class RpcInterface:
    """Upstream's RpcInterface (alias CoroRPCInterface): initialize as a client and/or a server, send data or
    tensors to "host:port", receive them through callbacks. Sends return 0 or -1 (logged); the _async forms
    return an asyncio future resolved with 0 or failed with RuntimeError."""

    def __init__(self):
        self._lock = threading.Lock()
        self._ready = False
        self._listen = None
        self._threads = 0
        self._timeout_s = 30
        self._server = None
        self._stopped = threading.Event()
        self._clients = {}
        self._data_cb = None
        self._tensor_cb = None

    # -------------------------------------------------------------- setup

    def initialize(self, listen_address="", thread_count=0, timeout_seconds=30, pool_size=100):
        """Client setup, and a server's when listen_address ("host:port") is given. True, or False for a
        malformed address or argument."""
        if not isinstance(listen_address, str) or not all(
                isinstance(v, int) and not isinstance(v, bool) and v >= 0
                for v in (thread_count, timeout_seconds, pool_size)):
            raise TypeError("initialize(listen_address: str, thread_count, timeout_seconds, pool_size: int >= 0)")
        listen = _split_hostport(listen_address) if listen_address else None
        if listen_address and listen is None:
            _log.error("RpcInterface.initialize: bad listen address %r (host:port)", listen_address)
            return False
        self.stop_server()
        with self._lock:
            self._listen, self._threads = listen, thread_count
            self._timeout_s = timeout_seconds or 30
            self._clients = {}
            self._ready = True
        return True

    def initialize_client(self, pool_size=100, timeout_seconds=30):
        return self.initialize("", 0, timeout_seconds, pool_size)

    def initialize_server(self, listen_address, thread_count=8, timeout_seconds=30):
        return self.initialize(listen_address, thread_count, timeout_seconds, 100)

    def _start(self):
        with self._lock:
            if not self._ready or self._listen is None:
                _log.error("RpcInterface: start_server needs initialize() with a listen address")
                return False
            if self._server is not None:
                return True
            host, port = self._listen
            srv = _mooncake.MsgServer(host, port, min(self._threads, 16), self._timeout_s,
                                      _handler(weakref.ref(self)))
            if srv.port() < 0:
                _log.error("RpcInterface: cannot listen on %s:%d", host, port)
                return False
            self._server = srv
            self._stopped.clear()
            _servers.add(self)
            return True

    def start_server(self):
        """Starts the server and blocks until stop_server() (from another thread); True after a stop, False
        when it cannot start."""
        if not self._start():
            return False
        self._stopped.wait()
        return True

    def start_server_async(self):
        """Starts the server in the background: True, or False when it cannot listen."""
        return self._start()

    def start_server_impl(self, is_async=True):
        return self.start_server_async() if is_async else self.start_server()

    def stop_server(self):
        with self._lock:
            srv, self._server = self._server, None
        if srv is not None:
            srv.stop()
        self._stopped.set()

    def get_listen_port(self):
        """The port the server listens on (useful with port 0), or -1."""
        srv = self._server
        return srv.port() if srv is not None else -1

    def set_data_receive_callback(self, callback):
        """callback({"source": str, "data": bytes}) for every DATA message (upstream's dict)."""
        self._data_cb = callback

    def set_tensor_receive_callback(self, callback):
        """callback(ReceivedTensor) for every TENSOR message (without one, the data callback gets the
        tensor's bytes)."""
        self._tensor_cb = callback

    # -------------------------------------------------------------- receiving

    def _receive(self, kind, body):
        if kind == KIND_DATA:
            cb = self._data_cb
            if cb is not None:
                cb({"source": "", "data": body})
            return 0
        if kind != KIND_TENSOR:
            _bad("unknown message kind %d" % kind)
            return -600
        got = decode_tensor_frame(body)
        if got is None:
            return -600
        name, shape, data = got
        if self._tensor_cb is not None:
            self._tensor_cb(ReceivedTensor("", data, shape, name))
        elif self._data_cb is not None:
            self._data_cb({"source": "", "data": bytes(data)})
        return 0

    # -------------------------------------------------------------- sending

    def _client(self, target):
        hp = _split_hostport(target)
        if hp is None or hp[1] == 0:
            _log.error("RpcInterface: bad target address %r (host:port)", target)
            return None
        with self._lock:
            if not self._ready:
                return None
            c = self._clients.get(target)
            if c is None:
                if len(self._clients) >= MAX_TARGETS:
                    self._clients.pop(next(iter(self._clients)))  # freed once no send uses it
                c = self._clients[target] = _mooncake.MsgClient(hp[0], hp[1], self._timeout_s * 1000)
            return c

    def _send(self, target, kind, body):
        if not self._ready:
            _log.error("RpcInterface: send before initialize()")
            return -1
        if len(body) > MAX_BODY:
            _log.error("RpcInterface: a message of %d bytes exceeds %d", len(body), MAX_BODY)
            return -1
        c = self._client(target)
        rc = -1 if c is None else c.send(kind, body)
        if rc != 0:
            _log.error("RpcInterface: send to %s failed (%d)", target, rc)
            return -1
        return 0

    @staticmethod
    def _bytes(data):
        if isinstance(data, str) or data is None:
            raise TypeError("data: expected bytes-like, got %s" % type(data).__name__)
        return data if isinstance(data, (bytes, bytearray)) else memoryview(data).cast("B")

    def send_data(self, target_address, data):
        """Sends bytes (any bytes-like object) to target_address ("host:port"): 0 or -1."""
        return self._send(target_address, KIND_DATA, self._bytes(data))

    @staticmethod
    def _tensor_body(tensor):
        """The TENSOR body of a CPU tensor, or None (logged)."""
        if not all(hasattr(tensor, a) for a in ("data_ptr", "numel", "element_size", "shape", "dtype")):
            _log.error("RpcInterface.send_tensor: not a tensor (%s)", type(tensor).__name__)
            return None
        dev = getattr(getattr(tensor, "device", None), "type", "cpu")
        if dev != "cpu":
            _log.error("RpcInterface.send_tensor: a %s tensor cannot be sent: this build has no GPU transport, "
                       "copy it to the CPU first", dev)
            return None
        name = str(tensor.dtype).replace("torch.", "")
        if name not in DTYPE_SIZES or len(tensor.shape) > MAX_DIMS:
            _log.error("RpcInterface.send_tensor: dtype %s / %d dimensions not supported", name, len(tensor.shape))
            return None
        t = tensor.contiguous() if hasattr(tensor, "contiguous") else tensor
        n = t.numel() * t.element_size()
        data = ctypes.string_at(t.data_ptr(), n) if n else b""
        return encode_tensor_frame(name, [int(d) for d in t.shape], data)

    def send_tensor(self, target_address, tensor):
        """Sends a CPU tensor (dtype, shape and bytes) to target_address: 0 or -1."""
        body = self._tensor_body(tensor)
        return -1 if body is None else self._send(target_address, KIND_TENSOR, body)

    def _async(self, loop, fn, what):
        fut = loop.create_future()
        if not self._ready:
            fut.set_exception(RuntimeError("Communicator not initialized"))
            return fut

        def done(f):
            if fut.cancelled():
                return
            exc = f.exception()
            if exc is not None:
                fut.set_exception(RuntimeError("%s error: %s" % (what, exc)))
            elif f.result() != 0:
                fut.set_exception(RuntimeError("%s failed" % what))
            else:
                fut.set_result(0)

        _executor().submit(fn).add_done_callback(lambda f: loop.call_soon_threadsafe(done, f))
        return fut

    def send_data_async(self, target_address, data, loop):
        """send_data in the background: an asyncio future of `loop`, resolved with 0 or failed with
        RuntimeError("Send data failed")."""
        data = bytes(self._bytes(data))  # the caller may reuse its buffer once this returns
        return self._async(loop, lambda: self.send_data(target_address, data), "Send data")

    def send_tensor_async(self, target_address, tensor, loop):
        """send_tensor in the background (the tensor's bytes are taken now): a future as send_data_async's."""
        body = self._tensor_body(tensor) if self._ready else b""
        if body is None:
            fut = loop.create_future()
            fut.set_exception(RuntimeError("Send tensor failed"))
            return fut
        return self._async(loop, lambda: self._send(target_address, KIND_TENSOR, body), "Send tensor")


CoroRPCInterface = RpcInterface


def _handler(ref):
    """The server's handler: runs on a server thread (holding the GIL); a callback that raises is logged
    and the sender gets -600."""
    def handle(kind, body):
        rpc = ref()
        if rpc is None:
            return -600
        try:
            return rpc._receive(kind, body)
        except Exception:  # noqa: BLE001 - a user callback's error must not reach the transport
            _log.exception("RpcInterface: receive callback failed")
            return -600
    return handle


def create_rpc_client(local_rank=0, world_size=1):
    """An RpcInterface set up as a client (upstream's factory)."""
    r = RpcInterface()
    r.initialize("", 0, 30, 10)
    return r


def create_rpc_server(local_rank=0, world_size=1):
    """An RpcInterface set up to listen on 0.0.0.0:8080 (upstream's factory); start it with start_server*."""
    r = RpcInterface()
    r.initialize("0.0.0.0:8080", 0, 30, 10)
    return r


@atexit.register
def _stop_all():
    for r in list(_servers):
        r.stop_server()
