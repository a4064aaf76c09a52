"""A container marketplace's start command: small whatever the Image holds, and the loader
it carries fetches the node's bootstrap script over the pool's CURVE channel, checks its
sha256 and runs it (no cloud: the loader and the start command run here, on loopback)."""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import os
import shlex
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import zmq
from hypothesis import given, settings
from hypothesis import strategies as st

import skyward as sky
from skyward.agent.config import CONFIG_END, ENV_VAR, AgentConfig
from skyward.errors import ProvisioningError, WheelRefusedError
from skyward.providers.cloud.bootstrap import cloud_bootstrap_context
from skyward.providers.cloud.marketplace_start import (
    BOOT_SCRIPT,
    START_COMMAND_LIMIT,
    agent_config_of,
    command_length,
    start_command,
    start_command_line,
)
from skyward.transport import handshake, wire
from skyward.transport.security import Keypair, PoolKeys, configure_client
from skyward.wheels import loader, stage
from skyward.wheels.cache import OfferedWheels

ROOM = START_COMMAND_LIMIT * 3 // 4  # "room to spare": a quarter of VastAI's limit stays free


def _config(keys: PoolKeys, port: int = 16789, pool: str = "sky-0123", node: int = 0) -> AgentConfig:
    return AgentConfig(
        pool_id=pool, node=node, total_nodes=node + 1, workers=8, bind=f"tcp://0.0.0.0:{port}", run_dir="/tmp/r",
        server_secret=keys.node(node).secret.decode(), client_public=keys.client.public.decode(),
    )  # fmt: skip


def _script(config: AgentConfig, body: str) -> str:
    """A script holding the agent config the way every bootstrap does (a here-document)."""
    return f"#!/usr/bin/env bash\n: <<'{CONFIG_END}'\n{config.to_json()}\n{CONFIG_END}\n{body}"


def test_the_start_command_fits_vastais_limit_with_room_for_a_large_image_from_a_checkout() -> None:
    image = sky.Image(
        pip=[f"package-number-{i}>=1.0" for i in range(20)],
        apt=[f"libsomething{i}-dev" for i in range(10)],
        env={f"SETTING_{i}": f"a value that is not short at all {i}" for i in range(10)},
    )
    context = cloud_bootstrap_context()  # this checkout's skyward and plugins travel as wheels
    config = _config(PoolKeys(), pool="sky-" + "a" * 37, node=9999)  # the longest pool id and node
    script = image.bootstrap(3600, context=dataclasses.replace(context, agent_env={ENV_VAR: config.to_json()}))
    assert len(script) > START_COMMAND_LIMIT  # the script itself could never go in the command
    command = start_command(script, 86_400)
    assert command_length(command) <= ROOM  # VastAI's args
    assert len(start_command_line(script, 86_400)) <= ROOM  # RunPod's dockerArgs


@settings(max_examples=30, deadline=None)
@given(st.text(st.characters(blacklist_categories=("Cs",)), max_size=20_000))
def test_the_start_commands_length_does_not_depend_on_the_script(body: str) -> None:
    config = _config(PoolKeys())
    assert command_length(start_command(_script(config, body), 60)) == command_length(
        start_command(_script(config, ""), 60)
    )


def test_the_start_command_names_the_script_by_sha256_and_holds_none_of_its_text() -> None:
    keys = PoolKeys()
    script = _script(_config(keys), "echo a-marker-only-the-script-holds\n")
    line = start_command_line(script, 60)
    assert hashlib.sha256(script.encode()).hexdigest() in line
    assert "a-marker-only-the-script-holds" not in line
    assert keys.client.secret.decode() not in line  # the client's secret never leaves the client


def test_the_start_command_is_one_shell_line_that_needs_no_escapes() -> None:
    command = start_command(_script(_config(PoolKeys()), "true\n"), 60)
    assert command[:2] == ["bash", "-c"] and "\n" not in command[2] and "'" not in command[2]
    assert shlex.split(shlex.join(command)) == command


def test_a_script_without_an_agent_config_is_refused() -> None:
    with pytest.raises(ValueError, match="no agent config"):
        start_command("#!/bin/sh\necho hi\n", 60)
    config = _config(PoolKeys())
    assert agent_config_of(_script(config, "")) == config


def test_the_loader_answers_with_the_same_refusal_kind_as_the_wheel_stage() -> None:
    assert loader.REFUSED == stage.REFUSED  # the client reads one REFUSED for both
    assert len({loader.NEED_SCRIPT, loader.SCRIPT, stage.NEED, stage.WHEELS, stage.REFUSED}) == 5


# -- the loader, run ---------------------------------------------------------------------------


