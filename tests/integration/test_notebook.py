"""The example notebook, run cell by cell through a real Jupyter kernel (nbclient and
ipykernel): open a pool, run work defined in cells, interrupt a long cell, run again,
close. Its outputs carry no terminal escape codes."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "examples" / "notebooks" / "quickstart.ipynb"


def _outputs_text(cell: nbformat.NotebookNode) -> str:
    parts = []
    for output in cell.get("outputs", []):
        parts.append(str(output.get("text", "")))
        parts.extend(str(value) for value in output.get("data", {}).values())
        # an error's traceback is IPython's own, coloured by IPython: not the display's
    return "\n".join(parts)


def test_the_example_notebook_opens_runs_survives_an_interrupt_and_closes(tmp_path: Path) -> None:
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    client = NotebookClient(
        notebook, timeout=60, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    with client.setup_kernel():
        for index, cell in enumerate(notebook.cells):
            if cell.cell_type != "code":
                continue
            if "interrupt" in cell.metadata.get("tags", []):
                # the kernel's interrupt, as the notebook's stop button sends it, once
                # the cell's task is running on the worker
                pid = client.km.provisioner.process.pid
                timer = threading.Timer(3.0, os.kill, (pid, signal.SIGINT))
                timer.start()
                with pytest.raises(CellExecutionError) as raised:
                    client.execute_cell(cell, index)
                timer.join()
                assert raised.value.ename == "KeyboardInterrupt"
                continue
            if "raises" in cell.metadata.get("tags", []):
                with pytest.raises(CellExecutionError) as failed:
                    client.execute_cell(cell, index)
                assert failed.value.ename == "ZeroDivisionError"
                # the cell's line in the remote traceback (on Local the worker reads the
                # kernel's cell file; elsewhere the client fills it in: with_source_lines)
                assert "return 1 / x  # fails for 0" in str(failed.value)
                continue
            client.execute_cell(cell, index)
    results = [_outputs_text(cell) for cell in notebook.cells if cell.cell_type == "code"]
    assert "25" in results[1]  # norm2(Point(3, 4)): a class and a function from cells
    assert "(2, 8)" in results[3]  # after the interrupt, the pool runs the next cell
    for text in results:
        assert "\x1b[" not in text  # rich renders for Jupyter: no terminal escape codes
