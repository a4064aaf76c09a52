"""A plugin's bootstrap step runs on every node and shows as BootstrapProgress; a step whose
name could not travel as one word is refused when the pool is made."""

from __future__ import annotations

import shlex
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

import skyward as sky
from skyward import events as ev
from skyward.errors import ConfigurationError
from skyward.image import Image
from skyward.plugins.contributions import BootstrapStep
from skyward.plugins.hookspecs import hookimpl
from skyward.plugins.registry import registry


class _Steps:
    def __init__(self, name: str, script: str) -> None:
        self.name, self.script = name, script

    @hookimpl
    def skyward_bootstrap_steps(self, image: Image) -> Sequence[BootstrapStep]:
        return [BootstrapStep(self.name, self.script)]


@pytest.fixture
def plugin_step() -> Iterator[_Steps]:
    plugin = _Steps("unset", "true")
    registry.register(plugin)
    yield plugin
    registry.unregister(plugin)


@sky.compute
def read(path: str) -> str:
    return Path(path).read_text()


def test_a_plugin_step_runs_on_every_node_and_is_reported(plugin_step: _Steps, tmp_path: Path) -> None:
    plugin_step.name = "warm-cache"
    plugin_step.script = f"echo ran >> {shlex.quote(str(tmp_path / 'ran'))}"
    seen: list[object] = []
    with sky.ComputePool(nodes=2, display="quiet", on_event=seen.append) as pool:
        assert read(str(tmp_path / "ran")) >> pool == "ran\nran\n"
    steps = [e for e in seen if isinstance(e, ev.BootstrapProgress) and e.step == "warm-cache"]
    assert sorted(e.instance_id for e in steps) == sorted({e.instance_id for e in steps}) and len(steps) == 2


@pytest.mark.parametrize("name", ["two words", 'say "hi"', "$(reboot)", "", "-x", "n" * 41])
def test_a_step_name_that_is_not_one_word_is_refused_before_anything_starts(plugin_step: _Steps, name: str) -> None:
    plugin_step.name = name
    seen: list[object] = []
    with pytest.raises(ConfigurationError, match="a step's name is one word"):
        sky.ComputePool(nodes=1, display="quiet", on_event=seen.append)
    assert seen == []
