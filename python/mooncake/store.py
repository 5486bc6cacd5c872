"""mooncake.store: the Mooncake Store client (docs/python.md).

MooncakeDistributedStore's data methods are implemented in C (mooncake._mooncake.Store, over
libmooncake_store); this module adds setup()'s argument forms, the helper classes and enums, and the
long-tail (P2) names, which return their documented failure values. Failures are return values, never
exceptions, except TypeError from argument conversion (docs/python.md, "Conventions").
"""

import atexit
import ctypes
import logging
import weakref

from . import _mooncake, _tensor
from ._tensor import ParallelAxis, ReadTarget, TensorParallelism  # noqa: F401 (upstream's request shapes)
from ._tensor import _deserialize_tensor, _serialize_tensor, _tensor_metadata_size  # noqa: F401 (upstream's)
from ._util import PybindEnum, parse_bool, parse_size

_log = logging.getLogger("mooncake")

INVALID_PARAMS = -600
NOT_SUPPORTED = -1012
_U64 = 1 << 64

# ------------------------------------------------------------------ enums


class SoftPinAction(PybindEnum):
    PRESERVE = 0
    ENABLE = 1
    DISABLE = 2


class ReplicaStatus(PybindEnum):
    UNDEFINED = 0
    INITIALIZED = 1
    PROCESSING = 2
    COMPLETE = 3
    REMOVED = 4
    FAILED = 5


class ObjectDataType(PybindEnum):
    UNKNOWN = 0
    KVCACHE = 1
    TENSOR = 2
    WEIGHT = 3
    SAMPLE = 4
    ACTIVATION = 5
    GRADIENT = 6
    OPTIMIZER_STATE = 7
    METADATA = 8
    GENERAL = 9


class TaskType(PybindEnum):
    REPLICA_COPY = 0
    REPLICA_MOVE = 1


class TaskStatus(PybindEnum):
    PENDING = 0
    PROCESSING = 1
    FAILED = 2
    SUCCESS = 3


for _e in (ReplicaStatus, ObjectDataType):
    globals().update(_e.__members__)

# ------------------------------------------------------------------ ReplicateConfig


def _check_uint(name, v):
    if isinstance(v, bool) or not isinstance(v, int) or v < 0 or v >= _U64:
        raise TypeError("%s: expected an int in [0, 2^64), got %r" % (name, v))
    return v


class ReplicateConfig:
    """Per-put placement policy (docs/python.md, "`ReplicateConfig`"). No arguments; every field is an attribute."""

    __slots__ = ("_replica_num", "_nof_replica_num", "_dfs_replica_num", "_soft_pin_action", "_soft_pin_ttl_ms",
                 "with_hard_pin", "preferred_segments", "preferred_segment", "preferred_nof_segments",
                 "prefer_alloc_in_same_node", "data_type", "group_ids")

    def __init__(self):
        self._replica_num = 1
        self._nof_replica_num = 0
        self._dfs_replica_num = 0
        self._soft_pin_action = SoftPinAction.PRESERVE
        self._soft_pin_ttl_ms = None
        self.with_hard_pin = False
        self.preferred_segments = []
        self.preferred_segment = ""
        self.preferred_nof_segments = []
        self.prefer_alloc_in_same_node = False
        self.data_type = ObjectDataType.UNKNOWN
        self.group_ids = None

    def _uint_property(attr):  # noqa: N805 - a property factory used in the class body
        def get(self):
            return getattr(self, attr)

        def set_(self, v):
            setattr(self, attr, _check_uint(attr[1:], v))
        return property(get, set_)

    replica_num = _uint_property("_replica_num")
    nof_replica_num = _uint_property("_nof_replica_num")
    dfs_replica_num = _uint_property("_dfs_replica_num")

    @property
    def soft_pin_action(self):
        return self._soft_pin_action

    @soft_pin_action.setter
    def soft_pin_action(self, v):
        try:
            self._soft_pin_action = SoftPinAction(v)
        except ValueError:
            raise TypeError("soft_pin_action: expected a SoftPinAction, got %r" % (v,)) from None

    @property
    def soft_pin_ttl_ms(self):
        return self._soft_pin_ttl_ms

    @soft_pin_ttl_ms.setter
    def soft_pin_ttl_ms(self, v):
        self._soft_pin_ttl_ms = None if v is None else _check_uint("soft_pin_ttl_ms", v)

    def __str__(self):
        parts = ["replica_num: %d" % self.replica_num, "nof_replica_num: %d" % self.nof_replica_num,
                 "dfs_replica_num: %d" % self.dfs_replica_num,
                 "soft_pin_action: %s" % SoftPinAction(self.soft_pin_action).name,
                 "soft_pin_ttl_ms: %s" % ("default" if self.soft_pin_ttl_ms is None else self.soft_pin_ttl_ms),
                 "with_hard_pin: %d" % bool(self.with_hard_pin),
                 "preferred_segments: [%s]" % ", ".join(self.preferred_segments)]
        if self.preferred_segment:
            parts.append("preferred_segment: %s" % self.preferred_segment)
        parts += ["preferred_nof_segments: [%s]" % ", ".join(self.preferred_nof_segments),
                  "prefer_alloc_in_same_node: %d" % bool(self.prefer_alloc_in_same_node),
                  "data_type: %s" % ObjectDataType(self.data_type).name]
        if self.group_ids is not None:
            parts.append("group_ids: [%s]" % ", ".join(self.group_ids))
        return "ReplicateConfig: { " + ", ".join(parts) + " }"

    __repr__ = __str__

