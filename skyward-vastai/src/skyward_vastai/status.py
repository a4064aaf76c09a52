"""What a VastAI instance's status says, as the cloud template's ``InstanceState``.

Its own module because two read it: the driver (is a node up, or stopped: outbid) and
the resource listing (a stopped instance is idle, its disk still bills). The listing is
also what the driver's start-of-pool sweep runs, so neither may import the other for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from skyward.providers.cloud import InstanceState

STOPPED = frozenset({"exited", "stopped", "offline", "inactive"})
"""``actual_status`` values of an instance that is not running and will not start by
itself (a spot instance outbid is ``exited``/``stopped``)."""


def state_of(raw: Mapping[str, Any], mapped: bool) -> InstanceState:
    """An instance's state from its listing: running only once its ports are ``mapped``
    (before that the agent is unreachable), stopped when VastAI or its owner stopped it."""
    status = str(raw.get("actual_status") or "")
    if status in STOPPED or raw.get("intended_status") == "stopped":
        return InstanceState.STOPPED
    return InstanceState.RUNNING if status == "running" and mapped else InstanceState.PENDING
