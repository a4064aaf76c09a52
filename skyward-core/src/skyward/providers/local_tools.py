"""The Local provider's part of the ``skyward`` command.

Local needs no account, so its check always passes: ``skyward doctor`` names it first as
what works on a fresh machine, and ``skyward ls -p local`` answers instead of "unknown
provider". A Local pool bills nothing and leaves nothing to delete: its nodes are child
processes that end with it (``Local`` sweeps those of clients that died at its next
start), and what it keeps on disk, the environments it built, is ``skyward cache``'s. It
lists no offers: a price of zero would win every ``selection="cheapest"`` ranking that
lists Local among clouds.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

import psutil

from skyward.providers.local_gpus import detect_gpus
from skyward.providers.resources import CredentialCheck, ProviderTools, Removal, Resource
from skyward.units import GIB

PROVIDER = "local"


def machine_summary(cpus: int, memory: int, gpus: Sequence[str]) -> str:
    """One line for this machine (pure): ``4 CPUs, 15.5 GiB memory, no GPU``."""
    shown = ", ".join(f"{n} x {name}" for name, n in _counted(gpus)) if gpus else "no GPU"
    return f"{cpus} CPUs, {memory / GIB:.1f} GiB memory, {shown}"


def _counted(names: Sequence[str]) -> list[tuple[str, int]]:
    counts: dict[str, int] = {}
    for name in names:
        counts[name] = counts.get(name, 0) + 1
    return list(counts.items())


@dataclass(frozen=True, slots=True)
class LocalSession:
    """This machine, as the command sees a provider."""

    provider: str = PROVIDER
    region: str = "this machine"

    def check(self) -> CredentialCheck:
        summary = machine_summary(os.cpu_count() or 1, psutil.virtual_memory().total, [g.name for g in detect_gpus()])
        return CredentialCheck(self.provider, True, True, f"needs no account: {summary}")

    def resources(self) -> list[Resource]:
        return []

    def delete(self, resources: Sequence[Resource]) -> list[Removal]:
        return [Removal(r, removed=False, detail="Local leaves nothing to delete") for r in resources]


def open_session(config: object | None) -> LocalSession:
    del config  # Local's settings (workers, timeouts) change nothing the command shows
    return LocalSession()


TOOLS = ProviderTools(name=PROVIDER, distribution="skyward-core", open=open_session)
