"""A node that fails to start says what it printed: the ConsoleOutput ability, on moto.

moto answers ``GetConsoleOutput`` with a fixed kernel log (its ``SAMPLE_CONSOLE_OUTPUT``)
for any instance it knows, terminated ones included; the recording proxy shows what the
driver asked for and can refuse a call, as EC2 refuses ``Latest`` on a Xen instance or
a console read to credentials without ``ec2:GetConsoleOutput``.
"""

from __future__ import annotations

from typing import Any

import pytest
from moto.ec2.responses.general import SAMPLE_CONSOLE_OUTPUT

from skyward.errors import ProvisioningError
from skyward.providers import ConsoleOutput
from skyward.spot import Spot
from skyward_aws import AWS

from .conftest import CLIENT_ADDRESS, AwsWorld
from .faults import Params
from .listeners import Listeners, trivial_user_data
from .specs import make_driver, make_spec

pytestmark = pytest.mark.cloud


def _launch(aws: AwsWorld) -> tuple[Any, Any, list[Any]]:
    """Plan and prepare one on-demand node's pool; the caller launches it."""
    provider = AWS(client_address=CLIENT_ADDRESS, endpoint_resolver=Listeners(), bootstrap_timeout=10)
    spec = make_spec(provider, nodes=1, accelerator="T4", spot=Spot.Never)
    driver = make_driver(provider, [])
    events: list[Any] = []
    driver.validate(spec)
    driver.prepare(spec, events.append)
    return driver, spec, events


def _terminate_at_the_first_look(aws: AwsWorld) -> list[str]:
    """Terminate the launch's instances (in moto, not through the proxy) just before the
    driver first describes them by id: a node gone while it starts, as one that powers
    off (its shutdown behaviour is terminate) leaves. Returns the ids it terminated."""
    terminated: list[str] = []

    def rule(action: str, params: Params, _before: int) -> tuple[int, str, str] | None:
        if action == "DescribeInstances" and params.get("Filter.1.Name") == "instance-id" and not terminated:
            ids = [value for key, value in params.items() if key.startswith("Filter.1.Value.")]
            aws.ec2.terminate_instances(InstanceIds=ids)
            terminated.extend(ids)
        return None  # the call itself goes through

    aws.proxy.rules.append(rule)
    return terminated


def test_the_driver_reads_an_instances_console_through_get_console_output(aws: AwsWorld) -> None:
    driver, spec, events = _launch(aws)
    handles = driver.launch(spec, trivial_user_data, events.append)
    try:
        assert isinstance(driver, ConsoleOutput)
        output = driver.console_output(handles[0].instance_id)
        assert output == SAMPLE_CONSOLE_OUTPUT  # decoded text, not the base64 EC2 sends
        (call,) = aws.proxy.actions("GetConsoleOutput")
        assert call.params["InstanceId"] == handles[0].instance_id
        assert call.params["Latest"] == "true"
    finally:
        driver.terminate(handles)
        driver.teardown()


def test_a_node_gone_while_starting_carries_its_console_tail_in_the_error(aws: AwsWorld) -> None:
    driver, spec, events = _launch(aws)
    terminated = _terminate_at_the_first_look(aws)
    try:
        with pytest.raises(ProvisioningError) as raised:
            driver.launch(spec, trivial_user_data, events.append)
    finally:
        driver.terminate([])
        driver.teardown()
    (instance_id,) = terminated
    message = str(raised.value)
    assert f"({instance_id}) disappeared while it was starting" in message
    _, tail = message.split(f"\n--- the last console output of {instance_id} ---\n")
    assert tail == SAMPLE_CONSOLE_OUTPUT.strip()  # its 11 lines: under the tail's 25, all of them
    assert [c.params["InstanceId"] for c in aws.proxy.actions("GetConsoleOutput")] == [instance_id]
    assert aws.security_groups(spec.pool_id) == []  # the failed start still cleaned up


def test_an_instance_that_refuses_latest_is_asked_for_its_buffered_console(aws: AwsWorld) -> None:
    aws.proxy.fail_nth("GetConsoleOutput", 1, "UnsupportedOperation", "Latest is for Nitro instances", status=400)
    driver, spec, events = _launch(aws)
    handles = driver.launch(spec, trivial_user_data, events.append)
    try:
        output = driver.console_output(handles[0].instance_id)
    finally:
        driver.terminate(handles)
        driver.teardown()
    assert output == SAMPLE_CONSOLE_OUTPUT
    first, second = aws.proxy.actions("GetConsoleOutput")
    assert (first.refused, first.params["Latest"]) == ("UnsupportedOperation", "true")
    assert second.refused is None and "Latest" not in second.params


def test_a_console_the_credentials_may_not_read_does_not_hide_why_the_node_failed(aws: AwsWorld) -> None:
    aws.proxy.rules.append(
        lambda action, _p, _b: (
            (403, "UnauthorizedOperation", "no ec2:GetConsoleOutput") if action == "GetConsoleOutput" else None
        )
    )
    driver, spec, events = _launch(aws)
    terminated = _terminate_at_the_first_look(aws)
    try:
        with pytest.raises(ProvisioningError) as raised:
            driver.launch(spec, trivial_user_data, events.append)
    finally:
        driver.terminate([])
        driver.teardown()
    (instance_id,) = terminated
    message = str(raised.value)
    assert message.startswith(f"instance skyward-{spec.pool_id}-node-0 ({instance_id}) disappeared while")
    assert f"(the console output of {instance_id} could not be read: while reading the console output" in message
    assert "these credentials may not do this (UnauthorizedOperation" in message
    assert len(aws.proxy.actions("GetConsoleOutput")) == 1  # a refusal of the credentials is not asked twice
