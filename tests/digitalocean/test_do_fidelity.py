"""The fake DigitalOcean API refuses what DigitalOcean documents as invalid, answers in the
documented shapes, and the provider's requests pass the same rules.

Each rule is cited where the fake enforces it (tests/fakes/digitalocean.py); the schemas
are DigitalOcean's own OpenAPI specification (tests/fakes/specs/digitalocean). A test here
sends the request a real API would refuse, straight over HTTP, and checks that the fake
refuses it the documented way and records the violation.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import requests
from fakes.digitalocean import SIZES, TOKEN, FakeDigitalOcean
from fakes.do_spec import commit, problems

from skyward.errors import ConfigurationError
from skyward.providers.cloud.retry import Backoff
from skyward_digitalocean import DigitalOcean
from skyward_digitalocean.api import DigitalOceanAPI, DigitalOceanAPIError, make_client
from skyward_digitalocean.driver import DigitalOceanDriver

pytestmark = pytest.mark.cloud

HEADERS = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
FIREWALL = {
    "name": "skyward-sky-1-1900000000",
    "inbound_rules": [{"protocol": "tcp", "ports": "16789", "sources": {"addresses": ["203.0.113.7/32"]}}],
    "outbound_rules": [{"protocol": "tcp", "ports": "0", "destinations": {"addresses": ["0.0.0.0/0"]}}],
}


@pytest.fixture
def api(fake_do: FakeDigitalOcean, do_token: str) -> Iterator[DigitalOceanAPI]:
    config = DigitalOcean(region="tor1", api_url=fake_do.url)
    yield DigitalOceanAPI(make_client(config, do_token), Backoff(attempts=2, base=0.01), sleep=lambda _s: None)


def send(fake: FakeDigitalOcean, method: str, path: str, body: Any = None, **params: str) -> requests.Response:
    return requests.request(method, f"{fake.url}{path}", json=body, params=params, headers=HEADERS, timeout=5)


def refused(fake: FakeDigitalOcean, response: requests.Response, status: int, words: str) -> None:
    """Refused with ``status`` in DO's plain error shape, and recorded as a violation."""
    assert response.status_code == status, response.text
    assert problems("error", response.json()) == []
    assert any(words in v for v in fake.violations), fake.violations
    fake.violations.clear()


# -- firewalls ---------------------------------------------------------------------------


def test_an_icmp_rule_without_ports_is_refused_as_the_spec_requires(fake_do: FakeDigitalOcean) -> None:
    fake_do.tags.add("pool")
    body = {**FIREWALL, "inbound_rules": [{"protocol": "icmp", "sources": {"tags": ["pool"]}}]}
    refused(fake_do, send(fake_do, "POST", "/v2/firewalls", body), 422, "'ports' is a required property")
    with_ports = {**FIREWALL, "inbound_rules": [{"protocol": "icmp", "ports": "0", "sources": {"tags": ["pool"]}}]}
    created = send(fake_do, "POST", "/v2/firewalls", with_ports)
    assert created.status_code == 202 and problems("firewall_create_response", created.json()) == []


@pytest.mark.parametrize(
    ("rule", "why"),
    [
        ({"protocol": "sctp", "ports": "1", "sources": {"addresses": ["203.0.113.7"]}}, "is not one of"),
        ({"protocol": "tcp", "ports": 22, "sources": {"addresses": ["203.0.113.7"]}}, "is not of type 'string'"),
        ({"protocol": "tcp", "ports": "22"}, "'sources' is a required property"),
        ({"protocol": "tcp", "ports": "1-2-3", "sources": {"addresses": ["203.0.113.7"]}}, "ports"),
    ],
)
def test_firewall_rules_outside_the_spec_are_refused(fake_do: FakeDigitalOcean, rule: Any, why: str) -> None:
    refused(fake_do, send(fake_do, "POST", "/v2/firewalls", {**FIREWALL, "inbound_rules": [rule]}), 422, why)


