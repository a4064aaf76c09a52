"""An endpoint seam for launch-level tests: each instance gets a loopback listener.

The driver's bootstrap wait only needs the agent's port to accept connections; tests of
launch requests (spot strategies, tags, failures) use this instead of full emulated
instances, so they take a fraction of a second. Full bootstraps are the e2e tests' job.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from skyward_aws.endpoints import NodeAddress


@dataclass
class Listeners:
    listen: bool = True  # False: nothing ever listens (a bootstrap that never finishes)
    sockets: dict[str, socket.socket] = field(default_factory=dict)

    def resolve(self, instance: Mapping[str, Any]) -> NodeAddress:
        instance_id = str(instance["InstanceId"])
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        if self.listen:
            sock.listen(16)
        self.sockets[instance_id] = sock
        port = sock.getsockname()[1]
        return NodeAddress(endpoint=f"tcp://127.0.0.1:{port}", ip="127.0.0.1", private_ip="127.0.0.1")

    def close(self) -> None:
        for sock in self.sockets.values():
            sock.close()


def trivial_user_data(
    node: int, bind: str, context: Any, *, run_dir: str, visible_devices: Any = (), instance_id: str = ""
) -> str:
    """A UserDataFactory rendering a tiny script (launch tests never run it)."""
    return f"#!/usr/bin/env bash\n# node {node} bind {bind} run_dir {run_dir}\necho node {node}\n"
