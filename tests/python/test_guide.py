"""The deployment guide's single-machine walk-through, verbatim: etcd, then `mooncake_master --rpc_port=50051
--eviction_high_watermark_ratio=0.9 --default_kv_lease_ttl=5000`, then the guide's Python snippet, which
must print b'hello_mooncake'. Ports are the guide's (2379, 50051) unless another process holds them; then
free ones are substituted (only ports may differ: docs/python.md, "Tests and benchmark") and the snippet names them."""

import os
import textwrap

from conftest import Proc, binary, free_port, port_busy, run_py, start_etcd, wait_port

SNIPPET = textwrap.dedent('''
    from mooncake.store import MooncakeDistributedStore
    store = MooncakeDistributedStore()
    store.setup(
        local_hostname="127.0.0.1",
        metadata_server="etcd://127.0.0.1:2379",
        global_segment_size=8 * 1024 * 1024 * 1024,  # 8GB
        local_buffer_size=512 * 1024 * 1024,  # 512MB
        protocol="tcp",
        device_name="",
    )
    store.put("test_key", b"hello_mooncake")
    print(store.get("test_key"))
''')


def test_guide_single_machine_put_get():
    etcd_port = 2379 if not port_busy(2379) else free_port()
    rpc_port = 50051 if not port_busy(50051) else free_port()
    etcd = start_etcd(etcd_port)
    master = Proc([binary("mooncake_master"), "--rpc_port=%d" % rpc_port, "--eviction_high_watermark_ratio=0.9",
                   "--default_kv_lease_ttl=5000", "--metrics_port=%d" % free_port()], "guide_master")
    try:
        assert wait_port(rpc_port, 15, master.p), master.output()
        code = SNIPPET.replace("127.0.0.1:2379", "127.0.0.1:%d" % etcd_port)
        if rpc_port != 50051:
            code = code.replace('device_name="",', 'device_name="", master_server_address="127.0.0.1:%d",' % rpc_port)
        r = run_py(code, timeout=60)
        assert r.returncode == 0, r.stderr.decode()
        assert r.stdout.strip().splitlines()[-1] == b"b'hello_mooncake'"
    finally:
        master.stop()
        etcd.stop()
        import shutil
        shutil.rmtree(getattr(etcd, "data_dir", ""), ignore_errors=True)
