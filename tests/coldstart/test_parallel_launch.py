"""The API phases of a cloud start do not grow with the number of nodes: every node's
launch call is in flight at once (bench/cloudstart.py measures the whole start)."""

from __future__ import annotations

import pytest
from aws.conftest import CLIENT_ADDRESS, AwsWorld
from aws.listeners import Listeners, trivial_user_data
from aws.specs import make_driver, make_spec

from skyward_aws import AWS

pytestmark = pytest.mark.cloud


def test_aws_sends_every_nodes_launch_call_at_once(aws: AwsWorld) -> None:
    aws.proxy.delays["RunInstances"] = 0.5  # a slow API: calls one after another never overlap
    listeners = Listeners()
    provider = AWS(client_address=CLIENT_ADDRESS, endpoint_resolver=listeners, bootstrap_timeout=10)
    spec = make_spec(provider, nodes=4, accelerator="T4", spot="never")
    driver = make_driver(provider, [])
    driver.prepare(spec, lambda e: None)
    handles = []
    try:
        handles = driver.launch(spec, trivial_user_data, lambda e: None)
    finally:
        driver.terminate(handles)
        driver.teardown()
        listeners.close()
    assert len(handles) == 4
    assert len(aws.proxy.actions("RunInstances")) == 4
    assert aws.proxy.most_in_flight["RunInstances"] == 4  # one after another, it was 1


def test_sixteen_aws_nodes_are_polled_with_one_describe_instances_call(aws: AwsWorld) -> None:
    listeners = Listeners()
    provider = AWS(client_address=CLIENT_ADDRESS, endpoint_resolver=listeners, bootstrap_timeout=10)
    spec = make_spec(provider, nodes=16, accelerator="T4", spot="never")
    sleeps: list[float] = []
    driver = make_driver(provider, sleeps)
    driver.prepare(spec, lambda e: None)
    before = len(aws.proxy.actions("DescribeInstances"))
    handles = []
    try:
        handles = driver.launch(spec, trivial_user_data, lambda e: None)
        polls = len(aws.proxy.actions("DescribeInstances")) - before
    finally:
        driver.terminate(handles)
        driver.teardown()
        listeners.close()
    assert len(handles) == 16 and len(aws.proxy.actions("RunInstances")) == 16
    assert polls == 1 and sleeps == []  # moto's instances run at once: one look covers all sixteen
