"""``skyward down NAME`` end to end on an emulated cloud (the fake DigitalOcean): a client
opens a named pool and is SIGKILLed; its node's agent, alive through its grace period,
takes STOP over CURVE with the keys the pool recorded, and the pool's droplet, firewall,
key and tag are deleted by pool id and verified gone."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from typing import Any

import pytest
from do_support import emulate as emulate_droplets
from do_support import nothing_left as nothing_left_on_do
from fakes.digitalocean import FakeDigitalOcean
from typer.testing import CliRunner

from skyward.api.kept.record import PoolStore
from skyward.cli.app import make_app

pytestmark = [pytest.mark.cloud, pytest.mark.slow]

runner = CliRunner()

CLIENT = """
import sys, time
import skyward as sky
from skyward_digitalocean import DigitalOcean

config = DigitalOcean(
    region="tor1", api_url=sys.argv[1], address_url=sys.argv[1] + "/whoami", poll_interval=0.02,
    grace_period=120.0, bootstrap_timeout=120.0,
)
pool = sky.ComputePool(provider=config, nodes=1, timeout=300, display="quiet", name=sys.argv[2])
pool.open()
print("OPEN", pool.spec.pool_id, flush=True)
time.sleep(3600)  # the test kills this process: a laptop closing mid-pool
"""


def test_down_name_stops_a_digitalocean_pools_agent_and_deletes_its_resources(
    fake_do: FakeDigitalOcean, do_config: Any
) -> None:
    worlds = emulate_droplets(fake_do)
    next(worlds)
    name = f"do-{uuid.uuid4().hex[:8]}"
    client = subprocess.Popen(
        [sys.executable, "-c", CLIENT, fake_do.url, name], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert client.stdout is not None
        line = client.stdout.readline()
        assert line.startswith("OPEN"), (line, client.stderr.read() if client.poll() is not None else "")
        pool_id = line.split()[1]
        client.kill()  # SIGKILL: nobody closes the pool; its agent lives on for its grace period
        client.wait(timeout=10)
        store = PoolStore()
        assert store.record(name).pool_id == pool_id and store.record(name).provider == "digitalocean"
        app = make_app(configs={"digitalocean": do_config})
        result = runner.invoke(app, ["down", name, "--json"])
        assert result.exit_code == 0, result.output
        shown = json.loads(result.stdout)
        assert shown["pool"]["answered"] == [0]  # the agent took STOP over CURVE with the recorded keys
        assert shown["pool"]["record_removed"] is True and shown["errors"] == []
        assert sorted(r["kind"] for r in shown["removals"]) == ["firewall", "instance", "ssh-key", "tag"]
        assert all(r["removed"] for r in shown["removals"])
        assert nothing_left_on_do(fake_do) == {}
        assert name not in store.names()
        assert fake_do.violations == []
    finally:
        if client.poll() is None:
            client.kill()
        next(worlds, None)
