"""The fake Verda API refuses what Verda documents as invalid and answers the way the
official SDKs and Verda's API change notes say it does; the provider copes with each.

The rules and their sources are listed in tests/fakes/verda.py. Requests the provider
would never send go straight over HTTP, to check the fake refuses them (and records the
violation); the provider's side goes through its own client.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import requests
from fakes.verda import CLIENT_ID, CLIENT_SECRET, FakeVerda
from verda_support import finish, make_spec, nothing_left, run

import skyward as sky
from skyward.errors import ConfigurationError, ProvisioningError
from skyward.providers.cloud.retry import Backoff
from skyward_verda import Verda
from skyward_verda.api import SCRIPTS_PAGE, VerdaAPI, action_results
from skyward_verda.driver import VerdaDriver

pytestmark = pytest.mark.cloud


@pytest.fixture
def api(fake_verda: FakeVerda) -> Iterator[VerdaAPI]:
    client = VerdaAPI(f"{fake_verda.url}/v1", CLIENT_ID, CLIENT_SECRET, backoff=Backoff(attempts=2, base=0.01))
    yield client
    client.close()


class Raw:
    """Plain HTTP to the fake, with a token: for the requests the provider never sends."""

    def __init__(self, fake: FakeVerda) -> None:
        self.fake = fake
        grant = {"grant_type": "client_credentials", "client_id": CLIENT_ID, "client_secret": CLIENT_SECRET}
        token = requests.post(f"{fake.url}/v1/oauth2/token", json=grant, timeout=5).json()["access_token"]
        self.headers = {"Authorization": f"Bearer {token}"}

    def __call__(self, method: str, path: str, body: Any = None, **params: str) -> requests.Response:
        url = f"{self.fake.url}/v1{path}"
        return requests.request(method, url, json=body, params=params, headers=self.headers, timeout=5)

    def refused(self, response: requests.Response, status: int, words: str) -> None:
        assert response.status_code == status, response.text
        assert set(response.json()) == {"code", "message"}  # Verda's error body
        assert any(words in v for v in self.fake.violations), self.fake.violations
        self.fake.violations.clear()


@pytest.fixture
def raw(fake_verda: FakeVerda) -> Raw:
    return Raw(fake_verda)


def deploy_body(fake: FakeVerda, **changes: Any) -> dict[str, Any]:
    key = next(iter(fake.ssh_keys), None) or _key(fake)
    body = {
        "instance_type": "CPU.4V.16G", "image": "ubuntu-24.04", "ssh_key_ids": [key], "hostname": "sky-1-0",
        "description": "skyward pool=sky-1 expires=1900000000", "location_code": "FIN-01",
    }  # fmt: skip
    return {k: v for k, v in {**body, **changes}.items() if v is not None}


def _key(fake: FakeVerda) -> str:
    fake.ssh_keys["k"] = {"id": "k", "name": "k", "key": "ssh-ed25519 AAAA"}
    return "k"


# -- deploy ------------------------------------------------------------------------------


@pytest.mark.parametrize("missing", ["location_code", "description", "hostname", "image"])
def test_a_deploy_without_a_required_field_is_refused(fake_verda: FakeVerda, raw: Raw, missing: str) -> None:
    raw.refused(raw("POST", "/instances", deploy_body(fake_verda, **{missing: None})), 400, f"{missing} is required")


def test_an_image_not_offered_for_the_type_is_refused_and_the_driver_picks_one_that_is(
    fake_verda: FakeVerda, raw: Raw, verda_config: Verda
) -> None:
    default = next(i for i in raw("GET", "/images").json() if i["is_default"])["image_type"]
    body = deploy_body(fake_verda, image=default)  # the account default is a CUDA image
    raw.refused(raw("POST", "/instances", body), 400, "not available for instance type CPU.4V.16G")
    offered = raw("GET", "/images", instance_type="CPU.4V.16G").json()
    assert [i["image_type"] for i in offered] == ["ubuntu-24.04"]
    driver = VerdaDriver(verda_config)
    nodes = run(driver, make_spec(verda_config), [])
    assert fake_verda.instances[nodes[0].instance_id].image == "ubuntu-24.04"
    finish(driver, nodes)
    gpu = VerdaDriver(verda_config)
    nodes = run(gpu, make_spec(verda_config, accelerator="H100"), [])
    assert fake_verda.instances[nodes[0].instance_id].image == default
    finish(gpu, nodes)


def test_an_image_the_user_names_that_is_not_offered_for_the_type_fails_early(
    fake_verda: FakeVerda, verda_config: Verda
) -> None:
    from dataclasses import replace

    config = replace(verda_config, image="ubuntu-24.04-cuda-12.8-open-docker")
    driver = VerdaDriver(config)
    with pytest.raises(ConfigurationError, match=r"not offered for CPU\.4V\.16G") as info:
        run(driver, make_spec(config), [])
    assert "ubuntu-24.04" in str(info.value)
    driver.teardown()
    assert fake_verda.count("POST", "/v1/instances") == 0


# -- availability --------------------------------------------------------------------------


@pytest.mark.parametrize("spelling", ["is_spot", "isSpot"])
def test_spot_availability_is_read_whichever_spelling_the_api_reads(
    fake_verda: FakeVerda, api: VerdaAPI, raw: Raw, spelling: str
) -> None:
    fake_verda.spot_param = spelling
    fake_verda.no_capacity("1H100.80S.30V", spot=True)  # on-demand has it, spot has none
    other = "isSpot" if spelling == "is_spot" else "is_spot"
    misread = raw("GET", "/instance-availability", **{other: "true"}).json()
    assert all("1H100.80S.30V" in loc["availabilities"] for loc in misread)  # the wrong spelling: on-demand
    spot = api.availability(spot=True)
    assert spot and all("1H100.80S.30V" not in loc["availabilities"] for loc in spot)
    assert all("1H100.80S.30V" in loc["availabilities"] for loc in api.availability(spot=False))
    assert [loc["location_code"] for loc in api.availability(spot=True, location="FIN-02")] == ["FIN-02"]


@pytest.mark.parametrize("spelling", ["is_spot", "isSpot"])
def test_a_spot_pool_does_not_deploy_where_only_on_demand_has_capacity(
    fake_verda: FakeVerda, verda_config: Verda, spelling: str
) -> None:
    fake_verda.spot_param = spelling
    fake_verda.no_capacity("CPU.4V.16G", "FIN-01", spot=True)
    driver = VerdaDriver(verda_config)
    nodes = run(driver, make_spec(verda_config, spot=sky.Spot.Always(retries=0)), [])
    assert fake_verda.instances[nodes[0].instance_id].location == "FIN-02"  # the first with spot capacity
    finish(driver, nodes)
    assert fake_verda.count("POST", "/v1/instances", 503) == 0


# -- teardown -------------------------------------------------------------------------------


def test_a_delete_without_delete_permanently_sends_the_volume_to_the_trash(
    fake_verda: FakeVerda, raw: Raw, verda_config: Verda
) -> None:
    kept = fake_verda.add_instance(hostname="a", description="not skyward's")
    volume = fake_verda.instances[kept].os_volume_id
    answer = raw("PUT", "/instances", {"id": [kept], "action": "delete", "volume_ids": [volume]})
    assert answer.status_code == 202 and answer.json() == [
        {"action": "delete", "instanceId": kept, "status": "success"}
    ]
    assert fake_verda.volumes[volume] == "trash"  # restorable 96 h: still there
    driver = VerdaDriver(verda_config)
    nodes = run(driver, make_spec(verda_config), [])
    finish(driver, nodes)
    assert fake_verda.volumes[fake_verda.instances[nodes[0].instance_id].os_volume_id] == "deleted"
    assert fake_verda.count("PUT", "/v1/instances") >= 2


def test_a_partial_answer_is_read_per_instance_and_the_failed_ones_asked_again(
    fake_verda: FakeVerda, verda_config: Verda
) -> None:
    driver = VerdaDriver(verda_config)
    nodes = run(driver, make_spec(verda_config, nodes=2), [])
    busy = nodes[1].instance_id
    fake_verda.refuse_action(busy)  # the first delete: a 207, node 1 refused
    finish(driver, nodes)
    assert fake_verda.count("PUT", "/v1/instances", 207) == 1
    assert nothing_left(fake_verda) == {}


def test_what_a_partial_answer_keeps_refusing_is_reported_by_id(fake_verda: FakeVerda, verda_config: Verda) -> None:
    driver = VerdaDriver(verda_config)
    nodes = run(driver, make_spec(verda_config, nodes=2), [])
    stuck = nodes[1].instance_id
    fake_verda.refuse_action(stuck, 409, "instance is locked", times=10)
    with pytest.raises(ProvisioningError) as info:
        driver.delete([n.instance_id for n in nodes])
    assert stuck in str(info.value) and "instance is locked" in str(info.value)
    assert fake_verda.instances[nodes[0].instance_id].status == "deleted"
    fake_verda.refusals.clear()
    finish(driver, nodes)
    assert nothing_left(fake_verda) == {}


def test_action_results_of_each_answer_shape() -> None:
    ids = ["a", "b"]
    assert all(r.ok for r in action_results(ids, 204, None))
    partial = action_results(
        ids, 207, [{"instanceId": "a", "status": "success"}, {"instanceId": "b", "status": "error", "statusCode": 409}]
    )
    assert [(r.instance_id, r.ok, r.status_code) for r in partial] == [("a", True, None), ("b", False, 409)]
    assert not any(r.ok for r in action_results(ids, 207, "garbled"))


def test_a_discontinued_spot_instance_leaves_no_volume_behind(fake_verda: FakeVerda, verda_config: Verda) -> None:
    driver = VerdaDriver(verda_config)
    nodes = run(driver, make_spec(verda_config, spot=sky.Spot.Always(retries=0)), [])
    instance = fake_verda.instances[nodes[0].instance_id]
    fake_verda.discontinue(instance.id)
    assert fake_verda.volumes[instance.os_volume_id] == "detached"  # Verda keeps it, billed
    finish(driver, nodes)
    assert fake_verda.volumes[instance.os_volume_id] == "deleted"
    assert nothing_left(fake_verda) == {}


def test_volume_and_instance_actions_outside_the_documented_ones_are_refused(fake_verda: FakeVerda, raw: Raw) -> None:
    attached = fake_verda.add_instance(hostname="a", description="x")
    volume = fake_verda.instances[attached].os_volume_id
    raw.refused(raw("PUT", "/volumes", {"id": [volume], "action": "delete", "is_permanent": True}), 400, "attached")
    raw.refused(raw("PUT", "/instances", {"id": [attached], "action": "explode"}), 400, "action 'explode'")
    raw.refused(raw("PUT", "/instances", {"id": [], "action": "delete"}), 400, "at least one")
    raw.refused(raw("PUT", "/instances", {"id": [attached], "action": "delete", "purge": True}), 400, "purge")


# -- startup scripts ------------------------------------------------------------------------


def test_every_page_of_startup_scripts_is_read(fake_verda: FakeVerda, api: VerdaAPI, raw: Raw) -> None:
    for n in range(SCRIPTS_PAGE + 5):
        fake_verda.scripts[f"s{n}"] = {"id": f"s{n}", "name": f"skyward-sky-{n}-1900000000-0", "script": "#!"}
    first = raw("GET", "/scripts")
    assert len(first.json()) == 10 and first.headers["X-Total-Count"] == str(SCRIPTS_PAGE + 5)  # default page
    assert len(api.scripts()) == SCRIPTS_PAGE + 5
    assert fake_verda.count("GET", "/v1/scripts") == 3  # the raw one, then two pages of 100
    raw.refused(raw("GET", "/scripts", pageSize="101"), 400, "pageSize is 1-100")


def test_the_startup_script_quota_is_enforced(fake_verda: FakeVerda, raw: Raw) -> None:
    for n in range(100):
        fake_verda.scripts[f"s{n}"] = {"id": f"s{n}", "name": f"s{n}", "script": "#!"}
    raw.refused(raw("POST", "/scripts", {"name": "one more", "script": "#!/bin/sh\n"}), 400, "quota of 100")


def test_the_balance_reads_as_the_sdks_describe_it(api: VerdaAPI) -> None:
    balance = api.balance()
    assert isinstance(balance["amount"], float) and balance["currency"] == "usd"


def test_the_reaper_deletes_the_volume_a_discontinued_spot_instance_of_a_dead_pool_left(
    fake_verda: FakeVerda, api: VerdaAPI
) -> None:
    from skyward_verda.naming import description
    from skyward_verda.reaper import reap_with

    left = fake_verda.add_instance(hostname="sky-0000000d-0", description=description("sky-0000000d", 1900000000))
    fake_verda.discontinue(left)
    reaped = reap_with(api, now=1800000000.0)
    assert [i[0] for i in reaped.instances] == [left] and reaped.failures == ()
    assert fake_verda.volumes[fake_verda.instances[left].os_volume_id] == "deleted"
    assert nothing_left(fake_verda) == {}
