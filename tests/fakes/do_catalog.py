"""What the fake DigitalOcean API sells and holds: its regions, sizes and images, and the
droplets, snapshots and actions it keeps (shapes as DO's OpenAPI specification documents
them; see tests/fakes/digitalocean.py for the rules and their sources)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from fakes.http import Response

REGIONS: Mapping[str, str] = {
    "nyc1": "New York 1", "nyc2": "New York 2", "nyc3": "New York 3", "sfo2": "San Francisco 2",
    "sfo3": "San Francisco 3", "ams3": "Amsterdam 3", "sgp1": "Singapore 1", "lon1": "London 1",
    "fra1": "Frankfurt 1", "tor1": "Toronto 1", "atl1": "Atlanta 1", "blr1": "Bangalore 1", "syd1": "Sydney 1",
}  # fmt: skip
ALL_REGIONS = ("nyc1", "nyc3", "sfo2", "sfo3", "ams3", "sgp1", "lon1", "fra1", "tor1", "blr1", "syd1")


def _size(
    slug: str, vcpus: int, memory_mb: int, disk: int, price: float, regions: Sequence[str], description: str,
    gpu: tuple[int, str, int] | None = None,
) -> dict[str, Any]:  # fmt: skip
    size: dict[str, Any] = {
        "slug": slug,
        "memory": memory_mb,
        "vcpus": vcpus,
        "disk": disk,
        "transfer": 1.0 if gpu is None else 15.0,
        "price_monthly": round(price * 672, 2),
        "price_hourly": price,
        "regions": list(regions),
        "available": True,
        "description": description,
        "disk_info": [{"type": "local", "size": {"amount": disk, "unit": "gib"}}],
    }
    if gpu is not None:
        count, model, vram = gpu
        size["gpu_info"] = {"count": count, "model": model, "vram": {"amount": vram, "unit": "gib"}}
    return size


SIZES: list[dict[str, Any]] = [
    _size("s-1vcpu-1gb", 1, 1024, 25, 0.00893, ALL_REGIONS, "Basic"),
    _size("s-2vcpu-4gb", 2, 4096, 80, 0.03571, ALL_REGIONS, "Basic"),
    _size("s-4vcpu-8gb", 4, 8192, 160, 0.07143, ALL_REGIONS, "Basic"),
    _size("c-8", 8, 16384, 100, 0.25, ALL_REGIONS, "CPU-Optimized"),
    _size("m-16vcpu-128gb", 16, 131072, 400, 1.0, ("nyc1", "nyc3", "fra1"), "Memory-Optimized"),
    _size("gpu-4000adax1-20gb", 8, 32768, 500, 0.76, ("tor1", "nyc2", "atl1"), "GPU", (1, "nvidia_rtx_4000_ada", 20)),
    _size("gpu-6000adax1-48gb", 8, 65536, 500, 1.57, ("tor1", "nyc2", "atl1"), "GPU", (1, "nvidia_rtx_6000_ada", 48)),
    _size("gpu-l40sx1-48gb", 8, 65536, 500, 1.57, ("tor1", "atl1"), "GPU", (1, "nvidia_l40s", 48)),
    _size("gpu-h100x1-80gb", 20, 245760, 720, 3.39, ("tor1", "nyc2", "atl1"), "GPU", (1, "nvidia_h100", 80)),
    _size("gpu-h100x8-640gb", 160, 1966080, 2046, 23.92, ("tor1", "nyc2"), "GPU", (8, "nvidia_h100", 80)),
    _size("gpu-mi300x1-192gb", 20, 245760, 720, 1.99, ("atl1", "tor1"), "GPU", (1, "amd_mi300x", 192)),
]

IMAGES: Mapping[str, str | None] = {
    # slug -> accelerator vendor it needs (None: CPU sizes only)
    "ubuntu-24-04-x64": None,
    "ubuntu-22-04-x64": None,
    "debian-12-x64": None,
    "gpu-h100x1-base": "nvidia",
    "gpu-h100x8-base": "nvidia",
    "gpu-amd-base": "amd",
}


@dataclass
class FakeSnapshot:
    """A droplet snapshot: an image of type ``snapshot`` (private), in the droplet's region."""

    id: int
    name: str
    region: str
    droplet_id: int
    min_disk_size: int
    size_gigabytes: float
    vendor: str | None  # the accelerator vendor of the image it was made from
    created_at: float
    tags: list[str] = field(default_factory=list)

    def created(self) -> str:
        return datetime.fromtimestamp(self.created_at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    def as_snapshot(self) -> dict[str, Any]:
        """As ``GET /v2/snapshots`` lists it (its id a string there)."""
        return {
            "id": str(self.id), "name": self.name, "regions": [self.region], "created_at": self.created(),
            "resource_id": str(self.droplet_id), "resource_type": "droplet", "min_disk_size": self.min_disk_size,
            "size_gigabytes": self.size_gigabytes, "tags": list(self.tags),
        }  # fmt: skip

    def as_image(self) -> dict[str, Any]:
        """As ``GET /v2/images`` lists it (its id an integer there)."""
        return {
            "id": self.id, "name": self.name, "type": "snapshot", "distribution": "Ubuntu", "slug": None,
            "public": False, "regions": [self.region], "created_at": self.created(),
            "min_disk_size": self.min_disk_size, "size_gigabytes": self.size_gigabytes, "description": "",
            "tags": list(self.tags), "status": "available", "error_message": "",
        }  # fmt: skip


@dataclass
class FakeAction:
    id: int
    type: str
    droplet_id: int
    region: str
    started_at: float
    status: str = "in-progress"  # -> completed | errored
    completed_at: float | None = None

    def to_json(self) -> dict[str, Any]:
        def stamp(t: float | None) -> str | None:
            return None if t is None else datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

        return {
            "id": self.id, "status": self.status, "type": self.type, "started_at": stamp(self.started_at),
            "completed_at": stamp(self.completed_at), "resource_id": self.droplet_id, "resource_type": "droplet",
            "region": {"slug": self.region, "name": REGIONS[self.region], "available": True},
            "region_slug": self.region,
        }  # fmt: skip


@dataclass
class FakeDroplet:
    id: int
    name: str
    region: str
    size: dict[str, Any]
    image: str  # a slug, or a snapshot's id as a string
    tags: list[str]
    user_data: str
    ssh_keys: list[Any]
    created_at: float
    status: str = "new"  # new -> active -> off; deleted when deleted
    public_ip: str | None = None
    private_ip: str | None = None
    deleted_at: float | None = None
    history: list[str] = field(default_factory=lambda: ["new"])
    snapshot_ids: list[int] = field(default_factory=list)

    @property
    def is_gpu(self) -> bool:
        return "gpu_info" in self.size

    def to_json(self) -> dict[str, Any]:
        v4 = []
        if self.status in ("active", "off") and self.public_ip:
            v4 = [
                {"ip_address": self.public_ip, "netmask": "255.255.255.0", "gateway": "127.0.0.1", "type": "public"},
                {"ip_address": self.private_ip, "netmask": "255.255.255.0", "gateway": "127.0.0.1", "type": "private"},
            ]
        droplet = {
            "id": self.id,
            "name": self.name,
            "memory": self.size["memory"],
            "vcpus": self.size["vcpus"],
            "disk": self.size["disk"],
            "locked": False,
            "status": self.status,
            "created_at": datetime.fromtimestamp(self.created_at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "features": ["droplet_agent", "private_networking"],
            "backup_ids": [],
            "snapshot_ids": list(self.snapshot_ids),
            "next_backup_window": None,
            "image": (
                {"id": int(self.image), "slug": None, "distribution": "Ubuntu", "public": False, "type": "snapshot"}
                if self.image.isdigit()
                else {"slug": self.image, "distribution": "Ubuntu", "public": True}
            ),
            "size": self.size,
            "size_slug": self.size["slug"],
            "networks": {"v4": v4, "v6": []},
            "region": {"slug": self.region, "name": REGIONS[self.region], "available": True},
            "tags": list(self.tags),
            "volume_ids": [],
            "vpc_uuid": "5a4981aa-9653-4bd1-bef5-d6bff52042e4",
        }
        if self.is_gpu:
            droplet["gpu_info"] = self.size["gpu_info"]
        return droplet


def do_error(status: int, error_id: str, message: str, **extra: Any) -> Response:
    """DO's error body (spec shared/models/error.yml: ``id``, ``message``, ``request_id``)."""
    return Response(status, {"id": error_id, "message": message, "request_id": str(uuid.uuid4()), **extra})
