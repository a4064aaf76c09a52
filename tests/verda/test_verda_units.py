"""Pure parts of the Verda provider: config, instance types, markets, names."""

from __future__ import annotations

import pickle
from typing import Any

import pytest
from fakes.verda import IMAGES, INSTANCE_TYPES
from hypothesis import given
from hypothesis import strategies as st

import skyward as sky
from skyward.errors import ConfigurationError, ProvisioningError
from skyward.spot import Market, plan_markets
from skyward_verda import Verda
from skyward_verda.api import check_api_url
from skyward_verda.driver import is_capacity_refusal, pick_image, with_host_firewall
from skyward_verda.markets import markets_needed
from skyward_verda.naming import (
    InstanceView,
    description,
    expired_names,
    instances_to_reap,
    parse_description,
    parse_resource_name,
    resource_name,
)
from skyward_verda.offers import (
    Markets,
    accelerator_of,
    choose_location,
    offered,
    parse_availability,
    parse_instance_types,
    where_available,
)

pool_ids = st.from_regex(r"sky-[0-9a-f]{8}", fullmatch=True)
epochs = st.integers(min_value=10**9, max_value=10**10)


def test_public_name_resolves_through_the_plugin() -> None:
    assert sky.Verda is Verda
    assert Verda().region is None and Verda(region="FIN-01").region == "FIN-01"


@pytest.mark.parametrize(
    "kwargs",
    [
        {"region": ""},
        {"client_address": "0.0.0.0"},
        {"ssh_key_ids": "one-key"},
        {"ssh_key_ids": [""]},
        {"agent_port": 70000},
        {"api_retries": 0},
        {"api_url": "ftp://x"},
    ],
)
def test_bad_settings_are_refused_early(kwargs: dict[str, object]) -> None:
    with pytest.raises(ConfigurationError):
        Verda(**kwargs)  # type: ignore[arg-type]


def test_plain_http_only_on_loopback() -> None:
    with pytest.raises(ConfigurationError, match="unencrypted"):
        check_api_url("http://api.verda.com/v1")
    assert check_api_url("http://127.0.0.1:8080/v1/") == "http://127.0.0.1:8080/v1"


def test_missing_credentials_name_both_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VERDA_CLIENT_ID", raising=False)
    monkeypatch.delenv("VERDA_CLIENT_SECRET", raising=False)
    with pytest.raises(ConfigurationError, match="VERDA_CLIENT_ID and VERDA_CLIENT_SECRET"):
        sky.ComputePool(provider=Verda(), display="quiet")
    monkeypatch.setenv("VERDA_CLIENT_ID", "x")
    with pytest.raises(ConfigurationError, match="VERDA_CLIENT_SECRET"):
        sky.ComputePool(provider=Verda(), display="quiet")


def test_secrets_are_not_in_the_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VERDA_CLIENT_SECRET", "very-secret-value")
    config = Verda()
    assert "very-secret-value" not in repr(config) and b"very-secret-value" not in pickle.dumps(config)


def test_every_spot_strategy_is_accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VERDA_CLIENT_ID", "x")
    monkeypatch.setenv("VERDA_CLIENT_SECRET", "y")
    expected = {
        "always": sky.Spot.Always(),
        "if-available": sky.Spot.IfAvailable(),
        "never": sky.Spot.Never,
        0.5: sky.Spot.Percent(0.5),
        None: None,
    }
    for spot, strategy in expected.items():
        pool = sky.ComputePool(provider=Verda(), spot=spot, display="quiet")
        assert pool.spec.spot == strategy  # the pool keeps the strategy asked for
        markets = [plan.market for plan in plan_markets(pool.spec.spot, 2)]
        assert (
            markets
            == {
                "always": [Market.SPOT] * 2,
                "if-available": [Market.SPOT] * 2,
                "never": [Market.ON_DEMAND] * 2,
                0.5: [Market.ON_DEMAND, Market.SPOT],
                None: [Market.ON_DEMAND] * 2,
            }[spot]
        )


# -- instance types ------------------------------------------------------------------------


def test_instance_types_become_offers() -> None:
    types = {t.name: t.instance for t in parse_instance_types(INSTANCE_TYPES)}
    h100 = types["1H100.80S.30V"]
    assert (h100.accelerator, h100.accelerator_count, h100.vcpus) == ("H100-80GB-SXM", 1, 30)
    assert (h100.on_demand_price, h100.spot_price, h100.memory) == (2.19, 0.75, 120 * 2**30)
    assert types["8H100.80S.176V"].accelerator_count == 8
    assert types["1V100.6V"].accelerator == "V100-16GB"
    assert types["1A6000.10V"].accelerator == "A6000-48GB"
    assert types["1A100.22V"].accelerator == "A100-80GB"
    assert types["CPU.4V.16G"].accelerator is None and types["CPU.4V.16G"].spot_price == 0.014


