"""The RunPod driver: RunPod's verbs on the core's cloud template.

The template (``SpotCloudProvider``) creates the pods in parallel under the spot plan,
polls them, deletes everything on a failure, verifies terminate, and notices a spot pod
RunPod preempted (it exits) by describing it. This supplies the GPU type (the cheapest
of the smallest that fits, in the chosen cloud), deploying a pod with the bootstrap as
its start-up command and its ports published, reading the public port mapping (the agent
and the workers are reached through it: PortMapping), and terminating.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from functools import cached_property
from typing import Any

from skyward.errors import ProvisioningError
from skyward.providers import GIB, EventSink, Market, NodePlan, PoolSpec
from skyward.providers.cloud import ChosenOffer, InstanceState, Labels, NodeRequest
from skyward.providers.cloud.http import APIError
from skyward.providers.cloud.marketplace_driver import MarketplaceProvider
from skyward.providers.cloud.marketplace_start import start_command_line
from skyward.providers.cloud.sizing import node_request
from skyward_runpod.api import RunPodAPI
from skyward_runpod.config import RunPod, api_key
from skyward_runpod.offers import PodType, default_size, pod_types
from skyward_runpod.resources import reap_with

PROVIDER = "runpod"
_NO_CAPACITY = ("no longer any instances available", "no instances available", "not enough", "out of capacity")


def ports_of(raw: Mapping[str, Any]) -> tuple[str, dict[int, int]]:
    """(public address, container port -> public port) from a pod's ``runtime.ports``."""
    host, found = "", {}
    for port in ((raw.get("runtime") or {}).get("ports")) or []:
        if port.get("isIpPublic") and port.get("type") == "tcp" and port.get("ip"):
            try:
                found[int(port["privatePort"])] = int(port["publicPort"])
            except (KeyError, TypeError, ValueError):
                continue
            host = str(port["ip"])
    return host, found


def state_of(raw: Mapping[str, Any], mapped: bool) -> InstanceState:
    status = str(raw.get("desiredStatus") or "")
    if status == "TERMINATED":
        return InstanceState.GONE
    if status == "EXITED":
        return InstanceState.STOPPED
    return InstanceState.RUNNING if status == "RUNNING" and mapped else InstanceState.PENDING


class RunPodDriver(MarketplaceProvider[RunPod]):
    name = PROVIDER
    instance_noun = "pod"
    label_key = "name"
    state_of = staticmethod(state_of)
    removal_hint = "terminate them with `runpodctl remove pod <id>`"

    def __init__(
        self,
        config: RunPod,
        *,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        super().__init__(config, clock=clock, sleep=sleep)
        self._type: PodType | None = None

    @cached_property
    def api(self) -> RunPodAPI:
        """Made on first use: validate() has checked the key by then."""
        return RunPodAPI(self.config, sleep=self._sleep)

    def validate(self, spec: PoolSpec) -> None:
        api_key()

    def containers(self) -> list[dict[str, Any]]:
        return self.api.pods()

    def read(self, raw: Mapping[str, Any]) -> tuple[str, dict[int, int], str]:
        host, mapping = ports_of(raw)
        return host, mapping, str(raw.get("desiredStatus") or "")

    def remove(self, instance_id: str) -> None:
        self.api.terminate(instance_id)

    def reap_leftovers(self, now: float, own_pool: str) -> list[str]:
        return reap_with(self.api, now, own_pool)

    def choose_offer(self, spec: PoolSpec, plans: Sequence[NodePlan], emit: EventSink) -> ChosenOffer:
        """The smallest GPU type that fits a node, cheapest among equals, in the chosen cloud."""
        request = node_request(spec)
        vcpus, memory = default_size(request.cpu, request.memory)
        types = pod_types(self.api.gpu_types(), self.config.cloud, vcpus, memory, self.config.bid_margin)
        chosen = request.select([t.instance for t in types])
        self._type = next(t for t in types if t.instance == chosen)
        return ChosenOffer(
            instance_type=chosen.name,
            region=f"RunPod {self.config.cloud} cloud",
            price_on_demand=chosen.on_demand_price,
            price_spot=chosen.spot_price,
            spot_available=chosen.spot_price is not None,
        )

    def create(self, spec: PoolSpec, request: NodeRequest, labels: Labels) -> str:
        kind = self._type
        assert kind is not None, "prepare() first"
        first, last = labels.ports
        pod: dict[str, Any] = {
            "cloudType": self.config.cloud.upper(),
            "gpuTypeId": kind.gpu_type_id,
            "gpuCount": kind.gpus,
            "name": request.name,
            "imageName": self.config.image,
            # the loader, not the script (marketplace_start.start_command): no dockerArgs limit is
            # documented, and none is relied on
            "dockerArgs": start_command_line(request.script, labels.expires - self._clock()),
            "ports": ",".join(f"{port}/tcp" for port in range(first, last + 1)),
            "containerDiskInGb": self.config.disk_gb,
            "volumeInGb": 0,
            "minVcpuCount": kind.instance.vcpus,
            "minMemoryInGb": math.ceil(kind.instance.memory / GIB),
            "supportPublicIp": True,
            "startSsh": False,
        }
        spot = request.market is Market.SPOT
        if spot:
            assert kind.instance.spot_price is not None
            pod["bidPerGpu"] = round(kind.instance.spot_price / kind.gpus, 4)
        return self.api.deploy(pod, spot)

    def is_capacity_refusal(self, error: Exception) -> bool:
        return isinstance(error, APIError) and any(w in error.api_message.lower() for w in _NO_CAPACITY)

    def explain_create_failure(self, error: Exception, market: Market, created: int, total: int) -> Exception:
        if not self.is_capacity_refusal(error) or self._type is None:
            return super().explain_create_failure(error, market, created, total)
        undone = f" ({created} pod(s) had been deployed; they were terminated)" if created else ""
        other = "community" if self.config.cloud == "secure" else "secure"
        return ProvisioningError(
            f"RunPod has no {market.value} capacity for {self._type.instance.name} in its {self.config.cloud} cloud"
            f"{undone}. Try RunPod(cloud={other!r}), spot='if-available', another accelerator, fewer nodes, "
            "or again later"
        )
