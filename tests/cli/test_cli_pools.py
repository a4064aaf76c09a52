"""``skyward ls``, ``logs`` and ``down NAME`` on the pools this machine recorded.

Real Local pools where the behaviour is the processes' (``ls`` of an open pool, ``down``
of a pool whose client was SIGKILLed while its nodes live on through their grace period);
hand-written records where it is the record's (a stale one, the output log); an injected
process table where a process must refuse to die.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import psutil
import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console
from typer.testing import CliRunner

import skyward as sky
from skyward.api.kept.record import (
    KeptKeys,
    NodeRecord,
    PoolRecord,
    PoolStatus,
    PoolStore,
)
from skyward.api.kept.stop import Answer, LocalProcess, Stopper, due_signal, end_processes
from skyward.cli import pools
from skyward.cli.app import make_app
from skyward.transport.security import Keypair

runner = CliRunner()
NOW = 1_900_000_000.0
ROOT = Path(__file__).resolve().parents[2]


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def record(name: str, *, provider: str = "local", nodes: int = 2, **more: object) -> PoolRecord:
    fields: dict[str, object] = {
        "name": name, "pool_id": f"sky-{uuid.uuid4().hex[:8]}", "provider": provider, "region": "local",
        "created": NOW - 600, "expires_at": NOW + 3000, "workers_per_node": 1,
        "nodes": tuple(
            NodeRecord(i, f"local-{i}", f"ipc:///nonexistent/{name}/node-{i}.sock", "local", NOW - 600)
            for i in range(nodes)
        ),
        **more,
    }  # fmt: skip
    return PoolRecord(**fields)  # type: ignore[arg-type]


def write(store: PoolStore, rec: PoolRecord, status: PoolStatus | None = None) -> None:
    store.create(rec, KeptKeys(Keypair.generate(), {}), b"")
    if status is not None:
        store.write_status(rec.name, status)


def dead_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


# -- ls ----------------------------------------------------------------------------------------


def test_ls_shows_a_running_local_pool_with_its_name_provider_nodes_and_attached_client() -> None:
    name = unique("ls")
    with sky.ComputePool(provider=sky.Local(), nodes=2, name=name, display="quiet"):
        result = runner.invoke(make_app(), ["ls", "--json", "-p", "local"])
        assert result.exit_code == 0, result.output
        (shown,) = [p for p in json.loads(result.stdout)["pools"] if p["name"] == name]
        assert shown["provider"] == "local" and shown["nodes"] == 2
        assert shown["attached"] is True and shown["client_pid"] == os.getpid()
        assert shown["kept"] is False and shown["keep_alive_ends"] is None
        table = runner.invoke(make_app(), ["ls", "-p", "local"])
        assert table.exit_code == 0, table.output
        (line,) = [line for line in table.stdout.splitlines() if line.startswith(name)]
        assert line.split()[1:3] == ["local", "2"] and f"pid {os.getpid()}" in line and pools.NOT_KEPT in line
    after = runner.invoke(make_app(), ["ls", "--json", "-p", "local"])
    assert name not in [p["name"] for p in json.loads(after.stdout)["pools"]]  # closed: its record went


def test_ls_removes_a_record_whose_client_died_and_lists_a_kept_pool_with_no_client(tmp_path: Path) -> None:
    store = PoolStore(tmp_path)
    write(store, record("stale"), PoolStatus(client_pid=dead_pid(), client_started=NOW - 700, updated=NOW - 60))
    kept = record("kept", keep_alive=1800.0)
    write(store, kept, PoolStatus(detached_at=NOW - 60, updated=NOW - 60))
    result = runner.invoke(make_app(store=store, clock=lambda: NOW), ["ls", "--json", "-p", "local"])
    assert result.exit_code == 0, result.output
    (shown,) = json.loads(result.stdout)["pools"]
    assert shown["name"] == "kept" and shown["attached"] is False and shown["tasks_running"] == 0
    assert shown["keep_alive_ends"] == NOW - 60 + 1800 and shown["idle_seconds"] == 60
    assert store.names() == ["kept"]
    assert "removed the record of pool 'stale' (local): the pool is over (its client is gone)" in result.stderr
    table = runner.invoke(make_app(store=store, clock=lambda: NOW), ["ls", "-p", "local"])
    (line,) = [line for line in table.stdout.splitlines() if line.startswith("kept")]
    assert line.split()[-3:] == ["detached", "in", "29m00s"]


def test_a_local_pools_row_fits_an_80_column_terminal_on_one_line() -> None:
    rec = record("exp1", keep_alive=1800.0)
    status = PoolStatus(client_pid=12345, attached_at=NOW - 10, tasks_running=2, tasks_queued=5, updated=NOW)
    rows = [pools.row_of(rec, status, alive=True), pools.row_of(record("sky-1a2b3c4d"), None, alive=False)]
    console = Console(width=80, record=True)
    console.print(pools.pools_table(rows, NOW))
    text = console.export_text()
    lines = text.splitlines()
    assert max(len(line.rstrip()) for line in lines) <= 80
    (first,) = [line for line in lines if line.startswith("exp1")]
    assert first.split() == ["exp1", "local", "2", "2/5", "10m00s", "-", "$0.00", "pid", "12345", "-"]
    assert [line for line in lines if line.startswith("sky-1a2b3c4d ")]  # a name is never cut
    assert "…" not in text  # a wider row wraps in its cells, nothing is cut
    assert " ".join(text.split()).endswith("detached with its client")


@given(
    attached=st.booleans(),
    kept=st.booleans(),
    idle_since=st.none() | st.floats(NOW - 5000, NOW),
    detached_at=st.none() | st.floats(NOW - 5000, NOW),
)
def test_a_row_says_tasks_only_for_an_attached_client_and_keep_alive_only_without_one(
    attached: bool, kept: bool, idle_since: float | None, detached_at: float | None
) -> None:
    rec = record("p", keep_alive=600.0 if kept else None)
    status = PoolStatus(
        client_pid=4242, tasks_running=3, tasks_queued=1, idle_since=idle_since, detached_at=detached_at, updated=NOW
    )
    row = pools.row_of(rec, status, alive=attached)
    assert row.tasks() == ((3, 1) if attached else (0, 0))
    ends = pools.ends_text(row, NOW)
    assert ends == (pools.NOT_KEPT if not kept else "-" if attached else ends)
    if kept and not attached:
        assert ends.startswith("in ")
    idle = row.idle_for(NOW)
    assert (idle is None) == (attached and idle_since is None)


# -- logs --------------------------------------------------------------------------------------

OUTPUT = "[node 0] epoch 1 loss 0.5\n[node 1] epoch 1 loss 0.6\n[node 0] epoch 2 loss 0.4\n"


def test_logs_prints_the_recorded_output_all_or_the_last_lines_or_as_json(tmp_path: Path) -> None:
    store = PoolStore(tmp_path)
    write(store, record("train"))
    store.output_path("train").write_text(OUTPUT)
    app = make_app(store=store)
    every = runner.invoke(app, ["logs", "train"])
    assert every.exit_code == 0 and every.stdout == OUTPUT and every.stderr == ""
    last = runner.invoke(app, ["logs", "train", "--lines", "1"])
    assert last.stdout == "[node 0] epoch 2 loss 0.4\n"
    as_json = runner.invoke(app, ["logs", "train", "-n", "2", "--json"])
    assert [json.loads(line) for line in as_json.stdout.splitlines()] == [
        {"node": 1, "line": "epoch 1 loss 0.6"},
        {"node": 0, "line": "epoch 2 loss 0.4"},
    ]


def test_logs_of_an_unknown_pool_is_exit_2_naming_the_recorded_pools(tmp_path: Path) -> None:
    store = PoolStore(tmp_path)
    write(store, record("train"))
    write(store, record("eval"))
    result = runner.invoke(make_app(store=store), ["logs", "tran"])
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.strip() == (
        "skyward: no pool named 'tran' on this machine (recorded pools: eval, train; `skyward ls` lists them)"
    )


def test_logs_follow_prints_new_lines_until_the_pools_record_goes(tmp_path: Path) -> None:
    store = PoolStore(tmp_path)
    write(store, record("train"))
    log = store.output_path("train")
    log.write_text("[node 0] one\n[node 0] tw")  # the last line is not complete yet
    steps = iter(
        [
            lambda: log.open("a").write("o\n[node 1] three\n"),
            lambda: None,  # nothing new this time
            lambda: (log.open("a").write("[node 1] four\n"), store.remove("train")),  # written as it ends
        ]
    )
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        next(steps)()

    result = runner.invoke(make_app(store=store, sleep=sleep), ["logs", "train", "--follow"])
    assert result.exit_code == 0, result.output
    assert result.stdout == "[node 0] one\n[node 0] two\n[node 1] three\n[node 1] four\n"
    assert len(slept) == 3 and set(slept) == {pools.FOLLOW_POLL}


def test_logs_follow_in_a_process_ends_when_the_pool_ends_and_on_ctrl_c(tmp_path: Path) -> None:
    store = PoolStore(tmp_path)
    env = dict(os.environ, SKYWARD_HOME=str(tmp_path))
    for ending in ("record removed", "ctrl-c"):
        write(store, record("train"))
        log = store.output_path("train")
        log.write_text("[node 0] first\n")
        follower = subprocess.Popen(
            [sys.executable, "-m", "skyward.cli", "logs", "train", "-f"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        )  # fmt: skip
        assert follower.stdout is not None
        assert follower.stdout.readline() == "[node 0] first\n"
        with log.open("a") as handle:
            handle.write("[node 1] second\n")
        assert follower.stdout.readline() == "[node 1] second\n"
        if ending == "ctrl-c":
            follower.send_signal(signal.SIGINT)
        else:
            store.remove("train")
        _, err = follower.communicate(timeout=60)
        assert follower.returncode == 0, (ending, err)
        assert "Traceback" not in err and "Aborted" not in err
        store.remove("train")


@given(st.integers(0, 10_000), st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40))
def test_a_node_line_reads_back_as_its_node_and_text(node: int, text: str) -> None:
    assert pools.parse_line(f"[node {node}] {text}") == (node, text)
    assert pools.parse_line(f"no prefix {text}") == (None, f"no prefix {text}")


# -- down NAME ---------------------------------------------------------------------------------

CLIENT = """
import os, sys, time
import skyward as sky

