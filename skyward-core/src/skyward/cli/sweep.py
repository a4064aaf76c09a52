"""``skyward sweep``: a per-user schedule that runs ``skyward down --expired``.

Why: on DigitalOcean, Verda, VastAI and RunPod a node whose client is gone can only stop
(power off, shut down, exit), and the stopped machine bills until something holding the
account's credentials deletes it. Without a schedule that is the next pool start on that
provider or a manual ``skyward down --expired``: unbounded. With one, a stopped node goes
at the next run (``--expired`` takes stopped machines at once, expired ones after their
expiry): at most ``--every`` minutes after it stopped.

How: a systemd *user* timer (``skyward-sweep.service`` / ``.timer`` under
``$XDG_CONFIG_HOME/systemd/user``) where ``systemctl --user`` answers, else a user crontab
entry under the comment line :data:`CRON_MARK` (every other crontab line is kept as it
was). The job runs this interpreter by its absolute path (cron's PATH is bare), with the
skyward home of the install, reads ``<home>/sweep.env`` if there is one (the job does not
get the login shell's environment: API tokens exported in a shell profile must be put
there, ``KEY=value`` lines, chmod 600), and appends one JSON line per run to
``<home>/sweep.log`` (``down --log``). ``--install`` writes the marker file
:data:`skyward.providers.sweeping.SWEEP_MARKER` that pool starts read.

Everything that decides is pure (the unit files, the crontab text with our entry added or
removed, the schedule); what runs ``crontab`` and ``systemctl`` is a :data:`Runner`,
injected so tests run the real logic against fake commands.
"""

from __future__ import annotations

import datetime
import json
import math
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skyward.errors import ConfigurationError, SkywardError
from skyward.providers.sweeping import (
    DEFAULT_SWEEP_MINUTES,
    SWEEP_LOG,
    SweepMarker,
    marker_path,
    read_marker,
)

CRON_MARK = "# skyward sweep"
"""The comment line above our crontab entry: how ``--uninstall`` and ``--status`` find it."""

UNIT = "skyward-sweep"
MIN_EVERY = 5
"""Minutes: a run lists every provider's resources (a few API calls each); more often than
this costs API quota and buys little, as a node takes minutes to stop anyway."""
MAX_EVERY = 24 * 60
"""Minutes: a forgotten 8-GPU machine bills about 24 USD an hour; a day is the most a
schedule should let it."""
ENV_FILE = "sweep.env"
OUTPUT_FILE = "sweep.out"
LOG_KEEP_BYTES = 256 * 1024
"""The log is cut to its newest half past this: one line per run (about 150 bytes) every
15 minutes is 5 MB a year, and only the last run is read."""
COMMAND_TIMEOUT = 60.0  # seconds for one crontab / systemctl call


class SweepFailed(SkywardError):
    """``crontab`` or ``systemctl`` refused a step: the message names the command and says
    what to do."""


@dataclass(frozen=True, slots=True)
class Ran:
    """What one command did: its exit status (127: not found) and its output."""

    code: int
    out: str = ""
    err: str = ""


Runner = Callable[[Sequence[str], str | None], Ran]
"""Runs ``argv`` with ``stdin`` (None: none) and says what it did; never raises for a
command that is missing or fails."""


def run_command(argv: Sequence[str], stdin: str | None = None) -> Ran:
    """The real :data:`Runner`: ``subprocess.run`` with a timeout."""
    try:
        done = subprocess.run(
            list(argv), input=stdin, capture_output=True, text=True, timeout=COMMAND_TIMEOUT, check=False
        )
    except FileNotFoundError:
        return Ran(127, "", f"{argv[0]}: command not found")
    except (OSError, subprocess.TimeoutExpired) as error:
        return Ran(126, "", f"{argv[0]}: {error}")
    return Ran(done.returncode, done.stdout, done.stderr)


# -- pure: the schedule and what it runs ---------------------------------------------------


_EVERY = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(m|min|h|s)?\s*$", re.IGNORECASE)


