"""``Image(includes=...)`` on an emulated DigitalOcean pool: the project's files reach
every droplet over its CURVE channel (never its user-data), and tasks read them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from do_support import DropletWorld

import skyward as sky
from skyward_digitalocean import DigitalOcean

pytestmark = pytest.mark.cloud


@sky.compute
def read(path: str) -> str:
    with open(path) as f:
        return f.read()


def test_every_droplet_s_tasks_read_the_included_files_which_its_user_data_never_holds(
    droplets: DropletWorld, do_config: DigitalOcean, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = f"row-{os.urandom(8).hex()}"
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "train.csv").write_text(f"x\n{marker}\n")
    monkeypatch.chdir(tmp_path)
    image = sky.Image(includes=["data/*.csv"])
    with sky.ComputePool(provider=do_config, nodes=2, image=image, display="quiet") as pool:
        assert read("data/train.csv") @ pool == (f"x\n{marker}\n",) * len(pool.nodes)
        files = pool.files
    assert files is not None and files.sent_bytes >= len(f"x\n{marker}\n")
    assert marker not in repr(list(droplets.fake.droplets.values()))
