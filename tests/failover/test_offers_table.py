"""``sky.offers``: one table across providers, sorted by the whole pool's price, the same
rows ``skyward offers`` prints (the tools are injected: no network)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest

import skyward as sky
from skyward.errors import ConfigurationError
from skyward.providers import CredentialCheck, Offer, OfferQuery, ProviderTools, Removal, Resource


@dataclass
class Session:
    """A provider session as the plugins' tools open it: check, list offers."""

    name: str
    rows: list[Offer]
    valid: bool = True
    fails: bool = False
    asked: list[OfferQuery] = field(default_factory=list)
    config: object | None = None

    @property
    def provider(self) -> str:
        return self.name

    @property
    def region(self) -> str:
        return "r"

    def check(self) -> CredentialCheck:
        return CredentialCheck(self.name, True, self.valid, "ok" if self.valid else "token refused", "set a token")

    def resources(self) -> list[Resource]:
        return []

    def delete(self, resources: Sequence[Resource]) -> list[Removal]:
        return []

    def offers(self, query: OfferQuery) -> list[Offer]:
        self.asked.append(query)
        if self.fails:
            raise RuntimeError("API down")
        return [o for o in self.rows if not query.spot or o.spot_hourly is not None]


def offer(provider: str, instance: str, on_demand: float | None, spot: float | None = None) -> Offer:
    return Offer(provider, "r", instance, "H100", 1, 8, 64.0, on_demand, spot)


def tools_for(*sessions: Session) -> list[ProviderTools]:
    def opener(session: Session) -> ProviderTools:
        def open_(config: object | None) -> Session:
            session.config = config
            return session

        return ProviderTools(name=session.name, distribution="x", open=open_)

    return [opener(s) for s in sessions]


def test_the_table_merges_every_provider_cheapest_pool_first() -> None:
    a = Session("a", [offer("a", "a-big", 9.0, 3.0), offer("a", "a-small", 2.0)])
    b = Session("b", [offer("b", "b-one", 4.0, 1.0), offer("b", "b-unpriced", None)])
    table = sky.offers("H100", nodes=3, tools=tools_for(a, b))
    assert [o.instance for o in table] == ["a-small", "b-one", "a-big", "b-unpriced"]
    assert [o.pool_hourly(False, 3) for o in table] == [6.0, 12.0, 27.0, None]
    assert a.asked == [OfferQuery(accelerator="H100", count=1, nodes=3, spot=False)]
    assert table.skipped == ()


def test_on_spot_only_machines_sold_on_spot_priced_on_spot() -> None:
    a = Session("a", [offer("a", "a-big", 9.0, 3.0), offer("a", "a-small", 2.0)])
    b = Session("b", [offer("b", "b-one", 4.0, 1.0)])
    table = sky.offers("H100", nodes=2, spot=True, tools=tools_for(a, b))
    assert [(o.instance, o.pool_hourly(True, 2)) for o in table] == [("b-one", 2.0), ("a-big", 6.0)]


def test_a_provider_that_cannot_answer_is_skipped_with_why_and_the_rest_still_listed() -> None:
    refused = Session("refused", [offer("refused", "x", 1.0)], valid=False)
    down = Session("down", [offer("down", "y", 1.0)], fails=True)
    fine = Session("fine", [offer("fine", "z", 5.0)])
    table = sky.offers("H100", tools=tools_for(refused, down, fine))
    assert [o.instance for o in table] == ["z"]
    assert dict(table.skipped) == {
        "refused": "credentials not accepted: token refused",
        "down": "could not list offers: API down",
    }
    assert refused.asked == []  # a refused credential is never asked for offers


def test_providers_narrows_by_name_and_a_configuration_is_opened_as_given() -> None:
    a = Session("a", [offer("a", "a1", 1.0)])
    b = Session("b", [offer("b", "b1", 1.0)])
    assert [o.provider for o in sky.offers("H100", providers=["b"], tools=tools_for(a, b))] == ["b"]
    assert b.config is None  # by name: the provider's defaults and the environment
    with pytest.raises(ConfigurationError, match=r"no offers for 'c'; providers with offers: a, b"):
        sky.offers("H100", providers=["c"], tools=tools_for(a, b))
    with pytest.raises(ConfigurationError, match="no offers for Local"):
        sky.offers("H100", providers=[sky.Local()], tools=tools_for(a, b))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"nodes": 0}, r"nodes=0"),
        ({"spot": "yes"}, r"spot='yes'"),
        ({"providers": "aws"}, r"providers='aws'\): give a list"),
    ],
)
def test_bad_input_is_refused_before_any_provider_is_asked(kwargs: dict[str, object], message: str) -> None:
    a = Session("a", [offer("a", "a1", 1.0)])
    with pytest.raises(ConfigurationError, match=message):
        sky.offers("H100", tools=tools_for(a), **kwargs)  # type: ignore[arg-type]
    assert a.asked == []


def test_the_printed_table_shows_the_pool_price() -> None:
    table = sky.offers("H100", nodes=2, tools=tools_for(Session("a", [offer("a", "a1", 1.25)])))
    assert "2.500" in str(table) and "1x H100" in str(table)
