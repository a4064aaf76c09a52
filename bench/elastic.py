#!/usr/bin/env python3
"""Elastic and self-healing pools: three measures, each a ratio of two numbers taken in
the same run on the same machine (never asserted: a slow machine fails nothing).

``python bench/elastic.py --quick`` (Local only; CI) or ``--full`` (Local, then the
DigitalOcean and Verda fakes with emulated instances; rewrites the results block of
bench/README.md unless ``--no-readme``).

- ``capacity``: a pool of ``nodes=(1, N)`` is open and idle; a burst of work that needs N
  nodes is queued; timed until the N-th node has joined (its ``NodeAdded``). Against the
  start of a ``nodes=N`` pool from nothing (``ComputePool(...)`` to ``open()``
  returning), on the same provider. Target: at most 1.2x.
- ``bursty``: a compressed "day" of bursts and idle gaps (``TRACE``) run on an elastic
  pool (``nodes=sky.Nodes(desired=1, max=N)``) and on a fixed pool sized for
  the peak (``nodes=N``). Node-seconds are what a cloud bills: each instance from its
  ``InstanceProvisioned`` to its ``NodeRemoved`` or ``InstanceStopping``. Targets:
  node-seconds at most 0.5x the fixed pool's, total time at most 1.2x.
- ``lost_node``: ``gather`` of 20,000 trivial tasks on 2 Local nodes, one node's whole
  process group killed (SIGKILL) a third of the way through; every result is checked.
  Against the same gather with no loss, alternating, medians.

The elastic pools use a short ``autoscale_cooldown`` and ``autoscale_idle_timeout``
(``COOLDOWN``, ``IDLE``): the measure is how fast the fleet acts once the policy decided,
not the defaults' patience (30 s, 60 s), which suits cloud nodes that take a minute to boot.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
for _path in (ROOT, TESTS):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

import skyward as sky  # noqa: E402
from skyward.events import InstanceProvisioned, InstanceStopping, NodeAdded, NodeRemoved  # noqa: E402

RESULTS = ROOT / "bench" / "results"
README = ROOT / "bench" / "README.md"
README_START = "<!-- elastic:start -->"
README_END = "<!-- elastic:end -->"
COOLDOWN = 0.5
IDLE = 1.5
CAPACITY_TARGET = 1.2
NODE_SECONDS_TARGET = 0.5
TIME_TARGET = 1.2
TRACE = [(12, 1.0), (0, 12.0), (3, 1.0), (0, 12.0), (12, 1.0), (0, 12.0), (2, 1.0)]
"""The bursty day, compressed: (tasks, seconds each) for a burst, (0, seconds) for an idle
gap. Gaps are long against a node's start and the idle timeout, as a day's are (a
notebook idle between cells, a pipeline between phases); ``--quick`` runs its first half."""


@sky.compute
def hold(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


@sky.compute
def inc(x: int) -> int:
    return x + 1


@dataclass
class Ratio:
    measure: str
    provider: str
    subject: float
    baseline: float
    target: float
    unit: str = "s"

    @property
    def ratio(self) -> float:
        return self.subject / self.baseline if self.baseline else float("inf")

    @property
    def verdict(self) -> str:
        return "PASS" if self.ratio <= self.target else "MISS"


class Ledger:
    """Each instance's billed seconds, from the pool's own events."""

    def __init__(self) -> None:
        self.began: dict[str, float] = {}
        self.ended: dict[str, float] = {}
        self.added: list[float] = []
        self.lock = threading.Lock()

    def __call__(self, event: object) -> None:
        now = time.monotonic()
        with self.lock:
            if isinstance(event, InstanceProvisioned):
                self.began.setdefault(event.instance_id, now)
            elif isinstance(event, NodeRemoved | InstanceStopping):
                self.ended.setdefault(event.instance_id, now)
            if isinstance(event, NodeAdded):
                self.added.append(now)

    def node_seconds(self, until: float) -> float:
        with self.lock:
            return sum(self.ended.get(i, until) - t for i, t in self.began.items())


@contextmanager
def provider_config(name: str) -> Iterator[Any]:
    if name == "local":
        yield sky.Local()
        return
    from bench.cloudstart import cloud

    with cloud(name) as emulated:
        emulated.run_machines()
        yield emulated.config


def capacity(name: str, config: Any, nodes: int) -> Ratio:
    t0 = time.monotonic()
    with sky.ComputePool(provider=config, nodes=nodes, display="quiet", timeout=900):
        started = time.monotonic() - t0
    ledger = Ledger()
    with sky.ComputePool(
        provider=config,
        nodes=(1, nodes),
        autoscale_cooldown=COOLDOWN,
        display="quiet",
        on_event=ledger,
        timeout=900,
    ) as pool:
        # enough work that every node of the ceiling has a task for longer than a boot
        burst = [pool.submit(hold(started * 2 + 2.0)) for _ in range(nodes * pool.spec.workers_per_node)]
        t_burst = time.monotonic()
        while len(ledger.added) < nodes - 1:
            time.sleep(0.01)
        grown = ledger.added[nodes - 2] - t_burst
        pool.abandon(burst)
    return Ratio("capacity", name, grown, started, CAPACITY_TARGET)


def run_trace(pool: sky.ComputePool, trace: list[tuple[int, float]]) -> None:
    for tasks, seconds in trace:
        if tasks:
            sky.gather(*(hold(seconds) for _ in range(tasks))) >> pool
        else:
            time.sleep(seconds)


def bursty(name: str, config: Any, nodes: int, trace: list[tuple[int, float]]) -> tuple[Ratio, Ratio]:
    measured: dict[str, tuple[float, float]] = {}
    for kind, size in (("fixed", nodes), ("elastic", sky.Nodes(desired=1, max=nodes))):
        ledger = Ledger()
        t0 = time.monotonic()
        with sky.ComputePool(
            provider=config,
            nodes=size,
            autoscale_cooldown=COOLDOWN,
            autoscale_idle_timeout=IDLE,
            display="quiet",
            on_event=ledger,
            timeout=900,
        ) as pool:
            run_trace(pool, trace)
        end = time.monotonic()
        measured[kind] = (ledger.node_seconds(end), end - t0)
    (fixed_ns, fixed_t), (elastic_ns, elastic_t) = measured["fixed"], measured["elastic"]
    return (
        Ratio("bursty node-seconds", name, elastic_ns, fixed_ns, NODE_SECONDS_TARGET, unit="node-s"),
        Ratio("bursty time", name, elastic_t, fixed_t, TIME_TARGET),
    )


def _kill_node(pool: sky.ComputePool, node: int) -> None:
    """SIGKILL a Local node's whole process group (agent and workers): a host that died."""
    process = pool._driver._nodes[node].process  # type: ignore[attr-defined]
    os.killpg(process.pid, signal.SIGKILL)


