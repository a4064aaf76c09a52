"""What a provider plugin gives the ``skyward`` command: its resources, their removal, its
credential check, and the hook record that opens a session.

A provider plugin contributes a :class:`ProviderTools` through the
``skyward_provider_tools`` hook; ``open(config)`` returns a session that satisfies
:class:`ResourceSession` and, where the provider can, :class:`~skyward.providers.offers.OfferSource`
and :class:`AddressSource`. Everything that crosses this seam is a frozen value, so the
command (and a third-party provider) never depends on a provider's own API types. These
are part of the provider contract (``skyward.providers``), below the command: the CLI
imports them from here, a provider never imports the CLI.
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

__all__ = [
    "FIREWALL", "INSTANCE", "INSTANCE_PROFILE", "KEY_PAIR", "ROLE", "SECURITY_GROUP", "SSH_KEY", "STARTUP_SCRIPT",
    "TAG", "VOLUME", "AddressSource", "CredentialCheck", "ProviderTools", "Removal", "Resource", "ResourceSession",
    "parse_number", "parse_time",
]  # fmt: skip

# Kinds of resource a pool can leave; providers may add others (the command shows any).
INSTANCE = "instance"
"""A machine (EC2 instance, droplet, Verda instance, pod)."""
SECURITY_GROUP = "security-group"
"""An AWS security group."""
FIREWALL = "firewall"
"""A DigitalOcean cloud firewall."""
KEY_PAIR = "key-pair"
"""An AWS key pair."""
SSH_KEY = "ssh-key"
"""An SSH key registered with a provider."""
ROLE = "role"
"""An AWS IAM role."""
INSTANCE_PROFILE = "instance-profile"
"""An AWS IAM instance profile."""
VOLUME = "volume"
"""A disk volume left without its machine (AWS EBS)."""
STARTUP_SCRIPT = "startup-script"
"""A Verda startup script."""
TAG = "tag"
"""A DigitalOcean tag."""


@dataclass(frozen=True, slots=True)
class Resource:
    """One thing a Skyward pool made on a provider, found by its pool id and expiry marks.

    ``created`` and ``expires_at`` are Unix times (``None`` where the provider does not
    say); ``hourly_price`` is USD per hour while it exists (``None``: free or unknown).
    ``idle`` marks a machine that no longer runs a node but still bills (a powered-off
    droplet, a shut-down Verda instance, a stopped EC2 instance): Skyward never starts
    one again, so it may go before its expiry.
    """

    provider: str
    """The provider's name (``"aws"``)."""
    region: str
    """Where it is."""
    pool_id: str
    """The pool that made it (``sky-1a2b3c4d``)."""
    kind: str
    """What it is: ``instance``, ``security-group``, ``firewall``, ``key-pair``, ... (the constants of this
    module)."""
    id: str
    """The provider's id of it."""
    state: str
    """The provider's word for its state (``running``, ``stopped``, ...)."""
    created: float | None
    """When it was made, Unix time, or ``None`` where the provider does not say."""
    expires_at: float | None
    """When its pool expires, Unix time, or ``None`` where it carries no mark."""
    hourly_price: float | None
    """USD per hour while it exists, or ``None``: free or unknown."""
    name: str = ""
    """Its name, where it has one besides its id."""
    idle: bool = False
    """A machine that no longer runs a node but still bills; it may go before its expiry."""

    def expired(self, now: float) -> bool:
        """Whether its pool's expiry has passed at ``now`` (Unix time)."""
        return self.expires_at is not None and now > self.expires_at

    def age(self, now: float) -> float | None:
        """Seconds since it was made, at ``now``; ``None`` where unknown."""
        return None if self.created is None else max(0.0, now - self.created)

    def expires_in(self, now: float) -> float | None:
        """Seconds until its pool's expiry (negative once past); ``None`` without a mark."""
        return None if self.expires_at is None else self.expires_at - now

    def cost_so_far(self, now: float) -> float | None:
        """USD it has cost since it was made, at ``now``; ``None`` where unknown."""
        age = self.age(now)
        if age is None or self.hourly_price is None:
            return None
        return self.hourly_price * age / 3600.0

    @property
    def label(self) -> str:
        """How a report names it: ``instance i-0abc (skyward-sky-1-node-0)``."""
        shown = f"{self.kind} {self.id}"
        return f"{shown} ({self.name})" if self.name and self.name != self.id else shown