@pytest.mark.parametrize(
    ("name", "gpu", "expected"),
    [
        ("1RTX6000ADA.10V", "1x RTX 6000 Ada 48GB", "RTX6000-Ada-48GB"),
        ("1H200.141S.44V", "1x H200 SXM5 141GB", "H200-141GB"),
        ("1A100.40S.22V", "1x A100 SXM4 40GB", "A100-40GB"),
        ("odd-name", "1x L40S 48GB", "L40S-48GB"),
        ("1B999.10V", "1x B999 10GB", "B999"),  # unknown to the catalog: kept as Verda spells it
    ],
)
def test_accelerator_spellings(name: str, gpu: str, expected: str) -> None:
    assert accelerator_of(name, gpu) == expected


def test_unusable_entries_are_skipped() -> None:
    assert parse_instance_types([{"instance_type": "X"}, {"price_per_hour": "1"}, {}]) == []


def test_smallest_offer_that_fits() -> None:
    instances = [t.instance for t in parse_instance_types(INSTANCE_TYPES)]
    assert sky.select_instance(instances, accelerator="H100").name == "1H100.80S.30V"
    assert sky.select_instance(instances, accelerator="H100:8").name == "8H100.80S.176V"
    assert sky.select_instance(instances).name == "CPU.4V.16G"
    assert sky.select_instance(instances, cpu=6).name == "CPU.8V.32G"


# -- availability and markets ----------------------------------------------------------------

OD = parse_availability(
    [
        {"location_code": "FIN-01", "availabilities": ["CPU.4V.16G"]},
        {"location_code": "FIN-02", "availabilities": ["CPU.4V.16G", "1H100.80S.30V"]},
    ]
)
SPOT = parse_availability([{"location_code": "FIN-03", "availabilities": ["1H100.80S.30V"]}])
LOCS = ["FIN-01", "FIN-02", "FIN-03", "ICE-01"]


def test_locations_are_found_by_market() -> None:
    never = markets_needed(plan_markets(None, 2))
    always = markets_needed(plan_markets(sky.Spot.Always(), 2))
    maybe = markets_needed(plan_markets(sky.Spot.IfAvailable(), 2))
    assert choose_location("1H100.80S.30V", LOCS, never, OD, SPOT) == "FIN-02"
    assert choose_location("1H100.80S.30V", LOCS, always, OD, SPOT) == "FIN-03"
    assert choose_location("1H100.80S.30V", LOCS, maybe, OD, SPOT) == "FIN-03"  # spot preferred
    assert choose_location("1H100.80S.30V", ["FIN-01"], never, OD, SPOT) is None
    assert choose_location("CPU.4V.16G", LOCS, maybe, OD, SPOT) == "FIN-01"  # on-demand will do
    mixed = markets_needed(plan_markets(sky.Spot.Percent(0.5), 2))
    assert choose_location("1H100.80S.30V", LOCS, mixed, OD, SPOT) is None  # needs both in one place
    assert where_available("1H100.80S.30V", OD, SPOT) == "on-demand in FIN-02; spot in FIN-03"
    assert where_available("8H100.80S.176V", OD, SPOT) == "nowhere right now"


def test_offered_marks_only_deployable_types_available() -> None:
    types = parse_instance_types(INSTANCE_TYPES)
    offers = {i.name: i.available for i in offered(types, ["FIN-01"], Markets(False, True), OD, SPOT)}
    assert offers["CPU.4V.16G"] and not offers["1H100.80S.30V"]


@given(st.integers(min_value=1, max_value=40), st.floats(min_value=0.01, max_value=1.0))
def test_percent_puts_spot_nodes_last(nodes: int, fraction: float) -> None:
    plans = plan_markets(sky.Spot.Percent(fraction), nodes)
    markets = [p.market for p in plans]
    spot = markets.count(Market.SPOT)
    assert spot >= 1 and spot >= fraction * nodes - 1e-9
    assert markets == [Market.ON_DEMAND] * (nodes - spot) + [Market.SPOT] * spot


def test_plans_per_strategy() -> None:
    assert {p.market for p in plan_markets(None, 3)} == {Market.ON_DEMAND}
    always = plan_markets(sky.Spot.Always(retries=3, interval=0.5), 2)
    assert all(p.market is Market.SPOT and p.retries == 3 and p.interval == 0.5 and not p.fallback for p in always)
    assert all(p.fallback for p in plan_markets(sky.Spot.IfAvailable(), 2))


# -- names, reaping, scripts ---------------------------------------------------------------------


@given(pool_ids, epochs, st.one_of(st.none(), st.integers(min_value=0, max_value=99)))
def test_names_round_trip(pool_id: str, expires: int, node: int | None) -> None:
    mark = parse_description(description(pool_id, expires))
    assert mark is not None and (mark.pool_id, mark.expires) == (pool_id, expires)
    mark = parse_resource_name(resource_name(pool_id, expires, node))
    assert mark is not None and (mark.pool_id, mark.expires) == (pool_id, expires)


