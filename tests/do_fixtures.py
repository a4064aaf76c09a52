"""The DigitalOcean fake as fixtures, for test folders outside tests/digitalocean that
need it (tests/cli, tests/coldstart): import them into the folder's conftest."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fakes.digitalocean import TOKEN, FakeDigitalOcean
from providers_support import quick_settings, serve


@pytest.fixture
def fake_do() -> Iterator[FakeDigitalOcean]:
    yield from serve(FakeDigitalOcean, "DigitalOcean")


@pytest.fixture
def do_config(fake_do: FakeDigitalOcean, monkeypatch: pytest.MonkeyPatch) -> object:
    from skyward_digitalocean import DigitalOcean

    monkeypatch.setenv("DIGITALOCEAN_TOKEN", TOKEN)
    return DigitalOcean(region="tor1", api_url=fake_do.url, **quick_settings(fake_do))
