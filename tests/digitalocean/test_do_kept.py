"""A kept pool end to end on an emulated cloud (the fake DigitalOcean): one process opens
it and leaves, a second attaches over CURVE with the recorded keys and runs on the same
agent and worker, a third stops it with ``skyward down NAME`` (droplet, firewall, key and
tag deleted, verified)."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from do_support import emulate as emulate_droplets
from do_support import nothing_left as nothing_left_on_do
from fakes.digitalocean import FakeDigitalOcean
from typer.testing import CliRunner

import skyward as sky
from skyward.api.kept.record import PoolStore
from skyward.cli.app import make_app
from skyward.events import Notice

pytestmark = [pytest.mark.cloud, pytest.mark.slow]

OPEN = """
import json, os, sys
import skyward as sky
from skyward_digitalocean import DigitalOcean

config = DigitalOcean(
    region="tor1", api_url=sys.argv[1], address_url=sys.argv[1] + "/whoami", poll_interval=0.02,
    grace_period=5.0, bootstrap_timeout=120.0,
)

@sky.compute
def where():
    return os.getppid(), os.getpid()

with sky.ComputePool(provider=config, nodes=1, timeout=300, keep_alive=120, display="quiet", name=sys.argv[2]) as pool:
    print(json.dumps(where() >> pool), flush=True)
"""

ATTACH = """
import json, os, sys, time
import skyward as sky

@sky.compute
def where():
    return os.getppid(), os.getpid()

time.sleep(6)  # past the provider's grace period of 5 s: only the keep-alive keeps the node
with sky.attach(sys.argv[1], display="quiet") as pool:
    print(json.dumps(where() >> pool), flush=True)
"""


def _run(*args: str) -> list[int]:
    out = subprocess.run([sys.executable, "-c", *args], capture_output=True, text=True, timeout=240, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    result: list[int] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def test_a_kept_droplet_pool_outlives_its_client_is_attached_from_another_process_and_stopped_by_name(
    fake_do: FakeDigitalOcean, do_config: Any, do_token: str
) -> None:
    worlds = emulate_droplets(fake_do)
    next(worlds)
    name = f"kept-{uuid.uuid4().hex[:8]}"
    try:
        first = _run(OPEN, fake_do.url, name)
        assert PoolStore().record(name).provider == "digitalocean"
        second = _run(ATTACH, name)
        assert second == first  # the same agent and worker, reached over CURVE with the recorded keys
        assert len(fake_do.droplets) == 1  # attaching made no droplet
        result = CliRunner().invoke(make_app(configs={"digitalocean": do_config}), ["down", name, "--json"])
        assert result.exit_code == 0, result.output
        shown = json.loads(result.stdout)
        assert shown["pool"]["answered"] == [0] and shown["pool"]["record_removed"] is True
        assert all(r["removed"] for r in shown["removals"])
        assert nothing_left_on_do(fake_do) == {}
        assert name not in PoolStore().names()
        assert fake_do.violations == []
    finally:
        next(worlds, None)


def test_a_kept_droplet_pool_suggests_the_sweep_and_stop_on_the_attached_pool_deletes_everything(
    fake_do: FakeDigitalOcean, do_config: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SKYWARD_HOME", str(tmp_path))  # no sweep installed here
    worlds = emulate_droplets(fake_do)
    next(worlds)
    name = f"kept-{uuid.uuid4().hex[:8]}"
    events: list[object] = []
    try:
        with sky.ComputePool(provider=do_config, name=name, keep_alive=60, display="quiet", on_event=events.append):
            pass
        notices = [e.message for e in events if isinstance(e, Notice)]
        assert any("skyward sweep --install" in n for n in notices), notices  # a stopped droplet still bills
        assert any(f"pool {name!r} is kept" in n for n in notices), notices
        attached = sky.attach(name, display="quiet")
        attached.stop()  # deletes through the pool's own settings (the fake's API), not the defaults
        assert nothing_left_on_do(fake_do) == {}
        assert name not in PoolStore().names()
        assert fake_do.violations == []
    finally:
        next(worlds, None)
