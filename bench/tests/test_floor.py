"""The floor baseline is real code: it must compute, move arrays intact, and clean up."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bench.baselines.floor import FloorSystem
from bench.env import ROOT
from bench.workload import echo, inc


@pytest.mark.parametrize("transport", ["ipc", "curve"])
def test_floor_calls_maps_and_moves_arrays(transport: str, tmp_path: Path) -> None:
    floor = FloorSystem(tmp_path, transport=transport, repo_root=ROOT)  # type: ignore[arg-type]
    try:
        assert floor.call(inc, 41) == 42
        assert floor.map(inc, list(range(100))) == list(range(1, 101))
        array = np.arange(300_000, dtype=np.float64)  # 2.4 MB: travels out of band
        back = floor.call(echo, array)
        assert isinstance(back, np.ndarray) and np.array_equal(back, array)
    finally:
        floor.close()
    assert all(p.poll() is not None for p in floor._processes)


def test_floor_refuses_an_unknown_transport(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="use 'ipc' or 'curve'"):
        FloorSystem(tmp_path, transport="udp")  # type: ignore[arg-type]
