"""Cost accounting: linear billing, counts, savings against on-demand."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from skyward.cost import (
    CostLedger,
    PricedInstance,
    cost_final,
    cost_update,
    hourly_rate,
)
from skyward.events import CostFinal, CostUpdate, InstanceProvisioned

SPOT = PricedInstance("i-spot", spot=True, hourly_price=0.30, on_demand_price=1.00)
ONDEMAND = PricedInstance("i-od", spot=False, hourly_price=1.00, on_demand_price=1.00)
LOCAL = PricedInstance("local-0", spot=False, hourly_price=0.0, on_demand_price=0.0)


def _provisioned(spot: bool, on_demand: float | None, spot_price: float | None) -> InstanceProvisioned:
    return InstanceProvisioned("i-1", 0, spot, "aws", None, "g5.xlarge", on_demand, spot_price)


def test_one_hour_costs_the_hourly_prices() -> None:
    update = cost_update([SPOT, ONDEMAND], 3600.0)
    assert update.elapsed_seconds == 3600.0
    assert update.accumulated_cost == pytest.approx(1.30)
    assert update.hourly_rate == pytest.approx(1.30)
    assert (update.spot_count, update.ondemand_count) == (1, 1)


def test_final_reports_savings_against_on_demand() -> None:
    final = cost_final([SPOT, ONDEMAND], 1800.0)
    assert final.total_cost == pytest.approx(0.65)
    assert final.total_seconds == 1800.0
    assert final.hourly_rate == pytest.approx(1.30)
    assert (final.spot_count, final.ondemand_count) == (1, 1)
    # on-demand for both would have been 2.00/h * 0.5h = 1.00
    assert final.savings_vs_ondemand == pytest.approx(0.35)


def test_zero_prices_still_produce_events() -> None:
    assert cost_update([LOCAL], 10.0) == CostUpdate(10.0, 0.0, 0.0, 0, 1)
    assert cost_final([LOCAL], 10.0) == CostFinal(0.0, 10.0, 0.0, 0, 1, 0.0)
    assert cost_final([], 10.0) == CostFinal(0.0, 10.0, 0.0, 0, 0, 0.0)


def test_time_zero_costs_nothing() -> None:
    assert cost_update([SPOT], 0.0).accumulated_cost == 0.0


@pytest.mark.parametrize("seconds", [-1.0, -0.001])
def test_negative_time_is_refused(seconds: float) -> None:
    with pytest.raises(ValueError, match="elapsed"):
        cost_update([SPOT], seconds)
    with pytest.raises(ValueError, match="elapsed"):
        cost_final([SPOT], seconds)


@pytest.mark.parametrize("price", [-0.1, math.nan, math.inf])
def test_bad_prices_are_refused(price: float) -> None:
    with pytest.raises(ValueError, match="price"):
        PricedInstance("i-1", spot=False, hourly_price=price, on_demand_price=1.0)


@pytest.mark.parametrize(
    ("spot", "on_demand", "spot_price", "expected"),
    [
        (True, 1.0, 0.3, (0.3, 1.0)),
        (False, 1.0, 0.3, (1.0, 1.0)),
        (True, None, 0.3, (0.3, 0.3)),  # on-demand unknown: no savings claimed
        (True, 1.0, None, (1.0, 1.0)),  # spot price unknown: assume on-demand
        (False, None, None, (0.0, 0.0)),  # Local: nothing known, nothing billed
        (False, 0.0, 0.0, (0.0, 0.0)),
    ],
)
def test_priced_from_provisioned_event(
    spot: bool,
    on_demand: float | None,
    spot_price: float | None,
    expected: tuple[float, float],
) -> None:
    priced = PricedInstance.from_event(_provisioned(spot, on_demand, spot_price))
    assert (priced.hourly_price, priced.on_demand_price) == expected
    assert priced.spot is spot
    assert priced.instance_id == "i-1"


def test_ledger_stops_billing_an_interrupted_instance() -> None:
    ledger = CostLedger().start(SPOT, at=0.0).start(ONDEMAND, at=0.0)
    ledger = ledger.stop("i-spot", at=1800.0)
    update = ledger.update(3600.0)
    assert update.accumulated_cost == pytest.approx(0.15 + 1.00)
    assert update.hourly_rate == pytest.approx(1.00)  # only the running one
    assert (update.spot_count, update.ondemand_count) == (0, 1)
    final = ledger.final(3600.0)
    assert final.total_cost == pytest.approx(1.15)
    assert (final.spot_count, final.ondemand_count) == (1, 1)
    assert final.savings_vs_ondemand == pytest.approx(0.35)


def test_ledger_replacement_node_billed_from_its_start() -> None:
    replacement = PricedInstance("i-new", spot=True, hourly_price=0.30, on_demand_price=1.0)
    ledger = CostLedger().start(SPOT, 0.0).stop("i-spot", 600.0).start(replacement, 900.0)
    assert ledger.update(3600.0).accumulated_cost == pytest.approx(0.30 * (600 + 2700) / 3600)
    assert ledger.running(3600.0) == (replacement,)


def test_ledger_start_twice_and_unknown_stop_are_ignored() -> None:
    ledger = CostLedger().start(SPOT, 0.0)
    assert ledger.start(SPOT, 100.0) is ledger
    assert ledger.stop("nope", 10.0) == ledger
    stopped = ledger.stop("i-spot", 10.0)
    assert stopped.stop("i-spot", 20.0) == stopped  # the first stop wins


prices = st.floats(min_value=0.0, max_value=200.0, allow_nan=False)
seconds = st.floats(min_value=0.0, max_value=30 * 24 * 3600.0, allow_nan=False)


@st.composite
def fleets(draw: st.DrawFn, spot_cheaper: bool = False) -> list[PricedInstance]:
    size = draw(st.integers(min_value=0, max_value=8))
    fleet = []
    for n in range(size):
        on_demand = draw(prices)
        paid = draw(st.floats(min_value=0.0, max_value=on_demand)) if spot_cheaper else on_demand
        fleet.append(PricedInstance(f"i-{n}", draw(st.booleans()), paid, on_demand))
    if not spot_cheaper:
        fleet = [PricedInstance(i.instance_id, i.spot, draw(prices), i.on_demand_price) for i in fleet]
    return fleet


@given(fleets(), seconds, seconds)
def test_cost_is_monotone_in_time(fleet: list[PricedInstance], t1: float, t2: float) -> None:
    early, late = sorted((t1, t2))
    assert cost_update(fleet, early).accumulated_cost <= cost_update(fleet, late).accumulated_cost
    assert cost_final(fleet, early).total_cost <= cost_final(fleet, late).total_cost


@given(fleets(spot_cheaper=True), seconds)
def test_savings_never_negative_when_paid_at_most_on_demand(fleet: list[PricedInstance], t: float) -> None:
    assert cost_final(fleet, t).savings_vs_ondemand >= 0.0


@given(fleets(), seconds)
def test_final_agrees_with_update_and_ledger(fleet: list[PricedInstance], t: float) -> None:
    update, final = cost_update(fleet, t), cost_final(fleet, t)
    assert final.total_cost == update.accumulated_cost
    assert final.hourly_rate == update.hourly_rate == hourly_rate(fleet)
    assert final.spot_count + final.ondemand_count == len(fleet)
    ledger = CostLedger()
    for instance in fleet:
        ledger = ledger.start(instance, 0.0)
    assert ledger.final(t).total_cost == pytest.approx(final.total_cost)
    assert ledger.final(t).savings_vs_ondemand == pytest.approx(final.savings_vs_ondemand)


@given(fleets(), seconds, seconds, seconds)
def test_ledger_cost_is_monotone_in_time(fleet: list[PricedInstance], stop_at: float, t1: float, t2: float) -> None:
    ledger = CostLedger()
    for instance in fleet:
        ledger = ledger.start(instance, 0.0)
    if fleet:
        ledger = ledger.stop(fleet[0].instance_id, stop_at)
    early, late = sorted((t1, t2))
    assert ledger.update(early).accumulated_cost <= ledger.update(late).accumulated_cost
