"""Cost safety, shown: a client is SIGKILLed once its pool's nodes are up; ``skyward ls``
lists what the pool left and ``skyward down`` leaves nothing (DigitalOcean and Verda
fakes; AWS in test_cli_aws.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from do_support import emulate as emulate_droplets
from do_support import nothing_left as nothing_left_on_do
from fakes.digitalocean import FakeDigitalOcean
from fakes.verda import FakeVerda
from providers_support import client_script, vanish_client
from typer.testing import CliRunner
from verda_support import CLIENT as VERDA_CLIENT
from verda_support import emulate as emulate_verda
from verda_support import nothing_left as nothing_left_on_verda

from skyward.cli.app import make_app
from skyward_digitalocean.naming import pool_mark
from skyward_verda.naming import parse_description

pytestmark = [pytest.mark.cloud, pytest.mark.slow]

runner = CliRunner()
RUNNING_DO_CLIENT = client_script("skyward_digitalocean", "DigitalOcean", 'region="tor1", api_url=sys.argv[1], ', 120.0)


def listed(app: Any, provider: str, pool_id: str) -> list[dict[str, Any]]:
    result = runner.invoke(app, ["ls", "--json", "-p", provider])
    assert result.exit_code == 0, result.output
    return [r for r in json.loads(result.stdout)["resources"] if r["pool_id"] == pool_id]


def test_a_killed_clients_droplet_firewall_key_and_tag_are_listed_and_down_expired_removes_them(
    fake_do: FakeDigitalOcean, do_config: Any
) -> None:
    worlds = emulate_droplets(fake_do)
    next(worlds)
    try:
        # a node that outlives the checks below: one that stopped itself (its grace passed)
        # is a stopped node of a dead pool, which `down --expired` rightly deletes at once
        droplet_id = vanish_client(RUNNING_DO_CLIENT, fake_do.url)
        mark = pool_mark(fake_do.droplets[int(droplet_id)].tags)
        assert mark is not None
        app = make_app(configs={"digitalocean": do_config})
        found = listed(app, "digitalocean", mark.pool_id)
        assert sorted(r["kind"] for r in found) == ["firewall", "instance", "ssh-key", "tag"]
        (droplet,) = [r for r in found if r["kind"] == "instance"]
        assert droplet["id"] == droplet_id and droplet["hourly_price"] > 0 and droplet["expired"] is False
        not_yet = runner.invoke(app, ["down", "--expired", "-p", "digitalocean"])
        assert not_yet.exit_code == 0 and fake_do.droplets[int(droplet_id)].status != "deleted"
        later = make_app(configs={"digitalocean": do_config}, clock=lambda: mark.expires + 1)
        down = runner.invoke(later, ["down", "--expired", "-p", "digitalocean"])
        assert down.exit_code == 0, down.output
        assert "digitalocean: found 4, removed 4, left 0" in down.stdout
        assert fake_do.droplets[int(droplet_id)].status == "deleted"
        assert nothing_left_on_do(fake_do) == {}
        assert fake_do.violations == []
    finally:
        next(worlds, None)


def test_a_killed_clients_instance_script_and_key_are_listed_and_down_pool_removes_them(
    fake_verda: FakeVerda, verda_config: Any
) -> None:
    worlds = emulate_verda(fake_verda)
    next(worlds)
    try:
        instance_id = vanish_client(VERDA_CLIENT, fake_verda.url)
        instance = fake_verda.instances[instance_id]
        mark = parse_description(instance.description)
        assert mark is not None
        app = make_app(configs={"verda": verda_config})
        found = listed(app, "verda", mark.pool_id)
        assert sorted(r["kind"] for r in found) == ["instance", "ssh-key", "startup-script"]
        down = runner.invoke(app, ["down", mark.pool_id, "-p", "verda"])
        assert down.exit_code == 0, down.output
        assert "verda: found 3, removed 3, left 0" in down.stdout
        assert instance.status == "deleted"
        assert fake_verda.volumes[instance.os_volume_id] == "deleted"  # its disk went with it
        assert nothing_left_on_verda(fake_verda) == {}
        assert listed(app, "verda", mark.pool_id) == []
        assert fake_verda.violations == []
    finally:
        next(worlds, None)
