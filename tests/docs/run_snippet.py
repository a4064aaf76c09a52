"""Runs one documentation snippet: ``python run_snippet.py MODE FILE``.

MODE ``run`` executes FILE as a script. ``cloud`` and ``gpu`` execute it until its first
pool would start: ``ComputePool.open`` and ``MultiPool.open`` are replaced, in this
throw-away process only, by one that raises ``WouldProvision``, which counts as success. Construction, with all its
validation, has happened by then; nothing was provisioned.
"""

from __future__ import annotations

import runpy
import sys


class WouldProvision(BaseException):
    """The snippet reached the point where a pool would start."""


def _refuse(self: object) -> None:
    raise WouldProvision


def main(mode: str, path: str) -> int:
    if mode != "run":
        from skyward.api.multipool import MultiPool
        from skyward.api.pool import ComputePool

        ComputePool.open = _refuse  # type: ignore[method-assign]
        MultiPool.open = _refuse  # type: ignore[method-assign]
    try:
        runpy.run_path(path, run_name="__main__")
    except WouldProvision:
        print("constructed; stopped where the pool would be provisioned", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
