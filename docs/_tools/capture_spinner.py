"""Draws docs/assets/spinner.svg: the spinner display of a real Local pool, mid-run.

A pool of two Local nodes runs a few tasks; the events feed a ``SpinnerDisplay`` drawing
on a terminal console (into memory), and while the tasks run its current view is printed
on a recording console and saved as SVG, as a terminal shows it.

Run it with:  .venv/bin/python docs/_tools/capture_spinner.py
"""

from __future__ import annotations

import io
import time
from pathlib import Path

from rich.console import Console

import skyward as sky
from skyward.display.spinner import SpinnerDisplay

OUT = Path(__file__).resolve().parents[1] / "assets" / "spinner.svg"


@sky.compute
def work(seconds: float) -> float:
    print(f"working for {seconds} s")
    time.sleep(seconds)
    return seconds


def main() -> None:
    terminal = Console(file=io.StringIO(), force_terminal=True, width=100)
    spinner = SpinnerDisplay(terminal)
    with sky.ComputePool(nodes=2, concurrency=2, display="quiet", on_event=spinner) as pool:
        futures = [pool.submit(work(s)) for s in (0.5, 4.0, 4.0, 4.0, 4.0)]
        futures[0].result()
        time.sleep(2.2)  # a Metrics report and a CostUpdate arrive
        recorder = Console(record=True, width=100, file=io.StringIO(), force_terminal=True)
        recorder.print(spinner.renderable())
        for future in futures:
            future.result()
    spinner.close()
    OUT.write_text(recorder.export_svg(title="python train.py"), encoding="utf-8")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
