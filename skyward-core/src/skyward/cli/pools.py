"""The pools this machine recorded, as ``skyward ls``, ``logs`` and ``down`` show them.

The table and JSON are made from values (pure); ``live_pools`` reads the store and forgets
the records whose pool is over; ``follow`` is the one loop, its reading, clock and sleep
injected.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from rich import box
from rich.table import Table

from skyward.api.kept.record import (
    PoolRecord,
    PoolStatus,
    PoolStore,
    client_alive,
    is_over,
    iter_records,
    keep_alive_ends,
    seen_status,
)
from skyward.api.kept.stop import StopReport
from skyward.display.formatting import duration, money

FOLLOW_POLL = 0.25
"""Seconds between two reads of a followed ``output.log`` that had nothing new: a line
shows up within a quarter second, and an idle follower costs one ``read`` four times a
second."""

NOT_KEPT = "with its client"

OPENING = 10.0
"""Seconds a record without a status is taken for a pool still opening: the client writes
its first status right after the record (``Registration.register``), so a record seen
between the two must not be removed as one whose client is gone."""


@dataclass(frozen=True, slots=True)
class PoolRow:
    """One recorded pool as it stands: its record, its status (a dead client's read as
    detached, ``seen_status``) and whether a client is attached now."""

    record: PoolRecord
    status: PoolStatus | None
    attached: bool

    @property
    def client_pid(self) -> int | None:
        return self.status.client_pid if self.attached and self.status is not None else None

    def tasks(self) -> tuple[int, int]:
        """(running, queued): the attached client's; 0, 0 with no client."""
        if not self.attached or self.status is None:
            return 0, 0
        return self.status.tasks_running, self.status.tasks_queued

    def idle_for(self, now: float) -> float | None:
        """Seconds since the pool last had a task (None while busy); a pool with no client
        is idle since its client left."""
        status = self.status
        if status is None:
            return now - self.record.created
        since = status.idle_since
        if since is None and not self.attached:
            since = status.detached_at or self.record.created
        return None if since is None else max(0.0, now - since)

    def keep_alive_ends(self) -> float | None:
        return keep_alive_ends(self.record, self.status)


def row_of(record: PoolRecord, status: PoolStatus | None, alive: bool) -> PoolRow:
    """The row of a record whose client is (``alive``) or is not running (pure)."""
    attached = alive and status is not None and status.client_pid is not None
    return PoolRow(record, seen_status(status, attached), attached)


def live_pools(
    store: PoolStore, now: float, alive: Callable[[PoolStatus], bool] = client_alive
) -> tuple[list[PoolRow], list[PoolRecord]]:
    """The recorded pools that still run, and the records of pools found over, which are
    removed here (a pool that was not kept whose client is gone, a kept one past its
    keep-alive or expiry)."""
    rows: list[PoolRow] = []
    over: list[PoolRecord] = []
    for record, status in iter_records(store):
        running = status is not None and alive(status)
        opening = status is None and now - record.created < OPENING
        if not opening and is_over(record, status, now, running):
            store.remove(record.name)
            over.append(record)
        else:
            rows.append(row_of(record, status, running))
    return rows, over


def over_text(record: PoolRecord) -> str:
    why = "its keep-alive or timeout passed" if record.kept else "its client is gone"
    return f"removed the record of pool {record.name!r} ({record.provider}): the pool is over ({why})"


def ends_text(row: PoolRow, now: float) -> str:
    """When a pool with no client stops on its own: ``in 29m59s``; ``-`` while a client
    is attached to a kept pool (its keep-alive counts from when it leaves); ``with its
    client`` for a pool that is not kept."""
    if not row.record.kept:
        return NOT_KEPT
    ends = row.keep_alive_ends()
    return "-" if ends is None else f"in {duration(ends - now)}"


def pool_json(row: PoolRow, now: float) -> dict[str, Any]:
    record = row.record
    running, queued = row.tasks()
    return {
        "name": record.name,
        "pool_id": record.pool_id,
        "provider": record.provider,
        "region": record.region,
        "nodes": len(record.nodes),
        "workers_per_node": record.workers_per_node,
        "tasks_running": running,
        "tasks_queued": queued,
        "created": record.created,
        "age_seconds": max(0.0, now - record.created),
        "idle_seconds": row.idle_for(now),
        "hourly_price": record.hourly_price(),
        "cost_so_far": record.cost_so_far(now),
        "attached": row.attached,
        "client_pid": row.client_pid,
        "kept": record.kept,
        "keep_alive": record.keep_alive,
        "keep_alive_ends": row.keep_alive_ends(),
        "expires_at": record.expires_at,
    }


