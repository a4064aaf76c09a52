#!/usr/bin/env python3
"""Array round trips on a Local pool with large buffers through shared memory, against
the same pool kind sending them through the socket, alternating, in one run.

    .venv/bin/python bench/shm.py [--sizes-kib 256,1024,4096,65536,262144] [--rounds 5] [--transport ipc]

Prints one line per size: the median GB/s of ``echo(a) >> pool`` (2 x the array's size
over the round trip) with ``Local(shared_memory=True)`` and with ``shared_memory=False``,
and their ratio. Reported, never asserted: on a shared machine both swing with the load;
the ratio of rounds taken back to back moves less. The threshold (``SHM_MIN``, 32 MiB) is
where the ratio crosses 1 on this machine.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import skyward as sky  # noqa: E402
from bench.workload import echo  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes-kib", default="256,1024,4096,65536,262144")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--transport", choices=("ipc", "tcp"), default="ipc")
    args = parser.parse_args()
    sizes = [int(s) * 1024 for s in args.sizes_kib.split(",")]
    fn = sky.compute(echo)
    pools = {
        on: sky.ComputePool(nodes=1, display="quiet", provider=sky.Local(transport=args.transport, shared_memory=on))
        for on in (True, False)
    }
    try:
        for pool in pools.values():
            pool.open()
        for size in sizes:
            array = np.random.default_rng(0).random(size // 8)
            rates: dict[bool, list[float]] = {True: [], False: []}
            calls = max(1, (64 * 2**20) // size)  # small arrays: time several calls per round
            for pool in pools.values():  # warm-up
                assert np.array_equal(fn(array) >> pool, array)
            for r in range(args.rounds):
                for on in (True, False) if r % 2 == 0 else (False, True):
                    t0 = time.perf_counter()
                    for _ in range(calls):
                        result = fn(array) >> pools[on]
                    elapsed = (time.perf_counter() - t0) / calls
                    assert np.array_equal(result, array)
                    del result
                    rates[on].append(2 * size / elapsed / 1e9)
            with_shm, socket = statistics.median(rates[True]), statistics.median(rates[False])
            print(
                f"{size // 1024:>8} KiB  shm {with_shm:6.2f} GB/s  socket {socket:6.2f} GB/s  "
                f"ratio {with_shm / socket:5.2f}x  ({args.transport}, {args.rounds} rounds x {calls} calls)",
                flush=True,
            )
    finally:
        for pool in pools.values():
            pool.close()


if __name__ == "__main__":
    main()
