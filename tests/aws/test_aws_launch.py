"""Launch requests against moto: spot strategies, tags, instance settings, failures.

The bootstrap is not run here (each instance's endpoint is a loopback listener, see
listeners.py): these tests look at what the driver asks EC2 for, and at what is left
afterwards.
"""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from skyward import ComputePool
from skyward.errors import ProvisioningError
from skyward.events import Notice
from skyward.spot import Spot
from skyward_aws import AWS
from skyward_aws.infra import TAG_EXPIRES, TAG_NODE, TAG_POOL

from .conftest import CLIENT_CIDR, AwsWorld
from .listeners import Listeners, trivial_user_data
from .specs import make_driver, make_spec

pytestmark = pytest.mark.cloud


def _run(
    aws: AwsWorld, spot: Any, nodes: int = 2, sleeps: list[float] | None = None, **options: Any
) -> tuple[Any, list[Any], Any]:
    listeners = Listeners()
    provider = AWS(client_cidr=CLIENT_CIDR, endpoint_resolver=listeners, bootstrap_timeout=10)
    spec = make_spec(provider, nodes=nodes, accelerator="T4", spot=spot, **options)
    driver = make_driver(provider, sleeps if sleeps is not None else [])
    events: list[Any] = []
    driver.validate(spec)
    driver.prepare(spec, events.append)
    try:
        handles = driver.launch(spec, trivial_user_data, events.append)
    except BaseException:
        driver.terminate([])
        driver.teardown()
        raise
    return driver, handles, (spec, events)


def _close(driver: Any, handles: list[Any]) -> None:
    driver.terminate(handles)
    driver.teardown()


def _tags(instance: dict[str, Any]) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in instance.get("Tags", [])}


def _market(call: Any) -> str:
    return call.params.get("InstanceMarketOptions.MarketType", "on-demand")


def test_never_launches_on_demand_with_imdsv2_and_terminate_on_shutdown(aws: AwsWorld) -> None:
    driver, handles, (spec, _) = _run(aws, Spot.Never)
    try:
        calls = aws.proxy.actions("RunInstances")
        assert [_market(c) for c in calls] == ["on-demand", "on-demand"]
        for call in calls:
            assert call.params["MetadataOptions.HttpTokens"] == "required"
            assert call.params["InstanceInitiatedShutdownBehavior"] == "terminate"
            assert call.params["MinCount"] == call.params["MaxCount"] == "1"
        for instance in aws.instances(spec.pool_id):
            assert instance["MetadataOptions"]["HttpTokens"] == "required"
            assert "InstanceLifecycle" not in instance
            attribute = aws.ec2.describe_instance_attribute(
                InstanceId=instance["InstanceId"], Attribute="instanceInitiatedShutdownBehavior"
            )
            assert attribute["InstanceInitiatedShutdownBehavior"]["Value"] == "terminate"
        assert [h.spot for h in handles] == [False, False]
        assert [h.price_on_demand for h in handles] == [0.526, 0.526]  # the shipped catalog's g4dn.xlarge
    finally:
        _close(driver, handles)
    assert set(aws.states(spec.pool_id).values()) == {"terminated"}


def test_every_resource_is_tagged_with_pool_id_and_expiry(aws: AwsWorld) -> None:
    before = datetime.datetime.now(datetime.UTC)
    driver, handles, (spec, _) = _run(aws, Spot.Never)
    try:
        instances = aws.instances(spec.pool_id)
        assert len(instances) == 2
        expiries = set()
        for instance in instances:
            tags = _tags(instance)
            assert tags[TAG_POOL] == spec.pool_id
            assert tags["Name"] == f"skyward-{spec.pool_id}-node-{tags[TAG_NODE]}"
            expiries.add(tags[TAG_EXPIRES])
        assert sorted(_tags(i)[TAG_NODE] for i in instances) == ["0", "1"]
        (expiry,) = expiries
        moment = datetime.datetime.strptime(expiry, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.UTC)
        # timeout (600) + bootstrap_timeout (10) + the node's TTL margin (60) + the reapers'
        # slack (300), counted as on every provider (skyward.providers.cloud.naming.lifetime)
        assert datetime.timedelta(seconds=969) <= moment - before <= datetime.timedelta(seconds=990)
        (group,) = aws.security_groups(spec.pool_id)
        group_tags = {t["Key"]: t["Value"] for t in group["Tags"]}
        assert group_tags[TAG_POOL] == spec.pool_id and group_tags[TAG_EXPIRES] == expiry
        for call in aws.proxy.actions("RunInstances"):
            kinds = {
                v for k, v in call.params.items() if k.startswith("TagSpecification.") and k.endswith(".ResourceType")
            }
            assert kinds == {"instance", "volume", "network-interface"}
            assert spec.pool_id in call.params.values() and expiry in call.params.values()
    finally:
        _close(driver, handles)


