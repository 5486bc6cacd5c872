"""Tensor helpers of MooncakeDistributedStore (docs/python.md, "Tensors").

A stored tensor object is a 304-byte header followed by the tensor's bytes in row-major order; the header
is upstream Mooncake's, byte for byte (little-endian, layout in docs/python.md, "Tensor object format"), so
objects written by either implementation read with the other. torch is optional: this module imports
without it (the classes ParallelAxis, TensorParallelism and ReadTarget need no torch); mooncake.store
installs the methods below only when torch can be found, and each one still answers with its failure value
if importing torch fails when it is first called.

The unified parallelism family (*_with_parallelism, writer partitions, manifests) is in mooncake/_parallel.py
and installed with these.

Conventions: puts return a status (0 or a negative code; batches one per key), gets a tensor or None
(batches None per failed key), getters "into" a buffer a tensor viewing that buffer. Hostile objects (bad
magic, ndim > 8, unknown dtype, a shape that does not match the payload) read as None, never as an
exception or an out-of-bounds access.
"""

import copy
import ctypes
import importlib.util
import json
import logging
import os
import struct

_log = logging.getLogger("mooncake")

INVALID_PARAMS = -600
FILE_NOT_FOUND = -1100  # upstream's code for "no tensor under that key" in save_tensor_to_safetensor
NOT_SUPPORTED = -1012

MAGIC = 0x4d4f4f4e
VERSION = 1
MAX_DIMS = 8
MAX_AXES = 4
LAYOUT_FULL, LAYOUT_SHARD = 0, 1
_HDR = struct.Struct("<IHHiiIIQQ")      # magic, version, header_size, dtype, ndim, layout_kind, flags, offset, bytes
_SHAPES = struct.Struct("<8q8qII")      # global shape, local shape (unused dims -1), axis_count, reserved
_AXIS = struct.Struct("<iiiiiiq")       # kind, axis_index, shard_rank, shard_count, split_dim, reserved0, reserved1
HEADER_SIZE = _HDR.size + _SHAPES.size + MAX_AXES * _AXIS.size  # 304

# dtype enum (value = index) -> torch attribute name, element size
_DTYPES = [("float32", 4), ("float64", 8), ("int8", 1), ("uint8", 1), ("int16", 2), ("uint16", 2), ("int32", 4),
           ("uint32", 4), ("int64", 8), ("uint64", 8), ("bool", 1), ("float16", 2), ("bfloat16", 2),
           ("float8_e4m3fn", 1), ("float8_e5m2", 1)]
_AXIS_KINDS = {"dp": 0, "tp": 1, "ep": 2, "pp": 3}
_AXIS_NAMES = {v: k for k, v in _AXIS_KINDS.items()}
_AXIS_KIND_MAX = 4  # RESERVED


def torch_available():
    """True when torch can be found (without importing it)."""
    try:
        return importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):  # sys.modules["torch"] = None makes find_spec raise ValueError
        return False


_torch_mod = None


def _torch():
    """torch, imported on first use; None (logged) when it cannot be imported."""
    global _torch_mod
    if _torch_mod is None:
        try:
            import torch
        except Exception as e:  # noqa: BLE001 - a broken torch install must not escape as an exception
            _log.error("tensor helpers: torch cannot be imported (%s)", e)
            return None
        _torch_mod = torch
    return _torch_mod


# ------------------------------------------------------------------ upstream's request shapes (classes)


class ParallelAxis:
    """One parallel axis of a shard: kind "tp", "dp", "ep" or "pp", rank, size, optional split_dim, expert_id,
    stage_id (upstream's ParallelAxis: a plain object with read/write fields)."""

    __slots__ = ("kind", "rank", "size", "split_dim", "expert_id", "stage_id")

    def __init__(self, kind="", rank=0, size=1, split_dim=None, expert_id=None, stage_id=None):
        self.kind, self.rank, self.size = kind, rank, size
        self.split_dim, self.expert_id, self.stage_id = split_dim, expert_id, stage_id

    def __repr__(self):
        return "ParallelAxis(kind=%r, rank=%r, size=%r, split_dim=%r)" % (self.kind, self.rank, self.size,
                                                                           self.split_dim)


class TensorParallelism:
    """A shard's identity: `axes`, a list of ParallelAxis."""

    __slots__ = ("axes",)

    def __init__(self, axes=None):
        self.axes = list(axes) if axes is not None else []

    def __repr__(self):
        return "TensorParallelism(axes=%r)" % (self.axes,)


