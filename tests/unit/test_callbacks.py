"""Callbacks: compose, use_callback scoping, emit, derived events, error isolation, and
the pool's EventBus."""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
from collections.abc import Callable

import pytest
from structlog.testing import capture_logs

from skyward.callbacks import (
    MAX_DEPTH,
    MAX_DERIVED,
    Callback,
    EventBus,
    active_callbacks,
    compose,
    emit,
    use_callback,
)
from skyward.errors import ConfigurationError
from skyward.events import (
    Error,
    LogLine,
    Metrics,
    Notice,
    PoolStarted,
    PoolStopping,
    SkywardEvent,
    TaskProgress,
)


def recorder(into: list[object], tag: str | None = None) -> Callback:
    def record(event: SkywardEvent) -> None:
        into.append(event if tag is None else (tag, event))

    return record


def tags(seen: list[object]) -> list[object]:
    return [item[0] for item in seen if isinstance(item, tuple)]


def line(n: int = 0) -> LogLine:
    return LogLine(node=0, instance_id="i-0", line=f"line {n}", timestamp=float(n))


def metrics(cpu: float) -> Metrics:
    return Metrics("i-0", 0, cpu, 10.0, 1.0, 2.0, None, None, None, None)


# --- compose ----------------------------------------------------------------------


def test_compose_calls_in_order() -> None:
    seen: list[object] = []
    combined = compose(recorder(seen, "a"), recorder(seen, "b"), recorder(seen, "c"))
    combined(PoolStarted())
    assert tags(seen) == ["a", "b", "c"]


def test_compose_skips_none_flattens_and_keeps_a_single_callback() -> None:
    seen: list[object] = []
    a, b = recorder(seen, "a"), recorder(seen, "b")
    assert compose(None, a, None) is a
    nested = compose(a, compose(b, a))
    nested(PoolStarted())
    assert tags(seen) == ["a", "b", "a"]
    compose()(PoolStarted())  # nothing to call, no error


def test_compose_called_directly_returns_first_derived_event() -> None:
    first, second = Notice("first"), Notice("second")
    combined = compose(lambda e: e, lambda e: first, lambda e: second)
    assert combined(PoolStarted()) is first


def test_compose_registered_delivers_each_members_derived_event() -> None:
    seen: list[object] = []

    def derive(tag: str) -> Callback:
        def cb(event: SkywardEvent) -> SkywardEvent | None:
            return Notice(tag) if isinstance(event, PoolStarted) else None

        return cb

    bus = EventBus(on_event=compose(derive("a"), derive("b"), recorder(seen)), context=())
    bus.emit(PoolStarted())
    assert seen == [PoolStarted(), Notice("a"), Notice("b")]


# --- use_callback and emit ----------------------------------------------------------


def test_emit_without_callbacks_does_nothing() -> None:
    emit(PoolStarted())
    assert active_callbacks() == ()


def test_use_callback_scopes_and_stacks() -> None:
    seen: list[object] = []
    outer, inner = recorder(seen, "outer"), recorder(seen, "inner")
    with use_callback(outer) as registered:
        assert registered is outer
        emit(line(1))
        with use_callback(inner):
            assert active_callbacks() == (outer, inner)
            emit(line(2))
        emit(line(3))
    emit(line(4))
    assert seen == [
        ("outer", line(1)),
        ("outer", line(2)),
        ("inner", line(2)),
        ("outer", line(3)),
    ]


def test_a_new_thread_does_not_see_the_callback_unless_context_is_copied() -> None:
    seen: list[object] = []
    with use_callback(recorder(seen)):
        plain = threading.Thread(target=emit, args=(line(1),))
        plain.start()
        plain.join()
        context = contextvars.copy_context()
        carried = threading.Thread(target=context.run, args=(emit, line(2)))
        carried.start()
        carried.join()
    assert seen == [line(2)]


