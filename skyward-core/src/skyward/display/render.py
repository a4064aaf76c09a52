"""The spinner's view: a pure function from ``DisplayState`` to a rich renderable."""

from __future__ import annotations

from rich import box
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from skyward.display import formatting as fmt
from skyward.display.state import DisplayState, NodeStatus, NodeView, Phase

SPINNER_FRAMES = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"

PHASE_LABELS: dict[Phase, str] = {
    "starting": "starting",
    "provisioning": "provisioning instances",
    "bootstrapping": "bootstrapping nodes",
    "ready": "running",
    "stopping": "stopping",
    "stopped": "stopped",
}

_STATUS_STYLES: dict[NodeStatus, str] = {
    "launching": "yellow",
    "bootstrapping": "cyan",
    "ready": "green",
    "interrupted": "red",
    "stopping": "dim",
}


def _glyph(state: DisplayState, frame: int) -> Text:
    if state.phase == "stopped":
        return Text("✗" if state.errors else "✓", style="red" if state.errors else "green")
    return Text(SPINNER_FRAMES[frame % len(SPINNER_FRAMES)], style="cyan")


def _header(state: DisplayState, frame: int, elapsed: float | None) -> Text:
    parts: list[str] = []
    if state.provider:
        where = state.provider + (f" {state.region}" if state.region else "")
        parts.append(where)
    if state.instance_type:
        parts.append(f"{max(len(state.nodes), state.requested)}x {state.instance_type}")
    if state.desired is not None:
        parts.append(f"{state.ready_nodes}/{state.desired} nodes")
    if elapsed is not None:
        parts.append(fmt.duration(elapsed))
    header = Text.assemble(_glyph(state, frame), " ", ("skyward", "bold"), " ", PHASE_LABELS[state.phase])
    if parts:
        header.append("  " + " · ".join(parts), style="dim")
    return header


def _status(view: NodeView) -> Text:
    label: str = view.status
    if view.status == "bootstrapping" and view.step:
        label = f"bootstrapping: {view.step}"
    elif view.status == "interrupted" and view.error:
        label = f"interrupted: {view.error}"
    return Text(label, style=_STATUS_STYLES[view.status])


_UNLIMITED = 10_000
_COLUMNS = ("node", "instance", "status", "cpu", "memory", "gpu", "gpu mem", "price")


def _nodes_table(state: DisplayState, *, with_instance: bool) -> Table:
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True)
    columns = [c for c in _COLUMNS if with_instance or c != "instance"]
    for column in columns:
        table.add_column(column, no_wrap=column != "status")
    for view in state.nodes:
        m = view.metrics
        price = "-" if view.hourly_price is None else fmt.rate(view.hourly_price)
        if view.spot:
            price += " spot"
        cells: list[str | Text] = [
            str(view.node),
            view.instance_id,
            _status(view),
            "-" if m is None else fmt.percent(m.cpu_percent),
            "-" if m is None else fmt.memory(m),
            "-" if m is None else fmt.gpu(m),
            "-" if m is None else fmt.gpu_memory(m),
            price,
        ]
        if not with_instance:
            del cells[1]
        table.add_row(*cells)
    if state.waiting:
        waiting = Text(f"launching ({state.waiting} more)", style="yellow")
        table.add_row("…", *([""] if with_instance else []), waiting, *[""] * 5)
    return table


class _NodesView:
    """The node table, without the instance column when the console is too narrow for
    it: cloud instance ids are long, and a truncated number would mislead."""

    def __init__(self, state: DisplayState) -> None:
        self._wide = _nodes_table(state, with_instance=True)
        self._narrow = _nodes_table(state, with_instance=False)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        # Measured without the width limit: a table clamps its measure to the limit.
        natural = Measurement.get(console, options.update_width(_UNLIMITED), self._wide)
        fits = natural.maximum <= options.max_width
        yield self._wide if fits else self._narrow


def _tasks(state: DisplayState) -> Text:
    t = state.tasks
    text = Text("tasks  ", style="bold")
    text.append(f"{t.done} done")
    text.append(" · ")
    text.append(f"{t.failed} failed", style="red" if t.failed else "")
    text.append(f" · {t.running} running · {t.submitted} submitted")
    return text


def _cost(state: DisplayState) -> Text | None:
    text = Text("cost   ", style="bold")
    if state.final is not None:
        f = state.final
        text.append(f"{fmt.money(f.total_cost)} total in {fmt.duration(f.total_seconds)}")
        if f.savings_vs_ondemand > 0:
            text.append(f" · saved {fmt.money(f.savings_vs_ondemand)} vs on-demand")
        return text
    if state.cost is not None:
        c = state.cost
        text.append(f"{fmt.money(c.accumulated_cost)} so far · {fmt.rate(c.hourly_rate)}")
        text.append(f" · {c.spot_count} spot, {c.ondemand_count} on-demand")
        return text
    return None


def render(state: DisplayState, *, frame: int = 0, elapsed: float | None = None) -> RenderableType:
    """The live view of ``state``. ``frame`` picks the spinner glyph and ``elapsed`` is
    the pool's age in seconds; both come from the caller's clock, so this stays pure."""
    parts: list[RenderableType] = [_header(state, frame, elapsed)]
    if state.nodes or state.waiting:
        parts.append(_NodesView(state))
    parts.append(_tasks(state))
    why = state.why_tasks_wait
    if why is not None:
        parts.append(Text(why, style="yellow"))
    cost = _cost(state)
    if cost is not None:
        parts.append(cost)
    for notice in state.notices:
        parts.append(Text(f"note: {notice}", style="yellow"))
    if state.last_error is not None:
        parts.append(Text(f"errors: {state.errors}, last: {state.last_error}", style="red"))
    return Group(*parts)


__all__ = ["PHASE_LABELS", "SPINNER_FRAMES", "render"]
