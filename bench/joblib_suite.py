#!/usr/bin/env python3
"""joblib's own test_parallel.py, run with the ``"skyward"`` backend on a Local pool.

    .venv/bin/python bench/joblib_suite.py              # the tests whose id names skyward
    .venv/bin/python bench/joblib_suite.py -k loky      # the same selection for loky
    .venv/bin/python bench/joblib_suite.py -- -x -v     # anything after -- goes to pytest

joblib's suite picks its backends from ``joblib.parallel.BACKENDS`` (filled when the test
module is imported) and from a fixed ``PROCESS_BACKENDS = ["multiprocessing", "loky"]``.
This script copies the installed test module to ``bench/.work/joblib_suite/`` with
``"skyward"`` added to that list, and writes a conftest there that opens a two-node
Local pool and makes it the target of ``"skyward"`` before the module is imported (so
``BACKENDS["skyward"]()`` finds it). Every test whose id names the backend then runs, as
``-k skyward`` selects them; ``-k loky`` selects loky's for the comparison (the same
copy, so the same set of tests). The copy is the installed joblib's: the numbers hold
for that version (``joblib.__version__`` is printed).

Not a test of this repository: the failures left are design choices, listed with the
reason for each on docs/integrations.md ("joblib's own test suite").
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import joblib

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / "bench" / ".work" / "joblib_suite"
PROCESS_BACKENDS = 'PROCESS_BACKENDS = ["multiprocessing", "loky"]'

CONFTEST = '''"""Written by bench/joblib_suite.py: a Local pool is the target of "skyward" for the run."""

import pytest

import skyward as sky
from skyward_sklearn.backend import active_pool, register

_pool = sky.ComputePool(nodes=2, display="quiet", timeout=3600)
_pool.open()
_active = active_pool(_pool)
_active.__enter__()
register()


def pytest_unconfigure(config: pytest.Config) -> None:
    _active.__exit__(None, None, None)
    _pool.close()
'''

PYTEST_INI = """[pytest]
markers =
    thread_unsafe: joblib's marker for tests that are not thread safe
    no_cover: joblib's marker for tests excluded from coverage
"""


def prepare() -> Path:
    """The patched copy of joblib's test_parallel.py, with its conftest; returns its path."""
    source = Path(joblib.__file__).parent / "test" / "test_parallel.py"
    text = source.read_text(encoding="utf-8")
    if PROCESS_BACKENDS not in text:
        raise SystemExit(f"{source} no longer says {PROCESS_BACKENDS!r}: update bench/joblib_suite.py")
    WORK.mkdir(parents=True, exist_ok=True)
    target = WORK / "test_parallel.py"
    target.write_text(text.replace(PROCESS_BACKENDS, PROCESS_BACKENDS[:-1] + ', "skyward"]'), encoding="utf-8")
    (WORK / "conftest.py").write_text(CONFTEST, encoding="utf-8")
    (WORK / "pytest.ini").write_text(PYTEST_INI, encoding="utf-8")
    return target


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-k", default="skyward", help="pytest's -k selection (default: skyward)")
    parser.add_argument("pytest_args", nargs="*", help="more arguments for pytest (after --)")
    args = parser.parse_args()
    target = prepare()
    print(f"joblib {joblib.__version__}: {target}", file=sys.stderr)
    command = [
        sys.executable, "-m", "pytest", "-c", str(WORK / "pytest.ini"), "--rootdir", str(WORK),
        "-p", "no:cacheprovider", "-p", "no:xdist", "-q", "-rfE", "--timeout", "120", "-k", args.k,
        str(target), *args.pytest_args,
    ]  # fmt: skip
    return subprocess.run(command, cwd=WORK, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
