"""mooncake.p2p: the P2P store (docs/p2p-store.md), over libmooncake_p2p.

P2PStore(metadata_conn, local_server_name, nic_priority_matrix="") starts one transfer engine; its methods
return 0 or a negative error code (strerror(code) gives the text, e.g. "error: payload not found in
metadata"); list() returns the payloads as dicts {Name, MaxShardSize, TotalSize, SizeList}. Buffers are
given as addresses and sizes (e.g. from ctypes or numpy) and must stay alive while the payload is held.
Only wrong argument types raise (TypeError).
"""

from . import _mooncake

INVALID_ARGUMENT = -1
ADDRESS_OVERLAPPED = -2
PAYLOAD_OPENED = -3
PAYLOAD_NOT_OPENED = -4
PAYLOAD_NOT_FOUND = -5
TOO_MANY_RETRIES = -6
TRANSFER_ENGINE = -7
ALREADY_EXISTS = -8
METADATA = -9

DEFAULT_SHARD_SIZE = 64 << 20


def strerror(code):
    """The error text of a code ("error: invalid argument", ...)."""
    return _mooncake.P2PStore.strerror(code)


class P2PStore(_mooncake.P2PStore):
    def __init__(self, metadata_conn, local_server_name, nic_priority_matrix=""):
        super().__init__()
        self.ok = self.init(metadata_conn, local_server_name, nic_priority_matrix or "") == 0

    def register(self, name, addr_list, size_list, max_shard_size=DEFAULT_SHARD_SIZE, location="cpu:0",
                 force_create=False):
        return super().register(name, addr_list, size_list, max_shard_size, location, bool(force_create))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
