"""``sky.Volume`` on an emulated DigitalOcean pool: a real rclone FUSE mount inside each
droplet (an emulated instance has a mount namespace of its own), reading and writing a
bucket on moto's S3 server, with the storage keys in no droplet's recorded request."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from do_support import DropletWorld
from volume_support import Store

import skyward as sky
from skyward_digitalocean import DigitalOcean

pytestmark = pytest.mark.cloud


@sky.compute
def read_and_write(path: str, node_word: str) -> tuple[str, bool]:
    Path(path, "from-node.txt").write_text(node_word)
    return Path(path, "in/a.txt").read_text(), os.path.ismount(path)


def test_a_droplet_mounts_the_bucket_its_tasks_write_through_and_no_request_holds_the_keys(
    droplets: DropletWorld, do_config: DigitalOcean, store: Store, mount_dir: str
) -> None:
    store.put("in/a.txt", b"dataset")
    volume = sky.Volume(store.bucket, mount_dir, read_only=False, storage=store.storage)
    with sky.ComputePool(provider=do_config, nodes=1, volume=[volume], display="quiet") as pool:
        assert (read_and_write(mount_dir, "hello from the droplet") >> pool) == ("dataset", True)
        assert not os.path.ismount(mount_dir)  # the droplet's mount, not this machine's
        made = list(droplets.fake.droplets.values())
        assert made and all("rclone" in d.user_data for d in made)  # the volumes step of the real bootstrap
        recorded = repr(made)
        assert store.secret not in recorded and store.key_id not in recorded
    assert store.get("from-node.txt") == b"hello from the droplet"
