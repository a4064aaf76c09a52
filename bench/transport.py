"""Transport measures of issue 14, run on a warm Local pool (2 nodes):

- ``short-behind-long``: one 2 s task and ten 0.1 s tasks submitted together (the joblib
  ``generator_unordered`` case). Reports when the last short task finished, as a ratio
  of the ideal (the ten short tasks run back to back on the idle worker: 1.0 s), and
  how many short tasks finished after the long one (0 is the target).
- ``bytes-argument``: ``size(b) >> pool`` with a ``bytes`` and a ``bytearray`` of
  ``--mb`` MB (default 256): seconds and the client's peak extra memory (RSS sampled
  every 5 ms), against a numpy array of the same size (out of band since the start).

    .venv/bin/python bench/transport.py [--mb 256] [--only short-behind-long,bytes-argument]

Same-run ratios only; nothing here is a timed test. Results: bench/results/transport.md
(not committed), and printed.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import psutil

import skyward as sky
from skyward.api.compute import PendingCompute


@sky.compute
def nap(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


@sky.compute
def size(value: bytes | bytearray | np.ndarray) -> int:
    return len(value) if not isinstance(value, np.ndarray) else int(value.nbytes)


@sky.compute
def nap_measured(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


def short_behind_long(pool: sky.ComputePool) -> list[str]:
    rows = []
    for fn, label in ((nap, "first use"), (nap_measured, "after 20 instant calls")):
        if fn is nap_measured:
            sky.gather(*(fn(0.0) for _ in range(20))) >> pool
        rows.append(_short_behind_long(pool, fn, label))
    return rows


def _short_behind_long(pool: sky.ComputePool, fn: Callable[[float], PendingCompute[float]], label: str) -> str:
    futures = [pool.submit(fn(2.0))] + [pool.submit(fn(0.1)) for _ in range(10)]
    t0 = time.perf_counter()
    finished: dict[cf.Future[float], float] = {}
    for future in cf.as_completed(futures, timeout=120):
        finished[future] = time.perf_counter() - t0
    long_done = finished[futures[0]]
    shorts = [finished[f] for f in futures[1:]]
    behind = sum(1 for t in shorts if t > long_done)
    return (
        f"| short-behind-long | {label}: last 0.1 s task done at {max(shorts):.2f} s (ideal 1.0 s) "
        f"| {max(shorts) / 1.0:.2f}x | {behind} of 10 short tasks finished after the 2 s one |"
    )


class PeakRss:
    def __init__(self) -> None:
        self.process = psutil.Process()
        self.base = self.process.memory_info().rss
        self.peak = self.base
        self.running = True
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.thread.start()

    def _sample(self) -> None:
        while self.running:
            self.peak = max(self.peak, self.process.memory_info().rss)
            time.sleep(0.005)

    def stop(self) -> float:
        self.running = False
        self.thread.join()
        return (self.peak - self.base) / 2**20


def bytes_argument(pool: sky.ComputePool, mb: int) -> list[str]:
    rows = []
    for kind in ("numpy", "bytes", "bytearray"):
        raw = np.ones(mb * 2**20, dtype=np.uint8)
        value: bytes | bytearray | np.ndarray = (
            raw if kind == "numpy" else bytes(raw) if kind == "bytes" else bytearray(raw)
        )
        del raw
        size(value[:10]) >> pool  # warm
        peak = PeakRss()
        t0 = time.perf_counter()
        assert size(value) >> pool == mb * 2**20
        elapsed = time.perf_counter() - t0
        extra = peak.stop()
        rows.append(f"| bytes-argument | {kind} {mb} MB | {elapsed:.2f} s | client peak +{extra:,.0f} MB |")
        del value
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=int, default=256)
    parser.add_argument("--only", default="short-behind-long,bytes-argument")
    args = parser.parse_args()
    only = set(args.only.split(","))
    rows = ["| measure | what | value | note |", "|---|---|---|---|"]
    with sky.ComputePool(nodes=2, display="quiet") as pool:
        size(b"") >> pool
        if "short-behind-long" in only:
            rows += short_behind_long(pool)
        if "bytes-argument" in only:
            rows += bytes_argument(pool, args.mb)
    text = "\n".join(rows)
    print(text)
    out = Path(__file__).parent / "results" / "transport.md"
    out.parent.mkdir(exist_ok=True)
    out.write_text(text + "\n")


if __name__ == "__main__":
    main()
