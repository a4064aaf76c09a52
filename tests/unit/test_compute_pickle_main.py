"""A computation of a function defined in ``__main__`` (a script, a notebook) pickles with
the standard ``pickle``: a real script writes one, another process reads and runs it."""

from __future__ import annotations

import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import skyward as sky

_SCRIPT = textwrap.dedent(
    """
    import pickle
    import sys

    import skyward as sky

    OFFSET = 100


    @sky.compute(retries=2)
    def add(a, b):
        return a + b + OFFSET


    class Scale:
        def __init__(self, k):
            self.k = k


    @sky.compute
    def scaled(x, scale):
        return x * scale.k


    def make_closure(n):
        @sky.compute
        def plus(x):
            return x + n
        return plus


    payload = {
        "pending": add(1, 2),
        "function": add,
        "with_class": scaled(3, Scale(5)),
        "closure": make_closure(7)(1),
    }
    with open(sys.argv[1], "wb") as out:
        pickle.dump(payload, out)
    # the same script reads its own pickle back (what multiprocessing does)
    again = pickle.loads(pickle.dumps(add(2, 3)))
    print(again.fn(*again.args))
    """
)


def _run_script(tmp_path: Path) -> dict[str, object]:
    script = tmp_path / "make_pickle.py"
    script.write_text(_SCRIPT)
    out = tmp_path / "payload.pkl"
    done = subprocess.run(
        [sys.executable, str(script), str(out)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "105"
    loaded: dict[str, object] = pickle.loads(out.read_bytes())
    return loaded


def test_a_computation_of_a_script_s_function_pickles_with_the_standard_pickle(tmp_path: Path) -> None:
    payload = _run_script(tmp_path)
    pending = payload["pending"]
    assert isinstance(pending, sky.PendingCompute)
    assert pending.args == (1, 2)
    assert pending.retries == 2
    assert pending.fn(*pending.args) == 103  # its globals (OFFSET) came with it


def test_a_compute_function_of_a_script_pickles_and_still_makes_computations(tmp_path: Path) -> None:
    function = _run_script(tmp_path)["function"]
    assert isinstance(function, sky.ComputeFunction)
    assert function.retries == 2
    pending = function(10, 20)
    assert pending.fn(*pending.args) == 130
    assert function.local(0, 0) == 100


def test_a_script_s_classes_and_closures_travel_with_its_computations(tmp_path: Path) -> None:
    payload = _run_script(tmp_path)
    with_class, closure = payload["with_class"], payload["closure"]
    assert isinstance(with_class, sky.PendingCompute)
    assert isinstance(closure, sky.PendingCompute)
    assert with_class.fn(*with_class.args) == 15
    assert closure.fn(*closure.args) == 8
