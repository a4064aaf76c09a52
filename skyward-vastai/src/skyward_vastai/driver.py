"""The VastAI driver: VastAI's verbs on the core's cloud template.

The template (``SpotCloudProvider``) creates the nodes in parallel under the spot plan,
polls them, deletes everything on a failure, verifies terminate, and notices a spot
node VastAI took away (outbid: its instance stops) by describing it. This supplies the
offer search (the cheapest reliable offers that fit, one per node), renting an offer
with the bootstrap as the container's start-up command, reading each container's port
mapping (the agent and the workers are reached through it: PortMapping), and destroying.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from functools import cached_property
from typing import Any

from skyward.errors import ProvisioningError
from skyward.providers import Accelerator, EventSink, Market, NodePlan, PoolSpec
from skyward.providers.cloud import ChosenOffer, Labels, NodeRequest
from skyward.providers.cloud.marketplace_driver import MarketplaceProvider
from skyward.providers.cloud.marketplace_start import start_command
from skyward.providers.cloud.sizing import NodeSize, node_request
from skyward_vastai.api import OfferTaken, VastAPI
from skyward_vastai.config import VastAI, api_key
from skyward_vastai.offers import VastOffer, fitting, parse_offers, search_query
from skyward_vastai.resources import reap_with
from skyward_vastai.status import state_of

PROVIDER = "vastai"


class NoOfferLeft(ProvisioningError):
    """Every fitting offer was rented by someone else (a capacity refusal)."""


def ports_of(raw: Mapping[str, Any]) -> dict[int, int]:
    """Container port -> host port, from an instance's ``ports`` (Docker's shape:
    ``{"16789/tcp": [{"HostIp": "0.0.0.0", "HostPort": "41234"}]}``)."""
    found: dict[int, int] = {}
    for key, bindings in (raw.get("ports") or {}).items():
        port, _, proto = str(key).partition("/")
        if proto not in ("", "tcp") or not bindings:
            continue
        try:
            found[int(port)] = int(bindings[0]["HostPort"])
        except (KeyError, TypeError, ValueError, IndexError):
            continue
    return found


class VastAIDriver(MarketplaceProvider[VastAI]):
    name = PROVIDER
    label_key = "label"
    state_of = staticmethod(state_of)
    removal_hint = "destroy them with `vastai destroy instance <id>`"

    def __init__(
        self,
        config: VastAI,
        *,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        super().__init__(config, clock=clock, sleep=sleep)
        self._offers: dict[Market, list[VastOffer]] = {}
        self._tried: set[int] = set()
        self._wanted = NodeSize()

    @cached_property
    def api(self) -> VastAPI:
        """Made on first use: validate() has checked the key by then."""
        return VastAPI(self.config, sleep=self._sleep)

    def validate(self, spec: PoolSpec) -> None:
        api_key()

    # -- the marketplace's listing -------------------------------------------------------

    def containers(self) -> list[dict[str, Any]]:
        return self.api.instances()

    def read(self, raw: Mapping[str, Any]) -> tuple[str, dict[int, int], str]:
        return str(raw.get("public_ipaddr") or "").strip(), ports_of(raw), str(raw.get("actual_status") or "")

    def remove(self, instance_id: str) -> None:
        self.api.destroy(instance_id)

    def reap_leftovers(self, now: float, own_pool: str) -> list[str]:
        return reap_with(self.api, now, own_pool)

    # -- prepare ------------------------------------------------------------------------

    def _search(self) -> None:
        accelerator = self._wanted.accelerator
        gpus = accelerator.count if isinstance(accelerator, Accelerator) else 1
        offers = parse_offers(self.api.search(search_query(self.config, gpus)), self.config.bid_margin)
        offers = [o for o in offers if o.id not in self._tried]
        with self._lock:
            self._offers = {m: fitting(offers, self._wanted, m is Market.SPOT) for m in Market}

    def choose_offer(self, spec: PoolSpec, plans: Sequence[NodePlan], emit: EventSink) -> ChosenOffer:
        """The cheapest reliable offers that fit one node; the first is what the pool reports."""
        self._wanted = node_request(spec)
        self._search()
        on_demand, spot = self._offers[Market.ON_DEMAND], self._offers[Market.SPOT]
        if not on_demand:
            raise ProvisioningError(
                f"no VastAI offer fits a node of this pool ({self._wanted.describe()}) among verified hosts with "
                f"reliability >= {self.config.min_reliability:g}, CUDA >= {self.config.min_cuda:g} and "
                f"{self.config.disk_gb} GB of disk. Try another accelerator or size, "
                "VastAI(verified_only=False, min_reliability=...), or again later"
            )
        best = on_demand[0].instance
        return ChosenOffer(
            instance_type=best.name,
            region="VastAI marketplace",
            price_on_demand=best.on_demand_price,
            price_spot=spot[0].instance.spot_price if spot else None,
            spot_available=bool(spot),
        )

    # -- the verbs ------------------------------------------------------------------------

    def _take(self, market: Market) -> VastOffer | None:
        with self._lock:
            for offer in self._offers.get(market, []):
                if offer.id not in self._tried:
                    self._tried.add(offer.id)
                    return offer
        return None

    def create(self, spec: PoolSpec, request: NodeRequest, labels: Labels) -> str:
        """Rent the next fitting offer; one someone else rented first is skipped. The
        container's command is the loader (``marketplace_start.start_command``): VastAI refuses
        ``args`` past 4,096 characters, and the script is longer. It waits for its script
        until the pool's expiry at most."""
        first, last = labels.ports
        command = start_command(request.script, labels.expires - self._clock())
        searched = False
        while True:
            offer = self._take(request.market)
            if offer is None and not searched:
                searched = True
                self._search()  # a retry after a capacity refusal looks at the market again
                continue
            if offer is None:
                raise NoOfferLeft(f"no VastAI {request.market.value} offer left that fits node {request.node}")
            body: dict[str, Any] = {
                "client_id": "me",
                "image": self.config.image,
                "disk": self.config.disk_gb,
                "label": request.name,
                "runtype": "args",
                "args": command,
                "env": {f"-p {port}:{port}": "1" for port in range(first, last + 1)},
            }
            if request.market is Market.SPOT:
                assert offer.instance.spot_price is not None
                body["price"] = round(offer.instance.spot_price, 4)  # the bid, $/h for the whole instance
            try:
                return self.api.rent(offer.id, body)
            except OfferTaken:
                continue

    def is_capacity_refusal(self, error: Exception) -> bool:
        return isinstance(error, NoOfferLeft)
