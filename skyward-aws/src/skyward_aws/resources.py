"""What Skyward pools left on AWS: finding it by its tags, deleting it, and the sweep
every pool start runs.

Every resource a pool makes carries ``skyward:pool-id`` and ``skyward:expires-at`` (see
``infra.pool_tags``). A node ends itself when its TTL passes (``shutdown -h``, and EC2
terminates it: ``InstanceInitiatedShutdownBehavior=terminate``), but the security group,
the instance profile and the role can only be removed by someone holding credentials. A
client that dies leaves them forever unless something reads the expiry tag: this module
does, for ``skyward ls`` / ``skyward down`` and at the start of every AWS pool.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from skyward.providers import (
    BAKED_IMAGE,
    INSTANCE,
    INSTANCE_PROFILE,
    KEY_PAIR,
    ROLE,
    SECURITY_GROUP,
    VOLUME,
    Notice,
    Removal,
    Resource,
    baked_resource,
)
from skyward.providers.cloud.reaping import doomed_resources
from skyward_aws.baking import SNAPSHOT_PRICE_GB_MONTH, delete_baked, list_baked
from skyward_aws.infra import TAG_EXPIRES, TAG_POOL
from skyward_aws.pricing import PriceCatalog, shipped_catalog
from skyward_aws.session import Clients

PROVIDER = "aws"
GLOBAL = "global"  # IAM has no region
NAME_PREFIX = "skyward-"  # roles and instance profiles are named skyward-<pool id>
GONE_STATES = frozenset({"shutting-down", "terminated"})
IDLE_STATES = frozenset({"stopping", "stopped"})  # its EBS volume still bills; Skyward never starts it again
WAIT_FOR_TERMINATION = 300.0  # seconds `skyward down` waits for instances to let go of their group


def parse_expiry(value: object) -> float | None:
    """The ``skyward:expires-at`` tag (``2026-01-02T03:04:05Z``) as a Unix time."""
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.UTC)
    except ValueError:
        return None
    return moment.timestamp()


def _tags(items: object) -> dict[str, str]:
    if not isinstance(items, list):
        return {}
    return {str(t.get("Key")): str(t.get("Value", "")) for t in items if isinstance(t, Mapping)}


def _stamp(value: object) -> float | None:
    return value.timestamp() if isinstance(value, datetime.datetime) else None


def _resource(
    kind: str, ident: str, tags: Mapping[str, str], *, region: str, state: str = "present", **more: Any
) -> Resource | None:
    pool = tags.get(TAG_POOL, "")
    if not pool:
        return None
    return Resource(
        provider=PROVIDER,
        region=region,
        pool_id=pool,
        kind=kind,
        id=ident,
        state=state,
        created=more.get("created"),
        expires_at=parse_expiry(tags.get(TAG_EXPIRES)),
        hourly_price=more.get("price"),
        name=str(more.get("name") or ""),
        idle=state in IDLE_STATES,
    )


_SKYWARD = [{"Name": "tag-key", "Values": [TAG_POOL]}]
_LIVE_INSTANCES = [
    *_SKYWARD,
    {"Name": "instance-state-name", "Values": ["pending", "running", "stopping", "stopped"]},
]
"""EC2 lists a terminated instance for about an hour after. Every pool start's sweep
reads this listing, so without the state filter it parsed every instance of the last
hour's pools: on the cloud-start benchmark's moto, some 150 terminated instances made a
270 KB answer, 0.15 to 0.26 s of moto's work alone on every start, before the client
parsed it (bench/README.md, cold start)."""


def list_instances(ec2: Any, region: str, prices: PriceCatalog) -> list[Resource]:
    """Skyward's instances that are not (being) terminated, with their on-demand price
    (an upper bound for a spot instance, whose price EC2 does not report per instance)."""
    found: list[Resource] = []
    for page in ec2.get_paginator("describe_instances").paginate(Filters=_LIVE_INSTANCES):
        for reservation in page["Reservations"]:
            for instance in reservation["Instances"]:
                state = str(instance.get("State", {}).get("Name", "unknown"))
                if state in GONE_STATES:  # gone between the filter and the answer
                    continue
                tags = _tags(instance.get("Tags"))
                price, _ = prices.estimate(region, str(instance.get("InstanceType", "")))
                item = _resource(
                    INSTANCE,
                    str(instance["InstanceId"]),
                    tags,
                    region=region,
                    state=state,
                    created=_stamp(instance.get("LaunchTime")),
                    price=price,
                    name=tags.get("Name", ""),
                )
                if item is not None:
                    found.append(item)
    return found


def list_security_groups(ec2: Any, region: str) -> list[Resource]:
    found: list[Resource] = []
    for page in ec2.get_paginator("describe_security_groups").paginate(Filters=_SKYWARD):
        for group in page["SecurityGroups"]:
            item = _resource(
                SECURITY_GROUP,
                str(group["GroupId"]),
                _tags(group.get("Tags")),
                region=region,
                name=group.get("GroupName", ""),
            )
            if item is not None:
                found.append(item)
    return found


def list_key_pairs(ec2: Any, region: str) -> list[Resource]:
    found: list[Resource] = []
    for pair in ec2.describe_key_pairs(Filters=_SKYWARD).get("KeyPairs", []):
        item = _resource(
            KEY_PAIR,
            str(pair.get("KeyName", "")),
            _tags(pair.get("Tags")),
            region=region,
            created=_stamp(pair.get("CreateTime")),
        )
        if item is not None:
            found.append(item)
    return found


def list_loose_volumes(ec2: Any, region: str) -> list[Resource]:
    """Skyward-tagged EBS volumes attached to nothing: a node's root volume goes with its
    instance (DeleteOnTermination), so one that is ``available`` was left and bills."""
    found: list[Resource] = []
    filters = [*_SKYWARD, {"Name": "status", "Values": ["available"]}]
    for page in ec2.get_paginator("describe_volumes").paginate(Filters=filters):
        for volume in page["Volumes"]:
            item = _resource(
                VOLUME,
                str(volume["VolumeId"]),
                _tags(volume.get("Tags")),
                region=region,
                state=f"{volume.get('State', 'available')}, {volume.get('Size', '?')} GiB",
                created=_stamp(volume.get("CreateTime")),
            )
            if item is not None:
                found.append(item)
    return found


def _paged(iam: Any, operation: str, key: str) -> Iterator[dict[str, Any]]:
    for page in iam.get_paginator(operation).paginate():
        yield from page[key]


def list_roles(iam: Any) -> list[Resource]:
    """Roles named ``skyward-...`` that carry a pool tag (IAM's listing has no tags: one
    ``ListRoleTags`` per candidate)."""
    found: list[Resource] = []
    for role in _paged(iam, "list_roles", "Roles"):
        name = str(role["RoleName"])
        if not name.startswith(NAME_PREFIX):
            continue
        tags = _tags(iam.list_role_tags(RoleName=name).get("Tags"))
        item = _resource(ROLE, name, tags, region=GLOBAL, created=_stamp(role.get("CreateDate")))
        if item is not None:
            found.append(item)
    return found


def list_instance_profiles(iam: Any) -> list[Resource]:
    found: list[Resource] = []
    for profile in _paged(iam, "list_instance_profiles", "InstanceProfiles"):
        name = str(profile["InstanceProfileName"])
        if not name.startswith(NAME_PREFIX):
            continue
        raw = profile.get("Tags")
        if raw is None:  # IAM leaves tags out of listings; GetInstanceProfile has them
            raw = iam.get_instance_profile(InstanceProfileName=name)["InstanceProfile"].get("Tags")
        item = _resource(INSTANCE_PROFILE, name, _tags(raw), region=GLOBAL, created=_stamp(profile.get("CreateDate")))
        if item is not None:
            found.append(item)
    return found


IAM_KINDS = frozenset({INSTANCE_PROFILE, ROLE})


def list_baked_images(ec2: Any, region: str) -> list[Resource]:
    """Baked AMIs (``Image(bake=True)``), under the pool id ``baked``: no expiry, priced
    by their snapshot's size (skyward_aws.baking)."""
    return [baked_resource(PROVIDER, region, image, SNAPSHOT_PRICE_GB_MONTH) for image in list_baked(ec2)]


