"""Checked by mypy: the pool's public seams are typed (no ``Any`` to hide a mistake)."""

from __future__ import annotations

from collections.abc import Callable
from typing import assert_type

import skyward as sky
from skyward.events import LogLine, Metrics, SkywardEvent
from skyward_sklearn.pools import JoblibPool, ScikitLearnPool


def seen(event: SkywardEvent) -> None:
    print(event)


def check_construction() -> None:
    sky.ComputePool(provider=sky.Local(), accelerator="A100", spot="if-available", on_event=seen)
    sky.ComputePool(provider=[sky.Spec(provider=sky.Local(), spot=sky.Spot.Always(retries=1)), sky.Local()])
    sky.ComputePool(spot=0.5, accelerator=None, volume=[])
    JoblibPool(sky.Local(), nodes=2, joblib_version=None, display="quiet")
    ScikitLearnPool(nodes=1, on_event=print, sklearn_version="1.5.0")


def check_handlers(pool: sky.ComputePool) -> None:
    def cpu(event: Metrics) -> float:
        return event.cpu

    remove = pool.on(Metrics, cpu)
    assert_type(remove, Callable[[], None])
    pool.on((Metrics, LogLine), seen)
    pool.on(Metrics | LogLine, seen)
    assert_type(pool.nodes[0].instance_id, str)
    assert_type(pool.spec.nodes, int)
    for each in sky.MultiPool(pool):
        assert_type(each, sky.ComputePool)
