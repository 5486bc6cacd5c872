"""mooncake.engine: the Transfer Engine (docs/python.md, "What is there").

TransferEngine's methods are implemented in C (mooncake._mooncake.Engine, over libmooncake_te); this
module adds initialize()'s metadata forms, the helper names and the P2 methods. RpcInterface (alias
CoroRPCInterface) comes from mooncake/_rpc.py. Before a successful
initialize() every method returns its failure value (-1, 0, [] or b"").
"""

import json
import os

from . import _mooncake
from ._rpc import CoroRPCInterface, ReceivedData, ReceivedTensor, RpcInterface  # noqa: F401 (upstream's names)
from ._rpc import create_rpc_client, create_rpc_server  # noqa: F401
from ._util import PybindEnum

SUPPORT_CUDA = False
SUPPORT_EFA = False
SUPPORT_HIP = False
SUPPORT_MNNVL = False
SUPPORT_MUSA = False
SUPPORT_INTRA_NVLINK = False


class TransferOpcode(PybindEnum):
    Read = 0
    Write = 1


Read = TransferOpcode.Read
Write = TransferOpcode.Write


class TransferNotify:
    """A notification delivered to the peer after a transfer completes."""

    def __init__(self, name="", msg=""):
        self.name = name
        self.msg = msg

    def __repr__(self):
        return "TransferNotify(name=%r, msg=%r)" % (self.name, self.msg)


class InnerTransferEngine:
    """Opaque handle of an initialized engine, for MooncakeDistributedStore.setup(engine=...). Keeps the
    engine alive while a store uses it."""

    def __init__(self, engine):
        self._engine = engine

    def get_engine_ptr(self):
        """The engine's native handle as an int (0 before initialize)."""
        return self._engine.get_engine_ptr()


_BACKENDS = ("etcd", "redis", "http", "https")


def _read_int(path, default):
    try:
        with open(path) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return default


def _topology(allow, root="/sys"):
    """The NIC priority matrix of the RDMA devices under <root>/class/infiniband (what ibv_get_device_list
    lists), each on its NUMA node (device/numa_node; -1 counts as node 0): per node of the host, the devices on
    it first, then the rest (docs/python.md, "Topology")."""
    want = {d.strip() for d in allow.split(",") if d.strip()}
    try:
        devs = sorted(os.listdir(os.path.join(root, "class", "infiniband")))
    except OSError:
        devs = []
    devs = [d for d in devs if not want or d in want]
    if not devs:
        return {}
    numa = {d: max(_read_int(os.path.join(root, "class", "infiniband", d, "device", "numa_node"), 0), 0)
            for d in devs}
    try:
        nodes = sorted(int(n[4:]) for n in os.listdir(os.path.join(root, "devices", "system", "node"))
                       if n.startswith("node") and n[4:].isdigit())
    except OSError:
        nodes = []
    nodes = sorted(set(nodes or [0]) | set(numa.values()))
    return {"cpu:%d" % n: [[d for d in devs if numa[d] == n], [d for d in devs if numa[d] != n]] for n in nodes}


class TransferEngine(_mooncake.Engine):
    """The transfer engine (docs/python.md, "What is there"): registered memory, one-sided reads and writes to
    peers by session id, notifies. Before a successful initialize() every method returns its failure value."""

    TransferOpcode = TransferOpcode

    def initialize(self, local_hostname, metadata_server, protocol, device_name):
        """Starts the engine: local_hostname ("host[:port]"), metadata_server (P2PHANDSHAKE, http://, etcd://,
        redis:// or bare host:port = etcd), protocol and device_name (a NIC allow-list or ""). 0 or -1."""
        for name, v in (("local_hostname", local_hostname), ("metadata_server", metadata_server),
                        ("protocol", protocol), ("device_name", device_name)):
            if not isinstance(v, str):
                raise TypeError("initialize(): %s must be str, not %s" % (name, type(v).__name__))
        if not local_hostname or not metadata_server:
            return -1
        self._host = local_hostname
        return self._initialize(local_hostname, metadata_server, protocol, device_name)

    def initialize_ext(self, local_hostname, metadata_server, protocol, device_name, metadata_type):
        """initialize() with the metadata backend named separately ("etcd", "redis", "http", "P2PHANDSHAKE")."""
        if not isinstance(metadata_type, str):
            raise TypeError("initialize_ext(): metadata_type must be str")
        conn = metadata_server
        if isinstance(conn, str) and metadata_type in _BACKENDS and "://" not in conn and conn != "P2PHANDSHAKE":
            conn = "%s://%s" % (metadata_type, conn)
        return self.initialize(local_hostname, conn, protocol, device_name)

    def get_session_id(self):
        """This engine's session id (what peers pass as target_hostname); "" before initialize()."""
        return self._session_id()

    def get_first_buffer_address(self, segment_name):
        """Lowest registered buffer address of a segment (this engine's own allowed), or 0."""
        if not isinstance(segment_name, str):
            raise TypeError("segment_name: expected str")
        text = self._segment_json(segment_name)
        try:
            bufs = json.loads(text).get("buffers") or [] if text else []
            return min(int(b["addr"]) for b in bufs) if bufs else 0
        except (ValueError, KeyError, TypeError, AttributeError):
            return 0

    def get_notifies(self):
        """Drains the notifies received so far: [TransferNotify] (each returned once)."""
        return [TransferNotify(n, m) for n, m in self._notifies()]

    def get_engine(self):
        """An InnerTransferEngine for MooncakeDistributedStore.setup(engine=...), or None before initialize."""
        return InnerTransferEngine(self) if self.get_engine_ptr() else None

    # P2
    def get_local_topology(self, device_name=None):
        """The engine's topology as JSON (devices discovered): {"cpu:<numa node>": [[the RDMA devices on that
        node], [the others]]}, as upstream's NIC priority matrix; device_name = a comma-separated allow-list
        ("" / None: every device). "{}" on a host without RDMA devices. Works before initialize() too."""
        if device_name is not None and not isinstance(device_name, str):
            raise TypeError("device_name: expected str or None")
        return json.dumps(_topology(device_name or ""))

    def warmup_efa_segment(self, segment_name):
        """EFA warm-up: no EFA transport here, so nothing to do; 0."""
        return 0

    def _no_cuda(self, *args, **kwargs):
        """CUDA variants: this build has no accelerator support (returns None)."""
        return None

    transfer_sync_write_on_cuda = transfer_sync_read_on_cuda = _no_cuda
    transfer_write_on_cuda = transfer_read_on_cuda = _no_cuda  # upstream's spellings
    batch_transfer_write_on_cuda = batch_transfer_read_on_cuda = _no_cuda
    batch_transfer_sync_write_on_cuda = batch_transfer_sync_read_on_cuda = _no_cuda
    batch_transfer_async_write_on_cuda = batch_transfer_async_read_on_cuda = _no_cuda
