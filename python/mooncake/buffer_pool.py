"""mooncake.buffer_pool: pools of memory registered with a store, for its zero-copy calls (docs/python.md,
"BufferPool"). Also `mooncake.BufferPool` / `mooncake.RegisteredBufferPool` and `mooncake.store.BufferPool`.

A lease is a block of registered memory of at least the size asked for: `lease.ptr` goes to `put_from`,
`batch_put_from`, `get_into` and the like, `lease.buffer` is a writable memoryview of its `size` bytes.
Blocks come in power-of-two size classes (from `min_size_class`; a size above `max_size_class` gets a block of
its own size) and go back to their class's free list on release, so a steady workload registers memory only
while it warms up. `max_bytes` (0: no limit) and `max_regions` (None: no limit) cap what the pool allocates;
at the cap `acquire` waits for a release (`block_on_exhaustion`, `timeout`) or raises RuntimeError.
"""

import ctypes
import mmap
import sys
import threading
import time

_MAX_BLOCK = 1 << 46  # 64 TiB: more than any host maps


def _pow2(n):
    return n > 0 and n & (n - 1) == 0


class _Block:
    def __init__(self, pool, size):
        self.size = size
        self.mm = mmap.mmap(-1, size)  # page-aligned, zero-filled
        self.arr = (ctypes.c_char * size).from_buffer(self.mm)
        self.ptr = ctypes.addressof(self.arr)
        if pool._store.register_buffer(self.ptr, size) != 0:
            self.free()
            raise RuntimeError("BufferPool: registering %d bytes with the store failed (is it set up?)" % size)

    def free(self):
        self.arr = None
        self.mm.close()


class BufferLease:
    """A block of registered memory held until release() (or the lease is collected). Context manager."""

    def __init__(self, pool, block, size):
        self._pool, self._block, self.size = pool, block, size
        self._view_base = (ctypes.c_char * size).from_address(block.ptr) if size else None

    @property
    def ptr(self):
        """Address of the lease's memory (registered with the pool's store)."""
        return self._block.ptr if self._block else 0

    @property
    def buffer(self):
        """A writable memoryview of the lease's size bytes; release() refuses while one is alive."""
        if self._block is None:
            raise RuntimeError("BufferPool: the lease was released")
        return memoryview(self._view_base).cast("B") if self.size else memoryview(b"")

    def _exported(self):
        # each live memoryview of buffer holds one reference to _view_base (besides ours and the call's)
        return self._view_base is not None and sys.getrefcount(self._view_base) > 2

    def release(self):
        """Gives the block back to the pool (idempotent). RuntimeError while a memoryview of buffer is alive."""
        if self._block is None:
            return
        if self._exported():
            raise RuntimeError("BufferPool: the lease has exported views (memoryviews of .buffer still alive)")
        block, self._block, self._view_base = self._block, None, None
        self._pool._put_back(block)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()
        return False

    def __del__(self):
        if getattr(self, "_block", None) is not None:
            block, self._block, self._view_base = self._block, None, None
            self._pool._put_back(block)


class BufferPool:
    """Pool of store-registered memory blocks (module docstring; upstream's arguments)."""

    def __init__(self, store, max_bytes=0, min_size_class=64 * 1024, max_size_class=None, alignment=8 * 1024 * 1024,
                 block_on_exhaustion=True, default_timeout=None, max_regions=None, prewarm_size=None,
                 prewarm_count=0):
        if not hasattr(store, "register_buffer"):
            raise TypeError("BufferPool: store must be a MooncakeDistributedStore")
        if not _pow2(alignment):
            raise RuntimeError("BufferPool: alignment must be a power of two, not %r" % (alignment,))
        if not _pow2(min_size_class):
            raise RuntimeError("BufferPool: min_size_class must be a power of two")
        if max_size_class is not None and (not _pow2(max_size_class) or max_size_class < min_size_class):
            raise RuntimeError("BufferPool: max_size_class must be a power of two >= min_size_class")
        self._store = store
        self._max_bytes, self._min, self._max_class = max_bytes, min_size_class, max_size_class
        self._block, self._timeout, self._max_regions = bool(block_on_exhaustion), default_timeout, max_regions
        self._cv = threading.Condition()
        self._free = {}  # size class -> [_Block]
        self._all = []
        self._bytes = 0
        self._leased = 0
        self._closed = False
        if prewarm_size is not None and prewarm_count:
            self.prewarm(prewarm_size, prewarm_count)

    def _class_of(self, size):
        if isinstance(size, bool) or not isinstance(size, int):
            raise TypeError("BufferPool: size must be an int")
        if size < 0 or size > _MAX_BLOCK:
            raise RuntimeError("BufferPool: size %r overflows the pool's capacity" % (size,))
        c = self._min
        while c < size:
            c <<= 1
        if self._max_class is not None and c > self._max_class:
            c = size  # above the largest class: a block of its own size
        return c

    def _room(self, c):
        if self._max_regions is not None and len(self._all) >= self._max_regions:
            return False
        return not self._max_bytes or self._bytes + c <= self._max_bytes

    def acquire(self, size, block=None, timeout=None):
        """A BufferLease of at least size bytes (its .size is size). Waits for a release when the pool is at
        its cap (block, default block_on_exhaustion; timeout in seconds, default default_timeout), else
        RuntimeError("...exhausted")."""
        c = self._class_of(size)
        if self._max_bytes and c > self._max_bytes:
            raise RuntimeError("BufferPool: %d bytes exceed the pool's capacity" % size)
        block = self._block if block is None else bool(block)
        timeout = self._timeout if timeout is None else timeout
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cv:
            while True:
                if self._closed:
                    raise RuntimeError("BufferPool: closed")
                if self._free.get(c):
                    b = self._free[c].pop()
                    break
                if self._room(c):
                    b = _Block(self, c)
                    self._all.append(b)
                    self._bytes += c
                    break
                left = None if deadline is None else deadline - time.monotonic()
                if not block or (left is not None and left <= 0):
                    raise RuntimeError("BufferPool: exhausted (%d regions, %d bytes)" % (len(self._all), self._bytes))
                self._cv.wait(left)  # releases the GIL while waiting
            self._leased += 1
        return BufferLease(self, b, size)

    def prewarm(self, size, count):
        """Allocates and registers count blocks of size's class ahead of use (as far as the caps allow)."""
        c = self._class_of(size)
        with self._cv:
            for _ in range(count):
                if not self._room(c):
                    break
                b = _Block(self, c)
                self._all.append(b)
                self._bytes += c
                self._free.setdefault(c, []).append(b)

    def _put_back(self, b):
        with self._cv:
            self._leased -= 1
            self._free.setdefault(b.size, []).append(b)
            self._cv.notify_all()

    def close(self):
        """Unregisters and frees every block. RuntimeError while leases are active; idempotent."""
        with self._cv:
            if self._leased:
                raise RuntimeError("BufferPool: %d active leases" % self._leased)
            if self._closed:
                return
            self._closed = True
            for b in self._all:
                self._store.unregister_buffer(b.ptr)
                b.free()
            self._all, self._free, self._bytes = [], {}, 0
            self._cv.notify_all()


RegisteredBufferPool = BufferPool

__all__ = ["BufferPool", "RegisteredBufferPool", "BufferLease"]
