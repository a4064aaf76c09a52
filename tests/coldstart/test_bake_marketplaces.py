"""Image(bake=True) on the container marketplaces (VastAI, RunPod): their APIs rent a
container from a docker image and save nothing from a running one, so there is nothing
to bake into. The pool says so in a Notice, installs as usual, and makes nothing that
bills (docs/coldstart.md)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from bake_support import fresh_image, start_pool
from fakes.runpod import API_KEY as RUNPOD_KEY
from fakes.runpod import FakeRunPod
from fakes.vastai import API_KEY as VAST_KEY
from fakes.vastai import FakeVastAI
from providers_support import emulate, quick_settings, serve

from skyward.events import Notice

pytestmark = pytest.mark.cloud


@pytest.fixture(params=["vastai", "runpod"])
def marketplace(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> Iterator[Any]:
    """A started fake marketplace with emulated containers, and a provider config for it."""
    if request.param == "vastai":
        from skyward_vastai import VastAI

        monkeypatch.setenv("VAST_API_KEY", VAST_KEY)
        monkeypatch.setenv("HOME", str(tmp_path))  # no key file of the user's is read
        for vast in serve(FakeVastAI, "VastAI"):
            for _ in emulate(vast, vast.shut_down):
                yield request.param, vast, VastAI(api_url=f"{vast.url}/api/v0", **quick_settings(vast))
    else:
        from skyward_runpod import RunPod

        monkeypatch.setenv("RUNPOD_API_KEY", RUNPOD_KEY)
        for runpod in serve(FakeRunPod, "RunPod"):
            for _ in emulate(runpod, runpod.shut_down):
                yield request.param, runpod, RunPod(api_url=f"{runpod.url}/graphql", **quick_settings(runpod))


def test_a_marketplace_pool_asked_to_bake_says_it_cannot_and_installs_as_usual(marketplace: Any) -> None:
    name, fake, config = marketplace
    events, _, steps = start_pool(config, fresh_image())
    notices = [e.message for e in events if isinstance(e, Notice)]
    assert f"Image(bake=True): the {name} provider does not bake images" in notices
    assert "baked" not in steps and "deps" in steps
    assert fake.violations == []