def list_ec2(clients: Clients, region: str, prices: PriceCatalog | None = None) -> list[Resource]:
    """What Skyward made in ``region``'s EC2, instances first, baked AMIs last."""
    return [
        *list_instances(clients.ec2, region, prices or shipped_catalog()),
        *list_security_groups(clients.ec2, region),
        *list_key_pairs(clients.ec2, region),
        *list_loose_volumes(clients.ec2, region),
        *list_baked_images(clients.ec2, region),
    ]


def list_iam(clients: Clients) -> list[Resource]:
    return [*list_instance_profiles(clients.iam), *list_roles(clients.iam)]


def list_all(clients: Clients, region: str, prices: PriceCatalog | None = None) -> list[Resource]:
    """Everything Skyward made in ``region`` and in IAM, instances first."""
    return [*list_ec2(clients, region, prices), *list_iam(clients)]


# -- deleting ------------------------------------------------------------------------------


def _code(error: BaseException) -> str:
    return str(error.response["Error"]["Code"]) if isinstance(error, ClientError) else ""


def _quietly(call: Callable[..., Any], **kwargs: Any) -> None:
    """An IAM call whose target being gone already is fine."""
    try:
        call(**kwargs)
    except Exception as error:
        if _code(error) != "NoSuchEntity":
            raise