def test_reaping_takes_dead_or_expired_skyward_instances_only() -> None:
    now = 2 * 10**9
    views = [
        InstanceView("1", "a", "offline", description("sky-00000001", now + 100), "v1"),
        InstanceView("2", "b", "running", description("sky-00000002", now - 1), "v2"),
        InstanceView("3", "c", "running", description("sky-00000003", now + 100), "v3"),
        InstanceView("4", "d", "offline", "my own box", "v4"),
        InstanceView("5", "e", "offline", description("sky-00000005", now - 1), "v5"),
    ]
    assert [d.instance.id for d in instances_to_reap(views, now, own_pool="sky-00000005")] == ["1", "2"]
    names = [resource_name("sky-00000002", now - 1, 0), resource_name("sky-00000003", now - 1), "mine"]
    assert expired_names(names, now, live_pools={"sky-00000003"}) == [names[0]]


def test_host_firewall_goes_first_and_admits_the_client_only() -> None:
    script = with_host_firewall("#!/usr/bin/env bash\nset -euo pipefail\necho hi\n", (16789, 16791), "203.0.113.7/32")
    lines = script.splitlines()
    assert lines[0] == "#!/usr/bin/env bash" and lines[-2:] == ["set -euo pipefail", "echo hi"]
    assert "iptables -I INPUT -p tcp --dport 16789:16791 ! -s 203.0.113.7/32 -j DROP" in script
    with pytest.raises(ProvisioningError):
        with_host_firewall("echo no shebang", (1, 2), "1.2.3.4/32")


def test_default_image_and_capacity_refusals() -> None:
    from skyward_verda.api import VerdaAPIError

    assert pick_image(IMAGES, "1H100.80S.30V") == "ubuntu-24.04-cuda-12.8-open-docker"
    assert pick_image([{"image_type": "custom"}], "CPU.4V.16G") == "custom"
    with pytest.raises(ProvisioningError):
        pick_image([], "CPU.4V.16G")
    refusal = VerdaAPIError("deploy", 503, "service_unavailable", "Not enough resources to deploy ...")
    assert is_capacity_refusal(refusal)
    assert not is_capacity_refusal(VerdaAPIError("deploy", 400, "invalid_request", "bad hostname"))


# -- teardown: partial answers, retries, discontinued spot volumes ------------------------


class ScriptedVerda:
    """Answers ``delete_instances`` from a script of per-call refusals (instance id ->
    error), recording each call; ``delete_volumes`` records the volumes."""

    def __init__(self, refusals: list[dict[str, str]]) -> None:
        self.refusals = refusals
        self.calls: list[tuple[list[str], list[str]]] = []
        self.volumes: list[str] = []

    def delete_instances(self, ids: list[str], volumes: list[str]) -> list[Any]:
        from skyward_verda.api import ActionResult

        self.calls.append((list(ids), list(volumes)))
        refused = self.refusals.pop(0) if self.refusals else {}
        return [ActionResult(i, i not in refused, refused.get(i, ""), 409 if i in refused else None) for i in ids]

    def delete_volumes(self, ids: list[str]) -> None:
        self.volumes += ids


def test_teardown_asks_again_for_what_a_partial_answer_refused_and_reports_what_stays() -> None:
    from skyward_verda.teardown import Doomed, delete_instances

    doomed = [Doomed("a", "running", "va"), Doomed("b", "offline", "vb"), Doomed("c", "discontinued", "vc")]
    doomed.append(Doomed("d", "deleting", "vd"))  # a delete already accepted: not asked again
    api, slept = ScriptedVerda([{"b": "busy"}, {"b": "busy"}, {"b": "locked"}]), []
    left = delete_instances(api, doomed, attempts=3, sleep=slept.append, backoff=0.5)  # type: ignore[arg-type]
    assert api.calls == [(["a", "b"], ["va", "vb"]), (["b"], ["vb"]), (["b"], ["vb"])]
    assert slept == [0.5, 1.0] and left == ["instance b: locked (HTTP 409)"]
    assert api.volumes == ["vc"]  # the discontinued spot instance's kept disk
    api = ScriptedVerda([{"a": "busy"}])
    assert delete_instances(api, doomed[:1], attempts=3, sleep=lambda _s: None) == []  # type: ignore[arg-type]
    assert len(api.calls) == 2


@given(st.lists(st.sampled_from(["success", "error", "weird"]), min_size=1, max_size=6))
def test_an_action_answer_fails_exactly_the_instances_it_says_failed(statuses: list[str]) -> None:
    from skyward_verda.api import action_results

    ids = [f"i{n}" for n in range(len(statuses))]
    body = [{"instanceId": i, "status": s, "action": "delete"} for i, s in zip(ids, statuses, strict=True)]
    results = action_results(ids, 207 if "success" in statuses else 202, body)
    assert [r.ok for r in results] == [s == "success" for s in statuses]
