"""VastAI offers: the search query, reading an offer, and which offers fit a node (pure).

An offer is one host's rentable slot (a number of GPUs with some CPU, memory and disk),
priced per hour on-demand (``dph_total``) and with a minimum bid for interruptible use
(``min_bid``). A pool of N nodes rents N offers: the cheapest that fit, fewest GPUs first
(a node asking for one GPU never rents a host's eight).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from skyward.providers import MIB, InstanceType
from skyward.providers.cloud.marketplace import catalog_gpu
from skyward.providers.cloud.sizing import NodeSize
from skyward_vastai.config import VastAI

SEARCH_LIMIT = 400  # offers per search: VastAI's cheapest 400 reliable offers hold every common GPU


def search_query(config: VastAI, min_gpus: int) -> dict[str, Any]:
    """The body of ``POST /bundles/``: the host-quality filters of ``config``, cheapest first."""
    query: dict[str, Any] = {
        "rentable": {"eq": True},
        "rented": {"eq": False},
        "reliability2": {"gte": config.min_reliability},
        "cuda_max_good": {"gte": config.min_cuda},
        "disk_space": {"gte": config.disk_gb},
        "inet_down": {"gte": config.min_inet_down},
        "num_gpus": {"gte": max(1, min_gpus)},
        "order": [["dph_total", "asc"]],
        "type": "on-demand",
        "limit": SEARCH_LIMIT,
    }
    if config.verified_only:
        query["verified"] = {"eq": True}
    return query


@dataclass(frozen=True, slots=True)
class VastOffer:
    """One offer: ``instance`` carries its size and prices under the name
    ``"<n>x <GPU name>"`` (``"1x RTX 4090"``: what ``machine=`` names)."""

    id: int
    instance: InstanceType
    min_bid: float | None
    where: str


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        return None
    return float(value)


def parse_offer(data: Mapping[str, Any], bid_margin: float) -> VastOffer | None:
    """None for an entry that cannot be described (no id, size or price)."""
    ident, price = data.get("id"), _number(data.get("dph_total"))
    gpus, cpus, ram = data.get("num_gpus"), _number(data.get("cpu_cores_effective")), _number(data.get("cpu_ram"))
    name = str(data.get("gpu_name") or "")
    if not isinstance(ident, int) or price is None or not isinstance(gpus, int) or gpus < 1 or not name:
        return None
    if cpus is None or cpus < 1 or ram is None or ram < 1:
        return None
    gpu_ram = _number(data.get("gpu_ram"))
    accelerator = catalog_gpu(name, gpu_ram / 1024 if gpu_ram else None)
    min_bid = _number(data.get("min_bid"))
    spot = min(price, min_bid * (1 + bid_margin)) if min_bid else None
    instance = InstanceType(
        name=f"{gpus}x {name}",
        vcpus=int(cpus),
        memory=int(ram * MIB),
        on_demand_price=price,
        accelerator=accelerator,
        accelerator_count=gpus if accelerator else 0,
        spot_price=spot,
        region=str(data.get("geolocation") or ""),
    )
    return VastOffer(ident, instance, min_bid, instance.region)


def parse_offers(data: Iterable[Mapping[str, Any]], bid_margin: float) -> list[VastOffer]:
    return [o for o in (parse_offer(d, bid_margin) for d in data) if o is not None]


def fitting(offers: Iterable[VastOffer], request: NodeSize, spot: bool) -> list[VastOffer]:
    """The offers that hold one node of ``request`` (the same rules as every provider),
    fewest GPUs first, then cheapest (spot: by bid)."""
    fit = [o for o in offers if request.fits(o.instance) and not (spot and o.instance.spot_price is None)]

    def price(o: VastOffer) -> float:
        p = o.instance.spot_price if spot else None
        return p if p is not None else o.instance.on_demand_price

    return sorted(fit, key=lambda o: (o.instance.accelerator_count, price(o), o.id))