def delete_role(iam: Any, name: str) -> None:
    """Detach and delete everything that holds the role, then the role."""
    for profile in iam.list_instance_profiles_for_role(RoleName=name).get("InstanceProfiles", []):
        _quietly(
            iam.remove_role_from_instance_profile, InstanceProfileName=profile["InstanceProfileName"], RoleName=name
        )
    for policy in iam.list_role_policies(RoleName=name).get("PolicyNames", []):
        _quietly(iam.delete_role_policy, RoleName=name, PolicyName=policy)
    for attached in iam.list_attached_role_policies(RoleName=name).get("AttachedPolicies", []):
        _quietly(iam.detach_role_policy, RoleName=name, PolicyArn=attached["PolicyArn"])
    _quietly(iam.delete_role, RoleName=name)


def delete_instance_profile(iam: Any, name: str) -> None:
    try:
        roles = iam.get_instance_profile(InstanceProfileName=name)["InstanceProfile"].get("Roles", [])
    except Exception as error:
        if _code(error) == "NoSuchEntity":
            return
        raise
    for role in roles:
        _quietly(iam.remove_role_from_instance_profile, InstanceProfileName=name, RoleName=role["RoleName"])
    _quietly(iam.delete_instance_profile, InstanceProfileName=name)


@dataclass(frozen=True, slots=True)
class Deleter:
    """Deletes resources in the order AWS needs (instances, then what they held) and
    reports each one. ``wait`` is how long to wait for instances to terminate before their
    group is deleted: ``skyward down`` waits; the pool-start sweep does not (a group still
    held fails now and goes next time). ``sleep`` and ``clock`` are seams for tests."""

    clients: Clients
    wait: float = WAIT_FOR_TERMINATION
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic

    def delete(self, resources: Sequence[Resource]) -> dict[str, str]:
        """Ask for every deletion; returns the errors by resource id (none: asked)."""
        errors: dict[str, str] = {}
        instances = [r.id for r in resources if r.kind == INSTANCE]
        if instances:
            try:
                self.clients.ec2.terminate_instances(InstanceIds=instances)
            except Exception as error:
                errors.update({i: f"terminate failed: {error}" for i in instances})
            else:
                self._await_terminated(instances)
        order = (VOLUME, SECURITY_GROUP, KEY_PAIR, INSTANCE_PROFILE, ROLE, BAKED_IMAGE)
        for kind in order:
            for resource in (r for r in resources if r.kind == kind):
                try:
                    self._delete_one(resource)
                except Exception as error:
                    errors[resource.id] = str(error)
        return errors

    def _await_terminated(self, instance_ids: Sequence[str]) -> None:
        deadline = self.clock() + self.wait
        while self.wait > 0:
            described = self.clients.ec2.describe_instances(InstanceIds=list(instance_ids))
            states = {i["State"]["Name"] for r in described["Reservations"] for i in r["Instances"]}
            if states <= {"terminated"} or self.clock() >= deadline:
                return
            self.sleep(2.0)

    def _delete_one(self, resource: Resource) -> None:
        ec2, iam = self.clients.ec2, self.clients.iam
        if resource.kind == SECURITY_GROUP:
            try:
                ec2.delete_security_group(GroupId=resource.id)
            except Exception as error:
                if _code(error) != "InvalidGroup.NotFound":
                    raise
        elif resource.kind == KEY_PAIR:
            ec2.delete_key_pair(KeyName=resource.id)
        elif resource.kind == VOLUME:
            try:
                ec2.delete_volume(VolumeId=resource.id)
            except Exception as error:
                if _code(error) != "InvalidVolume.NotFound":
                    raise
        elif resource.kind == INSTANCE_PROFILE:
            delete_instance_profile(iam, resource.id)
        elif resource.kind == ROLE:
            delete_role(iam, resource.id)
        elif resource.kind == BAKED_IMAGE:
            delete_baked(ec2, resource.id)


