"""``Image(includes=...)``: the project's files reach every node of a real Local pool,
by content, over the pool's channel, and tasks run in a copy of the working directory."""

from __future__ import annotations

import os
import signal
import stat
import threading
from pathlib import Path

import psutil
import pytest

import skyward as sky
from skyward.errors import ConfigurationError, ProvisioningError
from skyward.events import InfraCreating, InstanceProvisioned, NodeAdded, SkywardEvent


@sky.compute
def tree() -> dict[str, tuple[bytes, int]]:
    """Every file below the task's working directory: its bytes and permission bits."""
    out: dict[str, tuple[bytes, int]] = {}
    for root, _dirs, files in os.walk("."):
        for name in files:
            path = os.path.join(root, name)[2:]
            out[path] = (Path(path).read_bytes(), stat.S_IMODE(os.stat(path).st_mode))
    return out


@sky.compute
def read_relative(path: str) -> str:
    with open(path) as f:
        return f.read()


@sky.compute
def import_shipped() -> int:
    import helpers  # a module that exists only in the shipped files

    return int(helpers.ANSWER)


@pytest.fixture(autouse=True)
def _own_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A content store of this test's own (Local's nodes use the client's home): what
    another test shipped is not there."""
    monkeypatch.setenv("SKYWARD_HOME", str(tmp_path / "home"))


def _project(root: Path) -> Path:
    """A small project: data and configs to ship, a .gitignore hiding some of it."""
    (root / "data" / "raw").mkdir(parents=True)
    (root / "configs" / "sub").mkdir(parents=True)
    (root / ".git").mkdir()
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (root / ".gitignore").write_text("*.tmp\ndata/raw/\n")
    (root / "configs" / ".gitignore").write_text("secret.yaml\n")
    (root / "data" / "train.csv").write_bytes(b"a,b\n1,2\n" * 1000)
    (root / "data" / "notes.tmp").write_text("scratch")
    (root / "data" / "raw" / "huge.bin").write_bytes(b"\0" * 100)
    (root / "configs" / "model.yaml").write_text("layers: 3\n")
    (root / "configs" / "secret.yaml").write_text("token: x\n")
    (root / "configs" / "sub" / "run.sh").write_text("#!/bin/sh\necho run\n")
    os.chmod(root / "configs" / "sub" / "run.sh", 0o750)
    os.chmod(root / "configs" / "model.yaml", 0o640)
    (root / "helpers.py").write_text("ANSWER = 42\n")
    (root / "unrelated.txt").write_text("not included\n")
    return root


SHIPPED = ["configs/.gitignore", "configs/model.yaml", "configs/sub/run.sh", "data/train.csv", "helpers.py"]


def test_a_task_reads_the_included_files_by_relative_path_with_their_bytes_and_modes_and_nothing_ignored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _project(tmp_path / "proj")
    monkeypatch.chdir(root)
    image = sky.Image(includes=["data/", "configs/**", "*.py"], excludes=["*.pyc"])
    with sky.ComputePool(provider=sky.Local(), nodes=2, image=image, display="quiet") as pool:
        trees = tree() @ pool
        assert read_relative("data/train.csv") >> pool == (root / "data" / "train.csv").read_text()
        assert import_shipped() >> pool == 42
        files = pool.files
    expected = {p: ((root / p).read_bytes(), stat.S_IMODE((root / p).stat().st_mode)) for p in SHIPPED}
    assert len(trees) == 2
    for seen in trees:
        assert seen == expected  # .gitignore'd, .git, unrelated and excluded files are absent
    assert files is not None
    assert files.files == len(SHIPPED)
    # Local's nodes share one store: the files crossed the wire once, not once per node
    assert files.sent_bytes == files.total_bytes == sum(len(b) for b, _ in expected.values())
    assert files.sent_blobs == len(SHIPPED)


def test_a_second_pool_sends_no_blob_and_a_changed_file_sends_only_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _project(tmp_path / "proj")
    monkeypatch.chdir(root)
    image = sky.Image(includes=["data/*.csv", "configs/"])
    sent = []
    for change in (None, None, b"x,y\n9,9\n"):
        if change is not None:
            (root / "data" / "train.csv").write_bytes(change)
        # tcp: the files travel under CURVE, as to a cloud node
        with sky.ComputePool(provider=sky.Local(transport="tcp"), image=image, display="quiet") as pool:
            assert read_relative("data/train.csv") >> pool == (root / "data" / "train.csv").read_text()
            files = pool.files
            assert files is not None
            sent.append((files.sent_bytes, files.sent_blobs, files.files_hash))
    first, again, changed = sent
    shipped = ["data/train.csv", "configs/.gitignore", "configs/model.yaml", "configs/sub/run.sh"]
    assert first[:2] == (8000 + sum(len((root / p).read_bytes()) for p in shipped[1:]), 4)
    assert again == (0, 0, first[2])  # the same files: nothing crossed the wire
    assert changed[:2] == (len(b"x,y\n9,9\n"), 1) and changed[2] != first[2]  # only the changed file


@sky.compute
def agent_pid_and_file(path: str) -> tuple[int, str]:
    return os.getppid(), Path(path).read_text()


def test_a_replacement_node_gets_the_files_before_its_first_task(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _project(tmp_path / "proj")
    monkeypatch.chdir(root)
    replaced = threading.Event()

    def on_event(event: SkywardEvent) -> None:
        if isinstance(event, NodeAdded) and event.reason == "replacement":
            replaced.set()

    image = sky.Image(includes=["configs/model.yaml"])
    with sky.ComputePool(provider=sky.Local(), nodes=2, image=image, display="quiet", on_event=on_event) as pool:
        before = agent_pid_and_file("configs/model.yaml") @ pool
        os.kill(before[1][0], signal.SIGKILL)  # node 1's agent; its workers go with it
        assert replaced.wait(60), "node 1 was not replaced"
        after = agent_pid_and_file("configs/model.yaml") @ pool
    assert after[1][0] != before[1][0]  # a new agent, which received the files before its task
    assert [text for _, text in after] == ["layers: 3\n"] * 2


def test_an_include_that_matches_nothing_fails_the_open_naming_it_before_anything_is_provisioned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _project(tmp_path / "proj")
    monkeypatch.chdir(root)
    seen: list[SkywardEvent] = []
    for pattern, why in (("models/*.pt", "matches no file"), ("data/notes.tmp", "a .gitignore or excludes")):
        pool = sky.ComputePool(
            provider=sky.Local(), image=sky.Image(includes=["data/", pattern]), display="quiet", on_event=seen.append
        )
        with pytest.raises(ConfigurationError, match=r"Image\(includes=\[.*\]\) matches no file") as error:
            pool.open()
        assert pattern in str(error.value) and str(root) in str(error.value) and why in str(error.value)
    assert not [e for e in seen if isinstance(e, InfraCreating | InstanceProvisioned)]


def test_a_symlink_an_include_reaches_is_refused_naming_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _project(tmp_path / "proj")
    (root / "data" / "link.csv").symlink_to(root / "data" / "train.csv")
    monkeypatch.chdir(root)
    pool = sky.ComputePool(provider=sky.Local(), image=sky.Image(includes=["data/"]), display="quiet")
    with pytest.raises(ConfigurationError, match=r"'data/link.csv'.*symbolic link"):
        pool.open()


def test_a_node_that_cannot_store_the_files_fails_the_open_and_nothing_is_left_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _project(tmp_path / "proj")
    monkeypatch.chdir(root)
    home = Path(os.environ["SKYWARD_HOME"])
    home.mkdir(parents=True, exist_ok=True)
    (home / "files").write_text("a file where the node's store directory should be")
    seen: list[SkywardEvent] = []
    pool = sky.ComputePool(
        provider=sky.Local(), image=sky.Image(includes=["data/"]), display="quiet", on_event=seen.append
    )
    with pytest.raises(ProvisioningError, match="node 0 could not take the project's files"):
        pool.open()
    assert [e for e in seen if isinstance(e, InstanceProvisioned)], "the node never started: the test proves nothing"
    left = [p for p in psutil.Process().children(recursive=True) if p.status() != psutil.STATUS_ZOMBIE]
    assert not [p.cmdline() for p in left if "skyward.agent" in " ".join(p.cmdline())]
    assert not pool.is_active


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"includes": "data/"}, r"includes='data/'\) takes a list"),
        ({"includes": ["/etc/passwd"]}, r"includes=\['/etc/passwd'\]\): patterns are relative"),
        ({"includes": ["~/data"]}, r"patterns are relative"),
        ({"includes": ["../secrets"]}, r"includes=\['../secrets'\]\): '..' would reach outside"),
        ({"includes": ["data/../../x"]}, r"'..' would reach outside"),
        ({"includes": [3]}, r"includes=...\) items must be non-empty strings"),
        ({"includes": b""}, r"includes=b''\) takes a list"),
        ({"includes": [""]}, r"items must be non-empty strings"),
        ({"includes": ["x"], "excludes": ["/abs"]}, r"excludes=\['/abs'\]\): patterns are relative"),
        ({"excludes": ["*.pyc"]}, r"excludes=\['\*.pyc'\]\) without includes"),
    ],
)
def test_a_bad_include_or_exclude_is_refused_at_construction_naming_the_parameter(
    kwargs: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message):
        sky.Image(**kwargs)  # type: ignore[arg-type]


def test_the_files_are_not_part_of_the_environment_s_cache_key(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("one")
    image = sky.Image(includes=["a.txt"])
    before = image.files_hash(tmp_path)
    (tmp_path / "a.txt").write_text("two")
    assert image.files_hash(tmp_path) != before
    assert image.content_hash() == sky.Image().content_hash()
