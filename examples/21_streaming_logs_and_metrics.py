"""What a computation prints comes back line by line while it runs; nodes report metrics.

``LogLine`` events carry each line (stdout and stderr, C extensions' output too) with its
node; ``Metrics`` carry CPU, memory and, on NVIDIA nodes, GPU use every 2 seconds.
``display="log"`` (the default) prints both; this example handles them itself.

Run it with:  .venv/bin/python examples/21_streaming_logs_and_metrics.py
"""

from __future__ import annotations

import time

from _provider import provider

import skyward as sky
from skyward.events import LogLine, Metrics


@sky.compute
def train(epochs: int) -> str:
    for epoch in range(epochs):
        total = sum(i * i for i in range(300_000))  # some CPU work for the metrics to see
        print(f"epoch {epoch}: loss {1 / (epoch + 1):.3f}", flush=True)
        time.sleep(0.6)
    return f"done ({total})"


def main() -> None:
    arrivals: list[float] = []
    start = time.perf_counter()

    def on_line(event: LogLine) -> None:
        arrivals.append(time.perf_counter() - start)
        print(f"[node {event.node} +{arrivals[-1]:.1f}s] {event.line}")

    def on_metrics(event: Metrics) -> None:
        print(f"[node {event.node}] cpu {event.cpu_percent:.0f}%, memory {event.memory_used_mb:.0f} MB")

    with sky.ComputePool(provider=provider(), display="quiet") as pool:
        pool.on(LogLine, on_line)
        pool.on(Metrics, on_metrics)
        start = time.perf_counter()
        print(train(5) >> pool)
    assert arrivals[0] < arrivals[-1] - 1, "lines arrived while the task ran, not at its end"


if __name__ == "__main__":
    main()