@sky.compute
def agent() -> int:
    return os.getppid()  # a worker's parent is its node's agent

with sky.ComputePool(provider=sky.Local(grace_period=60), nodes=2, name=sys.argv[1], display="quiet") as pool:
    print(*sorted(set(agent() @ pool)), flush=True)
    time.sleep(600)
"""


@pytest.fixture
def private_tmp() -> Iterator[str]:
    """A temporary directory of the test's own for the client's run directory: another
    Local pool starting on this machine would sweep a dead client's run directory from
    /tmp, sockets and all. Short: ipc socket paths have a length limit."""
    path = tempfile.mkdtemp(prefix="sky-dn-")
    yield path
    subprocess.run(["rm", "-rf", path], check=False)


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_down_name_stops_the_agents_of_a_local_pool_whose_client_was_killed(private_tmp: str, tmp_path: Path) -> None:
    name = unique("down")
    script = tmp_path / "client.py"
    script.write_text(textwrap.dedent(CLIENT))
    client = subprocess.Popen(
        [sys.executable, str(script), name], stdout=subprocess.PIPE, text=True,
        env=dict(os.environ, TMPDIR=private_tmp),
    )  # fmt: skip
    assert client.stdout is not None
    agents = [int(pid) for pid in client.stdout.readline().split()]
    try:
        assert len(agents) == 2 and all(_running(pid) for pid in agents)
        client.send_signal(signal.SIGKILL)
        client.wait()
        assert all(_running(pid) for pid in agents)  # they outlive their client for their grace period
        store = PoolStore()
        assert name in store.names()
        result = runner.invoke(make_app(), ["down", name, "--json"])
        assert result.exit_code == 0, result.output
        shown = json.loads(result.stdout)
        assert shown["errors"] == [] and shown["removals"] == []
        assert shown["pool"]["name"] == name and shown["pool"]["record_removed"] is True
        assert sorted(p["pid"] for p in shown["pool"]["processes"]) == agents
        assert shown["pool"]["answered"] == [0, 1]  # each agent said BYE to STOP ...
        assert {p["ended"] for p in shown["pool"]["processes"]} == {"exited"}  # ... and exited: no signal needed
        assert not [pid for pid in agents if _running(pid)]
        assert name not in store.names() and not store.path(name).exists()  # its keys went with it
    finally:
        for pid in agents:
            if _running(pid):
                os.killpg(os.getpgid(pid), signal.SIGKILL)


class StubbornTable:
    """A process table in memory: ``groups`` maps a process group to its running pids; a
    signal in ``deadly`` empties the group it is sent to, any other is only noted."""

    def __init__(self, groups: dict[int, list[int]], deadly: tuple[int, ...] = ()) -> None:
        self.groups = groups
        self.deadly = deadly
        self.sent: list[tuple[int, int]] = []

    def same_process(self, pid: int, started: float | None) -> bool:
        return any(pid in members for members in self.groups.values())

    def group_of(self, pid: int) -> int | None:
        return next((g for g, members in self.groups.items() if pid in members), None)

    def members(self, group: int) -> list[int]:
        return list(self.groups.get(group, []))

    def signal_group(self, group: int, sig: int) -> None:
        self.sent.append((group, sig))
        if sig in self.deadly:
            self.groups[group] = []


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def stopper_with(table: StubbornTable, answers: list[Answer] | None = None) -> Stopper:
    time_ = FakeTime()
    return Stopper(tell=lambda record, client, keys: answers or [], table=table, clock=time_.clock, sleep=time_.sleep)


def test_down_name_exits_1_naming_a_process_that_outlives_sigkill_and_keeps_the_record(tmp_path: Path) -> None:
    store = PoolStore(tmp_path)
    rec = record("stuck", nodes=1)
    rec = replace(rec, nodes=(replace(rec.nodes[0], pid=4242),))
    write(store, rec)
    table = StubbornTable({4242: [4242, 4243]})
    result = runner.invoke(make_app(store=store, stopper=stopper_with(table)), ["down", "stuck"])
    assert result.exit_code == 1
    assert "node 0: process 4242 (and 4242, 4243 in its group) still runs after SIGKILL" in result.stderr
    assert table.sent == [(4242, signal.SIGTERM), (4242, signal.SIGKILL)]
    assert store.names() == ["stuck"]  # kept, so that `skyward down stuck` can be tried again
    shown = runner.invoke(make_app(store=store, stopper=stopper_with(table)), ["down", "stuck", "--json"])
    assert shown.exit_code == 1
    assert json.loads(shown.stdout)["pool"]["processes"] == [
        {"node": 0, "pid": 4242, "ended": "left", "survivors": [4242, 4243]}
    ]


def test_a_local_agent_that_ignores_stop_is_terminated_then_killed_and_a_recycled_pid_is_never_signalled() -> None:
    table = StubbornTable({10: [10], 20: [20, 21], 30: [30]}, deadly=(signal.SIGKILL,))
    time_ = FakeTime()
    processes = [LocalProcess(0, 10), LocalProcess(1, 20), LocalProcess(2, 99)]  # 99: no longer that process
    table.groups[10] = []  # node 0 exited on STOP before the first look
    ends = end_processes(processes, table, clock=time_.clock, sleep=time_.sleep, grace=5, kill_after=5)
    assert [e.how for e in ends] == ["exited", "killed", "exited"]
    assert table.sent == [(20, signal.SIGTERM), (20, signal.SIGKILL)]
    assert 30 not in {group for group, _ in table.sent}
    terminated = StubbornTable({20: [20]}, deadly=(signal.SIGTERM,))
    later = FakeTime()
    (end,) = end_processes([LocalProcess(1, 20)], terminated, clock=later.clock, sleep=later.sleep)
    assert end.how == "terminated"


@given(st.floats(0, 100), st.floats(0, 100), st.floats(0.1, 50), st.floats(0.1, 50))
def test_the_signal_due_only_escalates_with_time(first: float, second: float, grace: float, kill_after: float) -> None:
    early, late = sorted((first, second))
    order = {None: 0, signal.SIGTERM: 1, signal.SIGKILL: 2}
    assert order[due_signal(early, grace, kill_after)] <= order[due_signal(late, grace, kill_after)]
    assert due_signal(early, grace, kill_after) is None or early >= grace


def test_down_takes_a_recorded_pools_pool_id_and_an_unknown_name_names_the_recorded_pools(tmp_path: Path) -> None:
    store = PoolStore(tmp_path)
    rec = record("train", nodes=1)
    rec = replace(rec, nodes=(replace(rec.nodes[0], pid=4242),))
    write(store, rec)
    table = StubbornTable({4242: []})  # it exited on STOP
    answered = [Answer(0, pid=4242, said_bye=True)]
    app = make_app(store=store, stopper=stopper_with(table, answered))
    unknown = runner.invoke(app, ["down", "trian", "-p", "local"])
    assert unknown.exit_code == 1 and store.names() == ["train"]
    assert unknown.stderr.strip() == (
        "skyward: no resources of pool 'trian' on local, and no pool of that name recorded here (recorded: train): "
        "`skyward ls` lists the pools there are"
    )
    result = runner.invoke(app, ["down", rec.pool_id])
    assert result.exit_code == 0, result.output
    assert "node 0: process 4242 exited" in result.stdout and "record removed" in result.stdout
    assert store.names() == [] and table.sent == []


def test_a_record_without_a_status_is_a_pool_still_opening_until_it_is_old(tmp_path: Path) -> None:
    store = PoolStore(tmp_path)
    write(store, record("opening"))  # created at NOW - 600, no status
    fresh, _ = pools.live_pools(store, NOW - 600 + pools.OPENING / 2)
    assert [r.record.name for r in fresh] == ["opening"]
    later, over = pools.live_pools(store, NOW)
    assert later == [] and [r.name for r in over] == ["opening"] and store.names() == []


def test_a_node_change_written_after_the_pool_s_record_went_is_dropped(tmp_path: Path) -> None:
    store = PoolStore(tmp_path)
    rec = record(unique("gone"))
    write(store, rec)
    store.remove(rec.name)  # the pool closed while a node joined
    store.write_keys(rec.name, KeptKeys(Keypair.generate(), {}))
    store.update(rec)
    assert store.names() == [] and not store.path(rec.name).exists()