def test_always_retries_spot_with_its_interval_then_succeeds(aws: AwsWorld) -> None:
    zones = 5  # g4dn.xlarge is offered in five of moto's us-east-1 zones
    refused = aws.proxy.refuse_spot(times=zones * 2)  # two full rounds over every zone
    sleeps: list[float] = []
    driver, handles, (spec, _) = _run(aws, Spot.Always(retries=3, interval=7.5), nodes=1, sleeps=sleeps)
    try:
        assert refused == [zones * 2]
        calls = aws.proxy.actions("RunInstances")
        assert [_market(c) for c in calls] == ["spot"] * (zones * 2 + 1)
        assert [c.refused for c in calls][-1] is None
        assert sleeps.count(7.5) == 2, sleeps  # waited between rounds, not between zones
        tried = [c.params["NetworkInterface.1.SubnetId"] for c in calls[:zones]]
        assert len(set(tried)) == zones  # every zone before waiting
        (instance,) = aws.instances(spec.pool_id)
        assert instance["InstanceLifecycle"] == "spot"
        assert handles[0].spot is True
        assert handles[0].price_spot is not None
    finally:
        _close(driver, handles)


def test_always_gives_up_after_its_retries_and_leaves_nothing(aws: AwsWorld) -> None:
    aws.proxy.refuse_spot(times=None)
    sleeps: list[float] = []
    listeners = Listeners()
    provider = AWS(client_cidr=CLIENT_CIDR, endpoint_resolver=listeners)
    spec = make_spec(provider, nodes=2, accelerator="T4", spot=Spot.Always(retries=2, interval=1.0))
    driver = make_driver(provider, sleeps)
    driver.prepare(spec, lambda e: None)
    with pytest.raises(ProvisioningError, match=r"no spot capacity after 3 rounds over 5 zones"):
        driver.launch(spec, trivial_user_data, lambda e: None)
    driver.terminate([])
    driver.teardown()
    assert sleeps == [1.0, 1.0] * 2  # the nodes launch in parallel: each waits its own two rounds
    assert aws.instances(spec.pool_id) == []
    assert aws.security_groups(spec.pool_id) == []


def test_if_available_falls_back_to_on_demand_and_says_so(aws: AwsWorld) -> None:
    aws.proxy.refuse_spot(times=None)
    driver, handles, (spec, events) = _run(aws, Spot.IfAvailable(), nodes=1)
    try:
        markets = [_market(c) for c in aws.proxy.actions("RunInstances")]
        assert markets == ["spot"] * 5 + ["on-demand"]
        (instance,) = aws.instances(spec.pool_id)
        assert "InstanceLifecycle" not in instance
        assert handles[0].spot is False
        notices = [e.message for e in events if isinstance(e, Notice)]
        assert any("no spot capacity" in m and "on-demand" in m for m in notices)
    finally:
        _close(driver, handles)


def test_if_available_uses_spot_when_there_is_capacity(aws: AwsWorld) -> None:
    driver, handles, (spec, _) = _run(aws, "if-available", nodes=1)
    try:
        assert [_market(c) for c in aws.proxy.actions("RunInstances")] == ["spot"]
        assert aws.instances(spec.pool_id)[0]["InstanceLifecycle"] == "spot"
    finally:
        _close(driver, handles)


