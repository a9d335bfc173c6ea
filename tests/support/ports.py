"""Runs of consecutive loopback ports for servers given a port base (SeaweedFS's
``--seaweedfs-port-base``), drawn where nothing else on the machine takes a port unasked.

A base from ``bind(("127.0.0.1", 0))`` lies in the kernel's ephemeral range, which every outgoing
connection of the other test workers also draws its source port from: one of the run's ports can
be taken between the check and the server's bind (or between a stop and the restart a test
makes on the same ports). Below that range, only a process that asks for a port by number gets
one, and a random start keeps two workers from drawing the same run.
"""

from __future__ import annotations

import contextlib
import random
import socket
from pathlib import Path

_EPHEMERAL = Path("/proc/sys/net/ipv4/ip_local_port_range")


def _ephemeral_start() -> int:
    try:
        return int(_EPHEMERAL.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def free_port_run(count: int, host: str = "127.0.0.1") -> int:
    """The first of ``count`` consecutive ports free on ``host``, below the ephemeral range."""
    top = _ephemeral_start() - count
    draw = random.Random()
    for _ in range(200):
        base = draw.randrange(10_000, top)
        with contextlib.ExitStack() as held:
            try:
                for port in range(base, base + count):
                    sock = held.enter_context(socket.socket())
                    sock.bind((host, port))
            except OSError:
                continue
            return base
    raise AssertionError(f"no run of {count} free ports below {top + count}")
