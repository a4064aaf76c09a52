"""Failover on moto: the first candidate's machine is refused by EC2 (capacity, quota) in
every zone, and the pool moves on to the next candidate, with nothing of the first left."""

from __future__ import annotations

import pytest
from lifecycle_support import lifecycle_problems

import skyward as sky
from skyward import events as ev

from .conftest import CLIENT_CIDR, REGION, AwsWorld, Emulation
from .faults import Params

pytestmark = pytest.mark.cloud


@sky.compute
def node_count() -> int:
    return sky.instance_info().total_nodes


@pytest.mark.parametrize(
    ("code", "reason"), [("InsufficientInstanceCapacity", "capacity"), ("VcpuLimitExceeded", "quota")]
)
def test_a_machine_ec2_refuses_hands_the_pool_to_the_next_candidate(
    aws: AwsWorld, emulated: Emulation, code: str, reason: str
) -> None:
    def refuse_gpus(action: str, params: Params, _before: int) -> tuple[int, str, str] | None:
        if action == "RunInstances" and params.get("InstanceType") == "g4dn.xlarge":
            return 500, code, "refused by the test"
        return None

    aws.proxy.rules.append(refuse_gpus)
    provider = sky.AWS(client_cidr=CLIENT_CIDR, bootstrap_timeout=120, endpoint_resolver=emulated.endpoints)
    seen: list[object] = []
    candidates = [sky.Spec(provider=provider, accelerator="T4"), sky.Spec(provider=provider, machine="m5.large")]
    with sky.ComputePool(provider=candidates, nodes=2, spot="never", display="quiet", on_event=seen.append) as pool:
        pool_id = pool.spec.pool_id
        assert [n.instance_type for n in pool.nodes] == ["m5.large", "m5.large"]
        assert node_count() @ pool == (2, 2)
    (why,) = [e for e in seen if isinstance(e, ev.CandidateFailed)]
    assert (why.candidate, why.provider, why.region, why.reason) == (0, "aws", REGION, reason)
    assert code in why.message
    final = seen[-1]
    assert isinstance(final, ev.CostFinal) and final.provider == "aws" and final.region.startswith(REGION)
    assert lifecycle_problems(seen, nodes=2, priced=True) == []
    # the first candidate's security group was deleted before the second made its own
    calls = [c.action for c in aws.proxy.calls]
    created = [i for i, a in enumerate(calls) if a == "CreateSecurityGroup"]
    deleted = [i for i, a in enumerate(calls) if a == "DeleteSecurityGroup"]
    assert len(created) == 2 and deleted and deleted[0] < created[1]
    states = aws.states(pool_id)
    assert len(states) == 2 and set(states.values()) == {"terminated"}
    assert aws.security_groups(pool_id) == []
    emulated.moto.wait_stopped(list(states))
