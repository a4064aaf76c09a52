"""A kernel that goes away, through a real Jupyter kernel (nbclient and ipykernel): a pool
opened in it ends with it (its nodes stop within their grace period), and a kept pool
survives it: the next kernel attaches to the same workers."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import nbformat
import psutil
from nbclient import NotebookClient

WORKER_PIDS = """
import os, json
import skyward as sky

@sky.compute
def pids():
    return os.getpid(), os.getppid()

print(json.dumps(pids() @ pool))
"""


def _run_in_a_kernel(cells: list[str], tmp_path: Path, shutdown: Callable[[NotebookClient], None]) -> list[str]:
    """Run ``cells`` in a fresh kernel, then end it with ``shutdown``; each cell's stdout."""
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    client = NotebookClient(
        notebook, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    with client.setup_kernel(env={**os.environ}):
        for index, cell in enumerate(notebook.cells):
            client.execute_cell(cell, index)
        shutdown(client)
    return ["".join(o.get("text", "") for o in cell.outputs if o.get("name") == "stdout") for cell in notebook.cells]


def _kill_kernel(client: NotebookClient) -> None:
    # the kernel dies without closing anything (SIGKILL), as a crash or a forced restart does
    assert client.km is not None
    process = client.km.provisioner.process  # type: ignore[attr-defined]
    os.kill(process.pid, signal.SIGKILL)
    process.wait()


def _running(pids: list[int]) -> list[int]:
    alive = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                alive.append(pid)
        except psutil.NoSuchProcess:
            continue
    return alive


def _gone_within(pids: list[int], seconds: float) -> list[int]:
    deadline = time.monotonic() + seconds
    while _running(pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    return _running(pids)


def test_a_pool_opened_in_a_kernel_that_dies_stops_its_nodes_within_the_grace_period(tmp_path: Path) -> None:
    opened = (
        "import skyward as sky\n"
        "pool = sky.ComputePool(provider=sky.Local(grace_period=5), nodes=2, display='quiet')\npool.open()"
    )
    outputs = _run_in_a_kernel([opened, WORKER_PIDS], tmp_path, _kill_kernel)
    pids = [pid for pair in json.loads(outputs[1]) for pid in pair]  # workers and their agents
    assert _running(pids), "the nodes ran while the kernel did"
    assert _gone_within(pids, 5 + 30) == []


def test_a_kept_pool_outlives_its_kernel_and_the_next_kernel_attaches_to_the_same_workers(tmp_path: Path) -> None:
    name = f"nb-{os.getpid()}"
    opened = (
        "import skyward as sky\n"
        f"pool = sky.ComputePool(provider=sky.Local(grace_period=5), name={name!r}, keep_alive=60, display='quiet')\n"
        "pool.open()"
    )
    first = _run_in_a_kernel([opened, WORKER_PIDS], tmp_path, _kill_kernel)
    workers = json.loads(first[1])
    pids = [pid for pair in workers for pid in pair]
    time.sleep(5 + 3)  # past the grace period that ends the nodes of a pool that is not kept
    assert _running(pids) == pids, "a kept pool's nodes outlive the kernel that opened them"

    attached = f"import skyward as sky\npool = sky.attach({name!r}, display='quiet')"
    second = _run_in_a_kernel([attached, WORKER_PIDS, "pool.stop()"], tmp_path, lambda c: None)
    assert json.loads(second[1]) == workers  # the same worker processes, under the same agents
    assert _gone_within(pids, 30) == []