def _free_port() -> int:
    with zmq.Context() as context:
        probe = context.socket(zmq.ROUTER)
        port = probe.bind_to_random_port("tcp://127.0.0.1")
        probe.close(linger=0)
        return port


def _client(keys: PoolKeys, port: int, client: Keypair | None = None) -> Iterator[zmq.Socket[bytes]]:
    """A client of node 0 holding ``client`` (the pool's client keypair unless given)."""
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    socket = context.socket(zmq.DEALER)
    socket.setsockopt(zmq.LINGER, 0)
    configure_client(socket, keys.node(0).public, client or keys.client)
    socket.connect(f"tcp://127.0.0.1:{port}")
    try:
        yield socket
    finally:
        socket.close(linger=0)
        context.term()


def _until(done: Callable[[], bool]) -> Callable[[], float]:
    """hello()'s clock: real time until ``done()``, then past any deadline (no agent
    follows the loader here: the handshake ends once the script has arrived)."""
    return lambda: time.monotonic() + (1e9 if done() else 0.0)


@pytest.fixture
def keys() -> PoolKeys:
    return PoolKeys()


@pytest.fixture
def port() -> int:
    return _free_port()


@pytest.fixture
def client(keys: PoolKeys, port: int) -> Iterator[zmq.Socket[bytes]]:
    yield from _client(keys, port)


def _loader(config: AgentConfig, target: Path, digest: str, wait: float) -> subprocess.Popen[bytes]:
    essentials = {k: getattr(config, k) for k in ("pool_id", "node", "bind", "server_secret", "client_public")}
    process = subprocess.Popen(
        [sys.executable, loader.__file__, str(target), digest, str(wait)],
        stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        env={**os.environ, loader.BIND_HOST_ENV: "127.0.0.1"},
    )  # fmt: skip
    assert process.stdin is not None
    process.stdin.write(base64.b64encode(json.dumps(essentials).encode()) + b"\n")
    process.stdin.close()
    return process


def test_the_loader_takes_the_script_its_start_command_names_and_leaves_it_executable(
    keys: PoolKeys, port: int, client: zmq.Socket[bytes], tmp_path: Path
) -> None:
    script = _script(_config(keys, port), "echo hi\n")
    target = tmp_path / "bootstrap.sh"
    process = _loader(_config(keys, port), target, hashlib.sha256(script.encode()).hexdigest(), 60)
    offered = OfferedWheels()
    offered.offer_script(script)
    with pytest.raises(ProvisioningError, match="silent"):
        handshake.hello([client], lambda _: "silent", 60.0, clock=_until(target.exists), wheels=offered)
    assert process.wait(30) == 0
    assert target.read_text() == script and target.stat().st_mode & 0o777 == 0o700


def test_a_tampered_script_is_refused_by_the_loader_and_the_reason_reaches_the_client(
    keys: PoolKeys, port: int, client: zmq.Socket[bytes], tmp_path: Path
) -> None:
    script = _script(_config(keys, port), "echo hi\n")
    target = tmp_path / "bootstrap.sh"
    process = _loader(_config(keys, port), target, hashlib.sha256(script.encode()).hexdigest(), 60)
    with pytest.raises(WheelRefusedError, match=r"node 0 refused the bootstrap script .*nothing run"):
        handshake.hello([client], lambda _: "silent", 60.0, wheels=lambda digests: [b"#!/bin/sh\nrm -rf /\n"])
    assert process.wait(30) == 3
    assert not target.exists() and not Path(f"{target}.part").exists()


def test_a_loader_whose_client_never_comes_gives_up_at_its_wait_and_says_why(
    keys: PoolKeys, port: int, tmp_path: Path
) -> None:
    target = tmp_path / "bootstrap.sh"
    process = _loader(_config(keys, port, pool="sky-lonely", node=3), target, "ab" * 32, 1)
    assert process.wait(30) == 3 and not target.exists()
    assert process.stderr is not None
    err = process.stderr.read()
    assert b"pool sky-lonely, node 3" in err and b"no bootstrap script arrived" in err


def test_a_restarted_container_runs_the_script_it_already_fetched_without_asking(
    keys: PoolKeys, port: int, tmp_path: Path
) -> None:
    script = _script(_config(keys, port), "echo hi\n")
    target = tmp_path / "bootstrap.sh"
    target.write_text(script)
    assert _loader(_config(keys, port), target, hashlib.sha256(script.encode()).hexdigest(), 60).wait(30) == 0
    other = tmp_path / "other.sh"
    other.write_text("#!/bin/sh\necho not the one\n")  # another script there: asked for again, none comes
    assert _loader(_config(keys, port), other, hashlib.sha256(script.encode()).hexdigest(), 1).wait(30) == 3
    assert other.read_text() == "#!/bin/sh\necho not the one\n"


