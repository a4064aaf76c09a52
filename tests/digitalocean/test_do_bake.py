"""Image(bake=True) on DigitalOcean (the fake API, emulated droplets): the first pool
snapshots a bootstrapped droplet and labels the snapshot with its BakeKey, the next one
starts from it and skips the environment steps, and a stale snapshot is never used."""

from __future__ import annotations

from typing import Any

import pytest
from bake_support import ENVIRONMENT_STEPS, fresh_image, start_pool
from do_support import DropletWorld
from fakes.digitalocean import FakeDigitalOcean

import skyward
from skyward.baking import LABEL_BASE, LABEL_ENV_KEY, LABEL_IMAGE_HASH, LABEL_VERSION
from skyward.events import Notice
from skyward_digitalocean import DigitalOcean
from skyward_digitalocean.baking import encode_value, labels_of

pytestmark = pytest.mark.cloud


def _snapshots(fake: FakeDigitalOcean, image: skyward.Image) -> list[Any]:
    with fake.lock:
        return [s for s in fake.snapshots.values() if labels_of(s.tags).get(LABEL_IMAGE_HASH) == image.content_hash()]


def test_a_snapshot_is_baked_once_and_the_next_pool_starts_from_it_skipping_the_environment(
    droplets: DropletWorld, do_config: DigitalOcean
) -> None:
    fake = droplets.fake
    image = fresh_image()
    events, first, steps = start_pool(do_config, image)
    assert ENVIRONMENT_STEPS & set(steps) and "baked" not in steps
    (snapshot,) = _snapshots(fake, image)
    labels = labels_of(snapshot.tags)
    assert labels[LABEL_VERSION] == skyward.__version__
    assert labels[LABEL_ENV_KEY].startswith(image.content_hash())
    assert labels[LABEL_BASE] == "ubuntu-24-04-x64"
    assert f"skyward:version:{encode_value(skyward.__version__)}" in snapshot.tags
    assert snapshot.droplet_id == int(first) and snapshot.region == "tor1"
    assert fake.count("POST", rf"/v2/droplets/{first}/actions") == 1
    assert any(isinstance(e, Notice) and "$0.06 per GB-month" in e.message for e in events)
    assert fake.droplets[int(first)].status == "deleted"  # after its snapshot completed: never refused

    events, second, steps = start_pool(do_config, image)
    assert fake.droplets[int(second)].image == str(snapshot.id)
    assert "baked" in steps and not ENVIRONMENT_STEPS & set(steps)
    assert len(fake.actions) == 1  # nothing baked again
    assert any(isinstance(e, Notice) and f"starting from baked image {snapshot.id}" in e.message for e in events)


def test_a_snapshot_of_another_skyward_version_is_never_used(droplets: DropletWorld, do_config: DigitalOcean) -> None:
    fake = droplets.fake
    image = fresh_image()
    start_pool(do_config, image)
    (stale,) = _snapshots(fake, image)
    with fake.lock:  # the same environment, baked by another skyward
        stale.tags = [t for t in stale.tags if not t.startswith(f"{LABEL_VERSION}:")] + ["skyward:version:0_2E0_2E0"]

    _, second, steps = start_pool(do_config, image)
    assert fake.droplets[int(second)].image == "ubuntu-24-04-x64"
    assert "baked" not in steps and "deps" in steps
    versions = sorted(labels_of(s.tags)[LABEL_VERSION] for s in _snapshots(fake, image))
    assert versions == sorted(["0.0.0", skyward.__version__])  # a fresh bake replaces the stale one's use


def test_the_fake_refuses_a_snapshot_or_a_tagging_body_the_real_api_would_refuse(
    fake_do: FakeDigitalOcean, do_config: DigitalOcean
) -> None:
    from skyward_digitalocean.api import DigitalOceanAPIError
    from skyward_digitalocean.driver import DigitalOceanDriver

    api = DigitalOceanDriver(do_config).api
    droplet = fake_do.add_droplet(name="bake-me", tags=["skyward"])
    with pytest.raises(DigitalOceanAPIError, match="HTTP 422"):
        api._call("bad snapshot", "POST", api._client.droplet_actions.post, droplet_id=droplet,
                  body={"type": "snapshot", "name": "x", "tags": ["nope"]})  # fmt: skip
    with pytest.raises(DigitalOceanAPIError, match="HTTP 422"):
        api.tag_resources("skyward", "snapshot", [str(droplet)])  # images are tagged as "image"
    assert len(fake_do.violations) == 2 and "unknown snapshot action attributes" in fake_do.violations[0]
    fake_do.violations.clear()
    assert fake_do.actions == {} and fake_do.snapshots == {}
