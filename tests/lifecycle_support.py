"""The lifecycle every provider must emit (issue 4), checked the same way for Local and
for each cloud provider's end-to-end test.

A module name of its own: tests/ is on the path for every test folder.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from skyward import events as ev

# Events that come when something happens rather than once per phase; the rest of the
# union, which lists the events in the order of a pool's life, are the phases.
OCCASIONAL = (
    ev.Metrics, ev.LogLine, ev.TaskProgress, ev.CostUpdate, ev.Error, ev.InstanceInterrupted, ev.Notice,
    ev.CandidateFailed, ev.NodeAdded, ev.NodeRemoved, ev.PoolResized,
)  # fmt: skip
ORDER = tuple(t.__name__ for t in ev.EVENT_TYPES if t not in OCCASIONAL)


def lifecycle_problems(events: Sequence[Any], nodes: int, *, priced: bool = False) -> list[str]:
    """What is wrong with ``events`` as the whole life of a pool of ``nodes`` nodes
    (empty when nothing is): each phase present and in order, one InstanceProvisioned,
    BootstrapCompleted and InstanceStopping per node, CostFinal last and counting every
    node once and naming the provider and region; with ``priced``, CostFinal charged a
    non-zero hourly rate (a cloud)."""
    kinds = [type(e).__name__ for e in events]
    problems = [f"no {kind}" for kind in ORDER if kind not in kinds]
    if problems:
        return [*problems, f"seen: {kinds}"]
    firsts = [kinds.index(kind) for kind in ORDER]
    if firsts != sorted(firsts):
        problems.append(f"phases out of order: {kinds}")
    for kind in ("InstanceProvisioned", "BootstrapCompleted", "InstanceStopping"):
        if kinds.count(kind) != nodes:
            problems.append(f"{kinds.count(kind)} {kind} for {nodes} nodes")
    last_setup = max(i for i, k in enumerate(kinds) if k == "BootstrapCompleted")
    if last_setup > kinds.index("PoolStarted"):
        problems.append("PoolStarted before every node finished its bootstrap")
    if kinds[-1] != "CostFinal":
        problems.append(f"{kinds[-1]} after CostFinal")
    final = events[-1]
    if isinstance(final, ev.CostFinal) and final.spot_count + final.ondemand_count != nodes:
        problems.append(f"CostFinal counts {final.spot_count} spot + {final.ondemand_count} on-demand for {nodes}")
    if isinstance(final, ev.CostFinal) and not (final.provider and final.region):
        problems.append(f"CostFinal does not name the provider and region the pool ran on: {final}")
    if isinstance(final, ev.CostFinal) and priced and not (final.hourly_rate > 0 and final.total_cost > 0):
        problems.append(f"a priced provider's CostFinal charged nothing: {final}")
    return problems