class ReadTarget:
    """What a read wants: mode "as_stored" (the object as written), "shard" (the shard `parallelism` names) or
    "full" (the whole tensor, reassembled from shards when needed)."""

    __slots__ = ("_mode", "parallelism")
    _MODES = ("as_stored", "shard", "full")

    def __init__(self, mode="as_stored", parallelism=None):
        self._mode = "as_stored"
        self.mode = mode
        self.parallelism = parallelism

    @property
    def mode(self):
        return self._mode

    @mode.setter
    def mode(self, v):
        if not isinstance(v, str) or v.lower() not in self._MODES:
            raise ValueError("Unsupported ReadTarget mode %r" % (v,))
        self._mode = v.lower()

    def __repr__(self):
        return "ReadTarget(mode=%r, parallelism=%r)" % (self._mode, self.parallelism)


# ------------------------------------------------------------------ header encode / decode


def _dtype_code(torch, dtype):
    for code, (name, _) in enumerate(_DTYPES):
        if getattr(torch, name, None) == dtype:
            return code
    return None


def encode_header(dtype_code, global_shape, local_shape, layout=LAYOUT_FULL, axes=(), data_bytes=0):
    """The 304-byte header; axes are (kind, rank, count, split_dim, reserved0, reserved1) tuples."""
    pad = lambda s: list(s) + [-1] * (MAX_DIMS - len(s))  # noqa: E731
    out = bytearray(HEADER_SIZE)
    _HDR.pack_into(out, 0, MAGIC, VERSION, HEADER_SIZE, dtype_code, len(global_shape), layout, 0, HEADER_SIZE,
                   data_bytes)
    _SHAPES.pack_into(out, _HDR.size, *pad(global_shape), *pad(local_shape), len(axes), 0)
    for i, (kind, rank, count, split_dim, r0, r1) in enumerate(axes):
        _AXIS.pack_into(out, _HDR.size + _SHAPES.size + i * _AXIS.size, kind, i, rank, count, split_dim, r0, r1)
    return out


class Meta:
    """A decoded, validated header."""

    __slots__ = ("dtype", "ndim", "layout", "offset", "nbytes", "global_shape", "local_shape", "axes")


def decode_header(head, total):
    """Meta for the first HEADER_SIZE bytes of an object of `total` bytes, or None (logged) when the header is
    not a valid one for that size: the same checks as upstream's reader, so both refuse the same objects."""
    if total < HEADER_SIZE or len(head) < HEADER_SIZE:
        return _bad("object of %d bytes is shorter than a tensor header" % total)
    magic, version, hsize, dtype, ndim, layout, _flags, offset, nbytes = _HDR.unpack_from(head, 0)
    f = _SHAPES.unpack_from(head, _HDR.size)
    gshape, lshape, naxes = f[0:8], f[8:16], f[16]
    if magic != MAGIC or version != VERSION or hsize != HEADER_SIZE:
        return _bad("bad magic/version/header size (%#x, %d, %d)" % (magic, version, hsize))
    if not 0 <= dtype < len(_DTYPES):
        return _bad("dtype %d out of range" % dtype)
    if not 0 <= ndim <= MAX_DIMS:
        return _bad("ndim %d out of range" % ndim)
    if naxes > MAX_AXES or layout > LAYOUT_SHARD:
        return _bad("axis count %d / layout %d out of range" % (naxes, layout))
    if offset < HEADER_SIZE or offset > total or nbytes != total - offset:
        return _bad("data offset %d / size %d do not fit an object of %d bytes" % (offset, nbytes, total))
    if any(d < 0 for d in gshape[:ndim] + lshape[:ndim]) or any(d != -1 for d in gshape[ndim:] + lshape[ndim:]):
        return _bad("bad shape")
    numel = 1
    for d in lshape[:ndim]:
        numel *= d
    if numel * _DTYPES[dtype][1] != nbytes:
        return _bad("shape %s of %s does not match %d payload bytes" % (lshape[:ndim], _DTYPES[dtype][0], nbytes))
    axes = []
    for i in range(naxes):
        a = _AXIS.unpack_from(head, _HDR.size + _SHAPES.size + i * _AXIS.size)
        kind, _idx, rank, count, split_dim = a[:5]
        if not 0 <= kind <= _AXIS_KIND_MAX or count <= 0 or not 0 <= rank < count or not -1 <= split_dim < ndim:
            return _bad("bad parallel axis %d" % i)
        axes.append(a)
    m = Meta()
    m.dtype, m.ndim, m.layout, m.offset, m.nbytes = dtype, ndim, layout, offset, nbytes
    m.global_shape, m.local_shape, m.axes = list(gshape[:ndim]), list(lshape[:ndim]), axes
    return m


def _bad(why):
    _log.error("tensor object refused: %s", why)
    return None


# ------------------------------------------------------------------ tensor <-> bytes