# ------------------------------------------------------------------ helper classes


BufferHandle = _mooncake.BufferHandle


class Descriptor:
    """Where one memory replica lives."""

    def __init__(self, size=0, buffer_address=0, transport_endpoint=""):
        self.size = size
        self.buffer_address = buffer_address
        self.transport_endpoint = transport_endpoint

    def __repr__(self):
        return "<Descriptor size=%d buffer_address=%d transport_endpoint=%s>" % (
            self.size, self.buffer_address, self.transport_endpoint)


class MemoryDescriptor:
    def __init__(self, buffer_descriptor=None):
        self.buffer_descriptor = buffer_descriptor if buffer_descriptor is not None else Descriptor()


class DiskDescriptor:
    def __init__(self, file_path="", object_size=0):
        self.file_path = file_path
        self.object_size = object_size


class ReplicaDescriptor:
    """One replica of an object (this store only has memory replicas)."""

    def __init__(self, status, memory=None, disk=None):
        self._status = ReplicaStatus(status)
        self._memory = memory
        self._disk = disk

    @property
    def status(self):
        return self._status

    def is_memory_replica(self):
        return self._memory is not None

    def is_disk_replica(self):
        return self._disk is not None

    def is_local_disk_replica(self):
        return False

    def get_memory_descriptor(self):
        return self._memory if self._memory is not None else MemoryDescriptor()

    def get_disk_descriptor(self):
        return self._disk if self._disk is not None else DiskDescriptor()


class QueryTaskResponse:  # what query_task returns (docs/python.md, "Copy and move tasks"); read-only
    __slots__ = ("_v",)
    _FIELDS = ("id", "type", "status", "created_at_ms_epoch", "last_updated_at_ms_epoch", "assigned_client", "message")

    def __init__(self, id=(0, 0), type=TaskType.REPLICA_COPY, status=TaskStatus.FAILED, created_at_ms_epoch=0,
                 last_updated_at_ms_epoch=0, assigned_client="", message=""):
        object.__setattr__(self, "_v", (id, type, status, created_at_ms_epoch, last_updated_at_ms_epoch,
                                        assigned_client, message))

    def __setattr__(self, name, value):
        raise AttributeError("QueryTaskResponse is read-only")

    def __repr__(self):
        return "QueryTaskResponse(%s)" % ", ".join("%s=%r" % kv for kv in zip(self._FIELDS, self._v))


for _i, _f in enumerate(QueryTaskResponse._FIELDS):
    setattr(QueryTaskResponse, _f, property(lambda self, _i=_i: self._v[_i]))


