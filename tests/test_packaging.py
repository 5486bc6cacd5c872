#!/usr/bin/env python3
"""Checks what `cmake --install` gives distributions and integrations (docs/packaging.md), on a real
install of the build into a temporary prefix:

- the programs on PATH are exactly the daemons, the `mooncake` and `mooncake_p2p` CLIs and upstream's program names; the
  generically named tools are in libexec/mooncake; every program on PATH answers --version;
- a man page per program on PATH that names every flag its --help names (and `man -l` renders it);
- `pkg-config --cflags --libs mooncake-store` (PKG_CONFIG_PATH=<prefix>/lib/pkgconfig) builds a C program
  that puts and gets through a master started from <prefix>/bin; a CMake project with
  find_package(Mooncake) and Mooncake::store builds and runs; a too-new version request is refused;
- sd_notify: with NOTIFY_SOCKET set, the installed mooncake_master sends READY=1 only once its RPC, admin
  and metadata ports accept connections (and none when it cannot listen), STOPPING=1 on SIGTERM;
  mooncake_store_node READY=1 once its segment is mounted at the master, STOPPING=1 on SIGTERM;
- the installed systemd units (Type=notify, hardening, ExecStart in <prefix>/bin, also under DESTDIR) pass
  `systemd-analyze verify` and an offline `systemd-analyze security` review; the sysusers.d entry
  creates the units' user in a `systemd-sysusers --dry-run` on an empty root. The systemd tools' checks are
  skipped with the reason when a tool is not installed.

Usage: test_packaging.py <repo root> <build dir>"""
import functools
import json
import os
import re
import shlex
import shutil
import signal
import socket
import sys
import tempfile
import time

ROOT, BUILD = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
sys.path.insert(0, os.path.join(ROOT, "tests", "python"))
from ports import free_port  # noqa: E402  (never hands out one port twice)
from script_checks import Procs, can_connect, check, failures, http, stop, wait_port  # noqa: E402
import script_checks  # noqa: E402

run = functools.partial(script_checks.run, timeout=120)  # installs and compiles take longer than its 60 s

ON_PATH = {"mooncake", "mooncake_master", "mooncake_store_node", "mooncake_client", "mooncake_http_metadata_server",
           "transfer_engine_bench", "mooncake_p2p"}
GENERIC = {"store_demo", "te_demo", "store_bench", "trace_replay", "soak", "master_scale", "master_segments"}
UNITS = ["mooncake-master.service", "mooncake-master-ha.service", "mooncake-store-node.service",
         "mooncake-client.service"]
HARDENING = ["NoNewPrivileges=yes", "ProtectSystem=strict", "ProtectHome=yes", "PrivateTmp=yes",
             "ProtectKernelTunables=yes", "ProtectKernelModules=yes", "ProtectControlGroups=yes",
             "RestrictNamespaces=yes", "RestrictSUIDSGID=yes", "LockPersonality=yes", "MemoryDenyWriteExecute=yes",
             "SystemCallFilter=@system-service", "CapabilityBoundingSet=", "RestrictAddressFamilies="]




def cache_value(name):
    with open(os.path.join(BUILD, "CMakeCache.txt")) as f:
        for line in f:
            if line.startswith(name + ":"):
                return line.split("=", 1)[1].strip()
    return ""


def version_h():
    with open(os.path.join(ROOT, "include", "mooncake", "version.h")) as f:
        return re.search(r'#define MOONCAKE_VERSION_STRING "([0-9.]+)"', f.read()).group(1)





tmp = tempfile.mkdtemp(prefix="mc_test_packaging_")
prefix = os.path.join(tmp, "prefix")
procs = Procs(tmp)
start = procs.start


class Notify:
    """The service manager's side of sd_notify(3): a datagram socket a child finds in NOTIFY_SOCKET."""

    def __init__(self, name):
        self.path = os.path.join(tmp, name)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)

    def env(self):
        return dict(os.environ, NOTIFY_SOCKET=self.path)

    def recv(self, timeout):
        """The next message as a dict of its VAR=value lines, or None after timeout seconds."""
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(4096).decode()
        except socket.timeout:
            return None
        return dict(line.split("=", 1) for line in data.splitlines() if "=" in line)

    def wait_for(self, var, proc, timeout=20):
        """Messages until one sets var (returned with what else arrived before it), the process exits or time runs out."""
        seen = []
        deadline = time.time() + timeout
        while time.time() < deadline:
            m = self.recv(0.1)
            if m is not None:
                seen.append(m)
                if var in m:
                    return m, seen
            elif proc.poll() is not None:
                break
        return None, seen


