"""The DigitalOcean driver against the fake API over HTTP (pydo all the way down).

No emulated instances here: droplets become ``active`` with loopback addresses but run
nothing. What is checked is what the driver asks of the API, what it does when the API
refuses, and that it leaves nothing behind.
"""

from __future__ import annotations

import itertools
import time
from typing import Any

import pytest
from do_support import finish, make_spec, nothing_left, run
from fakes.digitalocean import FakeDigitalOcean
from providers_support import (
    check_never_started_nodes_are_deleted,
    check_slow_then_stuck_api,
    launched,
    rendered_user_data,
)

from skyward.errors import NoOfferError, ProvisioningError
from skyward.events import BootstrapStarting, InstanceLaunching, InstanceProvisioned, Notice
from skyward_digitalocean import DigitalOcean
from skyward_digitalocean.driver import DigitalOceanDriver
from skyward_digitalocean.naming import COMMON_TAG, parse_pool_tag, pool_tag

pytestmark = pytest.mark.cloud


def test_a_pool_of_two_droplets_and_nothing_left_after(fake_do: FakeDigitalOcean, do_config: DigitalOcean) -> None:
    spec, events = make_spec(do_config, nodes=2, accelerator="H100"), []
    with launched(DigitalOceanDriver(do_config), spec, events) as nodes:
        assert [n.node for n in nodes] == [0, 1]
        droplets = [fake_do.droplets[int(n.instance_id)] for n in nodes]
        for node, droplet in zip(nodes, droplets, strict=True):
            assert droplet.status == "active" and droplet.size["slug"] == "gpu-h100x1-80gb"
            assert droplet.image == "gpu-h100x1-base"  # GPU size: the GPU base image
            assert node.endpoint == f"tcp://{droplet.public_ip}:{do_config.agent_port}"
            assert node.ip.startswith("127.") and node.private_ip == droplet.private_ip
            assert node.price_on_demand == 3.39 and node.spot is False
            assert f"node={node.node} bind=tcp://0.0.0.0:{do_config.agent_port}" in droplet.user_data
            assert COMMON_TAG in droplet.tags
            mark = next(parse_pool_tag(t) for t in droplet.tags if parse_pool_tag(t))
            assert mark is not None and mark.pool_id == spec.pool_id and mark.expires > time.time() + 600
            assert droplet.ssh_keys and len(fake_do.ssh_keys) == 1  # the throwaway key, no root password email
        # the cloud firewall: the agent port from this client only, the pool's droplets to each other
        (firewall,) = fake_do.firewalls.values()
        tag = next(t for t in droplets[0].tags if t != COMMON_TAG)
        assert firewall["tags"] == [tag]
        ports = f"{do_config.agent_port}-{do_config.agent_port + 2 * spec.workers_per_node}"  # agent, workers, data
        agent_rules = [r for r in firewall["inbound_rules"] if r["ports"] == ports]
        assert not any(r["ports"] == "0" and r["sources"].get("addresses") for r in firewall["inbound_rules"])
        assert agent_rules == [{"protocol": "tcp", "ports": "16789-16791", "sources": {"addresses": ["127.0.0.1/32"]}}]
        assert all(r["sources"] == {"tags": [tag]} for r in firewall["inbound_rules"] if r not in agent_rules)
        kinds = [type(e) for e in events]
        assert kinds.count(InstanceProvisioned) == 2 and kinds.count(BootstrapStarting) == 2
        launching = next(e for e in events if isinstance(e, InstanceLaunching))
        assert (launching.count, launching.instance_type, launching.provider) == (2, "gpu-h100x1-80gb", "digitalocean")
    assert nothing_left(fake_do) == {}
    assert fake_do.violations == []
    assert all(d.history[-1] == "deleted" for d in fake_do.droplets.values())


