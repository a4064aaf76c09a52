"""The uv calls of a cloud node's bootstrap use a cache beside its environments (so uv
hardlinks from it), a cache the machine already names, and on Local the user's own.
The rendered script really runs here, with a recording uv, up to the environment."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

from skyward import Image
from skyward.bootstrap import render_bootstrap
from skyward.image import BootstrapContext

RECORDING_UV = """#!/bin/sh
echo "$1 cache=${UV_CACHE_DIR:-unset}" >>"$UV_LOG"
if [ "$1" = venv ]; then for last; do :; done; mkdir -p "$last/bin"; fi
"""


def _bootstrap(tmp_path: Path, *, local: bool, environ: dict[str, str]) -> list[str]:
    uv = tmp_path / "uv"
    uv.write_text(RECORDING_UV)
    uv.chmod(uv.stat().st_mode | stat.S_IXUSR)
    home = tmp_path / "skyward-home"
    # Local builds an environment only for pip packages, with the client's interpreter
    python = "/usr/bin/python3" if local else None
    context = BootstrapContext(
        local=local, home=str(home), uv=str(uv), start_agent=False, python_executable=python,
        skyward_requirement="skyward-core==9.9.9",
    )  # fmt: skip
    image = Image(pip=["six"]) if local else Image()
    script = render_bootstrap(image, 0, context)  # ttl 0: nothing shuts this machine down
    log = tmp_path / "uv.log"
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "UV_LOG": str(log), **environ}
    done = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return log.read_text().splitlines()


def test_a_cloud_nodes_uv_calls_use_a_cache_beside_its_environments(tmp_path: Path) -> None:
    calls = _bootstrap(tmp_path, local=False, environ={})
    cache = tmp_path / "skyward-home" / "cache" / "uv"
    assert calls == [f"venv cache={cache}", f"pip cache={cache}"]  # it was unset: $HOME/.cache/uv


def test_a_cache_the_machine_already_names_is_kept(tmp_path: Path) -> None:
    calls = _bootstrap(tmp_path, local=False, environ={"UV_CACHE_DIR": "/data/uv-cache"})
    assert calls == ["venv cache=/data/uv-cache", "pip cache=/data/uv-cache"]


def test_the_local_provider_keeps_the_users_own_uv_cache(tmp_path: Path) -> None:
    calls = _bootstrap(tmp_path, local=True, environ={})
    assert calls == ["venv cache=unset", "pip cache=unset"]
