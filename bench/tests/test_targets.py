from __future__ import annotations

import importlib

from bench.model import Measurement, index
from bench.targets import TARGETS, Target, evaluate

LATENCY = Target("t", ("latency", "skyward", "median_us"), "<=", 1.5, ("latency", "floor", "median_us"))
RATE = Target("r", ("throughput", "skyward", "tasks_per_s"), ">=", 1.5, ("throughput", "loky", "tasks_per_s"))
BOUND = Target("m", ("memory", "skyward", "bytes_per_task"), "<=", 100.0)


def m(measure: str, system: str, metric: str, value: float) -> Measurement:
    return Measurement(measure, system, metric, value, "u")


def test_relative_target_passes_and_misses_on_the_ratio() -> None:
    ok = index([m("latency", "skyward", "median_us", 290), m("latency", "floor", "median_us", 200)])
    out = evaluate(LATENCY, ok)
    assert out.verdict == "PASS" and out.ratio == 1.45
    slow = index([m("latency", "skyward", "median_us", 310), m("latency", "floor", "median_us", 200)])
    assert evaluate(LATENCY, slow).verdict == "MISS"


def test_higher_is_better_targets() -> None:
    fast = index([m("throughput", "skyward", "tasks_per_s", 3000), m("throughput", "loky", "tasks_per_s", 1000)])
    assert evaluate(RATE, fast).verdict == "PASS"
    slow = index([m("throughput", "skyward", "tasks_per_s", 1400), m("throughput", "loky", "tasks_per_s", 1000)])
    assert evaluate(RATE, slow).verdict == "MISS"


def test_absolute_bound() -> None:
    assert evaluate(BOUND, index([m("memory", "skyward", "bytes_per_task", 12.0)])).verdict == "PASS"
    assert evaluate(BOUND, index([m("memory", "skyward", "bytes_per_task", 512.0)])).verdict == "MISS"


def test_missing_numbers_are_not_run_never_pass() -> None:
    assert evaluate(LATENCY, {}).verdict == "N/A"
    only_subject = index([m("latency", "skyward", "median_us", 1)])
    outcome = evaluate(LATENCY, only_subject)
    assert outcome.verdict == "N/A" and "baseline not run" in outcome.note


def test_zero_reference_never_passes_a_ratio() -> None:
    data = index([m("throughput", "skyward", "tasks_per_s", 0), m("throughput", "loky", "tasks_per_s", 0)])
    assert evaluate(RATE, data).verdict == "MISS"


def test_measuring_twice_is_a_bug() -> None:
    try:
        index([m("a", "b", "c", 1), m("a", "b", "c", 2)])
    except ValueError as exc:
        assert "measured twice" in str(exc)
    else:
        raise AssertionError("a duplicate measurement was accepted")


def test_every_target_names_a_measure_that_exists() -> None:
    for target in TARGETS:
        for key in (target.subject, target.reference):
            if key is None:
                continue
            module = importlib.import_module(f"bench.measures.{key[0]}")
            assert key[0] == module.MEASURE
