"""What Google Cloud sells that a pool can run on, and at what price (pure; the data ships
in ``data/catalog.json``).

Compute Engine prices are not in any API a pool may call cheaply (the Cloud Billing
Catalog API lists SKUs per resource: vCPU, RAM and GPU, per region, thousands of them),
and ``skyward offers`` must answer without credentials. So the catalog is a file in the
package, refreshed by ``skyward-gcp/tools/refresh_catalog.py`` (which reads the Billing
Catalog API); which zones of a region really offer a machine is asked of the Compute API
when a pool starts.

Two kinds of rows:

* :class:`Machine`: a VM shape. ``a2``/``a3``/``g2`` machine types carry their GPUs;
  an N1 machine with attached GPUs (T4, V100) is one row named ``<type>+<n>x<gpu>``
  (``n1-standard-8+1xt4``), since the pair is what a user chooses and what it costs.
* :class:`TpuSlice`: a Cloud TPU slice (``v5p-32``), with its chips and hosts: a
  multi-host slice is one pool whose nodes are its hosts.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from skyward.errors import ConfigurationError, NoOfferError
from skyward.providers import GIB, InstanceType

TPU_PREFIX = "TPU-"


@dataclass(frozen=True, slots=True)
class Machine:
    """One VM shape: a machine type, with GPUs attached when ``attached``."""

    name: str
    machine_type: str
    vcpus: int
    memory_gib: float
    on_demand: float
    spot: float | None
    accelerator: str | None
    accelerator_count: int
    accelerator_type: str | None  # Compute Engine's name: nvidia-tesla-t4
    attached: bool  # guestAccelerators on an N1 machine, rather than built into the type
    regions: tuple[str, ...]

    def instance(self, region: str) -> InstanceType:
        return InstanceType(
            name=self.name,
            vcpus=self.vcpus,
            memory=int(self.memory_gib * GIB),
            on_demand_price=self.on_demand,
            accelerator=self.accelerator,
            accelerator_count=self.accelerator_count,
            spot_price=self.spot,
            region=region,
            available=region in self.regions,
        )


@dataclass(frozen=True, slots=True)
class TpuSlice:
    """One TPU slice shape: ``name`` is the TPU API's acceleratorType (``v5p-32``)."""

    name: str
    version: str  # v5p, v5e, v6e, v4
    chips: int
    hosts: int
    host_vcpus: int
    host_memory_gib: float
    on_demand: float  # the whole slice, per hour
    spot: float | None
    runtime: str  # the recommended TPU software version
    regions: tuple[str, ...]

    @property
    def model(self) -> str:
        return f"{TPU_PREFIX}{self.version}"

    def instance(self, region: str) -> InstanceType:
        """The slice as an instance type: every chip of the slice, and one host's CPUs and memory."""
        return InstanceType(
            name=self.name,
            vcpus=self.host_vcpus,
            memory=int(self.host_memory_gib * GIB),
            on_demand_price=self.on_demand,
            accelerator=self.model,
            accelerator_count=self.chips,
            spot_price=self.spot,
            region=region,
            available=region in self.regions,
        )


@dataclass(frozen=True, slots=True)
class Catalog:
    updated: str
    machines: tuple[Machine, ...]
    tpus: tuple[TpuSlice, ...]

    def machine(self, name: str) -> Machine:
        for machine in self.machines:
            if machine.name == name:
                return machine
        raise KeyError(name)

    def instances(self, region: str) -> list[InstanceType]:
        """Every VM shape and TPU slice as instance types in ``region`` (``available``: offered there)."""
        return [m.instance(region) for m in self.machines] + [t.instance(region) for t in self.tpus]


def parse_catalog(doc: dict[str, Any]) -> Catalog:
    machines = tuple(
        Machine(
            name=str(m["name"]),
            machine_type=str(m["name"]).split("+", 1)[0],
            vcpus=int(m["vcpus"]),
            memory_gib=float(m["memory_gib"]),
            on_demand=float(m["on_demand"]),
            spot=None if m.get("spot") is None else float(m["spot"]),
            accelerator=m.get("accelerator"),
            accelerator_count=int(m.get("accelerator_count") or 0),
            accelerator_type=m.get("accelerator_type"),
            attached=bool(m.get("attached")),
            regions=tuple(m.get("regions") or ()),
        )
        for m in doc["machines"]
    )
    tpus = tuple(
        TpuSlice(
            name=str(t["name"]),
            version=str(t["version"]),
            chips=int(t["chips"]),
            hosts=int(t["hosts"]),
            host_vcpus=int(t["host_vcpus"]),
            host_memory_gib=float(t["host_memory_gib"]),
            on_demand=float(t["on_demand"]),
            spot=None if t.get("spot") is None else float(t["spot"]),
            runtime=str(t["runtime"]),
            regions=tuple(t.get("regions") or ()),
        )
        for t in doc["tpus"]
    )
    return Catalog(str(doc.get("updated", "")), machines, tpus)


@cache
def catalog() -> Catalog:
    """The catalog shipped in the package."""
    text = resources.files("skyward_gcp").joinpath("data/catalog.json").read_text(encoding="utf-8")
    return parse_catalog(json.loads(text))


def is_tpu(accelerator: str | None) -> bool:
    return accelerator is not None and accelerator.startswith(TPU_PREFIX)


def choose_slice(slices: Sequence[TpuSlice], version: str, chips: int, nodes: int, region: str) -> TpuSlice:
    """The smallest slice of ``version`` with at least ``chips`` chips, whose hosts are the
    pool's ``nodes``. A slice's hosts are fixed by its size (v5p: 4 chips a host), so a
    pool of the wrong size is refused, naming the size that fits, rather than rented a
    slice whose extra hosts would bill and idle."""
    of_version = sorted((s for s in slices if s.version == version), key=lambda s: s.chips)
    if not of_version:
        known = sorted({s.version for s in slices})
        raise NoOfferError(f"Google Cloud sells no TPU {version}; TPU versions: {', '.join(known)}")
    fitting = [s for s in of_version if s.chips >= chips]
    if not fitting:
        raise NoOfferError(
            f"no TPU {version} slice has {chips} chips; the largest in the catalog is {of_version[-1].name}"
        )
    exact = [s for s in fitting if s.hosts == nodes]
    if not exact:
        smallest = fitting[0]
        raise ConfigurationError(
            f"a TPU {smallest.name} slice has {smallest.hosts} host(s), and each host is one node of the pool: "
            f"use ComputePool(nodes={smallest.hosts}) (nodes={nodes} was asked)"
        )
    chosen = exact[0]
    if region not in chosen.regions:
        raise NoOfferError(
            f"TPU {chosen.name} is not offered in {region}; it is offered in: {', '.join(chosen.regions)}. "
            "Use GCP(region=...) or GCP(zone=...)"
        )
    return chosen


def hosts_of(slice_name: str) -> int:
    """How many hosts (nodes) a slice has, from the catalog; 1 for an unknown name."""
    for tpu in catalog().tpus:
        if tpu.name == slice_name:
            return tpu.hosts
    return 1