def test_threads_have_independent_callback_stacks() -> None:
    seen: list[object] = []
    barrier = threading.Barrier(2)

    def worker(tag: str) -> None:
        with use_callback(recorder(seen, tag)):
            barrier.wait()
            emit(Notice(tag))
            barrier.wait()

    threads = [threading.Thread(target=worker, args=(t,)) for t in ("x", "y")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(seen) == [("x", Notice("x")), ("y", Notice("y"))]  # type: ignore[type-var]


def test_asyncio_tasks_inherit_the_context_they_were_created_in() -> None:
    seen: list[object] = []

    async def main() -> None:
        async def child() -> None:
            emit(Notice("child"))

        with use_callback(recorder(seen)):
            task = asyncio.create_task(child())
        await task
        await asyncio.create_task(child())  # created outside the block

    asyncio.run(main())
    assert seen == [Notice("child")]


# --- errors --------------------------------------------------------------------------


def boom(event: SkywardEvent) -> None:
    raise RuntimeError("callback bug")


def test_a_raising_callback_does_not_stop_the_others_and_is_logged_once() -> None:
    seen: list[object] = []
    with capture_logs() as logs, use_callback(boom), use_callback(recorder(seen)):
        emit(line(1))
        emit(line(2))
    assert seen == [line(1), line(2)]
    failures = [entry for entry in logs if entry["event"] == "event callback failed"]
    assert len(failures) == 1
    assert failures[0]["log_level"] == "error"
    assert "boom" in failures[0]["callback"]
    assert failures[0]["event_type"] == "LogLine"


def test_base_exceptions_are_not_swallowed() -> None:
    def interrupt(event: SkywardEvent) -> None:
        raise KeyboardInterrupt

    bus = EventBus(on_event=interrupt, context=())
    with pytest.raises(KeyboardInterrupt):
        bus.emit(PoolStarted())


def test_bus_reports_a_failing_callback_to_the_display_once() -> None:
    shown: list[object] = []
    bus = EventBus(on_event=boom, display=recorder(shown), context=())
    with capture_logs() as logs:
        bus.emit(PoolStarted())
        bus.emit(PoolStopping())
    errors = [e for e in shown if isinstance(e, Error)]
    assert len(errors) == 1
    assert "RuntimeError: callback bug" in errors[0].message
    assert errors[0].instance_id is None
    assert [e for e in shown if not isinstance(e, Error)] == [PoolStarted(), PoolStopping()]
    assert sum(entry["event"] == "event callback failed" for entry in logs) == 1


def test_bus_survives_a_failing_display_without_looping() -> None:
    seen: list[object] = []
    bus = EventBus(on_event=recorder(seen), display=boom, context=())
    with capture_logs() as logs:
        bus.emit(PoolStarted())
        bus.emit(PoolStopping())
    assert seen == [PoolStarted(), PoolStopping()]
    assert sum(entry["event"] == "event callback failed" for entry in logs) == 1


# --- derived events ------------------------------------------------------------------


def test_returned_event_is_delivered_to_everyone_after_the_original() -> None:
    seen: list[object] = []

    def alert(event: SkywardEvent) -> SkywardEvent | None:
        if isinstance(event, Metrics) and event.cpu_percent > 90:
            return Notice(f"node {event.node} cpu high")
        return None

    with use_callback(recorder(seen, "first")), use_callback(alert):
        with use_callback(recorder(seen, "last")):
            emit(metrics(95.0))
            emit(metrics(10.0))
    assert seen == [
        ("first", metrics(95.0)),
        ("last", metrics(95.0)),
        ("first", Notice("node 0 cpu high")),
        ("last", Notice("node 0 cpu high")),
        ("first", metrics(10.0)),
        ("last", metrics(10.0)),
    ]


def test_returning_the_same_event_or_a_non_event_is_ignored() -> None:
    seen: list[object] = []
    bus = EventBus(on_event=recorder(seen), context=())
    bus.on(PoolStarted, lambda e: e)
    bus.on(PoolStarted, lambda e: "not an event")
    bus.on(PoolStarted, lambda e: PoolStarted())  # equal but new: derived
    with capture_logs():
        bus.emit(PoolStarted())
    assert len(seen) == 1 + MAX_DEPTH  # the original, then the bounded chain


def test_derived_events_loop_is_cut_at_max_depth_and_reported_once() -> None:
    seen: list[object] = []
    counter = iter(range(10_000))

    def forever(event: SkywardEvent) -> SkywardEvent:
        return Notice(f"derived {next(counter)}")

    shown: list[object] = []
    bus = EventBus(on_event=forever, display=recorder(shown), context=())
    bus.on(Notice, recorder(seen))
    with capture_logs() as logs:
        bus.emit(PoolStarted())
        bus.emit(PoolStarted())
    # each emit: MAX_DEPTH derived generations reach subscribers, the next is dropped
    assert len(seen) == 2 * MAX_DEPTH
    assert sum(entry["event"] == "derived events dropped" for entry in logs) == 1
    assert sum(isinstance(e, Error) and "forever" in e.message for e in shown) == 1


def test_two_callbacks_answering_each_other_terminate() -> None:
    def ping(event: SkywardEvent) -> SkywardEvent | None:
        return Notice("pong") if event == Notice("ping") else None

    def pong(event: SkywardEvent) -> SkywardEvent | None:
        return Notice("ping") if event == Notice("pong") else None

    seen: list[object] = []
    with capture_logs(), use_callback(compose(ping, pong, recorder(seen))):
        emit(Notice("ping"))
    assert 1 < len(seen) <= MAX_DEPTH + 1


def test_fan_out_is_bounded_too() -> None:
    counter = iter(range(1_000_000))

    def spawn(event: SkywardEvent) -> SkywardEvent:
        return Notice(str(next(counter)))

    delivered: list[object] = []
    # 4 callbacks each deriving from every event: 4**8 without the fan-out bound
    bus = EventBus(on_event=compose(spawn, spawn, spawn, spawn, recorder(delivered)), context=())
    with capture_logs():
        bus.emit(PoolStarted())
    assert len(delivered) <= MAX_DERIVED + 1


def test_emit_from_inside_a_callback_is_bounded() -> None:
    calls = 0

    def reemit(event: SkywardEvent) -> None:
        nonlocal calls
        calls += 1
        emit(Notice("again"))

    with capture_logs(), use_callback(reemit):
        emit(PoolStarted())
    assert calls == MAX_DEPTH + 1


# --- EventBus -----------------------------------------------------------------------


def test_bus_delivery_order_display_on_event_context_then_handlers() -> None:
    seen: list[object] = []
    with use_callback(recorder(seen, "context")):
        bus = EventBus(on_event=recorder(seen, "on_event"), display=recorder(seen, "display"))
    bus.on(PoolStarted, recorder(seen, "handler"))
    bus.emit(PoolStarted())
    assert tags(seen) == ["display", "on_event", "context", "handler"]


def test_bus_captures_use_callback_at_construction_for_its_threads() -> None:
    seen: list[object] = []
    with use_callback(recorder(seen)):
        bus = EventBus()
    # the pool emits from its own threads, long after the block ended
    worker = threading.Thread(target=bus.emit, args=(line(1),))
    worker.start()
    worker.join()
    assert seen == [line(1)]


def test_bus_explicit_context_replaces_the_captured_one() -> None:
    seen: list[object] = []
    with use_callback(recorder(seen, "ambient")):
        bus = EventBus(context=[recorder(seen, "given")])
    bus.emit(PoolStarted())
    assert seen == [("given", PoolStarted())]


def test_on_filters_by_type_tuple_and_union() -> None:
    by_type: list[object] = []
    by_tuple: list[object] = []
    by_union: list[object] = []
    bus = EventBus(context=())
    bus.on(Metrics, by_type.append)
    bus.on((LogLine, Notice), by_tuple.append)
    bus.on(LogLine | TaskProgress, by_union.append)
    events: list[SkywardEvent] = [metrics(1.0), line(1), Notice("n"), TaskProgress(1, 2, 0), PoolStarted()]
    for event in events:
        bus.emit(event)
    assert by_type == [metrics(1.0)]
    assert by_tuple == [line(1), Notice("n")]
    assert by_union == [line(1), TaskProgress(1, 2, 0)]


def test_on_returns_an_unsubscribe() -> None:
    seen: list[object] = []
    bus = EventBus(context=())
    remove = bus.on(PoolStarted, seen.append)
    bus.emit(PoolStarted())
    remove()
    bus.emit(PoolStarted())
    assert seen == [PoolStarted()]


@pytest.mark.parametrize("bad", ["Metrics", 3, None])
def test_on_refuses_what_is_not_an_event_type(bad: object) -> None:
    bus = EventBus(context=())
    with pytest.raises(ConfigurationError, match="event class"):
        bus.on(bad, print)
    with pytest.raises(ConfigurationError, match="callable"):
        bus.on(Metrics, "print")  # type: ignore[call-overload]


def test_bus_is_thread_safe_and_keeps_each_threads_order() -> None:
    seen: list[tuple[int, int]] = []
    active = 0
    overlapped = False

    def slow_record(event: SkywardEvent) -> None:
        nonlocal active, overlapped
        active += 1
        overlapped |= active > 1
        time.sleep(0)  # give other emitting threads a chance to interleave
        assert isinstance(event, LogLine)
        seen.append((event.node, int(event.timestamp)))
        active -= 1

    bus = EventBus(on_event=slow_record, context=())
    per_thread = 300

    def producer(node: int) -> None:
        for i in range(per_thread):
            bus.emit(LogLine(node, f"i-{node}", "x", float(i)))

    threads = [threading.Thread(target=producer, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not overlapped
    assert len(seen) == 8 * per_thread
    for node in range(8):
        assert [i for n, i in seen if n == node] == list(range(per_thread))


def test_a_handler_added_from_inside_a_callback_does_not_deadlock() -> None:
    seen: list[object] = []
    bus = EventBus(context=())

    def subscribe_later(event: SkywardEvent) -> None:
        bus.on(Notice, seen.append)
        bus.emit(Notice("from inside"))

    bus.on(PoolStarted, subscribe_later)
    done = threading.Event()

    def run() -> None:
        bus.emit(PoolStarted())
        done.set()

    threading.Thread(target=run, daemon=True).start()
    assert done.wait(5.0)
    assert seen == [Notice("from inside")]


def test_bus_emit_usable_as_a_callback() -> None:
    seen: list[object] = []
    bus = EventBus(on_event=recorder(seen), context=())
    forward: Callable[[SkywardEvent], None] = bus.emit
    with use_callback(forward):
        emit(Notice("user event"))
    assert seen == [Notice("user event")]
