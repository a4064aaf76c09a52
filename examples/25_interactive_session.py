"""The notebook flow (examples/notebooks/quickstart.ipynb) as a script, then a kept pool.

Part 1 opens a pool with ``.open()`` (no ``with``: in a notebook it lives across cells),
runs a function and a class defined right here in ``__main__``, shows a remote exception
with this file's lines, interrupts a long task (a timer plays the stop button), runs
again on the same workers, and closes in ``finally``.

Part 2 keeps a pool: ``name=`` and ``keep_alive=`` let its nodes outlive the client that
opened them, and ``sky.attach`` (from this process here, from any later script or
kernel of yours in real use) reconnects to the same workers in about a second.

Run it with:  .venv/bin/python examples/25_interactive_session.py
"""

from __future__ import annotations

import os
import signal
import threading
import time

from _provider import provider

import skyward as sky


class Point:
    def __init__(self, x: float, y: float) -> None:
        self.x, self.y = x, y


@sky.compute
def norm2(p: Point) -> float:
    return p.x**2 + p.y**2


@sky.compute
def slow(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


@sky.compute
def inverse(x: float) -> float:
    return 1 / x  # fails for 0


@sky.compute
def worker_pid() -> int:
    return os.getpid()


def interrupt_in(seconds: float) -> threading.Timer:
    """Send this process SIGINT after ``seconds``: what Ctrl-C or a notebook's stop button does."""
    timer = threading.Timer(seconds, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    return timer


def part_one() -> None:
    pool = sky.ComputePool(provider=provider(), nodes=1, display="quiet")
    pool.open()
    try:
        print("norm2(Point(3, 4)) =", norm2(Point(3, 4)) >> pool)

        try:
            inverse(0) >> pool
        except ZeroDivisionError as error:
            print("remote error:", type(error).__name__, "(its traceback shows this file's line)")

        timer = interrupt_in(1.0)
        started = time.monotonic()
        try:
            slow(600) >> pool
        except KeyboardInterrupt:
            print(f"interrupted after {time.monotonic() - started:.1f} s; the task was cancelled on the worker")
        timer.join()

        print("the same worker runs the next call at once:", sky.gather(norm2(Point(1, 1)), norm2(Point(2, 2))) >> pool)
    finally:
        pool.close()


def part_two() -> None:
    name = f"example-{os.getpid()}"  # a name of its own: two runs at once never meet
    with sky.ComputePool(provider=provider(), name=name, keep_alive=60, display="quiet") as pool:
        first = worker_pid() >> pool
    # the with block detached: the node still runs, with the same worker
    started = time.monotonic()
    attached = sky.attach(name, display="quiet")
    try:
        again = worker_pid() >> attached
        print(f"attached and ran in {time.monotonic() - started:.2f} s on the same worker: {first == again}")
    finally:
        attached.stop()  # a kept pool's close() would only detach; stop() ends its nodes


def main() -> None:
    part_one()
    part_two()


if __name__ == "__main__":
    main()
