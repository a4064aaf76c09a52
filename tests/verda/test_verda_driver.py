"""The Verda driver against the fake API over HTTP (requests all the way down).

Instances become ``running`` with loopback addresses but run nothing here; what is
checked is what the driver asks of the API, how it picks locations and markets, what it
does when the API refuses, and that it leaves nothing behind.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import pytest
from fakes.verda import CLIENT_ID, FakeVerda
from providers_support import check_never_started_nodes_are_deleted, check_slow_then_stuck_api, launched
from verda_support import finish, make_spec, nothing_left, run

import skyward as sky
from skyward.errors import ConfigurationError, ProvisioningError
from skyward.events import InstanceLaunching, InstanceProvisioned, Notice
from skyward_verda import Verda
from skyward_verda.driver import VerdaDriver
from skyward_verda.naming import parse_description

pytestmark = pytest.mark.cloud


def test_a_pool_of_two_and_nothing_left_after(fake_verda: FakeVerda, verda_config: Verda) -> None:
    spec = make_spec(verda_config, nodes=2, accelerator="H100")
    events: list[Any] = []
    with launched(VerdaDriver(verda_config), spec, events) as nodes:
        instances = [fake_verda.instances[n.instance_id] for n in nodes]
        assert [n.node for n in nodes] == [0, 1]
        for node, instance in zip(nodes, instances, strict=True):
            assert instance.status == "running" and instance.instance_type["instance_type"] == "1H100.80S.30V"
            assert instance.location == "FIN-01"  # region=None: the first location with capacity
            assert not instance.is_spot and not node.spot  # spot unset: on-demand
            assert node.endpoint == f"tcp://{instance.ip}:{verda_config.agent_port}"
            assert (node.price_on_demand, node.price_spot) == (2.19, 0.75)
            mark = parse_description(instance.description)
            assert mark is not None and mark.pool_id == spec.pool_id and mark.expires > time.time() + 600
            script = fake_verda.scripts[instance.startup_script_id or ""]["script"]
            assert f"node={node.node} bind=tcp://0.0.0.0:16789" in script
            assert "iptables -I INPUT -p tcp --dport 16789:16791 ! -s 127.0.0.1/32 -j DROP" in script
            assert CLIENT_ID not in script and fake_verda.client_secret not in script
            assert instance.ssh_key_ids == list(fake_verda.ssh_keys)  # the one throwaway key
        launching = next(e for e in events if isinstance(e, InstanceLaunching))
        assert (launching.count, launching.instance_type, launching.provider) == (2, "1H100.80S.30V", "verda")
        assert sum(isinstance(e, InstanceProvisioned) for e in events) == 2
    assert nothing_left(fake_verda) == {}  # instances, their OS volumes, scripts, key
    assert fake_verda.violations == []
    assert fake_verda.grants == ["client_credentials"]


def test_region_none_finds_a_location_with_capacity(fake_verda: FakeVerda, verda_config: Verda) -> None:
    fake_verda.no_capacity("1H100.80S.30V", "FIN-01")
    fake_verda.no_capacity("1H100.80S.30V", "FIN-02")
    driver = VerdaDriver(verda_config)
    nodes = run(driver, make_spec(verda_config, accelerator="H100"), [])
    assert fake_verda.instances[nodes[0].instance_id].location == "FIN-03"
    finish(driver, nodes)
    assert nothing_left(fake_verda) == {}


def test_an_unknown_region_lists_the_locations(fake_verda: FakeVerda, verda_credentials: Any) -> None:
    config = Verda(region="us-east", api_url=f"{fake_verda.url}/v1", address_url=f"{fake_verda.url}/whoami")
    driver = VerdaDriver(config)
    with pytest.raises(ConfigurationError, match="not a Verda location; use one of: FIN-01, FIN-02, FIN-03, ICE-01"):
        driver.prepare(make_spec(config), [].append)
    driver.teardown()
    assert nothing_left(fake_verda) == {}


def test_no_capacity_in_the_region_says_what_to_try(fake_verda: FakeVerda, verda_config: Verda) -> None:
    fake_verda.no_capacity("1H100.80S.30V", "FIN-01")
    config = replace(verda_config, region="FIN-01")
    driver = VerdaDriver(config)
    with pytest.raises(ProvisioningError) as info:
        driver.prepare(make_spec(config, accelerator="H100"), [].append)
    text = str(info.value)
    assert "no on-demand capacity for 1H100.80S.30V in FIN-01" in text
    assert "on-demand in FIN-02, FIN-03, ICE-01" in text
    assert "Verda(region=None)" in text and "spot='if-available'" in text and "later" in text
    assert "machine='8H100.80S.176V' (a bigger type, $17.52/h on-demand, available now)" in text
    assert fake_verda.count("POST", "/v1/instances") == 0  # never silently rented the bigger one
    driver.teardown()
    assert nothing_left(fake_verda) == {}


def test_spot_always_deploys_spot_and_retries_then_explains(fake_verda: FakeVerda, verda_config: Verda) -> None:
    driver = VerdaDriver(verda_config)
    nodes = run(driver, make_spec(verda_config, nodes=2, spot=sky.Spot.Always(retries=2, interval=0.01)), [])
    assert all(n.spot and fake_verda.instances[n.instance_id].is_spot for n in nodes)
    finish(driver, nodes)
    # spot listed as available, but every deploy is refused (a race with other customers)
    fake_verda.capacity[("CPU.4V.16G", "FIN-01", True)] = 0
    driver = VerdaDriver(verda_config)
    fake_verda.capacity.pop(("CPU.4V.16G", "FIN-01", True))
    spec = make_spec(verda_config, spot=sky.Spot.Always(retries=2, interval=0.01))
    driver.validate(spec)
    driver.prepare(spec, [].append)
    fake_verda.capacity[("CPU.4V.16G", "FIN-01", True)] = 0
    with pytest.raises(ProvisioningError) as info:
        driver.launch(spec, lambda *a, **k: "#!/bin/sh\n", [].append)
    assert fake_verda.count("POST", "/v1/instances", 503) == 3  # one try and two retries
    assert "no spot capacity for CPU.4V.16G in FIN-01" in str(info.value)
    assert "spot='if-available'" in str(info.value)
    driver.teardown()
    assert nothing_left(fake_verda) == {}


def test_if_available_falls_back_to_on_demand_and_says_so(fake_verda: FakeVerda, verda_config: Verda) -> None:
    driver = VerdaDriver(verda_config)
    spec = make_spec(verda_config, nodes=2, spot="if-available", accelerator="H100")
    driver.validate(spec)
    events: list[Any] = []
    driver.prepare(spec, events.append)
    fake_verda.capacity[("1H100.80S.30V", "FIN-01", True)] = 1  # one spot left when we deploy
    nodes = driver.launch(spec, lambda *a, **k: "#!/bin/sh\n", events.append)
    assert sorted(n.spot for n in nodes) == [False, True]  # created in parallel: either node may get the spot one
    assert any("no spot capacity" in e.message and "on-demand" in e.message for e in events if isinstance(e, Notice))
    finish(driver, nodes)
    assert nothing_left(fake_verda) == {}


def test_percent_keeps_the_head_on_demand(fake_verda: FakeVerda, verda_config: Verda) -> None:
    driver = VerdaDriver(verda_config)
    nodes = run(driver, make_spec(verda_config, nodes=3, spot=0.5), [])
    assert [n.spot for n in nodes] == [False, True, True]
    finish(driver, nodes)


def test_a_partial_launch_failure_deletes_what_was_made(fake_verda: FakeVerda, verda_config: Verda) -> None:
    fake_verda.fail("POST", "/v1/instances", 400, {"code": "invalid_request", "message": "Bad request"}, after=2)
    driver = VerdaDriver(verda_config)
    with pytest.raises(ProvisioningError, match="Bad request"):
        run(driver, make_spec(verda_config, nodes=3), [])
    assert len(fake_verda.instances) == 2
    assert all(i.status == "deleted" for i in fake_verda.instances.values())
    driver.teardown()
    assert nothing_left(fake_verda) == {}


def test_rate_limits_are_retried(fake_verda: FakeVerda, verda_config: Verda) -> None:
    fake_verda.rate_limit("GET", "/v1/instance-types", times=2)
    fake_verda.rate_limit("POST", "/v1/instances", times=2, retry_after=0.2)
    fake_verda.rate_limit("POST", "/v1/oauth2/token", times=1)
    driver = VerdaDriver(verda_config)
    nodes = run(driver, make_spec(verda_config), [])
    finish(driver, nodes)
    assert fake_verda.count("GET", "/v1/instance-types", 429) == 2
    assert fake_verda.count("POST", "/v1/instances", 429) == 2 and fake_verda.count("POST", "/v1/instances", 202) == 1
    deploys = [c.at for c in fake_verda.calls if c.method == "POST" and c.path == "/v1/instances"]
    assert deploys[1] - deploys[0] >= 0.2 and deploys[2] - deploys[1] >= 0.2  # Retry-After obeyed
    assert nothing_left(fake_verda) == {}


def test_a_server_error_on_deploy_is_not_repeated(fake_verda: FakeVerda, verda_config: Verda) -> None:
    fake_verda.fail("POST", "/v1/instances", 500, {"code": "server_error", "message": "Internal error"})
    driver = VerdaDriver(verda_config)
    with pytest.raises(ProvisioningError, match="500"):
        run(driver, make_spec(verda_config), [])
    assert fake_verda.count("POST", "/v1/instances") == 1
    driver.teardown()
    assert nothing_left(fake_verda) == {}


def test_tokens_are_refreshed_before_they_expire_and_after_a_401(fake_verda: FakeVerda, verda_config: Verda) -> None:
    fake_verda.token_lifetime = 0.5
    fake_verda.slow(0.05, "GET", "/v1/instances")  # a launch that outlives a token
    driver = VerdaDriver(verda_config)
    nodes = run(driver, make_spec(verda_config, nodes=2), [])
    fake_verda.token_lifetime = 3600
    fake_verda.revoke_tokens()  # the token stops working early: one 401, then a new token
    finish(driver, nodes)
    assert fake_verda.grants[0] == "client_credentials" and "refresh_token" in fake_verda.grants
    assert fake_verda.count("GET", "/v1/.*", 401) + fake_verda.count("PUT", "/v1/.*", 401) >= 1
    assert nothing_left(fake_verda) == {}
    assert fake_verda.violations == []


def test_bad_credentials_fail_clearly(fake_verda: FakeVerda, verda_config: Verda, monkeypatch: Any) -> None:
    monkeypatch.setenv("VERDA_CLIENT_SECRET", "wrong")
    driver = VerdaDriver(verda_config)
    with pytest.raises(ProvisioningError, match=r"Invalid client credentials.*VERDA_CLIENT_ID and VERDA_CLIENT_SECRET"):
        driver.prepare(make_spec(verda_config), [].append)
    driver.teardown()


def test_slow_api_still_works_and_a_stuck_one_fails(fake_verda: FakeVerda, verda_config: Verda) -> None:
    stuck = replace(verda_config, api_timeout=0.5, api_retries=2)
    failure = "list instance types failed"
    check_slow_then_stuck_api(
        fake_verda, VerdaDriver, verda_config, ("GET", "/v1/instance-types"), stuck, failure, nothing_left
    )


def test_instances_that_never_start_time_out_and_are_deleted(fake_verda: FakeVerda, verda_config: Verda) -> None:
    config = replace(verda_config, provision_timeout=0.3)
    failure = r"not running within provision_timeout=0\.3"
    check_never_started_nodes_are_deleted(fake_verda, VerdaDriver, config, failure, nothing_left)


def test_a_lost_deploy_response_is_swept(fake_verda: FakeVerda, verda_config: Verda) -> None:
    """Deployed, but the answer was lost: not deployed again; teardown finds it by its description."""
    fake_verda.fail("POST", "/v1/instances", 504, {"code": "gateway_timeout", "message": "timeout"}, process=True)
    driver = VerdaDriver(verda_config)
    with pytest.raises(ProvisioningError, match="504"):
        run(driver, make_spec(verda_config), [])
    (orphan,) = fake_verda.instances.values()
    assert fake_verda.count("POST", "/v1/instances") == 1 and orphan.status != "deleted"
    driver.teardown()
    assert orphan.status == "deleted" and fake_verda.volumes[orphan.os_volume_id] == "deleted"
    assert nothing_left(fake_verda) == {}


def test_own_ssh_keys_are_used_and_kept(fake_verda: FakeVerda, verda_config: Verda) -> None:
    fake_verda.ssh_keys["mine"] = {"id": "mine", "name": "laptop", "key": "ssh-ed25519 AAAA laptop"}
    config = replace(verda_config, ssh_key_ids=("mine",))
    driver = VerdaDriver(config)
    nodes = run(driver, make_spec(config), [])
    assert fake_verda.instances[nodes[0].instance_id].ssh_key_ids == ["mine"]
    finish(driver, nodes)
    assert list(fake_verda.ssh_keys) == ["mine"]


def test_start_reaps_what_earlier_pools_left(fake_verda: FakeVerda, verda_config: Verda) -> None:
    from skyward_verda.naming import description, resource_name

    now = int(time.time())
    off = fake_verda.add_instance(hostname="sky-0000000a-0", description=description("sky-0000000a", now + 3600))
    fake_verda.shut_down(off)
    expired = fake_verda.add_instance(hostname="sky-0000000b-0", description=description("sky-0000000b", now - 5))
    alive = fake_verda.add_instance(hostname="sky-0000000c-0", description=description("sky-0000000c", now + 3600))
    foreign = fake_verda.add_instance(hostname="my-box", description="my box", status="offline")
    fake_verda.scripts["old"] = {"id": "old", "name": resource_name("sky-0000000b", now - 5, 0), "script": "#!"}
    events: list[Any] = []
    driver = VerdaDriver(verda_config)
    nodes = run(driver, make_spec(verda_config), events)
    finish(driver, nodes)
    status = {i: fake_verda.instances[i].status for i in (off, expired, alive, foreign)}
    assert status == {off: "deleted", expired: "deleted", alive: "running", foreign: "offline"}
    for instance_id in (off, expired):
        assert fake_verda.volumes[fake_verda.instances[instance_id].os_volume_id] == "deleted"
    assert "old" not in fake_verda.scripts
    assert any("sky-0000000a-0" in e.message for e in events if isinstance(e, Notice))
