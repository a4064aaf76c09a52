"""Failover end to end on two fake clouds at once: DigitalOcean and Verda (tests/fakes),
the chosen candidate's machines run by the emulated-instance harness (tests/harness)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from do_support import emulate as emulate_do
from do_support import nothing_left as do_left
from fakes.digitalocean import FakeDigitalOcean
from fakes.http import Request, Response
from fakes.verda import FakeVerda
from lifecycle_support import lifecycle_problems
from providers_support import quick_settings, serve
from verda_support import InstanceWorld
from verda_support import emulate as emulate_verda
from verda_support import nothing_left as verda_left

import skyward as sky
from skyward import events as ev
from skyward.errors import NoCandidateError, PriceCapError, ProvisioningError, UnavailableError
from skyward_digitalocean import DigitalOcean
from skyward_verda import Verda

pytestmark = pytest.mark.cloud

DO_CREATE = ("POST", "/v2/droplets")
VERDA_DEPLOY = ("POST", "/v1/instances")


@sky.compute
def where() -> tuple[int, int]:
    info = sky.instance_info()
    return info.node, info.total_nodes


def do(fake: FakeDigitalOcean, region: str = "tor1") -> DigitalOcean:
    return DigitalOcean(region=region, api_url=fake.url, **quick_settings(fake))


def verda(fake: FakeVerda) -> Verda:
    return Verda(api_url=f"{fake.url}/v1", **quick_settings(fake))


def failed(seen: list[Any]) -> list[ev.CandidateFailed]:
    return [e for e in seen if isinstance(e, ev.CandidateFailed)]


@pytest.fixture
def verda_world(fake_verda: FakeVerda) -> Iterator[InstanceWorld]:
    yield from emulate_verda(fake_verda)


def test_the_first_candidate_out_of_capacity_hands_the_pool_to_the_second_and_says_why(
    fake_do: FakeDigitalOcean, verda_world: InstanceWorld, credentials: None
) -> None:
    fake_do.capacity[("s-1vcpu-1gb", "tor1")] = 0
    seen: list[Any] = []
    with sky.ComputePool(
        provider=[do(fake_do), verda(verda_world.fake)], nodes=2, display="quiet", on_event=seen.append
    ) as pool:
        assert pool.provider_name == "verda"
        results = where() @ pool
        assert {r[1] for r in results} == {2}
    (why,) = failed(seen)
    assert (why.candidate, why.provider, why.region, why.reason) == (0, "digitalocean", "tor1", "capacity")
    assert "no capacity for s-1vcpu-1gb in tor1" in why.message
    final = seen[-1]
    assert isinstance(final, ev.CostFinal) and final.provider == "verda" and final.region.startswith("FIN")
    assert lifecycle_problems(seen, nodes=2, priced=True) == []
    assert do_left(fake_do) == {} and verda_left(verda_world.fake) == {}
    assert all(d.status == "deleted" for d in verda_world.fake.instances.values())


def test_cheapest_runs_on_the_candidate_whose_offers_price_the_pool_lowest(
    fake_verda: FakeVerda, fake_do: FakeDigitalOcean, credentials: None
) -> None:
    # Listed second, DigitalOcean's s-1vcpu-1gb ($0.009/h) undercuts Verda's CPU.4V.16G ($0.035/h).
    for world in emulate_do(fake_do):
        seen: list[Any] = []
        with sky.ComputePool(
            provider=[verda(fake_verda), do(fake_do)], selection="cheapest", display="quiet", on_event=seen.append
        ) as pool:
            assert pool.provider_name == "digitalocean"
            assert (where() >> pool)[1] == 1
        assert failed(seen) == []
        notices = [e.message for e in seen if isinstance(e, ev.Notice) and e.message.startswith("cheapest first")]
        assert notices == ["cheapest first: #2 digitalocean (tor1) $0.00893/h, #1 verda $0.035/h"]
        assert fake_verda.count(*VERDA_DEPLOY) == 0  # the dearer candidate was never tried
        assert do_left(world.fake) == {}


def test_cheapest_follows_the_live_offers_not_the_order_given(
    fake_do: FakeDigitalOcean, verda_world: InstanceWorld, credentials: None
) -> None:
    for size in fake_do.sizes:  # DigitalOcean gets dear: now Verda is the cheapest
        size["price_hourly"] = float(size["price_hourly"]) * 100
        size["price_monthly"] = float(size["price_monthly"]) * 100
    with sky.ComputePool(
        provider=[do(fake_do), verda(verda_world.fake)], selection="cheapest", display="quiet"
    ) as pool:
        assert pool.provider_name == "verda"
    assert fake_do.count(*DO_CREATE) == 0


def test_a_candidate_above_max_hourly_cost_is_passed_over_before_anything_is_made(
    fake_do: FakeDigitalOcean, verda_world: InstanceWorld, credentials: None
) -> None:
    seen: list[Any] = []
    candidates = [
        sky.Spec(provider=verda(verda_world.fake), accelerator="H100", max_hourly_cost=4.0),  # 2 x $2.19/h
        sky.Spec(provider=do(fake_do), max_hourly_cost=4.0),
    ]
    for _ in emulate_do(fake_do):
        with sky.ComputePool(provider=candidates, nodes=2, display="quiet", on_event=seen.append) as pool:
            assert pool.provider_name == "digitalocean"
    (why,) = failed(seen)
    assert (why.candidate, why.provider, why.reason) == (0, "verda", "price cap")
    assert "1H100.80S.30V in FIN-01 costs $4.38/h for the pool, above max_hourly_cost=$4/h" in why.message
    assert verda_world.fake.count(*VERDA_DEPLOY) == 0 and verda_left(verda_world.fake) == {}


def test_a_single_candidate_above_its_cap_fails_with_the_price_and_makes_nothing(
    fake_do: FakeDigitalOcean, credentials: None
) -> None:
    with pytest.raises(PriceCapError, match=r"s-1vcpu-1gb in tor1 costs \$0\.0\d+/h .*max_hourly_cost=\$0\.01/h"):
        with sky.ComputePool(provider=do(fake_do), nodes=3, max_hourly_cost=0.01, display="quiet"):
            pass
    assert fake_do.count(*DO_CREATE) == 0 and do_left(fake_do) == {}


def test_a_bad_credential_stops_the_pool_without_trying_the_next_candidate(
    fake_do: FakeDigitalOcean, fake_verda: FakeVerda, credentials: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DIGITALOCEAN_TOKEN", "dop_v1_" + "0" * 64)  # well formed, refused by the API
    seen: list[Any] = []
    with pytest.raises(ProvisioningError, match=r"HTTP 401") as raised:
        with sky.ComputePool(provider=[do(fake_do), verda(fake_verda)], display="quiet", on_event=seen.append):
            pass
    assert not isinstance(raised.value, UnavailableError | NoCandidateError)
    assert failed(seen) == []
    assert fake_verda.count(*VERDA_DEPLOY) == 0 and fake_verda.count("POST", "/v1/oauth2/token") == 0
    # the refused token is the point of this test: the fake recorded it, and nothing else
    assert fake_do.violations and all("without the right bearer token" in v for v in fake_do.violations)
    fake_do.violations.clear()


def test_when_every_candidate_fails_one_error_names_each_and_nothing_is_left_on_any(
    fake_do: FakeDigitalOcean, fake_verda: FakeVerda, credentials: None
) -> None:
    fake_do.capacity[("s-1vcpu-1gb", "tor1")] = 0
    fake_do.capacity[("s-1vcpu-1gb", "nyc1")] = 0
    fake_verda.no_capacity("CPU.4V.16G")
    seen: list[Any] = []
    candidates = [do(fake_do), do(fake_do, region="nyc1"), verda(fake_verda)]
    with pytest.raises(NoCandidateError) as raised:
        with sky.ComputePool(provider=candidates, display="quiet", on_event=seen.append):
            pass
    message = str(raised.value)
    assert "#1 digitalocean (tor1): capacity:" in message
    assert "#2 digitalocean (nyc1): capacity:" in message
    assert "#3 verda: capacity: Verda has no on-demand capacity for CPU.4V.16G" in message
    assert [f[0] for f in raised.value.failures] == ["#1 digitalocean (tor1)", "#2 digitalocean (nyc1)", "#3 verda"]
    assert [(e.candidate, e.reason) for e in failed(seen)] == [(0, "capacity"), (1, "capacity"), (2, "capacity")]
    assert do_left(fake_do) == {} and verda_left(fake_verda) == {}


class WatchedVerda(FakeVerda):
    """Verda's fake that, at its first deploy call, runs ``on_first_deploy``: what another
    cloud still had then."""

    def __init__(self) -> None:
        super().__init__()
        self.on_first_deploy: Callable[[], None] = lambda: None
        self._deployed = False

    def route(self, request: Request) -> Response:
        if (request.method, request.path) == VERDA_DEPLOY and not self._deployed:
            self._deployed = True
            self.on_first_deploy()
        return super().route(request)


def test_a_partial_allocation_is_removed_before_the_next_candidate_starts(
    fake_do: FakeDigitalOcean, credentials: None
) -> None:
    fake_do.capacity[("s-1vcpu-1gb", "tor1")] = 2  # node 2 of 3 is refused
    left_on_do_then: list[dict[str, list[str]]] = []
    for fake_verda in serve(WatchedVerda, "Verda"):
        fake_verda.on_first_deploy = lambda: left_on_do_then.append(do_left(fake_do))
        for world in emulate_verda(fake_verda):
            seen: list[Any] = []
            with sky.ComputePool(
                provider=[do(fake_do), verda(fake_verda)], nodes=3, display="quiet", on_event=seen.append
            ) as pool:
                assert pool.provider_name == "verda" and len(pool.nodes) == 3
            (why,) = failed(seen)
            assert why.reason == "capacity" and "2 of 3 droplets had been created; they were deleted" in why.message
            assert verda_left(world.fake) == {}
    assert fake_do.count(*DO_CREATE) == 3 and len(fake_do.droplets) == 2
    assert left_on_do_then == [{}]  # droplets, firewall, key and tag were gone before Verda's first deploy
    assert all(d.status == "deleted" for d in fake_do.droplets.values())


def test_a_launch_that_times_out_is_removed_and_the_next_candidate_runs_the_pool(
    verda_world: InstanceWorld, credentials: None
) -> None:
    for slow_do in serve(lambda: FakeDigitalOcean(boot_delay=30.0), "DigitalOcean"):
        seen: list[Any] = []
        late = DigitalOcean(region="tor1", api_url=slow_do.url, **{**quick_settings(slow_do), "provision_timeout": 1.0})
        with sky.ComputePool(provider=[late, verda(verda_world.fake)], display="quiet", on_event=seen.append) as pool:
            assert pool.provider_name == "verda"
        (why,) = failed(seen)
        assert why.reason == "launch timeout" and "not active within provision_timeout=1 s" in why.message
        assert do_left(slow_do) == {} and all(d.status == "deleted" for d in slow_do.droplets.values())


def test_offers_lists_both_fake_clouds_in_one_table_by_the_pools_price(
    fake_do: FakeDigitalOcean, fake_verda: FakeVerda, credentials: None
) -> None:
    table = sky.offers("H100", nodes=2, providers=[do(fake_do), verda(fake_verda)])
    rows = [(o.provider, o.instance, o.pool_hourly(False, 2)) for o in table]
    assert rows[:2] == [
        ("verda", "1H100.80S.30V", pytest.approx(4.38)),
        ("digitalocean", "gpu-h100x1-80gb", pytest.approx(6.78)),
    ]
    prices = [p for _, _, p in rows]
    assert prices == sorted(prices) and {p for p, _, _ in rows} == {"verda", "digitalocean"}
    assert table.skipped == ()
    on_spot = sky.offers("H100", nodes=2, spot=True, providers=[do(fake_do), verda(fake_verda)])
    assert {o.provider for o in on_spot} == {"verda"}  # DigitalOcean sells no spot


def test_a_region_that_does_not_offer_the_machine_hands_the_pool_to_the_next_region(
    fake_do: FakeDigitalOcean, credentials: None
) -> None:
    seen: list[Any] = []
    for world in emulate_do(fake_do):
        candidates = [sky.Spec(provider=do(fake_do, region="nyc1"), accelerator="H100"), do(fake_do, region="tor1")]
        with sky.ComputePool(provider=candidates, display="quiet", on_event=seen.append) as pool:
            assert pool.provider_name == "digitalocean" and pool.spec.provider.region == "tor1"
        assert do_left(world.fake) == {}
    (why,) = failed(seen)
    assert (why.candidate, why.region, why.reason) == (0, "nyc1", "no offer")
    assert "gpu-h100x1-80gb, the smallest size that fits, is not offered in nyc1" in why.message
    final = seen[-1]
    assert isinstance(final, ev.CostFinal) and (final.provider, final.region) == ("digitalocean", "tor1")