def verify(asked: Sequence[Resource], still_there: Sequence[Resource], errors: Mapping[str, str]) -> list[Removal]:
    """Each asked-for resource as removed or not, from a fresh listing (pure)."""
    left = {(r.kind, r.id) for r in still_there}
    removals = []
    for resource in asked:
        if (resource.kind, resource.id) in left:
            why = errors.get(resource.id) or "still listed after the deletion was asked for"
            removals.append(Removal(resource, removed=False, detail=why))
        else:
            removals.append(Removal(resource, removed=True))
    return removals


def delete_and_verify(
    clients: Clients,
    region: str,
    resources: Sequence[Resource],
    *,
    wait: float = WAIT_FOR_TERMINATION,
    sleep: Callable[[float], None] = time.sleep,
) -> list[Removal]:
    deleter = Deleter(clients, wait=wait, sleep=sleep)
    errors = deleter.delete(resources)
    kinds = {r.kind for r in resources}
    again = list_ec2(clients, region) if kinds - IAM_KINDS else []
    if kinds & IAM_KINDS:
        again += list_iam(clients)
    return verify(resources, again, errors)


def sweep_expired(
    clients: Clients, region: str, now: float, own_pool: str | None, notice: Callable[[str], None]
) -> list[Removal]:
    """What every AWS pool start runs: delete what earlier pools left past their expiry
    (instances, then their groups, keys, profiles and roles once no instance of their
    pool is left), without waiting for terminations. It never fails the pool start: what
    it could not list or delete is said in a notice and tried again by the next start."""
    try:
        listed = list_ec2(clients, region)
    except Exception as error:
        notice(f"could not sweep expired Skyward resources in {region}: {error}")
        return []
    try:  # credentials that may not read IAM still get the EC2 sweep
        listed += list_iam(clients)
    except Exception as error:
        notice(f"could not look for expired Skyward roles and instance profiles (IAM): {error}")
    try:
        doomed = doomed_resources(listed, now, own_pool)
        # a group is held until EC2 has let go of the pool's instances: what they held
        # goes at the next start rather than making this one wait
        terminating = {r.pool_id for r in doomed if r.kind == INSTANCE}
        doomed = [r for r in doomed if r.kind == INSTANCE or r.pool_id not in terminating]
        if not doomed:
            return []
        removals = delete_and_verify(clients, region, doomed, wait=0.0)
    except Exception as error:
        notice(f"could not sweep expired Skyward resources in {region}: {error}")
        return []
    for removal in removals:
        resource = removal.resource
        why = "expired" if resource.expired(now) else "stopped but still billing"
        if removal.removed:
            notice(f"deleted {resource.label} left by pool {resource.pool_id}: {why}")
        else:
            notice(f"could not delete {resource.label} left by pool {resource.pool_id}: {removal.detail}")
    return removals


def sweep_at_start(clients: Clients, region: str, own_pool: str, emit: Callable[[Any], None]) -> list[Removal]:
    """:func:`sweep_expired` as the driver's ``prepare`` calls it: now, with each line a
    ``Notice`` event."""
    return sweep_expired(clients, region, time.time(), own_pool, lambda m: emit(Notice(message=m)))
