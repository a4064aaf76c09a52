"""What EC2 can launch for a pool: instance types, where they are offered, their prices.

Read-only calls, made before anything is created: ``describe_instance_types`` (vCPUs,
memory, GPUs or Neuron devices), ``describe_instance_type_offerings`` (which zones offer
a type), ``describe_spot_price_history`` (current spot prices); on-demand prices come from
the shipped catalog (``pricing``). The choice itself is the core's ``select_instance``.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from botocore.exceptions import ClientError

from skyward.errors import ConfigurationError
from skyward.providers import Accelerator, Catalog, InstanceType, select_instance
from skyward_aws import families
from skyward_aws.pricing import PriceCatalog

SPOT_PRODUCTS = ("Linux/UNIX", "Linux/UNIX (Amazon VPC)")


@dataclass(frozen=True, slots=True)
class Ec2Offer:
    """One EC2 instance type in one region, as the pool may launch it (its zones,
    architecture, spot support). The driver's ``choose_offer`` turns the chosen one into
    the template's ``ChosenOffer``; ``skyward offers`` lists them as ``Offer`` rows."""

    instance: InstanceType
    architecture: str  # "x86_64" or "arm64"
    zones: tuple[str, ...]  # zones (with a usable subnet) that offer it
    supports_spot: bool
    device_vendor: str | None = None  # "NVIDIA", "AMD", "AWS" (Neuron), None for CPU-only
    price_note: str | None = None  # set when the on-demand price is not the region's own

    @property
    def name(self) -> str:
        return self.instance.name

    @property
    def is_neuron(self) -> bool:
        return self.device_vendor == "AWS"

    @property
    def is_nvidia(self) -> bool:
        return self.device_vendor == "NVIDIA"


@dataclass(frozen=True, slots=True)
class Request:
    """What the pool asks for, per instance (``cpu`` and ``memory`` already multiplied by
    the workers on a node)."""

    accelerator: Accelerator | None = None
    cpu: int | None = None
    memory: int | None = None  # bytes
    machine: str | None = None
    needs_spot: bool = False


def offer_from_description(
    description: Mapping[str, Any],
    *,
    region: str,
    zones: Sequence[str],
    prices: PriceCatalog,
    catalog: Catalog,
) -> Ec2Offer | None:
    """An :class:`Ec2Offer` from one ``describe_instance_types`` item; ``None`` when its
    accelerator is not in the catalog (an M60 on g3, say), so it cannot be requested."""
    name = str(description["InstanceType"])
    vcpus = int(description["VCpuInfo"]["DefaultVCpus"])
    memory = int(description["MemoryInfo"]["SizeInMiB"]) * 2**20
    architectures = description.get("ProcessorInfo", {}).get("SupportedArchitectures", ["x86_64"])
    architecture = "arm64" if "arm64" in architectures and "x86_64" not in architectures else "x86_64"
    usage = description.get("SupportedUsageClasses", ["on-demand"])
    accelerator: str | None = None
    count = 0
    vendor: str | None = None
    devices = families.devices_of(description)
    if devices is not None:
        vendor, device, count, memory_mib = devices
        entry = families.catalog_entry_for(device, memory_mib, catalog)
        if entry is None:
            return None
        accelerator = entry.variant
        vendor = "AWS" if entry.vendor == "AWS" else entry.vendor
    price, note = prices.estimate(region, name)
    instance = InstanceType(
        name=name,
        vcpus=vcpus,
        memory=memory,
        on_demand_price=price if price is not None else 0.0,
        accelerator=accelerator,
        accelerator_count=count,
        region=region,
        available=bool(zones),
    )
    if price is None:
        note = f"no on-demand price for {name} in skyward-aws's price catalog: cost estimates show $0 for it"
    return Ec2Offer(
        instance=instance,
        architecture=architecture,
        zones=tuple(zones),
        supports_spot="spot" in usage,
        device_vendor=vendor,
        price_note=note,
    )


def candidate_filter(request: Request) -> dict[str, Any]:
    """The ``describe_instance_types`` arguments that cover every candidate."""
    if request.machine is not None:
        return {"InstanceTypes": [request.machine]}
    fams = families.CPU_FAMILIES if request.accelerator is None else families.families_for(request.accelerator)
    return {"Filters": [{"Name": "instance-type", "Values": families.type_patterns(fams)}]}


