"""joblib's ``Parallel`` on a pool: existing joblib code, unchanged, on the pool's workers.

``joblib_backend(pool)`` makes ``Parallel(n_jobs=-1)`` mean every worker slot of the pool
inside the ``with`` block.

Needs skyward-sklearn (``pip install ./skyward-sklearn`` in a checkout); without it it exits 0.
Run it with:  .venv/bin/python examples/12_joblib.py
"""

from __future__ import annotations

import importlib.util
import math
import os

from _provider import provider

import skyward as sky


def slow_is_prime(n: int) -> tuple[int, bool, int]:
    return n, n > 1 and all(n % d for d in range(2, math.isqrt(n) + 1)), os.getpid()


def main() -> None:
    if importlib.util.find_spec("skyward_sklearn") is None:
        print("skyward-sklearn is not installed: pip install ./skyward-sklearn in a checkout (skipped)")
        return
    from joblib import Parallel, delayed

    from skyward.integrations import joblib_backend

    with sky.ComputePool(provider=provider(), nodes=2, concurrency=2, display="quiet") as pool, joblib_backend(pool):
        results = Parallel(n_jobs=-1)(delayed(slow_is_prime)(n) for n in range(10_000, 10_050))
    primes = [n for n, prime, _ in results if prime]
    print(f"primes: {primes}, computed in {len({pid for *_, pid in results})} worker processes")
    assert primes[0] == 10007


if __name__ == "__main__":
    main()