def test_the_token_is_checked_and_never_sent_to_a_droplet(fake_do: FakeDigitalOcean, do_config: DigitalOcean) -> None:
    spec = make_spec(do_config)
    driver = DigitalOceanDriver(do_config)
    nodes = run(driver, spec, [], rendered_user_data(spec))  # the whole bootstrap, as a droplet gets it
    try:
        user_data = [d.user_data for d in fake_do.droplets.values()]
        assert user_data and all("# Skyward bootstrap for image" in u and "-m skyward.agent" in u for u in user_data)
        assert all(fake_do.token not in u for u in user_data)
    finally:
        finish(driver, nodes)
    fake_do.token = "another-token"
    driver = DigitalOceanDriver(do_config)
    with pytest.raises(ProvisioningError, match=r"401.*Unable to authenticate"):
        driver.prepare(make_spec(do_config), [].append)
    driver.teardown()
    # The wrong token was sent on purpose: the fake must have seen it (and nothing else wrong).
    assert fake_do.violations and all("without the right bearer token" in v for v in fake_do.violations)
    fake_do.violations.clear()


def test_a_partial_launch_failure_deletes_what_was_made(fake_do: FakeDigitalOcean, do_config: DigitalOcean) -> None:
    spec = make_spec(do_config, nodes=3)
    fake_do.fail(
        "POST", "/v2/droplets", 422, {"id": "unprocessable_entity", "message": "Region is unavailable"}, after=2
    )
    driver = DigitalOceanDriver(do_config)
    with pytest.raises(ProvisioningError, match="2 of 3 droplets had been created; they were deleted"):
        run(driver, spec, [])
    assert len(fake_do.droplets) == 2 and all(d.status == "deleted" for d in fake_do.droplets.values())
    driver.teardown()
    assert nothing_left(fake_do) == {}


def test_no_capacity_says_what_to_try(fake_do: FakeDigitalOcean, do_config: DigitalOcean) -> None:
    fake_do.capacity[("gpu-h100x1-80gb", "tor1")] = 1
    spec = make_spec(do_config, nodes=2, accelerator="H100")
    driver = DigitalOceanDriver(do_config)
    with pytest.raises(ProvisioningError) as info:
        run(driver, spec, [])
    text = str(info.value)
    assert "no capacity for gpu-h100x1-80gb in tor1" in text
    assert "another size or accelerator" in text and "later" in text
    assert "1 of 2 droplets had been created; they were deleted" in text
    driver.teardown()
    assert nothing_left(fake_do) == {}


def test_a_size_offered_elsewhere_names_the_regions(fake_do: FakeDigitalOcean, do_token: str) -> None:
    config = DigitalOcean(region="nyc1", api_url=fake_do.url, address_url=f"{fake_do.url}/whoami")
    driver = DigitalOceanDriver(config)
    with pytest.raises(NoOfferError) as info:  # another region or provider may offer it: failover moves on
        driver.prepare(make_spec(config, accelerator="H100"), [].append)
    assert "gpu-h100x1-80gb, the smallest size that fits, is not offered in nyc1" in str(info.value)
    assert "tor1" in str(info.value)
    driver.teardown()
    assert nothing_left(fake_do) == {}  # refused before anything was made


def test_rate_limits_are_retried_with_backoff(fake_do: FakeDigitalOcean, do_config: DigitalOcean) -> None:
    from dataclasses import replace

    do_config = replace(do_config, api_backoff=0.2)
    fake_do.rate_limit("GET", "/v2/sizes", times=3)
    fake_do.rate_limit("POST", "/v2/droplets", times=2, retry_after=0.2)
    driver = DigitalOceanDriver(do_config)
    started = time.monotonic()
    nodes = run(driver, make_spec(do_config), [])
    finish(driver, nodes)
    assert fake_do.count("GET", "/v2/sizes", 429) == 3 and fake_do.count("GET", "/v2/sizes", 200) == 1
    assert fake_do.count("POST", "/v2/droplets", 429) == 2 and fake_do.count("POST", "/v2/droplets", 202) == 1
    creates = [c.at for c in fake_do.calls if c.method == "POST" and c.path == "/v2/droplets"]
    assert creates[1] - creates[0] >= 0.2 and creates[2] - creates[1] >= 0.2  # Retry-After obeyed
    sizes = [c.at for c in fake_do.calls if c.path == "/v2/sizes"]
    gaps = [b - a for a, b in itertools.pairwise(sizes)]
    assert gaps[2] > gaps[0] + 0.1  # exponential backoff without Retry-After: ~0.2, ~0.4, ~0.8 s
    assert time.monotonic() - started < 10
    assert nothing_left(fake_do) == {}