def parse_every(text: str) -> int:
    """``--every`` as whole minutes: ``15m``, ``15`` (minutes), ``1h``, ``900s``; in
    [:data:`MIN_EVERY`, :data:`MAX_EVERY`] (a ConfigurationError naming the option and
    what is allowed otherwise)."""
    allowed = f"give between {MIN_EVERY}m and {MAX_EVERY // 60}h, e.g. 15m or 1h"
    found = _EVERY.match(text)
    if found is None:
        raise ConfigurationError(f"--every {text!r} is not a duration: {allowed}")
    number, unit = float(found.group(1)), (found.group(2) or "m").lower()
    minutes = number * {"s": 1 / 60, "m": 1, "min": 1, "h": 60}[unit]
    if minutes < MIN_EVERY:
        raise ConfigurationError(f"--every {text} is too often (a run lists every provider): {allowed}")
    if minutes > MAX_EVERY:
        raise ConfigurationError(f"--every {text} is too seldom (a forgotten node bills meanwhile): {allowed}")
    return math.floor(minutes)


def every_text(minutes: int) -> str:
    return f"every {minutes // 60} h" if minutes % 60 == 0 else f"every {minutes} min"


def job_command(python: str, home: Path) -> tuple[str, ...]:
    """What the schedule runs: this interpreter by its absolute path (not resolved: a
    virtual environment's ``python`` is a link, and the link is what finds its packages)."""
    return (os.path.abspath(python), "-m", "skyward.cli", "down", "--expired", "--log", str(home / SWEEP_LOG))


def _systemd_word(word: str) -> str:
    escaped = word.replace("%", "%%").replace("$", "$$")
    if re.fullmatch(r"[A-Za-z0-9_@%+=:,./$-]+", escaped):
        return escaped
    return '"' + escaped.replace("\\", "\\\\").replace('"', '\\"') + '"'


def service_unit(command: Sequence[str], home: Path) -> str:
    """The ``skyward-sweep.service`` text: one run of the command (pure)."""
    return (
        "[Unit]\n"
        "Description=Skyward sweep: skyward down --expired (deletes stopped or expired cloud nodes)\n\n"
        "[Service]\n"
        "Type=oneshot\n"
        f"Environment={_systemd_word(f'SKYWARD_HOME={home}')}\n"
        f"EnvironmentFile=-{_systemd_word(str(home / ENV_FILE))}\n"
        f"ExecStart={' '.join(_systemd_word(w) for w in command)}\n"
    )


def timer_unit(every: int) -> str:
    """The ``skyward-sweep.timer`` text (pure). ``OnActiveSec`` starts the first run soon
    after the timer does: ``OnUnitActiveSec`` alone counts from a run that never came."""
    return (
        "[Unit]\n"
        f"Description=Run the Skyward sweep {every_text(every)}\n\n"
        "[Timer]\n"
        "OnActiveSec=2min\n"
        f"OnUnitActiveSec={every}min\n"
        f"Unit={UNIT}.service\n\n"
        "[Install]\n"
        "WantedBy=timers.target\n"
    )


def cron_schedule(every: int) -> str:
    """The cron time fields for ``every`` minutes, never less often than asked (cron counts
    within the hour and the day: ``*/25`` runs at :00, :25 and :50, so no gap is longer
    than 25 minutes; 90 minutes becomes every hour) (pure)."""
    if every < 60:
        return f"*/{every} * * * *"
    return f"0 */{every // 60} * * *"


def cron_entry(every: int, command: Sequence[str], home: Path) -> str:
    """Our crontab line (pure): the environment file, then the command, its output kept in
    ``sweep.out`` (cron would mail it). ``%`` is cron's newline, so it is escaped."""
    env = shlex.quote(str(home / ENV_FILE))
    line = (
        f"set -a; [ -r {env} ] && . {env}; set +a; "
        f"SKYWARD_HOME={shlex.quote(str(home))} exec {shlex.join(command)} "
        f">{shlex.quote(str(home / OUTPUT_FILE))} 2>&1"
    )
    return f"{cron_schedule(every)} {line.replace('%', chr(92) + '%')}"


