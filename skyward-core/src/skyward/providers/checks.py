"""What ``skyward doctor`` checks of an account beyond its credentials.

A provider's session (:class:`skyward.providers.ResourceSession`) may also be an
:class:`AccountChecks`: then doctor runs its checks once the credentials are accepted,
and every check that fails becomes a line in "to fix". The checks are reads and local
computations only: doctor never creates, changes or deletes anything in an account.
They catch, before a first pool, what would otherwise fail it on a real cloud: a limit
already reached, an account on hold, a request shape the API documents as invalid.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable


@dataclass(frozen=True, slots=True)
class AccountCheck:
    """One check of one provider: ``name`` what was checked ("droplet limit"),
    ``detail`` what was found, ``fix`` (when not ``ok``) what to do, in one line."""

    provider: str
    """The provider checked, by its plugin name ("aws", "digitalocean")."""
    name: str
    """What was checked, in a few words ("droplet limit")."""
    ok: bool
    """Whether the check passed."""
    detail: str
    """What was found ("10 droplets allowed, 3 in use")."""
    fix: str = ""
    """What to do when the check failed, in one line; required when not ``ok``."""

    def __post_init__(self) -> None:
        if not self.name or not self.detail:
            raise ValueError("an AccountCheck needs a name and a detail")
        if not self.ok and not self.fix:
            raise ValueError(f"the failed check {self.name!r} must say what to fix")


@runtime_checkable
class AccountChecks(Protocol):
    """A session that can check its account (limits, quotas, request shapes)."""

    def account_checks(self) -> list[AccountCheck]:
        """Every check, passed or not; raises only when the API cannot be read at all."""
        ...
