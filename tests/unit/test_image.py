"""Image: validation, a stable content hash, and an idempotent bootstrap script."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from skyward.bootstrap import render_bootstrap
from skyward.errors import ConfigurationError
from skyward.image import CLIENT_PYTHON, BootstrapContext, Image


def test_default_python_is_the_clients() -> None:
    assert Image().python == CLIENT_PYTHON


def test_content_hash_is_twelve_hex_and_stable_across_machines() -> None:
    image = Image(python="3.11", pip=["numpy==2.0", "torch"], apt=["ffmpeg"], env={"B": "2", "A": "1"})
    # A literal: the hash must not depend on the process (hash seeds), machine or env (not part of it).
    assert image.content_hash() == "0f9c550629de"
    assert len(image.content_hash()) == 12
    same = Image(python="3.11", pip=("numpy==2.0", "torch"), apt=("ffmpeg",), env={"A": "1", "B": "2"})
    assert same.content_hash() == image.content_hash()


@given(st.lists(st.from_regex(r"[a-z]{1,8}", fullmatch=True), max_size=4))
def test_different_pip_lists_hash_differently(packages: list[str]) -> None:
    base = Image(python="3.11", pip=packages)
    assert base.with_pip("zzz-extra").content_hash() != base.content_hash() or "zzz-extra" in packages


@pytest.mark.parametrize("python", ["3", "python3.11", "2.7", "3.11.2.1", "", "3.x"])
def test_invalid_python_versions_are_refused(python: str) -> None:
    with pytest.raises(ConfigurationError, match="not a Python version"):
        Image(python=python)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"pip": "numpy"}, "list of strings"),
        ({"pip": [""]}, "non-empty"),
        ({"apt": ["Bad Name"]}, "Debian package"),
        ({"env": {"1BAD": "x"}}, "environment variable"),
        ({"env": {"A": 1}}, "environment variable"),
        ({"pip_extra_index_url": "ftp://x"}, "http"),
    ],
)
def test_bad_image_fields(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        Image(**kwargs)  # type: ignore[arg-type]


def test_cloud_bootstrap_arms_the_ttl_before_anything_else() -> None:
    script = Image(apt=["ffmpeg"], pip=["six"]).bootstrap(ttl=600)
    ttl_at, apt_at, deps_at = script.index("shutdown -h +10"), script.index("apt-get install"), script.index("uv")
    assert ttl_at < apt_at < deps_at
    agent_at = script.index('"$PY" -m skyward.agent')
    assert agent_at < script.index("shutdown -h now")  # a cloud node ends when its agent does


def test_local_bootstrap_never_shuts_down_or_installs_system_packages() -> None:
    context = BootstrapContext(local=True, python_executable="/usr/bin/python3")
    script = render_bootstrap(Image(apt=["bash"]), 600, context)
    assert "shutdown" not in script.replace("never shut down", "")
    assert "apt-get install" not in script.split("never installs")[0]


def _run(script: str, home: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", script],
        capture_output=True,
        text=True,
        check=False,
        env={"SKYWARD_HOME": str(home), "PATH": "/usr/bin:/bin", "HOME": str(home)},
    )


def test_local_apt_refuses_missing_packages_and_names_them(tmp_path: Path) -> None:
    context = BootstrapContext(local=True, python_executable="/usr/bin/python3", start_agent=False)
    ok = _run(render_bootstrap(Image(apt=["bash"]), 0, context), tmp_path)
    assert ok.returncode == 0, ok.stderr
    missing = _run(render_bootstrap(Image(apt=["bash", "skyward-no-such-pkg"]), 0, context), tmp_path)
    assert missing.returncode == 3
    assert "skyward-no-such-pkg" in missing.stderr and "bash " not in missing.stderr.split("lacks:")[1]


def test_bootstrap_is_idempotent(tmp_path: Path) -> None:
    context = BootstrapContext(local=True, python_executable="/usr/bin/python3", start_agent=False)
    script = render_bootstrap(Image(apt=["bash"]), 0, context)
    first, second = _run(script, tmp_path), _run(script, tmp_path)
    assert first.returncode == second.returncode == 0
    assert first.stdout == second.stdout


def _other_python() -> str | None:
    import glob

    from skyward.image import CLIENT_PYTHON

    for candidate in sorted(glob.glob("/root/.pyenv/versions/3.*/bin/python3")):
        if f"/{CLIENT_PYTHON}." not in candidate:
            return candidate
    return None


def test_bootstrap_refuses_a_node_python_that_differs_from_the_client(tmp_path: Path) -> None:
    other = _other_python()
    if other is None:
        pytest.skip("no second Python minor version on this machine")
    context = BootstrapContext(local=True, python_executable=other)
    result = _run(render_bootstrap(Image(), 0, context), tmp_path)
    assert result.returncode != 0
    assert f"client runs Python {CLIENT_PYTHON}" in result.stderr and "this node runs Python 3." in result.stderr


def test_an_edited_local_checkout_gets_a_fresh_environment(tmp_path: Path) -> None:
    from skyward.bootstrap import environment_key

    package = tmp_path / "my pkg" / "src" / "mine"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("VALUE = 1\n")
    (package / "__pycache__").mkdir()
    requirement = f"mine @ {(tmp_path / 'my pkg').as_uri()}"
    image = Image(pip=["six"])

    def key() -> str:
        context = BootstrapContext(local=True, skyward_requirement="skyward-core==0.1.0", pinned=(requirement,))
        return environment_key(image, context)

    first = key()
    assert key() == first  # stable while nothing changes
    (package / "__pycache__" / "x.pyc").write_bytes(b"ignored")
    assert key() == first  # bytecode is not source
    (package / "__init__.py").write_text("VALUE = 2\n")
    assert key() != first  # the environment holds a copy of the old code: rebuild it
    pinned = BootstrapContext(local=True, skyward_requirement="skyward-core==0.1.0", pinned=("six==1.16.0",))
    assert environment_key(image, pinned) == environment_key(image, pinned)


def test_the_agent_inherits_the_steps_its_bootstrap_went_through(tmp_path: Path) -> None:
    # A stand-in interpreter: passes the version check (reads its stdin), then plays the
    # agent by printing what it inherited.
    fake = tmp_path / "python"
    fake.write_text(
        '#!/bin/sh\nif [ "$1" = "-" ]; then cat >/dev/null; exit 0; fi\necho "steps=$SKYWARD_BOOTSTRAP_STEPS"\n'
    )
    fake.chmod(0o755)
    context = BootstrapContext(local=True, python_executable=str(fake), extra_steps=(("volumes", "true"),))
    script = render_bootstrap(Image(), 0, context)
    result = subprocess.run(
        ["bash", "-c", script],
        capture_output=True,
        text=True,
        check=False,
        env={"SKYWARD_HOME": str(tmp_path), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
             "SKYWARD_BOOTSTRAP_STEPS": "stale from a parent"},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "steps= ttl apt deps volumes server"
