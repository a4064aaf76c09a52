#!/usr/bin/env python3
"""Kept pools: reattach plus first result against a cold start of the same pool.

``python bench/kept.py --quick`` (CI: 2 rounds each on Local and the DigitalOcean fake) or
``--full`` (5 rounds; rewrites the results block of bench/README.md). Each round opens a
kept pool (``name=``, ``keep_alive=``) and times ``open()`` to ``inc(1) >> pool``
returning: the cold start. Leaving the ``with`` block detaches; ``sky.attach(name)`` to
``inc(1) >> attached`` returning is the reattach, then ``stop()`` ends the pool. Both are
timed in this process (an attaching script also pays its interpreter start, ~0.1 s, which
no pool choice changes). On the fake, every droplet runs its own user-data in the
emulated-instance harness, so the cold start includes a real bootstrap on this machine
(uv from the offline mirror, the agent), and none of a real cloud's boot time: a real
droplet takes 30 to 90 s more, so the cloud ratio here is an upper bound.

The target, a same-run ratio reported and never asserted: reattach at most 0.05x a cold
start on a cloud. Runs only in a network namespace with nothing but loopback up (it
re-executes itself under ``unshare --net``), as the cloud benchmarks do.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
for _path in (ROOT, ROOT / "tests", ROOT / "bench"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from cloudstart import fake_cloud, reexec_isolated  # noqa: E402

import skyward as sky  # noqa: E402

README = ROOT / "bench" / "README.md"
README_START = "<!-- kept:start -->"
README_END = "<!-- kept:end -->"
TARGET = 0.05


@sky.compute
def inc(x: int) -> int:
    return x + 1


def one_round(provider: Any) -> tuple[float, float]:
    """(cold start to the first result, reattach to the first result), seconds."""
    name = f"bench-{uuid.uuid4().hex[:8]}"
    started = time.perf_counter()
    with sky.ComputePool(provider=provider, name=name, keep_alive=120, timeout=900, display="quiet") as pool:
        assert inc(1) >> pool == 2
        cold = time.perf_counter() - started
    started = time.perf_counter()
    attached = sky.attach(name, display="quiet")
    try:
        assert inc(2) >> attached == 3
        again = time.perf_counter() - started
    finally:
        attached.stop()
    return cold, again


def measure(label: str, provider: Any, rounds: int) -> dict[str, float]:
    one_round(provider)  # warm-up: imports, the environment cache, the mirror
    runs = [one_round(provider) for _ in range(rounds)]
    cold = statistics.median(r[0] for r in runs)
    again = statistics.median(r[1] for r in runs)
    print(f"{label}: cold start {cold:.2f} s, reattach {again:.3f} s, ratio {again / cold:.3f}x", flush=True)
    return {"cold": cold, "reattach": again, "ratio": again / cold}


def markdown(results: dict[str, dict[str, float]], rounds: int) -> str:
    rows = [
        f"| {label} | {r['cold']:.2f} s | {r['reattach']:.3f} s | {r['ratio']:.3f}x |" for label, r in results.items()
    ]
    return "\n".join(
        [
            README_START,
            f"Measured {time.strftime('%Y-%m-%d')} with `python bench/kept.py --full` ({rounds} rounds, medians;",
            "cold start and reattach each to the first result of `inc(1) >> pool`). Target: reattach at most",
            f"{TARGET}x a cold start on a cloud.",
            "",
            "| pool | cold start | reattach | ratio |",
            "| --- | --- | --- | --- |",
            *rows,
            README_END,
        ]
    )


def write_readme(block: str) -> None:
    text = README.read_text()
    if README_START in text:
        head, rest = text.split(README_START, 1)
        text = head + block + rest.split(README_END, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    README.write_text(text)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--quick", action="store_true", help="2 rounds each (CI)")
    mode.add_argument("--full", action="store_true", help="5 rounds each; rewrites bench/README.md's block")
    args = parser.parse_args(argv)
    reexec_isolated([__file__, *argv])
    rounds = 5 if args.full else 2
    results = {"Local": measure("Local", sky.Local(), rounds)}
    with fake_cloud("digitalocean") as emulated:
        results["DigitalOcean (fake, emulated droplets)"] = measure("DigitalOcean fake", emulated.config, rounds)
    if args.full:
        write_readme(markdown(results, rounds))
    cloud = results["DigitalOcean (fake, emulated droplets)"]["ratio"]
    print(f"cloud reattach ratio {cloud:.3f}x (target <= {TARGET}x): {'met' if cloud <= TARGET else 'NOT met'}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main(sys.argv[1:]))
