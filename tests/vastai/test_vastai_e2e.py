"""End to end: ComputePool(provider=VastAI(...)) on the fake VastAI API, each rented
container an emulated instance reached only through its host's port mapping."""

from __future__ import annotations

import pytest
from fakes.vastai import FakeVastAI
from providers_support import World

import skyward as sky
from skyward import ComputePool, compute
from skyward.errors import ProvisioningError
from skyward_vastai import VastAI

pytestmark = pytest.mark.cloud


@compute
def square(x: int) -> tuple[int, int]:
    return x * x, sky.instance_info().node


def test_an_offer_rented_by_someone_else_is_skipped_and_a_failed_rent_destroys_the_others(
    world: World[FakeVastAI], config: VastAI
) -> None:
    fake = world.fake
    fake.offers[101]["rented"] = True  # taken between our search and our rent... and gone from the search
    fake.fail("PUT", r"/api/v0/asks/\d+/", 400, {"success": False, "msg": "insufficient credit"}, after=2)
    with pytest.raises(ProvisioningError, match="insufficient credit"):
        with ComputePool(provider=config, nodes=3, display="quiet"):
            pass
    assert fake.instances == {} and len(fake.destroyed) == 2


def test_a_rate_limited_and_slow_api_still_starts_the_pool(world: World[FakeVastAI], config: VastAI) -> None:
    fake = world.fake
    fake.rate_limit("POST", r"/api/v0/bundles/", times=2)
    fake.rate_limit("GET", r"/api/v1/instances/", times=3)
    fake.boot_delay = 1.5  # containers that take a while to pull their image
    with ComputePool(provider=config, nodes=1, display="quiet") as pool:
        assert (square(4) >> pool)[0] == 16
    assert fake.count("POST", r"/api/v0/bundles/", 429) == 2
    assert fake.instances == {}


def test_no_offer_left_for_spot_always_fails_after_its_retries_and_leaves_nothing(
    world: World[FakeVastAI], config: VastAI
) -> None:
    fake = world.fake
    for ident in (101, 102):
        fake.offers[ident]["rented"] = True  # one fitting single RTX 4090 left for a pool of two
    with pytest.raises(ProvisioningError, match="no VastAI spot offer left"):
        with ComputePool(
            provider=config, nodes=2, machine="1x RTX 4090", spot=sky.Spot.Always(retries=1, interval=0.01),
            display="quiet",
        ):  # fmt: skip
            pass
    assert fake.instances == {} and len(fake.destroyed) == 1  # the node that got the last offer
    assert len(fake.searches) >= 3  # the pool's search, then one more per try of the unlucky node
