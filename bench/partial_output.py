"""How the agent's output buffer copes with a task that writes without newlines.

Feeds ``--megabytes`` of text with no line end, in 60,000-byte reads (about a pipe's worth), to the
agent's :class:`skyward.agent.output.OutputBuffer` and, as the baseline in the same run,
to the buffer it replaced (append the read, re-split everything pending on ``\\n``).
Prints seconds, peak pending text and the ratio::

    PYTHONHASHSEED=0 .venv/bin/python bench/partial_output.py --megabytes 40

``--pool`` instead runs a task on a Local pool that writes that much without a newline
and reports how long until the client has all of it, and the agent's peak memory.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from skyward.agent.output import OutputBuffer

WAIT_S = 60.0  # --pool: how long the client waits for the output before reporting what it has
READ = 60_000  # a pipe read that does not line up with the size bound


class AppendAndSplit:
    """The buffer before issue 14: every read re-scans everything pending."""

    def __init__(self) -> None:
        self.pending = b""

    def feed(self, data: bytes) -> list[str]:
        self.pending += data
        *lines, self.pending = self.pending.split(b"\n")
        return [line.decode(errors="replace").rstrip("\r") for line in lines]

    @property
    def pending_chars(self) -> int:
        return len(self.pending)


def measure(make: Callable[[], AppendAndSplit | OutputBuffer], megabytes: int) -> tuple[float, int]:
    """Seconds to feed ``megabytes`` without a newline, and the most text held pending."""
    buffer = make()
    chunk = b"x" * READ
    peak = 0
    started = time.perf_counter()
    for _ in range(megabytes * 1024 * 1024 // READ):
        buffer.feed(chunk)
        peak = max(peak, buffer.pending_chars)
    return time.perf_counter() - started, peak


def through_a_pool(megabytes: int) -> None:
    import os
    import threading

    import psutil

    import skyward as sky

    @sky.compute
    def spew(mb: int) -> None:
        chunk = b"x" * (1 << 20)
        for _ in range(mb):
            os.write(1, chunk)

    with sky.ComputePool(display="quiet") as pool:
        received = [0]
        pool.on(sky.LogLine, lambda e: received.__setitem__(0, received[0] + len(e.line)))
        agent = psutil.Process(sky.compute(os.getppid)() >> pool)
        peak, done = [0], threading.Event()

        def watch() -> None:
            while not done.wait(0.05):
                peak[0] = max(peak[0], agent.memory_info().rss)

        watcher = threading.Thread(target=watch)
        watcher.start()
        started = time.perf_counter()
        spew(megabytes) >> pool
        returned = time.perf_counter() - started
        while received[0] < megabytes << 20 and time.perf_counter() - started < WAIT_S:
            time.sleep(0.01)
        arrived, had = time.perf_counter() - started, received[0]
        done.set()
        watcher.join()
    print(f"{megabytes} MB without a newline through a Local pool")
    print(f"task returned after {returned:.1f} s; the client had {had / 2**20:.0f} MB after {arrived:.1f} s")
    print(f"agent peak RSS {peak[0] / 2**20:.0f} MB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=int, default=40)
    parser.add_argument("--pool", action="store_true", help="through a real Local pool")
    args = parser.parse_args()
    if args.pool:
        through_a_pool(args.megabytes)
        return
    from skyward.agent.output import OutputBuffer  # here: --pool also runs against older trees

    old_s, old_peak = measure(AppendAndSplit, args.megabytes)
    new_s, new_peak = measure(OutputBuffer, args.megabytes)
    print(f"{args.megabytes} MB without a newline, {READ:,}-byte reads")
    print(f"{'buffer':<18}{'seconds':>10}{'peak pending':>16}")
    print(f"{'append-and-split':<18}{old_s:>10.3f}{old_peak:>16,}")
    print(f"{'OutputBuffer':<18}{new_s:>10.3f}{new_peak:>16,}")
    print(f"speed-up: {old_s / new_s:,.0f}x; pending bound: {new_peak:,} characters")


if __name__ == "__main__":
    main()
