"""The emulated-instance harness itself (needs root for PID and mount namespaces)."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness import EmulatedInstances, UnsafeUserData, check_user_data, decode_user_data, recorder
from harness.instances import host_tmp_entries

_REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="emulated instances need root (namespaces)")


@pytest.fixture
def terminated() -> list[str]:
    return []


@pytest.fixture
def harness(terminated: list[str]) -> Iterator[EmulatedInstances]:
    with EmulatedInstances(terminated.append, shutdown_time_scale=0.01) as instances:
        yield instances


def _wait(condition: object, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


def _run(harness: EmulatedInstances, instance_id: str, body: str) -> None:
    harness.start(instance_id, "#!/usr/bin/env bash\nset -u\n" + body)


def _marker(harness: EmulatedInstances, instance_id: str, name: str) -> Path:
    return harness.instance(instance_id).directory / "home" / name


def test_instances_get_a_clean_environment_their_address_and_a_private_tmp(
    harness: EmulatedInstances, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "must-not-leak")
    _run(
        harness,
        "i-env",
        'env > "$HOME/env.txt"; echo hello > /tmp/mine; ls -a /tmp > "$HOME/tmp.txt"; touch "$HOME/done"',
    )
    _wait(lambda: _marker(harness, "i-env", "done").exists())
    env = dict(
        line.split("=", 1) for line in _marker(harness, "i-env", "env.txt").read_text().splitlines() if "=" in line
    )
    assert "AWS_SECRET_ACCESS_KEY" not in env and "PYTEST_CURRENT_TEST" not in env
    assert env["SKYWARD_BIND_HOST"] == harness.address_for("i-env")
    assert env["HOME"].endswith("/i-env/home") and env["SKYWARD_HOME"].startswith(env["HOME"])
    assert env["PATH"].split(":")[0].endswith("/i-env/bin")
    kept = [Path(p).name for p in host_tmp_entries([harness.python, *sys.path])]  # a checkout under /tmp
    assert sorted(_marker(harness, "i-env", "tmp.txt").read_text().split()) == sorted([".", "..", "mine", *kept])
    assert (harness.instance("i-env").directory / "tmp" / "mine").read_text() == "hello\n"
    assert not Path("/tmp/mine").exists()


def test_shutdown_now_terminates_through_the_callback_and_ends_every_process(
    harness: EmulatedInstances, terminated: list[str]
) -> None:
    _run(
        harness,
        "i-off",
        'sleep 3017 & echo $! > "$HOME/child"; setsid sleep 3019 & touch "$HOME/ready"; shutdown -h now; sleep 3017',
    )
    _wait(lambda: terminated == ["i-off"])
    _wait(lambda: not harness.is_running("i-off"))
    assert harness.instance("i-off").stop_reason.startswith("powered off (shutdown -h now)")
    # nothing of the instance survives, not even a process that left its session
    out = subprocess.run(["pgrep", "-f", "sleep 301[79]"], capture_output=True, text=True, check=False).stdout.split()
    assert out == []


def test_scheduled_shutdown_fires_scaled_and_can_be_cancelled(
    harness: EmulatedInstances, terminated: list[str]
) -> None:
    _run(harness, "i-ttl", "shutdown -h +2 'ttl'; sleep 300")  # 120 s, scaled by 0.01
    _run(harness, "i-cancel", 'shutdown -h +60; shutdown -c; touch "$HOME/done"; sleep 300')
    _wait(lambda: "i-ttl" in terminated)
    assert harness.instance("i-ttl").stop_reason == "scheduled shutdown after 1.2 s"
    _wait(lambda: _marker(harness, "i-cancel", "done").exists())
    requests = harness.instance("i-cancel").control / "requests.jsonl"
    _wait(lambda: harness.instance("i-cancel").requests_offset == requests.stat().st_size)  # both handled
    assert harness.instance("i-cancel").scheduled is None
    assert "i-cancel" not in terminated and harness.is_running("i-cancel")


def test_poweroff_and_halt_never_return_and_reboot_is_refused(
    harness: EmulatedInstances, terminated: list[str]
) -> None:
    _run(harness, "i-poweroff", 'poweroff -f; touch "$HOME/returned"')
    _run(
        harness,
        "i-reboot",
        'reboot || echo refused $? > "$HOME/reboot"; systemctl restart foo; apt-get install -y gcc; '
        'touch "$HOME/done"; sleep 300',
    )
    _wait(lambda: "i-poweroff" in terminated)
    assert not _marker(harness, "i-poweroff", "returned").exists()
    _wait(lambda: _marker(harness, "i-reboot", "done").exists())
    assert _marker(harness, "i-reboot", "reboot").read_text() == "refused 1\n"
    assert "i-reboot" not in terminated
    calls = [c["argv"] for c in harness.calls("i-reboot")]
    assert calls == [["reboot"], ["systemctl", "restart", "foo"], ["apt-get", "install", "-y", "gcc"]]
    assert "nothing installed" in harness.log("i-reboot")


def test_a_finished_script_leaves_the_instance_up_like_a_real_one(harness: EmulatedInstances) -> None:
    _run(harness, "i-done", "exit 3")
    _wait(lambda: "exited with status 3" in harness.log("i-done"))
    assert harness.is_running("i-done")
    harness.stop("i-done")
    assert not harness.is_running("i-done")


def test_user_data_is_checked_and_decoded() -> None:
    with pytest.raises(UnsafeUserData):
        check_user_data("#!/bin/bash\n/sbin/shutdown -h now\n")
    with pytest.raises(UnsafeUserData):
        check_user_data("#!/bin/bash\nx=1; /usr/bin/apt-get install x\n")
    check_user_data("#!/bin/bash\nshutdown -h now\ndpkg-query -W foo\n")
    with pytest.raises(ValueError, match="not a script"):
        check_user_data("echo hi\n")
    assert decode_user_data(gzip.compress(b"#!/bin/bash\necho hi\n")) == "#!/bin/bash\necho hi\n"
    with pytest.raises(ValueError, match="multipart"):
        decode_user_data(b"Content-Type: multipart/mixed; boundary=x\n")


def test_extra_stubs_record_their_calls(terminated: list[str]) -> None:
    stub = recorder(sys.executable, "print('mounted', sys.argv[1:])\nsys.exit(0)")
    with EmulatedInstances(terminated.append, extra_stubs={"mount-s3": stub}) as harness:
        harness.start(
            "i-s3",
            '#!/usr/bin/env bash\nmount-s3 --read-only bucket /data > "$HOME/out"; touch "$HOME/done"\nsleep 60\n',
        )
        _wait(lambda: _marker(harness, "i-s3", "done").exists())
        assert [c["argv"] for c in harness.calls("i-s3")] == [["mount-s3", "--read-only", "bucket", "/data"]]
        assert _marker(harness, "i-s3", "out").read_text() == "mounted ['--read-only', 'bucket', '/data']\n"


def test_addresses_are_distinct_stable_loopback(harness: EmulatedInstances) -> None:
    first, second = harness.address_for("i-a"), harness.address_for("i-b")
    assert first != second and first.startswith("127.") and first != "127.0.0.1"
    assert harness.address_for("i-a") == first
    assert harness.endpoint_for("i-a").endpoint == f"tcp://{first}:16789"


def test_uv_mirror_builds_real_environments_from_the_test_environment(harness: EmulatedInstances) -> None:
    import cloudpickle

    version = cloudpickle.__version__
    core = (_REPO / "skyward-core").as_uri()
    _run(
        harness,
        "i-uv",
        f"""uv venv --quiet --python 3.{sys.version_info.minor} "$HOME/env"
