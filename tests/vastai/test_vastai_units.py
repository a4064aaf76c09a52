"""The pure parts of skyward-vastai and the marketplace helpers in core: credentials,
config checks, offers and the catalog names, the start command, labels, states."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakes.vastai import OFFERS
from hypothesis import given
from hypothesis import strategies as st

from skyward.errors import ConfigurationError
from skyward.instances import InstanceType
from skyward.providers.cloud.http import APIError
from skyward.providers.cloud.marketplace import (
    catalog_gpu,
    parse_pool_label,
    pool_label,
    reap_reason,
)
from skyward.providers.cloud.sizing import NodeSize
from skyward.providers.cloud.template import InstanceState
from skyward_vastai import VastAI
from skyward_vastai.api import OfferTaken, rent_refusal
from skyward_vastai.config import api_key
from skyward_vastai.driver import ports_of
from skyward_vastai.offers import fitting, parse_offers
from skyward_vastai.status import state_of


def test_the_key_comes_from_the_environment_first(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("VAST_API_KEY", " from-env ")
    (tmp_path / ".vast_api_key").write_text("from-file")
    assert api_key(tmp_path) == "from-env"


@pytest.mark.parametrize("where", [".config/vastai/vast_api_key", ".vast_api_key"])
def test_the_key_file_the_vastai_cli_writes_is_read(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, where: str
) -> None:
    monkeypatch.delenv("VAST_API_KEY", raising=False)
    (tmp_path / where).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / where).write_text("from-file\n")
    assert api_key(tmp_path) == "from-file"


def test_a_missing_key_names_both_ways_to_give_one(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("VAST_API_KEY", raising=False)
    with pytest.raises(ConfigurationError, match=r"VAST_API_KEY.*vastai set api-key"):
        api_key(tmp_path)


@pytest.mark.parametrize(
    ("field", "value"),
    [("disk_gb", 2), ("min_reliability", 1.5), ("bid_margin", -0.1), ("image", " "), ("api_url", "ftp://x")],
)
def test_bad_settings_are_refused_naming_the_field(field: str, value: object) -> None:
    with pytest.raises(ConfigurationError, match=rf"VastAI\({field}="):
        VastAI(**{field: value})  # type: ignore[arg-type]


def test_plain_http_to_a_remote_api_is_refused_before_a_key_is_sent() -> None:
    from skyward.providers.cloud.http import check_api_url

    with pytest.raises(ConfigurationError, match="https"):
        check_api_url("VastAI", "http://console.vast.ai/api/v0")
    assert check_api_url("VastAI", "http://127.0.0.1:9/api/v0/") == "http://127.0.0.1:9/api/v0"


@pytest.mark.parametrize(
    ("name", "memory", "catalog"),
    [
        ("A100 SXM4", 80, "A100-80GB"),
        ("A100 PCIE", 40, "A100-40GB"),
        ("H100 SXM", 80, "H100-SXM"),
        ("NVIDIA H100 80GB HBM3", 80, "H100-SXM"),
        ("H100 PCIe", 80, "H100-PCIe"),
        ("RTX A6000", 48, "A6000"),
        ("RTX 6000Ada", 48, "RTX6000-Ada"),
        ("NVIDIA L40S", 48, "L40S"),
        ("Tesla V100", 32, "V100-32GB"),
        ("RTX 4090", 24, "RTX4090"),
        ("GTX 1660 S", 6, None),  # not in the catalog: reachable with machine="1x GTX 1660 S"
    ],
)
def test_marketplace_gpu_names_map_onto_the_catalog(name: str, memory: int, catalog: str | None) -> None:
    assert catalog_gpu(name, memory) == catalog


def test_every_catalog_name_it_gives_parses_as_an_accelerator() -> None:
    from skyward.accelerators.parse import parse_accelerator

    for name in ("A100 SXM4", "H100 SXM", "H100 NVL", "H200", "L4", "A40", "RTX 4000Ada", "Tesla T4", "B200"):
        mapped = catalog_gpu(name, 80)
        assert mapped is not None and parse_accelerator(mapped).name in mapped


def test_the_cheapest_fitting_offer_with_the_fewest_gpus_comes_first() -> None:
    offers = parse_offers(OFFERS, bid_margin=0.2)
    ids = [o.id for o in fitting(offers, NodeSize(accelerator=None, cpu=None), False)]
    assert ids[:3] == [401, 402, 101]  # quality filters are the search's (server side); here only fit and price
    a100 = [o.id for o in fitting(offers, NodeSize(accelerator="A100-80GB", cpu=None),
                                  False)]  # fmt: skip
    assert a100 == [201, 202]
    h100x8 = [o.id for o in fitting(offers, NodeSize(accelerator="H100:8", cpu=None),
                                    False)]  # fmt: skip
    assert h100x8 == [303]
    big = fitting(offers, NodeSize(accelerator="H100", cpu=64), False)
    assert [o.id for o in big] == [303]


def test_a_spot_price_is_the_minimum_bid_plus_the_margin_and_never_above_on_demand() -> None:
    (offer,) = parse_offers([{**OFFERS[0], "min_bid": 0.1}], bid_margin=0.2)
    assert offer.instance.spot_price == pytest.approx(0.12)
    (dear,) = parse_offers([{**OFFERS[0], "min_bid": 0.34}], bid_margin=0.2)
    assert dear.instance.spot_price == pytest.approx(0.35)
    (none,) = parse_offers([{**OFFERS[0], "min_bid": None}], bid_margin=0.2)
    assert none.instance.spot_price is None and isinstance(none.instance, InstanceType)


def test_an_api_url_without_api_v0_is_refused_naming_it() -> None:
    with pytest.raises(ConfigurationError, match=r"VastAI\(api_url=.*must end in /api/v0"):
        VastAI(api_url="https://console.vast.ai/api/v1")
    assert VastAI(api_url="http://127.0.0.1:9/api/v0/").api_url.endswith("/api/v0/")


def test_an_image_name_past_vastais_limit_is_refused_before_any_call() -> None:
    with pytest.raises(ConfigurationError, match=r"VastAI\(image=.*1024"):
        VastAI(image="registry.example/" + "x" * 1100)


def _refused(status: int, code: str, message: str) -> Exception:
    return rent_refusal(101, APIError("VastAI", "rent offer 101", status, message, code))


def test_a_taken_offer_is_told_from_an_invalid_request() -> None:
    # VastAI's documented 404: "error": "invalid_args" with a no_such_ask message
    taken = _refused(404, "invalid_args", "error 404/3603: no_such_ask Instance type by id 101 is not available.")
    assert isinstance(taken, OfferTaken)
    assert isinstance(_refused(410, "no_such_ask", "error 410/3907: no_such_ask ..."), OfferTaken)
    invalid = _refused(400, "invalid_args", "error 400: Invalid args: args + args_str + onstart is 9000 characters")
    assert isinstance(invalid, ConfigurationError) and not isinstance(invalid, OfferTaken)
    assert "invalid_args" in str(invalid) and "9000 characters" in str(invalid)
    other = _refused(400, "", "insufficient credit")
    assert type(other) is APIError and "insufficient credit" in str(other)


@given(st.from_regex(r"[a-z0-9][a-z0-9-]{0,40}", fullmatch=True), st.integers(10**9, 10**10), st.integers(0, 999))
def test_a_label_gives_back_its_pool_and_expiry(pool: str, expires: int, node: int) -> None:
    mark = parse_pool_label(pool_label(pool, expires, node))
    assert mark is not None and (mark.pool_id, mark.expires) == (pool, expires)


def test_only_stopped_or_expired_containers_of_other_pools_are_reaped() -> None:
    mine, other = parse_pool_label("skyward-mine-2000000000-0"), parse_pool_label("skyward-old-1000000000-1")
    assert reap_reason(mine, True, 3e9, "mine") is None
    assert reap_reason(None, True, 3e9, "mine") is None
    assert reap_reason(other, False, 999_999_999, "mine") is None
    assert "expired" in (reap_reason(other, False, 1_000_000_001, "mine") or "")
    assert "stopped" in (reap_reason(other, True, 0, "mine") or "")


def test_states_and_port_maps_are_read_from_an_instance() -> None:
    raw = {"actual_status": "running", "ports": {"16789/tcp": [{"HostIp": "0.0.0.0", "HostPort": "40001"}],
                                                 "53/udp": [{"HostPort": "5"}]}}  # fmt: skip
    assert ports_of(raw) == {16789: 40001}
    assert state_of(raw, True) is InstanceState.RUNNING
    assert state_of(raw, False) is InstanceState.PENDING  # running, but its port not mapped yet
    assert state_of({"actual_status": "loading"}, False) is InstanceState.PENDING
    assert state_of({"actual_status": "exited", "intended_status": "stopped"}, True) is InstanceState.STOPPED
    assert state_of({"actual_status": "running", "intended_status": "stopped"}, True) is InstanceState.STOPPED
