"""The bootstrap installs apt packages while it builds the Python environment (emulated
droplets on the DigitalOcean fake; apt-get is a stub that takes its time)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fakes.digitalocean import FakeDigitalOcean
from harness import recorder
from providers_support import World, emulate

import skyward
from skyward.bootstrap import STEP_TIMES
from skyward.image import BootstrapContext

SLOW_APT = recorder(
    sys.executable,
    "import time\n"
    "if 'install' in sys.argv:\n"
    "    time.sleep(4)\n"
    "    with open(os.path.join(os.environ['HOME'], 'apt-ended'), 'w') as f:\n"
    "        f.write(repr(time.time()))\n"
    "sys.exit(0)",
)


@pytest.fixture
def droplets(fake_do: FakeDigitalOcean) -> Iterator[World[FakeDigitalOcean]]:
    yield from emulate(fake_do, fake_do.power_off, extra_stubs={"apt-get": SLOW_APT})


@pytest.mark.cloud
def test_the_python_environment_builds_while_apt_installs(droplets: World[FakeDigitalOcean], do_config: object) -> None:
    image = skyward.Image(apt=["skyward-test-absent-package"], env={"PARALLEL": "1"})
    with skyward.ComputePool(provider=do_config, image=image, display="quiet") as pool:
        home = droplets.harness.instance(pool.nodes[0].instance_id).directory / "home"
    apt_ended = float((home / "apt-ended").read_text())
    began = dict(line.split(" ") for line in (home / ".skyward" / STEP_TIMES).read_text().splitlines())
    # the environment's install (step "skyward") began while apt-get was still installing;
    # one after the other, it began only after apt-get had returned
    assert float(began["skyward"]) < apt_ended
    assert float(began["server"]) > apt_ended  # the agent waits for the system packages


def _run_script(tmp_path: Path, apt_get: str, uv: str) -> subprocess.CompletedProcess[str]:
    """The bootstrap of a cloud node, up to a ready environment (no TTL, no agent), with
    ``apt-get`` and ``uv`` stubbed as shell scripts (never this machine's)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in (("apt-get", apt_get), ("uv", uv)):
        (bin_dir / name).write_text(f"#!/usr/bin/env bash\n{body}\n")
        (bin_dir / name).chmod(0o755)
    image = skyward.Image(apt=["skyward-test-absent-package"])
    context = BootstrapContext(skyward_requirement="skyward-core==1", uv=str(bin_dir / "uv"), start_agent=False)
    script = image.bootstrap(0, context=context)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path), "SKYWARD_HOME": str(tmp_path / "sky")}
    return subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=60, check=False)


UV_OK = 'if [ "$1" = venv ]; then mkdir -p "${@: -1}/bin"; fi'


def test_a_failing_apt_fails_the_bootstrap_with_its_log(tmp_path: Path) -> None:
    done = _run_script(tmp_path, "echo 'E: Unable to locate package nope'; exit 100", UV_OK)
    assert done.returncode == 3
    assert "E: Unable to locate package nope" in done.stderr
    assert "apt-get could not install Image(apt=...)" in done.stderr


def test_an_environment_that_needs_a_system_package_is_built_again_once_apt_is_done(tmp_path: Path) -> None:
    apt = f'[ "$1" = install ] && sleep 1 && touch {tmp_path}/libfoo-installed; exit 0'
    uv = (
        UV_OK + f'\nif [ "$1" = pip ] && [ ! -f {tmp_path}/libfoo-installed ]; then echo "needs libfoo" >&2; exit 1; fi'
    )
    done = _run_script(tmp_path, apt, uv)
    assert done.returncode == 0, done.stderr
    assert "needs libfoo" in done.stderr  # the first try, while apt was still installing
    assert "environment ready" in done.stdout
