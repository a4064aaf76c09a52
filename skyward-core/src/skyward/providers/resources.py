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
SECURITY_GROUP = "security-group"
FIREWALL = "firewall"
KEY_PAIR = "key-pair"
SSH_KEY = "ssh-key"
ROLE = "role"
INSTANCE_PROFILE = "instance-profile"
VOLUME = "volume"
STARTUP_SCRIPT = "startup-script"
TAG = "tag"


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
    region: str
    pool_id: str
    kind: str
    id: str
    state: str
    created: float | None
    expires_at: float | None
    hourly_price: float | None
    name: str = ""
    idle: bool = False

    def expired(self, now: float) -> bool:
        return self.expires_at is not None and now > self.expires_at

    def age(self, now: float) -> float | None:
        return None if self.created is None else max(0.0, now - self.created)

    def expires_in(self, now: float) -> float | None:
        return None if self.expires_at is None else self.expires_at - now

    def cost_so_far(self, now: float) -> float | None:
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
    removed: bool
    detail: str = ""


@dataclass(frozen=True, slots=True)
class CredentialCheck:
    """Whether a provider's credentials were found and accepted by one harmless read call;
    ``fix`` says, in one line, what to do when they were not. ``reachable`` is false when
    that read got no answer at all (no network, a name that does not resolve): the
    credentials were then not judged, and ``detail`` says which host could not be reached
    and why, so the command never advises a new token to a user who is offline."""

    provider: str
    found: bool
    valid: bool
    detail: str
    fix: str = ""
    reachable: bool = True


@runtime_checkable
class ResourceSession(Protocol):
    """A provider opened with the user's credentials: list, delete, check."""

    @property
    def provider(self) -> str: ...

    @property
    def region(self) -> str: ...

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
    distribution: str
    open: Callable[[object | None], ResourceSession]


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
