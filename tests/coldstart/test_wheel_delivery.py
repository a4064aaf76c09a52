"""Skyward from this checkout reaches emulated cloud nodes as the client's wheels (built
once, sent over the agent's CURVE endpoint, checked by sha256 on the node), never as a
build of the checkout's path, which a real cloud node does not have."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aws.conftest import CLIENT_ADDRESS, AwsWorld, Emulation
from fakes.digitalocean import FakeDigitalOcean
from providers_support import World, emulate

import skyward
from skyward.bootstrap import WHEELS_DIR, client_requirements
from skyward.errors import WheelRefusedError
from skyward.wheels.cache import RECORD, default_root

pytestmark = pytest.mark.cloud


@skyward.compute
def installed() -> dict[str, str]:
    """Where this node's skyward comes from, as the node sees it."""
    import sys
    from importlib import metadata

    import skyward as node_skyward

    dist = metadata.distribution("skyward-core")
    return {
        "prefix": sys.prefix,
        "module": node_skyward.__file__ or "",
        "installer": (dist.read_text("INSTALLER") or "").strip(),
        "direct_url": dist.read_text("direct_url.json") or "",
    }


@pytest.fixture(autouse=True)
def _editable_client() -> None:
    if "file://" not in client_requirements()[0]:
        pytest.skip("skyward-core is not an editable install here")  # skip-ok: a release installs from the index


def _records() -> dict[str, dict[str, Any]]:
    """The client's wheel cache: entry name -> its record."""
    root = default_root()
    return {p.parent.name: json.loads(p.read_text()) for p in root.glob(f"*/{RECORD}")} if root.is_dir() else {}


def _core_record() -> tuple[str, dict[str, Any]]:
    (entry,) = [(name, r) for name, r in _records().items() if r["filename"].startswith("skyward_core-")]
    return entry


def _check_node(result: dict[str, str], home: Path) -> None:
    """The node runs the wheel's files, installed into its own environment."""
    name, record = _core_record()
    assert result["prefix"].startswith(str(home / ".skyward" / "envs")), result
    assert result["module"].startswith(result["prefix"]), result  # not the checkout's src/
    assert result["installer"] == "uv" and result["direct_url"] == ""  # a wheel, not a build of a path
    received = home / ".skyward" / WHEELS_DIR / record["filename"]
    assert hashlib.sha256(received.read_bytes()).hexdigest() == record["sha256"]
    assert (default_root() / name / record["filename"]).read_bytes() == received.read_bytes()


@pytest.fixture
def droplets(fake_do: FakeDigitalOcean) -> Iterator[World[FakeDigitalOcean]]:
    yield from emulate(fake_do, fake_do.power_off)


def test_droplets_install_the_clients_wheel_built_once_for_every_node_and_every_pool(
    droplets: World[FakeDigitalOcean], do_config: object
) -> None:
    for _ in range(2):
        with skyward.ComputePool(provider=do_config, nodes=2, display="quiet") as pool:
            results = installed() @ pool
            homes = [droplets.harness.instance(n.instance_id).directory / "home" for n in pool.nodes]
        for result, home in zip(results, homes, strict=True):
            _check_node(result, home)
        if _ == 0:
            first = _records()
    assert _records() == first  # the second pool built nothing: the same entries, built at the same time


def test_ec2_instances_install_the_clients_wheel(aws: AwsWorld, emulated: Emulation) -> None:
    provider = skyward.AWS(client_address=CLIENT_ADDRESS, bootstrap_timeout=120, endpoint_resolver=emulated.endpoints)
    with skyward.ComputePool(provider=provider, nodes=1, display="quiet", spot="never") as pool:
        (result,) = installed() @ pool
        home = emulated.harness.instance(pool.nodes[0].instance_id).directory / "home"
    _check_node(result, home)


def test_a_wheel_changed_after_the_nodes_were_made_is_refused_by_the_node(
    droplets: World[FakeDigitalOcean], do_config: object
) -> None:
    started = droplets.fake.on_running
    assert started is not None
    tampered: list[Path] = []

    def tamper_then_start(instance_id: str, user_data: str, ip: str) -> None:
        # the user-data (with the wheel's sha256) is made; the client sends the file later
        name, record = _core_record()
        path = default_root() / name / record["filename"]
        tampered.append(path)
        path.write_bytes(path.read_bytes() + b"\0")
        started(instance_id, user_data, ip)

    droplets.fake.on_running = tamper_then_start
    with pytest.raises(WheelRefusedError, match=r"node 0 refused the wheels .*skyward_core-.*nothing installed"):
        with skyward.ComputePool(provider=do_config, display="quiet"):
            pass
    assert tampered
    fake = droplets.fake
    assert fake.droplets and all(d.status == "deleted" for d in fake.droplets.values())  # nothing left billing