_libc = ctypes.CDLL(None)
_libc.malloc.restype = ctypes.c_void_p
_libc.malloc.argtypes = [ctypes.c_size_t]
_libc.free.argtypes = [ctypes.c_void_p]


class MooncakeHostMemAllocator:
    """Host memory for SGLang's standalone mode: alloc(size) -> address (0 on failure), free(ptr) -> 0."""

    def alloc(self, size):
        _check_uint("size", size)
        return (_libc.malloc(size) or 0) if size else 0

    def free(self, ptr):
        _check_uint("ptr", ptr)
        if ptr:
            _libc.free(ptr)
        return 0


def bind_to_numa_node(node):  # P2: NUMA binding is not implemented
    return -1


def _get_pyclient_from_wrapper(wrapper):
    """The native store handle of a MooncakeDistributedStore as a PyCapsule ("mooncake_store_t"), or None for
    anything else (upstream hands its C++ client to its own extensions this way)."""
    get = getattr(wrapper, "_get_pyclient_capsule", None)
    return get() if isinstance(wrapper, _mooncake.Store) and get else None


def get_alloc_func_addr():
    return ctypes.cast(_libc.malloc, ctypes.c_void_p).value


def get_free_func_addr():
    return ctypes.cast(_libc.free, ctypes.c_void_p).value


class MooncakeDistributedNoFRegister:  # P2: NVMe-oF is not supported
    def register(self, *args, **kwargs):
        return NOT_SUPPORTED


from .buffer_pool import BufferPool  # noqa: E402  (docs/python.md, "BufferPool")

# ------------------------------------------------------------------ the store

_MISSING = object()
_live = weakref.WeakSet()


@atexit.register
def _close_all():
    """Interpreter exit tears every store down as close() would (SGLang never calls close)."""
    for s in list(_live):
        try:
            s.close()
        except Exception:  # pragma: no cover - never let exit fail
            pass


def _dict_setup_args(cfg):
    """The dict form of setup (docs/python.md, "`setup`"): (positional tuple, keywords) or an error code."""
    def get(key, alias=None, default=""):
        if key in cfg:
            return str(cfg[key])
        if alias and alias in cfg:
            return str(cfg[alias])
        return default

    host, meta = get("local_hostname"), get("metadata_server")
    if not host or not meta:
        _log.error("setup: local_hostname and metadata_server are required")
        return INVALID_PARAMS
    gss = parse_size(get("global_segment_size", default="16777216"))
    lbs = parse_size(get("local_buffer_size", default="16777216"))
    if gss is None or (0 < gss < 1024):
        _log.error("setup: invalid global_segment_size %r", cfg.get("global_segment_size"))
        return INVALID_PARAMS
    if lbs is None or (lbs and not (1024 <= lbs <= (1 << 40))):
        _log.error("setup: invalid local_buffer_size %r", cfg.get("local_buffer_size"))
        return INVALID_PARAMS
    port = get("client_http_port", default="9300").strip()
    if not port.isdigit():
        _log.error("setup: invalid client_http_port %r", port)
        return INVALID_PARAMS
    kw = dict(enable_ssd_offload=parse_bool(get("enable_ssd_offload", default="false"), False),
              ssd_offload_path=get("ssd_offload_path"), tenant_id=get("tenant_id", default="default"),
              enable_client_http_server=parse_bool(get("enable_client_http_server", default="false"), False),
              client_http_port=int(port), zone=get("zone"))
    return (host, meta, gss, lbs, get("protocol", default="tcp"), get("rdma_devices", "device_name"),
            get("master_server_addr", "master_server_address", "127.0.0.1:50051")), kw


def _loc(protocol, location):
    if not isinstance(protocol, str) or not isinstance(location, str):
        raise TypeError("protocol and location: expected str")
    return location