def test_rate_limits_that_do_not_stop_fail_clearly(fake_do: FakeDigitalOcean, do_config: DigitalOcean) -> None:
    fake_do.rate_limit("GET", "/v2/sizes", times=None)
    driver = DigitalOceanDriver(do_config)
    with pytest.raises(ProvisioningError, match="429"):
        driver.prepare(make_spec(do_config), [].append)
    assert fake_do.count("GET", "/v2/sizes", 429) == do_config.api_retries
    driver.teardown()


def test_a_server_error_on_create_is_not_repeated(fake_do: FakeDigitalOcean, do_config: DigitalOcean) -> None:
    fake_do.fail("POST", "/v2/droplets", 500, {"id": "server_error", "message": "Server Error"})
    driver = DigitalOceanDriver(do_config)
    with pytest.raises(ProvisioningError, match="500"):
        run(driver, make_spec(do_config), [])
    assert fake_do.count("POST", "/v2/droplets") == 1  # a second POST could have made a second droplet
    driver.teardown()
    assert nothing_left(fake_do) == {}


def test_a_lost_create_response_is_swept_by_tag(fake_do: FakeDigitalOcean, do_config: DigitalOcean) -> None:
    """The droplet was made but the answer never came back (a gateway timeout): the POST
    is not repeated (that could make a second one), and teardown finds it by its tag."""
    fake_do.fail("POST", "/v2/droplets", 504, {"id": "gateway_timeout", "message": "Gateway Timeout"}, process=True)
    driver = DigitalOceanDriver(do_config)
    with pytest.raises(ProvisioningError, match="504"):
        run(driver, make_spec(do_config), [])
    assert len(fake_do.droplets) == 1 and fake_do.count("POST", "/v2/droplets") == 1
    (orphan,) = fake_do.droplets.values()
    assert orphan.status != "deleted"  # the driver never heard of it
    driver.teardown()
    assert orphan.status == "deleted"
    assert nothing_left(fake_do) == {}


def test_slow_api_still_works_and_a_stuck_one_fails(fake_do: FakeDigitalOcean, do_config: DigitalOcean) -> None:
    stuck = DigitalOcean(
        region="tor1", api_url=fake_do.url, address_url=f"{fake_do.url}/whoami", api_timeout=0.5, api_retries=2,
        api_backoff=0.01,
    )  # fmt: skip
    check_slow_then_stuck_api(
        fake_do, DigitalOceanDriver, do_config, ("GET", "/v2/sizes"), stuck, "list sizes failed", nothing_left
    )


def test_droplets_that_never_start_time_out_and_are_deleted(fake_do: FakeDigitalOcean, do_token: str) -> None:
    config = DigitalOcean(
        region="tor1", api_url=fake_do.url, address_url=f"{fake_do.url}/whoami", provision_timeout=0.3,
        poll_interval=0.02,
    )  # fmt: skip
    failure = r"not active within provision_timeout=0\.3"
    check_never_started_nodes_are_deleted(fake_do, DigitalOceanDriver, config, failure, nothing_left)


def test_if_available_runs_on_demand(fake_do: FakeDigitalOcean, do_config: DigitalOcean) -> None:
    """The Notice that says so is the pool's, the same for every provider without a spot
    market (tests/unit/test_provider_contract.py)."""
    events: list[Any] = []
    driver = DigitalOceanDriver(do_config)
    nodes = run(driver, make_spec(do_config, spot="if-available"), events)
    finish(driver, nodes)
    assert all(not n.spot for n in nodes)


