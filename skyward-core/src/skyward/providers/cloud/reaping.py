"""Deleting a listing's leftovers one by one, where one failure must not stop the rest."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any


def delete_doomed(
    resources: Iterable[Mapping[str, Any]],
    doomed: Callable[[str], bool],
    delete: Callable[[Mapping[str, Any]], object],
    what: str,
    error: type[Exception],
    failures: list[str],
) -> list[str]:
    """Delete each listed resource whose ``name`` is ``doomed``; returns the names deleted.

    A deletion that raises ``error`` is added to ``failures`` (as ``"<what> <name>: ..."``)
    and tried again by the next reaper; any other exception propagates.
    """
    deleted: list[str] = []
    for resource in resources:
        name = str(resource.get("name", ""))
        if not doomed(name):
            continue
        try:
            delete(resource)
        except error as exc:
            failures.append(f"{what} {name}: {exc}")
            continue
        deleted.append(name)
    return deleted
