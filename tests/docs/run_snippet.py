"""Runs one documentation snippet: ``python run_snippet.py MODE FILE [PROVIDER ...]``.

MODE ``run`` executes FILE as a script. ``cloud`` and ``gpu`` execute it until its first
pool would start: ``ComputePool.open`` and ``MultiPool.open`` are replaced, in this
throw-away process only, by one that raises ``WouldProvision``, which counts as success. Construction, with all its
validation, has happened by then; nothing was provisioned.

With PROVIDERs (an example's ``SKYWARD_PROVIDER`` choices), FILE runs once per provider in
this one process, each a fresh ``__main__``: an example's imports (torch, transformers)
are paid once, not once per cloud (156 interpreters became 26 for the examples on every
cloud). Every provider runs, each that ran through saying so; the exit status is 1 when
any failed, each failure printed with the provider it failed on.
"""

from __future__ import annotations

import os
import runpy
import sys
import traceback


class WouldProvision(BaseException):
    """The snippet reached the point where a pool would start."""


def _refuse(self: object) -> None:
    raise WouldProvision


def main(mode: str, path: str, providers: list[str]) -> int:
    if mode != "run":
        from skyward.api.multipool import MultiPool
        from skyward.api.pool import ComputePool

        ComputePool.open = _refuse  # type: ignore[method-assign]
        MultiPool.open = _refuse  # type: ignore[method-assign]
    if not providers:
        _run(path)
        return 0
    failed = []
    for provider in providers:
        os.environ["SKYWARD_PROVIDER"] = provider
        try:
            _run(path)
            print(f"ran with SKYWARD_PROVIDER={provider}", file=sys.stderr)
        except BaseException:  # SystemExit included: report it and go on with the next provider
            print(f"--- {path} failed on SKYWARD_PROVIDER={provider}:", file=sys.stderr)
            traceback.print_exc()
            failed.append(provider)
    if failed:
        print(f"failed on: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


def _run(path: str) -> None:
    try:
        runpy.run_path(path, run_name="__main__")
    except WouldProvision:
        print("constructed; stopped where the pool would be provisioned", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3:]))
