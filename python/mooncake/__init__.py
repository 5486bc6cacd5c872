"""Mooncake: a distributed KV-cache store (mooncake.store) and transfer engine (mooncake.engine).

Importing the package never fails, even when the native extension is missing; the submodules report
that on import instead.
"""

__version__ = "0.1.0"

try:  # P2: upstream's buffer pool lives in a torch-based module; there is none here.
    from . import _mooncake  # noqa: F401
except ImportError:  # pragma: no cover - depends on how the package was built
    _mooncake = None

BufferPool = None
RegisteredBufferPool = BufferPool
