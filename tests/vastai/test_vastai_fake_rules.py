"""The fake VastAI API refuses what VastAI documents as invalid, one test per rule, in
VastAI's own error shapes (the sources are in tests/fakes/vastai.py); and the driver reads
those answers right: a paginated listing read to its last page, an invalid request a
configuration error (never a taken offer)."""

from __future__ import annotations

import time
from typing import Any

import pytest
import requests
from fakes.vastai import API_KEY, FakeVastAI
from providers_support import World

from skyward import ComputePool
from skyward.errors import ConfigurationError
from skyward_vastai import VastAI
from skyward_vastai.api import VastAPI
from skyward_vastai.resources import reap_with

pytestmark = pytest.mark.cloud

AUTH = {"Authorization": f"Bearer {API_KEY}"}
GOOD: dict[str, Any] = {
    "client_id": "me", "image": "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime", "disk": 32,
    "label": "skyward-sky-1-2000000000-0", "runtype": "args", "args": ["bash", "-c", "true"],
    "env": {"-p 16789:16789": "1"},
}  # fmt: skip


def _refused(fake: FakeVastAI, response: requests.Response, status: int = 400) -> dict[str, Any]:
    """The answer was VastAI's refusal; the fake recorded why (cleared: this test meant it)."""
    assert response.status_code == status, response.text
    body = response.json()
    assert fake.violations, "the fake answered an error without recording a violation"
    fake.violations.clear()
    assert isinstance(body, dict)
    return body


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"image": None}, "image is required"),  # CREATE required: [image]
        ({"image": "x" * 1025}, "image is 1025 characters"),  # x-input-validation image.max_length
        ({"label": "l" * 257}, "label is 257 characters"),  # x-input-validation label.max_length
        ({"disk": 4}, "at least 8"),  # x-input-validation disk.min
        ({"runtype": "shell"}, "runtype 'shell'"),  # CREATE runtype enum
        ({"target_state": "paused"}, "target_state 'paused'"),  # CREATE target_state enum
        ({"price": 500.0}, "price is a bid"),  # CREATE price maximum 128
        ({"price": 0.0}, "price is a bid"),  # CREATE price minimum 0.001
        ({"args": "bash -c true"}, "args is an array of strings"),  # CREATE args: array of string
        ({"args": ["bash", "-c", "x" * 4090]}, "args + args_str + onstart is 4098"),  # the 4,096 characters
        ({"args": ["true"], "onstart": "y" * 4093}, "args + args_str + onstart is 4097"),  # combined with onstart
        ({"env": "-p 16789:16789"}, "env is an object"),  # CLI: env goes as an object
        ({"env": {"-p 16789:16789": "1", "TOKEN": "v" * 257}}, "env TOKEN is 257"),  # env.max_length
        ({"env": {"not a name": "1"}}, "neither a variable name"),
        ({"disk_gb": 32}, "unknown fields"),
    ],
)
def test_a_rent_body_vastai_refuses_is_refused_in_its_shape(fake: FakeVastAI, change: dict[str, Any], why: str) -> None:
    body = {k: v for k, v in {**GOOD, **change}.items() if v is not None}
    assert fake.rent_problem(GOOD) == ""  # the same body without the change is accepted
    answer = _refused(fake, requests.put(f"{fake.url}/api/v0/asks/101/", json=body, headers=AUTH, timeout=10))
    assert answer["success"] is False and answer["error"] == "invalid_args" and answer["ask_id"] == 101
    assert why in answer["msg"]
    assert not fake.offers[101]["rented"] and not fake.instances


def test_an_offer_rented_by_someone_else_is_vastais_documented_404(fake: FakeVastAI) -> None:
    fake.offers[101]["rented"] = True
    response = requests.put(f"{fake.url}/api/v0/asks/101/", json=GOOD, headers=AUTH, timeout=10)
    assert response.status_code == 404
    assert response.json() == {
        "success": False, "error": "invalid_args", "ask_id": 101,
        "msg": "error 404/3603: no_such_ask Instance type by id 101 is not available.",
    }  # fmt: skip


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong"}, {"Authorization": API_KEY}])
def test_a_call_without_the_bearer_key_is_unauthorized(fake: FakeVastAI, headers: dict[str, str]) -> None:
    response = requests.get(f"{fake.url}/api/v1/instances/", headers=headers, timeout=10)
    assert response.status_code == 401
    assert response.json() == {"success": False, "error": "auth_error", "msg": "Invalid user key"}


