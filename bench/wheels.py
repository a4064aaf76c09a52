#!/usr/bin/env python3
"""skyward as a wheel built once on the client, against a build of the checkout per node.

``.venv/bin/python bench/wheels.py`` (run from a checkout: skyward-core an editable
install). In one run, with the real uv of this environment:

- ``build``: the wheels of every local requirement (skyward-core and the plugins), into an
  empty cache (``WheelCache``; what the first cloud pool after an edit pays once);
- ``cache hit``: the same again (what every later pool pays: a digest of the sources and
  a sha256 of each cached wheel);
- per node, into a fresh virtual environment, dependencies left out on both sides:
  ``checkout``: ``uv pip install --no-deps 'skyward-core @ file://...'`` after ``uv cache
  clean skyward-core``, i.e. the PEP 517 build a fresh node ran before (and only where the
  path exists: on a real cloud node it does not); ``wheel``: ``uv pip install --no-deps``
  of the cached wheel, what a node runs now after receiving it.

Prints a table of medians; same-run ratios, never asserted.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from skyward.bootstrap import client_requirements
from skyward.providers.contexts import uv_path
from skyward.wheels.cache import WheelCache, local_source

ROUNDS = 5


def _timed(command: list[str]) -> float:
    began = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True)
    return time.perf_counter() - began


def main() -> int:
    uv = uv_path()
    core, pinned = client_requirements()
    requirements = [core, *pinned]
    local = [r for r in requirements if local_source(r) is not None]
    if uv is None or not local:
        print("needs uv and an editable (checkout) install of skyward-core", file=sys.stderr)
        return 2
    builds, hits, checkout, wheel = [], [], [], []
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        for round_ in range(ROUNDS):
            cache = WheelCache(root / f"cache-{round_}")
            began = time.perf_counter()
            wheels = cache.wheels(requirements)
            builds.append(time.perf_counter() - began)
            began = time.perf_counter()
            cache.wheels(requirements)
            hits.append(time.perf_counter() - began)
            (core_wheel,) = [w for w in wheels if w.name == "skyward-core"]
            for label, spec, times in (
                ("checkout", [core], checkout),
                ("wheel", [str(core_wheel.path)], wheel),
            ):
                # a fresh node's uv has built nothing: its cache holds no build of skyward-core
                subprocess.run([uv, "cache", "clean", "skyward-core"], check=True, capture_output=True)
                env = root / f"env-{label}-{round_}"
                subprocess.run([uv, "venv", "--quiet", str(env)], check=True, capture_output=True)
                python = str(env / "bin/python")
                install = [uv, "pip", "install", "--quiet", "--offline", "--no-deps", "--python", python]
                times.append(_timed([*install, *spec]))
    rows = [
        (f"build {len(local)} wheels (empty cache)", builds),
        (f"cache hit, {len(local)} wheels", hits),
        ("per node: skyward-core from the checkout (PEP 517 build)", checkout),
        ("per node: skyward-core from the wheel", wheel),
    ]
    print(f"| step (median of {ROUNDS}) | seconds |\n|---|---|")
    for label, times in rows:
        print(f"| {label} | {statistics.median(times):.3f} |")
    ratio = statistics.median(checkout) / statistics.median(wheel)
    print(f"\nper node, checkout build / wheel install: {ratio:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
