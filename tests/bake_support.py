"""What the baked-image tests of every provider share (tests/coldstart for AWS,
tests/digitalocean): a fresh Image to bake, and a pool started on it that reports which
bootstrap steps ran. A module name of its own: test folders here are not packages."""

from __future__ import annotations

import uuid
from typing import Any

import skyward
from skyward import ComputePool, compute
from skyward.events import BootstrapProgress

ENVIRONMENT_STEPS = {"apt", "uv", "deps", "skyward"}  # what a baked start skips


@compute
def square(x: int) -> int:
    return x * x


def fresh_image() -> skyward.Image:
    """An Image with a content hash of its own: the emulated clouds live for the session,
    and so do the images they bake."""
    return skyward.Image(env={"BAKE_TEST": uuid.uuid4().hex}, bake=True)


def start_pool(provider: Any, image: skyward.Image, **pool: Any) -> tuple[list[Any], str, list[str]]:
    """A one-node pool on ``image`` that runs a task: its events, node 0's instance id and
    the bootstrap steps it reported."""
    events: list[Any] = []
    with ComputePool(provider=provider, image=image, display="quiet", on_event=events.append, **pool) as opened:
        assert square(7) >> opened == 49
        instance_id = opened.nodes[0].instance_id
    steps = [e.step for e in events if isinstance(e, BootstrapProgress)]
    return events, instance_id, steps