try:
    # ------------------------------------------------------------ install into a temporary prefix
    rc, out = run(["cmake", "--install", BUILD, "--prefix", prefix])
    check(rc == 0, "cmake --install <build> --prefix <tmp>\n" + out[-3000:])
    bindir, libexec = os.path.join(prefix, "bin"), os.path.join(prefix, "libexec", "mooncake")
    on_path = set(os.listdir(bindir)) if os.path.isdir(bindir) else set()
    check(on_path == ON_PATH, f"<prefix>/bin holds exactly {sorted(ON_PATH)} (got {sorted(on_path)})")
    check(not (on_path & GENERIC), "no generically named tool in <prefix>/bin")
    in_libexec = set(os.listdir(libexec)) if os.path.isdir(libexec) else set()
    check(GENERIC <= in_libexec, f"the other tools are in <prefix>/libexec/mooncake (got {sorted(in_libexec)})")
    version = version_h()
    for p in sorted(ON_PATH):
        rc, out = run([os.path.join(bindir, p), "--version"], timeout=30)
        check(rc == 0 and out.startswith(p + " ") and version in out, f"{p} --version: {out.strip()}")

    # ------------------------------------------------------------ man pages
    man_dir = os.path.join(prefix, "share", "man", "man1")
    if check(cache_value("MC_MAN_PAGES_BUILT") == "ON",
             "the build generated man pages (help2man installed: scripts/install-deps.sh)"):
        man = shutil.which("man")
        for p in sorted(ON_PATH):
            page = os.path.join(man_dir, p + ".1")
            if not check(os.path.isfile(page), f"man page {p}.1 installed"):
                continue
            text = open(page).read().replace("\\-", "-")
            _, help_text = run([os.path.join(bindir, p), "--help"], timeout=30)
            flags = set(re.findall(r"(?<![\w-])--([a-z][a-z0-9_-]*)", help_text))
            missing = sorted(f for f in flags if "--" + f not in text)
            check(len(flags) >= 3 and not missing, f"{p}.1 names every flag of {p} --help ({len(flags)} flags; missing {missing})")
            check(re.search(r"^\.TH " + re.escape(p.upper()) + r' "1"', text, re.M) and version in text,
                  f"{p}.1 is section 1 and carries the version")
            if man:
                rc, out = run([man, "-l", page], env=dict(os.environ, MANPAGER="cat", PAGER="cat", MANWIDTH="100"))
                check(rc == 0 and p in out and "NAME" in out, f"man -l {p}.1 renders it")
        if not man:
            print("SKIP man -l: man is not installed on this machine")

    # ------------------------------------------------------------ a master from the prefix for the C programs
    rpc, meta, admin = free_port(), free_port(), free_port()
    master = start([os.path.join(bindir, "mooncake_master"), f"--rpc_port={rpc}", "--enable_http_metadata_server",
                    f"--http_metadata_server_port={meta}", "--http_metadata_server_host=127.0.0.1",
                    f"--metrics_port={admin}", "--metrics_host=127.0.0.1"], "master-c.log")
    check(wait_port(rpc, master) and wait_port(meta, master), "the installed mooncake_master serves")
    prog = r'''
#include <stdio.h>
#include <string.h>
#include <mooncake/runtime.h>
#include <mooncake/store.h>
/* a store client of the installed libraries: put and get one value through a real master */
int main(int argc, char **argv) {
  if (argc != 3 || strcmp(mooncake_version(), MOONCAKE_VERSION_STRING)) return 2;
  mooncake_store_t s = mooncake_store_create();
  int rc = s ? mooncake_store_setup(s, "127.0.0.1", argv[1], 16u << 20, 16u << 20, "tcp", "", argv[2]) : -1;
  if (rc) { fprintf(stderr, "setup: %d\n", rc); return 3; }
  char buf[64] = "";
  rc = mooncake_store_put(s, "packaging-key", "installed", 9, NULL);
  long long n = rc ? -1 : (long long)mooncake_store_get_into(s, "packaging-key", buf, sizeof(buf));
  mooncake_store_destroy(s);
  if (rc || n != 9 || memcmp(buf, "installed", 9)) { fprintf(stderr, "put %d get %lld\n", rc, n); return 4; }
  printf("mooncake %s: put and get ok\n", mooncake_version());
  return 0;
}
'''
    meta_url, master_addr = f"http://127.0.0.1:{meta}/metadata", f"127.0.0.1:{rpc}"

    def run_program(exe, what):
        rc, out = run(["ldd", exe])
        libs = dict(re.findall(r"^\s*(libmooncake_\w+\.so\.\d+) => (\S+)", out, re.M))
        check(set(libs) == {"libmooncake_store.so.0", "libmooncake_te.so.0"}
              and all(os.path.dirname(os.path.realpath(v)) == os.path.realpath(os.path.join(prefix, "lib"))
                      for v in libs.values()),
              f"{what} loads both libraries from <prefix>/lib: {libs}")
        env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
        rc, out = run([exe, meta_url, master_addr], timeout=60, env=env)
        check(rc == 0 and "put and get ok" in out, f"{what} runs against the installed master\n{out}")

    # ------------------------------------------------------------ pkg-config
    pkgconfig = shutil.which("pkg-config")
    if check(pkgconfig is not None, "pkg-config is installed (scripts/install-deps.sh)"):
        env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(prefix, "lib", "pkgconfig"))
        env.pop("PKG_CONFIG_LIBDIR", None)
        rc, out = run([pkgconfig, "--modversion", "mooncake-store", "mooncake-te"], env=env)
        check(rc == 0 and out.split() == [version, version], f"pkg-config --modversion mooncake-store mooncake-te: {out.strip()}")
        rc, flags = run([pkgconfig, "--cflags", "--libs", "mooncake-store"], env=env)
        check(rc == 0 and "-lmooncake_store" in flags and "-lmooncake_te" in flags,
              f"pkg-config --cflags --libs mooncake-store: {flags.strip()}")
        _, libdir = run([pkgconfig, "--variable=libdir", "mooncake-store"], env=env)
        check(os.path.realpath(libdir.strip()) == os.path.realpath(os.path.join(prefix, "lib")),
              f"its libdir is <prefix>/lib (relocatable .pc): {libdir.strip()}")
        src = os.path.join(tmp, "pc_prog.c")
        open(src, "w").write(prog)
        exe = os.path.join(tmp, "pc_prog")
        cmd = ["cc", "-std=c11", "-Wall", "-Werror", "-o", exe, src] + shlex.split(flags) + \
              ["-Wl,-rpath," + libdir.strip()]
        rc, out = run(cmd)
        if check(rc == 0, "cc prog.c $(pkg-config --cflags --libs mooncake-store) builds\n" + " ".join(cmd) + "\n" + out):
            run_program(exe, "the pkg-config program")

    # ------------------------------------------------------------ CMake package
    proj = os.path.join(tmp, "cmake_project")
    os.makedirs(proj)
    open(os.path.join(proj, "app.c"), "w").write(prog)
    open(os.path.join(proj, "CMakeLists.txt"), "w").write(
        "cmake_minimum_required(VERSION 3.20)\nproject(mooncake_consumer C)\n"
        "find_package(Mooncake ${WANT} REQUIRED CONFIG)\n"
        "message(STATUS \"Mooncake_VERSION=${Mooncake_VERSION}\")\n"
        "add_executable(app app.c)\ntarget_link_libraries(app PRIVATE Mooncake::store)\n")
    pb = os.path.join(tmp, "cmake_project_build")
    rc, out = run(["cmake", "-S", proj, "-B", pb, "-DWANT=0.1", "-DCMAKE_PREFIX_PATH=" + prefix])
    check(rc == 0 and f"Mooncake_VERSION={version}" in out, "find_package(Mooncake 0.1 CONFIG) finds the installed package\n" + out[-2000:])
    if rc == 0:
        rc, out = run(["cmake", "--build", pb])
        if check(rc == 0, "the find_package project links Mooncake::store\n" + out[-3000:]):
            run_program(os.path.join(pb, "app"), "the find_package program")
    rc, out = run(["cmake", "-S", proj, "-B", pb + "_too_new", "-DWANT=1.0", "-DCMAKE_PREFIX_PATH=" + prefix])
    check(rc != 0 and "version" in out.lower(), "find_package(Mooncake 1.0) is refused by the version file")
    stop(master, 15)

    # ------------------------------------------------------------ sd_notify
    if not check(cache_value("MC_HAVE_SYSTEMD") == "ON",
                 "the build links libsystemd for sd_notify (libsystemd-dev: scripts/install-deps.sh)"):
        raise SystemExit  # (the finally block reports)
    # mooncake_master: READY=1 once every listener answers
    n = Notify("master.sock")
    rpc, meta, admin = free_port(), free_port(), free_port()
    master = start([os.path.join(bindir, "mooncake_master"), f"--rpc_port={rpc}", "--enable_http_metadata_server",
                    f"--http_metadata_server_port={meta}", "--http_metadata_server_host=127.0.0.1",
                    f"--metrics_port={admin}", "--metrics_host=127.0.0.1"], "master-notify.log", env=n.env())
    msg, seen = n.wait_for("READY", master)
    answering = {name: can_connect(port) for name, port in (("rpc", rpc), ("metadata", meta), ("admin", admin))}
    check(msg is not None and msg["READY"] == "1", f"mooncake_master sends READY=1 ({seen})")
    check(all(answering.values()), f"when READY=1 arrives, every port answers already: {answering}")
    check(msg is not None and str(rpc) in msg.get("STATUS", ""), f"its STATUS names the RPC port: {msg}")
    # mooncake_store_node: READY=1 once its segment is mounted
    nn = Notify("node.sock")
    node = start([os.path.join(bindir, "mooncake_store_node"), "--local_hostname=127.0.0.1",
                  f"--master_server_addr=127.0.0.1:{rpc}", f"--metadata_server=http://127.0.0.1:{meta}/metadata",
                  "--global_segment_size=16MB"], "node-notify.log", env=nn.env())
    msg, seen = nn.wait_for("READY", node)
    st, body = http(admin, "/get_segments_detail")
    segments = json.loads(body).get("segments", []) if st == 200 else []
    check(msg is not None and msg["READY"] == "1", f"mooncake_store_node sends READY=1 ({seen})")
    check(len(segments) == 1, f"when it does, the master lists its segment: {st} {body[:300]}")
    node.send_signal(signal.SIGTERM)
    msg, seen = nn.wait_for("STOPPING", node)
    check(msg is not None and msg["STOPPING"] == "1", f"mooncake_store_node sends STOPPING=1 on SIGTERM ({seen})")
    check(stop(node, 15) == 0, "and exits 0")
    # mooncake_client: READY=1 once its segment is mounted and dummies can connect
    nc = Notify("client.sock")
    cport = free_port()
    cl = start([os.path.join(bindir, "mooncake_client"), "--host=127.0.0.1", f"--port={cport}",
                f"--master_server_address=127.0.0.1:{rpc}", f"--metadata_server=http://127.0.0.1:{meta}/metadata",
                "--global_segment_size=16MB"], "client-notify.log", env=nc.env())
    msg, seen = nc.wait_for("READY", cl)
    check(msg is not None and msg["READY"] == "1", f"mooncake_client sends READY=1 ({seen})")
    cl.send_signal(signal.SIGTERM)
    msg, seen = nc.wait_for("STOPPING", cl)
    check(msg is not None and msg["STOPPING"] == "1", f"mooncake_client sends STOPPING=1 on SIGTERM ({seen})")
    check(stop(cl, 15) == 0, "and exits 0")
    master.send_signal(signal.SIGTERM)
    msg, seen = n.wait_for("STOPPING", master)
    check(msg is not None and msg["STOPPING"] == "1", f"mooncake_master sends STOPPING=1 on SIGTERM ({seen})")
    check(stop(master, 15) == 0, "and exits 0")
    # A master that cannot listen (its RPC port taken) never reports ready.
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    nb = Notify("bad.sock")
    bad = start([os.path.join(bindir, "mooncake_master"), "--rpc_address=127.0.0.1", f"--rpc_port={taken.getsockname()[1]}",
                 f"--metrics_port={free_port()}", "--metrics_host=127.0.0.1"], "master-bad.log", env=nb.env())
    msg, seen = nb.wait_for("READY", bad, timeout=15)
    code = bad.wait(15)
    taken.close()
    check(msg is None and code != 0, f"a master whose RPC port is taken exits {code} without READY=1 ({seen})")

    # ------------------------------------------------------------ systemd units and sysusers.d
    unit_dir = os.path.join(prefix, "lib", "systemd", "system")
    sysusers = os.path.join(prefix, "lib", "sysusers.d", "mooncake.conf")
    users = set()
    if check(os.path.isfile(sysusers), "<prefix>/lib/sysusers.d/mooncake.conf installed"):
        users = {l.split()[1] for l in open(sysusers) if l.startswith("u ")}
    for u in UNITS:
        path = os.path.join(unit_dir, u)
        if not check(os.path.isfile(path), f"<prefix>/lib/systemd/system/{u} installed"):
            continue
        text = open(path).read()
        lines = set(text.splitlines())
        check("Type=notify" in lines, f"{u}: Type=notify")
        missing = [h for h in HARDENING if not any(l.startswith(h) for l in lines)]
        check(not missing, f"{u}: hardening directives (missing {missing})")
        user = re.search(r"^User=(\S+)", text, re.M)
        check(user and user.group(1) in users, f"{u}: its User= is the sysusers.d user {sorted(users)}")
        execs = re.findall(r"^ExecStart=(\S+)", text, re.M)
        check(execs and all(e.startswith(bindir + "/") and os.access(e, os.X_OK) for e in execs),
              f"{u}: ExecStart runs <prefix>/bin: {execs}")
    sda = shutil.which("systemd-analyze")
    if not sda:
        print("SKIP systemd-analyze: not installed on this machine")
    else:
        rc, out = run([sda, "verify"] + [os.path.join(unit_dir, u) for u in UNITS])
        check(rc == 0 and not out.strip(), "systemd-analyze verify <prefix>/lib/systemd/system/mooncake-*.service\n" + out)
        for u in UNITS:
            # (--threshold is in tenths of the 0-10 exposure scale: 30 = 3.0, the top of "OK")
            rc, out = run([sda, "security", "--offline=yes", "--threshold=30", os.path.join(unit_dir, u)])
            level = re.search(r"Overall exposure level for \S+: ([0-9.]+)", out)
            check(rc == 0 and level and float(level.group(1)) <= 3.0,
                  f"systemd-analyze security --offline {u}: exposure {level.group(1) if level else '?'} <= 3.0\n"
                  + ("" if rc == 0 else out[-3000:]))
    stsu = shutil.which("systemd-sysusers")
    if not stsu:
        print("SKIP systemd-sysusers: not installed on this machine")
    elif os.path.isfile(sysusers):
        root = os.path.join(tmp, "sysroot")
        os.makedirs(os.path.join(root, "etc"))
        rc, out = run([stsu, "--dry-run", "--root=" + root, sysusers])
        check(rc == 0 and "Creating user 'mooncake'" in out, "systemd-sysusers --dry-run creates the user mooncake\n" + out)
    # DESTDIR staging, as a distribution package builds: the units name the final prefix, not the stage
    stage = os.path.join(tmp, "destdir")
    rc, out = run(["cmake", "--install", BUILD, "--prefix", "/usr"], env=dict(os.environ, DESTDIR=stage))
    unit = os.path.join(stage, "usr", "lib", "systemd", "system", "mooncake-master.service")
    check(rc == 0 and os.path.isfile(unit) and "ExecStart=/usr/bin/mooncake_master " in open(unit).read()
          and os.path.isfile(os.path.join(stage, "usr", "bin", "mooncake_master")),
          "DESTDIR=<stage> cmake --install --prefix /usr: <stage>/usr/lib/systemd/system units run /usr/bin\n" + out[-2000:])
except SystemExit:
    pass
finally:
    procs.kill_all()
    if failures:
        for name in sorted(os.listdir(tmp)):
            if name.endswith(".log"):
                print(f"---- {name} ----\n" + open(os.path.join(tmp, name)).read()[-3000:])
    shutil.rmtree(tmp, ignore_errors=True)

print(f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
