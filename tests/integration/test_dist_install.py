"""``python3 tasks.py dist`` builds wheels another machine installs: in a fresh virtual
environment, ``pip install --find-links dist 'skyward[aws]'`` takes skyward, skyward-core
and skyward-aws from dist/ (their dependencies from the package index as pip is set up
here) and ``skyward.AWS`` imports.

pip is asked for a report of what it installed, and the test checks that each skyward
distribution came from dist/: the public index has a different project named skyward,
which pip would take on a Python where its newer versions install (3.12 and later), so a
passing import alone would not prove the wheels were used. About 2 minutes on CI's
2-core machine: 9 sdists and wheels, a venv, an install.
"""

from __future__ import annotations

import json
import subprocess
import sys
import venv
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from skyward.version import __version__

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def _run(*cmd: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([str(c) for c in cmd], cwd=cwd, capture_output=True, text=True, check=False)
    assert done.returncode == 0, (
        f"{' '.join(map(str, cmd))} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    )
    return done


def test_the_built_wheels_install_skyward_with_the_aws_extra_in_a_fresh_venv(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    built = _run(sys.executable, ROOT / "tasks.py", "dist", "--out", dist, cwd=ROOT)
    assert "PASSED" in built.stdout and "FAILED" not in built.stdout  # twine check --strict
    files = sorted(p.name for p in dist.iterdir() if p.name.endswith((".whl", ".tar.gz")))
    distributions = [p.parent.name for p in ROOT.glob("skyward-*/pyproject.toml")] + ["skyward"]
    assert len(files) == 2 * len(distributions) and f"skyward-{__version__}-py3-none-any.whl" in files, files
    assert f"skyward_core-{__version__}.tar.gz" in files

    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python, pip = env_dir / "bin" / "python", env_dir / "bin" / "pip"
    report = tmp_path / "report.json"
    _run(pip, "install", "--quiet", "--report", report, "--find-links", dist, "skyward[aws]", cwd=tmp_path)

    sources = {
        item["metadata"]["name"]: item["download_info"]["url"] for item in json.loads(report.read_text())["install"]
    }
    for name in ("skyward", "skyward-core", "skyward-aws"):
        path = Path(unquote(urlparse(sources[name]).path))
        assert path.parent == dist, f"{name} came from {sources[name]}, not from {dist}"
    assert not {"skyward-torch", "skyward-vastai"} & sources.keys()  # only the extra asked for

    imported = _run(python, "-c", "import skyward; print(skyward.AWS.__module__, skyward.__file__)", cwd=tmp_path)
    module, location = imported.stdout.split()
    assert module == "skyward_aws.config" and Path(location).is_relative_to(env_dir)  # not this checkout's
    assert (env_dir / "bin" / "skyward").exists()  # the console script