def _host_tensor(torch, t, ctx):
    """A contiguous CPU tensor of a stored dtype, or None (logged)."""
    if not isinstance(t, torch.Tensor) or t.layout != torch.strided:
        _log.error("%s: expected a dense torch.Tensor, got %s", ctx, type(t).__name__)
        return None
    if t.device.type != "cpu":
        if t.device.type == "cuda" and torch.cuda.is_available():
            t = t.cpu()  # no GPU transport here: device tensors go through host memory
        else:
            _log.error("%s: a %s tensor cannot be read on this host (CPU tensors only; no GPU)", ctx, t.device.type)
            return None
    if _dtype_code(torch, t.dtype) is None or t.dim() > MAX_DIMS:
        _log.error("%s: unsupported dtype %s or more than %d dimensions (%d)", ctx, t.dtype, MAX_DIMS, t.dim())
        return None
    return t.detach().contiguous()


def _encode(torch, src, global_shape=None, axes=()):
    """bytearray header + payload of the contiguous CPU tensor src; a shard (axes given) names the
    global shape it is part of."""
    n = src.numel() * src.element_size()
    layout = LAYOUT_SHARD if axes else LAYOUT_FULL
    gshape = list(src.shape) if global_shape is None else list(global_shape)
    out = encode_header(_dtype_code(torch, src.dtype), gshape, list(src.shape), layout, axes, n)
    out += bytes(n)
    if n:
        dst = ctypes.addressof((ctypes.c_char * len(out)).from_buffer(out)) + HEADER_SIZE
        ctypes.memmove(dst, src.data_ptr(), n)
    return out


def _tensor_over(torch, buf, meta):
    """A tensor over buf (a writable buffer) at meta's offset; None when this torch lacks the dtype."""
    name = _DTYPES[meta.dtype][0]
    dt = getattr(torch, name, None)
    if dt is None:
        _log.error("tensor object refused: this torch has no dtype %s", name)
        return None
    if meta.nbytes == 0:
        return torch.empty(meta.local_shape, dtype=dt)
    flat = torch.frombuffer(buf, dtype=torch.uint8, count=meta.nbytes, offset=meta.offset)
    if meta.offset % 8:
        flat = flat.clone()  # keep the element view aligned
    return flat.view(dt).reshape(meta.local_shape)


def _decode_buffer(torch, buf, n):
    """(tensor, Meta) of the object in the first n bytes of buf, or (None, None)."""
    meta = decode_header(bytes(buf[:HEADER_SIZE]) if n >= HEADER_SIZE else b"", n)
    t = None if meta is None else _tensor_over(torch, buf, meta)
    return (None, None) if t is None else (t, meta)


def _from_memory(torch, ptr, n):
    """The tensor in the first n bytes at ptr (a view of that memory), or None."""
    return None if n < 0 else _decode_buffer(torch, (ctypes.c_char * n).from_address(ptr), n)[0]


# ------------------------------------------------------------------ upstream's module-level helpers


def _serialize_tensor(tensor):
    """(header bytes, data address, data size, owner) of a tensor, owner being the contiguous tensor whose
    memory the address points into (keep it alive while the address is used). ValueError when the tensor
    cannot be stored."""
    torch = _torch()
    h = None if torch is None else _host_tensor(torch, tensor, "_serialize_tensor")
    if h is None:
        raise ValueError("unsupported tensor for Mooncake tensor serialization")
    n = h.numel() * h.element_size()
    head = encode_header(_dtype_code(torch, h.dtype), list(h.shape), list(h.shape), LAYOUT_FULL, (), n)
    return bytes(head), h.data_ptr() if n else 0, n, h


def _tensor_metadata_size():
    return HEADER_SIZE


def _deserialize_tensor(payload):
    """The tensor of a whole tensor object given as bytes (a copy of its own); ValueError when invalid."""
    torch = _torch()
    data = bytearray(payload)
    t = None if torch is None else _decode_buffer(torch, data, len(data))[0]
    if t is None:
        raise ValueError("invalid serialized Mooncake tensor payload")
    return t


# ------------------------------------------------------------------ sharding


def torch_cat(parts, dim):
    """torch.cat, None (logged) when the parts do not fit together."""
    try:
        return _torch().cat(parts, dim)
    except (RuntimeError, IndexError) as e:
        _log.error("tensor shards do not fit together: %s", e)
        return None


def tp_key(key, rank):
    return "%s_tp_%d" % (key, rank)


def _tp_shards(torch, t, tp_size, split_dim, ctx):
    """[(rank, shard)] of t cut into tp_size equal slices along split_dim, or None (logged)."""
    if isinstance(tp_size, bool) or not isinstance(tp_size, int) or not isinstance(split_dim, int):
        raise TypeError("%s: tp_size and split_dim must be int" % ctx)
    if not 0 <= split_dim < t.dim() or t.shape[split_dim] % tp_size:
        _log.error("%s: dimension %d of shape %s cannot be split into %d equal shards", ctx, split_dim,
                   list(t.shape), tp_size)
        return None
    return list(enumerate(torch.chunk(t, tp_size, split_dim))) if t.shape[split_dim] else \
        [(r, t) for r in range(tp_size)]


