"""Whether this process runs in an isolated network namespace (only loopback up).

Provider tests talk to emulators that hand out made-up public addresses; in a namespace
where only ``lo`` is up, any such address is unreachable rather than tried. The kernel is
asked, not the environment: ``unshare --net -- sh -c 'ip link set lo up && exec ...'`` is
all it takes (tasks.py runs tests marked ``cloud`` that way). No environment variable
is consulted: one could say "isolated" where nothing is, and an isolated namespace
needs no one to say so.
"""

from __future__ import annotations

import fcntl
import socket
import struct

SIOCGIFFLAGS = 0x8913
IFF_UP = 0x1


def interfaces_up() -> list[str]:
    """Names of the interfaces that are up in this process's network namespace (asked of
    the kernel with ioctl: /sys may show another namespace's interfaces)."""
    up = []
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        for _index, name in socket.if_nameindex():
            request = struct.pack("16sH14x", name.encode()[:15], 0)
            flags = struct.unpack("16sH14x", fcntl.ioctl(sock.fileno(), SIOCGIFFLAGS, request))[1]
            if flags & IFF_UP:
                up.append(name)
    return up


def isolation_problem() -> str | None:
    """``None`` when isolated (loopback up, nothing else); otherwise why not, in words."""
    up = interfaces_up()
    others = [name for name in up if name != "lo"]
    if others:
        return f"non-loopback interfaces are up: {', '.join(others)} (run under unshare --net)"
    if "lo" not in up:
        return "the loopback interface is down, so the emulated instances are unreachable (run `ip link set lo up`)"
    return None
