"""A plugin as a third party would write one, installed from tests/ by the test task.

``Delayed(seconds=...)`` is a provider whose launch takes a known time before it starts
local nodes (so tests can tell parallel provisioning from serial), and whose launch can
be made to fail. It is registered only through the ``skyward`` entry-point group.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from skyward.plugins.contributions import DistributedBackend, ProviderPlugin
from skyward.plugins.hookspecs import hookimpl
from skyward.providers.local import Local, LocalDriver
from skyward.providers.protocol import EventSink, NodeHandle, UserDataFactory


@dataclass(frozen=True, slots=True)
class Delayed:
    seconds: float = 0.0
    fail: bool = False
    grace_period: float = 30.0
    bootstrap_timeout: float = 120.0


class DelayedDriver(LocalDriver):
    name = "delayed"

    def __init__(self, config: Delayed) -> None:
        super().__init__(Local(grace_period=config.grace_period, bootstrap_timeout=config.bootstrap_timeout))
        self.delayed = config

    def launch(self, spec: Any, user_data: UserDataFactory, emit: EventSink) -> list[NodeHandle]:
        time.sleep(self.delayed.seconds)
        if self.delayed.fail:
            raise RuntimeError("the Delayed provider was told to fail")
        return super().launch(spec, user_data, emit)


def _tagged(**options: Any) -> Any:
    """``skyward.distributed.tagged(tag=...)``: sets an environment variable around the call."""

    def decorate(fn: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            import os

            os.environ["SKYWARD_EXAMPLE_TAG"] = str(options.get("tag", ""))
            try:
                return fn(*args, **kwargs)
            finally:
                os.environ.pop("SKYWARD_EXAMPLE_TAG", None)

        return wrapper

    return decorate


@hookimpl
def skyward_providers() -> Sequence[ProviderPlugin]:
    return [ProviderPlugin(name="delayed", config_type=Delayed, create_driver=DelayedDriver)]


@hookimpl
def skyward_exports() -> Mapping[str, object]:
    return {"Delayed": Delayed}


@hookimpl
def skyward_distributed_backends() -> Sequence[DistributedBackend]:
    return [DistributedBackend(name="tagged", factory=_tagged)]
