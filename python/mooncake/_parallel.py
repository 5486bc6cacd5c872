"""The unified parallelism family of MooncakeDistributedStore's tensor helpers (docs/python.md, "Tensor
parallelism"): put/upsert_tensor_with_parallelism (one tensor, batch, and from a [header][data] buffer) and
get_tensor_with_parallelism (one, batch, into a buffer).

Everything a caller moving from upstream Mooncake can observe follows upstream: the keys objects live under,
the 304-byte header of every shard (axes in the caller's order), the 96-byte manifest objects
"<key>__parallelism_manifest" / "<key>__writer_manifest" that describe a sharded tensor, the refusals (-600)
and what each ReadTarget reads back, including a tp layout read with another tp size than it was written
with. Objects read from the store are untrusted: manifests and shard headers are checked against each other
before any byte is copied, the number of shards a read follows is capped (MAX_SHARDS) and a reassembled
tensor is never larger than the shards actually read.
"""

import collections
import ctypes
import logging
import struct

from . import _tensor as T

_log = logging.getLogger("mooncake")

DP, TP, EP, PP = 0, 1, 2, 3
MANIFEST_MAGIC = 0x574d414e                # the bytes "NAMW"
MANIFEST_VERSION = 1
_MANIFEST = struct.Struct("<IHHiiiii4x8q")  # magic, version, size, dtype, ndim, split_dim, count, 0, pad, shape
MANIFEST_SIZE = _MANIFEST.size              # 96
MANIFEST_MAX_OBJECT = 4096                  # a larger object under a manifest key is not read
MAX_SHARDS = 4096                           # shards one read follows at most (tp size / manifest count)
_I32 = (-(1 << 31), (1 << 31) - 1)

# One validated parallel axis: kind code, rank, size, split_dim / expert_id / stage_id (None when unset).
Axis = collections.namedtuple("Axis", "kind rank size sd eid sid")


# ------------------------------------------------------------------ requests


def _i32(v):
    return isinstance(v, int) and not isinstance(v, bool) and _I32[0] <= v <= _I32[1]


def parse_parallelism(obj, ctx):
    """[Axis] in the caller's order of a TensorParallelism-like object (anything with `axes`), or None
    (logged) when upstream would refuse it: no or more than 4 axes, an unknown kind, a kind twice, a rank
    outside [0, size), a tp axis without split_dim, a dp/ep/pp axis with one, an ep axis without expert_id,
    a pp axis without stage_id."""
    axes = getattr(obj, "axes", None)
    try:
        axes = None if axes is None or isinstance(axes, (str, bytes)) else list(axes)
    except TypeError:
        axes = None
    if not axes or len(axes) > T.MAX_AXES:
        _log.error("%s: a parallelism needs 1 to %d axes (got %r)", ctx, T.MAX_AXES, obj)
        return None
    out = []
    for a in axes:
        kind = getattr(a, "kind", None)
        k = T._AXIS_KINDS.get(kind.lower()) if isinstance(kind, str) else None
        rank, size = getattr(a, "rank", None), getattr(a, "size", None)
        sd, eid, sid = (getattr(a, n, None) for n in ("split_dim", "expert_id", "stage_id"))
        why = None
        if k is None or not _i32(rank) or not _i32(size) or not all(v is None or _i32(v) for v in (sd, eid, sid)):
            why = "unknown kind or a field that is not a 32-bit int"
        elif size <= 0 or not 0 <= rank < size:
            why = "rank outside [0, size)"
        elif any(o.kind == k for o in out):
            why = "a kind given twice"
        elif (k == TP) != (sd is not None):
            why = "a tp axis needs split_dim, a dp/ep/pp axis takes none"
        elif (k == EP and eid is None) or (k == PP and sid is None):
            why = "an ep axis needs expert_id, a pp axis stage_id"
        if why:
            _log.error("%s: bad parallel axis %r: %s", ctx, a, why)
            return None
        out.append(Axis(k, rank, size, sd, eid, sid))
    return out


def parse_writer_partition(obj, ctx):
    """(rank, size, split_dim) of a writer_partition (anything with those three int fields), or None."""
    v = tuple(getattr(obj, n, None) for n in ("rank", "size", "split_dim"))
    if not all(_i32(x) for x in v) or v[1] <= 0 or not 0 <= v[0] < v[1] or v[2] < 0:
        _log.error("%s: bad writer_partition %r (rank, size, split_dim: ints, 0 <= rank < size)", ctx, obj)
        return None
    return v