def _tp_axis(rank, size, split_dim, local_extent):
    return (_AXIS_KINDS["tp"], rank, size, split_dim, 0, local_extent)


# ------------------------------------------------------------------ the methods


def _groups_fit(config, keys):
    """config.group_ids, when set, has one entry per key (as the store's own batch calls require)."""
    gids = getattr(config, "group_ids", None)
    if gids is not None and len(gids) != len(keys):
        _log.error("tensor batch: group_ids has %d entries for %d keys", len(gids), len(keys))
        return False
    return True


class TensorMethods:
    """Mixed into MooncakeDistributedStore by mooncake.store when torch is available."""

    # -------------------------------------------------------------- writes

    def _write_encoded(self, keys, blobs, config, upsert, owner=None):
        """Writes each (key, bytearray) pair; a None blob is INVALID_PARAMS for its key. -> [status]
        owner[i]: the caller's key that keys[i] belongs to (a shard of it), whose entry of config.group_ids
        it takes (the caller checked that list's length against its own keys)."""
        out = [INVALID_PARAMS] * len(keys)
        idx = [i for i, b in enumerate(blobs) if b is not None]
        if not idx:
            return out
        gids = getattr(config, "group_ids", None)
        if gids is not None:
            owner = range(len(keys)) if owner is None else owner
            config = copy.copy(config)
            config.group_ids = [gids[owner[i]] for i in idx]
        addrs = [ctypes.addressof((ctypes.c_char * len(blobs[i])).from_buffer(blobs[i])) for i in idx]
        fn = self.batch_upsert_from if upsert else self.batch_put_from
        res = fn([keys[i] for i in idx], addrs, [len(blobs[i]) for i in idx], config)
        for i, r in zip(idx, res):
            out[i] = r
        return out

    def _tensor_batch(self, keys, tensors, config, upsert, ctx):
        torch = _torch()
        if not isinstance(keys, (list, tuple)) or not isinstance(tensors, (list, tuple)):
            raise TypeError("%s: keys and tensors_list must be lists" % ctx)
        if torch is None or not self._ready or len(keys) != len(tensors) or not _groups_fit(config, keys):
            return [INVALID_PARAMS] * len(keys)
        blobs = []
        for t in tensors:
            h = _host_tensor(torch, t, ctx)
            blobs.append(None if h is None else _encode(torch, h))
        return self._write_encoded(list(keys), blobs, config, upsert)

    def _tp_batch(self, keys, tensors, config, upsert, tp_size, split_dim, ctx):
        """Every shard of every tensor under "<key>_tp_<rank>"; per key the first failing shard's code."""
        torch = _torch()
        if not isinstance(keys, (list, tuple)) or not isinstance(tensors, (list, tuple)):
            raise TypeError("%s: keys and tensors_list must be lists" % ctx)
        if torch is None or not self._ready or len(keys) != len(tensors) or not _groups_fit(config, keys):
            return [INVALID_PARAMS] * len(keys)
        skeys, blobs, owner, out = [], [], [], [0] * len(keys)
        for i, (k, t) in enumerate(zip(keys, tensors)):
            h = _host_tensor(torch, t, ctx)
            shards = None if h is None else _tp_shards(torch, h, tp_size, split_dim, ctx)
            if shards is None:
                out[i] = INVALID_PARAMS
                continue
            for rank, s in shards:
                s = s.contiguous()
                axis = _tp_axis(rank, tp_size, split_dim, s.shape[split_dim])
                skeys.append(tp_key(k, rank))
                blobs.append(_encode(torch, s, h.shape, [axis]))
                owner.append(i)
        for i, r in zip(owner, self._write_encoded(skeys, blobs, config, upsert, owner) if skeys else []):
            if out[i] == 0:
                out[i] = r
        return out

    def put_tensor(self, key, tensor):
        return self._tensor_batch([key], [tensor], None, False, "put_tensor")[0]

    def upsert_tensor(self, key, tensor):
        return self._tensor_batch([key], [tensor], None, True, "upsert_tensor")[0]

    def pub_tensor(self, key, tensor, config=None):
        return self._tensor_batch([key], [tensor], config, False, "pub_tensor")[0]

    def upsert_pub_tensor(self, key, tensor, config=None):
        return self._tensor_batch([key], [tensor], config, True, "upsert_pub_tensor")[0]

    def batch_put_tensor(self, keys, tensors_list):
        return self._tensor_batch(keys, tensors_list, None, False, "batch_put_tensor")

    def batch_upsert_tensor(self, keys, tensors_list):
        return self._tensor_batch(keys, tensors_list, None, True, "batch_upsert_tensor")

    def batch_pub_tensor(self, keys, tensors_list, config=None):
        return self._tensor_batch(keys, tensors_list, config, False, "batch_pub_tensor")

    def batch_upsert_pub_tensor(self, keys, tensors_list, config=None):
        return self._tensor_batch(keys, tensors_list, config, True, "batch_upsert_pub_tensor")

    # tp_rank is accepted for upstream's signature; a tp put writes every rank's shard, as upstream's does.
    def _tp_many(self, keys, tensors, config, upsert, tp_size, split_dim, ctx):
        if tp_size <= 1:
            return self._tensor_batch(keys, tensors, config, upsert, ctx)
        return self._tp_batch(keys, tensors, config, upsert, tp_size, split_dim, ctx)

    def put_tensor_with_tp(self, key, tensor, tp_rank=0, tp_size=1, split_dim=0):
        return self._tp_many([key], [tensor], None, False, tp_size, split_dim, "put_tensor_with_tp")[0]

    def pub_tensor_with_tp(self, key, tensor, config=None, tp_rank=0, tp_size=1, split_dim=0):
        return self._tp_many([key], [tensor], config, False, tp_size, split_dim, "pub_tensor_with_tp")[0]

    def upsert_tensor_with_tp(self, key, tensor, tp_rank=0, tp_size=1, split_dim=0):
        return self._tp_many([key], [tensor], None, True, tp_size, split_dim, "upsert_tensor_with_tp")[0]

    def batch_put_tensor_with_tp(self, base_keys, tensors_list, tp_rank=0, tp_size=1, split_dim=0):
        return self._tp_many(base_keys, tensors_list, None, False, tp_size, split_dim, "batch_put_tensor_with_tp")

    def batch_pub_tensor_with_tp(self, base_keys, tensors_list, config=None, tp_rank=0, tp_size=1, split_dim=0):
        return self._tp_many(base_keys, tensors_list, config, False, tp_size, split_dim, "batch_pub_tensor_with_tp")

    def batch_upsert_tensor_with_tp(self, base_keys, tensors_list, tp_rank=0, tp_size=1, split_dim=0):
        return self._tp_many(base_keys, tensors_list, None, True, tp_size, split_dim, "batch_upsert_tensor_with_tp")

    # -------------------------------------------------------------- writes from a caller's [header][data] buffer

    def _from_batch(self, keys, buffer_ptrs, sizes, upsert, ctx):
        """Each buffer must already hold a valid tensor object of exactly `size` bytes; written as it is."""
        if not all(isinstance(x, (list, tuple)) for x in (keys, buffer_ptrs, sizes)):
            raise TypeError("%s: keys, buffer_ptrs and sizes must be lists" % ctx)
        if not self._ready or not len(keys) == len(buffer_ptrs) == len(sizes):
            return [INVALID_PARAMS] * len(keys)
        out, idx = [INVALID_PARAMS] * len(keys), []
        for i, (p, n) in enumerate(zip(buffer_ptrs, sizes)):
            if not isinstance(p, int) or not isinstance(n, int) or p <= 0 or n < HEADER_SIZE:
                _log.error("%s: buffer %d is null or smaller than a tensor header", ctx, i)
            elif decode_header(ctypes.string_at(p, HEADER_SIZE), n) is not None:
                idx.append(i)
        if idx:
            fn = self.batch_upsert_from if upsert else self.batch_put_from
            for i, r in zip(idx, fn([keys[i] for i in idx], [buffer_ptrs[i] for i in idx],
                                    [sizes[i] for i in idx])):
                out[i] = r
        return out

    def put_tensor_from(self, key, buffer_ptr, size):
        return self._from_batch([key], [buffer_ptr], [size], False, "put_tensor_from")[0]

    def upsert_tensor_from(self, key, buffer_ptr, size):
        return self._from_batch([key], [buffer_ptr], [size], True, "upsert_tensor_from")[0]

    def batch_put_tensor_from(self, keys, buffer_ptrs, sizes):
        return self._from_batch(keys, buffer_ptrs, sizes, False, "batch_put_tensor_from")

    def batch_upsert_tensor_from(self, keys, buffer_ptrs, sizes):
        return self._from_batch(keys, buffer_ptrs, sizes, True, "batch_upsert_tensor_from")

    def _buffer_tensors(self, buffer_ptrs, sizes, ctx):
        """The tensors held by [header][data] buffers (None where a buffer is not one)."""
        torch = _torch()
        out = []
        for p, n in zip(buffer_ptrs, sizes):
            ok = torch is not None and isinstance(p, int) and isinstance(n, int) and p > 0
            out.append(_from_memory(torch, p, n) if ok else None)
        return out

    def put_tensor_with_tp_from(self, key, buffer_ptr, size, tp_rank=0, tp_size=1, split_dim=0):
        return self.batch_put_tensor_with_tp_from([key], [buffer_ptr], [size], tp_rank, tp_size, split_dim)[0]

    def batch_put_tensor_with_tp_from(self, base_keys, buffer_ptrs, sizes, tp_rank=0, tp_size=1, split_dim=0):
        ctx = "batch_put_tensor_with_tp_from"
        if not all(isinstance(x, (list, tuple)) for x in (base_keys, buffer_ptrs, sizes)):
            raise TypeError("%s: base_keys, buffer_ptrs and sizes must be lists" % ctx)
        if not self._ready or not len(base_keys) == len(buffer_ptrs) == len(sizes):
            return [INVALID_PARAMS] * len(base_keys)
        return self._tp_many(list(base_keys), self._buffer_tensors(buffer_ptrs, sizes, ctx), None, False, tp_size,
                             split_dim, ctx)

    # -------------------------------------------------------------- reads

    def get_tensor(self, key):
        return self.batch_get_tensor([key])[0]

    def batch_get_tensor(self, keys):
        torch = _torch()
        if not isinstance(keys, (list, tuple)):
            raise TypeError("batch_get_tensor: keys must be a list")
        if torch is None or not self._ready or not keys:
            return [None] * len(keys)
        return [t for t, _ in self._get_meta_many(keys)]

    def get_tensor_with_tp(self, key, tp_rank=0, tp_size=1, split_dim=0):
        return self.get_tensor(key if tp_size <= 1 else tp_key(key, tp_rank))

    def batch_get_tensor_with_tp(self, base_keys, tp_rank=0, tp_size=1):
        return self.batch_get_tensor(base_keys if tp_size <= 1 else [tp_key(k, tp_rank) for k in base_keys])

    def get_tensor_into(self, key, buffer_ptr, size):
        return self.batch_get_tensor_into([key], [buffer_ptr], [size])[0]

    def batch_get_tensor_into(self, keys, buffer_ptrs, sizes):
        """Each object is read whole into its buffer; the result is a tensor viewing that buffer."""
        torch = _torch()
        if not all(isinstance(x, (list, tuple)) for x in (keys, buffer_ptrs, sizes)):
            raise TypeError("batch_get_tensor_into: keys, buffer_ptrs and sizes must be lists")
        if torch is None or not self._ready or not keys or not len(keys) == len(buffer_ptrs) == len(sizes):
            return [None] * len(keys)
        if any(not isinstance(p, int) or p <= 0 for p in buffer_ptrs):
            _log.error("batch_get_tensor_into: null buffer pointer")
            return [None] * len(keys)
        got = self.batch_get_into(list(keys), list(buffer_ptrs), list(sizes))
        return [_from_memory(torch, p, n) for p, n in zip(buffer_ptrs, got)]

    def get_tensor_with_tp_into(self, key, buffer_ptr, size, tp_rank=0, tp_size=1, split_dim=0):
        return self.get_tensor_into(key if tp_size <= 1 else tp_key(key, tp_rank), buffer_ptr, size)

    def batch_get_tensor_with_tp_into(self, base_keys, buffer_ptrs, sizes, tp_rank=0, tp_size=1):
        keys = base_keys if tp_size <= 1 else [tp_key(k, tp_rank) for k in base_keys]
        return self.batch_get_tensor_into(keys, buffer_ptrs, sizes)

    # -------------------------------------------------------------- CUDA destinations

    def get_tensor_into_cuda(self, key, tensor):
        return self.batch_get_tensor_into_cuda([key], [tensor])[0]

    def batch_get_tensor_into_cuda(self, keys, tensors_list):
        """Upstream reads into CUDA tensors through a dummy client's CUDA IPC; neither exists here. -> [int]"""
        torch = _torch()
        if not isinstance(keys, (list, tuple)) or not isinstance(tensors_list, (list, tuple)):
            raise TypeError("batch_get_tensor_into_cuda: keys and tensors_list must be lists")
        if torch is None or not self._ready or len(keys) != len(tensors_list):
            return [INVALID_PARAMS] * len(keys)
        out = []
        for t in tensors_list:
            if not isinstance(t, torch.Tensor) or t.device.type != "cuda" or not torch.cuda.is_available():
                _log.error("get_tensor_into_cuda: the destination must be a CUDA tensor and a GPU must exist")
                out.append(INVALID_PARAMS)
            else:
                _log.error("get_tensor_into_cuda: CUDA IPC reads (upstream's dummy client) are not supported")
                out.append(NOT_SUPPORTED)
        return out

    def _get_meta(self, key):
        """(tensor, Meta) of the object under key, or (None, None)."""
        return self._get_meta_many([key])[0]

    def _get_meta_many(self, keys):
        """[(tensor, Meta) or (None, None)] of the objects under keys, each read whole into a private buffer
        the tensor then owns (_get_raw_many)."""
        torch = _torch()
        return [(None, None) if raw is None else _decode_buffer(torch, raw, len(raw))
                for raw in self._get_raw_many(keys)]

    def _get_raw_many(self, keys, min_size=HEADER_SIZE, max_size=None):
        """[bytearray of the object or None] for keys: each asked its size and read whole with
        batch_get_into (no staging-buffer size limit, unlike get_buffer); an object that changed size
        between get_size and the read is tried once more. Objects outside [min_size, max_size] read as
        None."""
        keys = list(keys)
        out = [None] * len(keys)
        for attempt in range(2):
            todo = [i for i in range(len(keys)) if out[i] is None]
            sizes = {i: self.get_size(keys[i]) for i in todo}
            todo = [i for i in todo if sizes[i] >= min_size and (max_size is None or sizes[i] <= max_size)]
            if not todo:
                break
            bufs = {i: bytearray(sizes[i]) for i in todo}
            addrs = [ctypes.addressof((ctypes.c_char * sizes[i]).from_buffer(bufs[i])) for i in todo]
            got = self.batch_get_into([keys[i] for i in todo], addrs, [sizes[i] for i in todo])
            retry = False
            for i, n in zip(todo, got):
                if n >= 0:
                    out[i] = bufs[i] if n == sizes[i] else bufs[i][:n]
                else:
                    retry = True
            if not retry:
                break
        return out

    # -------------------------------------------------------------- safetensors files

    def save_tensor_to_safetensor(self, key, file_name=None):
        """Writes the tensor under key to a safetensors file (one entry named key; file_name defaults to key)."""
        if not self._ready:
            return INVALID_PARAMS
        t = self.get_tensor(key)
        if t is None:
            _log.error("save_tensor_to_safetensor: no tensor under %r", key)
            return FILE_NOT_FOUND
        try:
            save_safetensors({key: t}, key if file_name is None else file_name)
        except (OSError, ValueError, TypeError) as e:
            _log.error("save_tensor_to_safetensor: %s", e)
            return INVALID_PARAMS
        return 0

    def load_tensor_from_safetensor(self, key=None, file_name=None):
        """Stores one tensor of a safetensors file under key (default: file_name) and returns it, or None. The
        entry named key is taken, else the file's first entry (logged)."""
        if not self._ready or file_name is None:
            return None
        torch = _torch()
        try:
            entries = load_safetensors(torch, file_name)
        except (OSError, ValueError, TypeError, KeyError) as e:
            _log.error("load_tensor_from_safetensor: %s: %s", file_name, e)
            return None
        if not entries:
            _log.error("load_tensor_from_safetensor: no tensors in %s", file_name)
            return None
        store_key = file_name if key is None else key
        name = store_key if store_key in entries else next(iter(entries))
        if key is not None and name != key:
            _log.warning("load_tensor_from_safetensor: %r not in %s; using its first entry", key, file_name)
        t = entries[name]
        return t if self.put_tensor(store_key, t) == 0 else None


