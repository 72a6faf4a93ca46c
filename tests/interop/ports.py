"""Ports for the servers the tests start.

A port the kernel hands out for `bind(0)` comes from the ephemeral range,
the same range it takes the local port of every outgoing connection from:
between choosing such a port and the server binding it, any client socket
on the machine may take it (a full run lost a broker to exactly that). So
ports are drawn below the ephemeral range, where only a listener that
asks for one by number can sit, and a port is never handed out twice in
one process. Under pytest-xdist each worker draws from a slice of its
own, so two workers never hand out the same port either.
"""

import os
import random
import socket
import threading

_LOWEST = 10000
_given = set()
_lock = threading.Lock()


def _ephemeral_low():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _bindable(port):
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _worker_slice(low, high):
    """The part of [low, high) this process draws from: all of it, or one
    pytest-xdist worker's share ("gw3" of 4 workers: the fourth quarter)."""
    try:
        index = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0")[2:])
        count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    except ValueError:
        return low, high
    if count <= 1 or not 0 <= index < count:
        return low, high
    width = (high - low) // count
    return low + index * width, low + (index + 1) * width


def free_port():
    """A TCP port on 127.0.0.1 that nothing listens on right now, outside
    the range the kernel takes outgoing connections' ports from."""
    low, high = _worker_slice(_LOWEST, _ephemeral_low())
    with _lock:
        if high - low > 1000:
            for _ in range(200):
                port = random.randrange(low, high)
                if port not in _given and _bindable(port):
                    _given.add(port)
                    return port
        # A machine whose ephemeral range leaves no room below it.
        while True:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            if port not in _given:
                _given.add(port)
                return port
