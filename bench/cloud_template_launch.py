"""Launch time of N nodes on the cloud template, parallel creates against one at a time,
as a same-run ratio (not a timed test). The API is tests/unit/test_cloud_template.py's
in-memory one, answering each create in 0.1 s and running an instance after 3 polls.

    PYTHONHASHSEED=0 .venv/bin/python bench/cloud_template_launch.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "unit"))

from test_cloud_template import MemoryAPI, MemoryDriver, _launch, _spec

import skyward.providers.cloud.template as template


def launch_seconds(nodes: int, concurrency: int) -> float:
    template.CREATE_CONCURRENCY = concurrency
    driver = MemoryDriver(MemoryAPI(boot_polls=3, create_seconds=0.1))
    started = time.perf_counter()
    _launch(driver, _spec(nodes), [])
    elapsed = time.perf_counter() - started
    driver.terminate([])
    driver.teardown()
    return elapsed


def main() -> None:
    default = template.CREATE_CONCURRENCY
    for nodes in (1, 8, 16):
        serial, parallel = launch_seconds(nodes, 1), launch_seconds(nodes, default)
        print(f"nodes={nodes:2d} one-at-a-time={serial:.2f}s parallel={parallel:.2f}s ratio={serial / parallel:.1f}x")


if __name__ == "__main__":
    main()
