#!/usr/bin/env python3
"""Skyward's benchmark: ``python bench/run.py --quick`` (CI) or ``--full`` (every baseline).

Quick mode compares against the floor, ProcessPoolExecutor and loky only and finishes in
well under a minute; it is a harness check and exits 0 whether targets pass or not. Full
mode builds bench/.work/venv (skyward-core from this checkout, Ray, Dask, loky), re-runs
itself there, measures everything and rewrites the results table in bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import env  # noqa: E402

MEASURES = ("startup", "startup_pip", "latency", "throughput", "bandwidth", "memory", "broadcast", "sklearn")
README_START = "<!-- results:start -->"
README_END = "<!-- results:end -->"


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="bench/run.py", description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="floor, ProcessPool and loky only; < 1 minute (default)")
    mode.add_argument("--full", action="store_true", help="every baseline (installs Ray and Dask in bench/.work/venv)")
    parser.add_argument("--only", default="", help=f"comma-separated subset of measures to run: {','.join(MEASURES)}")
    parser.add_argument("--no-readme", action="store_true", help="full mode: do not rewrite bench/README.md")
    args = parser.parse_args(argv)
    only = [m for m in args.only.split(",") if m]
    unknown = sorted(set(only) - set(MEASURES))
    if unknown:
        parser.error(f"--only: unknown measure(s) {', '.join(unknown)}; choose from {', '.join(MEASURES)}")
    args.measures = only or list(MEASURES)
    return args


def reexec_in_full_venv(argv: list[str]) -> None:
    """Full mode runs inside bench/.work/venv, where Ray and Dask are installed."""
    if os.environ.get(env.IN_FULL_VENV) == "1":
        return
    python = env.ensure_full_venv()
    os.environ[env.IN_FULL_VENV] = "1"
    os.execv(str(python), [str(python), str(Path(__file__).resolve()), *argv])


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    if args.full:
        reexec_in_full_venv(argv)
    env.prepare_environment()

    from bench import machine, report
    from bench.measures import bandwidth, broadcast, latency, memory, startup, startup_pip, throughput
    from bench.model import Measurement, index
    from bench.plan import FULL, QUICK
    from bench.session import Session
    from bench.targets import TARGETS, evaluate_all

    plan = FULL if args.full else QUICK
    session = Session(plan)
    info = machine.describe()
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    command = "python bench/run.py --" + plan.mode + (f" --only {args.only}" if args.only else "")
    session.log(f"{plan.mode} mode on {machine.summary(info)}")
    baselines = list(plan.baselines)
    measurements: list[Measurement] = []
    extra_tables: list[tuple[str, list[dict[str, Any]]]] = []
    failures: list[str] = []

    def step(name: str, fn: Any, *fn_args: Any) -> None:
        if name not in args.measures:
            return
        session.log(f"-- {name}")
        try:
            measurements.extend(fn(session, *fn_args))
        except Exception:
            failures.append(name)
            session.log(f"{name} FAILED:\n{traceback.format_exc()}")

    # Fresh-start measures first, while nothing else runs; then the warm-pool measures,
    # which share one started instance of each system; the 4-node pool comes last, alone.
    # The cached-dependencies start goes first: what Ray leaves running for a few seconds
    # after ray.shutdown() would otherwise land on it.
    if plan.pip_rounds > 0:
        step("startup_pip", startup_pip.run)
    elif "startup_pip" in args.measures:
        session.notes.append(
            "start with a cached Image(pip=...) is measured in full mode only: its first start builds an "
            "environment from the package index, which takes longer than the quick budget"
        )
    step("startup", startup.run, [*[b for b in baselines if b != "floor"], "skyward"])
    try:
        step("latency", latency.run, [*baselines, "skyward"])
        step("throughput", throughput.run, [*baselines, "skyward"])
        step("memory", memory.run)  # before bandwidth: its RSS readings then hold no large arrays
        step("bandwidth", bandwidth.run, [*baselines, "skyward", "skyward-socket", "floor+curve", "skyward+curve"])
    finally:
        session.close_warm()
    step("broadcast", broadcast.run)
    if "sklearn" in args.measures and plan.sklearn:
        try:
            rows = run_sklearn(session, quick=not args.full)
        except Exception:
            failures.append("sklearn")
            session.log(f"sklearn FAILED:\n{traceback.format_exc()}")
            rows = []
        if rows:
            extra_tables.append(("scikit-learn on a pool (bench/bench_sklearn.py)", rows))

    session.notes.extend(context_notes(measurements))
    info["loadavg_end"] = list(os.getloadavg())
    outcomes = evaluate_all(TARGETS, index(measurements))
    duration = time.monotonic() - session.started
    if failures:
        session.notes.append(f"measures that failed in this run: {', '.join(failures)}")
    name = "latest" if args.full else "quick"
    markdown = report.render_markdown(
        mode=plan.mode, command=command, when=when, duration_s=duration, machine=info,
        measurements=measurements, outcomes=outcomes, extra_tables=extra_tables, notes=session.notes,
        image=f"{name}.png",
    )  # fmt: skip
    env.RESULTS.mkdir(parents=True, exist_ok=True)
    (env.RESULTS / f"{name}.md").write_text(markdown)
    (env.RESULTS / f"{name}.json").write_text(
        json.dumps(
            {
                "mode": plan.mode,
                "command": command,
                "when": when,
                "duration_s": duration,
                "machine": info,
                "measurements": [m.to_json() for m in measurements],
                "targets": [
                    {"name": o.target.name, "wanted": o.target.describe(), "verdict": o.verdict, "value": o.value,
                     "reference": o.reference, "ratio": o.ratio, "note": o.note}
                    for o in outcomes
                ],
                "extra_tables": {title: rows for title, rows in extra_tables},
                "notes": session.notes,
                "failed_measures": failures,
            },
            indent=2,
        )
        + "\n"
    )  # fmt: skip
    report.plot(measurements, env.RESULTS / f"{name}.png", f"Skyward benchmark, {plan.mode} mode, {when}")
    if args.full and not args.no_readme and not args.only:
        update_readme(markdown.replace("](latest.png)", "](results/latest.png)"))
    print(markdown)
    for o in outcomes:
        ratio = f"{o.ratio:.2f}x" if o.ratio is not None else "-"
        print(f"{o.verdict:4}  {o.target.name}: {o.target.describe()} (ratio {ratio}) {o.note}")
    session.log(f"done in {duration:.0f} s; results in {env.RESULTS / name}.{{md,json,png}}")
    # Missed targets are findings, not harness failures; a measure that crashed is.
    return 1 if failures else 0


def context_notes(measurements: list[Any]) -> list[str]:
    """What the numbers mean on this machine, where a target meets a hardware bound."""
    value = {m.key: m.value for m in measurements}
    floor_all = value.get(("broadcast", "floor@4", "median_us"))
    floor_one = value.get(("broadcast", "floor>>", "median_us"))
    sky_all = value.get(("broadcast", "skyward@4", "median_us"))
    if floor_all and floor_one and sky_all:
        return [
            f"`@` on 4 nodes: the raw floor's own call on 4 workers takes {floor_all / floor_one:.2f}x its single "
            f"call on this {os.cpu_count()}-CPU machine (4 workers, and for Skyward 4 agents, share the cores), "
            f"and Skyward's `@` takes {sky_all / floor_all:.2f}x the floor's"
        ]
    return []


def run_sklearn(session: Any, quick: bool) -> list[dict[str, Any]]:
    if not (env.BENCH / "bench_sklearn.py").exists():
        session.notes.append("bench/bench_sklearn.py is absent: the scikit-learn comparison was skipped")
        return []
    session.log("-- sklearn (bench/bench_sklearn.py)")
    from bench import bench_sklearn  # type: ignore[attr-defined]

    rows: list[dict[str, Any]] = bench_sklearn.run(quick=quick)
    return rows


def update_readme(markdown: str) -> None:
    readme = env.BENCH / "README.md"
    text = readme.read_text()
    if README_START not in text or README_END not in text:
        raise SystemExit(f"{readme} lacks the {README_START} / {README_END} markers; results not inserted")
    head, rest = text.split(README_START, 1)
    _, tail = rest.split(README_END, 1)
    readme.write_text(f"{head}{README_START}\n{markdown}{README_END}{tail}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
