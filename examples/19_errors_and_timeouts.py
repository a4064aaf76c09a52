"""When things go wrong: remote exceptions, a killed worker, a pool timeout, bad input.

- A remote exception is raised here as its own type, the remote traceback as its cause.
- A worker killed mid-task fails that task with ``WorkerDiedError``; the node starts a
  new worker and keeps serving.
- ``timeout=`` stops the pool after that many seconds; a task still running fails with
  ``PoolTimeoutError``. Nodes also arm a TTL, so nothing outlives the pool.
- Bad options fail at construction with ``ConfigurationError``, before anything starts.

Run it with:  .venv/bin/python examples/19_errors_and_timeouts.py
"""

from __future__ import annotations

import os
import signal
import time

from _provider import provider

import skyward as sky


@sky.compute
def divide(a: float, b: float) -> float:
    return a / b


@sky.compute
def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


@sky.compute
def sleep(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


def main() -> None:
    try:
        sky.ComputePool(nodes=0)
    except sky.ConfigurationError as error:
        print(f"ConfigurationError: {error}")

    with sky.ComputePool(provider=provider(), display="quiet") as pool:
        try:
            divide(1, 0) >> pool
        except ZeroDivisionError as error:
            print(f"ZeroDivisionError, as raised remotely: {error}; cause: {type(error.__cause__).__name__}")
        try:
            die() >> pool
        except sky.WorkerDiedError as error:
            print(f"WorkerDiedError: {error}")
        print(f"the node still serves: 6 / 3 = {divide(6, 3) >> pool}")

    with sky.ComputePool(provider=provider(), timeout=3, display="quiet") as pool:
        try:
            sleep(30) >> pool
        except sky.PoolTimeoutError as error:
            print(f"PoolTimeoutError: {error}")


if __name__ == "__main__":
    main()