def canonical(axes):
    """The axes in upstream's canonical order: dp, tp, ep, pp."""
    return sorted(axes, key=lambda a: a.kind)


def with_tp(axes, rank, size=None):
    return [a._replace(rank=rank, size=a.size if size is None else size) if a.kind == TP else a for a in axes]


def tp_of(axes):
    return next((a for a in axes if a.kind == TP), None)


def shard_key(base, axes):
    """Where the shard `axes` names lives: "<base>_tp_<rank>" for a single tp axis, else
    "<base>__<kind>_<rank>of<size>[_sd<split_dim>][_eid<expert_id>][_sid<stage_id>]" per axis, canonical order."""
    if len(axes) == 1 and axes[0].kind == TP:
        return T.tp_key(base, axes[0].rank)
    out = base
    for a in canonical(axes):
        out += "__%s_%dof%d" % (T._AXIS_NAMES[a.kind], a.rank, a.size)
        out += "".join("_%s%d" % (tag, v) for tag, v in (("sd", a.sd), ("eid", a.eid), ("sid", a.sid))
                       if v is not None)
    return out


def writer_key(base, rank, size, sd):
    return "%s__writer_%dof%d_sd%d" % (base, rank, size, sd)


def manifest_key(base, writer=False):
    return base + ("__writer_manifest" if writer else "__parallelism_manifest")


def header_axes(axes, local_shape):
    """The header's axis entries, in the caller's order: (kind, rank, count, split_dim or -1, reserved0 =
    expert id (ep) / stage id (pp), reserved1 = the shard's extent along split_dim); None when a split_dim
    is outside the shape."""
    out = []
    for a in axes:
        if a.sd is not None and not 0 <= a.sd < len(local_shape):
            return None
        r0 = a.eid if a.kind == EP and a.eid is not None else a.sid if a.kind == PP and a.sid is not None else 0
        out.append((a.kind, a.rank, a.size, -1 if a.sd is None else a.sd, r0,
                    0 if a.sd is None else local_shape[a.sd]))
    return out


def stored_axes(meta):
    """The canonical [Axis] a shard header carries (what upstream compares requests with), or None for a
    full object."""
    if meta is None or meta.layout != T.LAYOUT_SHARD:
        return None
    out = []
    for kind, _idx, rank, count, sd, r0, _r1 in meta.axes:
        out.append(Axis(kind, rank, count, None if sd < 0 else sd, r0 if kind == EP else None,
                        r0 if kind == PP else None))
    return canonical(out)


def compatible(req, meta, any_tp_rank=True):
    """The header carries exactly the (canonical) request's axes; the tp axis's rank is not compared when
    any_tp_rank."""
    got = stored_axes(meta)
    if got is None or len(got) != len(req):
        return False
    return all(g == r or (any_tp_rank and r.kind == TP and g._replace(rank=r.rank) == r) for g, r in zip(got, req))


# ------------------------------------------------------------------ manifests


def encode_manifest(dtype, global_shape, split_dim, count):
    """The 96-byte manifest of a sharded tensor (upstream's layout, docs/python.md, "Tensor parallelism")."""
    shape = list(global_shape) + [-1] * (T.MAX_DIMS - len(global_shape))
    return bytearray(_MANIFEST.pack(MANIFEST_MAGIC, MANIFEST_VERSION, MANIFEST_SIZE, dtype, len(global_shape),
                                    split_dim, count, 0, *shape))


def decode_manifest(data):
    """(dtype, global shape, split_dim, count) of a manifest object, or None (logged) for anything that is
    not one: wrong size, magic, version or header size, ndim outside 1..8, split_dim outside the shape, a
    count outside 1..MAX_SHARDS, an unknown dtype, a negative dimension, a used dimension that is unset."""
    if data is None or not MANIFEST_SIZE <= len(data) <= MANIFEST_MAX_OBJECT:
        return None if data is None else T._bad("manifest object of %d bytes" % len(data))
    f = _MANIFEST.unpack_from(data, 0)
    magic, version, hsize, dtype, ndim, sd, count = f[:7]
    shape = list(f[8:])
    if magic != MANIFEST_MAGIC or version != MANIFEST_VERSION or hsize != MANIFEST_SIZE:
        return T._bad("manifest: bad magic/version/size (%#x, %d, %d)" % (magic, version, hsize))
    if not 0 <= sd < ndim <= T.MAX_DIMS or not 0 < count <= MAX_SHARDS or not 0 <= dtype < len(T._DTYPES):
        return T._bad("manifest: ndim %d / split_dim %d / count %d / dtype %d out of range" % (ndim, sd, count,
                                                                                          dtype))
    if any(d < 0 for d in shape[:ndim]):
        return T._bad("manifest: negative dimension in %s" % shape[:ndim])
    return dtype, shape[:ndim], sd, count


