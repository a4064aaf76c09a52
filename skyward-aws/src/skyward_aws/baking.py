"""Baked AMIs (``Image(bake=True)``): list, make and delete them.

A baked AMI is a copy of a bootstrapped node's disk, made with ``CreateImage`` (no
reboot: the node keeps serving) once the pool's agents answer. It carries skyward's
pool-independent tags (``skyward:managed-by``, ``skyward:baked``) and its key
(:class:`skyward.providers.baking.BakeKey`), never a pool id or an expiry: it outlives its pool
on purpose, and bills for its EBS snapshot (about $0.05 per GB-month) until ``skyward
down`` deletes it.
"""

from __future__ import annotations

from typing import Any

from skyward.providers import LABEL_BAKED, LABEL_BAKED_FROM, BakedImage, BakeKey
from skyward_aws.infra import TAG_MANAGED

SNAPSHOT_PRICE_GB_MONTH = 0.05
"""USD per GB-month of a standard EBS snapshot (us-east-1, 2025; most regions charge
about the same): what a baked AMI costs while it exists."""


def _tags(items: object) -> dict[str, str]:
    if not isinstance(items, list):
        return {}
    return {str(t.get("Key")): str(t.get("Value", "")) for t in items if isinstance(t, dict)}


def _size_gb(image: dict[str, Any]) -> float | None:
    sizes = [m.get("Ebs", {}).get("VolumeSize") for m in image.get("BlockDeviceMappings", [])]
    known = [float(s) for s in sizes if isinstance(s, int | float)]
    return sum(known) if known else None


def as_baked(image: dict[str, Any]) -> BakedImage:
    return BakedImage(
        id=str(image["ImageId"]),
        key=BakeKey.from_labels(_tags(image.get("Tags"))),
        created=str(image.get("CreationDate", "")),
        ready=image.get("State") == "available",
        size_gb=_size_gb(image),
        name=str(image.get("Name", "")),
    )


def list_baked(ec2: Any) -> list[BakedImage]:
    """This account's baked AMIs in the client's region, pending ones included."""
    images = ec2.describe_images(Owners=["self"], Filters=[{"Name": f"tag:{LABEL_BAKED}", "Values": ["true"]}])
    return [as_baked(i) for i in images["Images"] if i.get("State") not in ("deregistered", "failed")]


def create_baked(ec2: Any, instance_id: str, key: BakeKey, pool_id: str) -> BakedImage:
    """CreateImage from ``instance_id`` without a reboot, the AMI tagged with ``key``;
    its snapshots get the same tags when the answer already names them (deleting goes
    through the AMI's block devices either way)."""
    tags = [{"Key": k, "Value": v} for k, v in key.labels().items()]
    tags += [
        {"Key": TAG_MANAGED, "Value": "skyward"},
        {"Key": LABEL_BAKED_FROM, "Value": instance_id},
        {"Key": "Name", "Value": f"skyward-baked-{key.image_hash}"},
    ]
    answer = ec2.create_image(
        InstanceId=instance_id,
        Name=f"skyward-baked-{key.image_hash}-{key.env_key[-8:]}-{pool_id}",
        Description=f"skyward {key.version}: Image {key.image_hash} baked on {key.base}",
        NoReboot=True,
        TagSpecifications=[{"ResourceType": "image", "Tags": tags}],
    )
    image_id = str(answer["ImageId"])
    snapshots = _snapshots(ec2, image_id)
    if snapshots:
        ec2.create_tags(Resources=snapshots, Tags=tags)
    return BakedImage(id=image_id, key=key, created="", ready=False)


def _snapshots(ec2: Any, image_id: str) -> list[str]:
    images = ec2.describe_images(ImageIds=[image_id])["Images"]
    return [
        str(m["Ebs"]["SnapshotId"])
        for image in images
        for m in image.get("BlockDeviceMappings", [])
        if m.get("Ebs", {}).get("SnapshotId")
    ]


def delete_baked(ec2: Any, image_id: str) -> None:
    """Deregister the AMI, then delete its snapshots (what bills)."""
    snapshots = _snapshots(ec2, image_id)
    ec2.deregister_image(ImageId=image_id)
    for snapshot in snapshots:
        ec2.delete_snapshot(SnapshotId=snapshot)


class Ec2BakeStore:
    """Baked AMIs as a :class:`skyward.providers.baking.BakeStore`: the flow is the core's Bakery."""

    price_gb_month = SNAPSHOT_PRICE_GB_MONTH

    def __init__(self, ec2: Any) -> None:
        self.ec2 = ec2

    def list_baked(self) -> list[BakedImage]:
        return list_baked(self.ec2)

    def create_baked(self, instance_id: str, key: BakeKey, pool_id: str) -> BakedImage:
        return create_baked(self.ec2, instance_id, key, pool_id)

    def delete_baked(self, image_id: str) -> None:
        delete_baked(self.ec2, image_id)
