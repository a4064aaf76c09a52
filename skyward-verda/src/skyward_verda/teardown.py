"""Deleting Verda instances so that nothing of them keeps billing (the pool's teardown,
the reaper and ``skyward down`` share it).

Three things the API does that a plain "delete these" misses:

* ``PUT /instances`` may answer 207: some instances deleted, others not, each with its
  own ``status``/``error`` (verdacloud-sdk-go ``InstanceActionResult``). The failed ones
  are asked again (a conflict while an instance changes state passes), and what is still
  left after the last try is reported by id, never silently dropped.
* The OS volume goes with its instance only when named in ``volume_ids``, and skips the
  trash only with ``delete_permanently`` (see :meth:`VerdaAPI.delete_instances`).
* A spot instance Verda discontinued is gone, but its OS volume is kept detached (the
  default ``on_spot_discontinue`` policy, ``keep_detached``: verda 1.20.0) and keeps
  billing: it is deleted on its own (:meth:`VerdaAPI.delete_volumes`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from skyward_verda.api import VerdaAPI, VerdaAPIError

GONE = frozenset({"deleting", "deleted"})  # a delete was accepted: nothing left to ask
DISCONTINUED = "discontinued"  # a reclaimed spot instance: its OS volume may be left


@dataclass(frozen=True, slots=True)
class Doomed:
    """An instance to delete, as the API last described it."""

    id: str
    status: str
    os_volume_id: str | None

    @classmethod
    def of(cls, raw: Mapping[str, Any]) -> Doomed:
        volume = raw.get("os_volume_id")
        return cls(str(raw.get("id", "")), str(raw.get("status", "")), str(volume) if volume else None)


def delete_instances(
    api: VerdaAPI,
    instances: Sequence[Doomed],
    *,
    attempts: int = 3,
    sleep: Callable[[float], None],
    backoff: float = 1.0,
) -> list[str]:
    """Delete the instances with their OS volumes, and the volumes discontinued spot
    instances left. Returns one line per thing still there after ``attempts`` tries
    (empty: all gone); raises only for an API that cannot be reached at all."""
    volume_of = {i.id: i.os_volume_id for i in instances}
    pending = [i.id for i in instances if i.status not in GONE and i.status != DISCONTINUED]
    orphans = [i.os_volume_id for i in instances if i.status == DISCONTINUED and i.os_volume_id]
    left: dict[str, str] = {}
    for attempt in range(attempts):
        if not pending:
            break
        if attempt:
            sleep(backoff * 2 ** (attempt - 1))
        try:
            results = api.delete_instances(pending, [v for i in pending if (v := volume_of.get(i))])
        except VerdaAPIError as error:
            left = dict.fromkeys(pending, str(error))
            continue
        failed = [r for r in results if not r.ok and r.status_code != 404]  # 404: gone already
        left = {r.instance_id: f"{r.error or 'refused'} (HTTP {r.status_code or '?'})" for r in failed}
        pending = list(left)
    failures = [f"instance {ident}: {why}" for ident, why in left.items()]
    if orphans:
        try:
            api.delete_volumes(orphans)
        except VerdaAPIError as error:
            failures.append(f"OS volume(s) {', '.join(orphans)} of discontinued spot instance(s): {error}")
    return failures
