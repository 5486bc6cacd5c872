"""Free TCP ports for tests (no pytest dependency: tests/test_deploy.py runs as a plain script)."""
import socket

_issued_ports = set()


def free_port():
    """A port nothing listens on now and that this process has not handed out before: two calls in a row
    can otherwise get the same ephemeral port back from the kernel (a master once got one port for both its
    RPC and its metrics listener)."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _issued_ports:
            _issued_ports.add(port)
            return port
