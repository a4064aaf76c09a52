"""Console displays: what a person sees in "log", "spinner" and "quiet" modes."""

from __future__ import annotations

import io
from collections.abc import Iterable

import pytest
from rich.console import Console

from skyward.callbacks import EventBus
from skyward.display import (
    DISPLAY_MODES,
    Display,
    DisplayState,
    LogDisplay,
    QuietDisplay,
    SpinnerDisplay,
    create_display,
    reduce,
    render,
)
from skyward.display.formatting import duration, money
from skyward.display.log import describe
from skyward.errors import ConfigurationError
from skyward.events import (
    BootstrapCompleted,
    BootstrapProgress,
    BootstrapStarting,
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


def gpu_metrics(node: int, iid: str, cpu: float = 42.0) -> Metrics:
    return Metrics(iid, node, cpu, 50.0, 8192.0, 16384.0, 87.0, 40960.0, 81920.0, 66.0)


STARTUP: list[SkywardEvent] = [
    InfraCreating(),
    InfraCreated(region="us-east-1"),
    InstanceLaunching(count=3, instance_type="g5.xlarge", provider="aws"),
    InstanceProvisioned("i-aaa", 0, True, "aws", "10.0.0.1", "g5.xlarge", 1.006, 0.40),
    InstanceProvisioned("i-bbb", 1, False, "aws", "10.0.0.2", "g5.xlarge", 1.006, None),
    BootstrapStarting("i-aaa"),
    BootstrapStarting("i-bbb"),
    BootstrapProgress("i-aaa", "uv"),
    BootstrapProgress("i-bbb", "deps"),
    BootstrapCompleted("i-aaa"),
]

RUNNING: list[SkywardEvent] = [
    *STARTUP,
    BootstrapCompleted("i-bbb"),
    InstanceProvisioned("i-ccc", 2, True, "aws", "10.0.0.3", "g5.xlarge", 1.006, 0.40),
    BootstrapStarting("i-ccc"),
    BootstrapCompleted("i-ccc"),
    PoolStarted(),
    LogLine(0, "i-aaa", "epoch 1 loss=0.42\n", 1.0),
    gpu_metrics(0, "i-aaa"),
    TaskProgress(done=5, submitted=9, failed=1),
    CostUpdate(125.0, 0.064, 1.806, 2, 1),
]

STOPPED: list[SkywardEvent] = [
    *RUNNING,
    PoolStopping(),
    InstanceStopping("i-aaa"),
    InstanceStopping("i-bbb"),
    InstanceStopping("i-ccc"),
    CostFinal(0.09, 180.0, 1.806, 2, 1, 0.06),
]


def fold(events: Iterable[SkywardEvent], state: DisplayState | None = None) -> DisplayState:
    state = state or DisplayState()
    for event in events:
        state = reduce(state, event)
    return state


def as_text(state: DisplayState, *, width: int = 120, elapsed: float | None = None) -> str:
    console = Console(record=True, width=width, file=io.StringIO())
    console.print(render(state, elapsed=elapsed))
    return console.export_text()


def recording(*, terminal: bool = False, width: int = 160) -> Console:
    return Console(record=True, width=width, file=io.StringIO(), force_terminal=terminal, color_system=None)


def feed(display: Display, events: Iterable[SkywardEvent]) -> None:
    for event in events:
        display(event)


def row_of(text: str, instance_id: str) -> str:
    return next(line for line in text.splitlines() if instance_id in line)


# --- create_display ------------------------------------------------------------------


@pytest.mark.parametrize(("mode", "cls"), [("log", LogDisplay), ("spinner", SpinnerDisplay), ("quiet", QuietDisplay)])
def test_create_display_modes(mode: str, cls: type) -> None:
    display = create_display(mode, recording())
    assert isinstance(display, cls)
    assert isinstance(display, Display)
    assert callable(display)
    display.close()
    display.close()  # idempotent


def test_unknown_mode_lists_the_three() -> None:
    assert DISPLAY_MODES == ("log", "spinner", "quiet")
    with pytest.raises(ConfigurationError) as info:
        create_display("fancy")
    for mode in DISPLAY_MODES:
        assert repr(mode) in str(info.value)


# --- reduce --------------------------------------------------------------------------


def test_reduce_follows_a_pool_through_its_phases() -> None:
    assert fold([]).phase == "starting"
    assert fold(STARTUP[:3]).phase == "provisioning"
    assert fold(STARTUP).phase == "bootstrapping"
    assert fold(RUNNING).phase == "ready"
    assert fold([*RUNNING, PoolStopping()]).phase == "stopping"
    assert fold(STOPPED).phase == "stopped"


def test_reduce_tracks_each_node() -> None:
    state = fold(STARTUP)
    assert state.requested == 3
    assert state.waiting == 1
    assert [(n.node, n.status, n.step) for n in state.nodes] == [
        (0, "ready", None),
        (1, "bootstrapping", "deps"),
    ]
    assert state.nodes[0].spot and state.nodes[0].hourly_price == 0.40
    assert not state.nodes[1].spot and state.nodes[1].hourly_price == 1.006
    running = fold(RUNNING)
    assert running.waiting == 0
    assert running.nodes[0].metrics == gpu_metrics(0, "i-aaa")
    assert running.tasks == TaskProgress(5, 9, 1)
    assert running.cost == CostUpdate(125.0, 0.064, 1.806, 2, 1)
    assert {n.status for n in fold(STOPPED).nodes} == {"stopping"}


def test_reduce_is_pure() -> None:
    before = fold(STARTUP)
    snapshot = repr(before)
    after = reduce(before, BootstrapCompleted("i-bbb"))
    assert repr(before) == snapshot
    assert after != before
    assert reduce(before, BootstrapCompleted("i-bbb")) == after


def test_phase_never_goes_back() -> None:
    state = fold([*RUNNING, BootstrapStarting("i-ccc"), InstanceLaunching(1, "g5", "aws")])
    assert state.phase == "ready"


def test_unknown_instances_and_log_lines_change_nothing_but_phase() -> None:
    state = fold(RUNNING)
    assert reduce(state, BootstrapProgress("i-zzz", "apt")) == state
    assert reduce(state, gpu_metrics(9, "i-zzz")) == state
    assert reduce(state, LogLine(0, "i-aaa", "x", 0.0)) == state


def test_interruptions_errors_and_notices() -> None:
    state = fold(
        [
            *RUNNING,
            InstanceInterrupted("i-ccc", 2, "capacity reclaimed"),
            Error("task failed: ValueError", "i-bbb"),
            *(Notice(f"note {n}") for n in range(5)),
        ]
    )
    ccc = state.node_of("i-ccc")
    assert ccc is not None and ccc.status == "interrupted"
    bbb = state.node_of("i-bbb")
    assert bbb is not None and bbb.error == "task failed: ValueError"
    assert state.errors == 1
    assert state.notices == ("note 2", "note 3", "note 4")


# --- the spinner's view ----------------------------------------------------------------


def test_view_while_bootstrapping_shows_nodes_steps_and_waiting() -> None:
    text = as_text(fold(STARTUP), elapsed=42.0)
    assert "bootstrapping nodes" in text
    assert "aws us-east-1" in text
    assert "42s" in text
    assert "ready" in row_of(text, "i-aaa")
    assert "bootstrapping: deps" in row_of(text, "i-bbb")
    assert "$0.40/h spot" in row_of(text, "i-aaa")
    assert "$1.01/h" in row_of(text, "i-bbb")
    assert "launching (1 more)" in text
    assert "0 done" in text


def test_view_while_running_shows_tasks_metrics_and_cost() -> None:
    text = as_text(fold(RUNNING))
    assert "running" in text.splitlines()[0]
    row = row_of(text, "i-aaa")
    assert "42%" in row  # cpu
    assert "8.0/16.0G" in row
    assert "87% 66°C" in row
    assert "40.0/80.0G" in row
    assert "5 done · 1 failed · 3 running · 9 submitted" in text
    assert "$0.06 so far · $1.81/h · 2 spot, 1 on-demand" in text
    assert "launching" not in text


def test_view_of_a_resized_pool_shows_its_ready_and_desired_node_counts() -> None:
    state = fold(
        [
            *RUNNING,
            PoolResized(desired=5, current=3, reason="scale-up"),
            InstanceProvisioned("i-ddd", 3, False, "aws", "10.0.0.4", "g5.xlarge", 1.006, None),
            NodeAdded(3, "i-ddd", "scale-up"),
            NodeRemoved(1, "i-bbb", "lost"),
        ]
    )
    text = as_text(state)
    assert "3/5 nodes" in text.splitlines()[0]
    assert "i-bbb" not in text  # it left the pool
    assert "ready" in row_of(text, "i-ddd")


def test_tasks_waiting_on_a_pool_at_zero_nodes_say_why() -> None:
    start: list[SkywardEvent] = [InstanceLaunching(count=0, instance_type="t", provider="aws"), PoolStarted()]
    waiting = fold([*start, PoolResized(desired=0, current=0, reason="scale-down"), TaskProgress(0, 4, 0)])
    assert "4 tasks wait: the pool is at 0 nodes and scales up" in as_text(waiting)
    healing = fold([*RUNNING, NodeRemoved(0, "i-aaa", "lost"), NodeRemoved(1, "i-bbb", "lost")])
    healing = fold([NodeRemoved(2, "i-ccc", "lost")], healing)
    assert "3 tasks wait for a node: the pool has none ready" in as_text(healing)
    assert "wait" not in as_text(fold(RUNNING))


def test_the_log_display_says_each_node_change() -> None:
    records = [
        describe(DisplayState(), event)
        for event in (
            NodeAdded(3, "i-ddd", "scale-up"),
            NodeRemoved(1, "i-bbb", "lost"),
            PoolResized(desired=5, current=3, reason="resize"),
        )
    ]
    assert [(r.level, r.message) for r in records if r is not None] == [
        ("info", "node added"),
        ("warning", "node removed"),
        ("info", "pool resized"),
    ]


def test_view_after_stop_shows_total_and_savings() -> None:
    text = as_text(fold(STOPPED))
    assert text.startswith("✓ skyward stopped")
    assert "$0.09 total in 3m00s · saved $0.06 vs on-demand" in text
    assert "stopping" in row_of(text, "i-bbb")


def test_view_shows_errors_notices_and_interruptions() -> None:
    state = fold(
        [
            *RUNNING,
            InstanceInterrupted("i-ccc", 2, "capacity reclaimed"),
            Notice("spot unavailable on DigitalOcean: running on-demand"),
            Error("node 1 unreachable", "i-bbb"),
        ]
    )
    text = as_text(state, width=200)
    assert "interrupted: capacity reclaimed" in row_of(text, "i-ccc")
    assert "note: spot unavailable on DigitalOcean: running on-demand" in text
    assert "errors: 1, last: node 1 unreachable" in text
    failed = as_text(fold([*STOPPED, Error("late", None)]))
    assert failed.startswith("✗ skyward stopped")


def test_view_before_any_event() -> None:
    text = as_text(DisplayState())
    assert "skyward starting" in text
    assert "0 done · 0 failed · 0 running · 0 submitted" in text


def test_view_fits_an_80_column_terminal() -> None:
    long_ids = [
        InstanceProvisioned(f"i-0123456789abcdef{n}", n, True, "aws", None, "g5.xlarge", 1.006, 0.4) for n in range(2)
    ]
    state = fold([*RUNNING[:3], *long_ids, BootstrapProgress("i-0123456789abcdef0", "skyward")])
    state = reduce(state, gpu_metrics(1, "i-0123456789abcdef1"))
    text = as_text(state, width=80)
    assert all(len(line) <= 80 for line in text.splitlines())
    assert "bootstrapping: skyward" in text
    assert "instance" not in text  # the column that does not fit is left out, not cut
    row = next(line for line in text.splitlines() if line.startswith("1 "))
    for cell in ("42%", "8.0/16.0G", "87% 66°C", "40.0/80.0G", "$0.40/h spot"):
        assert cell in row, cell
    assert "i-0123456789abcdef1" in row_of(as_text(state, width=120), "i-0123456789abcdef1")


def test_view_without_gpu_shows_dashes() -> None:
    cpu_only = Metrics("i-aaa", 0, 12.0, 30.0, 1024.0, 4096.0, None, None, None, None)
    row = row_of(as_text(fold([*STARTUP, cpu_only])), "i-aaa")
    assert "12%" in row and "-" in row


def test_formatting_helpers() -> None:
    assert money(0) == "$0.00"
    assert money(0.0042) == "$0.0042"
    assert money(1234.5) == "$1,234.50"
    assert duration(5) == "5s"
    assert duration(184) == "3m04s"
    assert duration(3720) == "1h02m"


# --- the spinner display ---------------------------------------------------------------


def test_spinner_draws_live_and_leaves_the_final_view() -> None:
    clock = iter(float(t) for t in range(1000))
    console = recording(terminal=True)
    display = SpinnerDisplay(console, clock=lambda: next(clock))
    feed(display, STOPPED)
    assert display.is_live
    display.close()
    assert not display.is_live
    text = console.export_text()
    assert "[node 0] epoch 1 loss=0.42" in text
    assert "skyward stopped" in text  # the last view stays on screen
    assert "$0.09 total in 3m00s" in text
    display.close()


def test_spinner_prints_errors_notices_and_interruptions_above_the_view() -> None:
    console = recording(terminal=True)
    with SpinnerDisplay(console) as display:
        feed(display, RUNNING)
        display(Notice("spot unavailable: running on-demand"))
        display(InstanceInterrupted("i-ccc", 2, "capacity reclaimed"))
        display(Error("boom", "i-aaa"))
    text = console.export_text()
    assert "note: spot unavailable: running on-demand" in text
    assert "node 2: spot instance interrupted (capacity reclaimed)" in text
    assert "error: boom" in text


def test_spinner_after_close_prints_only_errors() -> None:
    console = recording(terminal=True)
    display = SpinnerDisplay(console)
    feed(display, STOPPED)
    display.close()
    before = console.export_text()
    display(LogLine(0, "i-aaa", "too late", 0.0))
    display(Error("teardown failed", "i-aaa"))
    after = console.export_text(clear=False)
    assert "too late" not in after
    assert "error: teardown failed" in after
    assert before  # something was drawn


def test_spinner_without_a_terminal_degrades_to_plain_lines() -> None:
    console = recording(terminal=False)
    display = SpinnerDisplay(console)
    feed(display, STOPPED)
    display.close()
    assert not display.is_live
    text = console.export_text()
    assert "instance provisioned" in text
    assert "[node 0] epoch 1 loss=0.42" in text
    assert "pool stopped" in text
    assert "\x1b" not in text
    assert display.state.phase == "stopped"


# --- the log display -----------------------------------------------------------------


def test_log_mode_shows_each_phase() -> None:
    console = recording()
    display = create_display("log", console)
    feed(display, STOPPED)
    display.close()
    text = console.export_text()
    for phrase in (
        "creating infrastructure",
        "infrastructure ready",
        "region=us-east-1",
        "launching instances",
        "count=3",
        "instance provisioned",
        "market=spot",
        "price=$0.40/h",
        "bootstrap started",
        "bootstrap step",
        "step=deps",
        "node ready",
        "pool ready",
        "nodes=3",
        "[node 0] epoch 1 loss=0.42",
        "metrics",
        "gpu=87%",
        "tasks",
        "done=5",
        "failed=1",
        "pool stopping",
        "instance stopping",
        "pool stopped",
        "total=$0.09",
        "saved=$0.06",
    ):
        assert phrase in text, phrase
    assert "[info" in text
    # LogLine is printed like the node's stdout, not as a structured record
    assert any(line == "[node 0] epoch 1 loss=0.42" for line in text.splitlines())


def test_log_mode_throttles_metrics_per_node() -> None:
    now = [0.0]
    console = recording()
    display = LogDisplay(console, metrics_interval=30.0, clock=lambda: now[0])
    feed(display, STARTUP)
    for t in range(0, 65, 5):  # a sample every 5 s for 65 s, from two nodes
        now[0] = float(t)
        display(gpu_metrics(0, "i-aaa"))
        display(gpu_metrics(1, "i-bbb"))
    lines = [line for line in console.export_text().splitlines() if " metrics " in line]
    assert sum("node=0" in line for line in lines) == 3  # t = 0, 30, 60
    assert sum("node=1" in line for line in lines) == 3


def test_log_mode_throttles_task_progress_but_shows_the_final_counts() -> None:
    now = [0.0]
    console = recording()
    display = LogDisplay(console, progress_interval=5.0, clock=lambda: now[0])
    for done in range(1, 101):
        now[0] = done * 0.01
        display(TaskProgress(done=done, submitted=100, failed=0))
    display(PoolStopping())
    lines = [line for line in console.export_text().splitlines() if " tasks " in line]
    assert len(lines) == 2
    assert "done=1 " in lines[0]
    assert "done=100 " in lines[1]


def test_log_mode_errors_and_interruptions_stand_out() -> None:
    console = recording()
    display = LogDisplay(console)
    feed(display, RUNNING)
    display(Error("node unreachable", "i-bbb"))
    display(InstanceInterrupted("i-ccc", 2, "capacity reclaimed"))
    display(Notice("spot unavailable on DigitalOcean: running on-demand"))
    text = console.export_text()
    assert any("[error" in line and "node unreachable" in line for line in text.splitlines())
    assert "node=1" in row_of(text, "node unreachable")
    assert "[warning" in row_of(text, "spot instance interrupted")
    assert "reason='capacity reclaimed'" in text or "capacity reclaimed" in text
    assert "spot unavailable on DigitalOcean: running on-demand" in text


def test_log_mode_colours_only_on_a_terminal() -> None:
    plain = Console(file=io.StringIO(), width=120, force_terminal=False)
    LogDisplay(plain)(InfraCreated("eu-west-1"))
    assert "\x1b[" not in plain.file.getvalue()  # type: ignore[attr-defined]
    coloured = Console(file=io.StringIO(), width=120, force_terminal=True)
    LogDisplay(coloured)(InfraCreated("eu-west-1"))
    assert "\x1b[" in coloured.file.getvalue()  # type: ignore[attr-defined]


# --- the quiet display -----------------------------------------------------------------


def test_quiet_prints_nothing_not_even_errors(capsys: pytest.CaptureFixture[str]) -> None:
    console = recording()
    for display in (create_display("quiet", console), create_display("quiet")):
        feed(display, STOPPED)
        display(Error("bootstrap failed: apt", "i-bbb"))
        display(Error("pool timed out", None))
    assert console.export_text() == ""
    assert capsys.readouterr() == ("", "")


@pytest.mark.parametrize("mode", ["log", "spinner"])
def test_the_library_output_goes_to_stderr_by_default(mode: str, capsys: pytest.CaptureFixture[str]) -> None:
    display = create_display(mode)
    feed(display, RUNNING)
    display(Error("boom", None))
    display.close()
    captured = capsys.readouterr()
    assert captured.out == ""  # the user's stdout is the user's
    assert "boom" in captured.err


# --- with the bus ----------------------------------------------------------------------


def test_display_on_the_bus_shows_a_failing_user_callback() -> None:
    console = recording()
    display = create_display("log", console)

    def buggy(event: SkywardEvent) -> None:
        if isinstance(event, PoolStarted):
            raise ZeroDivisionError("division by zero")

    bus = EventBus(on_event=buggy, display=display, context=())
    for event in RUNNING:
        bus.emit(event)
    display.close()
    text = console.export_text()
    assert "pool ready" in text
    assert "ZeroDivisionError: division by zero" in text
    assert "buggy" in text