POOL_COLUMNS = ("pool", "provider", "nodes", "tasks", "age", "idle", "cost", "client", "stops")
"""``tasks`` is running/queued; ``stops`` when a pool with no client stops on its own (its
keep-alive ends). Nine columns in the boxed style of the other tables cost 28
characters of borders and padding, so a Local pool's row (``exp1 local 2 0/0 3m04s 2m59s
$0.00 pid 12345 with its client``: 61 characters of cells) came to 89; with a rule under
the header only and one space of padding between cells the overhead is 16 and the same row
is 77 wide: it fits an 80-column terminal, and the docs' column, on one line. A wider row (a
``digitalocean`` pool known by its pool id: 90) wraps in its cells, never cut."""


def pools_table(rows: Sequence[PoolRow], now: float) -> Table:
    table = Table(
        title="Skyward pools (this machine)", title_justify="left", box=box.SIMPLE_HEAD, show_edge=False,
        pad_edge=False, collapse_padding=True,
    )  # fmt: skip
    whole = {  # a name or provider is never cut: other cells wrap first
        "pool": max((len(r.record.name) for r in rows), default=4),
        "provider": max((len(r.record.provider) for r in rows), default=8),
    }
    for column in POOL_COLUMNS:
        table.add_column(
            column, justify="right" if column in ("nodes", "tasks", "cost") else "left", min_width=whole.get(column)
        )
    for row in rows:
        running, queued = row.tasks()
        idle = row.idle_for(now)
        table.add_row(
            row.record.name,
            row.record.provider,
            str(len(row.record.nodes)),
            f"{running}/{queued}",
            duration(now - row.record.created),
            "-" if idle is None else duration(idle),
            money(row.record.cost_so_far(now)),
            "detached" if row.client_pid is None else f"pid {row.client_pid}",
            ends_text(row, now),
        )
    return table


def stop_json(report: StopReport) -> dict[str, Any]:
    """``skyward down NAME --json``'s account of the pool itself (its resources are
    ``removals``, as for a pool id)."""
    return {
        "name": report.name,
        "pool_id": report.pool_id,
        "provider": report.provider,
        "answered": [a.node for a in report.answers if a.said_bye],
        "processes": [
            {"node": p.process.node, "pid": p.process.pid, "ended": p.how, "survivors": list(p.survivors)}
            for p in report.processes
        ],
        "unknown_nodes": list(report.unknown),
        "record_removed": report.record_removed,
        "left": report.left,
    }


def stop_lines(report: StopReport) -> list[str]:
    """What ``skyward down NAME`` prints about the pool's nodes (stdout)."""
    said = [a.node for a in report.answers if a.said_bye]
    lines = [
        f"pool {report.name} ({report.provider}, {report.pool_id}): {len(said)} of {len(report.answers)} node(s) "
        "answered STOP"
    ]
    lines += [f"node {p.process.node}: process {p.process.pid} {p.how}" for p in report.processes]
    lines += [f"node {n}: did not answer and has no recorded pid: taken for gone" for n in report.unknown]
    lines += [f"LEFT: {line}" for line in report.left]
    lines.append("record removed" if report.record_removed else "record kept: run `skyward down` again to retry")
    return lines


# -- logs ------------------------------------------------------------------------------------

_NODE_LINE = re.compile(r"^\[node (\d+)\] ?(.*)$", re.DOTALL)


def parse_line(line: str) -> tuple[int | None, str]:
    """``[node 3] text`` -> (3, "text"); a line without the prefix -> (None, line) (pure)."""
    found = _NODE_LINE.match(line)
    return (int(found.group(1)), found.group(2)) if found else (None, line)


def last_lines(text: str, count: int | None) -> list[str]:
    """The complete lines of ``text``, the last ``count`` of them (all for None) (pure)."""
    lines = text.splitlines()
    return lines if count is None else lines[-count:] if count > 0 else []


def follow(
    path: Path,
    ended: Callable[[], bool],
    sleep: Callable[[float], None],
    count: int | None = None,
    keep_following: bool = True,
) -> Iterator[str]:
    """The lines of ``path`` (the last ``count`` of what is there), then, when
    ``keep_following``, each new line as it is written, until ``ended()`` says the pool's
    record went (what was written until then is still read: the open file outlives its
    removal). A file not there yet is waited for."""
    handle: IO[str] | None = None
    try:
        while handle is None:
            try:
                handle = open(path, encoding="utf-8", errors="replace")  # noqa: SIM115  # held while following
            except FileNotFoundError:
                if not keep_following or ended():
                    return
                sleep(FOLLOW_POLL)
        text = handle.read()
        if not keep_following:
            yield from last_lines(text, count)
            return
        complete, partial = _split(text)
        yield from last_lines(complete, count)
        while True:
            chunk = handle.read()
            if chunk:
                complete, partial = _split(partial + chunk)
                yield from complete.splitlines()
                continue
            if ended():
                rest = partial + handle.read()
                yield from rest.splitlines()
                return
            sleep(FOLLOW_POLL)
    finally:
        if handle is not None:
            handle.close()


def _split(text: str) -> tuple[str, str]:
    """(the complete lines, the unfinished last one)."""
    cut = text.rfind("\n") + 1
    return text[:cut], text[cut:]
