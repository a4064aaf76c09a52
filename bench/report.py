"""The results as Markdown tables and a PNG plot (rendering only: no measuring here)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.machine import summary
from bench.model import Measurement
from bench.targets import Outcome


@dataclass(frozen=True, slots=True)
class Column:
    metric: str
    title: str
    digits: int = 0


@dataclass(frozen=True, slots=True)
class Section:
    measure: str
    title: str
    columns: tuple[Column, ...]
    relative_to: str | None = None  # adds "metric vs <system>" for the first column


SECTIONS: tuple[Section, ...] = (
    Section("latency", "Warm round trip, `inc(i) >> pool`, one call at a time",
            (Column("median_us", "median (us)"), Column("p99_us", "p99 (us)")), "floor"),
    Section("throughput", "Gather of trivial tasks on a warm pool", (Column("tasks_per_s", "tasks/s"),), "loky"),
    Section("bandwidth", "Numpy array as argument and result (bytes both ways / round trip)",
            (Column("gb_per_s", "GB/s", 2),), "floor"),
    Section("startup", "Pool start to first result, 2 workers, no dependencies",
            (Column("seconds", "start (s)", 2), Column("close_seconds", "close (s)", 2)), "ray"),
    Section("startup_pip", "Start to first result with a cached `Image(pip=[...])`",
            (Column("seconds", "start (s)", 2), Column("first_start_seconds", "first start (s)", 2)), "skyward"),
    Section("broadcast", "`noop() @ pool` on 4 nodes vs one `noop() >> pool` on the same pool",
            (Column("median_us", "median (us)"), Column("p99_us", "p99 (us)")), "skyward>>"),
    Section("memory", "Client RSS across many trivial tasks",
            (Column("rss_first_mib", "RSS after first batch (MiB)", 1), Column("rss_last_mib", "RSS at end (MiB)", 1),
             Column("growth_mib", "growth (MiB)", 2), Column("bytes_per_task", "bytes/task", 1))),
)  # fmt: skip


def _fmt(value: float | None, digits: int = 0) -> str:
    if value is None:
        return "-"
    if math.isinf(value) or math.isnan(value):
        return str(value)
    return f"{value:,.{digits}f}"


def _section_table(section: Section, measurements: Sequence[Measurement]) -> list[str]:
    rows = [m for m in measurements if m.measure == section.measure]
    if not rows:
        return []
    systems = list(dict.fromkeys(m.system for m in rows))
    value = {(m.system, m.metric): m for m in rows}
    first = section.columns[0].metric
    reference = value.get((section.relative_to, first)) if section.relative_to else None
    header = ["system", *(c.title for c in section.columns)]
    if reference is not None:
        header.append(f"vs {section.relative_to}")
    header.append("notes")
    lines = [f"#### {section.title}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for system in systems:
        cells = [f"**{system}**" if system.startswith("skyward") else system]
        for c in section.columns:
            m = value.get((system, c.metric))
            cells.append(_fmt(m.value if m else None, c.digits))
        if reference is not None:
            m = value.get((system, first))
            cells.append(f"{m.value / reference.value:.2f}x" if m and reference.value else "-")
        notes = "; ".join(value[(system, c.metric)].note for c in section.columns if (system, c.metric) in value
                          and value[(system, c.metric)].note)  # fmt: skip
        cells.append(notes)
        lines.append("| " + " | ".join(cells) + " |")
    return [*lines, ""]


def _targets_table(outcomes: Sequence[Outcome]) -> list[str]:
    lines = [
        "| target | wanted | measured | reference | ratio | verdict |",
        "|---|---|---|---|---|---|",
    ]
    for o in outcomes:
        unit_digits = 2 if o.value is not None and abs(o.value) < 100 else 0
        ratio = f"{o.ratio:.2f}x" if o.ratio is not None and o.target.reference is not None else "-"
        verdict = f"**{o.verdict}**" if o.verdict == "MISS" else o.verdict
        if o.note:
            verdict += f" ({o.note})"
        lines.append(
            f"| {o.target.name} | {o.target.describe()} | {_fmt(o.value, unit_digits)} | "
            f"{_fmt(o.reference, unit_digits)} | {ratio} | {verdict} |"
        )
    return [*lines, ""]


def _generic_table(title: str, rows: Sequence[dict[str, Any]]) -> list[str]:
    if not rows:
        return []
    keys = list(dict.fromkeys(k for row in rows for k in row))
    lines = [f"#### {title}", "", "| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    for row in rows:
        cells = []
        for k in keys:
            v = row.get(k, "")
            cells.append(_fmt(v, 3 if abs(v) < 10 else 1) if isinstance(v, float) else str(v))
        lines.append("| " + " | ".join(cells) + " |")
    return [*lines, ""]


def render_markdown(
    *,
    mode: str,
    command: str,
    when: str,
    duration_s: float,
    machine: dict[str, Any],
    measurements: Sequence[Measurement],
    outcomes: Sequence[Outcome],
    extra_tables: Sequence[tuple[str, Sequence[dict[str, Any]]]] = (),
    notes: Sequence[str] = (),
    image: str | None = None,
) -> str:
    lines = [
        f"### Results ({mode} mode, {when})",
        "",
        f"Machine: {summary(machine)}.  ",
        f"Command: `{command}` ({duration_s:.0f} s). Every ratio compares numbers measured in this same run.",
        "",
        *_targets_table(outcomes),
    ]
    for section in SECTIONS:
        lines += _section_table(section, measurements)
    for title, rows in extra_tables:
        lines += _generic_table(title, rows)
    if notes:
        lines += ["Notes:", "", *(f"- {n}" for n in notes), ""]
    if image:
        lines.append(f"![latency, throughput, bandwidth and start time against the baselines]({image})")
    return "\n".join(lines).rstrip() + "\n"


_PANELS: tuple[tuple[str, str, str, bool], ...] = (
    ("latency", "median_us", "round trip, median (us; p99 as ticks)", True),
    ("throughput", "tasks_per_s", "gather, tasks/s", False),
    ("bandwidth", "gb_per_s", "array round trip, GB/s", False),
    ("startup", "seconds", "start to first result (s)", False),
)


def plot(measurements: Sequence[Measurement], path: Path, title: str) -> None:
    """Four panels (latency, throughput, bandwidth, start time), Skyward in its own colour."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(12, 8))
    value = {m.key: m.value for m in measurements}
    for ax, (measure, metric, label, log) in zip(axes.flat, _PANELS, strict=True):
        systems = list(dict.fromkeys(m.system for m in measurements if m.measure == measure and m.metric == metric))
        heights = [value[(measure, s, metric)] for s in systems]
        colors = ["tab:orange" if s.startswith("skyward") else "tab:blue" for s in systems]
        ax.bar(systems, heights, color=colors)
        if measure == "latency":
            p99 = [value.get((measure, s, "p99_us"), math.nan) for s in systems]
            ax.scatter(systems, p99, marker="_", s=400, color="black", zorder=3)
        for x, h in enumerate(heights):
            ax.annotate(f"{h:,.0f}" if h >= 100 else f"{h:.2f}", (x, h), ha="center", va="bottom", fontsize=8)
        ax.set_title(label)
        if log and heights:
            ax.set_yscale("log")
        ax.tick_params(axis="x", labelrotation=30, labelsize=8)
        if not systems:
            ax.text(0.5, 0.5, "not measured", ha="center", va="center", transform=ax.transAxes)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
