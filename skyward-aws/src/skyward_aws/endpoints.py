"""How the client reaches each node's agent: the driver's endpoint seam.

The driver never decides on its own where to connect: it asks an
:class:`EndpointResolver`. The default connects to the node's public address (its
private one when it has none, for clients inside the VPC); ``use_ssm`` opens an SSM port
forwarding session per node; a test harness (or a site with a VPN or bastion mapping)
passes its own as ``AWS(endpoint_resolver=...)``.
"""

from __future__ import annotations

import json
import random
import shutil
import socket
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from skyward.errors import ConfigurationError, ProvisioningError
from skyward.providers import DEFAULT_AGENT_PORT, node_ports

SESSION_MANAGER_PLUGIN = "session-manager-plugin"
PLUGIN_DOCS = (
    "https://docs.aws.amazon.com/systems-manager/latest/userguide/session-manager-working-with-install-plugin.html"
)


@dataclass(frozen=True, slots=True)
class NodeAddress:
    """``endpoint`` is where the client connects (``tcp://host:port``); ``ip`` is what the
    user is shown; ``private_ip`` is how the pool's nodes reach each other."""

    endpoint: str
    ip: str | None
    private_ip: str | None


@runtime_checkable
class EndpointResolver(Protocol):
    def resolve(self, instance: Mapping[str, Any]) -> NodeAddress:
        """The address of a running instance (a ``describe_instances`` item)."""

    def close(self) -> None:
        """Release whatever ``resolve`` opened (tunnels)."""


@dataclass(frozen=True)
class PublicAddress:
    """Connect straight to the node: its public address, else its private one."""

    port: int = DEFAULT_AGENT_PORT

    def resolve(self, instance: Mapping[str, Any]) -> NodeAddress:
        public = instance.get("PublicIpAddress")
        private = instance.get("PrivateIpAddress")
        host = public or private
        if not host:
            raise ProvisioningError(f"instance {instance.get('InstanceId')} has no address yet")
        return NodeAddress(endpoint=f"tcp://{host}:{self.port}", ip=host, private_ip=private)

    def close(self) -> None:
        return None


def require_session_manager_plugin() -> str:
    path = shutil.which(SESSION_MANAGER_PLUGIN)
    if path is None:
        raise ConfigurationError(
            "AWS(use_ssm=True) reaches nodes through AWS Systems Manager port forwarding, which needs the "
            f"session-manager-plugin executable on this machine; install it ({PLUGIN_DOCS}) "
            "or use AWS(use_ssm=False)"
        )
    return path


def port_forwarding_parameters(remote_port: int, local_port: int) -> dict[str, list[str]]:
    return {"portNumber": [str(remote_port)], "localPortNumber": [str(local_port)]}


def plugin_command(
    plugin: str, session: Mapping[str, Any], region: str, target: str, parameters: Mapping[str, Any], endpoint: str
) -> list[str]:
    """The session-manager-plugin command line, as the AWS CLI builds it for
    ``aws ssm start-session`` (pure)."""
    request = {"Target": target, "DocumentName": "AWS-StartPortForwardingSession", "Parameters": dict(parameters)}
    response = {k: session[k] for k in ("SessionId", "StreamUrl", "TokenValue")}
    return [plugin, json.dumps(response), region, "StartSession", "", json.dumps(request), endpoint]


def free_local_range(count: int, attempts: int = 200) -> int:
    """The first of ``count`` consecutive free ports on 127.0.0.1."""
    for _ in range(attempts):
        base = random.randint(20000, 60000 - count)
        sockets = []
        try:
            for offset in range(count):
                sock = socket.socket()
                sockets.append(sock)
                sock.bind(("127.0.0.1", base + offset))
            return base
        except OSError:
            continue
        finally:
            for sock in sockets:
                sock.close()
    raise ProvisioningError(f"found no {count} consecutive free local ports for SSM tunnels")


@dataclass
class SsmTunnels:
    """SSM port-forwarding sessions per node: every port of ``node_ports`` (the agent's,
    each worker's, each worker's data port: the client talks to workers directly),
    mapped to consecutive local ports.

    The security group then opens nothing to the outside; the tunnels carry the same
    CURVE-encrypted traffic a direct connection would. The client finds each worker at
    the same offset from the agent's local port as on the node (core proposal aws-2).
    """

    ssm: Any
    region: str
    port: int = DEFAULT_AGENT_PORT
    workers: int = 1
    ready_timeout: float = 60.0
    plugin: str | None = None  # the session-manager-plugin executable; found on PATH by default
    _processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    _sessions: list[str] = field(default_factory=list)
    _targets: dict[str, list[tuple[subprocess.Popen[bytes], str]]] = field(default_factory=dict)

    def resolve(self, instance: Mapping[str, Any]) -> NodeAddress:
        plugin = self.plugin or require_session_manager_plugin()
        target = str(instance["InstanceId"])
        first, last = node_ports(self.port, self.workers)
        local = free_local_range(last - first + 1)
        for offset in range(last - first + 1):
            self._forward(plugin, target, self.port + offset, local + offset)
        return NodeAddress(
            endpoint=f"tcp://127.0.0.1:{local}",
            ip=instance.get("PublicIpAddress"),
            private_ip=instance.get("PrivateIpAddress"),
        )

    def _forward(self, plugin: str, target: str, remote: int, local: int) -> None:
        parameters = port_forwarding_parameters(remote, local)
        session = self.ssm.start_session(
            Target=target, DocumentName="AWS-StartPortForwardingSession", Parameters=parameters
        )
        self._sessions.append(str(session["SessionId"]))
        command = plugin_command(plugin, session, self.region, target, parameters, self.ssm.meta.endpoint_url)
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self._processes.append(process)
        self._targets.setdefault(target, []).append((process, str(session["SessionId"])))
        deadline = time.monotonic() + self.ready_timeout
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise ProvisioningError(
                    f"the SSM session to {target}:{remote} ended at once (exit {process.returncode})"
                )
            try:
                with socket.create_connection(("127.0.0.1", local), timeout=1):
                    return
            except OSError:
                time.sleep(0.2)
        raise ProvisioningError(
            f"the SSM port forwarding to {target}:{remote} did not open within {self.ready_timeout:g} s"
        )

    def release(self, instance_id: str) -> None:
        """Close the tunnels to one instance (a node removed while the pool runs): its
        plugin processes end and its sessions are terminated; the others stay open."""
        pairs = self._targets.pop(instance_id, [])
        self._end([p for p, _ in pairs], [s for _, s in pairs])
        self._processes = [p for p in self._processes if all(p is not q for q, _ in pairs)]
        self._sessions = [s for s in self._sessions if s not in {t for _, t in pairs}]

    def close(self) -> None:
        self._end(self._processes, self._sessions)
        self._processes.clear()
        self._sessions.clear()
        self._targets.clear()

    def _end(self, processes: list[subprocess.Popen[bytes]], sessions: list[str]) -> None:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        for session_id in sessions:
            try:
                self.ssm.terminate_session(SessionId=session_id)
            except Exception:  # the session may already be gone with its instance
                pass
