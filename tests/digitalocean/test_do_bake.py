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
from skyward.events import Notice
from skyward.providers.baking import LABEL_BASE, LABEL_ENV_KEY, LABEL_IMAGE_HASH, LABEL_VERSION
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
    fake.snapshot_delay = 2.0  # still in progress when the pool closes: the close waits for it
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


def test_a_snapshot_in_another_region_is_never_used(droplets: DropletWorld, do_config: DigitalOcean) -> None:
    fake = droplets.fake
    image = fresh_image()
    start_pool(do_config, image)
    (elsewhere,) = _snapshots(fake, image)
    with fake.lock:
        elsewhere.region = "atl1"  # as if baked by a pool in Atlanta: droplets in tor1 cannot start from it

    _, second, steps = start_pool(do_config, image)
    assert fake.droplets[int(second)].image == "ubuntu-24-04-x64" and "baked" not in steps
    assert sorted(s.region for s in _snapshots(fake, image)) == ["atl1", "tor1"]


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


def test_skyward_ls_lists_baked_snapshots_and_only_down_baked_deletes_them(
    fake_do: FakeDigitalOcean, do_config: DigitalOcean
) -> None:
    import json
    import time

    from typer.testing import CliRunner

    from skyward.cli.app import make_app
    from skyward.providers.baking import HOURS_PER_MONTH, BakeKey
    from skyward_digitalocean.baking import SNAPSHOT_PRICE_GB_MONTH, DropletSnapshots
    from skyward_digitalocean.driver import DigitalOceanDriver

    droplet = fake_do.add_droplet(name="sky-0000000a-0", tags=["skyward"])
    key = BakeKey("0123456789ab", "0123456789ab-cdef0123", skyward.__version__, "ubuntu-24-04-x64")
    events: list[Any] = []
    store = DropletSnapshots(
        DigitalOceanDriver(do_config).api, "nyc1", 25, events.append,
        poll_interval=0.02, clock=time.time, sleep=time.sleep,
    )  # fmt: skip
    store.create_baked(str(droplet), key, "sky-0000000a")
    store.wait()
    assert store.snapshot_id is not None, events
    DigitalOceanDriver(do_config).api.delete_droplet(droplet)  # its pool is over; the snapshot outlives it
    app, runner = make_app(configs={"digitalocean": do_config}), CliRunner()

    listed = runner.invoke(app, ["ls", "--json", "-p", "digitalocean"])
    assert listed.exit_code == 0, listed.output
    (baked,) = [r for r in json.loads(listed.stdout)["resources"] if r["kind"] == "baked-image"]
    assert (baked["id"], baked["pool_id"], baked["expires_at"]) == (store.snapshot_id, "baked", None)
    monthly = fake_do.snapshot_gigabytes * SNAPSHOT_PRICE_GB_MONTH
    assert baked["hourly_price"] == pytest.approx(monthly / HOURS_PER_MONTH)
    assert "0123456789ab" in baked["name"] and baked["region"] == "nyc1"

    private = DigitalOceanDriver(do_config).api._client.images.list(private=True)["images"]
    assert [(i["id"], i["type"], i["public"]) for i in private] == [(int(store.snapshot_id), "snapshot", False)]

    assert runner.invoke(app, ["down", "--expired", "-p", "digitalocean"]).exit_code == 0
    assert list(fake_do.snapshots) == [int(store.snapshot_id)]  # never expires: --expired leaves it

    down = runner.invoke(app, ["down", "baked", "-p", "digitalocean"])
    assert down.exit_code == 0, down.output
    assert fake_do.snapshots == {}
    after = json.loads(runner.invoke(app, ["ls", "--json", "-p", "digitalocean"]).stdout)["resources"]
    assert not [r for r in after if r["kind"] == "baked-image"]
    assert [t for t in fake_do.tags if t.startswith("skyward:")] == []  # label tags that label nothing go too


def test_a_droplet_another_pool_is_baking_means_no_second_snapshot(
    droplets: DropletWorld, do_config: DigitalOcean
) -> None:
    from skyward.providers.baking import bake_key
    from skyward.providers.cloud.bootstrap import cloud_bootstrap_context
    from skyward_digitalocean.baking import baked_tag, label_tags

    fake = droplets.fake
    image = fresh_image()
    key = bake_key(image, cloud_bootstrap_context(), "ubuntu-24-04-x64")
    fake.add_droplet(name="sky-0000000b-0", tags=["skyward", baked_tag(), *label_tags(key)])  # its snapshot runs

    events, _, steps = start_pool(do_config, image)
    assert "deps" in steps and fake.actions == {}
    assert any(isinstance(e, Notice) and "another pool is baking this Image" in e.message for e in events)


def test_a_refused_snapshot_is_a_notice_and_the_pool_works_on(droplets: DropletWorld, do_config: DigitalOcean) -> None:
    fake = droplets.fake
    fake.fail("POST", r"/v2/droplets/\d+/actions", 422, {"id": "unprocessable_entity", "message": "snapshot limit"})
    events, droplet, _ = start_pool(do_config, fresh_image())
    notices = [e.message for e in events if isinstance(e, Notice)]
    assert any(m.startswith(f"could not bake an image from {droplet}") and "snapshot limit" in m for m in notices)
    assert fake.snapshots == {} and fake.droplets[int(droplet)].status == "deleted"
    assert not [t for t in fake.droplets[int(droplet)].tags if t.startswith("skyward:")]  # not marked as being baked
