#!/usr/bin/env python3
"""Streams on one Local worker: values per second out of a generator (window 64, the
default, against 1024), the same values sent as a gather of one task each, and an input
stream of 1 MB chunks in. Rounds alternate, so each ratio compares numbers measured
seconds apart in the same run.

    python bench/bench_streams.py            # 5 rounds
    python bench/bench_streams.py --quick    # 2 rounds, smaller counts
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Iterator

import skyward as sky


@sky.compute
def values(count: int) -> Iterator[int]:
    yield from range(count)


@sky.compute
def one(value: int) -> int:
    return value


@sky.compute
def swallow(chunks: Iterator[bytes]) -> int:
    return sum(len(chunk) for chunk in chunks)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    quick = parser.parse_args().quick
    rounds, count, chunks = (2, 100_000, 256) if quick else (5, 300_000, 1024)
    rates: dict[str, list[float]] = {"stream, window 64": [], "stream, window 1024": [], "gather, a task each": []}
    input_rates: list[float] = []
    with sky.ComputePool(display="quiet") as pool:
        list(values(1000) >> pool)  # warm up
        for _ in range(rounds):
            for window in (64, 1024):
                started = time.perf_counter()
                for _value in pool.stream(values(count), window=window):
                    pass
                rates[f"stream, window {window}"].append(count / (time.perf_counter() - started))
            started = time.perf_counter()
            sky.gather(*(one(i) for i in range(count // 10))) >> pool
            rates["gather, a task each"].append(count // 10 / (time.perf_counter() - started))
            started = time.perf_counter()
            swallow(bytes(1 << 20) for _ in range(chunks)) >> pool
            input_rates.append(chunks * (1 << 20) / (time.perf_counter() - started) / 1e9)
    base = statistics.median(rates["stream, window 64"])
    print("| measure | values/s (median) | vs window 64 |")
    print("|---|---|---|")
    for name, samples in rates.items():
        median = statistics.median(samples)
        print(f"| {name} | {median:,.0f} | {median / base:.2f}x |")
    print(f"\ninput stream of 1 MB chunks: {statistics.median(input_rates):.2f} GB/s (median of {rounds})")


if __name__ == "__main__":
    main()
