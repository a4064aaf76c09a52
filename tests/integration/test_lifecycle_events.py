"""Issue 4 on a real pool: the event sequence, callbacks, metrics, display and MultiPool."""

from __future__ import annotations

import io
import threading
import time
from typing import Any

import pytest
from lifecycle_support import lifecycle_problems
from rich.console import Console

import skyward as sky
from skyward import events as ev
from skyward.display import create_display


@sky.compute
def hello(x: int) -> int:
    print(f"hello {x}")
    return x


def test_a_pool_emits_its_whole_lifecycle_in_order() -> None:
    seen: list[Any] = []
    with sky.ComputePool(nodes=2, display="quiet", on_event=seen.append) as pool:
        hello(1) >> pool
        # The log line may arrive after the result: wait for it, up to a deadline, rather
        # than for a fixed nap that a loaded machine can overrun.
        deadline = time.monotonic() + 10
        while not any(isinstance(e, ev.LogLine) for e in seen) and time.monotonic() < deadline:
            time.sleep(0.02)
    assert lifecycle_problems(seen, nodes=2) == []
    kinds = [type(e).__name__ for e in seen]
    assert kinds.index("PoolStarted") < kinds.index("CostUpdate") < kinds.index("PoolStopping")
    steps = [e.step for e in seen if isinstance(e, ev.BootstrapProgress)]
    assert {"apt", "deps", "server"} <= set(steps)
    logs = [e for e in seen if isinstance(e, ev.LogLine)]
    assert [e.line for e in logs] == ["hello 1"] and logs[0].instance_id.startswith("local-")
    final = seen[-1]
    assert final.total_cost == 0.0 and final.ondemand_count == 2 and final.spot_count == 0
    progress = [e for e in seen if isinstance(e, ev.TaskProgress)]
    assert progress and progress[-1].done == 1


def test_pool_on_use_callback_and_a_raising_callback(capfd: pytest.CaptureFixture[str]) -> None:
    metrics: list[ev.Metrics] = []
    scoped: list[Any] = []

    def broken(event: Any) -> None:
        raise RuntimeError("a user's callback is broken")

    with sky.use_callback(scoped.append):
        pool = sky.ComputePool(display="quiet", on_event=broken)
    with pool:
        pool.on(ev.Metrics, metrics.append)
        assert (hello(2) >> pool) == 2  # the broken callback never breaks the pool
        deadline = time.monotonic() + 6
        while not metrics and time.monotonic() < deadline:
            time.sleep(0.1)
    assert metrics and 0 <= metrics[0].cpu_percent <= 100 and metrics[0].memory_total_mb > 0
    assert metrics[0].gpu_utilization is None  # no NVIDIA GPU here
    assert any(isinstance(e, ev.PoolStarted) for e in scoped)  # captured at construction
    # display="quiet" prints nothing, but a user's broken callback is still reported once,
    # on stderr, with its traceback.
    captured = capfd.readouterr()
    assert captured.err.count("event callback failed") == 1
    assert "RuntimeError: a user's callback is broken" in captured.err and "event_type=InfraCreating" in captured.err
    assert "event callback failed" not in captured.out


def test_collect_metrics_false_stops_metrics() -> None:
    metrics: list[Any] = []
    with sky.ComputePool(display="quiet", collect_metrics=False) as pool:
        pool.on(ev.Metrics, metrics.append)
        time.sleep(2.5)
    assert metrics == []


def test_spinner_view_shows_nodes_tasks_and_cost() -> None:
    out = io.StringIO()
    console = Console(file=out, record=True, width=100, force_terminal=True)
    display = create_display("spinner", console=console)
    snapshots: list[str] = []
    with sky.ComputePool(nodes=2, display="quiet", on_event=display) as pool:
        sky.gather(*[hello(i) for i in range(4)]) >> pool
        deadline = time.monotonic() + 10  # events arrive on their own thread: poll the view
        while not snapshots or ("4 done" not in snapshots[-1] and time.monotonic() < deadline):
            time.sleep(0.02)
            snapshot = Console(record=True, width=100, file=io.StringIO())
            snapshot.print(display.renderable())  # type: ignore[attr-defined]
            snapshots.append(snapshot.export_text())
    display.close()
    text = snapshots[-1]
    rows = [line for line in text.splitlines() if line.split()[:1] in (["0"], ["1"])]
    assert len(rows) == 2 and all("local-" in row for row in rows)  # one row per node
    assert "4 done · 0 failed · 0 running · 4 submitted" in text
    assert "$0.00 so far" in text and "2 on-demand" in text


def test_multipool_starts_in_parallel() -> None:
    # Each Delayed pool's driver sleeps 2 s while it chooses its offer and records when that
    # sleep began and ended: the three windows overlap only if the launches ran at once,
    # however slow the machine (no wall-clock bound to tune, no event-delivery lag).
    pools = [sky.ComputePool(provider=sky.Delayed(seconds=2.0), display="quiet") for _ in range(3)]
    with sky.MultiPool(*pools) as (a, b, c):
        assert (hello(1) >> a, hello(2) >> b, hello(3) >> c) == (1, 2, 3)
        windows = [pool._driver.delay_window for pool in pools]  # type: ignore[attr-defined]
    assert all(window is not None for window in windows)
    assert max(start for start, _ in windows) < min(end for _, end in windows)  # all three at once
    assert not (a.is_active or b.is_active or c.is_active)


def test_multipool_failure_stops_the_others_and_names_the_culprit() -> None:
    good = sky.ComputePool(provider=sky.Delayed(seconds=0.2), display="quiet")
    bad = sky.ComputePool(provider=sky.Delayed(seconds=0.5, fail=True), display="quiet")
    with pytest.raises(sky.ProvisioningError, match=r"(?s)1 of 2 pools failed.*pool 1 \(delayed.*told to fail"):
        with sky.MultiPool(good, bad):
            pass
    assert not good.is_active and good._driver.api is None  # type: ignore[attr-defined]  # its instances and "cloud" removed


def test_multipool_refuses_bad_input() -> None:
    threads = set(threading.enumerate())
    with pytest.raises(sky.ConfigurationError, match="at least one"):
        sky.MultiPool()
    with pytest.raises(sky.ConfigurationError, match="not a ComputePool"):
        sky.MultiPool("pool")  # type: ignore[arg-type]
    assert set(threading.enumerate()) == threads  # refusing started nothing