def without_entry(crontab: str) -> tuple[str, list[str]]:
    """``crontab`` without our entry (the mark line and the line under it), and the lines
    taken out; every other line stays as it was (pure)."""
    kept: list[str] = []
    taken: list[str] = []
    lines = crontab.split("\n")  # cron's lines; splitlines() would also split at U+2028 and friends
    if lines[-1] == "":
        lines.pop()
    skip_next = False
    for line in lines:
        if skip_next:
            skip_next = False
            if line.strip() and not line.lstrip().startswith("#"):
                taken.append(line)
                continue
        if line.strip() == CRON_MARK:
            taken.append(line)
            skip_next = True
            continue
        kept.append(line)
    return "".join(f"{line}\n" for line in kept), taken


def with_entry(crontab: str, entry: str) -> str:
    """``crontab`` with our entry (once, at the end) under its mark line (pure)."""
    rest, _ = without_entry(crontab)
    return f"{rest}{CRON_MARK}\n{entry}\n"


def has_entry(crontab: str) -> bool:
    return bool(without_entry(crontab)[1])


# -- the log one run appends ----------------------------------------------------------------


@dataclass
class SweepRun:
    """What one ``down --expired --log`` run did, filled in as it goes."""

    removed: int = 0
    left: int = 0
    skipped: list[str] = field(default_factory=list)


def log_line(at: float, status: int, run: SweepRun, errors: Sequence[str]) -> str:
    """One JSON line for the log (pure)."""
    return json.dumps(
        {
            "at": round(at, 3),
            "exit": status,
            "removed": run.removed,
            "left": run.left,
            "skipped": list(run.skipped),
            "errors": list(errors),
        },
        sort_keys=True,
    )


def append_log(path: Path, line: str, keep_bytes: int = LOG_KEEP_BYTES) -> None:
    """Append ``line``; past ``keep_bytes`` the log is cut to its newest half first."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists() and path.stat().st_size > keep_bytes:
        tail = path.read_bytes()[-keep_bytes // 2 :]
        path.write_bytes(tail[tail.find(b"\n") + 1 :])
    with path.open("a") as log:
        log.write(line + "\n")


def last_run(home: Path) -> dict[str, Any] | None:
    """The last line of ``<home>/sweep.log`` as a dict, or None (no run logged)."""
    try:
        lines = (home / SWEEP_LOG).read_text().splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return None


def last_run_text(run: dict[str, Any] | None) -> str:
    if run is None:
        return "no run logged yet"
    text = f"exit {run.get('exit')}, removed {run.get('removed', 0)}, left {run.get('left', 0)}"
    if run.get("skipped"):
        text += f"; skipped (not configured in the job's environment): {', '.join(run['skipped'])}"
    if run.get("errors"):
        text += f"; errors: {'; '.join(map(str, run['errors']))}"
    return text


# -- the actions --------------------------------------------------------------------------


def systemd_dir() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "systemd" / "user"


def unit_paths() -> tuple[Path, Path]:
    folder = systemd_dir()
    return folder / f"{UNIT}.service", folder / f"{UNIT}.timer"


def systemd_works(run: Runner) -> bool:
    """Whether ``systemctl --user`` reaches a user manager (not in most containers)."""
    return run(["systemctl", "--user", "show-environment"], None).code == 0


def read_crontab(run: Runner) -> str | None:
    """The user's crontab text ("" when there is none), or None when ``crontab`` is missing."""
    listed = run(["crontab", "-l"], None)
    if listed.code == 0:
        return listed.out
    if listed.code in (126, 127):
        return None
    if "no crontab" in (listed.err + listed.out).lower():
        return ""
    raise SweepFailed(f"`crontab -l` failed ({listed.err.strip() or f'exit {listed.code}'}): fix cron, then run again")


def _must(run: Runner, argv: Sequence[str], stdin: str | None = None) -> None:
    done = run(argv, stdin)
    if done.code != 0:
        why = done.err.strip() or done.out.strip() or f"exit {done.code}"
        raise SweepFailed(f"`{' '.join(argv)}` failed ({why}): fix that, then `skyward sweep` says what is installed")