@dataclass(frozen=True, slots=True)
class Removal:
    """What became of one resource the command was asked to delete. ``removed`` is true
    only when a fresh listing no longer shows it (or shows it terminated)."""

    resource: Resource
    """The resource asked to be deleted."""
    removed: bool
    """True only when a fresh listing no longer shows it (or shows it terminated)."""
    detail: str = ""
    """Why not, when it was not removed."""


@dataclass(frozen=True, slots=True)
class CredentialCheck:
    """Whether a provider's credentials were found and accepted by one harmless read call;
    ``fix`` says, in one line, what to do when they were not. ``reachable`` is false when
    that read got no answer at all (no network, a name that does not resolve): the
    credentials were then not judged, and ``detail`` says which host could not be reached
    and why, so the command never advises a new token to a user who is offline."""

    provider: str
    """The provider's name."""
    found: bool
    """Whether credentials were found where the provider looks."""
    valid: bool
    """Whether the provider accepted them (one read call that changes nothing)."""
    detail: str
    """What was found, or what the provider answered."""
    fix: str = ""
    """What to do, in one line, when they were not found or not accepted."""
    reachable: bool = True
    """False when the read got no answer at all: the credentials were not judged."""


@runtime_checkable
class ResourceSession(Protocol):
    """A provider opened with the user's credentials: list, delete, check."""

    @property
    def provider(self) -> str:
        """The provider's name (``"aws"``), as ``skyward ls`` shows it."""
        ...

    @property
    def region(self) -> str:
        """The region this session lists and deletes in."""
        ...

    def check(self) -> CredentialCheck:
        """Credentials found and valid (one read call that changes nothing)."""
        ...

    def resources(self) -> list[Resource]:
        """Every resource Skyward made that this provider still has (terminated
        instances left out)."""
        ...

    def delete(self, resources: Sequence[Resource]) -> list[Removal]:
        """Delete these (in the order the provider needs: instances first), then look
        again and report each one as removed or not. Never raises for one failure."""
        ...


@runtime_checkable
class AddressSource(Protocol):
    """A provider whose firewall opens the agent port to the client's address."""

    def client_address(self) -> str:
        """The address (CIDR) the firewall would open; raises ConfigurationError when it
        cannot be found."""
        ...


@dataclass(frozen=True, slots=True)
class ProviderTools:
    """A provider's part of the ``skyward`` command.

    ``name`` is the provider's name (``"aws"``); ``distribution`` the package that
    brings it (for ``doctor``'s versions); ``open(config)`` returns a
    :class:`ResourceSession` for ``config`` (an instance of the provider's config
    class), or for the provider's defaults and the environment when ``config`` is None.
    ``open`` itself makes no network call.
    """

    name: str
    """The provider's name (``"aws"``), as ``--provider`` takes it."""
    distribution: str
    """The package that brings the provider (``"skyward-aws"``), for ``doctor``'s versions."""
    open: Callable[[object | None], ResourceSession]
    """Opens a :class:`ResourceSession` for a config (``None``: the defaults and the environment);
    makes no network call itself."""


def parse_time(text: object) -> float | None:
    """An ISO 8601 time (``2026-01-02T03:04:05Z``, with or without offset) as a Unix
    time; ``None`` for anything else. Used for the ``created_at`` fields of cloud APIs."""
    if not isinstance(text, str) or not text:
        return None
    try:
        moment = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    stamp = moment.timestamp()
    return stamp if math.isfinite(stamp) else None


def parse_number(value: object) -> float | None:
    """A JSON number as a float; ``None`` for anything else (a missing or null price, a
    string). Used for the prices and Unix times of cloud APIs' listings."""
    return float(value) if isinstance(value, int | float) else None
