"""The bake flow every provider shares (skyward.providers.baking.Bakery), over an in-memory
BakeStore: which image a pool starts from, when it bakes, and that baking never fails
the pool."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from providers_support import make_spec

import skyward
from skyward.events import Notice
from skyward.image import BootstrapContext
from skyward.providers.baking import BakedImage, BakeKey, Bakery, BakeStore, bake_key
from skyward.providers.protocol import NodeHandle

IMAGE = skyward.Image(pip=["six"], bake=True)
CONTEXT = BootstrapContext(skyward_requirement="skyward-core==1.2.0")
BASE = "base-image-1"
NODE = NodeHandle(node=0, instance_id="i-0", endpoint="tcp://127.0.0.1:1", instance_type="small")


class MemoryStore:
    """Baked images in a list; ``refuse`` makes ``create_baked`` fail as a cloud would."""

    price_gb_month = 0.06

    def __init__(self, images: list[BakedImage] | None = None, refuse: str | None = None) -> None:
        self.images = list(images or [])
        self.refuse = refuse
        self.created: list[tuple[str, BakeKey, str]] = []

    def list_baked(self) -> list[BakedImage]:
        return list(self.images)

    def create_baked(self, instance_id: str, key: BakeKey, pool_id: str) -> BakedImage:
        if self.refuse is not None:
            raise RuntimeError(self.refuse)
        self.created.append((instance_id, key, pool_id))
        made = BakedImage(id=f"img-{len(self.created)}", key=key, created="2026-01-01T00:00:00Z", ready=False)
        self.images.append(made)
        return made

    def delete_baked(self, image_id: str) -> None:
        self.images = [i for i in self.images if i.id != image_id]


def _key() -> BakeKey:
    return bake_key(IMAGE, CONTEXT, BASE)


def _run(store: BakeStore) -> tuple[Bakery, BakedImage | None, list[str]]:
    """One pool's bake: choose at prepare, bake once the agents answer."""
    seen: list[Any] = []
    bakery = Bakery()
    bakery.choose(store, IMAGE, CONTEXT, BASE, seen.append)
    made = bakery.bake(store, make_spec(skyward.Local()), NODE, seen.append)
    return bakery, made, [e.message for e in seen if isinstance(e, Notice)]


def test_a_pool_with_no_baked_image_bakes_node_zero_once_and_says_what_it_costs() -> None:
    store = MemoryStore()
    bakery, made, notices = _run(store)
    assert not bakery.starts_baked and made is not None
    assert [(i, k) for i, k, _ in store.created] == [("i-0", _key())]
    assert any("$0.06 per GB-month" in n and made.id in n for n in notices)
    spec = make_spec(skyward.Local())
    assert bakery.bake(store, spec, NODE, lambda e: None) is None and len(store.created) == 1  # once per pool


def test_a_pool_with_a_matching_image_starts_from_it_and_bakes_nothing() -> None:
    ready = BakedImage(id="img-ready", key=_key(), created="2026-01-02T00:00:00Z", ready=True)
    store = MemoryStore([ready])
    bakery, made, notices = _run(store)
    assert bakery.starts_baked and bakery.chosen == ready and made is None and store.created == []
    assert "starting from baked image img-ready: apt, uv and the environment are skipped" in notices


@pytest.mark.parametrize("stale", ["version", "base", "env_key"])
def test_a_stale_image_is_never_started_from_and_a_fresh_one_is_baked(stale: str) -> None:
    old = replace(_key(), **{stale: "other"})
    store = MemoryStore([BakedImage(id="img-old", key=old, created="2026-01-02T00:00:00Z", ready=True)])
    bakery, made, _ = _run(store)
    assert not bakery.starts_baked and made is not None and made.key == _key()


def test_no_second_bake_while_another_pool_bakes_the_same_key() -> None:
    store = MemoryStore([BakedImage(id="img-pending", key=_key(), created="", ready=False)])
    bakery, made, notices = _run(store)
    assert not bakery.starts_baked and made is None and store.created == []
    assert any("another pool is baking this Image" in n for n in notices)


def test_a_refused_bake_is_a_notice_and_never_the_pools_failure() -> None:
    store = MemoryStore(refuse="quota of images reached")
    bakery, made, notices = _run(store)
    assert made is None and bakery.made is None
    assert "could not bake an image from i-0: quota of images reached" in notices


def test_a_pool_that_never_chose_bakes_nothing() -> None:
    store = MemoryStore()
    assert Bakery().bake(store, make_spec(skyward.Local()), NODE, lambda e: None) is None
    assert store.created == []
