"""A container host's port mapping, for fakes of container clouds (VastAI, RunPod).

Such a host publishes a container's port on a port of its own (VastAI picks random host
ports; RunPod maps each TCP port to a public one). :class:`PortMaps` does the same on
loopback: for each container port of an emulated instance it listens on a free port of
``HOST`` and relays every connection to the instance's address and container port, byte
for byte (CURVE runs end to end through it). The host port is never the container port,
so a client that forgets the mapping cannot reach a node by luck.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterable

from fakes.http import FakeCloud, LoopbackAddresses, Request, Response

HOST = "127.0.0.1"


def _pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for s in (source, sink):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)


class _Relay:
    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        while True:
            self.listener.bind((HOST, 0))
            if self.listener.getsockname()[1] != target[1]:
                break
            self.listener.close()  # the host port must differ from the container port
            self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.listen(64)
        self.port: int = self.listener.getsockname()[1]
        self.connections: list[socket.socket] = []
        self.closed = False
        threading.Thread(target=self._accept, name=f"relay-{self.port}", daemon=True).start()

    def _accept(self) -> None:
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=2)
                upstream.settimeout(None)
            except OSError:
                client.close()  # nothing listens in the container yet: like a refused connection
                continue
            self.connections += [client, upstream]
            threading.Thread(target=_pump, args=(client, upstream), daemon=True).start()
            threading.Thread(target=_pump, args=(upstream, client), daemon=True).start()

    def close(self) -> None:
        self.closed = True
        for s in [self.listener, *self.connections]:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()


class PortMaps:
    """Per instance: container port -> a relay on a host port."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._relays: dict[str, dict[int, _Relay]] = {}

    def open(self, instance_id: str, address: str, ports: Iterable[int]) -> dict[int, int]:
        """Publish ``ports`` of the instance at ``address``; returns container -> host port."""
        relays = {port: _Relay((address, port)) for port in ports}
        with self._lock:
            self._relays[instance_id] = relays
        return {port: relay.port for port, relay in relays.items()}

    def close(self, instance_id: str) -> None:
        with self._lock:
            relays = self._relays.pop(instance_id, {})
        for relay in relays.values():
            relay.close()

    def close_all(self) -> None:
        with self._lock:
            ids = list(self._relays)
        for instance_id in ids:
            self.close(instance_id)


class FakeContainerCloud(FakeCloud):
    """What the fake marketplaces (VastAI, RunPod) share: a bearer key, loopback addresses
    for their instances, a :class:`PortMaps` closed on stop, and the checks every request
    passes before the API's own routes (:meth:`admit`)."""

    def __init__(self, api_key: str, boot_delay: float, seed: int | None) -> None:
        super().__init__()
        self.api_key = api_key
        self.boot_delay = boot_delay
        self.addresses = LoopbackAddresses(seed)
        self.ports = PortMaps()

    def stop(self) -> None:
        self.ports.close_all()
        super().stop()

    def admit(self, request: Request, unauthorized: Response) -> Response | None:
        """The answer when the request never reaches the API (``/whoami``, a wrong key:
        ``unauthorized``); a key in the URL is a violation (proxies and logs keep URLs)."""
        if request.path == "/whoami":
            return Response(200, f"{request.client}\n")
        if "api_key" in request.query:
            self.violation("the API key was sent in the URL")
        if request.headers.get("authorization") != f"Bearer {self.api_key}":
            return unauthorized
        return None
