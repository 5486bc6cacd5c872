#!/usr/bin/env python3
"""Checks deploy/: Prometheus rules (promtool check + unit tests of the guide's thresholds), the scrape
config, the Grafana dashboard (valid JSON, every metric it or the rules name is exported by a real
master), the master and storage-node example configs (accepted by the real binaries), the systemd
units (systemd-analyze verify) and the tmpfiles.d file (parsed by systemd-tmpfiles without applying it);
the systemd checks are skipped with the reason when the tool is not installed.

Usage: test_deploy.py <repo root> <dir with mooncake_master and mooncake_store_node>"""
import json
import os
import re
import shutil
import sys
import tempfile
import time

import yaml

ROOT, BIN = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(ROOT, "tests", "python"))
from ports import free_port  # noqa: E402  (never hands out one port twice)
from script_checks import Procs, check, failures, http, run, stop, wait_port  # noqa: E402
DEPLOY = os.path.join(ROOT, "deploy")






# ---------------------------------------------------------------- Prometheus files
promtool = shutil.which("promtool")
check(promtool is not None, "promtool is installed (Debian package prometheus; scripts/install-deps.sh)")
if promtool:
    rc, out = run([promtool, "check", "rules", os.path.join(DEPLOY, "prometheus/alerts.yml")])
    check(rc == 0, "promtool check rules deploy/prometheus/alerts.yml\n" + out)
    rc, out = run([promtool, "test", "rules", os.path.join(DEPLOY, "prometheus/alerts_test.yml")])
    check(rc == 0, "promtool test rules: every guide threshold fires above and stays silent below\n" + out)
    rc, out = run([promtool, "check", "config", os.path.join(DEPLOY, "prometheus/prometheus.yml")])
    check(rc == 0, "promtool check config deploy/prometheus/prometheus.yml\n" + out)

rules = yaml.safe_load(open(os.path.join(DEPLOY, "prometheus/alerts.yml")))
alerts = {r["alert"]: r for g in rules["groups"] for r in g["rules"]}
# The guide's thresholds, literally in the expressions.
check("0.8 * max_over_time(master_segment_count" in alerts["MooncakeSegmentCountDropped"]["expr"], "segment drop 20 %")
check(alerts["MooncakeEvictionRateHigh"]["expr"].strip() == "eviction_rate > 100", "eviction_rate > 100/s")
check(alerts["MooncakeTransferLatencyHigh"]["expr"].strip() == "te_transfer_latency_p99 > 0.05", "p99 > 50 ms")
check(") < 0.6" in alerts["MooncakeHitRatioLow"]["expr"], "hit ratio < 60 %")
check("master_rpc_qps" in alerts["MooncakeMasterRpcNearLimit"]["expr"], "master_rpc_qps near the limit")

# ---------------------------------------------------------------- metric names referenced
PROMQL_WORDS = {"by", "without", "and", "or", "unless", "on", "ignoring", "group_left", "group_right", "offset", "bool"}


def metric_names(expr):
    e = re.sub(r'"(?:[^"\\]|\\.)*"', "", expr)   # strings
    e = re.sub(r"\{[^}]*\}", "", e)               # label matchers
    e = re.sub(r"\[[^\]]*\]", "", e)              # range selectors
    e = re.sub(r"\b(by|without|on|ignoring)\s*\([^)]*\)", "", e)  # grouping label lists
    names = set()
    for m in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", e):
        rest = e[m.end():].lstrip()
        if rest.startswith("(") or m.group(0) in PROMQL_WORDS:
            continue
        if re.fullmatch(r"\d.*|e\d*", m.group(0)):
            continue
        names.add(m.group(0))
    return names


dash = json.load(open(os.path.join(DEPLOY, "grafana/mooncake-dashboard.json")))
check(dash.get("title") and isinstance(dash.get("panels"), list) and dash["panels"], "dashboard JSON parses, has panels")
referenced = set()
for p in dash["panels"]:
    targets = p.get("targets", [])
    check(targets and all(t.get("expr") for t in targets), f"panel '{p.get('title')}' has queries")
    for t in targets:
        referenced |= metric_names(t["expr"].replace("$job", "mooncake-master"))
for r in alerts.values():
    referenced |= metric_names(r["expr"])
referenced.discard("up")  # Prometheus' own series
GUIDE = {"master_segment_count", "eviction_rate", "te_transfer_latency_p99", "store_hit_ratio", "master_rpc_qps"}
check(GUIDE <= referenced, "dashboard + rules cover the guide's five metrics")