def test_the_drivers_firewall_body_obeys_the_published_schema() -> None:
    driver = DigitalOceanDriver(DigitalOcean(region="tor1"))
    body = driver.firewall_body("skyward-sky-1-1900000000", "skyward-pool:sky-1:1900000000", "203.0.113.7/32", (1, 2))
    assert problems("firewall_create_request", body) == []
    icmp = [r for r in [*body["inbound_rules"], *body["outbound_rules"]] if r["protocol"] == "icmp"]
    assert icmp and all(r["ports"] == "0" for r in icmp)


# -- droplet listings ------------------------------------------------------------------


def test_tag_name_with_type_or_name_and_an_unknown_type_are_refused(fake_do: FakeDigitalOcean) -> None:
    refused(fake_do, send(fake_do, "GET", "/v2/droplets", tag_name="skyward", type="gpus"), 422, "tag_name")
    refused(fake_do, send(fake_do, "GET", "/v2/droplets", tag_name="skyward", name="x"), 422, "tag_name")
    refused(fake_do, send(fake_do, "GET", "/v2/droplets", type="all"), 422, "droplets or gpus")
    refused(fake_do, send(fake_do, "GET", "/v2/droplets", per_page="201"), 400, "per_page=201")


def test_gpu_droplets_of_a_tag_are_found_though_the_tag_listing_leaves_them_out(
    fake_do: FakeDigitalOcean, api: DigitalOceanAPI
) -> None:
    gpu = fake_do.add_droplet(name="g", tags=["skyward", "mine"], size="gpu-h100x1-80gb")
    cpu = fake_do.add_droplet(name="c", tags=["skyward", "mine"])
    fake_do.add_droplet(name="other", tags=["skyward"], size="gpu-h100x1-80gb")
    plain = send(fake_do, "GET", "/v2/droplets", tag_name="mine").json()["droplets"]
    assert [d["id"] for d in plain] == [cpu]  # the fake's reading of the undocumented case
    assert sorted(int(d["id"]) for d in api.droplets_tagged("mine")) == sorted([gpu, cpu])


# -- tags ----------------------------------------------------------------------------------


def test_a_bad_tag_name_answers_the_documented_400_shape(fake_do: FakeDigitalOcean, api: DigitalOceanAPI) -> None:
    response = send(fake_do, "POST", "/v2/tags", {"name": "tag with spaces"})
    assert response.status_code == 400 and problems("error_with_root_causes", response.json()) == []
    fake_do.violations.clear()
    with pytest.raises(DigitalOceanAPIError) as info:
        api.create_tag("tag with spaces")
    assert info.value.status == 400 and "invalid characters" in info.value.api_message  # read from "error"
    fake_do.violations.clear()


def test_creating_a_tag_twice_is_refused_by_the_fake_and_idempotent_for_the_provider(
    fake_do: FakeDigitalOcean, api: DigitalOceanAPI
) -> None:
    assert send(fake_do, "POST", "/v2/tags", {"name": "skyward"}).status_code == 201
    again = send(fake_do, "POST", "/v2/tags", {"name": "skyward"})
    assert again.status_code == 422 and problems("error", again.json()) == []
    api.create_tag("skyward")  # exists: not an error
    api.create_tag("skyward-new")
    assert {"skyward", "skyward-new"} <= fake_do.tags


def test_tagging_a_resource_of_an_unknown_type_is_refused(fake_do: FakeDigitalOcean) -> None:
    fake_do.tags.add("t")
    body = {"resources": [{"resource_id": "1", "resource_type": "firewall"}]}
    refused(fake_do, send(fake_do, "POST", "/v2/tags/t/resources", body), 422, "is not one of")


# -- droplets ------------------------------------------------------------------------------


def droplet_body(**changes: Any) -> dict[str, Any]:
    return {"name": "sky-1-0", "region": "tor1", "size": "s-1vcpu-1gb", "image": "ubuntu-24-04-x64", **changes}