def uninstall(run: Runner, home: Path) -> list[str]:
    """Remove the timer, the crontab entry and the marker, whichever are there; returns what
    was removed (empty: nothing was installed)."""
    removed: list[str] = []
    units = [p for p in unit_paths() if p.exists()]
    if units:
        run(["systemctl", "--user", "disable", "--now", f"{UNIT}.timer"], None)  # a dead manager: files still go
        for path in units:
            path.unlink()
            removed.append(str(path))
        run(["systemctl", "--user", "daemon-reload"], None)
    crontab = read_crontab(run)
    if crontab is not None and has_entry(crontab):
        rest, taken = without_entry(crontab)
        _must(run, ["crontab", "-"], rest)
        removed += [f"crontab line: {line}" for line in taken if line.strip() != CRON_MARK]
    marker = marker_path(home)
    if marker.exists():
        marker.unlink()
        removed.append(str(marker))
    return removed


def install(run: Runner, home: Path, every: int, python: str, now: float) -> SweepMarker:
    """Install the schedule (replacing one installed before), and write the marker."""
    command = job_command(python, home)
    uninstall(run, home)
    home.mkdir(parents=True, exist_ok=True)
    if systemd_works(run):
        service, timer = unit_paths()
        service.parent.mkdir(parents=True, exist_ok=True)
        service.write_text(service_unit(command, home))
        timer.write_text(timer_unit(every))
        try:
            _must(run, ["systemctl", "--user", "daemon-reload"])
            _must(run, ["systemctl", "--user", "enable", "--now", f"{UNIT}.timer"])
        except SweepFailed:  # leave nothing half-installed: no unit files without a marker
            service.unlink(missing_ok=True)
            timer.unlink(missing_ok=True)
            raise
        marker = SweepMarker("timer", every, command, now, (str(service), str(timer)))
    else:
        crontab = read_crontab(run)
        if crontab is None:
            raise SweepFailed(
                "neither `systemctl --user` nor `crontab` works on this machine: run "
                f"`{shlex.join(command)}` {every_text(every)} from a scheduler you have"
            )
        _must(run, ["crontab", "-"], with_entry(crontab, cron_entry(every, command, home)))
        marker = SweepMarker("cron", every, command, now)
    marker_path(home).write_text(json.dumps(marker.to_json(), indent=2) + "\n")
    return marker


def problem(run: Runner, marker: SweepMarker | None) -> str | None:
    """Whether what is scheduled agrees with the marker; a sentence with the fix if not."""
    crontab = read_crontab(run)
    in_cron = crontab is not None and has_entry(crontab)
    timer = unit_paths()[1]
    if marker is None:
        if in_cron or timer.exists():
            return "a schedule is there without its marker file: run `skyward sweep --install` again"
        return None
    if marker.method == "cron" and not in_cron:
        return "the crontab has no `# skyward sweep` entry any more: run `skyward sweep --install` again"
    if marker.method == "timer":
        active = run(["systemctl", "--user", "is-active", f"{UNIT}.timer"], None)
        if not timer.exists() or active.out.strip() != "active":
            state = active.out.strip() or active.err.strip() or "missing"
            return f"the {UNIT}.timer is not active ({state}): run `skyward sweep --install` again"
    return None


def report(home: Path, marker: SweepMarker | None, now: float, trouble: str | None = None) -> dict[str, Any]:
    """The sweep's state, JSON-ready: from the marker and the log (no command run)."""
    run = last_run(home)
    entry: dict[str, Any] = {
        "installed": marker is not None,
        "method": marker.method if marker else None,
        "every_minutes": marker.every_minutes if marker else None,
        "schedule": every_text(marker.every_minutes) if marker else None,
        "command": list(marker.command) if marker else None,
        "log": str(home / SWEEP_LOG),
        "last_run": run,
        "problem": trouble,
        "warning": env_file_warning(home),
    }
    if marker is not None and trouble is None:
        since = run["at"] if run and isinstance(run.get("at"), int | float) else marker.installed_at
        if now - since > 2 * 60 * marker.every_minutes + 300:
            where = f"journalctl --user -u {UNIT}" if marker.method == "timer" else str(home / OUTPUT_FILE)
            entry["problem"] = f"no run logged for two intervals since {_when(since)}: see {where}"
    return entry


