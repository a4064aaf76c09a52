"""Values that plugins contribute through the hooks.

A leaf: it imports nothing from skyward but the errors, so the registry and the provider
contract (``skyward.providers`` re-exports :class:`ProviderPlugin` and
:class:`VolumePlugin`) both import it without a cycle.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeAlias, TypeVar

from skyward.errors import ConfigurationError

if TYPE_CHECKING:  # types only: providers.protocol imports the image and the events
    from skyward.providers.protocol import ProviderDriver

C = TypeVar("C")
V = TypeVar("V")


@dataclass(frozen=True, slots=True)
class ProviderPlugin(Generic[C]):
    """A provider: its user-facing config class and how to build its driver.

    ``name`` is what events report (``"aws"``, ``"local"``); ``config_type`` is the class a
    user instantiates (``AWS(region=...)``); ``create_driver(config)`` gets an instance of
    it and returns a :class:`skyward.providers.ProviderDriver` (usually the driver class
    itself: ``create_driver=AWSDriver``).
    """

    name: str
    """What events report (``"aws"``, ``"local"``)."""
    config_type: type[C]
    """The class a user instantiates (``AWS(region=...)``)."""
    create_driver: Callable[[C], ProviderDriver]
    """Builds the driver from a config instance; usually the driver class itself."""


AnyProviderPlugin: TypeAlias = ProviderPlugin[Any]
"""Any provider's record, whatever its config type: what the registry holds (a list of
records over different config types has no narrower type in Python's type system)."""


@dataclass(frozen=True, slots=True)
class VolumePlugin(Generic[V]):
    """A volume type and the shell lines that mount an instance of it on a node."""

    name: str
    """The volume type's name (``"s3"``)."""
    volume_type: type[V]
    """The class a user passes as ``volume=`` (``S3Volume``)."""
    mount_script: Callable[[V], str]
    """The shell lines that mount a volume of this type on a node, run in its bootstrap."""


AnyVolumePlugin: TypeAlias = VolumePlugin[Any]
"""Any volume type's record (see :data:`AnyProviderPlugin`)."""


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
