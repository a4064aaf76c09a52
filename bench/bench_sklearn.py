#!/usr/bin/env python3
"""GridSearchCV on a Skyward pool against loky with the same number of workers.

    python bench/bench_sklearn.py            # full: 7 interleaved rounds
    python bench/bench_sklearn.py --quick    # 3 rounds of a smaller search

The same search (SVC on the digits data set, 5-fold) runs alternately with loky
(``n_jobs=W``) and on a Local pool of W nodes through ``sklearn_backend`` (``n_jobs=-1``,
which is every slot of the pool), both warmed up first, so each ratio compares numbers
measured minutes apart on the same machine. ``vs_loky`` is the median skyward time over
the median loky time (the target: at most 1.2); ``best_vs_loky`` compares the fastest
rounds, which tells more when other work shares the machine. The pool's start-up is reported on
its own row; it is not part of the search's time, as loky's process start is not either.

``run(quick)`` returns the table's rows, for bench/run.py.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

TARGET_RATIO = 1.2


@dataclass(frozen=True)
class Setup:
    nodes: int
    rounds: int
    grid: dict[str, list[float]]
    folds: int


QUICK = Setup(nodes=2, rounds=3, grid={"C": [1.0, 10.0], "gamma": [1e-4, 1e-3, 1e-2]}, folds=5)
FULL = Setup(nodes=2, rounds=7, grid={"C": [0.1, 1.0, 10.0, 100.0], "gamma": [1e-4, 1e-3, 1e-2]}, folds=5)


def _search(setup: Setup, X: Any, y: Any) -> tuple[float, Any]:
    from sklearn.model_selection import GridSearchCV
    from sklearn.svm import SVC

    started = time.perf_counter()
    search = GridSearchCV(SVC(), setup.grid, cv=setup.folds, n_jobs=-1).fit(X, y)
    return time.perf_counter() - started, search


def _require() -> None:
    missing = []
    for module in ("sklearn", "joblib", "skyward_sklearn"):
        try:
            __import__(module)
        except ImportError:
            missing.append(module)
    if missing:
        raise RuntimeError(
            f"bench_sklearn needs {', '.join(missing)} in this environment "
            "(pip install scikit-learn and the skyward-sklearn plugin: pip install -e skyward-sklearn)"
        )


def run(quick: bool) -> list[dict[str, Any]]:
    """Measure and return the table's rows (one per system, then the ratio's verdict)."""
    _require()
    import numpy as np
    from joblib import parallel_config
    from sklearn.datasets import load_digits

    import skyward as sky
    from skyward.integrations import sklearn_backend

    setup = QUICK if quick else FULL
    workers = setup.nodes
    X, y = load_digits(return_X_y=True)
    loky_times: list[float] = []
    pool_times: list[float] = []
    started = time.perf_counter()
    with sky.ComputePool(nodes=setup.nodes, display="quiet", collect_metrics=False) as pool:
        startup = time.perf_counter() - started
        with sklearn_backend(pool):
            _, warm_pool = _search(setup, X, y)
        with parallel_config(backend="loky", n_jobs=workers):
            _, warm_loky = _search(setup, X, y)
        # the two must agree, or the comparison means nothing
        if warm_pool.best_params_ != warm_loky.best_params_ or not np.array_equal(
            warm_pool.cv_results_["mean_test_score"], warm_loky.cv_results_["mean_test_score"]
        ):
            raise RuntimeError("GridSearchCV on the pool and with loky found different results")
        for _ in range(setup.rounds):
            with parallel_config(backend="loky", n_jobs=workers):
                loky_times.append(_search(setup, X, y)[0])
            with sklearn_backend(pool):
                pool_times.append(_search(setup, X, y)[0])
    fits = len(warm_loky.cv_results_["params"]) * setup.folds
    ratio = statistics.median(pool_times) / statistics.median(loky_times)
    best_ratio = min(pool_times) / min(loky_times)
    return [
        _row(f"loky, n_jobs={workers}", workers, fits, loky_times, 1.0, 1.0),
        _row(f"skyward, Local {setup.nodes} nodes x 1 worker", workers, fits, pool_times, ratio, best_ratio),
        {
            "system": f"pool start-up ({setup.nodes} Local nodes), not in the times above",
            "workers": workers,
            "fits": "",
            "median_s": startup,
            "min_s": startup,
            "rounds": 1,
            "vs_loky": "",
            "best_vs_loky": "",
            "verdict": f"{'pass' if ratio <= TARGET_RATIO else 'MISS'}: ratio {ratio:.2f} (target <= {TARGET_RATIO})",
        },
    ]


def _row(system: str, workers: int, fits: int, times: list[float], ratio: float, best: float) -> dict[str, Any]:
    return {
        "system": system,
        "workers": workers,
        "fits": fits,
        "median_s": statistics.median(times),
        "min_s": min(times),
        "rounds": len(times),
        "vs_loky": round(ratio, 3),  # median over median: the target's ratio
        "best_vs_loky": round(best, 3),  # fastest over fastest: less sensitive to a busy machine
        "verdict": "",
    }


def render(rows: list[dict[str, Any]], out: Callable[[str], None] = print) -> None:
    keys = list(rows[0])
    cells = [[_fmt(row[k]) for k in keys] for row in rows]
    widths = [max(len(k), *(len(c[i]) for c in cells)) for i, k in enumerate(keys)]
    out("  ".join(k.ljust(w) for k, w in zip(keys, widths, strict=True)))
    out("  ".join("-" * w for w in widths))
    for line in cells:
        out("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)))


def _fmt(value: Any) -> str:
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="bench/bench_sklearn.py", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 rounds of a smaller search")
    args = parser.parse_args(argv)
    load = os.getloadavg()
    rows = run(quick=args.quick)
    print(f"GridSearchCV(SVC, digits): skyward pool vs loky ({os.cpu_count()} CPUs, load at start {load[0]:.2f})")
    render(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
