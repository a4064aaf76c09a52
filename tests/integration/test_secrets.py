"""Image/ComputePool env, secrets above all, reach the workers only over the pool's channel."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import pytest

import skyward as sky
from skyward.agent.config import ENV_VAR
from skyward.errors import WorkerDiedError
from skyward.events import SkywardEvent
from skyward.image import BootstrapContext

PLAIN = "plain-value-that-is-not-secret"


def _needle() -> str:
    """A value no file, process or log line can hold by chance."""
    return f"sekrit-{secrets.token_hex(12)}"


@sky.compute
def what_the_node_holds(needles: list[str]) -> dict[str, object]:
    """The task's env, and every place on its node where one of ``needles`` is found:
    files under the run dir (the node's work dir among them), and the initial environment
    and command line of this worker and of its agent (which outlive ``os.environ``)."""
    found: list[str] = []
    cwd = Path.cwd()
    run_dir = cwd.parent  # Local: <run dir>/node-N is the node's work dir
    scanned = 0
    for root in {run_dir, cwd}:
        for path in root.rglob("*"):
            try:
                data = path.read_bytes() if path.is_file() and not path.is_socket() else b""
            except OSError:
                continue
            scanned += 1
            found += [f"{path}: {n[:6]}" for n in needles if n.encode() in data]
    for who, pid in (("worker", os.getpid()), ("agent", os.getppid())):
        for what in ("environ", "cmdline"):
            data = Path(f"/proc/{pid}/{what}").read_bytes()
            assert data or what == "environ", f"{who} {what} was empty"
            found += [f"{who} {what}: {n[:6]}" for n in needles if n.encode() in data]
    print(f"the token is {os.environ.get('HF_TOKEN')} and plain is {os.environ.get('PLAIN')}")
    return {
        "HF_TOKEN": os.environ.get("HF_TOKEN"),
        "PLAIN": os.environ.get("PLAIN"),
        "found": found,
        "scanned": scanned,
    }


def test_a_task_sees_its_secret_and_env_which_appear_nowhere_else_on_the_node(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    token = _needle()
    monkeypatch.setenv("SKYWARD_TEST_TOKEN", token)
    seen: list[SkywardEvent] = []
    image = sky.Image(env={"HF_TOKEN": sky.Secret.from_env("SKYWARD_TEST_TOKEN")})
    # read when made; gone before the pool: a Local node inherits the client's environment
    monkeypatch.delenv("SKYWARD_TEST_TOKEN")
    with sky.ComputePool(
        provider=sky.Local(transport="tcp"), image=image, env={"PLAIN": PLAIN}, display="log", on_event=seen.append
    ) as pool:
        # the node's CURVE server secret too: on Local its bootstrap script held it in a
        # file beside the task's working directory
        server_secret = pool._keys.node(0).secret.decode()
        result = what_the_node_holds([token, PLAIN, server_secret]) >> pool
    assert result["HF_TOKEN"] == token and result["PLAIN"] == PLAIN
    assert result["scanned"], "the probe read no file"
    assert result["found"] == [], f"the env is readable on the node: {result['found']}"
    events = repr(seen)
    assert "the token is *** and plain is " + PLAIN in events  # the forwarded line, redacted
    assert token not in events
    out, err = capfd.readouterr()
    assert "the token is ***" in err and token not in out + err


def test_a_secret_s_repr_never_shows_its_value(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    token = _needle()
    monkeypatch.setenv("SKYWARD_TEST_TOKEN", token)
    (tmp_path / "token").write_text(token + "\n")
    made = [sky.Secret.from_env("SKYWARD_TEST_TOKEN"), sky.Secret.from_file(tmp_path / "token"), sky.Secret(token)]
    assert [s.value for s in made] == [token] * 3  # a file's trailing newline is not part of it
    assert repr(made[0]) == "Secret('SKYWARD_TEST_TOKEN', from env)"
    image = sky.Image(env={"A": made[0], "B": made[1], "C": made[2]})
    for text in (repr(made), str(made), repr(image), str(image)):
        assert token not in text


def test_an_unset_variable_fails_at_construction_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SKYWARD_TEST_UNSET", raising=False)
    with pytest.raises(sky.ConfigurationError, match="SKYWARD_TEST_UNSET"):
        sky.ComputePool(provider=sky.Local(), env={"T": sky.Secret.from_env("SKYWARD_TEST_UNSET")})


def test_a_missing_file_fails_at_construction_naming_it(tmp_path: Path) -> None:
    with pytest.raises(sky.ConfigurationError, match="nope"):
        sky.Secret.from_file(tmp_path / "nope")


def test_rotating_a_secret_or_changing_env_keeps_the_environment_cache_key() -> None:
    base = sky.Image(pip=["six"], env={"T": sky.Secret("one")})
    assert sky.Image(pip=["six"], env={"T": sky.Secret("two"), "X": "1"}).content_hash() == base.content_hash()
    assert sky.Image(pip=["six", "attrs"], env={"T": sky.Secret("one")}).content_hash() != base.content_hash()


def test_the_bootstrap_script_holds_no_env_value() -> None:
    token = _needle()
    image = sky.Image(env={"HF_TOKEN": sky.Secret(token), "PLAIN": PLAIN})
    context = BootstrapContext(start_agent=True, agent_env={ENV_VAR: "{}"})
    for script in (image.bootstrap(600), image.bootstrap(600, context=context)):
        assert "skyward.agent" in script or "environment ready" in script
        assert token not in script and PLAIN not in script and "HF_TOKEN" not in script


@sky.compute
def env_or_die(die: bool) -> tuple[str | None, str | None]:
    if die:
        os._exit(3)
    return os.environ.get("HF_TOKEN"), os.environ.get("PLAIN")


def test_a_restarted_worker_still_has_the_env() -> None:
    token = _needle()
    env = {"HF_TOKEN": sky.Secret(token), "PLAIN": PLAIN}
    with sky.ComputePool(provider=sky.Local(), env=env, display="quiet") as pool:
        assert (env_or_die(False) >> pool) == (token, PLAIN)
        with pytest.raises(WorkerDiedError):
            env_or_die(True) >> pool
        # its replacement holds tasks until the env arrives: without it this would wait
        # forever (a bound to fail, not a speed check)
        assert pool.submit(env_or_die(False)).result(timeout=60) == (token, PLAIN)
