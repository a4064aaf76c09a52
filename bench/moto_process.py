"""moto's EC2 in a process of its own, for bench/cloudstart.py.

A real AWS API does not run in the client's interpreter. moto's ``ThreadedMotoServer``
in the client's own process does: every request it answers (some 20 ms of Python for a
``RunInstances``) holds the client's interpreter lock, so 16 launch threads in the
client wait on the emulator's work, and the benchmark measured moto, not the client.
Here moto runs in a child interpreter, seeded with AWS's public images
(``tests/aws/moto_world.seed_public_images``), on a free port of 127.0.0.1.

``python bench/moto_process.py`` is the child: it prints its URL on one line and serves
until its standard input closes. :func:`moto_process` starts it, waits for that line,
and stops it on the way out.
"""

from __future__ import annotations

import os
import select
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent / "tests"
READY_TIMEOUT = 120.0
"""Seconds to wait for the child's URL: importing moto's EC2, IAM and SSM backends and
seeding them takes some 5 s on a quiet core, much more on a loaded 2-core machine."""


@contextmanager
def moto_process(region: str) -> Iterator[str]:
    """moto in a child process for the duration; yields its URL (``http://127.0.0.1:PORT``)."""
    child = subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), region],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
    )
    try:
        assert child.stdout is not None
        ready, _, _ = select.select([child.stdout], [], [], READY_TIMEOUT)
        line = child.stdout.readline().strip() if ready else ""
        if not line.startswith("http://127.0.0.1:"):
            raise RuntimeError(f"moto did not start within {READY_TIMEOUT:g} s (it said {line!r})")
        yield line
    finally:
        if child.stdin is not None:
            child.stdin.close()  # the child's signal to stop
        try:
            child.wait(timeout=10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def serve(region: str) -> None:
    if str(TESTS) not in sys.path:
        sys.path.insert(0, str(TESTS))
    from aws.moto_world import MotoServer, seed_public_images

    server = MotoServer()
    server.images = seed_public_images(region)
    print(server.url, flush=True)
    try:
        sys.stdin.read()  # until the parent closes it (or dies)
    finally:
        server.stop()


if __name__ == "__main__":
    serve(sys.argv[1])
