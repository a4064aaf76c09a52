"""``skyward sweep``: the schedule that runs ``skyward down --expired``, against fake
``crontab`` and ``systemctl`` commands first on PATH (tiny shell scripts keeping their state
in files under tmp_path), with HOME, XDG_CONFIG_HOME and SKYWARD_HOME in tmp_path too: no
test here can reach the real user crontab or systemd manager. Also the pure parts (the
crontab text, the schedule) and the provider ability the pool's advice reads."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from skyward.cli import sweep as sweeper
from skyward.cli.app import make_app
from skyward.providers import (
    INSTANCE,
    CredentialCheck,
    ProviderTools,
    Removal,
    Resource,
    StoppedNodesBill,
    sweep_advice,
    sweep_installed,
)
from skyward.providers.local import Local
from skyward.providers.sweeping import SweepMarker, read_marker
from skyward_aws import AWS
from skyward_digitalocean import DigitalOcean
from skyward_gcp import GCP
from skyward_runpod import RunPod
from skyward_vastai import VastAI
from skyward_verda import Verda

NOW = 1_900_000_000.0
runner = CliRunner()

FAKE_CRONTAB = """#!/bin/sh
# A user crontab kept in $FAKE_STATE/crontab; `crontab -l` and `crontab -` only.
echo "crontab $*" >> "$FAKE_STATE/calls"
case "$1" in
  -l) if [ -f "$FAKE_STATE/crontab" ]; then cat "$FAKE_STATE/crontab"; else echo "no crontab for me" >&2; exit 1; fi ;;
  -) cat > "$FAKE_STATE/crontab" ;;
  *) echo "fake crontab: unexpected $*" >&2; exit 2 ;;
esac
"""

FAKE_SYSTEMCTL = """#!/bin/sh
# A systemd user manager that works when $FAKE_STATE/systemd exists; `enable --now` and
# `disable --now` keep the timer's state in $FAKE_STATE/active.
echo "systemctl $*" >> "$FAKE_STATE/calls"
[ "$1" = --user ] || { echo "fake systemctl: only --user" >&2; exit 2; }
[ -f "$FAKE_STATE/systemd" ] || { echo "Failed to connect to bus: No medium found" >&2; exit 1; }
case "$2" in
  show-environment|daemon-reload) exit 0 ;;
  enable) touch "$FAKE_STATE/active" ;;
  disable) rm -f "$FAKE_STATE/active" ;;
  is-active) if [ -f "$FAKE_STATE/active" ]; then echo active; else echo inactive; exit 3; fi ;;
  *) echo "fake systemctl: unexpected $*" >&2; exit 2 ;;