def shard_range(extent, rank, count):
    """[start, length) of rank's slice of `extent` elements cut into `count` slices (upstream's formula)."""
    start = extent * rank // count
    return start, extent * (rank + 1) // count - start


def _uniform(extent, count):
    return extent >= 0 and 0 < count and extent % count == 0


def _slice(t, sd, rank, count, ctx):
    """Rank's equal slice of t along sd (contiguous), or None (logged)."""
    if not 0 <= sd < t.dim() or not _uniform(t.shape[sd], count) or not 0 <= rank < count:
        _log.error("%s: dimension %s of shape %s cannot be cut into %d equal shards", ctx, sd, list(t.shape), count)
        return None
    start, n = shard_range(t.shape[sd], rank, count)
    return t.narrow(sd, start, n).contiguous()


# ------------------------------------------------------------------ write plans


class Write:
    """What one key of a put writes: `code` (0, or the failure already known), `shards` [(key, object)],
    `manifest` (key, bytes) or None."""

    __slots__ = ("code", "shards", "manifest")

    def __init__(self, code=0, shards=(), manifest=None):
        self.code, self.shards, self.manifest = code, list(shards), manifest


def _fail():
    return Write(T.INVALID_PARAMS)


def plan_tensor(torch, key, h, parallelism, writer, ctx):
    """The Write of host tensor h (docs/python.md, "Tensor parallelism", write table)."""
    code = T._dtype_code(torch, h.dtype)
    if writer is not None and parallelism is not None:
        _log.error("%s: writer_partition cannot be combined with parallelism", ctx)
        return _fail()
    if writer is not None:
        w = parse_writer_partition(writer, ctx)
        sh = None if w is None else _slice(h, w[2], w[0], w[1], ctx)
        if sh is None:
            return _fail()
        rank, size, sd = w
        obj = T._encode(torch, sh, h.shape, [(TP, rank, size, sd, 0, sh.shape[sd])])
        return Write(0, [(writer_key(key, rank, size, sd), obj)],
                     (manifest_key(key, True), encode_manifest(code, list(h.shape), sd, size)))
    if parallelism is None:
        return Write(0, [(key, T._encode(torch, h))])
    axes = parse_parallelism(parallelism, ctx)
    if axes is None:
        return _fail()
    tp = tp_of(axes)
    if tp is None:  # tag axes only: the tensor is stored as it is
        return Write(0, [(shard_key(key, axes), T._encode(torch, h, None, header_axes(axes, list(h.shape))))])
    if len(axes) == 1:  # a single tp axis: the tensor is that rank's shard
        if not 0 <= tp.sd < h.dim():
            _log.error("%s: split_dim %d outside shape %s", ctx, tp.sd, list(h.shape))
            return _fail()
        gshape = list(h.shape)
        gshape[tp.sd] *= tp.size
        obj = T._encode(torch, h, gshape, header_axes(axes, list(h.shape)))
        return Write(0, [(shard_key(key, axes), obj)], (manifest_key(key), encode_manifest(code, gshape, tp.sd,
                                                                                            tp.size)))
    sh = _slice(h, tp.sd, tp.rank, tp.size, ctx)  # tp with other axes: h is the full tensor
    if sh is None:
        return _fail()
    obj = T._encode(torch, sh, h.shape, header_axes(axes, list(sh.shape)))
    return Write(0, [(shard_key(key, axes), obj)], (manifest_key(key), encode_manifest(code, list(h.shape), tp.sd,
                                                                                        tp.size)))


