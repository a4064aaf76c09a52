"""What a task writes reaches the pool while it runs, even without a newline."""

from __future__ import annotations

import time
from pathlib import Path

import skyward as sky


@sky.compute
def progress_bar_then_wait(marker: str) -> bool:
    """Draws a progress bar the way tqdm does (``\\r``, never ``\\n``), then waits for the
    client to say it saw the last redraw: the answer is whether it did while we ran."""
    import sys

    for percent in (10, 20, 30):
        sys.stdout.write(f"\r{percent}%|{'#' * (percent // 10)}")
        sys.stdout.flush()
    sys.stdout.write("\rstill going")  # no line end at all after this
    sys.stdout.flush()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if Path(marker).exists():
            return True
        time.sleep(0.02)
    return False


def test_a_progress_bar_without_newlines_is_shown_while_the_task_runs(tmp_path: Path) -> None:
    marker = tmp_path / "seen"
    lines: list[str] = []

    def on_line(event: sky.LogLine) -> None:
        lines.append(event.line)
        if event.line == "still going":
            marker.touch()

    with sky.ComputePool(display="quiet") as pool:
        pool.on(sky.LogLine, on_line)
        assert (progress_bar_then_wait(str(marker)) >> pool) is True
    assert [line for line in lines if "%" in line] == ["10%|#", "20%|##", "30%|###"]