def test_a_client_with_other_keys_is_never_answered(keys: PoolKeys, port: int, tmp_path: Path) -> None:
    script = _script(_config(keys, port), "echo hi\n")
    target = tmp_path / "bootstrap.sh"
    process = _loader(_config(keys, port), target, hashlib.sha256(script.encode()).hexdigest(), 2)
    for socket in _client(keys, port, client=Keypair.generate()):  # the right node key, a stranger's own keypair
        while process.poll() is None:  # the loader is there all along; the stranger's handshake never completes
            try:
                socket.send(stage.WHEELS, zmq.NOBLOCK)
            except zmq.Again:
                pass
            assert not socket.poll(200), "the loader answered a client the pool's keys do not name"
    assert process.wait(30) == 3 and not target.exists()


def test_the_start_command_fetches_its_script_and_runs_it(
    keys: PoolKeys, port: int, client: zmq.Socket[bytes], tmp_path: Path
) -> None:
    home = tmp_path / "home" / ".skyward"
    python = home / "loader" / "bin" / "python"  # a loader environment from an earlier start: reused
    python.parent.mkdir(parents=True)
    python.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} "$@"\n')
    python.chmod(0o755)
    ran = home / "ran"
    script = _script(_config(keys, port), 'echo "ran as $0" >"$SKYWARD_HOME/ran"\n')
    command = start_command(script, 60)
    env = {"HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin", loader.BIND_HOST_ENV: "127.0.0.1",
           "SKYWARD_HOME": str(home)}  # fmt: skip
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    offered = OfferedWheels()
    offered.offer_script(script)
    with pytest.raises(ProvisioningError, match="silent"):
        handshake.hello([client], lambda _: "silent", 60.0, clock=_until(ran.exists), wheels=offered)
    out, _ = process.communicate(timeout=30)
    assert process.returncode == 0, out.decode()
    assert ran.read_text().startswith("ran as ") and ran.read_text().endswith(f"/{BOOT_SCRIPT}\n")


def _node_asking_for_its_script_then_wheels(router: zmq.Socket[bytes], script: bytes, wheel: bytes) -> None:
    """A node as the handshake meets it behind a loader: NEED_SCRIPT until the script comes,
    then NEED until the wheel comes, then INFO. A client that never answers the second
    request within 5 s gets an INFO that says so (the test then fails rather than hangs)."""
    asked: float | None = None
    peer, have_script, have_wheel = b"", False, False
    while not have_wheel:
        if not router.poll(100):
            if asked is not None and time.monotonic() - asked > 5:
                router.send_multipart([peer, wire.INFO, json.dumps({"stuck": True}).encode()])
                return
            continue
        peer, kind, *rest = router.recv_multipart()
        if kind == loader.SCRIPT:
            have_script = rest == [script]
        elif kind == stage.WHEELS:
            have_wheel = rest == [wheel]
            break
        if have_script:
            asked = asked or time.monotonic()
            router.send_multipart([peer, stage.NEED, json.dumps([hashlib.sha256(wheel).hexdigest()]).encode()])
        else:
            router.send_multipart([peer, loader.NEED_SCRIPT, json.dumps([hashlib.sha256(script).hexdigest()]).encode()])
    router.send_multipart([peer, wire.INFO, json.dumps({"endpoints": []}).encode()])


def test_the_client_answers_a_script_request_then_the_wheel_request_that_follows_at_once() -> None:
    script, wheel = b"#!/bin/sh\necho boot\n", b"a wheel" * 100
    offered = {hashlib.sha256(b).hexdigest(): b for b in (script, wheel)}
    with zmq.Context() as context:
        router = context.socket(zmq.ROUTER)
        port = router.bind_to_random_port("tcp://127.0.0.1")
        dealer = context.socket(zmq.DEALER)
        dealer.connect(f"tcp://127.0.0.1:{port}")
        node = threading.Thread(target=_node_asking_for_its_script_then_wheels, args=(router, script, wheel))
        node.start()
        try:
            # a clock that never moves: the wheel request comes "at the same time" as the
            # script was sent, and is answered all the same (each kind has its own resend timer)
            (info,) = handshake.hello([dealer], lambda _: "silent", 60.0, clock=lambda: 0.0,
                                      wheels=lambda digests: [offered[d] for d in digests])  # fmt: skip
        finally:
            node.join(30)
            dealer.close(linger=0)
            router.close(linger=0)
    assert info == {"endpoints": []}
