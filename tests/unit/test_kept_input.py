"""Bad input to kept pools and ``sky.attach``: a clear error before anything is read,
made or provisioned."""

from __future__ import annotations

from pathlib import Path

import pytest

import skyward as sky
from skyward.api.kept.record import PoolStore
from skyward.errors import AttachError, ConfigurationError


@pytest.mark.parametrize(
    ("kwargs", "error", "says"),
    [
        ({"name": "Exp1"}, ConfigurationError, "lowercase letters"),
        ({"name": "a-"}, ConfigurationError, "ending with a letter or digit"),
        ({"name": 5}, ConfigurationError, "a pool name"),
        ({"keep_alive": 5}, ConfigurationError, "at least 10 seconds"),
        ({"keep_alive": 7200}, ConfigurationError, "outlasts timeout=3600"),
        ({"keep_alive": "1h"}, ConfigurationError, "positive number of seconds"),
        ({"keep_alive": True}, ConfigurationError, "positive number of seconds"),
        ({"keep_alive": float("nan")}, ConfigurationError, "positive number of seconds"),
    ],
)
def test_a_bad_name_or_keep_alive_is_refused_at_construction(
    kwargs: dict[str, object], error: type[Exception], says: str
) -> None:
    with pytest.raises(error, match=says):
        sky.ComputePool(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "error", "says"),
    [
        ({"name": "../pools"}, AttachError, "give the name of a kept pool"),
        ({"name": ""}, AttachError, "give the name of a kept pool"),
        ({"name": None}, AttachError, "give the name of a kept pool"),
        ({"name": "exp1", "display": "fancy"}, ConfigurationError, "unknown display mode"),
        ({"name": "exp1", "timeout": -1}, ConfigurationError, "positive number of seconds"),
        ({"name": "exp1", "on_event": 3}, ConfigurationError, "must be a callable"),
    ],
)
def test_bad_input_to_attach_is_refused_before_the_store_is_read(
    kwargs: dict[str, object], error: type[Exception], says: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SKYWARD_HOME", str(tmp_path))  # no pool at all: only the input can be wrong
    with pytest.raises(error, match=says):
        sky.attach(**kwargs)  # type: ignore[arg-type]


def test_a_name_never_reaches_outside_the_pool_store(tmp_path: Path) -> None:
    store = PoolStore(tmp_path)
    for name in ("../x", "a/b", ".", "/etc"):
        with pytest.raises(AttachError, match="is not a pool name"):
            store.path(name)
    assert store.path("exp1") == tmp_path / "pools" / "exp1"
