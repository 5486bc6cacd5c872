"""What the tests that run as plain scripts share (tests/test_deploy.py, tests/test_packaging.py; no pytest):
checks that record a failure and go on, commands, ports, HTTP, and the processes a script starts."""
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request

failures = []  # the first line of each failed check's text


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what.splitlines()[0])
    return cond


def run(cmd, timeout=60, **kw):
    """(exit status, stdout + stderr) of cmd."""
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    return p.returncode, p.stdout + p.stderr


def can_connect(port, timeout=0.5):
    try:
        socket.create_connection(("127.0.0.1", port), timeout).close()
        return True
    except OSError:
        return False


def wait_port(port, proc, timeout=15):
    """True once 127.0.0.1:port accepts, False after timeout seconds or when proc has exited."""
    deadline = time.time() + timeout
    while time.time() < deadline and proc.poll() is None:
        if can_connect(port, 0.2):
            return True
        time.sleep(0.05)
    return False


def http(port, path, timeout=5):
    """(status, body) of GET http://127.0.0.1:port/path; (0, reason) when nothing answered."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except OSError as e:
        return 0, str(e)


class Procs:
    """The processes a script starts, each logging into a file of dir; kill_all() at the end."""

    def __init__(self, dir):
        self.dir, self.all = dir, []

    def start(self, cmd, log, env=None):
        p = subprocess.Popen(cmd, stdout=open(os.path.join(self.dir, log), "w"), stderr=subprocess.STDOUT, env=env)
        self.all.append(p)
        return p

    def kill_all(self):
        for p in self.all:
            if p.poll() is None:
                p.kill()
                p.wait()


def stop(p, grace=10):
    """SIGTERM, SIGKILL after grace seconds; the exit status."""
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(grace)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    return p.returncode
