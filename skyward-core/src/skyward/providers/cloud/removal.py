"""Deleting listed resources one by one and saying what really went (shared by the
providers' ``skyward down`` and the marketplaces' pool-start sweep).

Every provider deletes the same way: ask for each deletion, keep going when one fails
(one stuck resource must not leave the rest billing), then list again and call a
resource removed only when the fresh listing no longer shows it. A delete call that
returned is not proof: a cloud may accept it and keep the machine. Four plugins had
written this loop out (VastAI, RunPod, DigitalOcean, Verda); it lives here once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from skyward.events import Notice
from skyward.providers.cloud.marketplace import parse_pool_label, reap_reason
from skyward.providers.protocol import EventSink
from skyward.providers.resources import Removal, Resource

Key = tuple[str, str]
"""A resource's identity across kinds: ``(kind, id)`` (a firewall and a droplet may share an id)."""


def key_of(resource: Resource) -> Key:
    return (resource.kind, resource.id)


def delete_each(
    resources: Iterable[Resource],
    delete: Callable[[Resource], object],
    error: type[Exception],
    errors: dict[Key, str] | None = None,
) -> dict[Key, str]:
    """Call ``delete`` for each resource; a deletion that raises ``error`` is recorded
    (by :func:`key_of`) and the rest still go. Any other exception propagates."""
    found: dict[Key, str] = {} if errors is None else errors
    for resource in resources:
        try:
            delete(resource)
        except error as exc:
            found[key_of(resource)] = str(exc)
    return found


def verified_removals(
    asked: Sequence[Resource],
    listed_after: Iterable[Resource],
    errors: Mapping[Key, str],
    unremoved: str = "still listed after the deletion was asked for",
) -> list[Removal]:
    """What became of each resource ``asked`` for (pure): removed unless the listing
    taken after the deletions still shows it; then the deletion's error, if it raised,
    or ``unremoved`` says why."""
    left = {key_of(r) for r in listed_after}
    return [
        Removal(r, False, errors.get(key_of(r), unremoved)) if key_of(r) in left else Removal(r, True) for r in asked
    ]


def reap_containers(
    listed: Iterable[Resource],
    delete: Callable[[str], object],
    error: type[Exception],
    now: float,
    own_pool: str | None,
    *,
    thing: str,
    verb: str,
    done: str,
) -> list[str]:
    """Delete other pools' containers that are stopped (``idle``) or past their expiry
    (:func:`~skyward.providers.cloud.marketplace.reap_reason`); returns what was done and
    what failed, in words (``"<done> <thing> <name> (<id>) left by an earlier pool: ..."``).
    One failed deletion does not stop the rest: the next pool's sweep tries it again."""
    said: list[str] = []
    for item in listed:
        reason = reap_reason(parse_pool_label(item.name), item.idle, now, own_pool)
        if reason is None:
            continue
        try:
            delete(item.id)
            said.append(f"{done} {thing} {item.name} ({item.id}) left by an earlier pool: {reason}")
        except error as exc:
            said.append(f"could not {verb} {thing} {item.name} ({item.id}) left by an earlier pool: {exc}")
    return said


def sweep_with_notices(reap: Callable[[], Iterable[str]], emit: EventSink, error: type[Exception], what: str) -> None:
    """Run a pool-start sweep and show what it did as notices. An API ``error`` while
    sweeping is a notice too, never a failure: the sweep is a safety net for earlier
    pools, not a precondition of this one (``what``: ``"pods"``, ``"instances"``)."""
    try:
        for message in reap():
            emit(Notice(message=message))
    except error as exc:
        emit(Notice(message=f"could not look for {what} earlier pools left behind: {exc}"))


def sweep_messages(deleted: Iterable[tuple[object, str, str]], failures: Iterable[str], thing: str) -> list[str]:
    """A reaper's report in words: each ``(id, name, reason)`` deleted (``thing``:
    ``"droplet"``, ``"Verda instance"``), then each failure (tried again next time)."""
    said = [f"deleted {thing} {name} ({ident}) left by an earlier pool: {why}" for ident, name, why in deleted]
    return said + [f"could not delete a leftover of an earlier pool: {failure}" for failure in failures]
