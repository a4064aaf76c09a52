#!/usr/bin/env python3
"""Developer tasks. Needs nothing but Python 3.11+; everything else goes into .venv.

python3 tasks.py example   # run examples/quickstart.py on a Local pool of two nodes
python3 tasks.py test      # install everything, run the whole test suite
python3 tasks.py check     # ruff (lint + format) and mypy
python3 tasks.py bench     # the quick benchmark (see bench/README.md)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
PY = VENV / "bin" / "python"
PACKAGES = ["skyward-core", "skyward-aws", "skyward-digitalocean", "skyward-verda", "skyward-torch", "skyward-sklearn"]
STAMP = VENV / ".skyward-installed"


def run(*cmd: str | Path, env: dict[str, str] | None = None, check: bool = True) -> int:
    print("+", " ".join(map(str, cmd)), flush=True)
    return subprocess.run([str(c) for c in cmd], cwd=ROOT, env=env, check=check).returncode


def ensure_venv(dev: bool) -> None:
    if not PY.exists():
        venv.EnvBuilder(with_pip=True).create(VENV)
    wanted = "dev" if dev else "core"
    if STAMP.exists() and (STAMP.read_text() == "dev" or STAMP.read_text() == wanted):
        return
    pip = [PY, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    editable = [arg for p in (PACKAGES if dev else PACKAGES[:1]) for arg in ("-e", ROOT / p)]
    if dev:
        run(*pip, "-r", ROOT / "requirements-dev.txt", *editable, ROOT / "tests" / "plugin_example")
    else:
        run(*pip, *editable)
    STAMP.write_text(wanted)


def example() -> int:
    ensure_venv(dev=False)
    return run(PY, ROOT / "examples" / "quickstart.py", check=False)


def _in_isolated_netns(cmd: list[str | Path]) -> list[str | Path]:
    """Run ``cmd`` in a fresh network namespace with only loopback up: tests that talk to
    emulated clouds can then reach nothing off this machine, whatever address they try."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        raise SystemExit("the cloud tests need root and unshare(1) to run in an isolated network namespace")
    inner = " ".join(f"'{c}'" for c in cmd)
    return ["unshare", "--net", "--", "sh", "-c", f"ip link set lo up && exec {inner}"]


def test(extra: list[str]) -> int:
    ensure_venv(dev=True)
    env = dict(os.environ, PYTHONHASHSEED="0", SKYWARD_TEST_NETNS="")
    base: list[str | Path] = [PY, "-m", "pytest", "-p", "no:cacheprovider"]
    code = run(*base, "-m", "not cloud", *extra, env=env, check=False)
    cloud_env = dict(env, SKYWARD_TEST_NETNS="1")
    cloud = run(*_in_isolated_netns([*base, "-m", "cloud", *extra]), env=cloud_env, check=False)
    return code or cloud_result(cloud, extra)


NO_TESTS_COLLECTED = 5  # pytest's exit status


def cloud_result(code: int, extra: list[str]) -> int:
    """The cloud pass's exit status as the task reports it. Collecting no cloud test is
    fine when the arguments chose a part of the suite (``tasks.py test tests/unit``), and a
    failure on a whole run: there, it means the cloud tests went missing."""
    if code == NO_TESTS_COLLECTED and extra:
        return 0
    return code


def check() -> int:
    ensure_venv(dev=True)
    paths = [
        p for p in ("skyward-core", *PACKAGES[1:], "tests", "examples", "bench", "tasks.py") if (ROOT / p).exists()
    ]
    codes = [
        run(PY, "-m", "ruff", "check", *paths, check=False),
        run(PY, "-m", "ruff", "format", "--check", *paths, check=False),
        run(PY, "-m", "mypy", *[f"{p}/src" for p in PACKAGES], check=False),
        run(PY, "-m", "mypy", "tests/typing", check=False),  # the operators keep their types
    ]
    return max(codes)


def bench(extra: list[str]) -> int:
    ensure_venv(dev=True)
    return run(PY, ROOT / "bench" / "run.py", *extra, check=False)


def main() -> int:
    if len(sys.argv) < 2 or sys.argv[1] not in {"example", "test", "check", "bench"}:
        print(__doc__)
        return 2
    task, extra = sys.argv[1], sys.argv[2:]
    if task == "example":
        return example()
    if task == "test":
        return test(extra)
    if task == "check":
        return check()
    return bench(extra)


if __name__ == "__main__":
    sys.exit(main())