@pytest.mark.parametrize(
    ("changes", "why"),
    [
        ({"ipv6": "yes"}, "is not of type 'boolean'"),
        ({"image": None}, "is not valid under any of the given schemas"),
        ({"tags": "skyward"}, "is not of type"),
        ({"user_data": "#!/bin/sh\n" + "x" * 65536}, "64 KiB"),
        ({"name": "-bad"}, "not a valid hostname"),  # RFC 1123; the spec's pattern lets it by
    ],
)
def test_droplet_bodies_outside_the_spec_are_refused(fake_do: FakeDigitalOcean, changes: Any, why: str) -> None:
    refused(fake_do, send(fake_do, "POST", "/v2/droplets", droplet_body(**changes)), 422, why)


def test_the_droplet_limit_the_account_reports_is_enforced(fake_do: FakeDigitalOcean, api: DigitalOceanAPI) -> None:
    fake_do.droplet_limit = 1
    account = api.account()
    assert problems("account", account) == [] and account["droplet_limit"] == 1
    assert send(fake_do, "POST", "/v2/droplets", droplet_body()).status_code == 202
    over = send(fake_do, "POST", "/v2/droplets", droplet_body(name="sky-1-1"))
    assert over.status_code == 422 and "droplet limit of 1" in over.json()["message"]


def test_a_capacity_refusal_is_a_plain_error_without_a_region_list(fake_do: FakeDigitalOcean) -> None:
    fake_do.capacity[("gpu-h100x1-80gb", "tor1")] = 0
    body = droplet_body(size="gpu-h100x1-80gb", image="gpu-h100x1-base")
    answer = send(fake_do, "POST", "/v2/droplets", body)
    assert answer.status_code == 422 and set(answer.json()) == {"id", "message", "request_id"}
    assert problems("error", answer.json()) == []


# -- what the fake answers -----------------------------------------------------------------


def test_the_fakes_sizes_account_and_errors_match_the_published_schemas(fake_do: FakeDigitalOcean) -> None:
    assert len(commit()) == 40
    sizes = send(fake_do, "GET", "/v2/sizes", per_page="200").json()["sizes"]
    assert len(sizes) == len(SIZES) and all(problems("size", s) == [] for s in sizes)
    assert problems("account", send(fake_do, "GET", "/v2/account").json()["account"]) == []
    missing = send(fake_do, "GET", "/v2/droplets/1")
    assert missing.status_code == 404 and problems("error", missing.json()) == []
    anonymous = requests.get(f"{fake_do.url}/v2/account", timeout=5)
    assert anonymous.status_code == 401 and anonymous.json()["id"] == "unauthorized"
    assert problems("error", anonymous.json()) == []
    fake_do.violations.clear()  # the missing token was on purpose


def test_a_broken_answer_is_caught_by_the_schema_check() -> None:
    """The schema check itself can fail: a size without a price, an error without an id."""
    size = {k: v for k, v in SIZES[0].items() if k != "price_hourly"}
    assert any("price_hourly" in p for p in problems("size", size))
    assert problems("error", {"message": "x"}) != []


# -- regions -----------------------------------------------------------------------------


def test_gpu_regions_missing_from_the_seed_list_are_accepted_and_checked_against_the_api(
    fake_do: FakeDigitalOcean, do_token: str
) -> None:
    from do_support import make_spec

    DigitalOcean(region="atl1")
    DigitalOcean(region="nyc2")
    with pytest.raises(ConfigurationError, match="region slug"):
        DigitalOcean(region="Atlanta")
    driver = DigitalOceanDriver(DigitalOcean(region="ams2", api_url=fake_do.url))
    with pytest.raises(ConfigurationError, match="offers no droplet size there") as info:
        driver.choose_size(make_spec(driver.config))
    assert "atl1" in str(info.value) and "nyc2" in str(info.value)  # the API's regions, not a table's
    atl = DigitalOceanDriver(DigitalOcean(region="atl1", api_url=fake_do.url))
    assert atl.choose_size(make_spec(atl.config, accelerator="H100")).slug == "gpu-h100x1-80gb"
