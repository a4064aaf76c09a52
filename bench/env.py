"""Where the benchmark keeps its files, and the environment every process it starts sees.

Every temporary directory (Skyward's run dirs, Ray's session, Dask's spill space, the
floor's sockets, matplotlib's cache) lives under ``bench/.work/`` (gitignored), so a run
leaves nothing elsewhere and ``rm -r bench/.work`` removes all of it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
WORK = BENCH / ".work"
TMP = WORK / "tmp"
RESULTS = BENCH / "results"
FULL_VENV = WORK / "venv"
FULL_REQUIREMENTS = BENCH / "requirements-full.txt"
_STAMP = FULL_VENV / ".bench-requirements"
IN_FULL_VENV = "BENCH_IN_FULL_VENV"


def prepare_environment() -> None:
    """Point this process and its children at the benchmark's own directories."""
    for path in (WORK, TMP):
        path.mkdir(parents=True, exist_ok=True)
    os.environ["TMPDIR"] = str(TMP)
    tempfile.tempdir = None  # re-read TMPDIR
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    os.environ["SKYWARD_HOME"] = str(WORK / "skyward-home")
    os.environ["MPLCONFIGDIR"] = str(WORK / "matplotlib")
    os.environ["DASK_TEMPORARY_DIRECTORY"] = str(TMP / "dask")
    # Every system's processes cache their bytecode, as a user's interpreter does by default.
    # With PYTHONDONTWRITEBYTECODE set (as in some CI images and this project's sandbox)
    # every process a start launches compiles every module it imports from source, every
    # time: on this 2-core machine (bench --quick, one commit) a 2-node Local start took
    # 0.26 s instead of 0.16 s, and loky's 0.13 s instead of 0.08 s. That measures the
    # environment, not the library. (The first start of a run writes the caches.)
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    sys.dont_write_bytecode = False
    # Worker processes of every system import bench.workload by name.
    paths = [str(ROOT), *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]]
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))


# Installed editable from this checkout: the library, and the plugin bench_sklearn.py uses.
EDITABLE = ("skyward-core", "skyward-sklearn")


def _requirements_digest() -> str:
    # the editable packages' own dependencies too: a dependency added to skyward-core must reach this venv
    projects = "".join((ROOT / p / "pyproject.toml").read_text() for p in EDITABLE)
    text = FULL_REQUIREMENTS.read_text() + " ".join(str(ROOT / p) for p in EDITABLE) + projects + sys.version
    return hashlib.sha256(text.encode()).hexdigest()


def full_venv_python() -> Path:
    return FULL_VENV / "bin" / "python"


def ensure_full_venv() -> Path:
    """Make (or reuse) bench/.work/venv: skyward-core and skyward-sklearn from this checkout
    plus Ray, Dask and the other baselines, so the full comparison never changes the dev
    environment."""
    python = full_venv_python()
    if python.exists() and _STAMP.exists() and _STAMP.read_text() == _requirements_digest():
        return python
    uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    print(f"[bench] building the full-comparison environment in {FULL_VENV}", flush=True)
    if FULL_VENV.exists():
        shutil.rmtree(FULL_VENV)
    packages = [*(arg for p in EDITABLE for arg in ("-e", str(ROOT / p))), "-r", str(FULL_REQUIREMENTS)]
    if uv is not None:
        subprocess.run([uv, "venv", "--quiet", "--python", sys.executable, str(FULL_VENV)], check=True)
        subprocess.run([uv, "pip", "install", "--quiet", "--python", str(python), *packages], check=True)
    else:
        print("[bench] uv not found: using python -m venv and pip (slower)", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(FULL_VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", *packages], check=True)
    _STAMP.write_text(_requirements_digest())
    return python
