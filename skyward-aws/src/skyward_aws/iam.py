"""The pool's IAM role and instance profile, made only when nodes need AWS access.

S3 volumes need read (or write) access to their bucket and prefix; ``use_ssm`` needs the
SSM agent's managed policy. Both reach the node as an instance profile, whose temporary
credentials the node fetches from the metadata service: the client's own credentials
never leave the client.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

SSM_POLICY = "AmazonSSMManagedInstanceCore"

TRUST_POLICY = {
    "Version": "2012-10-17",
    "Statement": [{"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}],
}


@dataclass(frozen=True, slots=True)
class RolePlan:
    """What the pool's role grants (a pure value, decided before anything is made)."""

    statements: tuple[dict[str, Any], ...] = ()
    managed_policies: tuple[str, ...] = ()

    @property
    def needed(self) -> bool:
        return bool(self.statements or self.managed_policies)

    def inline_policy(self) -> str:
        return json.dumps({"Version": "2012-10-17", "Statement": list(self.statements)}, sort_keys=True)


def plan_role(volume_statements: Sequence[dict[str, Any]], use_ssm: bool, partition: str) -> RolePlan:
    managed = (f"arn:{partition}:iam::aws:policy/{SSM_POLICY}",) if use_ssm else ()
    return RolePlan(statements=tuple(volume_statements), managed_policies=managed)


@dataclass
class PoolRole:
    """An instance profile made for one pool, and how to remove it."""

    name: str
    arn: str
    plan: RolePlan

    @staticmethod
    def create(iam: Any, name: str, plan: RolePlan, tags: list[dict[str, str]]) -> PoolRole:
        iam.create_role(
            RoleName=name,
            AssumeRolePolicyDocument=json.dumps(TRUST_POLICY),
            Description="skyward pool nodes (removed with the pool)",
            Tags=tags,
        )
        role = PoolRole(name=name, arn="", plan=plan)
        try:
            if plan.statements:
                iam.put_role_policy(RoleName=name, PolicyName="skyward-volumes", PolicyDocument=plan.inline_policy())
            for policy in plan.managed_policies:
                iam.attach_role_policy(RoleName=name, PolicyArn=policy)
            profile = iam.create_instance_profile(InstanceProfileName=name, Tags=tags)["InstanceProfile"]
            role.arn = str(profile["Arn"])
            iam.add_role_to_instance_profile(InstanceProfileName=name, RoleName=name)
        except BaseException:
            role.delete(iam)
            raise
        return role

    def delete(self, iam: Any) -> None:
        """Remove the profile, the role and its policies; what is already gone is fine."""

        def quietly(call: Any, **kwargs: Any) -> None:
            try:
                call(**kwargs)
            except ClientError as error:
                if error.response["Error"]["Code"] != "NoSuchEntity":
                    raise

        quietly(iam.remove_role_from_instance_profile, InstanceProfileName=self.name, RoleName=self.name)
        quietly(iam.delete_instance_profile, InstanceProfileName=self.name)
        if self.plan.statements:
            quietly(iam.delete_role_policy, RoleName=self.name, PolicyName="skyward-volumes")
        for policy in self.plan.managed_policies:
            quietly(iam.detach_role_policy, RoleName=self.name, PolicyArn=policy)
        quietly(iam.delete_role, RoleName=self.name)