def test_a_key_in_the_url_is_a_violation(fake: FakeVastAI) -> None:
    response = requests.get(f"{fake.url}/api/v1/instances/", params={"api_key": API_KEY}, headers=AUTH, timeout=10)
    assert response.status_code == 200
    assert fake.violations == ["the API key was sent in the URL"]
    fake.violations.clear()


@pytest.mark.parametrize(
    ("query", "why"),
    [
        ({"type": "spot"}, "with a type in"),  # SPEC /bundles type enum (and the CLI's on-demand)
        ({"type": "on-demand", "num_gpus": 1}, "is not {op: value}"),  # SPEC: each filter an {op: value}
        ({"type": "on-demand", "num_gpus": {"between": [1, 2]}}, "is not {op: value}"),  # the eight operators
        ({"type": "on-demand", "limit": "10"}, "limit is an integer"),
        ({"type": "on-demand", "order": "dph_total"}, "order is a list"),
    ],
)
def test_a_search_vastai_refuses_is_refused(fake: FakeVastAI, query: dict[str, Any], why: str) -> None:
    answer = _refused(fake, requests.post(f"{fake.url}/api/v0/bundles/", json=query, headers=AUTH, timeout=10))
    assert answer["error"] == "invalid_args" and why in answer["msg"]


@pytest.mark.parametrize(
    ("params", "why"),
    [
        ({"after_token": "not-a-token"}, "invalid after_token"),  # SPEC: "An invalid token returns a 400 error."
        ({"select_filters": '{"dph_total": {"lte": 1}}'}, "computed fields"),  # SPEC: computed fields return 400
        ({"order_by": '[{"col": "no_such_column"}]'}, "unknown columns"),  # SPEC: "Invalid column returns 400."
        ({"order_by": "id"}, "JSON"),
    ],
)
def test_a_listing_vastai_refuses_is_refused(fake: FakeVastAI, params: dict[str, str], why: str) -> None:
    fake.add_instance("one")
    answer = _refused(fake, requests.get(f"{fake.url}/api/v1/instances/", params=params, headers=AUTH, timeout=10))
    assert why in answer["msg"]


def test_a_listing_page_holds_at_most_25(fake: FakeVastAI) -> None:
    for n in range(30):
        fake.add_instance(f"other-{n}")
    page = requests.get(f"{fake.url}/api/v1/instances/", params={"limit": 100}, headers=AUTH, timeout=10).json()
    assert page["instances_found"] == 25 and page["total_instances"] == 30 and page["next_token"]


def test_the_v0_listing_is_gone_from_the_fake_as_from_the_published_api(fake: FakeVastAI) -> None:
    _refused(
        fake,
        requests.get(f"{fake.url}/api/v0/instances/", params={"owner": "me"}, headers=AUTH, timeout=10),
        status=404,
    )


def test_destroying_an_unknown_instance_is_vastais_404(fake: FakeVastAI) -> None:
    response = requests.delete(f"{fake.url}/api/v0/instances/999/", headers=AUTH, timeout=10)
    assert response.status_code == 404
    assert response.json() == {"success": False, "error": "not_found", "msg": "Instance not found"}


def test_every_page_of_the_listing_is_read_so_instance_101_and_later_are_found(
    fake: FakeVastAI, config: VastAI
) -> None:
    now = int(time.time())
    ids = [fake.add_instance(f"someone-else-{n}") for n in range(120)]
    expired = fake.add_instance(f"skyward-sky-0000000b-{now - 60}-0")  # the 121st: on the fifth page
    api = VastAPI(config)
    try:
        listed = [int(raw["id"]) for raw in api.instances()]
        assert listed == [*ids, expired]  # each once, in id order
        assert fake.count("GET", r"/api/v1/instances/", 200) == 5
        assert any("destroyed" in line for line in reap_with(api, now, None))
    finally:
        api.close()
    assert expired in fake.destroyed and len(fake.instances) == 120


def test_a_rental_vastai_calls_invalid_is_a_configuration_error_not_a_taken_offer(
    world: World[FakeVastAI], config: VastAI
) -> None:
    fake = world.fake
    refusal = {"success": False, "error": "invalid_args", "ask_id": 101, "msg": "error 400/3467: Invalid args: x"}
    fake.fail("PUT", r"/api/v0/asks/\d+/", 400, refusal, times=None)
    with pytest.raises(ConfigurationError, match=r"VastAI refused the rental of offer \d+ as invalid.*Invalid args: x"):
        with ComputePool(provider=config, nodes=1, display="quiet"):
            pass
    assert fake.count("PUT", r"/api/v0/asks/\d+/", 400) == 1  # no other offer was tried
    assert fake.instances == {}