def describe_types(ec2: Any, request: Request) -> list[dict[str, Any]]:
    arguments = candidate_filter(request)
    try:
        found: list[dict[str, Any]] = []
        for page in ec2.get_paginator("describe_instance_types").paginate(**arguments):
            found += page["InstanceTypes"]
    except ClientError as error:
        if request.machine is not None and error.response["Error"]["Code"].startswith("InvalidInstanceType"):
            raise ConfigurationError(
                f"machine={request.machine!r} is not an EC2 instance type in {ec2.meta.region_name} "
                "(see `aws ec2 describe-instance-types`)"
            )
        raise
    return found


def offered_zones(ec2: Any, names: Iterable[str]) -> dict[str, list[str]]:
    """instance type -> zones of this region that offer it."""
    names = sorted(set(names))
    zones: dict[str, list[str]] = {name: [] for name in names}
    for start in range(0, len(names), 100):  # the filter takes at most a few hundred values
        chunk = names[start : start + 100]
        paginator = ec2.get_paginator("describe_instance_type_offerings")
        for page in paginator.paginate(
            LocationType="availability-zone", Filters=[{"Name": "instance-type", "Values": chunk}]
        ):
            for item in page["InstanceTypeOfferings"]:
                zones.setdefault(item["InstanceType"], []).append(item["Location"])
    return {name: sorted(found) for name, found in zones.items()}


def fetch_offers(
    ec2: Any,
    request: Request,
    *,
    region: str,
    usable_zones: Sequence[str],
    prices: PriceCatalog,
    catalog: Catalog,
) -> list[Ec2Offer]:
    """Every candidate for ``request``, restricted to zones where the pool has a subnet."""
    descriptions = describe_types(ec2, request)
    zones = offered_zones(ec2, (d["InstanceType"] for d in descriptions))
    usable = set(usable_zones)
    offers = []
    for description in descriptions:
        where = [z for z in zones.get(description["InstanceType"], []) if z in usable]
        offer = offer_from_description(description, region=region, zones=where, prices=prices, catalog=catalog)
        if offer is not None:
            offers.append(offer)
    return offers


def choose(offers: Sequence[Ec2Offer], request: Request, catalog: Catalog) -> Ec2Offer:
    """The smallest offer that satisfies ``request`` (the core's ``select_instance``).

    Types without a known price are left out of an automatic choice (a named ``machine``
    may still use one), and so are types without a spot market when the strategy needs
    spot. A CPU-only request that names no size gets at least 2 vCPUs and 4 GiB.
    """
    pool = list(offers)
    if request.machine is None:
        pool = [o for o in pool if o.instance.on_demand_price > 0]
    if request.needs_spot:
        spot_capable = [o for o in pool if o.supports_spot]
        if pool and not spot_capable:
            names = ", ".join(sorted(o.name for o in pool)[:5])
            raise ConfigurationError(
                f"spot was requested but no candidate instance type has a spot market ({names}); "
                "use spot='never' or 'if-available'"
            )
        pool = spot_capable
    cpu, memory = request.cpu, request.memory
    if request.accelerator is None and request.machine is None and cpu is None and memory is None:
        cpu, memory = families.DEFAULT_MIN_VCPUS, families.DEFAULT_MIN_MEMORY
    by_name: dict[tuple[str, str], Ec2Offer] = {(o.name, o.instance.region): o for o in pool}
    chosen = select_instance(
        [o.instance for o in pool],
        accelerator=request.accelerator,
        cpu=cpu,
        memory=memory,
        machine=request.machine,
        catalog=catalog,
    )
    return by_name[(chosen.name, chosen.region)]


def latest_spot_prices(ec2: Any, instance_type: str, zones: Sequence[str]) -> dict[str, float]:
    """zone -> the current spot price of ``instance_type`` (latest history entry)."""
    now = datetime.datetime.now(datetime.UTC)
    latest: dict[str, tuple[datetime.datetime, float]] = {}
    paginator = ec2.get_paginator("describe_spot_price_history")
    for page in paginator.paginate(
        InstanceTypes=[instance_type], ProductDescriptions=list(SPOT_PRODUCTS), StartTime=now
    ):
        for item in page["SpotPriceHistory"]:
            zone = item["AvailabilityZone"]
            if zones and zone not in zones:
                continue
            stamp = item["Timestamp"]
            if zone not in latest or stamp > latest[zone][0]:
                latest[zone] = (stamp, float(item["SpotPrice"]))
    return {zone: price for zone, (_, price) in latest.items()}


def with_spot_price(offer: Ec2Offer, prices: Mapping[str, float]) -> Ec2Offer:
    """The offer with its spot price: the cheapest zone's."""
    if not prices:
        return offer
    return replace(offer, instance=replace(offer.instance, spot_price=min(prices.values())))
