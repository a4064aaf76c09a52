"""The "log" display: one readable structured line per lifecycle event.

Lines are rendered by structlog's ``ConsoleRenderer`` and printed on a rich console, so
they interleave cleanly with the user's own rich output. The pipeline is private to the
display: it neither depends on nor changes the application's structlog configuration.
Remote output (``LogLine``) is printed as ``[node 0] text``, like the node's stdout.
High-rate events are throttled: ``Metrics`` at most once per node per
``metrics_interval`` seconds, ``CostUpdate`` once per ``metrics_interval``,
``TaskProgress`` once per ``progress_interval`` (the last one is flushed when the pool
stops, so the final counts are always shown).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias, cast

import structlog
from rich.console import Console
from rich.text import Text
from structlog.typing import FilteringBoundLogger

from skyward.display import formatting as fmt
from skyward.display.base import DisplayBase, library_console
from skyward.display.state import DisplayState, reduce
from skyward.events import (
    BootstrapCompleted,
    BootstrapProgress,
    BootstrapStarting,
    CandidateFailed,
    CostFinal,
    CostUpdate,
    Error,
    InfraCreated,
    InfraCreating,
    InstanceInterrupted,
    InstanceLaunching,
    InstanceProvisioned,
    InstanceStopping,
    LogLine,
    Metrics,
    NodeAdded,
    NodeRemoved,
    Notice,
    PoolResized,
    PoolStarted,
    PoolStopping,
    SkywardEvent,
    TaskProgress,
)

Level: TypeAlias = Literal["info", "warning", "error"]
Fields: TypeAlias = tuple[tuple[str, object], ...]


@dataclass(frozen=True, slots=True)
class LogRecord:
    """A line to log: level, message and key/value fields, in display order."""

    level: Level
    message: str
    fields: Fields = ()


def _node(state: DisplayState, instance_id: str | None) -> tuple[str, object]:
    view = state.node_of(instance_id)
    if view is not None:
        return ("node", view.node)
    return ("instance", instance_id)


def _used_of(used_mb: float, total_mb: float) -> str:
    return f"{fmt.gigabytes(used_mb)}/{fmt.gigabytes(total_mb)}"


def describe(state: DisplayState, event: SkywardEvent) -> LogRecord | None:
    """The line for ``event``; ``state`` is the display state after it. Pure.

    ``None`` for events that are not logged as records (``LogLine``, unknown events).
    """
    fields: Fields
    match event:
        case InfraCreating():
            return LogRecord("info", "creating infrastructure")
        case InfraCreated(region=region):
            return LogRecord("info", "infrastructure ready", (("region", region),))
        case InstanceLaunching(count=count, instance_type=itype, provider=provider):
            fields = (("count", count), ("type", itype), ("provider", provider))
            return LogRecord("info", "launching instances", fields)
        case InstanceProvisioned():
            price = event.price_spot if event.spot else event.price_on_demand
            fields = (
                ("node", event.node),
                ("instance", event.instance_id),
                ("type", event.instance_type or "-"),
                ("market", "spot" if event.spot else "on-demand"),
                ("ip", event.ip or "-"),
                ("price", "-" if price is None else fmt.rate(price)),
            )
            return LogRecord("info", "instance provisioned", fields)
        case BootstrapStarting(instance_id=iid):
            return LogRecord("info", "bootstrap started", (_node(state, iid),))
        case BootstrapProgress(instance_id=iid, step=step):
            return LogRecord("info", "bootstrap step", (_node(state, iid), ("step", step)))
        case BootstrapCompleted(instance_id=iid):
            return LogRecord("info", "node ready", (_node(state, iid),))
        case PoolStarted():
            # an attached pool saw no node start: its Notice said which nodes it found
            return LogRecord("info", "pool ready", (("nodes", len(state.nodes)),) if state.nodes else ())
        case Metrics():
            # Values without spaces, so the renderer prints them unquoted.
            fields = (
                ("node", event.node),
                ("cpu", fmt.percent(event.cpu_percent)),
                ("memory", fmt.percent(event.memory_percent)),
                ("memory_gb", _used_of(event.memory_used_mb, event.memory_total_mb)),
            )
            if event.gpu_utilization is not None:
                fields = (*fields, ("gpu", fmt.percent(event.gpu_utilization)))
            if event.gpu_memory_used_mb is not None and event.gpu_memory_total_mb is not None:
                used = _used_of(event.gpu_memory_used_mb, event.gpu_memory_total_mb)
                fields = (*fields, ("gpu_memory_gb", used))
            if event.gpu_temperature is not None:
                fields = (*fields, ("gpu_temp", f"{event.gpu_temperature:.0f}C"))
            return LogRecord("info", "metrics", fields)
        case TaskProgress(done=done, submitted=submitted, failed=failed):
            fields = (
                ("done", done),
                ("failed", failed),
                ("running", event.running),
                ("submitted", submitted),
            )
            return LogRecord("info", "tasks", fields)
        case PoolStopping():
            return LogRecord("info", "pool stopping")
        case InstanceStopping(instance_id=iid):
            return LogRecord("info", "instance stopping", (_node(state, iid),))
        case CostUpdate():
            fields = (
                ("so_far", fmt.money(event.accumulated_cost)),
                ("rate", fmt.rate(event.hourly_rate)),
                ("elapsed", fmt.duration(event.elapsed_seconds)),
            )
            return LogRecord("info", "cost", fields)
        case CostFinal():
            fields = (
                ("total", fmt.money(event.total_cost)),
                ("duration", fmt.duration(event.total_seconds)),
                ("rate", fmt.rate(event.hourly_rate)),
                ("spot", event.spot_count),
                ("on_demand", event.ondemand_count),
                ("saved", fmt.money(event.savings_vs_ondemand)),
            )
            if event.provider:
                fields += (("provider", event.provider), ("region", event.region))
            return LogRecord("info", "pool stopped", fields)
        case CandidateFailed(candidate=index, provider=provider, region=region, reason=reason, message=message):
            fields = (("candidate", index + 1), ("provider", provider), ("region", region or "-"), ("why", message))
            return LogRecord("warning", f"candidate failed: {reason}", fields)
        case Error(message=message, instance_id=iid):
            fields = () if iid is None else (_node(state, iid),)
            return LogRecord("error", message, fields)
        case InstanceInterrupted(instance_id=iid, node=node, reason=reason):
            fields = (("node", node), ("instance", iid), ("reason", reason))
            return LogRecord("warning", "spot instance interrupted", fields)
        case Notice(message=message):
            return LogRecord("info", message)
        case NodeAdded(node=node, instance_id=iid, reason=reason):
            return LogRecord("info", "node added", (("node", node), ("instance", iid), ("why", reason)))
        case NodeRemoved(node=node, instance_id=iid, reason=reason):
            level: Level = "warning" if reason in ("lost", "reclaimed") else "info"
            return LogRecord(level, "node removed", (("node", node), ("instance", iid), ("why", reason)))
        case PoolResized(desired=desired, current=current, reason=reason):
            return LogRecord("info", "pool resized", (("desired", desired), ("current", current), ("why", reason)))
        case _:
            return None


class _ConsoleSink:
    """A structlog logger that prints each rendered line on a rich console."""

    def __init__(self, console: Console) -> None:
        self._console = console

    def msg(self, message: str) -> None:
        # from_ansi: the renderer colours with ANSI codes when the console is a terminal.
        self._console.print(Text.from_ansi(message), soft_wrap=True, highlight=False)

    info = warning = error = debug = msg


def _console_logger(console: Console) -> FilteringBoundLogger:
    colors = console.is_terminal and not console.no_color
    renderer = structlog.dev.ConsoleRenderer(
        colors=colors,
        pad_event_to=24,
        sort_keys=False,
        exception_formatter=structlog.dev.plain_traceback,
    )
    logger: Any = structlog.wrap_logger(
        _ConsoleSink(console),
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="%H:%M:%S", utc=False),
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG),
    )
    return cast(FilteringBoundLogger, logger)


class LogDisplay(DisplayBase):
    """Structured lines for each phase and event; see the module docstring."""

    def __init__(
        self,
        console: Console | None = None,
        *,
        metrics_interval: float = 30.0,
        progress_interval: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.console = console if console is not None else library_console()
        self._log = _console_logger(self.console)
        self._metrics_interval = metrics_interval
        self._progress_interval = progress_interval
        self._clock = clock
        self._state = DisplayState()
        self._last: dict[object, float] = {}  # throttle key -> time last logged
        self._pending_tasks: TaskProgress | None = None
        self._lock = threading.Lock()

    @property
    def state(self) -> DisplayState:
        return self._state

    def __call__(self, event: SkywardEvent) -> None:
        with self._lock:
            self._state = reduce(self._state, event)
            if isinstance(event, LogLine):
                line = f"[node {event.node}] {event.line.rstrip()}"
                self.console.print(Text(line), soft_wrap=True, highlight=False)
                return
            if isinstance(event, PoolStopping | CostFinal):
                self._flush_tasks()
            if not self._due(event):
                if isinstance(event, TaskProgress):
                    self._pending_tasks = event
                return
            if isinstance(event, TaskProgress):
                self._pending_tasks = None
            self._write(describe(self._state, event))

    def close(self) -> None:
        with self._lock:
            self._flush_tasks()

    def _due(self, event: SkywardEvent) -> bool:
        match event:
            case Metrics(node=node):
                return self._throttle(("metrics", node), self._metrics_interval)
            case CostUpdate():
                return self._throttle("cost", self._metrics_interval)
            case TaskProgress():
                return self._throttle("tasks", self._progress_interval)
            case _:
                return True

    def _throttle(self, key: object, interval: float) -> bool:
        now = self._clock()
        last = self._last.get(key)
        if last is not None and now - last < interval:
            return False
        self._last[key] = now
        return True

    def _flush_tasks(self) -> None:
        if self._pending_tasks is not None:
            self._write(describe(self._state, self._pending_tasks))
            self._pending_tasks = None

    def _write(self, record: LogRecord | None) -> None:
        if record is None:
            return
        getattr(self._log, record.level)(record.message, **dict(record.fields))


__all__ = ["LogDisplay", "LogRecord", "describe"]
