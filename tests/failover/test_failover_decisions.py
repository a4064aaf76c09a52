"""The failover's pure decisions: candidates, their order, prices, caps, and which errors
move a pool on to the next candidate."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

import skyward as sky
from skyward import pricing
from skyward.api import failover
from skyward.api.candidate_prices import best_price
from skyward.api.spec import PoolSpec
from skyward.errors import (
    CapacityError,
    ConfigurationError,
    LaunchTimeoutError,
    NoOfferError,
    PriceCapError,
    ProvisioningError,
    QuotaError,
    UnavailableError,
)
from skyward.image import Image
from skyward.offer_table import Offer
from skyward.spot import Market

prices = st.lists(st.one_of(st.none(), st.floats(min_value=0, max_value=1e4, allow_nan=False)), max_size=8)


@given(prices)
def test_cheapest_first_is_a_permutation_with_priced_candidates_first_in_price_order(given: list[float | None]) -> None:
    order = failover.cheapest_first(given)
    assert sorted(order) == list(range(len(given)))
    ranked = [given[i] for i in order]
    priced = [p for p in ranked if p is not None]
    assert ranked[: len(priced)] == priced  # every unknown price after every known one
    assert priced == sorted(priced)


@given(prices)
def test_equal_prices_keep_the_order_the_user_gave(given: list[float | None]) -> None:
    order = failover.cheapest_first(given)
    for a, b in itertools.pairwise(order):
        if given[a] == given[b]:
            assert a < b


@given(prices)
def test_first_tries_the_candidates_in_the_order_given(given: list[float | None]) -> None:
    assert failover.order("first", given) == list(range(len(given)))


@given(
    st.lists(st.sampled_from(list(Market)), min_size=1, max_size=16),
    st.floats(min_value=0.001, max_value=100),
    st.one_of(st.none(), st.floats(min_value=0.0, max_value=100)),
)
def test_the_pool_price_counts_each_node_on_its_market(
    markets: list[Market], on_demand: float, spot: float | None
) -> None:
    total = pricing.pool_hourly(markets, on_demand, spot)
    spots = sum(m is Market.SPOT for m in markets)
    expected = (len(markets) - spots) * on_demand + spots * (on_demand if spot is None else spot)
    assert total == pytest.approx(expected)


@given(st.floats(min_value=0.01, max_value=1000), st.floats(min_value=0.0, max_value=2000))
def test_the_price_cap_refuses_exactly_what_costs_more(cap: float, hourly: float) -> None:
    if hourly > cap:
        with pytest.raises(PriceCapError, match="above max_hourly_cost"):
            pricing.check_price_cap(cap, hourly, "m")
    else:
        pricing.check_price_cap(cap, hourly, "m")
    pricing.check_price_cap(None, hourly, "m")  # no cap: anything goes


@pytest.mark.parametrize("error", [CapacityError("x"), QuotaError("x"), NoOfferError("x"), PriceCapError("x"),
                                   LaunchTimeoutError("x")])  # fmt: skip
def test_what_another_candidate_can_fix_moves_the_pool_on(error: UnavailableError) -> None:
    assert failover.moves_on(error) is error
    assert isinstance(error, ProvisioningError)  # one candidate alone raises it as before


@pytest.mark.parametrize(
    "error", [ConfigurationError("bad token"), ProvisioningError("bootstrap failed"), RuntimeError("bug")]
)
def test_bad_configuration_credentials_and_other_failures_stop_at_once(error: Exception) -> None:
    assert failover.moves_on(error) is None


def test_each_kind_says_its_reason() -> None:
    reasons = [e.reason for e in (CapacityError, QuotaError, NoOfferError, PriceCapError, LaunchTimeoutError)]
    assert reasons == ["capacity", "quota", "no offer", "price cap", "launch timeout"]


def test_candidates_take_the_pools_values_where_a_spec_leaves_them_unset() -> None:
    local = sky.Local()
    specs = failover.candidates_from(
        [local, sky.Spec(provider=local, accelerator="A100", spot="always", max_hourly_cost=3.0)],
        accelerator="T4", spot=None, machine=None, max_hourly_cost=9.0,
    )  # fmt: skip
    assert specs[0] == sky.Spec(provider=local, accelerator="T4", max_hourly_cost=9.0)
    assert specs[1] == sky.Spec(provider=local, accelerator="A100", spot="always", max_hourly_cost=3.0)


def test_one_provider_is_one_candidate() -> None:
    local = sky.Local()
    assert failover.candidates_from(local, accelerator=None, spot=None, machine=None, max_hourly_cost=None) == (
        sky.Spec(provider=local),
    )


@pytest.mark.parametrize(
    ("provider", "message"),
    [
        (lambda: [], r"provider=\[\]\): give at least one provider"),
        (lambda: [sky.Spec(provider=[sky.Local()])], r"must be one provider configuration"),
        (lambda: [sky.Spec(provider=1)], r"sky.Spec\(provider=1\): unknown provider 1"),
        (lambda: [sky.Spec(provider=sky.Local(), max_hourly_cost=-1)], r"sky.Spec\(max_hourly_cost=-1\)"),
    ],
)
def test_bad_candidates_are_refused_before_anything_is_made(provider: Callable[[], object], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        sky.ComputePool(provider=provider(), display="quiet")


@pytest.mark.parametrize("selection", ["cheap", "", None, 1])
def test_an_unknown_selection_is_refused_naming_the_choices(selection: object) -> None:
    with pytest.raises(ConfigurationError, match=r"selection=.*one of 'first', 'cheapest'"):
        sky.ComputePool(provider=[sky.Local(), sky.Local()], selection=selection, display="quiet")  # type: ignore[arg-type]


@pytest.mark.parametrize("cap", [0, -1.0, float("inf"), float("nan"), "5", True])
def test_a_bad_price_cap_is_refused(cap: object) -> None:
    with pytest.raises(ConfigurationError, match=r"max_hourly_cost=.*positive number of USD per hour"):
        sky.ComputePool(max_hourly_cost=cap, display="quiet")  # type: ignore[arg-type]


def test_every_candidate_is_validated_at_construction() -> None:
    with pytest.raises(ConfigurationError, match="spot"):
        sky.ComputePool(provider=[sky.Local(), sky.Spec(provider=sky.Local(), spot="always")], display="quiet")


def test_the_error_of_a_pool_whose_candidates_all_failed_names_each_in_order() -> None:
    error = failover.all_failed([("#1 aws (us-east-1)", CapacityError("none left")), ("#2 verda", QuotaError("limit"))])
    assert "#1 aws (us-east-1): capacity: none left; #2 verda: quota: limit" in str(error)
    assert [name for name, _ in error.failures] == ["#1 aws (us-east-1)", "#2 verda"]


def _offer(instance: str, on_demand: float | None, spot: float | None, vcpus: int = 4, memory: float = 16.0) -> Offer:
    return Offer("p", "r", instance, None, 0, vcpus, memory, on_demand, spot)


def _spec(**changes: object) -> PoolSpec:
    return PoolSpec(provider=sky.Local(), image=Image(), **changes)  # type: ignore[arg-type]


def test_the_best_price_is_the_cheapest_fitting_machine_for_the_whole_pool() -> None:
    offers = [_offer("big", 2.0, 0.5, vcpus=16), _offer("small", 1.0, 0.9, vcpus=2)]
    on_demand, spot = [Market.ON_DEMAND] * 3, [Market.SPOT] * 3
    assert best_price(offers, _spec(nodes=3), on_demand) == pytest.approx(3.0)
    assert best_price(offers, _spec(nodes=3), spot) == pytest.approx(1.5)
    assert best_price(offers, _spec(nodes=3, cpu=8), on_demand) == pytest.approx(6.0)
    assert best_price(offers, _spec(nodes=3, machine="small"), spot) == pytest.approx(2.7)
    assert best_price([_offer("od-only", 1.0, None)], _spec(), [Market.SPOT]) is None  # spot only: no spot price
    assert best_price([], _spec(), on_demand) is None


def test_the_ranking_reads_in_the_order_chosen_with_unknown_prices_marked() -> None:
    assert (
        failover.ranking(["#2 verda", "#1 aws (us-east-1)"], [4.38, None]) == "#2 verda $4.38/h, #1 aws (us-east-1) ?"
    )


def test_a_provider_that_sells_nothing_fitting_has_no_offer_and_the_pool_moves_on() -> None:
    from skyward.instances import NoMatchingInstanceError

    reason = failover.moves_on(NoMatchingInstanceError("no instance type has an H200"))
    assert isinstance(reason, NoOfferError) and reason.reason == "no offer" and "H200" in str(reason)
