"""``sky.Volume`` on an emulated Google Cloud pool: a real rclone FUSE mount inside each VM
(an emulated instance has a mount namespace of its own), reading and writing a bucket on
moto's S3 server, with the storage keys in no VM's recorded request."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import gcp_config
from fakes.gcp import FakeGCP
from providers_support import World
from volume_support import Store

import skyward as sky

pytestmark = pytest.mark.cloud


@sky.compute
def read_and_write(path: str, node_word: str) -> tuple[str, bool]:
    Path(path, "from-node.txt").write_text(node_word)
    return Path(path, "in/a.txt").read_text(), os.path.ismount(path)


def test_a_vm_mounts_the_bucket_its_tasks_write_through_and_no_request_holds_the_keys(
    gcp_world: World[FakeGCP], gcp_credentials: Path, store: Store, mount_dir: str
) -> None:
    fake = gcp_world.fake
    store.put("in/a.txt", b"dataset")
    volume = sky.Volume(store.bucket, mount_dir, read_only=False, storage=store.storage)
    config = gcp_config(fake, zone="us-central1-a")
    with sky.ComputePool(provider=config, nodes=1, volume=[volume], display="quiet") as pool:
        assert (read_and_write(mount_dir, "hello from the VM") >> pool) == ("dataset", True)
        assert not os.path.ismount(mount_dir)  # the VM's mount, not this machine's
        with fake.lock:
            made = list(fake.instances.values())
        assert made and all("rclone" in vm.startup_script for vm in made)  # the volumes step of the real bootstrap
        recorded = repr([vm.body for vm in made])
        assert store.secret not in recorded and store.key_id not in recorded
    assert store.get("from-node.txt") == b"hello from the VM"
