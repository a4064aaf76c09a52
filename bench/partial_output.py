"""How the agent's output buffer copes with a task that writes without newlines.

Feeds ``--megabytes`` of text with no line end, in 60,000-byte reads (about a pipe's worth), to the
agent's :class:`skyward.agent.output.OutputBuffer` and, as the baseline in the same run,
to the buffer it replaced (append the read, re-split everything pending on ``\\n``).
Prints seconds, peak pending text and the ratio::

    PYTHONHASHSEED=0 .venv/bin/python bench/partial_output.py --megabytes 40
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from skyward.agent.output import OutputBuffer

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
    buffer = make()
    chunk = b"x" * READ
    peak = 0
    started = time.perf_counter()
    for _ in range(megabytes * 1024 * 1024 // READ):
        buffer.feed(chunk)
        peak = max(peak, buffer.pending_chars)
    return time.perf_counter() - started, peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=int, default=40)
    args = parser.parse_args()
    old_s, old_peak = measure(AppendAndSplit, args.megabytes)
    new_s, new_peak = measure(OutputBuffer, args.megabytes)
    print(f"{args.megabytes} MB without a newline, {READ:,}-byte reads")
    print(f"{'buffer':<18}{'seconds':>10}{'peak pending':>16}")
    print(f"{'append-and-split':<18}{old_s:>10.3f}{old_peak:>16,}")
    print(f"{'OutputBuffer':<18}{new_s:>10.3f}{new_peak:>16,}")
    print(f"speed-up: {old_s / new_s:,.0f}x; pending bound: {new_peak:,} characters")


if __name__ == "__main__":
    main()