# ------------------------------------------------------------------ safetensors format (docs/python.md)

_ST_DTYPES = {"float32": "F32", "float64": "F64", "int8": "I8", "uint8": "U8", "int16": "I16", "uint16": "U16",
              "int32": "I32", "uint32": "U32", "int64": "I64", "uint64": "U64", "bool": "BOOL", "float16": "F16",
              "bfloat16": "BF16", "float8_e4m3fn": "F8_E4M3", "float8_e5m2": "F8_E5M2"}
_ST_NAMES = {v: k for k, v in _ST_DTYPES.items()}
_ST_MAX_HEADER = 100 << 20


def save_safetensors(tensors, path):
    """A safetensors file: u64 little-endian header length, JSON header, then the tensors' bytes."""
    torch = _torch()
    header, blobs, off = {}, [], 0
    for name, t in tensors.items():
        h = _host_tensor(torch, t, "safetensors")
        if h is None:
            raise ValueError("tensor %r cannot be saved" % name)
        data = _encode(torch, h)[HEADER_SIZE:]
        header[name] = {"dtype": _ST_DTYPES[_DTYPES[_dtype_code(torch, h.dtype)][0]], "shape": list(h.shape),
                        "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the format pads the header with spaces to 8 bytes
    tmp = "%s.tmp%d" % (path, os.getpid())
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)