class MooncakeDistributedStore(_mooncake.Store):
    """A store client (docs/python.md, "Conventions"). States: NEW -> setup -> READY -> close -> CLOSED -> setup ..."""

    def __init__(self):
        _live.add(self)

    def setup(self, local_hostname=_MISSING, metadata_server=_MISSING, global_segment_size=16 * 1024 * 1024,
              local_buffer_size=16 * 1024 * 1024, protocol="tcp", rdma_devices=_MISSING,
              master_server_addr=_MISSING, engine=None, enable_ssd_offload=False, ssd_offload_path="",
              tenant_id="default", enable_client_http_server=False, client_http_port=9300, *,
              device_name=_MISSING, master_server_address=_MISSING, zone=None):
        """Connects to the master and metadata service and mounts global_segment_size bytes (0: a pure client).

        Also setup(config_dict). Returns 0, -600 for bad input or an unreachable dependency, -1 when no auto-picked
        port worked, else the failing mount's code (docs/python.md)."""
        if isinstance(local_hostname, dict) and metadata_server is _MISSING:
            parsed = _dict_setup_args(local_hostname)
            if isinstance(parsed, int):
                return parsed
            args, kw = parsed
            return self.setup(*args, **kw)
        if local_hostname is _MISSING or metadata_server is _MISSING:
            raise TypeError("setup() missing required argument: %s" %
                            ("'local_hostname'" if local_hostname is _MISSING else "'metadata_server'"))
        if rdma_devices is not _MISSING and device_name is not _MISSING:
            raise TypeError("setup(): rdma_devices and its alias device_name given together (device_name)")
        if master_server_addr is not _MISSING and master_server_address is not _MISSING:
            raise TypeError("setup(): master_server_addr and its alias master_server_address given together "
                            "(master_server_address)")
        dev = rdma_devices if rdma_devices is not _MISSING else (device_name if device_name is not _MISSING else "")
        master = master_server_addr if master_server_addr is not _MISSING else (
            master_server_address if master_server_address is not _MISSING else "127.0.0.1:50051")
        for name, v in (("local_hostname", local_hostname), ("metadata_server", metadata_server),
                        ("protocol", protocol), ("rdma_devices", dev), ("master_server_addr", master),
                        ("ssd_offload_path", ssd_offload_path), ("tenant_id", tenant_id)):
            if not isinstance(v, str):
                raise TypeError("setup(): %s must be str, not %s" % (name, type(v).__name__))
        if isinstance(client_http_port, bool) or not isinstance(client_http_port, int):
            raise TypeError("setup(): client_http_port must be int")
        engine_ptr = 0
        if engine is not None:
            get_ptr = getattr(engine, "get_engine_ptr", None)
            if get_ptr is None:
                raise TypeError("setup(): engine must be None or TransferEngine.get_engine()")
            engine_ptr = get_ptr()
            if not engine_ptr:
                _log.error("setup: the engine passed with engine= is not initialized")
                return INVALID_PARAMS
        if enable_client_http_server and not 1 <= client_http_port <= 65535:
            _log.error("setup: client_http_port %d is not in 1-65535", client_http_port)
            return INVALID_PARAMS
        # the local-disk tier (docs/disk-tier.md): asked for with enable_ssd_offload; "" lets the library take
        # $MOONCAKE_OFFLOAD_FILE_STORAGE_PATH
        ssd_path = (ssd_offload_path or "") if enable_ssd_offload else None
        if ssd_offload_path and not enable_ssd_offload:
            _log.warning("setup: ssd_offload_path is ignored without enable_ssd_offload=True")
        return self._setup(local_hostname, metadata_server, global_segment_size, local_buffer_size, protocol, dev,
                           master, engine, engine_ptr, zone, bool(enable_client_http_server),
                           client_http_port if enable_client_http_server else 0, tenant_id, ssd_path)

    # ---------------------------------------------------------------- P1 implemented in Python

    def put_parts(self, key, *parts, config=None):
        """Stores the concatenation of parts (bytes-like) through the staging buffer: 0 or an error (empty: 0)."""
        value = _join_parts(parts)
        return 0 if not value else self.put(key, value, config)

    def upsert_parts(self, key, *parts, config=None):
        """Insert or replace with the concatenation of parts: 0 or an error."""
        value = _join_parts(parts)
        return 0 if not value else self.upsert(key, value, config)

    def get_replica_desc(self, key):
        """The key's readable replicas as [ReplicaDescriptor] ([] on any failure); grants a read lease."""
        if not isinstance(key, str):
            raise TypeError("key: expected str")
        r = self._replica_desc(key)
        if isinstance(r, int):
            return []
        return [ReplicaDescriptor(st, memory=MemoryDescriptor(Descriptor(size, addr, ep)))
                for st, size, addr, ep, _seg in r]

    def batch_get_replica_desc(self, keys):
        """{key: [ReplicaDescriptor]} for keys that have readable replicas (failed keys omitted)."""
        out = {}
        for k in _str_list(keys, "keys"):
            d = self.get_replica_desc(k)
            if d:
                out[k] = d
        return out

    def batch_replica_clear(self, keys, segment_name=""):
        """Drops the replicas of keys this client wrote that are complete and unleased ("" = every replica,
        else only the one on that segment); returns the cleared keys, [] on error."""
        keys = _str_list(keys, "keys")
        if not isinstance(segment_name, str):
            raise TypeError("segment_name: expected str")
        return self._batch_replica_clear(keys, segment_name)

    def get_into_ranges(self, buffer_ptrs, all_keys, all_dst_offsets, all_src_offsets, all_sizes):
        """Buffer-major ranged reads: buffer b, key j, fragment f copies all_sizes[b][j][f] bytes from object
        offset all_src_offsets[b][j][f] to buffer offset all_dst_offsets[b][j][f]. Result shaped like all_dst_offsets:
        bytes read or negative (-600 outside the object or the registered buffer, -704 missing key)."""
        ptrs = [_check_uint("buffer_ptrs", p) for p in _seq(buffer_ptrs, "buffer_ptrs")]
        keys = [_str_list(k, "all_keys") for k in _seq(all_keys, "all_keys")]
        dst = [[_uint_list(f, "all_dst_offsets") for f in _seq(b, "all_dst_offsets")]
               for b in _seq(all_dst_offsets, "all_dst_offsets")]
        src = [[_uint_list(f, "all_src_offsets") for f in _seq(b, "all_src_offsets")]
               for b in _seq(all_src_offsets, "all_src_offsets")]
        sizes = [[_uint_list(f, "all_sizes") for f in _seq(b, "all_sizes")] for b in _seq(all_sizes, "all_sizes")]
        result = [[[INVALID_PARAMS] * len(f) for f in b] for b in dst]
        if not (len(ptrs) == len(keys) == len(dst) == len(src) == len(sizes)):
            return result
        # zero-copy: one get session for the distinct keys (one lookup), then every fragment as its own
        # ranged read straight into its destination, so each fragment gets its own result
        where, ek, ep, ez, eo = [], [], [], [], []
        for b, base in enumerate(ptrs):
            if not (len(keys[b]) == len(dst[b]) == len(src[b]) == len(sizes[b])):
                continue
            for j, key in enumerate(keys[b]):
                d, s, z = dst[b][j], src[b][j], sizes[b][j]
                if not (len(d) == len(s) == len(z)):
                    continue
                for f in range(len(d)):
                    if base + d[f] < _U64:
                        where.append((b, j, f))
                        ek.append(key), ep.append([base + d[f]]), ez.append([z[f]]), eo.append([s[f]])
        if not ek:
            return result
        uniq = list(dict.fromkeys(ek))
        started = dict(zip(uniq, self.batch_get_session_start(uniq)))
        try:
            got = self.batch_get_into_multi_buffer_ranges(ek, ep, ez, eo)
        finally:
            self.batch_get_session_end(uniq)
        for (b, j, f), key, r in zip(where, ek, got):
            result[b][j][f] = started[key] if started[key] < 0 else r
        return result

    def init_all(self, protocol, device_name, mount_segment_size=16 * 1024 * 1024):
        """Legacy setup on fixed local addresses (localhost:12345, etcd 127.0.0.1:2379, master 127.0.0.1:50051)."""
        if self._ready:
            return INVALID_PARAMS
        return self._setup("localhost:12345", "127.0.0.1:2379", mount_segment_size, 1 << 30, protocol or "tcp",
                           device_name or "", "127.0.0.1:50051")

    # ---------------------------------------------------------------- P2: documented failure values

    def create_copy_task(self, key, targets):  # copy/move tasks: docs/python.md, "Copy and move tasks"
        """Asks the master to copy key's object to each segment in targets (1..8 segment names); a client owning
        the first target performs it. ((hi, lo) task id, 0), or ((0, 0), negative ErrorCode)."""
        if not isinstance(key, str):
            raise TypeError("key: expected str")
        hi, lo, rc = self._create_copy_task(key, list(_str_list(targets, "targets")))
        return (hi, lo), rc

    def create_move_task(self, key, source, target):
        """Asks the master to move key's replica on segment source to segment target (the source replica is
        freed once the copy is complete and its readers are done). ((hi, lo) task id, 0), or ((0, 0), negative)."""
        for name, v in (("key", key), ("source", source), ("target", target)):
            if not isinstance(v, str):
                raise TypeError("%s: expected str" % name)
        hi, lo, rc = self._create_move_task(key, source, target)
        return (hi, lo), rc

    def query_task(self, task_id):
        """(QueryTaskResponse, 0) for a task id of create_copy_task / create_move_task, or (None, negative
        ErrorCode): -1400 an unknown or forgotten task."""
        if not isinstance(task_id, tuple) or len(task_id) != 2:
            raise TypeError("task_id: expected a 2-tuple of ints")
        r = self._query_task(_check_uint("task_id[0]", task_id[0]), _check_uint("task_id[1]", task_id[1]))
        if isinstance(r, int):
            return None, r
        return QueryTaskResponse((r[0], r[1]), TaskType(r[2]), TaskStatus(r[3]), r[4], r[5], r[6], r[7]), 0

    def mount_segment(self, path, size, offset=0, protocol="tcp", location=""):
        """Mounts size bytes of the file at path (from offset, page-aligned; shared mapping) as one more segment
        of this client, under its segment name. {"ret": 0 or negative, "segment_ids": [id]} (docs/python.md,
        "Extra segments")."""
        if not isinstance(path, str) or not path:
            raise TypeError("path: expected a non-empty str")
        rc, sid = self._mount_extra(path, offset, size, _loc(protocol, location))
        return {"ret": rc, "segment_ids": [sid] if rc == 0 else []}

    def allocate_and_mount_segment(self, size, protocol="tcp", location=""):
        """Allocates size bytes and mounts them as one more segment of this client.
        {"ret": 0 or negative, "segment_ids": [id], "allocated_size": bytes}."""
        rc, sid = self._mount_extra(None, 0, size, _loc(protocol, location))
        return {"ret": rc, "segment_ids": [sid] if rc == 0 else [], "allocated_size": size if rc == 0 else 0}

    def _unmount(self, segment_ids, grace_period_seconds, free):
        ids = _str_list(segment_ids, "segment_ids")
        grace = _check_uint("grace_period_seconds", grace_period_seconds)
        rc = 0
        for sid in ids:
            r = self._unmount_extra(sid, min(grace * 1000, _U64 - 1), free)
            rc = rc or r
        return rc

    def unmount_segment(self, segment_ids, grace_period_seconds=0):
        """Unmounts extra segments (mount_segment / allocate_and_mount_segment). grace_period_seconds > 0: they
        stay readable and take no new allocations, and the master unmounts them when the grace ends. 0, or the
        first failure (-101 an id that is not a mounted extra segment of this client)."""
        return self._unmount(segment_ids, grace_period_seconds, False)

    def unmount_and_free_segment(self, segment_ids, grace_period_seconds=0):
        """unmount_segment, then gives the segments' memory back (the mapping or the allocation; after the
        grace period). 0 or the first failure."""
        return self._unmount(segment_ids, grace_period_seconds, True)

    def unmount_local_disk_segment(self, grace_period_seconds=0):
        """Unmounts this client's local-disk (SSD offload) segment: there is none here (no SSD offload), so
        -101; -1 before setup."""
        _check_uint("grace_period_seconds", grace_period_seconds)
        return -101 if self._ready else -1

    def setup_dummy(self, mem_pool_size, local_buffer_size, server_address):
        """Standalone mode (docs/standalone.md): every later call goes to the mooncake_client process of this
        host named by server_address's port; the methods route there inside the C library."""
        return self._setup_dummy(mem_pool_size, local_buffer_size, server_address)

    def alloc_from_mem_pool(self, size):
        """Standalone mode: the address of size bytes in this dummy's shared memory pool (usable as a zero-copy
        buffer for put_from / get_into and their batch forms), or 0 (not a dummy, or the pool is exhausted)."""
        return self._alloc_from_mem_pool(size)

    def put_from_with_metadata(self, key, buffer_ptr, metadata_buffer_ptr, size, metadata_size, config=None):
        """Stores metadata_size bytes at metadata_buffer_ptr followed by size bytes at buffer_ptr as one object
        (zero-copy, as batch_put_from_multi_buffers). 0 on success (size 0: 0, nothing stored; an existing key:
        0, value kept); on failure the positive ErrorCode (an upstream quirk: 600, 200, ...); -1 when not set up
        or with prefer_alloc_in_same_node."""
        if not isinstance(key, str):
            raise TypeError("key: expected str")
        ptrs = [_check_uint("metadata_buffer_ptr", metadata_buffer_ptr), _check_uint("buffer_ptr", buffer_ptr)]
        lens = [_check_uint("metadata_size", metadata_size), _check_uint("size", size)]
        if not self._ready or (config is not None and getattr(config, "prefer_alloc_in_same_node", False)):
            return -1
        if lens[1] == 0:
            return 0
        rc = self.batch_put_from_multi_buffers([key], [ptrs], [lens], config)[0]
        return -rc if rc < 0 else 0

    def get_offload_rpc_read_count(self):
        """Reads served through SSD offload RPCs: always 0 (no SSD offload here)."""
        return 0