def plan_object(torch, key, h, meta, raw, parallelism, writer, ctx):
    """The Write of a [header][data] buffer (h its tensor, meta its header, raw its bytes)."""
    if writer is not None and parallelism is not None:
        _log.error("%s: writer_partition cannot be combined with parallelism", ctx)
        return _fail()
    if parallelism is None and writer is None:
        return Write(0, [(key, raw)])  # written as it is
    axes = None if parallelism is None else parse_parallelism(parallelism, ctx)
    if parallelism is not None and axes is None:
        return _fail()
    tp = None if axes is None else tp_of(axes)
    if axes is not None and tp is None:  # tag axes: the buffer's shapes, new axes
        hdr = T.encode_header(meta.dtype, meta.global_shape, meta.local_shape, T.LAYOUT_SHARD,
                              header_axes(axes, meta.local_shape), meta.nbytes)
        return Write(0, [(shard_key(key, axes), hdr + raw[meta.offset:])])
    if meta.local_shape != meta.global_shape:
        _log.error("%s: the buffer holds a shard (local shape %s of %s), not a full tensor", ctx,
                   meta.local_shape, meta.global_shape)
        return _fail()
    if writer is not None:
        return plan_tensor(torch, key, h, None, writer, ctx)
    shards = []  # every tp rank's shard, no manifest (as upstream's buffer route)
    for rank in range(tp.size):
        sh = _slice(h, tp.sd, rank, tp.size, ctx)
        if sh is None:
            return _fail()
        ax = with_tp(axes, rank)
        shards.append((shard_key(key, ax), T._encode(torch, sh, meta.global_shape, header_axes(ax, list(sh.shape)))))
    return Write(0, shards)


# ------------------------------------------------------------------ reads


class Result:
    """What a read gives: `key` (read that object as stored), or `tensor` with `header` (an object made
    from shards, header None when tensor is an object read as stored, `raw` its bytes)."""

    __slots__ = ("key", "tensor", "header", "raw")

    def __init__(self, key=None, tensor=None, header=None, raw=None):
        self.key, self.tensor, self.header, self.raw = key, tensor, header, raw


def parse_target(target, ctx):
    """(mode, [Axis] or None) of a ReadTarget-like object, or None (logged)."""
    if target is None:
        return "as_stored", None
    mode, par = getattr(target, "mode", None), getattr(target, "parallelism", None)
    if not isinstance(mode, str) or mode.lower() not in ReadModes:
        _log.error("%s: bad ReadTarget %r", ctx, target)
        return None
    if par is None:
        return mode.lower(), None
    axes = parse_parallelism(par, ctx)
    return None if axes is None else (mode.lower(), axes)


ReadModes = ("as_stored", "shard", "full")


def assemble(torch, loaded, gshape, sd, dtype, start, extent, ctx):
    """The slice [start, start + extent) along sd of the tensor of global shape gshape that the tp shards
    `loaded` [(tensor, Meta)] make up, or None (logged) when they do not: each shard's dtype, shape, tp
    axis and extent must be the ones its rank implies, no two may claim the same part, and together they
    must cover the slice."""
    pieces, ranges = [], []
    for t, m in loaded:
        tp = next((a for a in m.axes if a[0] == TP), None) if m.layout == T.LAYOUT_SHARD else None
        ok = tp is not None and m.dtype == dtype and len(m.local_shape) == len(gshape) and \
            all(x == y for i, (x, y) in enumerate(zip(m.local_shape, gshape)) if i != sd) and tp[4] == sd and \
            _uniform(gshape[sd], tp[3])
        s0, n0 = shard_range(gshape[sd], tp[2], tp[3]) if ok else (0, -1)
        if not ok or m.local_shape[sd] != n0:
            _log.error("%s: a shard does not fit global shape %s split along %d", ctx, gshape, sd)
            return None
        ranges.append((s0, s0 + n0))
        lo, hi = max(s0, start), min(s0 + n0, start + extent)
        if hi > lo:
            pieces.append((lo, hi, t.narrow(sd, lo - s0, hi - lo)))
    ranges.sort()
    if any(b[0] < a[1] for a, b in zip(ranges, ranges[1:])):
        _log.error("%s: two shards claim the same part of dimension %d", ctx, sd)
        return None
    pieces.sort(key=lambda p: p[0])
    at = start
    for lo, hi, _ in pieces:
        if lo > at:
            break
        at = max(at, hi)
    if at < start + extent:
        _log.error("%s: the shards do not cover [%d, %d) of dimension %d", ctx, start, start + extent, sd)
        return None
    shape = list(gshape)
    shape[sd] = extent
    used = [p for _, _, p in pieces]
    if not used or extent == 0:
        return torch.empty(shape, dtype=getattr(torch, T._DTYPES[dtype][0]))
    out = T.torch_cat(used, sd)
    return out if out is not None and list(out.shape) == shape else None