# ---------------------------------------------------------------- a real master with the example configs
tmp = tempfile.mkdtemp(prefix="mc_test_deploy_")
procs = Procs(tmp)
start = procs.start


try:
    rpc, meta, admin = free_port(), free_port(), free_port()
    m = start([os.path.join(BIN, "mooncake_master"),
               "--config_path=" + os.path.join(DEPLOY, "master/master-embedded-metadata.json"),
               f"--rpc_port={rpc}", f"--http_metadata_server_port={meta}", f"--metrics_port={admin}",
               "--http_metadata_server_host=127.0.0.1", "--metrics_host=127.0.0.1"], "master.log")
    up = wait_port(rpc, m) and wait_port(admin, m)
    check(up, "mooncake_master starts with deploy/master/master-embedded-metadata.json")
    log = open(os.path.join(tmp, "master.log")).read()
    check("unknown key" not in log, "the master knows every key of the JSON example\n" + log[-2000:])
    st, body = http(admin, "/config")
    if st == 200:
        cfg = json.loads(body)
        check(cfg.get("eviction_ratio") == 0.1 and cfg.get("client_ttl") == 60,
              "/config shows the file's eviction_ratio 0.1 and client_live_ttl_sec 60")
    else:
        check(False, f"/config answers 200 (got {st})")
    node = start([os.path.join(BIN, "mooncake_store_node"),
                  "--config_path=" + os.path.join(DEPLOY, "storage-node/store-node.json"),
                  "--local_hostname=127.0.0.1", f"--master_server_addr=127.0.0.1:{rpc}",
                  f"--metadata_server=http://127.0.0.1:{meta}/metadata", "--global_segment_size=16MB"], "node.log")
    ready = False
    deadline = time.time() + 15
    while time.time() < deadline and node.poll() is None and not ready:
        ready = "ready" in open(os.path.join(tmp, "node.log")).read()
        time.sleep(0.05)
    check(ready, "mooncake_store_node starts from deploy/storage-node/store-node.json")
    # Let the node's statistics reach the master (reported every <= 5 s, docs/admin.md).
    time.sleep(1)
    st, body = http(admin, "/metrics")
    check(st == 200, f"GET /metrics answers 200 (got {st})")
    exported = {l.split("{")[0].split(" ")[0] for l in body.splitlines() if l and not l.startswith("#")}
    missing = sorted(referenced - exported)
    check(st == 200 and not missing, "every metric the dashboard and rules name is exported: missing " + str(missing))
    st, body = http(admin, "/get_segments_detail")
    if st == 200:
        zones = [s.get("zone") for s in json.loads(body).get("segments", [])]
        check(zones == ["rack-a"], f"the node's zone from the example config reaches the master ({zones})")
    else:
        check(False, f"/get_segments_detail answers 200 (got {st})")
    check(stop(node) == 0, "mooncake_store_node exits 0 on SIGTERM")
    stop(m)

    # The YAML example: accepted as a whole (its etcd cleanup target is not contacted at start).
    rpc2, admin2 = free_port(), free_port()
    m2 = start([os.path.join(BIN, "mooncake_master"), "--config_path=" + os.path.join(DEPLOY, "master/master.yaml"),
                f"--rpc_port={rpc2}", f"--metrics_port={admin2}", "--metrics_host=127.0.0.1"], "master2.log")
    check(wait_port(rpc2, m2), "mooncake_master starts with deploy/master/master.yaml")
    log = open(os.path.join(tmp, "master2.log")).read()
    check("unknown key" not in log and "Loading config from" in log, "the master knows every key of the YAML example")
    stop(m2)

    # The HA example (deploy/master/master-ha.yaml) with two masters on a real etcd, its addresses pointed
    # at this machine: one leads, the other stands by (-1010 / 503), and takes over when the leader dies.
    etcd_bin = shutil.which("etcd")
    check(etcd_bin is not None, "etcd is installed (scripts/install-deps.sh: etcd-server)")
    if etcd_bin:
        ec, ep = free_port(), free_port()
        e = start([etcd_bin, "--name", "d", "--data-dir", os.path.join(tmp, "etcd"),
                   "--listen-client-urls", f"http://127.0.0.1:{ec}", "--advertise-client-urls", f"http://127.0.0.1:{ec}",
                   "--listen-peer-urls", f"http://127.0.0.1:{ep}", "--initial-advertise-peer-urls",
                   f"http://127.0.0.1:{ep}", "--initial-cluster", f"d=http://127.0.0.1:{ep}", "--log-level", "warn"],
                  "etcd.log")
        check(wait_port(ec, e), "etcd starts")
        ha = []
        for i in range(2):
            r, a = free_port(), free_port()
            p_ = start([os.path.join(BIN, "mooncake_master"), "--config_path=" + os.path.join(DEPLOY, "master/master-ha.yaml"),
                        f"--rpc_port={r}", f"--metrics_port={a}", "--metrics_host=127.0.0.1", "--rpc_address=127.0.0.1",
                        f"--ha_backend_connstring=127.0.0.1:{ec}", f"--metadata_server=etcd://127.0.0.1:{ec}"],
                       f"master-ha{i}.log")
            check(wait_port(a, p_), f"mooncake_master {i} starts with deploy/master/master-ha.yaml")
            ha.append((p_, r, a))
            if i == 0:  # the first one wins before the second starts
                deadline = time.time() + 10
                while time.time() < deadline and http(a, "/role")[1] != "leader":
                    time.sleep(0.05)
        roles = [http(a, "/role")[1] for _, _, a in ha]
        check(roles == ["leader", "standby"], f"one leader, one standby ({roles})")
        check(http(ha[1][2], "/get_all_keys")[0] == 503, "the standby answers data endpoints with 503")
        # A standby's role is known before its first read of the leader key: wait for that read.
        deadline = time.time() + 10
        while True:
            st, body = http(ha[1][2], "/leader")
            if (st == 200 and '"present":true' in body) or time.time() >= deadline:
                break
            time.sleep(0.05)
        check(st == 200 and f'"leader_address":"127.0.0.1:{ha[0][1]}"' in body, "the standby names the leader: " + body)
        ha[0][0].kill()
        ha[0][0].wait()
        deadline = time.time() + 10
        while time.time() < deadline and http(ha[1][2], "/role")[1] != "leader":
            time.sleep(0.05)
        check(http(ha[1][2], "/role")[1] == "leader", "the standby takes over from a SIGKILLed leader")
        stop(ha[1][0])
        stop(e)

    # ------------------------------------------------------------ systemd units
    sda = shutil.which("systemd-analyze")
    if not sda:
        print("SKIP systemd-analyze verify: systemd-analyze is not installed on this machine")
    else:
        units = os.path.join(tmp, "units")
        os.mkdir(units)
        for name in os.listdir(os.path.join(DEPLOY, "systemd")):
            text = open(os.path.join(DEPLOY, "systemd", name)).read()
            # The units name the installed paths; verify them against this build's binaries.
            text = text.replace("/usr/local/bin/", BIN.rstrip("/") + "/")
            if "/usr/bin/etcd" in text and not os.path.exists("/usr/bin/etcd"):
                text = text.replace("/usr/bin/etcd", shutil.which("etcd") or "/usr/bin/etcd")
            open(os.path.join(units, name), "w").write(text)
        rc, out = run([sda, "verify"] + sorted(os.path.join(units, n) for n in os.listdir(units)))
        check(rc == 0 and "Unknown" not in out, "systemd-analyze verify deploy/systemd/*.service\n" + out)

    # ------------------------------------------------------------ tmpfiles.d (huge pages for shared memory)
    stf = shutil.which("systemd-tmpfiles")
    conf = os.path.join(DEPLOY, "tmpfiles", "mooncake-hugepages.conf")
    if not stf:
        print("SKIP systemd-tmpfiles: systemd-tmpfiles is not installed on this machine")
    else:
        # --prefix matches no line, so the file is parsed (syntax errors fail) and nothing is written.
        rc, out = run([stf, "--create", "--prefix=/nonexistent-mooncake-check", conf])
        check(rc == 0 and not out.strip(), "systemd-tmpfiles parses deploy/tmpfiles/mooncake-hugepages.conf\n" + out)
    check("shmem_enabled - - - - advise" in open(conf).read(), "the tmpfiles.d line sets shmem huge pages to advise")
finally:
    procs.kill_all()
    if failures:
        for name in ("master.log", "node.log", "master2.log"):
            path = os.path.join(tmp, name)
            if os.path.exists(path):
                print(f"---- {name} ----\n" + open(path).read()[-3000:])
    shutil.rmtree(tmp, ignore_errors=True)

print(f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
