"""Which top-level names an installed distribution provides (a module that is not is the
user's own code, pickled by value): the one-name reading agrees with the library's."""

from __future__ import annotations

import inspect
import pathlib
from importlib import metadata

from hypothesis import example, given
from hypothesis import strategies as st

from skyward.transport import serialize


def _library_rule(name: str) -> str:
    parts = pathlib.PurePosixPath(name).parts
    return parts[0] if len(parts) > 1 else (inspect.getmodulename(name) or name)


@example(["a", "."])  # the library drops a trailing "." part: "a/." names no file in a
@example(["a", "", "b"])
@given(st.lists(st.sampled_from(["a", "pkg", ".", "..", "", "m.py", "x.so", "__init__.py", "b.c"]), max_size=5))
def test_a_record_path_s_top_level_name_follows_the_library_s_rule(parts: list[str]) -> None:
    for name in ("/".join(parts), "/" + "/".join(parts), "/".join(parts) + "/"):
        if name:
            assert serialize._top_level_name(name) == _library_rule(name)


def test_every_installed_top_level_name_and_no_other_is_provided_by_a_distribution() -> None:
    installed = set(metadata.packages_distributions())
    assert len(installed) > 20  # the check below proves something only on a real environment
    for name in sorted(installed):
        assert serialize.provided_by_a_distribution(name), name
    for name in ("bench", "tests", "no_such_package_anywhere", "skyward"):  # skyward: editable here
        assert serialize.provided_by_a_distribution(name) == (name in installed), name
