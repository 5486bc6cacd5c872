"""Master HA from Python (docs/ha.md, docs/operations.md "Two masters, three etcd members"): the deployment
guide's production setup without its hand-written retry loop over master addresses. Two `mooncake_master
--enable_ha` on a real etcd; the store is set up once with `master_server_address="etcd://..."` and the
transfer-engine metadata in the same etcd. The leader is SIGKILLed: the same store object, never set up again,
reads its objects back from the new leader and puts again within the guide's 3 s switch window (a put made
while no master serves fails and is simply made again: that is not a retry loop over master addresses)."""

import json
import os
import shutil
import time
import urllib.request

from conftest import Proc, binary, free_port, start_etcd, wait_port

MiB = 1 << 20


def http_get(port, path):
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=2) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except OSError:
        return 0, ""


def start_ha_master(etcd_port):
    rpc, admin = free_port(), free_port()
    p = Proc([binary("mooncake_master"), "--enable_ha", "--ha_backend_connstring=127.0.0.1:%d" % etcd_port,
              "--rpc_address=127.0.0.1", "--rpc_port=%d" % rpc, "--metrics_port=%d" % admin,
              "--metrics_host=127.0.0.1"], "ha_master")
    assert wait_port(admin, 15, p.p), p.output()
    p.rpc, p.admin = rpc, admin
    return p


def wait_role(m, role, timeout=10):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if http_get(m.admin, "/role")[1] == role:
            return True
        time.sleep(0.05)
    return False


def test_store_follows_the_leader_without_a_retry_loop():
    from mooncake.store import MooncakeDistributedStore
    etcd = start_etcd()
    masters = []
    store = None
    try:
        masters.append(start_ha_master(etcd.port))
        assert wait_role(masters[0], "leader"), masters[0].output()
        masters.append(start_ha_master(etcd.port))
        assert wait_role(masters[1], "standby"), masters[1].output()
        status, body = http_get(masters[1].admin, "/leader")
        assert status == 200 and json.loads(body).get("leader_address") in (None, "127.0.0.1:%d" % masters[0].rpc)

        ep = "127.0.0.1:%d" % etcd.port
        store = MooncakeDistributedStore()
        # the guide's setup, pointed at this machine: metadata and the master both found through etcd
        rc = store.setup("127.0.0.1", "etcd://" + ep, 64 * MiB, 16 * MiB, "tcp", "", "etcd://" + ep)
        assert rc == 0, "setup with an etcd:// master address failed: %d" % rc
        values = {"ha-py-%d" % i: os.urandom(1000 + 997 * i) for i in range(20)}
        for k, v in values.items():
            assert store.put(k, v) == 0
        assert store.get("ha-py-3") == values["ha-py-3"]

        masters[0].p.kill()
        masters[0].p.wait()
        t_kill = time.monotonic()
        rc, tries = -1, 0
        while rc != 0 and time.monotonic() - t_kill < 10:
            rc = store.put("ha-py-after", b"after the failover")
            tries += 1
            if rc != 0:
                time.sleep(0.05)
        took = time.monotonic() - t_kill
        print("first successful put %.2f s after the leader's SIGKILL (%d tries)" % (took, tries))
        assert rc == 0, "no put succeeded within 10 s of the failover"
        assert took <= 3.0, "the failover took %.2f s (the guide's switch window is 3 s)" % took
        assert http_get(masters[1].admin, "/role")[1] == "leader"
        # every object put before the kill reads back, with its bytes, from the new leader
        for k, v in values.items():
            assert store.get(k) == v, k
        assert store.get("ha-py-after") == b"after the failover"
    finally:
        if store is not None:
            store.close()
        for m in masters:
            m.stop()
        etcd.stop()
        shutil.rmtree(getattr(etcd, "data_dir", ""), ignore_errors=True)
