"""The client's wheels of local requirements: the cache, the plan, the node's check, the
exchange in the handshake, and what the bootstrap says (no cloud: a stage process on
loopback and real ``uv build`` where a wheel is built)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import zmq
from hypothesis import given
from hypothesis import strategies as st

import skyward
from skyward.agent.config import ENV_VAR
from skyward.bootstrap import client_requirements, environment_key, local_source_digest
from skyward.errors import ProvisioningError, WheelRefusedError
from skyward.image import BootstrapContext
from skyward.providers.cloud.bootstrap import cloud_bootstrap_context
from skyward.transport import handshake
from skyward.transport.security import PoolKeys, configure_client
from skyward.wheels import stage
from skyward.wheels.cache import (
    LocalWheel,
    OfferedWheels,
    WheelCache,
    entry_name,
    plan_wheels,
    runtime_requirements,
    sha256_of,
)

ROOT = Path(__file__).resolve().parents[2]


def _package(tmp_path: Path, name: str = "tiny-pkg", body: str = "X = 1\n") -> Path:
    """A small hatchling project: what a checkout of skyward or of a plugin is."""
    source = tmp_path / name
    module = source / "src" / name.replace("-", "_")
    module.mkdir(parents=True)
    (module / "__init__.py").write_text(body)
    (source / "pyproject.toml").write_text(
        f'[build-system]\nrequires = ["hatchling"]\nbuild-backend = "hatchling.build"\n'
        f'[project]\nname = "{name}"\nversion = "1.0"\ndependencies = ["six>=1", "extra-only; extra == \'x\'"]\n'
        f'[tool.hatch.build.targets.wheel]\npackages = ["src/{name.replace("-", "_")}"]\n'
    )
    return source


class CountingBuilder:
    """The real ``uv build``, counted."""

    def __init__(self) -> None:
        from skyward.wheels.cache import default_builder

        self.real = default_builder()
        self.calls: list[Path] = []

    def __call__(self, source: Path, out_dir: Path) -> None:
        self.calls.append(source)
        self.real(source, out_dir)


def test_a_second_pool_with_unchanged_sources_builds_nothing(tmp_path: Path) -> None:
    source = _package(tmp_path)
    builder = CountingBuilder()
    requirement = f"tiny-pkg @ file://{source}"
    first = WheelCache(tmp_path / "cache", builder).wheel(requirement)
    again = WheelCache(tmp_path / "cache", builder).wheel(requirement)  # a new pool, a new cache object
    assert builder.calls == [source]
    assert again == first
    assert first.sha256 == hashlib.sha256(first.path.read_bytes()).hexdigest()
    assert first.requires == ("six>=1",)  # what only an extra asks for is left out
    (source / "src" / "tiny_pkg" / "__init__.py").write_text("X = 2\n")
    edited = WheelCache(tmp_path / "cache", builder).wheel(requirement)
    assert len(builder.calls) == 2 and edited.sha256 != first.sha256
    with zipfile.ZipFile(edited.path) as archive:
        assert archive.read("tiny_pkg/__init__.py") == b"X = 2\n"


def test_a_cached_wheel_whose_bytes_changed_is_built_again(tmp_path: Path) -> None:
    source = _package(tmp_path)
    builder = CountingBuilder()
    cache = WheelCache(tmp_path / "cache", builder)
    wheel = cache.wheel(f"tiny-pkg @ file://{source}")
    wheel.path.write_bytes(b"truncated")
    rebuilt = cache.wheel(f"tiny-pkg @ file://{source}")
    assert len(builder.calls) == 2 and rebuilt.sha256 == sha256_of(rebuilt.path) == wheel.sha256


def test_a_failing_build_says_what_could_not_be_built(tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "pyproject.toml").write_text("[project\n")
    with pytest.raises(ProvisioningError, match=r"could not build a wheel of .*broken"):
        WheelCache(tmp_path / "cache").wheel(f"broken @ file://{broken}")


def test_the_cache_entry_names_the_distribution_and_its_sources() -> None:
    assert entry_name("Skyward_Core", "abc") == "skyward-core-abc"


def _wheel(name: str, requires: tuple[str, ...] = ()) -> LocalWheel:
    return LocalWheel(name, Path(f"/cache/{name}.whl"), hashlib.sha256(name.encode()).hexdigest(), requires)


def test_a_plan_installs_the_wheels_dependencies_from_the_index_and_never_the_wheels_themselves() -> None:
    core = _wheel("skyward-core", ("pyzmq>=26", "cloudpickle>=3.0"))
    aws = _wheel("skyward-aws", ("boto3>=1.34", "skyward_core==0.1.0"))
    plan = plan_wheels(
        ["skyward-core @ file:///c/core", "skyward-aws @ file:///c/aws", "cloudpickle==3.1.3"], [core, aws]
    )
    assert plan.wheels == (core, aws)
    assert plan.index == ("cloudpickle==3.1.3", "pyzmq>=26", "cloudpickle>=3.0", "boto3>=1.34")


@given(st.lists(st.sampled_from(["a==1", "b>=2", "c @ file:///x/c", "d; python_version>'3'"]), max_size=8))
def test_a_plan_keeps_every_index_requirement_once_in_order(requirements: list[str]) -> None:
    plan = plan_wheels(requirements, [])
    expected = list(dict.fromkeys(r for r in requirements if "file://" not in r))
    assert list(plan.index) == expected


def test_runtime_requirements_skip_what_only_an_extra_asks_for() -> None:
    metadata = (
        "Name: x\nRequires-Dist: a>=1\nRequires-Dist: b; extra == 'gpu'\nRequires-Dist: c; sys_platform == 'linux'\n"
    )
    assert runtime_requirements(metadata) == ("a>=1", "c; sys_platform == 'linux'")


def test_the_environment_key_changes_with_the_wheels_bytes() -> None:
    image = skyward.Image()
    one = BootstrapContext(pinned=("cloudpickle==3",), wheels=(_wheel("skyward-core"),))
    other = dataclasses.replace(one, wheels=(_wheel("skyward-core-edited"),))
    assert environment_key(image, one) != environment_key(image, other)


@pytest.fixture(scope="module")
def checkout_context(tmp_path_factory: pytest.TempPathFactory) -> BootstrapContext:
    """This checkout's cloud context: its skyward and plugins as wheels (built once)."""
    return cloud_bootstrap_context(WheelCache(tmp_path_factory.mktemp("wheels")))