def env_file_warning(home: Path) -> str | None:
    """A sentence when ``sweep.env`` (API tokens) can be read by other users of the machine."""
    path = home / ENV_FILE
    try:
        mode = path.stat().st_mode
    except OSError:
        return None
    if mode & 0o077:
        return f"{path} holds API tokens and other users can read it: chmod 600 {shlex.quote(str(path))}"
    return None


def _when(at: float) -> str:
    return datetime.datetime.fromtimestamp(at, datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")


def status_lines(entry: dict[str, Any]) -> list[str]:
    """``skyward sweep`` in words (pure)."""
    if not entry["installed"]:
        lines = [
            "sweep: not installed: a stopped node on DigitalOcean, Verda, VastAI or RunPod bills until the next "
            "pool start there or `skyward down --expired`",
            f"  `skyward sweep --install` runs it every {DEFAULT_SWEEP_MINUTES} min",
        ]
    else:
        how = "systemd user timer" if entry["method"] == "timer" else "user crontab entry"
        lines = [f"sweep: installed ({how}), {entry['schedule']}: {shlex.join(entry['command'])}"]
    run = entry["last_run"]
    if run is not None or entry["installed"]:
        at = f" at {_when(float(run['at']))}" if run and isinstance(run.get("at"), int | float) else ""
        lines.append(f"  last run{at}: {last_run_text(run)} (log: {entry['log']})")
    if entry["problem"]:
        lines.append(f"  problem: {entry['problem']}")
    if entry.get("warning"):
        lines.append(f"  warning: {entry['warning']}")
    return lines


def install_notes(marker: SweepMarker, home: Path) -> list[str]:
    """What to know after an install (pure): what was installed, and the environment the
    job runs in."""
    how = "a systemd user timer" if marker.method == "timer" else "a user crontab entry"
    notes = [
        f"installed {how}: {shlex.join(marker.command)} {every_text(marker.every_minutes)}",
        "the job does not get your shell's environment: put the API tokens your profile exports "
        f"(DIGITALOCEAN_TOKEN=..., VERDA_CLIENT_ID=...) as KEY=value lines in {home / ENV_FILE} (chmod 600); "
        "`skyward sweep` names the providers the last run skipped",
    ]
    if marker.method == "timer":
        notes.append("a user timer runs while you are logged in: `loginctl enable-linger` keeps it after logout")
    return notes


@dataclass(frozen=True, slots=True)
class Answer:
    """What ``skyward sweep`` says: JSON (``--json``), lines for stdout, lines for stderr,
    and whether it exits 1 (the schedule is not what its marker says, or stopped running)."""

    json: dict[str, Any]
    lines: list[str]
    said: list[str]
    failed: bool = False


def answer(
    run: Runner,
    home: Path,
    now: float,
    install_it: bool,
    uninstall_it: bool,
    status: bool,
    every: str | None,
    python: str | None = None,
) -> Answer:
    """``skyward sweep [--install [--every D] | --uninstall | --status]``. Bad options are a
    ConfigurationError (exit 2), a refused ``crontab`` or ``systemctl`` a SweepFailed."""
    if install_it + uninstall_it + status > 1:
        raise ConfigurationError("give one of --install, --uninstall or --status")
    if every is not None and not install_it:
        raise ConfigurationError("--every goes with --install: skyward sweep --install --every 15m")
    if uninstall_it:
        removed = uninstall(run, home)
        return Answer(
            {"removed": removed, "errors": []}, [], [f"removed {r}" for r in removed] or ["nothing was installed"]
        )
    said: list[str] = []
    if install_it:
        minutes = parse_every(every) if every is not None else DEFAULT_SWEEP_MINUTES
        said = install_notes(install(run, home, minutes, python or sys.executable, now), home)
    marker = read_marker(home)
    entry = report(home, marker, now, problem(run, marker))
    errors = [entry["problem"]] if entry["problem"] else []
    return Answer({**entry, "errors": errors}, status_lines(entry), said, failed=bool(errors))