def _one(parallelism, config, writer):
    """The batch arguments (parallelisms, config, writer_partitions) of a one-key call."""
    return None if parallelism is None else [parallelism], config, None if writer is None else [writer]


class ParallelMethods:
    """Mixed into MooncakeDistributedStore with the other tensor helpers (mooncake/_tensor.py)."""

    # -------------------------------------------------------------- writes

    def _par_apply(self, keys, writes, config, upsert):
        """Writes every Write's shards, then the manifests of the keys whose shards all landed (a manifest
        key shared by several keys of the batch is written once: a put keeps the first, an upsert the
        last). -> one status per key: the first failing shard's code, else the manifest's."""
        out = [w.code for w in writes]
        skeys, blobs, owner = [], [], []
        for i, w in enumerate(writes):
            if w.code == 0:
                for k, b in w.shards:
                    skeys.append(k), blobs.append(b), owner.append(i)
        res = self._write_encoded(skeys, blobs, config, upsert, owner) if skeys else []
        for i, r in zip(owner, res):
            if out[i] == 0:
                out[i] = r
        chosen = {}
        for i, w in enumerate(writes):
            if out[i] == 0 and w.manifest is not None and (upsert or w.manifest[0] not in chosen):
                chosen[w.manifest[0]] = i
        if chosen:
            mk = list(chosen)
            res = self._write_encoded(mk, [writes[chosen[k]].manifest[1] for k in mk], config, upsert,
                                      [chosen[k] for k in mk])
            got = dict(zip(mk, res))
            for i, w in enumerate(writes):
                if out[i] == 0 and w.manifest is not None:
                    out[i] = got[w.manifest[0]]
        return out

    def _par_batch(self, keys, tensors, parallelisms, config, writers, upsert, ctx, from_buffers=None):
        torch = T._torch()
        if not isinstance(keys, (list, tuple)) or not isinstance(tensors, (list, tuple)):
            raise TypeError("%s: keys and the tensors/buffers must be lists" % ctx)
        n = len(keys)
        pars = [None] * n if parallelisms is None else parallelisms
        wps = [None] * n if writers is None else writers
        if parallelisms is not None and writers is not None:
            _log.error("%s: writer_partitions cannot be combined with parallelisms", ctx)
            return [T.INVALID_PARAMS] * n
        if torch is None or not self._ready or not isinstance(pars, (list, tuple)) or \
                not isinstance(wps, (list, tuple)) or not n == len(tensors) == len(pars) == len(wps) or \
                not T._groups_fit(config, keys):
            return [T.INVALID_PARAMS] * n
        writes = []
        for i, k in enumerate(keys):
            if from_buffers is not None:
                h, meta, raw = from_buffers[i]
                w = _fail() if h is None else plan_object(torch, k, h, meta, raw, pars[i], wps[i], ctx)
            else:
                h = T._host_tensor(torch, tensors[i], ctx)
                w = _fail() if h is None else plan_tensor(torch, k, h, pars[i], wps[i], ctx)
            writes.append(w)
        return self._par_apply(list(keys), writes, config, upsert)

    def _par_from(self, keys, buffer_ptrs, sizes, parallelisms, config, writers, upsert, ctx):
        if not all(isinstance(x, (list, tuple)) for x in (keys, buffer_ptrs, sizes)):
            raise TypeError("%s: keys, buffer_ptrs and sizes must be lists" % ctx)
        torch = T._torch()
        if torch is None or not self._ready or not len(keys) == len(buffer_ptrs) == len(sizes):
            return [T.INVALID_PARAMS] * len(keys)
        bufs = []
        for p, n in zip(buffer_ptrs, sizes):
            ok = isinstance(p, int) and isinstance(n, int) and p > 0 and n >= T.HEADER_SIZE
            raw = bytearray(ctypes.string_at(p, n)) if ok else None
            h, meta = T._decode_buffer(torch, raw, n) if ok else (None, None)
            bufs.append((h, meta, raw))
        return self._par_batch(keys, list(buffer_ptrs), parallelisms, config, writers, upsert, ctx, bufs)

    def put_tensor_with_parallelism(self, key, tensor, parallelism=None, config=None, writer_partition=None):
        """Stores a tensor as a full object (no parallelism), as the shard a TensorParallelism names, or as
        writer_partition's slice of it, with the manifest upstream writes (docs/python.md, "Tensor
        parallelism"). 0 or a negative code."""
        return self._par_batch([key], [tensor], *_one(parallelism, config, writer_partition), False,
                               "put_tensor_with_parallelism")[0]

    def upsert_tensor_with_parallelism(self, key, tensor, parallelism=None, config=None, writer_partition=None):
        """put_tensor_with_parallelism replacing existing objects (the manifest too)."""
        return self._par_batch([key], [tensor], *_one(parallelism, config, writer_partition), True,
                               "upsert_tensor_with_parallelism")[0]

    def batch_put_tensor_with_parallelism(self, keys, tensors_list, parallelisms=None, config=None,
                                          writer_partitions=None):
        """put_tensor_with_parallelism per key (parallelisms / writer_partitions: one entry per key, None
        for a full object); config.group_ids, when set, has one entry per key."""
        return self._par_batch(keys, tensors_list, parallelisms, config, writer_partitions, False,
                               "batch_put_tensor_with_parallelism")

    def batch_upsert_tensor_with_parallelism(self, keys, tensors_list, parallelisms=None, config=None,
                                             writer_partitions=None):
        """batch_put_tensor_with_parallelism replacing existing objects."""
        return self._par_batch(keys, tensors_list, parallelisms, config, writer_partitions, True,
                               "batch_upsert_tensor_with_parallelism")

    def put_tensor_with_parallelism_from(self, key, buffer_ptr, size, parallelism=None, config=None,
                                         writer_partition=None):
        """put_tensor_with_parallelism from a buffer holding a tensor object ([header][data], size its exact
        length); with a tp axis every tp rank's shard of the (full) object is written, no manifest."""
        return self._par_from([key], [buffer_ptr], [size], *_one(parallelism, config, writer_partition), False,
                              "put_tensor_with_parallelism_from")[0]

    def upsert_tensor_with_parallelism_from(self, key, buffer_ptr, size, parallelism=None, config=None,
                                            writer_partition=None):
        """put_tensor_with_parallelism_from replacing existing objects."""
        return self._par_from([key], [buffer_ptr], [size], *_one(parallelism, config, writer_partition), True,
                              "upsert_tensor_with_parallelism_from")[0]

    def batch_put_tensor_with_parallelism_from(self, keys, buffer_ptrs, sizes, parallelisms=None, config=None,
                                               writer_partitions=None):
        """put_tensor_with_parallelism_from per key."""
        return self._par_from(keys, buffer_ptrs, sizes, parallelisms, config, writer_partitions, False,
                              "batch_put_tensor_with_parallelism_from")

    def batch_upsert_tensor_with_parallelism_from(self, keys, buffer_ptrs, sizes, parallelisms=None, config=None,
                                                  writer_partitions=None):
        """batch_put_tensor_with_parallelism_from replacing existing objects."""
        return self._par_from(keys, buffer_ptrs, sizes, parallelisms, config, writer_partitions, True,
                              "batch_upsert_tensor_with_parallelism_from")

    # -------------------------------------------------------------- reads

    def _manifest(self, key):
        size = self.get_size(key)
        if not MANIFEST_SIZE <= size <= MANIFEST_MAX_OBJECT:
            if size >= 0:
                T._bad("manifest %s: object of %d bytes" % (key, size))
            return None
        raw = self._get_raw_many([key], MANIFEST_SIZE, MANIFEST_MAX_OBJECT)[0]
        return None if raw is None else decode_manifest(raw)

    def _load_all(self, keys):
        """[(tensor, Meta)] of every key, or None when one is missing or not a tensor object."""
        if len(keys) > MAX_SHARDS:
            return None
        got = self._get_meta_many(keys)
        return None if any(m is None for _, m in got) else got

    def _writer_full(self, key, ctx):
        """Result of the tensor writer_partition shards make up, from "<key>__writer_manifest", or None."""
        m = self._manifest(manifest_key(key, True))
        if m is None:
            return None
        dtype, gshape, sd, count = m
        loaded = self._load_all([writer_key(key, r, count, sd) for r in range(count)])
        if loaded is None:
            return None
        for r, (_, meta) in enumerate(loaded):
            got = stored_axes(meta)
            if got is None or got != [Axis(TP, r, count, sd, None, None)]:
                _log.error("%s: writer shard %d of %s is not the one its manifest names", ctx, r, key)
                return None
        torch = T._torch()
        t = assemble(torch, loaded, gshape, sd, dtype, 0, gshape[sd], ctx)
        return None if t is None else Result(tensor=t, header=T.encode_header(dtype, gshape, gshape))

    def _tp_sources(self, key, axes, ctx):
        """(loaded shards, global shape, split_dim, dtype) of the tp layout `axes` belongs to, or None:
        from "<key>__parallelism_manifest" when it names one that fits (any tp size), else a single tp axis's
        "<key>_tp_<rank>" set (its size from rank 0's header), else the request's own tp size."""
        tp = tp_of(axes)
        canon = canonical(axes)
        m = self._manifest(manifest_key(key))
        if m is not None:
            dtype, gshape, sd, count = m
            if tp.sd == sd and _uniform(gshape[sd], tp.size) and _uniform(gshape[sd], count):
                req = [with_tp(canon, r, count) for r in range(count)]
                loaded = self._load_all([shard_key(key, a) for a in req])
                if loaded is not None and all(compatible(a, meta) for a, (_, meta) in zip(req, loaded)):
                    return loaded, gshape, sd, dtype
        if len(axes) == 1:
            t0, m0 = self._get_meta(key if tp.size <= 1 else T.tp_key(key, 0))
            ax0 = next((a for a in m0.axes if a[0] == TP), None) if m0 and m0.layout == T.LAYOUT_SHARD else None
            if ax0 is None or ax0[4] != tp.sd or not _uniform(m0.global_shape[tp.sd], tp.size) or \
                    not _uniform(m0.global_shape[tp.sd], ax0[3]) or ax0[3] > MAX_SHARDS:
                _log.error("%s: no tp shard set of %s fits the request", ctx, key)
                return None
            count = ax0[3]
            loaded = self._load_all([key if count <= 1 else T.tp_key(key, r) for r in range(count)])
            if loaded is None:
                return None
            for r, (_, meta) in enumerate(loaded):
                a = next((x for x in meta.axes if x[0] == TP), None) if meta.layout == T.LAYOUT_SHARD else None
                if a is None or (a[2], a[3], a[4]) != (r, count, tp.sd):
                    _log.error("%s: tp shard %d of %s does not match rank 0's", ctx, r, key)
                    return None
            return loaded, m0.global_shape, tp.sd, m0.dtype
        req = [with_tp(canon, r) for r in range(tp.size)]
        loaded = self._load_all([shard_key(key, a) for a in req])
        if loaded is None or not all(compatible(a, meta) for a, (_, meta) in zip(req, loaded)):
            _log.error("%s: the tp shards of %s are missing or carry other axes", ctx, key)
            return None
        m0 = loaded[0][1]
        if not _uniform(m0.global_shape[tp.sd], tp.size):
            return None
        return loaded, m0.global_shape, tp.sd, m0.dtype

    def _resolve(self, key, target, into, ctx):
        """The Result a ReadTarget asks for, or None (docs/python.md, "Tensor parallelism", read table)."""
        parsed = parse_target(target, ctx)
        if parsed is None:
            return None
        mode, axes = parsed
        if axes is None:
            if mode == "as_stored":
                return Result(key=key)
            if mode == "full":
                return self._writer_full(key, ctx) or Result(key=key)
            _log.error("%s: ReadTarget mode \"shard\" needs a parallelism", ctx)
            return None
        if mode == "as_stored":
            _log.error("%s: ReadTarget mode \"as_stored\" takes no parallelism", ctx)
            return None
        tp, torch = tp_of(axes), T._torch()
        if mode == "shard":
            canon = canonical(axes)
            keys = [shard_key(key, axes)]
            if len(axes) == 1 and tp is not None:
                keys.append(writer_key(key, tp.rank, tp.size, tp.sd))
            for k in keys:
                raw = self._get_raw_many([k])[0]
                t, meta = (None, None) if raw is None else T._decode_buffer(torch, raw, len(raw))
                if meta is not None and compatible(canon, meta, False):
                    return Result(tensor=t, raw=raw)
            if tp is not None:
                src = self._tp_sources(key, axes, ctx)
                if src is not None:
                    loaded, gshape, sd, dtype = src
                    start, n = shard_range(gshape[sd], tp.rank, tp.size)
                    t = assemble(torch, loaded, gshape, sd, dtype, start, n, ctx)
                    if t is not None:
                        hdr = T.encode_header(dtype, gshape, list(t.shape), T.LAYOUT_SHARD,
                                              header_axes(axes, list(t.shape)))
                        return Result(tensor=t, header=hdr)
                if len(axes) == 1 and not into:  # upstream's last resort: the rank's object, unchecked
                    return Result(key=T.tp_key(key, tp.rank) if tp.size > 1 else key)
            _log.error("%s: no shard of %s matches the requested axes", ctx, key)
            return None
        if tp is None:
            _log.error("%s: a full read of a parallelism needs a tp axis", ctx)
            return None
        src = self._tp_sources(key, axes, ctx)
        if src is None:
            return None
        loaded, gshape, sd, dtype = src
        t = assemble(torch, loaded, gshape, sd, dtype, 0, gshape[sd], ctx)
        return None if t is None else Result(tensor=t, header=T.encode_header(dtype, gshape, gshape))

    def get_tensor_with_parallelism(self, key, target=None):
        """The tensor a ReadTarget asks for: as stored, a shard (read directly or cut from the tp layout
        stored, whatever its tp size) or the full tensor reassembled; None when there is none."""
        return self.batch_get_tensor_with_parallelism([key], None if target is None else [target])[0]

    def batch_get_tensor_with_parallelism(self, keys, targets=None):
        """get_tensor_with_parallelism per key (targets: one per key, or None)."""
        if not isinstance(keys, (list, tuple)):
            raise TypeError("batch_get_tensor_with_parallelism: keys must be a list")
        if targets is None:
            return self.batch_get_tensor(keys)
        if T._torch() is None or not self._ready or not isinstance(targets, (list, tuple)) or \
                len(targets) != len(keys):
            return [None] * len(keys)
        out = []
        for k, tg in zip(keys, targets):
            r = self._resolve(k, tg, False, "get_tensor_with_parallelism")
            out.append(None if r is None else self.get_tensor(r.key) if r.key is not None else r.tensor)
        return out

    def get_tensor_with_parallelism_into(self, key, buffer_ptr, size, target=None):
        """get_tensor_with_parallelism into the caller's buffer: the object ([header][data]) is written there
        (a reassembled one with the header upstream gives it) and the result views the buffer."""
        return self.batch_get_tensor_with_parallelism_into([key], [buffer_ptr], [size],
                                                           None if target is None else [target])[0]

    def batch_get_tensor_with_parallelism_into(self, keys, buffer_ptrs, sizes, targets=None):
        """get_tensor_with_parallelism_into per key."""
        torch = T._torch()
        if not all(isinstance(x, (list, tuple)) for x in (keys, buffer_ptrs, sizes)):
            raise TypeError("batch_get_tensor_with_parallelism_into: keys, buffer_ptrs and sizes must be lists")
        targets = [None] * len(keys) if targets is None else targets
        if torch is None or not self._ready or not isinstance(targets, (list, tuple)) or \
                not len(keys) == len(buffer_ptrs) == len(sizes) == len(targets):
            return [None] * len(keys)
        out = []
        for k, p, n, tg in zip(keys, buffer_ptrs, sizes, targets):
            if not isinstance(p, int) or p <= 0 or not isinstance(n, int) or n < 0:
                out.append(None)
                continue
            r = self._resolve(k, tg, True, "get_tensor_with_parallelism_into")
            if r is not None and r.key is not None:
                out.append(self.get_tensor_into(r.key, p, n))
                continue
            blob = None if r is None else r.raw if r.header is None else r.header + T._encode(
                torch, r.tensor.contiguous())[T.HEADER_SIZE:]
            if blob is not None and r.header is not None:
                struct.pack_into("<Q", blob, 32, len(blob) - T.HEADER_SIZE)  # the header's data bytes
            if blob is None or len(blob) > n:
                out.append(None)
                continue
            ctypes.memmove(p, (ctypes.c_char * len(blob)).from_buffer(blob), len(blob))
            out.append(T._from_memory(torch, p, len(blob)))
        return out


NAMES = ["put_tensor_with_parallelism", "upsert_tensor_with_parallelism", "batch_put_tensor_with_parallelism",
         "batch_upsert_tensor_with_parallelism", "put_tensor_with_parallelism_from",
         "upsert_tensor_with_parallelism_from", "batch_put_tensor_with_parallelism_from",
         "batch_upsert_tensor_with_parallelism_from", "get_tensor_with_parallelism",
         "batch_get_tensor_with_parallelism", "get_tensor_with_parallelism_into",
         "batch_get_tensor_with_parallelism_into"]