def test_an_editable_client_sends_wheels_and_no_node_reads_its_checkout(checkout_context: BootstrapContext) -> None:
    core, _ = client_requirements()
    if "file://" not in core:
        pytest.skip("skyward-core is not an editable install here")  # skip-ok: a released install has no checkout
    names = {w.name for w in checkout_context.wheels}
    assert "skyward-core" in names and checkout_context.skyward_requirement is None
    script = _script(checkout_context)
    assert "file://" not in script  # no path of this machine reaches a node
    for wheel in checkout_context.wheels:
        assert f"{wheel.sha256}={wheel.filename}" in script
    assert "pyzmq>=26" in checkout_context.pinned  # the stage's dependency comes from the index


def _script(context: BootstrapContext) -> str:
    keys = PoolKeys()
    config = json.dumps(
        {
            "pool_id": "p" * 12, "node": 15, "total_nodes": 16, "workers": 8,
            "bind": "tcp://0.0.0.0:16789", "run_dir": "/tmp/skyward-run-" + "p" * 12,
            "server_secret": keys.node(15).secret.decode(), "client_public": keys.client.public.decode(),
            "ttl_seconds": 86400.0, "grace_seconds": 30.0, "metrics_interval": 2.0,
            "accelerators": ["A100-80GB"] * 8, "visible_devices": [], "mig_devices": 0,
            "head_addr": "127.0.0.1", "head_port": 0, "instance_id": "skyward-" + "p" * 12 + "-15",
        }
    )  # fmt: skip
    context = dataclasses.replace(context, agent_env={ENV_VAR: config})
    image = skyward.Image(pip=["torch==2.5.1", "numpy"], apt=["git"], env={"HF_HOME": "/data/hf"})
    return image.bootstrap(86400, context=context)


def test_the_user_data_with_every_wheel_fits_ec2s_limit(checkout_context: BootstrapContext) -> None:
    aws = pytest.importorskip("skyward_aws.driver")
    script = _script(checkout_context)
    assert len(aws.encode_user_data(script)) <= aws.USER_DATA_LIMIT
    assert f"{ENV_VAR}=" not in script and script.count('"server_secret": ') == 1  # the config once, on stdin