def lost_node(rounds: int, tasks: int) -> Ratio:
    times: dict[bool, list[float]] = {False: [], True: []}
    expected = [i + 1 for i in range(tasks)]
    with sky.ComputePool(provider=sky.Local(), nodes=2, display="quiet") as pool:
        sky.gather(*(inc(i) for i in range(200))) >> pool  # warm: windows measured
        clean = statistics.median(_timed_gather(pool, tasks, expected, None) for _ in range(2))
    for _ in range(rounds):
        for kill in (False, True):
            with sky.ComputePool(provider=sky.Local(), nodes=2, display="quiet") as pool:
                sky.gather(*(inc(i) for i in range(200))) >> pool
                times[kill].append(
                    _timed_gather(pool, tasks, expected, (lambda p=pool: _kill_node(p, 1)) if kill else None, clean / 3)
                )
    return Ratio(
        "lost node, 20,000-task gather" if tasks == 20_000 else f"lost node, {tasks}-task gather",
        "local",
        statistics.median(times[True]),
        statistics.median(times[False]),
        float("inf"),
    )


def _timed_gather(
    pool: sky.ComputePool, tasks: int, expected: list[int], kill: Callable[[], None] | None, after: float = 0.0
) -> float:
    if kill is not None:
        threading.Timer(after, kill).start()
    t0 = time.monotonic()
    results = sky.gather(*(inc(i) for i in range(tasks))) >> pool
    took = time.monotonic() - t0
    if list(results) != expected:
        raise SystemExit("lost_node: the gather's results are wrong")
    return took


def markdown(ratios: list[Ratio], mode: str, command: str) -> str:
    lines = [
        f"Elastic pools ({mode}, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} cores): `{command}`.",
        "",
        "| measure | provider | skyward | baseline | ratio | target | verdict |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    for r in ratios:
        target = "reported" if r.target == float("inf") else f"≤ {r.target}"
        verdict = "-" if r.target == float("inf") else r.verdict
        lines.append(
            f"| {r.measure} | {r.provider} | {r.subject:.2f} {r.unit} | {r.baseline:.2f} {r.unit} | "
            f"{r.ratio:.2f} | {target} | {verdict} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="bench/elastic.py", description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="Local only, one round (CI)")
    mode.add_argument("--full", action="store_true", help="Local and the DigitalOcean/Verda fakes; rewrites README")
    parser.add_argument("--no-readme", action="store_true")
    args = parser.parse_args(argv)
    providers = ["local", "digitalocean", "verda"] if args.full else ["local"]
    if args.full:
        from bench.cloudstart import reexec_isolated

        reexec_isolated([str(Path(__file__).resolve()), *argv])
    ratios: list[Ratio] = []
    for name in providers:
        with provider_config(name) as config:
            nodes = 4 if name == "local" else 3
            ratios.append(capacity(name, config, nodes))
            print(f"{name:13} capacity: {ratios[-1].ratio:.2f}x", file=sys.stderr, flush=True)
            if name == "local":
                ratios.extend(bursty(name, config, nodes, TRACE if args.full else TRACE[:4]))
                print(
                    f"{name:13} bursty: {ratios[-2].ratio:.2f}x node-s, {ratios[-1].ratio:.2f}x time", file=sys.stderr
                )
    ratios.append(lost_node(rounds=3 if args.full else 1, tasks=20_000))
    mode_name = "full" if args.full else "quick"
    command = "python bench/elastic.py " + " ".join(argv)
    text = markdown(ratios, mode_name, command.strip())
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"elastic-{mode_name}.md").write_text(text)
    (RESULTS / f"elastic-{mode_name}.json").write_text(
        json.dumps([{**asdict(r), "ratio": r.ratio} for r in ratios], indent=2)
    )
    print(text)
    if args.full and not args.no_readme:
        readme = README.read_text()
        if README_START in readme:
            head, _, rest = readme.partition(README_START)
            _, _, tail = rest.partition(README_END)
            README.write_text(f"{head}{README_START}\n{text}{README_END}{tail}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
