"""Values that plugins contribute through the hooks."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from skyward.errors import ConfigurationError


@dataclass(frozen=True, slots=True)
class ProviderPlugin:
    """A provider: its user-facing config class and how to build its driver.

    ``name`` is what events report (``"aws"``, ``"local"``); ``config_type`` is the class a
    user instantiates (``AWS(region=...)``); ``create_driver(config)`` returns an object
    satisfying :class:`skyward.providers.protocol.ProviderDriver`.
    """

    name: str
    config_type: type
    create_driver: Callable[[Any], Any]


@dataclass(frozen=True, slots=True)
class VolumePlugin:
    """A volume type and the shell lines that mount an instance of it on a node."""

    name: str
    volume_type: type
    mount_script: Callable[[Any], str]


@dataclass(frozen=True, slots=True)
class DistributedBackend:
    """``skyward.distributed.<name>(**options)`` returns a decorator for the user's function."""

    name: str
    factory: Callable[..., Callable[[Callable[..., Any]], Callable[..., Any]]]


@dataclass(frozen=True, slots=True)
class BootstrapStep:
    """A named shell fragment of the bootstrap script; ``name`` shows in BootstrapProgress."""

    name: str
    script: str

    def __post_init__(self) -> None:
        # The name goes into the node's script and, on a cloud node, into the one word per
        # step that its agent reports: a space or a quote would split or break both.
        if not isinstance(self.name, str) or not _STEP_NAME.fullmatch(self.name):
            raise ConfigurationError(
                f"BootstrapStep(name={self.name!r}): a step's name is one word of at most 40 letters, "
                "digits, '_', '.' or '-', starting with a letter or digit (it shows in BootstrapProgress)"
            )


_STEP_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,39}")