@pytest.fixture
def staged(tmp_path: Path) -> Iterator[tuple[zmq.Socket[bytes], dict[str, bytes], subprocess.Popen[bytes], Path]]:
    """A stage process on loopback expecting two wheels, and a client socket with the keys."""
    keys = PoolKeys()
    wheels = {"a-1-py3-none-any.whl": b"wheel a" * 500, "b-1-py3-none-any.whl": b"wheel b" * 700}
    with zmq.Context() as probe_ctx:  # a free port on loopback
        probe = probe_ctx.socket(zmq.ROUTER)
        port = probe.bind_to_random_port("tcp://127.0.0.1")
        probe.close(linger=0)
    config = {"bind": f"tcp://0.0.0.0:{port}", "server_secret": keys.node(0).secret.decode(),
              "client_public": keys.client.public.decode()}  # fmt: skip
    named = [f"{hashlib.sha256(b).hexdigest()}={n}" for n, b in wheels.items()]
    target = tmp_path / "received"
    process = subprocess.Popen(
        [sys.executable, stage.__file__, str(target), "127.0.0.1", *named],
        stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert process.stdin is not None
    process.stdin.write(json.dumps(config).encode() + b"\n")
    process.stdin.close()
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    socket = context.socket(zmq.DEALER)
    socket.setsockopt(zmq.LINGER, 0)
    configure_client(socket, keys.node(0).public, keys.client)  # node 0's own key
    socket.connect(f"tcp://127.0.0.1:{port}")
    try:
        yield socket, wheels, process, target
    finally:
        process.kill()
        process.wait()
        socket.close(linger=0)
        context.term()


def _supply(wheels: dict[str, bytes]) -> handshake.WheelSupply:
    by_sha = {hashlib.sha256(b).hexdigest(): b for b in wheels.values()}
    return lambda digests: [by_sha[d] for d in digests]


def test_the_stage_takes_the_wheels_its_user_data_names_and_exits(staged: tuple) -> None:  # type: ignore[type-arg]
    socket, wheels, process, target = staged
    with pytest.raises(ProvisioningError, match="silent"):  # no agent follows the stage here
        handshake.hello([socket], lambda _: "silent", 4.0, wheels=_supply(wheels))
    assert process.wait(10) == 0
    for name, data in wheels.items():
        assert (target / name).read_bytes() == data


def test_a_tampered_wheel_is_refused_by_the_stage_and_the_reason_reaches_the_client(staged: tuple) -> None:  # type: ignore[type-arg]
    socket, wheels, process, target = staged
    by_sha = {hashlib.sha256(b).hexdigest(): b for b in wheels.values()}
    swap = {hashlib.sha256(wheels["a-1-py3-none-any.whl"]).hexdigest(): b"something else"}
    with pytest.raises(WheelRefusedError, match=r"node 0 refused .*a-1-py3-none-any\.whl.*nothing installed"):
        handshake.hello([socket], lambda _: "silent", 20.0, wheels=lambda ds: [swap.get(d, by_sha[d]) for d in ds])
    assert process.wait(10) == 3
    assert not target.exists()


def test_a_client_asked_for_wheels_it_never_offered_says_so() -> None:
    with pytest.raises(ProvisioningError, match="never offered"):
        OfferedWheels()(["ab" * 32])


def test_wheels_are_sent_again_only_after_the_resend_interval() -> None:
    assert handshake.wheels_due(None, 0.0)
    assert not handshake.wheels_due(100.0, 100.0 + handshake.WHEEL_RESEND_INTERVAL - 0.1)
    assert handshake.wheels_due(100.0, 100.0 + handshake.WHEEL_RESEND_INTERVAL)


def test_building_this_checkouts_wheels_is_cached_by_their_sources(tmp_path: Path) -> None:
    core, _ = client_requirements()
    if "file://" not in core:
        pytest.skip("skyward-core is not an editable install here")  # skip-ok: a released install has no checkout
    builder = CountingBuilder()
    cache = WheelCache(tmp_path / "cache", builder)
    wheel = cache.wheel(core)
    assert cache.wheel(core) == wheel and len(builder.calls) == 1
    with zipfile.ZipFile(wheel.path) as archive:
        assert "skyward/wheels/stage.py" in archive.namelist()
    assert local_source_digest(core) in wheel.path.parent.name


def test_a_released_skyward_still_installs_from_the_index_and_no_stage_runs() -> None:
    context = BootstrapContext(skyward_requirement="skyward-core==1.2.0", pinned=("cloudpickle==3.1.3",))
    script = skyward.Image().bootstrap(0, context=dataclasses.replace(context, agent_env={ENV_VAR: "{}"}))
    assert "skyward-core==1.2.0" in script
    assert "wheel_stage.py" not in script and "AGENT_CONFIG" not in script.replace("SKYWARD_AGENT_CONFIG_END", "")


def test_wheels_without_the_agents_config_are_refused_when_the_script_is_made() -> None:
    context = BootstrapContext(wheels=(_wheel("skyward-core"),))
    with pytest.raises(ValueError, match="needs the agent's config"):
        skyward.Image().bootstrap(0, context=context)


@given(st.lists(st.binary(max_size=8), max_size=4), st.lists(st.binary(max_size=8), max_size=4))
def test_the_stage_accepts_exactly_the_bytes_whose_digests_it_was_given(
    planned: list[bytes], arrived: list[bytes]
) -> None:
    expected = {hashlib.sha256(b).hexdigest(): f"w{i}.whl" for i, b in enumerate(planned)}
    same = sorted(hashlib.sha256(b).hexdigest() for b in arrived) == sorted(expected)
    assert (stage.check(expected, arrived) == "") == same


def test_the_stage_never_opens_a_tcp_endpoint_without_the_pools_keys(tmp_path: Path) -> None:
    config = json.dumps({"bind": "tcp://127.0.0.1:0"})
    done = subprocess.run(
        [sys.executable, stage.__file__, str(tmp_path / "w"), "", "ab" * 32 + "=x.whl"],
        input=config + "\n",
        check=False,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 3 and "needs CURVE keys" in done.stderr
    assert not (tmp_path / "w").exists()
