"""How a running worker takes the pool's env, which arrives after it started."""

from __future__ import annotations

import os

from skyward.agent.worker import apply_env


def test_pythonpath_entries_go_where_the_interpreter_would_have_put_them() -> None:
    environ: dict[str, str] = {}
    path = ["", "/usr/lib/python3.11", "/site-packages"]
    apply_env({"PYTHONPATH": os.pathsep.join(["/a", "/b", "/site-packages"]), "X": "1"}, environ, path)
    assert path == ["", "/a", "/b", "/usr/lib/python3.11", "/site-packages"]  # an entry already there stays put
    assert environ == {"PYTHONPATH": os.pathsep.join(["/a", "/b", "/site-packages"]), "X": "1"}


def test_an_env_without_pythonpath_leaves_the_import_path_alone() -> None:
    path = ["", "/lib"]
    apply_env({"HF_TOKEN": "t"}, {}, path)
    assert path == ["", "/lib"]
