from __future__ import annotations

from pathlib import Path

from bench.model import Measurement, index
from bench.report import plot, render_markdown
from bench.targets import TARGETS, evaluate_all

MACHINE = {"nproc": 2, "cpu": "Test CPU", "memory_gib": 4.0, "python": "3.11.7", "platform": "Linux",
           "loadavg_start": [0.5, 0.5, 0.5], "loadavg_end": [0.7, 0.6, 0.5]}  # fmt: skip

MEASUREMENTS = [
    Measurement("latency", "floor", "median_us", 200, "us", 100),
    Measurement("latency", "floor", "p99_us", 400, "us", 100),
    Measurement("latency", "skyward", "median_us", 260, "us", 100),
    Measurement("latency", "skyward", "p99_us", 500, "us", 100),
    Measurement("throughput", "loky", "tasks_per_s", 1000, "tasks/s", 2),
    Measurement("throughput", "skyward", "tasks_per_s", 9000, "tasks/s", 2, note="rounds: 9,000, 9,100"),
    Measurement("bandwidth", "floor", "gb_per_s", 1.0, "GB/s"),
    Measurement("bandwidth", "skyward", "gb_per_s", 0.5, "GB/s"),
    Measurement("startup", "skyward", "seconds", 0.5, "s"),
    Measurement("memory", "skyward", "bytes_per_task", 3.0, "B/task"),
]


def render() -> str:
    return render_markdown(
        mode="quick", command="python bench/run.py --quick", when="2026-01-01 00:00 UTC", duration_s=10,
        machine=MACHINE, measurements=MEASUREMENTS, outcomes=evaluate_all(TARGETS, index(MEASUREMENTS)),
        extra_tables=[("sklearn", [{"estimator": "forest", "seconds": 1.25}])], notes=["a note"], image="quick.png",
    )  # fmt: skip


def test_markdown_has_targets_sections_machine_and_notes() -> None:
    text = render()
    assert "2 CPUs (Test CPU)" in text and "Python 3.11.7" in text
    assert "| latency: >> median vs floor | skyward <= 1.5 x floor | 260 | 200 | 1.30x | PASS |" in text
    assert "array round trip: GB/s vs floor (zero-copy)" in text and "**MISS**" in text
    assert "N/A (baseline not run: latency/ray/median_us)" in text
    assert "| **skyward** | 260 | 500 | 1.30x |" in text
    assert "| forest | 1.250 |" in text
    assert "- a note" in text
    assert "![" in text and "(quick.png)" in text


def test_plot_writes_a_png(tmp_path: Path) -> None:
    out = tmp_path / "plot.png"
    plot(MEASUREMENTS, out, "title")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
