"""``sky.Volume`` on Local pools, against moto's S3 server, with real rclone FUSE mounts:
every node reads the bucket, a read-only mount refuses writes, a writable one (mounted or
synced) persists after the pool closes, the mounts stay inside each node's own mount
namespace, the storage keys are found nowhere a task or the user could read them, and a
volume that cannot come up fails the pool's open with the node's reason."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import psutil
import pytest
from volume_support import Store

import skyward as sky
from skyward.errors import VolumeError


@sky.compute
def read_tree(path: str) -> tuple[list[str], str, bool]:
    return sorted(os.listdir(path)), Path(path, "a.txt").read_text(), os.path.ismount(path)


@sky.compute
def try_write(path: str, name: str, text: str) -> str:
    try:
        Path(path, name).write_text(text)
    except OSError as error:
        return errno.errorcode.get(error.errno or 0, str(error))
    return "written"


def test_a_bucket_is_mounted_on_every_node_read_only_refuses_writes_and_a_writable_one_persists(
    store: Store, mount_dir: str
) -> None:
    store.put("ds/a.txt", b"hello")
    store.put("ds/b.txt", b"world")
    ro, rw = f"{mount_dir}/ro", f"{mount_dir}/rw"
    volumes = [
        sky.Volume(store.bucket, ro, prefix="ds", storage=store.storage),
        sky.Volume(store.bucket, rw, prefix="out/", read_only=False, storage=store.storage),
    ]
    with sky.ComputePool(provider=sky.Local(), nodes=2, volume=volumes, display="quiet") as pool:
        assert list(read_tree(ro) @ pool) == [(["a.txt", "b.txt"], "hello", True)] * 2
        assert not os.path.ismount(ro)  # each node's mount is in its own namespace, not this machine's
        assert (try_write(ro, "x.txt", "no") >> pool) == "EROFS"
        assert (try_write(rw, "result.txt", "42") >> pool) == "written"
    assert store.get("out/result.txt") == b"42"
    assert "ds/x.txt" not in store.listing()


def test_a_synced_volume_is_downloaded_before_the_first_task_and_uploaded_when_the_pool_closes(
    store: Store, mount_dir: str
) -> None:
    store.put("ds/a.txt", b"hello")
    volume = sky.Volume(store.bucket, mount_dir, prefix="ds", read_only=False, storage=store.storage, mode="sync")
    with sky.ComputePool(provider=sky.Local(), nodes=1, volume=[volume], display="quiet") as pool:
        assert (read_tree(mount_dir) >> pool) == (["a.txt"], "hello", False)
        assert (try_write(mount_dir, "new.txt", "made on the node") >> pool) == "written"
        assert "ds/new.txt" not in store.listing()  # not before the node stops
    assert store.get("ds/new.txt") == b"made on the node"


@sky.compute
def what_a_task_can_read(secret: str) -> list[str]:
    """Every place on the node a task could find ``secret``: its own environment, the
    agent's and every rclone's environment and command line, and every file under the
    node's run directory and its home."""
    print(f"the key is {secret}")  # forwarded output: the pool must redact it
    found = []
    if any(secret in v for v in os.environ.values()):
        found.append("worker environ")
    for pid in [os.getppid(), *(p.pid for p in psutil.process_iter(["name"]) if p.info["name"] == "rclone")]:
        for part in ("environ", "cmdline"):
            if secret.encode() in Path(f"/proc/{pid}/{part}").read_bytes():
                found.append(f"/proc/{pid}/{part}")
    run_dir = str(Path(f"/proc/{os.getppid()}/cwd").resolve().parent)  # the agent runs in its node's directory
    for root in (run_dir, os.environ.get("SKYWARD_HOME", "")):
        for base, _, files in os.walk(root) if root else ():
            for name in files:
                try:
                    if secret.encode() in Path(base, name).read_bytes():
                        found.append(str(Path(base, name)))
                except OSError:
                    pass  # a socket
    return found


def test_the_storage_keys_reach_rclone_alone_never_an_environment_command_line_file_log_or_event(
    store: Store, mount_dir: str
) -> None:
    seen: list[object] = []
    volume = sky.Volume(store.bucket, mount_dir, storage=store.storage)
    with sky.ComputePool(provider=sky.Local(), nodes=1, volume=[volume], display="quiet", on_event=seen.append) as p:
        assert (what_a_task_can_read(store.secret) >> p) == []
    lines = [e.line for e in seen if isinstance(e, sky.LogLine)]
    assert any("the key is ***" in line for line in lines), lines
    assert store.secret not in repr(seen)
    assert store.secret not in repr(volume) and store.secret not in repr(volume.storage)


def test_a_volume_that_cannot_come_up_fails_the_open_with_the_node_s_reason_and_leaves_nothing_running(
    store: Store, mount_dir: str
) -> None:
    missing = sky.Volume("no-such-bucket-here", mount_dir, storage=store.storage, mode="sync")
    with pytest.raises(VolumeError, match=r"node 0: could not download .*no-such-bucket-here"):
        with sky.ComputePool(provider=sky.Local(), nodes=1, volume=[missing], display="quiet"):
            pass
    assert _agents_of_this_process() == []


def _agents_of_this_process() -> list[int]:
    """The node agents this test process started and that still run (a Local node's bash
    execs its agent, a child of ours; pools of other test processes are not)."""
    agents = []
    for child in psutil.Process().children(recursive=True):
        try:
            if child.status() != psutil.STATUS_ZOMBIE and "skyward.agent" in " ".join(child.cmdline()):
                agents.append(child.pid)
        except psutil.NoSuchProcess:
            pass
    return agents