def load_safetensors(torch, path):
    """{name: tensor} of a safetensors file (entries in file order); ValueError for a malformed one."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise ValueError("too short")
    (hlen,) = struct.unpack_from("<Q", data)
    if hlen > min(_ST_MAX_HEADER, len(data) - 8):
        raise ValueError("header length %d out of range" % hlen)
    header = json.loads(data[8:8 + hlen].decode())
    if not isinstance(header, dict):
        raise ValueError("header is not an object")
    body, out = memoryview(data)[8 + hlen:], {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        dt = getattr(torch, _ST_NAMES.get(e.get("dtype"), ""), None) if isinstance(e, dict) else None
        shape, offs = e.get("shape"), e.get("data_offsets")
        if dt is None or not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape) or \
                len(shape) > MAX_DIMS or not isinstance(offs, list) or len(offs) != 2:
            raise ValueError("entry %r is malformed or of an unsupported dtype" % name)
        numel = 1
        for d in shape:
            numel *= d
        a, b = offs
        if not (isinstance(a, int) and isinstance(b, int) and 0 <= a <= b <= len(body)) or \
                b - a != numel * torch.empty(0, dtype=dt).element_size():
            raise ValueError("entry %r: data offsets do not match its shape" % name)
        raw = bytearray(body[a:b])
        out[name] = torch.empty(shape, dtype=dt) if not raw else \
            torch.frombuffer(raw, dtype=dt).reshape(shape)
    return out


PUT_NAMES = ["put_tensor", "upsert_tensor", "pub_tensor", "upsert_pub_tensor", "put_tensor_with_tp",
             "pub_tensor_with_tp", "upsert_tensor_with_tp", "put_tensor_from", "upsert_tensor_from",
             "put_tensor_with_tp_from", "put_tensor_with_parallelism", "upsert_tensor_with_parallelism",
             "put_tensor_with_parallelism_from", "upsert_tensor_with_parallelism_from", "save_tensor_to_safetensor",
             "get_tensor_into_cuda"]
BATCH_PUT_NAMES = ["batch_put_tensor", "batch_upsert_tensor", "batch_pub_tensor", "batch_upsert_pub_tensor",
                   "batch_put_tensor_with_tp", "batch_pub_tensor_with_tp", "batch_upsert_tensor_with_tp",
                   "batch_put_tensor_from", "batch_upsert_tensor_from", "batch_put_tensor_with_tp_from",
                   "batch_put_tensor_with_parallelism", "batch_upsert_tensor_with_parallelism",
                   "batch_put_tensor_with_parallelism_from", "batch_upsert_tensor_with_parallelism_from",
                   "batch_get_tensor_into_cuda"]
GET_NAMES = ["get_tensor", "get_tensor_with_tp", "get_tensor_into", "get_tensor_with_tp_into",
             "get_tensor_with_parallelism", "get_tensor_with_parallelism_into", "load_tensor_from_safetensor"]
BATCH_GET_NAMES = ["batch_get_tensor", "batch_get_tensor_with_tp", "batch_get_tensor_into",
                   "batch_get_tensor_with_tp_into", "batch_get_tensor_with_parallelism",
                   "batch_get_tensor_with_parallelism_into"]


def _docstring(name, f):
    """A docstring for a tensor method that has none of its own: its signature and what its name's parts mean
    (docs/python.md, "Tensor methods", has the table)."""
    import inspect
    try:
        sig = str(inspect.signature(f)).replace("(self, ", "(").replace("(self)", "()")
    except (TypeError, ValueError):
        sig = "(...)"
    get = "get" in name and "put" not in name
    what = ["Reads the tensor(s) stored under the key(s): a tensor or None each." if get else
            "Stores CPU tensor(s) as self-describing tensor objects: 0 or a negative ErrorCode each."]
    parts = [("batch_", "Batch form: lists in, one result per key."),
             ("upsert", "Replaces an existing value (a put keeps it)."),
             ("pub_", "Takes a ReplicateConfig (replicas, pins, preferred segments, group_ids)."),
             ("_with_tp", 'Tensor parallelism: shard "<key>_tp_<rank>", split along split_dim.'),
             ("_with_parallelism", "Parallelism given by TensorParallelism / ReadTarget."),
             ("_into", "Reads into the caller's buffer (the result views it)."),
             ("_from", "The caller's buffer already holds a tensor object (header + data)."),
             ("_cuda", "CUDA destinations: -600 where no GPU is present.")]
    what += [d for key, d in parts if key in name]
    return "%s%s\n\n%s\nSee docs/python.md, \"Tensors\"." % (name, sig, " ".join(what))


def install(cls):
    """Puts the tensor methods (these and mooncake/_parallel.py's) on cls."""
    for n in PUT_NAMES + BATCH_PUT_NAMES + GET_NAMES + BATCH_GET_NAMES:
        f = getattr(TensorMethods, n, None) or getattr(ParallelMethods, n)
        if not (f.__doc__ or "").strip():
            f.__doc__ = _docstring(n, f)
        setattr(cls, n, f)
    for k in (TensorMethods, ParallelMethods):
        for n, v in vars(k).items():
            if n.startswith("_") and callable(v) and not n.startswith("__"):
                setattr(cls, n, v)


from ._parallel import ParallelMethods  # noqa: E402 (it uses the helpers above)
