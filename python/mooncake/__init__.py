"""Mooncake: a distributed KV-cache store (mooncake.store) and transfer engine (mooncake.engine).

Importing the package never fails, even when the native extension is missing; the submodules report
that on import instead.
"""

__version__ = "0.1.0"

try:
    from . import _mooncake  # noqa: F401
except ImportError:  # pragma: no cover - depends on how the package was built
    _mooncake = None

from .buffer_pool import BufferPool, RegisteredBufferPool  # noqa: E402  (pure Python: never fails)