def test_the_client_address_can_be_given(fake_do: FakeDigitalOcean, do_token: str) -> None:
    config = DigitalOcean(
        region="tor1", api_url=fake_do.url, address_url="http://127.0.0.1:9/unused", client_address="198.51.100.4",
        poll_interval=0.02,
    )  # fmt: skip
    driver = DigitalOceanDriver(config)
    nodes = run(driver, make_spec(config), [])
    (firewall,) = fake_do.firewalls.values()
    assert firewall["inbound_rules"][0]["sources"] == {"addresses": ["198.51.100.4/32"]}
    finish(driver, nodes)


def test_start_reaps_what_earlier_pools_left(fake_do: FakeDigitalOcean, do_config: DigitalOcean) -> None:
    now = time.time()
    past, future = int(now) - 10, int(now) + 3600
    off = fake_do.add_droplet(name="sky-0000000a-0", tags=[COMMON_TAG, pool_tag("sky-0000000a", future)], status="off")
    expired = fake_do.add_droplet(name="sky-0000000b-0", tags=[COMMON_TAG, pool_tag("sky-0000000b", past)])
    alive = fake_do.add_droplet(name="sky-0000000c-0", tags=[COMMON_TAG, pool_tag("sky-0000000c", future)])
    foreign = fake_do.add_droplet(name="my-web-server", tags=["web"], status="off")
    fake_do.tags.add(pool_tag("sky-0000000b", past))
    # the expired pool's firewall and key, which the reaper also removes
    fake_do.firewalls["fw-b"] = {"id": "fw-b", "name": f"skyward-sky-0000000b-{past}", "tags": []}
    fake_do.firewalls["fw-c"] = {"id": "fw-c", "name": f"skyward-sky-0000000c-{future}", "tags": []}
    events: list[Any] = []
    driver = DigitalOceanDriver(do_config)
    nodes = run(driver, make_spec(do_config), events)
    finish(driver, nodes)
    assert fake_do.droplets[off].status == "deleted"
    assert fake_do.droplets[expired].status == "deleted"
    assert fake_do.droplets[alive].status == "active"
    assert fake_do.droplets[foreign].status == "off"  # not skyward's: never touched
    assert set(fake_do.firewalls) == {"fw-c"}
    notices = [e.message for e in events if isinstance(e, Notice)]
    assert any("sky-0000000a-0" in m and "powered off" in m for m in notices)
    assert any("sky-0000000b-0" in m and "expired" in m for m in notices)


def test_the_reaper_on_its_own(fake_do: FakeDigitalOcean, do_config: DigitalOcean) -> None:
    from skyward_digitalocean import reap

    gone = fake_do.add_droplet(name="sky-0000000d-0", tags=[COMMON_TAG, pool_tag("sky-0000000d", 10**9)])
    result = reap(do_config)
    assert [d[0] for d in result.droplets] == [gone] and result.failures == ()
    assert fake_do.droplets[gone].status == "deleted"


def test_a_leftover_the_reaper_cannot_delete_is_named_like_one_it_deleted(
    fake_do: FakeDigitalOcean, do_config: DigitalOcean
) -> None:
    from skyward_digitalocean import reap

    stuck = fake_do.add_droplet(name="sky-0000000e-0", tags=[COMMON_TAG, pool_tag("sky-0000000e", 10**9)])
    fake_do.fail("DELETE", rf"/v2/droplets/{stuck}", 422, {"id": "unprocessable_entity", "message": "locked"})
    result = reap(do_config)
    assert result.droplets == ()
    assert [f.split(": ")[0] for f in result.failures] == [f"droplet sky-0000000e-0 ({stuck})"]  # name, then id
    assert fake_do.droplets[stuck].status != "deleted"  # tried again by the next reaper