uv pip install --quiet --python "$HOME/env/bin/python" cloudpickle=={version} 'skyward-core @ {core}'
"$HOME/env/bin/python" -c 'import cloudpickle, skyward; print(cloudpickle.__version__)' > "$HOME/ok"
uv pip install --python "$HOME/env/bin/python" not-a-package-in-the-mirror 2> "$HOME/missing" \\
  || echo $? >> "$HOME/missing"
uv pip install --python "$HOME/env/bin/python" cloudpickle==0.0.1 2> "$HOME/version" || true
uv venv --python 3.7 "$HOME/old" 2> "$HOME/python" || true
touch "$HOME/done"; sleep 60
""",
    )
    _wait(lambda: _marker(harness, "i-uv", "done").exists(), timeout=30)
    assert _marker(harness, "i-uv", "ok").read_text() == f"{version}\n", harness.log("i-uv")
    assert "No solution found" in _marker(harness, "i-uv", "missing").read_text()
    assert f"the mirror has cloudpickle {version}" in _marker(harness, "i-uv", "version").read_text()
    assert "No interpreter found for Python 3.7" in _marker(harness, "i-uv", "python").read_text()


def test_root_must_not_be_under_tmp(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="must not be under /tmp"):
        EmulatedInstances(lambda i: None, root=Path("/tmp") / "x")


def test_only_the_host_tmp_entries_holding_the_interpreter_are_kept() -> None:
    paths = ["/tmp/co/.venv/bin/python", "/tmp/co/skyward-core/src", "/tmp/other/x", "/tmp", "/usr/lib", "", "rel"]
    assert host_tmp_entries(paths) == ["/tmp/co", "/tmp/other"]


def test_an_interpreter_under_tmp_stays_visible_inside_instances(terminated: list[str]) -> None:
    # A checkout cloned under /tmp: its .venv is there, and every instance mounts a private /tmp.
    import venv

    with tempfile.TemporaryDirectory(dir="/tmp", prefix="skyward-checkout-") as checkout:
        venv.create(Path(checkout) / ".venv", symlinks=False, with_pip=False)
        python = str(Path(checkout) / ".venv" / "bin" / "python")
        assert Path(python).resolve().is_relative_to("/tmp")
        with EmulatedInstances(terminated.append, python=python) as harness:
            harness.start(
                "i-tmp", f'#!/usr/bin/env bash\n{python} -c "print(1 + 1)" > "$HOME/out"\nls /tmp > "$HOME/ls"\n'
            )
            _wait(lambda: _marker(harness, "i-tmp", "ls").exists())
            assert _marker(harness, "i-tmp", "out").read_text() == "2\n", harness.log("i-tmp")
            seen = set(_marker(harness, "i-tmp", "ls").read_text().split())
            kept = {Path(p).name for p in host_tmp_entries([python, *sys.path])}
            assert Path(checkout).name in seen and seen <= kept  # and nothing else of the host's /tmp
