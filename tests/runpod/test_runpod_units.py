"""The pure parts of skyward-runpod: credentials, config checks, GPU types as instance
types (catalog names, secure/community prices), port maps and states."""

from __future__ import annotations

import pytest
from fakes.runpod import GPU_TYPES

from skyward.errors import ConfigurationError
from skyward.instances import select_instance
from skyward.providers.cloud.template import InstanceState
from skyward.units import GIB
from skyward_runpod import RunPod
from skyward_runpod.config import api_key
from skyward_runpod.driver import ports_of, state_of
from skyward_runpod.offers import pod_types


def test_a_missing_key_says_which_variable_and_where_to_get_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RUNPOD_API_KEY", raising=False)
    with pytest.raises(ConfigurationError, match=r"RUNPOD_API_KEY.*API Keys"):
        api_key()


@pytest.mark.parametrize(
    ("field", "value"), [("cloud", "all"), ("disk_gb", 1), ("bid_margin", 11), ("image", ""), ("api_url", "x")]
)
def test_bad_settings_are_refused_naming_the_field(field: str, value: object) -> None:
    with pytest.raises(ConfigurationError, match=rf"RunPod\({field}="):
        RunPod(**{field: value})  # type: ignore[arg-type]


def test_gpu_types_become_instance_types_with_their_cloud_s_prices_and_catalog_names() -> None:
    secure = {t.instance.name: t for t in pod_types(GPU_TYPES, "secure", 8, 30 * GIB, 0.0)}
    community = {t.instance.name: t for t in pod_types(GPU_TYPES, "community", 8, 30 * GIB, 0.0)}
    assert secure["1x H100 SXM"].instance.accelerator == "H100-SXM"
    assert secure["2x H100 SXM"].instance.on_demand_price == pytest.approx(5.98)
    assert community["1x H100 SXM"].instance.on_demand_price == pytest.approx(2.69)
    assert secure["1x A100 SXM"].instance.accelerator == "A100-80GB"
    assert secure["1x RTX A6000"].instance.accelerator == "A6000"
    assert secure["1x RTX 4090"].instance.accelerator == "RTX4090"  # accelerator="RTX4090" or machine="1x RTX 4090"
    assert secure["1x RTX 4090"].instance.spot_price == pytest.approx(0.29)


def test_the_smallest_fitting_type_is_chosen_as_on_every_provider() -> None:
    types = [t.instance for t in pod_types(GPU_TYPES, "secure", 8, 30 * GIB, 0.0)]
    assert select_instance(types, accelerator="H100:2").name == "2x H100 PCIe"  # cheaper than 2x SXM
    assert select_instance(types, accelerator="A100").name == "1x A100 PCIe"
    assert select_instance(types, machine="1x RTX 4090").on_demand_price == pytest.approx(0.69)


def test_a_type_a_cloud_does_not_sell_is_left_out() -> None:
    only_community = [{**GPU_TYPES[0], "secureCloud": False}]
    assert pod_types(only_community, "secure", 8, 30 * GIB, 0.0) == []
    assert pod_types(only_community, "community", 8, 30 * GIB, 0.0)


def test_public_ports_and_states_are_read_from_a_pod() -> None:
    pod = {"desiredStatus": "RUNNING", "runtime": {"ports": [
        {"ip": "203.0.113.9", "isIpPublic": True, "privatePort": 16789, "publicPort": 40321, "type": "tcp"},
        {"ip": "10.0.0.2", "isIpPublic": False, "privatePort": 16790, "publicPort": 16790, "type": "tcp"},
    ]}}  # fmt: skip
    assert ports_of(pod) == ("203.0.113.9", {16789: 40321})
    assert state_of(pod, True) is InstanceState.RUNNING
    assert state_of({"desiredStatus": "RUNNING", "runtime": None}, False) is InstanceState.PENDING
    assert state_of({"desiredStatus": "EXITED"}, True) is InstanceState.STOPPED  # preempted or exited: still bills
    assert state_of({"desiredStatus": "TERMINATED"}, True) is InstanceState.GONE
