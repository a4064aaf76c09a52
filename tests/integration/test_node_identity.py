"""Each node answers as itself, or the pool fails loudly.

A provider written the way a third party writes one (nodes as host processes on this
machine, each running the user-data the pool renders) with two nodes on one address and
port used to get two answers from one worker. Here it fails: at once when both nodes were
given one endpoint, and, when their endpoints differ but reach one listener, because the
second node's key does not open the first node's agent. With a port each, both answer.
Below it: real agent processes whose address is taken, and the handshake against agents
that are not the node it expects.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
import zmq

import skyward as sky
from skyward.agent.config import AgentConfig
from skyward.api.spec import PoolSpec
from skyward.errors import NodeIdentityError, ProvisioningError
from skyward.plugins.contributions import ProviderPlugin
from skyward.plugins.hookspecs import hookimpl
from skyward.plugins.registry import registry
from skyward.providers.local import local_bootstrap_context
from skyward.providers.protocol import EventSink, NodeHandle, Provider, UserDataFactory
from skyward.providers.settings import ProviderSettings
from skyward.transport import handshake, security, wire
from skyward.transport.handshake import NodeIdentity
from skyward.transport.security import PoolKeys
from skyward.wheels import stage

# -- a third party's provider: nodes are host processes -------------------------------------


@dataclass(frozen=True, slots=True)
class HostProcesses(ProviderSettings):
    """``ports``: each node's agent port on 127.0.0.1; ``hosts``: the address the client
    uses for each node (default 127.0.0.1)."""

    ports: tuple[int, ...] = ()
    hosts: tuple[str, ...] = ()


class HostProcessesDriver(Provider[HostProcesses]):
    name = "host-processes"

    def __init__(self, config: HostProcesses) -> None:
        super().__init__(config)
        self.root = ""
        self.processes: list[subprocess.Popen[bytes]] = []

    def prepare(self, spec: PoolSpec, emit: EventSink) -> str:
        self.root = tempfile.mkdtemp(prefix="skyward-host-processes-")
        return "this-host"

    def launch(self, spec: PoolSpec, user_data: UserDataFactory, emit: EventSink) -> list[NodeHandle]:
        handles = []
        for node in range(spec.nodes):
            port = self.config.ports[node]
            host = self.config.hosts[node] if self.config.hosts else "127.0.0.1"
            run_dir = os.path.join(self.root, f"node-{node}")
            os.makedirs(run_dir, mode=0o700)
            script = user_data(
                node, f"tcp://127.0.0.1:{port}", local_bootstrap_context(), run_dir=run_dir, instance_id=f"hp-{node}"
            )
            path = os.path.join(self.root, f"node-{node}.sh")
            Path(path).write_text(script)
            with open(os.path.join(self.root, f"node-{node}.log"), "wb") as log:
                self.processes.append(
                    subprocess.Popen(
                        ["bash", path], stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                        start_new_session=True, cwd=run_dir,
                    )
                )  # fmt: skip
            handles.append(NodeHandle(node, f"hp-{node}", f"tcp://{host}:{port}", "process"))
        return handles

    def log(self, node: int) -> str:
        return Path(self.root, f"node-{node}.log").read_text(errors="replace")

    def terminate(self, nodes: Sequence[NodeHandle]) -> None:
        for process in self.processes:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            process.wait()

    def teardown(self) -> None:
        pass  # the test reads the logs first, then removes the root


class _Plugin:
    def __init__(self) -> None:
        self.drivers: list[HostProcessesDriver] = []

    def _driver(self, config: HostProcesses) -> HostProcessesDriver:
        driver = HostProcessesDriver(config)
        self.drivers.append(driver)
        return driver

    @hookimpl
    def skyward_providers(self) -> Sequence[ProviderPlugin]:
        return [ProviderPlugin(name="host-processes", config_type=HostProcesses, create_driver=self._driver)]


@pytest.fixture
def host_processes() -> Iterator[_Plugin]:
    plugin = _Plugin()
    registry.register(plugin)
    yield plugin
    registry.unregister(plugin)
    for driver in plugin.drivers:
        shutil.rmtree(driver.root, ignore_errors=True)


def _free_ports(count: int) -> int:
    """A port P with P .. P + count - 1 all free on 127.0.0.1."""
    for _ in range(200):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            base = int(probe.getsockname()[1])
        held: list[socket.socket] = []
        try:
            for port in range(base, base + count):
                sock = socket.socket()
                held.append(sock)
                sock.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for sock in held:
                sock.close()
    raise RuntimeError(f"no {count} consecutive free ports")


@sky.compute
def which_node() -> int:
    return sky.instance_info().node


def test_two_nodes_given_one_port_on_one_host_fail_loudly_instead_of_answering_twice(
    host_processes: _Plugin,
) -> None:
    port = _free_ports(2)
    provider = HostProcesses(ports=(port, port), bootstrap_timeout=120)
    with pytest.raises(NodeIdentityError, match=f"nodes 0 and 1 were both given the endpoint tcp://127.0.0.1:{port}"):
        with sky.ComputePool(provider=provider, nodes=2, display="quiet") as pool:
            pytest.fail(f"the pool opened and would answer {which_node() @ pool}")


@pytest.mark.slow
def test_nodes_whose_endpoints_reach_one_agent_are_refused_by_their_own_keys(host_processes: _Plugin) -> None:
    # two endpoint strings for one listener: the agent that binds first answers both, the
    # other exits; node keys differ, so one of the two connections can never complete
    port = _free_ports(2)
    provider = HostProcesses(ports=(port, port), hosts=("127.0.0.1", "localhost"), bootstrap_timeout=20)
    with pytest.raises(ProvisioningError) as raised:
        with sky.ComputePool(provider=provider, nodes=2, display="quiet") as pool:
            pytest.fail(f"the pool opened and would answer {which_node() @ pool}")
    message = str(raised.value)
    assert "did not answer" in message and "refused the node's CURVE key" in message
    assert "Two agents likely share one address and port" in message
    (driver,) = host_processes.drivers
    logs = driver.log(0) + driver.log(1)
    # the node that lost says why in its log: its agent's port, or its worker's right after it, was taken
    taken = [f"cannot listen on tcp://127.0.0.1:{p}: Address already in use (EADDRINUSE)" for p in (port, port + 1)]
    assert any(line in logs for line in taken), logs[-3000:]


def test_nodes_on_one_host_with_a_port_each_answer_as_themselves(host_processes: _Plugin) -> None:
    port = _free_ports(6)  # each node: its agent's port, one worker's after it, then that worker's data port
    provider = HostProcesses(ports=(port, port + 3), bootstrap_timeout=120)
    with sky.ComputePool(provider=provider, nodes=2, display="quiet") as pool:
        assert list(which_node() @ pool) == [0, 1]
        assert pool._keys.node(0) != pool._keys.node(1)  # each answered with its own key


# -- a real agent whose address is taken ----------------------------------------------------


def _run_agent(config: AgentConfig) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "skyward.agent"],
        input=config.to_json() + "\n",
        capture_output=True,
        text=True,
        timeout=180,  # a safety net: the agent exits as soon as it fails to bind
        check=False,
    )


def _config(tmp_path: Path, bind: str) -> AgentConfig:
    keys = PoolKeys()
    return AgentConfig(
        pool_id="p-identity", node=1, total_nodes=2, workers=1, bind=bind, run_dir=str(tmp_path / "run"),
        server_secret=keys.node(1).secret.decode(), client_public=keys.client.public.decode(),
        metrics_interval=0.0, instance_id="hp-1",
    )  # fmt: skip


def test_an_agent_whose_port_is_taken_says_why_and_exits_non_zero(tmp_path: Path) -> None:
    port = _free_ports(2)
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", port))
        holder.listen()
        result = _run_agent(_config(tmp_path, f"tcp://127.0.0.1:{port}"))
    assert result.returncode != 0
    assert "Traceback" not in result.stderr, result.stderr
    assert (
        f"skyward agent (node 1, instance hp-1): cannot listen on tcp://127.0.0.1:{port}: "
        "Address already in use (EADDRINUSE)"
    ) in result.stderr
    # the agent's port, its worker's, and that worker's data port
    assert f"ports {port}-{port + 2}" in result.stderr and "another node's agent" in result.stderr
    assert "::skyward-ready" not in result.stdout


def test_an_agent_whose_workers_port_is_taken_says_which_and_exits_non_zero(tmp_path: Path) -> None:
    port = _free_ports(2)
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", port + 1))
        holder.listen()
        result = _run_agent(_config(tmp_path, f"tcp://127.0.0.1:{port}"))
    assert result.returncode != 0
    assert "worker 0 failed to start" in result.stderr
    assert f"skyward worker 0 (node 1): cannot listen on tcp://127.0.0.1:{port + 1}: Address already in use" in (
        result.stderr
    )


def test_an_agent_never_takes_over_an_ipc_path_another_process_listens_on(tmp_path: Path) -> None:
    # zmq would unlink the live socket and bind anew: its listener would vanish silently
    path = tmp_path / "node.sock"
    with socket.socket(socket.AF_UNIX) as holder:
        holder.bind(str(path))
        holder.listen()
        result = _run_agent(_config(tmp_path, f"ipc://{path}"))
    assert result.returncode != 0
    assert f"cannot listen on ipc://{path}: Address already in use (EADDRINUSE)" in result.stderr


def test_a_wheel_stage_whose_port_is_taken_says_why_and_exits_3(tmp_path: Path) -> None:
    port = _free_ports(1)
    keys = PoolKeys()
    config = {"bind": f"tcp://127.0.0.1:{port}", "node": 1, "server_secret": keys.node(1).secret.decode(),
              "client_public": keys.client.public.decode()}  # fmt: skip
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", port))
        holder.listen()
        result = subprocess.run(
            [sys.executable, stage.__file__, str(tmp_path / "wheels"), "", f"{'0' * 64}=a-1-py3-none-any.whl"],
            input=json.dumps(config) + "\n", capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
    assert result.returncode == 3
    assert (
        f"the wheel stage of node 1 cannot listen on tcp://127.0.0.1:{port}: Address already in use (EADDRINUSE); "
        "another process on this host listens there"
    ) in result.stderr
    assert "Traceback" not in result.stderr


# -- the handshake against agents that are not the expected node ------------------------------


class _FakeAgent:
    """An agent socket that answers HELLO with the INFO of ``node`` of ``pool_id``."""

    def __init__(self, endpoint: str, pool_id: str, node: int, server_secret: bytes | None = None) -> None:
        self.context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
        self.auth = None
        self.sock = self.context.socket(zmq.ROUTER)
        self.sock.setsockopt(zmq.LINGER, 0)
        if server_secret is not None:
            self.auth = security.start_server_auth(self.context, KEYS.client.public)
            security.configure_server(self.sock, server_secret)
        self.sock.bind(endpoint)
        self.endpoint = self.sock.getsockopt_string(zmq.LAST_ENDPOINT)
        self.info = {"node": node, "pool_id": pool_id, "instance_id": f"hp-{node}", "pid": 1, "hostname": "h",
                     "endpoints": [], "agent_endpoint": self.endpoint}  # fmt: skip
        self.running = True
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while self.running:
            if self.sock.poll(50):
                frames = self.sock.recv_multipart()
                if frames[1] == wire.HELLO:
                    self.sock.send_multipart([frames[0], wire.INFO, wire.encode_json(self.info)])

    def close(self) -> None:
        self.running = False
        self.thread.join(timeout=5)
        if self.auth is not None:
            self.auth.stop()
        self.context.destroy(linger=0)


KEYS = PoolKeys()


@pytest.fixture
def agents() -> Iterator[list[_FakeAgent]]:
    made: list[_FakeAgent] = []
    yield made
    for agent in made:
        agent.close()


def _client_socket(context: zmq.Context[zmq.Socket[bytes]], endpoint: str, node: int | None) -> zmq.Socket[bytes]:
    sock = context.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    if node is not None:
        security.configure_client(sock, KEYS.node(node).public, KEYS.client)
    sock.connect(endpoint)
    return sock


def test_the_handshake_refuses_an_agent_that_is_another_node(tmp_path: Path, agents: list[_FakeAgent]) -> None:
    agents.append(_FakeAgent(f"ipc://{tmp_path}/a.sock", "p-identity", node=1))
    with zmq.Context() as context:
        sock = _client_socket(context, agents[0].endpoint, None)
        expected = [NodeIdentity("p-identity", 0, "hp-0")]
        with pytest.raises(NodeIdentityError) as raised:
            handshake.hello([sock], lambda _: "silent", timeout=60, expected=expected)
        sock.close()
    message = str(raised.value)
    assert f"node 0's endpoint {agents[0].endpoint} was answered by the agent of node 1 of pool p-identity" in message
    assert "not by the agent of node 0 of pool p-identity, instance hp-0" in message
    assert "Two agents likely share one address and port" in message


def test_the_handshake_refuses_an_agent_of_another_pool(tmp_path: Path, agents: list[_FakeAgent]) -> None:
    agents.append(_FakeAgent(f"ipc://{tmp_path}/a.sock", "p-other", node=0))
    with zmq.Context() as context:
        sock = _client_socket(context, agents[0].endpoint, None)
        with pytest.raises(NodeIdentityError, match="answered by the agent of node 0 of pool p-other"):
            handshake.hello([sock], lambda _: "silent", timeout=60, expected=[NodeIdentity("p-identity", 0)])
        sock.close()


def test_the_handshake_accepts_the_node_it_expects(tmp_path: Path, agents: list[_FakeAgent]) -> None:
    agents.append(_FakeAgent(f"ipc://{tmp_path}/a.sock", "p-identity", node=0))
    with zmq.Context() as context:
        sock = _client_socket(context, agents[0].endpoint, None)
        (info,) = handshake.hello(
            [sock], lambda _: "silent", timeout=60, expected=[NodeIdentity("p-identity", 0, "hp-0")]
        )
        sock.close()
    assert (info["node"], info["pool_id"]) == (0, "p-identity")


def test_a_connection_with_one_nodes_key_never_completes_against_another_nodes_agent(
    agents: list[_FakeAgent],
) -> None:
    agents.append(_FakeAgent("tcp://127.0.0.1:0", "p-identity", node=0, server_secret=KEYS.node(0).secret))
    with zmq.Context() as context:
        meant_for_node_1 = _client_socket(context, agents[0].endpoint, node=1)
        with pytest.raises(ProvisioningError) as raised:
            handshake.hello([meant_for_node_1], lambda _: "node 1 did not answer", timeout=3)
        meant_for_node_1.close()
        # control: node 0's own key is answered at once by the same agent
        own = _client_socket(context, agents[0].endpoint, node=0)
        (info,) = handshake.hello([own], lambda _: "silent", timeout=60)
        own.close()
    assert not isinstance(raised.value, NodeIdentityError)  # no INFO ever arrived to compare
    assert "node 1 did not answer. Something at its address refused the node's CURVE key" in str(raised.value)
    assert "refused the node's CURVE key" in str(raised.value)
    assert info["node"] == 0