# Tensor helpers (docs/python.md, "Tensors"): mooncake/_tensor.py, installed when torch can be found;
# without torch every name returns its failure value.
if _tensor.torch_available():
    _tensor.install(MooncakeDistributedStore)
else:
    def _torch_missing(default):
        def method(self, *args, **kwargs):
            """Tensor helper: torch is not installed, so it returns its failure value."""
            return default(args) if callable(default) else default
        return method

    def _batch_len(args):
        return len(args[0]) if args and isinstance(args[0], (list, tuple)) else 0

    for _n in _tensor.PUT_NAMES:
        setattr(MooncakeDistributedStore, _n, _torch_missing(NOT_SUPPORTED))
    for _n in _tensor.BATCH_PUT_NAMES:
        setattr(MooncakeDistributedStore, _n, _torch_missing(lambda a: [NOT_SUPPORTED] * _batch_len(a)))
    for _n in _tensor.GET_NAMES:
        setattr(MooncakeDistributedStore, _n, _torch_missing(None))
    for _n in _tensor.BATCH_GET_NAMES:
        setattr(MooncakeDistributedStore, _n, _torch_missing(lambda a: [None] * _batch_len(a)))

# ------------------------------------------------------------------ argument helpers


def _seq(o, name):
    if o is None or isinstance(o, (str, bytes)) or not hasattr(o, "__len__"):
        raise TypeError("%s: expected a list, got %s" % (name, type(o).__name__))
    return list(o)


def _str_list(o, name):
    out = _seq(o, name)
    for k in out:
        if not isinstance(k, str):
            raise TypeError("%s: expected a list of str" % name)
    return out


def _uint_list(o, name):
    return [_check_uint(name, v) for v in _seq(o, name)]


def _join_parts(parts):
    out = []
    for p in parts:
        try:
            mv = memoryview(p)
        except TypeError:
            raise RuntimeError("put_parts: every part must be a 1-D byte buffer") from None
        if mv.ndim != 1 or mv.itemsize != 1:
            raise RuntimeError("put_parts: every part must be a 1-D byte buffer")
        out.append(mv)
    return b"".join(out)