def test_percent_mixes_spot_and_on_demand_head_first(aws: AwsWorld) -> None:
    driver, handles, (spec, _) = _run(aws, Spot.Percent(0.5), nodes=2)
    try:
        calls = sorted(aws.proxy.actions("RunInstances"), key=_market)  # the nodes launch in parallel
        assert [_market(c) for c in calls] == ["on-demand", "spot"]
        by_node = {_tags(i)[TAG_NODE]: i for i in aws.instances(spec.pool_id)}
        assert "InstanceLifecycle" not in by_node["0"]
        assert by_node["1"]["InstanceLifecycle"] == "spot"
        assert [h.spot for h in handles] == [False, True]
        assert calls[1].params["InstanceMarketOptions.SpotOptions.InstanceInterruptionBehavior"] == "terminate"
    finally:
        _close(driver, handles)


def test_default_strategy_is_always_spot(aws: AwsWorld) -> None:
    driver, handles, _ = _run(aws, None, nodes=1)
    try:
        assert [_market(c) for c in aws.proxy.actions("RunInstances")] == ["spot"]
    finally:
        _close(driver, handles)


def test_a_failed_second_launch_terminates_the_first_and_removes_the_group(aws: AwsWorld) -> None:
    aws.proxy.fail_nth("RunInstances", 2, "InvalidParameterCombination", "injected failure", status=400)
    provider = AWS(client_cidr=CLIENT_CIDR, endpoint_resolver=Listeners())
    pool = ComputePool(provider=provider, nodes=2, accelerator="T4", spot="never", display="quiet")
    # the nodes launch in parallel: the second call to arrive is either node's
    with pytest.raises(ProvisioningError, match=r"node [01]: EC2 refused to launch it: InvalidParameterCombination"):
        pool.open()
    # by the time the error reached the caller, everything the pool made was gone
    states = aws.states(pool.spec.pool_id)
    assert len(states) == 1 and set(states.values()) == {"terminated"}
    assert aws.security_groups(pool.spec.pool_id) == []
    assert [c.refused for c in aws.proxy.actions("RunInstances")] == [None, "InvalidParameterCombination"]


def test_a_bootstrap_that_never_finishes_times_out_and_cleans_up(aws: AwsWorld) -> None:
    provider = AWS(client_cidr=CLIENT_CIDR, endpoint_resolver=Listeners(listen=False), bootstrap_timeout=1.5)
    pool = ComputePool(provider=provider, nodes=2, accelerator="T4", spot="never", display="quiet")
    with pytest.raises(ProvisioningError) as raised:
        pool.open()
    message = str(raised.value)
    assert "did not start its agent within bootstrap_timeout=1.5 s" in message
    assert "get-console-output --instance-id i-" in message
    states = aws.states(pool.spec.pool_id)
    assert len(states) == 2 and set(states.values()) == {"terminated"}
    assert aws.security_groups(pool.spec.pool_id) == []


def test_a_failed_terminate_is_looked_at_again_and_retried(aws: AwsWorld) -> None:
    # A node that shuts itself down while the pool terminates it can make one call fail.
    aws.proxy.fail_nth("TerminateInstances", 1, "InvalidNetworkInterfaceID.NotFound", "injected race", status=400)
    sleeps: list[float] = []
    driver, handles, (spec, _) = _run(aws, "never", sleeps=sleeps)
    launched = len(sleeps)
    _close(driver, handles)
    assert [c.refused for c in aws.proxy.actions("TerminateInstances")] == ["InvalidNetworkInterfaceID.NotFound", None]
    assert sleeps[launched:] == [0.5]
    states = aws.states(spec.pool_id)
    assert len(states) == 2 and set(states.values()) == {"terminated"}


def test_a_terminate_that_keeps_failing_says_how_to_terminate_by_hand(aws: AwsWorld) -> None:
    for n in (1, 2, 3):
        aws.proxy.fail_nth("TerminateInstances", n, "UnauthorizedOperation", "not allowed", status=403)
    driver, handles, (spec, _) = _run(aws, "never")
    with pytest.raises(
        ProvisioningError, match="Terminate them yourself: aws ec2 terminate-instances --region us-east-1"
    ):
        driver.terminate(handles)
    assert len(aws.proxy.actions("TerminateInstances")) == 3
    assert set(aws.states(spec.pool_id).values()) == {"running"}
    aws.proxy.rules.clear()
    _close(driver, handles)
    assert set(aws.states(spec.pool_id).values()) == {"terminated"}
