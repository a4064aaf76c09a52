"""bench/cloudstart.py's arithmetic: phases from the pool's events, medians, the ratio."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout, for `bench`

from bench.cloudstart import Start, median_start, phases, ratios, step_seconds
from skyward.events import (
    BootstrapCompleted,
    BootstrapProgress,
    InstanceLaunching,
    InstanceProvisioned,
)


def _provisioned(instance_id: str, node: int) -> InstanceProvisioned:
    return InstanceProvisioned(
        instance_id=instance_id, node=node, spot=False, provider="aws", ip="127.0.0.2",
        instance_type="t3", price_on_demand=None, price_spot=None,
    )  # fmt: skip


def test_phases_run_from_the_first_launch_to_the_last_node_of_each_kind() -> None:
    events: list[tuple[float, object]] = [
        (10.5, InstanceLaunching(count=2, instance_type="t3", provider="aws")),
        (11.0, _provisioned("i-1", 0)),
        (11.4, _provisioned("i-2", 1)),
        (12.0, BootstrapProgress(instance_id="i-2", step="server")),
        (13.0, BootstrapCompleted(instance_id="i-1")),
        (14.4, BootstrapCompleted(instance_id="i-2")),
    ]
    records = ["start 100.0\nttl 100.5\ndeps 101.0\nserver 102.0\n", "start 7\nttl 7\ndeps 7.5\nserver 10.5\n"]
    start = phases("aws", 2, events, t0=10.0, t_open=14.5, t_result=14.75, records=records)
    assert (start.prepare, start.provision, start.bootstrap) == (0.5, 0.9000000000000004, 3.0)
    assert start.first_result == 0.25 and start.total == 4.75
    assert start.api == start.prepare + start.provision
    assert start.steps == {"ttl": 0.5, "deps": 2.0}  # medians over the nodes; the last step has no end


def test_a_step_lasts_until_the_next_one_begins_and_a_repeated_step_adds_up() -> None:
    record = "start 1.0\nttl 1.5\nuv 2.0\nuv 4.0\ndeps 5.0\nserver 9.0\n"
    assert step_seconds(record) == {"ttl": 0.5, "uv": 3.0, "deps": 4.0}
    assert step_seconds("") == {}


def test_the_ratio_compares_the_largest_pool_with_one_node_per_provider() -> None:
    def start(provider: str, nodes: int, api: float) -> Start:
        return Start(provider, nodes, total=api * 2, prepare=api / 2, provision=api / 2, bootstrap=0, first_result=0)

    got = ratios([start("aws", 1, 1.0), start("aws", 16, 1.4), start("do", 1, 0.5), start("do", 4, 1.0)])
    assert got == {"aws": {"nodes": 16, "api": 1.4, "total": 1.4}, "do": {"nodes": 4, "api": 2.0, "total": 2.0}}
    assert ratios([start("aws", 1, 1.0)]) == {}  # one size: nothing to compare


def test_the_median_start_takes_each_phase_on_its_own() -> None:
    runs = [
        Start("do", 4, total=3, prepare=1, provision=5, bootstrap=1, first_result=1, steps={"deps": 1.0}),
        Start("do", 4, total=1, prepare=2, provision=1, bootstrap=9, first_result=2, steps={"deps": 3.0}),
        Start("do", 4, total=2, prepare=3, provision=2, bootstrap=2, first_result=3, steps={"deps": 2.0}),
    ]
    median = median_start(runs)
    assert (median.total, median.prepare, median.provision, median.bootstrap) == (2, 2, 2, 2)
    assert median.steps == {"deps": 2.0}
