"""The executables an emulated instance finds first on its PATH.

Each is a small Python program (run by the harness's own interpreter) that records its
call and, for the power commands, asks the harness to end the instance instead of
touching this machine:

* ``shutdown [-h|-P|-H] [now|+M|HH:MM] [message]`` schedules the instance's end (``now``
  or ``+0``: at once); ``shutdown -c`` cancels; ``shutdown -r`` is refused (emulated
  instances do not reboot); ``shutdown -k`` only records.
* ``poweroff``, ``halt``, ``systemctl poweroff|halt``, ``init 0``, ``telinit 0`` end
  the instance at once (and, like the real thing, never return).
* ``reboot`` and ``systemctl reboot`` are refused.
* ``apt-get`` and ``apt`` record the call and install nothing.

Requests go to ``<control>/requests.jsonl`` and calls to ``<control>/calls.jsonl``; the
control directory is written into each stub, so a stub works even under ``env -i``.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path

_COMMON = """#!{python}
import datetime, json, os, sys, time
CONTROL = {control!r}
NAME = os.path.basename(sys.argv[0])

def record():
    with open(os.path.join(CONTROL, "calls.jsonl"), "a") as f:
        f.write(json.dumps({{"argv": [NAME, *sys.argv[1:]], "env": dict(os.environ), "time": time.time()}}) + "\\n")

def request(action, **fields):
    with open(os.path.join(CONTROL, "requests.jsonl"), "a") as f:
        f.write(json.dumps({{"action": action, "command": [NAME, *sys.argv[1:]], **fields}}) + "\\n")

def power_off():
    request("terminate", delay=0)
    print("[emulated instance] powering off", file=sys.stderr, flush=True)
    while True:  # a machine that powers off does not come back to its caller
        time.sleep(3600)

def refuse_reboot():
    print(f"[emulated instance] {{NAME}}: emulated instances do not reboot", file=sys.stderr)
    sys.exit(1)

record()
"""

_SHUTDOWN = """
args = sys.argv[1:]
flags = [a for a in args if a.startswith("-")]
words = [a for a in args if not a.startswith("-")]
if "-c" in flags:
    request("cancel")
    sys.exit(0)
if "-r" in flags or "--reboot" in flags:
    refuse_reboot()
if "-k" in flags:
    sys.exit(0)
when = words[0] if words else "+1"
if when == "now":
    delay = 0.0
elif when.startswith("+") and when[1:].isdigit():
    delay = int(when[1:]) * 60.0
elif ":" in when:
    hours, minutes = (int(x) for x in when.split(":", 1))
    now = datetime.datetime.now()
    target = now.replace(hour=hours, minute=minutes, second=0, microsecond=0)
    if target <= now:
        target += datetime.timedelta(days=1)
    delay = (target - now).total_seconds()
else:
    print(f"shutdown: invalid time {{when!r}}", file=sys.stderr)
    sys.exit(1)
if delay <= 0:
    request("terminate", delay=0)
else:
    request("schedule", delay=delay)
sys.exit(0)
"""

_POWEROFF = "\npower_off()\n"
_REBOOT = "\nrefuse_reboot()\n"
_SYSTEMCTL = """
verb = sys.argv[1] if len(sys.argv) > 1 else ""
if verb in ("poweroff", "halt"):
    power_off()
if verb in ("reboot", "kexec", "soft-reboot"):
    refuse_reboot()
sys.exit(0)
"""
_INIT = """
level = sys.argv[1] if len(sys.argv) > 1 else ""
if level == "0":
    power_off()
if level == "6":
    refuse_reboot()
sys.exit(0)
"""
_APT = """
print(f"[emulated instance] {{NAME}} {{' '.join(sys.argv[1:])}}: recorded, nothing installed", file=sys.stderr)
sys.exit(0)
"""

BODIES: Mapping[str, str] = {
    "shutdown": _SHUTDOWN,
    "poweroff": _POWEROFF,
    "halt": _POWEROFF,
    "reboot": _REBOOT,
    "systemctl": _SYSTEMCTL,
    "init": _INIT,
    "telinit": _INIT,
    "apt-get": _APT,
    "apt": _APT,
}

# Commands the harness replaces; a user-data that calls one of them by absolute path
# would reach the real one, so the harness refuses to run it.
GUARDED = ("shutdown", "poweroff", "halt", "reboot", "systemctl", "init", "telinit", "apt-get", "apt", "kexec")


def write_stubs(bin_dir: Path, control: Path, python: str, extra: Mapping[str, str] | None = None) -> list[str]:
    """Write every stub into ``bin_dir``; ``extra`` maps more names to whole scripts
    (with their own shebang, ``{control}`` expanded). Returns the names written."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    written = []
    header = _COMMON.format(python=python, control=str(control))
    for name, body in BODIES.items():
        _write(bin_dir / name, header + body.format())
        written.append(name)
    for name, script in (extra or {}).items():
        _write(bin_dir / name, script.replace("{control}", str(control)))
        written.append(name)
    return written


def recorder(python: str, body: str = "sys.exit(0)") -> str:
    """A stub script (for ``extra``) that records its call like the built-in stubs, then
    runs ``body`` (Python, with ``record``/``request`` and ``sys``/``os`` in scope)."""
    return _COMMON.format(python=python, control="{control}") + "\n" + body + "\n"


def _write(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(stat.S_IRWXU | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
    os.utime(path)
