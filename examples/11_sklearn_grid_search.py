"""scikit-learn's GridSearchCV on a pool: every fit of the search runs on the pool's workers.

Run it with:  .venv/bin/python examples/11_sklearn_grid_search.py

It uses two Local nodes (processes on this machine). On a cloud, change only the
provider, e.g. ``ScikitLearnPool(provider=sky.AWS(), nodes=4, concurrency=4)``: the
workers get this client's scikit-learn, joblib, numpy and scipy, and ``n_jobs=-1``
means every worker slot of the pool (4 nodes x 4 = 16).
"""

from __future__ import annotations

import os
import time

from _provider import provider
from sklearn.datasets import load_digits
from sklearn.model_selection import GridSearchCV, cross_val_score
from sklearn.svm import SVC

import skyward as sky
from skyward.integrations import ScikitLearnPool


def where(estimator: object, X: object, y: object) -> float:
    """A scorer that reports the process it ran in (it travels to the workers by value)."""
    return float(os.getpid())


def main() -> None:
    X, y = load_digits(return_X_y=True)
    grid = {"C": [0.1, 1.0, 10.0], "gamma": [1e-4, 1e-3, 1e-2]}
    with ScikitLearnPool(provider=provider(), nodes=2, display="quiet") as pool:
        started = time.perf_counter()
        search = GridSearchCV(SVC(), grid, cv=5, n_jobs=-1).fit(X, y)
        print(f"best {search.best_params_} score {search.best_score_:.4f} in {time.perf_counter() - started:.1f} s")
        print(f"{len(search.cv_results_['params']) * 5} fits on {pool.spec.total_workers} worker slots")

        # anything else that takes n_jobs runs there too
        scores = cross_val_score(SVC(C=10, gamma=1e-3), X, y, cv=5, n_jobs=-1)
        print(f"cross-validation: {scores.mean():.4f} +- {scores.std():.4f}")

        placed = cross_val_score(SVC(), X, y, cv=4, scoring=where, n_jobs=-1)
        workers = set(sky.compute(os.getpid)() @ pool)
        print(f"folds scored in processes {sorted({int(p) for p in placed})}; the workers are {sorted(workers)}")


if __name__ == "__main__":
    main()
