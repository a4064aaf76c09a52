"""How each provider classifies what its API refused: a reason another candidate may not
share (capacity, quota: the pool moves on) or not (credentials, bad input: it stops)."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError

from skyward.errors import CapacityError, ConfigurationError, ProvisioningError, QuotaError, UnavailableError
from skyward.instances import InstanceType
from skyward.spot import Market, NodePlan
from skyward_aws.launch import launch_node
from skyward_aws.session import explain
from skyward_digitalocean.api import DigitalOceanAPIError
from skyward_digitalocean.driver import explain_create_error
from skyward_digitalocean.offers import DropletSize


def _ec2_error(code: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": "refused"}}, "RunInstances")


@pytest.mark.parametrize(("code", "kind"), [("VcpuLimitExceeded", QuotaError), ("InstanceLimitExceeded", QuotaError)])
def test_an_ec2_limit_is_a_quota_error(code: str, kind: type[UnavailableError]) -> None:
    def run(market: Market, zone: str) -> dict[str, str]:
        raise _ec2_error(code)

    with pytest.raises(kind, match=code):
        launch_node(NodePlan(0, Market.ON_DEMAND), ["z1", "z2"], run, notice=print, sleep=lambda _: None)
    assert isinstance(explain(_ec2_error(code), "launching"), kind)


@pytest.mark.parametrize("market", [Market.ON_DEMAND, Market.SPOT])
def test_no_ec2_capacity_in_any_zone_is_a_capacity_error(market: Market) -> None:
    tried: list[str] = []

    def run(market: Market, zone: str) -> dict[str, str]:
        tried.append(zone)
        raise _ec2_error("InsufficientInstanceCapacity")

    with pytest.raises(CapacityError, match="capacity"):
        launch_node(NodePlan(0, market), ["z1", "z2", "z3"], run, notice=print, sleep=lambda _: None)
    assert sorted(tried) == ["z1", "z2", "z3"]  # every zone of the region first


@pytest.mark.parametrize("code", ["AuthFailure", "UnauthorizedOperation", "InvalidParameterValue"])
def test_ec2_refusing_the_credentials_or_the_request_does_not_move_on(code: str) -> None:
    error = explain(_ec2_error(code), "launching")
    assert isinstance(error, ConfigurationError | ProvisioningError) and not isinstance(error, UnavailableError)


def _size() -> DropletSize:
    instance = InstanceType(name="gpu-h100x1-80gb", vcpus=20, memory=240 * 2**30, region="tor1", on_demand_price=6.7)
    return DropletSize(instance=instance, vendor="nvidia", regions=("tor1",))


@pytest.mark.parametrize(
    ("status", "message", "kind"),
    [
        (422, "You have reached the droplet limit of your account", QuotaError),
        (422, "The size you selected is temporarily unavailable because of GPU capacity", CapacityError),
        (503, "Out of stock", CapacityError),
    ],
)
def test_digitalocean_says_quota_and_capacity_apart(status: int, message: str, kind: type[UnavailableError]) -> None:
    error = DigitalOceanAPIError("create droplet", status, "unprocessable_entity", message, {})
    assert isinstance(explain_create_error(error, _size(), "tor1", 0, 1), kind)
    assert isinstance(explain_create_error(error, _size(), "tor1", 2, 3), kind)  # a partial allocation too


def test_a_digitalocean_refusal_of_the_token_does_not_move_on() -> None:
    error = DigitalOceanAPIError("create droplet", 401, "unauthorized", "Unable to authenticate you", {})
    assert not isinstance(explain_create_error(error, _size(), "tor1", 0, 1), UnavailableError)