esac
"""


@dataclass
class Machine:
    """A tmp HOME with fake crontab and systemctl first on PATH."""

    root: Path
    state: Path
    home: Path

    @property
    def crontab(self) -> str:
        path = self.state / "crontab"
        return path.read_text() if path.exists() else ""

    @property
    def calls(self) -> list[str]:
        path = self.state / "calls"
        return path.read_text().splitlines() if path.exists() else []

    def with_systemd(self) -> Machine:
        (self.state / "systemd").touch()
        return self

    @property
    def units(self) -> Path:
        return self.root / "config" / "systemd" / "user"


@pytest.fixture
def machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Machine:
    bin_dir, state = tmp_path / "bin", tmp_path / "state"
    bin_dir.mkdir()
    state.mkdir()
    for name, text in (("crontab", FAKE_CRONTAB), ("systemctl", FAKE_SYSTEMCTL)):
        script = bin_dir / name
        script.write_text(text)
        script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin")
    monkeypatch.setenv("FAKE_STATE", str(state))
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("SKYWARD_HOME", str(tmp_path / "skyward"))
    return Machine(tmp_path, state, tmp_path / "skyward")


def app(now: float = NOW):  # type: ignore[no-untyped-def]
    local = ProviderTools("local", "skyward-core", lambda _config: _LocalSession())
    return make_app(tools=[local], clock=lambda: now, address=lambda: "198.51.100.4/32")


class _LocalSession:
    provider, region = "local", "this machine"

    def check(self) -> CredentialCheck:
        return CredentialCheck("local", True, True, "ok")

    def resources(self) -> list[object]:
        return []

    def delete(self, resources: object) -> list[object]:
        return []


def test_install_without_a_user_systemd_writes_one_marked_crontab_entry_and_keeps_the_other_lines(
    machine: Machine,
) -> None:
    (machine.state / "crontab").write_text("MAILTO=me@example.com\n0 3 * * * backup --all\n")
    result = runner.invoke(app(), ["sweep", "--install", "--every", "10m"])
    assert result.exit_code == 0, result.output
    lines = machine.crontab.splitlines()
    assert lines[:2] == ["MAILTO=me@example.com", "0 3 * * * backup --all"]
    assert lines[2] == "# skyward sweep" and lines[3].startswith("*/10 * * * * ")
    assert "down --expired --log" in lines[3] and len(lines) == 4
    marker = read_marker(machine.home)
    assert marker is not None and marker.method == "cron" and marker.every_minutes == 10
    assert marker.command[0] == os.path.abspath(sweeper.sys.executable)  # absolute: cron's PATH is bare
    assert sweep_installed(machine.home)
    again = runner.invoke(app(), ["sweep", "--install", "--every", "10m"])
    assert again.exit_code == 0 and machine.crontab.count("# skyward sweep") == 1
    assert "installed (user crontab entry), every 10 min" in again.stdout


def test_install_with_a_user_systemd_writes_the_timer_and_enables_it_and_never_touches_the_crontab(
    machine: Machine,
) -> None:
    machine.with_systemd()
    result = runner.invoke(app(), ["sweep", "--install", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["installed"] and report["method"] == "timer" and report["every_minutes"] == 15
    service = (machine.units / "skyward-sweep.service").read_text()
    timer = (machine.units / "skyward-sweep.timer").read_text()
    assert f"ExecStart={report['command'][0]} -m skyward.cli down --expired --log " in service
    assert f"SKYWARD_HOME={machine.home}" in service and "EnvironmentFile=-" in service
    assert "OnUnitActiveSec=15min" in timer and "OnActiveSec=" in timer and "WantedBy=timers.target" in timer
    assert "systemctl --user enable --now skyward-sweep.timer" in machine.calls
    assert not any(call == "crontab -" for call in machine.calls)
    assert (machine.state / "active").exists()


def test_uninstall_removes_exactly_what_was_installed_and_says_so_twice_over(machine: Machine) -> None:
    (machine.state / "crontab").write_text("0 3 * * * backup --all\n# a note of mine\n")
    assert runner.invoke(app(), ["sweep", "--install"]).exit_code == 0
    removed = runner.invoke(app(), ["sweep", "--uninstall", "--json"])
    assert removed.exit_code == 0, removed.output
    said = json.loads(removed.stdout)["removed"]
    assert any(line.startswith("crontab line: */15 ") for line in said)
    assert str(machine.home / "sweep.json") in said
    assert machine.crontab == "0 3 * * * backup --all\n# a note of mine\n"
    assert not sweep_installed(machine.home)
    again = runner.invoke(app(), ["sweep", "--uninstall"])
    assert again.exit_code == 0 and "nothing was installed" in again.stderr


def test_uninstall_of_a_timer_disables_it_and_deletes_its_unit_files(machine: Machine) -> None:
    machine.with_systemd()
    assert runner.invoke(app(), ["sweep", "--install"]).exit_code == 0
    result = runner.invoke(app(), ["sweep", "--uninstall"])
    assert result.exit_code == 0, result.output
    assert list(machine.units.iterdir()) == []
    assert not (machine.state / "active").exists()
    assert "removed " + str(machine.units / "skyward-sweep.timer") in result.stderr


def test_status_says_not_installed_then_installed_with_the_last_runs_outcome(machine: Machine) -> None:
    before = runner.invoke(app(), ["sweep"])
    assert before.exit_code == 0 and before.stdout.startswith("sweep: not installed")
    assert runner.invoke(app(), ["sweep", "--install"]).exit_code == 0
    marker = read_marker(machine.home)
    assert marker is not None
    logged = runner.invoke(app(NOW + 60), ["down", "--expired", "--log", str(machine.home / "sweep.log")])
    assert logged.exit_code == 0, logged.output
    status = runner.invoke(app(NOW + 120), ["sweep", "--status", "--json"])
    report = json.loads(status.stdout)
    assert status.exit_code == 0 and report["problem"] is None
    assert report["last_run"] == {"at": NOW + 60, "exit": 0, "removed": 0, "left": 0, "skipped": [], "errors": []}
    text = runner.invoke(app(NOW + 120), ["sweep"]).stdout
    assert "last run at" in text and "exit 0, removed 0, left 0" in text


@dataclass
class Leftovers:
    """A provider holding two stopped (idle) instances of a dead pool; ``stuck`` ones refuse to go."""

    stuck: set[str]
    provider: str = "moon"
    region: str = "r1"

    def __post_init__(self) -> None:
        self.held = [
            Resource("moon", "r1", "sky-dead", INSTANCE, ident, "off", NOW - 7200, NOW + 3600, 1.0, idle=True)
            for ident in ("i-1", "i-2")
        ]

    def check(self) -> CredentialCheck:
        return CredentialCheck("moon", True, True, "ok")

    def resources(self) -> list[Resource]:
        return list(self.held)

    def delete(self, resources: Sequence[Resource]) -> list[Removal]:
        self.held = [r for r in self.held if r.id in self.stuck or r not in resources]
        return [Removal(r, r.id not in self.stuck, "stuck" if r.id in self.stuck else "") for r in resources]


@pytest.mark.parametrize(("stuck", "status", "removed", "left"), [(set(), 0, 2, 0), ({"i-2"}, 1, 1, 1)])
def test_down_expired_with_log_appends_one_line_with_its_exit_status_and_counts(
    machine: Machine, stuck: set[str], status: int, removed: int, left: int
) -> None:
    moon = Leftovers(stuck)
    tools = [ProviderTools("moon", "skyward-core", lambda _config: moon)]
    log = machine.home / "sweep.log"
    result = runner.invoke(make_app(tools=tools, clock=lambda: NOW), ["down", "--expired", "--log", str(log)])
    assert result.exit_code == status, result.output
    (line,) = log.read_text().splitlines()
    assert json.loads(line) == {
        "at": NOW,
        "exit": status,
        "removed": removed,
        "left": left,
        "skipped": [],
        "errors": [],
    }


def test_status_warns_when_the_job_s_environment_file_can_be_read_by_other_users(machine: Machine) -> None:
    assert runner.invoke(app(), ["sweep", "--install"]).exit_code == 0
    tokens = machine.home / "sweep.env"
    tokens.write_text("DIGITALOCEAN_TOKEN=dop_v1_x\n")
    tokens.chmod(0o644)
    shown = runner.invoke(app(), ["sweep"])
    assert shown.exit_code == 0 and f"other users can read it: chmod 600 {tokens}" in shown.stdout
    tokens.chmod(0o600)
    assert json.loads(runner.invoke(app(), ["sweep", "--json"]).stdout)["warning"] is None


def test_status_exits_1_when_the_crontab_entry_was_removed_behind_its_back(machine: Machine) -> None:
    assert runner.invoke(app(), ["sweep", "--install"]).exit_code == 0
    (machine.state / "crontab").write_text("0 3 * * * backup --all\n")
    result = runner.invoke(app(), ["sweep", "--json"])
    assert result.exit_code == 1
    assert "no `# skyward sweep` entry" in json.loads(result.stdout)["problem"]


def test_status_notices_a_schedule_that_stopped_running(machine: Machine) -> None:
    assert runner.invoke(app(), ["sweep", "--install", "--every", "5m"]).exit_code == 0
    late = runner.invoke(app(NOW + 3600), ["sweep", "--json"])
    assert late.exit_code == 1 and "no run logged for two intervals" in json.loads(late.stdout)["problem"]
    assert runner.invoke(app(NOW + 600), ["sweep"]).exit_code == 0  # within two intervals and the slack


@pytest.mark.parametrize(
    ("every", "said"),
    [("2m", "too often"), ("25h", "too seldom"), ("soon", "not a duration"), ("0", "too often")],
)
def test_a_bad_every_is_one_line_naming_the_option_and_what_is_allowed_and_exit_2(
    machine: Machine, every: str, said: str
) -> None:
    result = runner.invoke(app(), ["sweep", "--install", "--every", every])
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert "--every" in line and said in line and "between 5m and 24h" in line
    assert machine.calls == [] and not sweep_installed(machine.home)


def test_every_without_install_and_two_actions_at_once_are_refused(machine: Machine) -> None:
    assert runner.invoke(app(), ["sweep", "--every", "15m"]).exit_code == 2
    assert runner.invoke(app(), ["sweep", "--install", "--uninstall"]).exit_code == 2


def test_install_says_what_to_do_when_neither_cron_nor_systemd_is_there(
    machine: Machine, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = machine.root / "empty"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    result = runner.invoke(app(), ["sweep", "--install", "--json"])
    assert result.exit_code == 1
    error = json.loads(result.stdout)["errors"][-1]
    assert "neither `systemctl --user` nor `crontab` works" in error and "down --expired" in error


def test_a_refused_crontab_write_is_exit_1_and_leaves_no_marker(machine: Machine) -> None:
    failing = machine.root / "bin" / "crontab"
    failing.write_text('#!/bin/sh\n[ "$1" = -l ] && exit 0\necho "crontab: permission denied" >&2\nexit 1\n')
    result = runner.invoke(app(), ["sweep", "--install"])
    assert result.exit_code == 1 and "permission denied" in result.stderr
    assert not sweep_installed(machine.home)


def test_a_timer_systemd_refuses_to_enable_is_exit_1_naming_the_command_and_no_marker(machine: Machine) -> None:
    asked: list[tuple[str, ...]] = []

    def refusing(argv: Sequence[str], stdin: str | None) -> sweeper.Ran:  # the injected seam
        asked.append(tuple(argv))
        if argv[:2] == ["systemctl", "--user"] and argv[2] == "enable":
            return sweeper.Ran(1, "", "Failed to enable unit: Unit file skyward-sweep.timer is masked.")
        return sweeper.Ran(0, "", "") if argv[0] == "systemctl" else sweeper.Ran(1, "", "no crontab for me")

    local = ProviderTools("local", "skyward-core", lambda _config: _LocalSession())
    result = runner.invoke(make_app(tools=[local], clock=lambda: NOW, run=refusing), ["sweep", "--install"])
    assert result.exit_code == 1
    assert "`systemctl --user enable --now skyward-sweep.timer` failed (Failed to enable unit" in result.stderr
    assert not sweep_installed(machine.home) and machine.calls == []  # the fakes on PATH were never run
    assert ("systemctl", "--user", "daemon-reload") in asked
    assert not list(machine.units.iterdir())  # the unit files written before the refusal are gone


def test_doctor_lists_the_sweep_installed_or_not_from_its_marker_alone(machine: Machine) -> None:
    before = runner.invoke(app(), ["doctor", "--json"])
    assert before.exit_code == 0, before.output
    assert json.loads(before.stdout)["sweep"]["installed"] is False
    assert "sweep: not installed" in runner.invoke(app(), ["doctor"]).stdout
    assert runner.invoke(app(), ["sweep", "--install", "--every", "1h"]).exit_code == 0
    calls = len(machine.calls)
    after = json.loads(runner.invoke(app(), ["doctor", "--json"]).stdout)["sweep"]
    assert after["installed"] and after["method"] == "cron" and after["schedule"] == "every 1 h"
    assert "sweep: installed (user crontab entry), every 1 h" in runner.invoke(app(), ["doctor"]).stdout
    assert len(machine.calls) == calls  # doctor ran neither crontab nor systemctl


def test_the_installed_crontab_entry_runs_in_cron_s_bare_environment_and_its_run_shows_in_the_status(
    machine: Machine,
) -> None:
    """End to end: the console script installs, the entry's command runs under ``sh`` with
    no environment but HOME (as cron runs it), and the status reads its log line. The job
    reads ``sweep.env``: here it turns off the AWS SDK's metadata-service lookup, so the
    run never leaves the machine."""
    skyward = [sys.executable, "-m", "skyward.cli"]
    installed = subprocess.run([*skyward, "sweep", "--install", "--json"], capture_output=True, text=True, check=False)
    assert installed.returncode == 0, installed.stderr
    assert "sweep.env" in installed.stderr  # the note on the job's environment
    (machine.home / "sweep.env").write_text("AWS_EC2_METADATA_DISABLED=true\n")
    entry = machine.crontab.splitlines()[-1]
    job = entry.split(" ", 5)[5]  # after the five time fields
    bare = {"HOME": str(machine.root / "user"), "PATH": "/usr/bin:/bin"}
    ran = subprocess.run(["sh", "-c", job], env=bare, capture_output=True, text=True, check=False, timeout=300)
    assert ran.returncode == 0, (machine.home / "sweep.out").read_text()
    status = subprocess.run([*skyward, "sweep", "--json"], capture_output=True, text=True, check=False)
    report = json.loads(status.stdout)
    assert status.returncode == 0 and report["installed"] and report["method"] == "cron", status.stderr
    assert report["last_run"]["exit"] == 0 and "local" not in report["last_run"]["skipped"]


# -- pure parts --------------------------------------------------------------------------------

OTHER_LINE = st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc")), max_size=40).filter(
    lambda line: line.strip() != sweeper.CRON_MARK
)


@given(st.lists(OTHER_LINE, max_size=8), st.integers(5, 24 * 60))
def test_adding_our_entry_twice_leaves_one_and_removing_it_gives_the_other_lines_back(
    others: list[str], every: int
) -> None:
    mine = Path("/home/u/.skyward")
    entry = sweeper.cron_entry(every, sweeper.job_command("/venv/bin/python", mine), mine)
    before = "".join(f"{line}\n" for line in others)
    once = sweeper.with_entry(before, entry)
    twice = sweeper.with_entry(once, entry)
    assert twice == once and once.count(sweeper.CRON_MARK) == 1 and once.endswith(f"{entry}\n")
    rest, taken = sweeper.without_entry(twice)
    assert rest == before and taken == [sweeper.CRON_MARK, entry]


@given(st.integers(5, 24 * 60))
def test_the_cron_schedule_never_runs_less_often_than_asked(every: int) -> None:
    minute, hour, *_ = sweeper.cron_schedule(every).split()
    if every < 60:
        runs = [m for m in range(60) if m % int(minute.removeprefix("*/")) == 0]
        gaps = [b - a for a, b in zip(runs, [*runs[1:], 60], strict=True)]
    else:
        step = int(hour.removeprefix("*/"))
        runs = [h for h in range(24) if h % step == 0]
        gaps = [60 * (b - a) for a, b in zip(runs, [*runs[1:], 24], strict=True)]
    assert max(gaps) <= every


@pytest.mark.parametrize(("text", "minutes"), [("15m", 15), ("15", 15), ("1h", 60), ("900s", 15), ("24h", 1440)])
def test_every_reads_minutes_hours_and_seconds(text: str, minutes: int) -> None:
    assert sweeper.parse_every(text) == minutes


def test_the_crontab_entry_escapes_a_percent_sign_which_cron_reads_as_a_newline() -> None:
    home = Path("/home/u/100%/.skyward")
    entry = sweeper.cron_entry(15, sweeper.job_command("/venv/bin/python", home), home)
    assert "%" not in entry.replace("\\%", "")


def test_a_log_line_per_run_and_the_log_is_cut_to_its_newest_half_when_it_grows(tmp_path: Path) -> None:
    log = tmp_path / "sweep.log"
    for at in range(40):
        sweeper.append_log(log, sweeper.log_line(float(at), 0, sweeper.SweepRun(), []), keep_bytes=1000)
    assert log.stat().st_size <= 1000 + 200
    assert sweeper.last_run(tmp_path) == {"at": 39.0, "exit": 0, "removed": 0, "left": 0, "skipped": [], "errors": []}
    assert all(json.loads(line) for line in log.read_text().splitlines())


# -- the provider ability and the pool's advice ---------------------------------------------------


@pytest.mark.parametrize(
    ("name", "config", "bills"),
    [
        ("digitalocean", DigitalOcean(), True),
        ("gcp", GCP(), True),  # a VM its own TTL shut down is TERMINATED and bills its disk
        ("verda", Verda(), True),
        ("vastai", VastAI(), True),
        ("runpod", RunPod(), True),
        ("aws", AWS(), False),  # InstanceInitiatedShutdownBehavior=terminate: a stopped node is gone
        ("local", Local(), False),  # processes on this machine
    ],
)
def test_a_kept_pool_is_told_to_install_the_sweep_only_where_stopped_nodes_bill(
    name: str, config: object, bills: bool
) -> None:
    assert isinstance(config, StoppedNodesBill) is bills
    advice = sweep_advice(name, config, installed=False)
    if bills:
        assert advice is not None and "`skyward sweep --install`" in advice and name in advice
        assert config.stopped_node_note in advice  # type: ignore[attr-defined]
    else:
        assert advice is None
    assert sweep_advice(name, config, installed=True) is None


def test_sweep_installed_reads_the_marker_and_a_damaged_one_is_not_installed(tmp_path: Path) -> None:
    assert not sweep_installed(tmp_path)
    (tmp_path / "sweep.json").write_text(json.dumps(SweepMarker("cron", 15, ("/p",), NOW).to_json()))
    assert sweep_installed(tmp_path)
    (tmp_path / "sweep.json").write_text('{"method": "at"}')
    assert not sweep_installed(tmp_path)
