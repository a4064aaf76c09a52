"""What a launch does once per pool, not once per node: the context every node installs
(skyward and its plugins as the client has them) is read once, before the first create."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from ipaddress import IPv4Address
from typing import Any

from skyward.api.spec import build_spec
from skyward.image import BootstrapContext
from skyward.providers import PoolSpec
from skyward.providers.cloud import (
    ChosenOffer,
    CloudProvider,
    CloudSettings,
    Instance,
    InstanceState,
    Labels,
    NodeRequest,
)
from skyward.spot import NodePlan

REQUIREMENT = "skyward-core==9.9.9"


@dataclass(frozen=True, slots=True)
class Counted(CloudSettings):
    pass


class CountingDriver(CloudProvider[Counted]):
    """Instances that run at once; the context seam counts its reads."""

    name = "counted"

    def __init__(self) -> None:
        super().__init__(Counted(poll_interval=0.01), sleep=lambda _: None, context=self._read_context)
        self.reads = 0
        self.scripts: dict[int, str] = {}
        self._ids = 0
        self._mutex = threading.Lock()

    def _read_context(self) -> BootstrapContext:
        with self._mutex:
            self.reads += 1
        return BootstrapContext(local=False, skyward_requirement=REQUIREMENT)

    def client_address(self) -> IPv4Address:
        return IPv4Address("203.0.113.7")

    def choose_offer(self, spec: PoolSpec, plans: Sequence[NodePlan], emit: Any) -> ChosenOffer:
        return ChosenOffer(instance_type="m1", region="counted-1", price_on_demand=1.0)

    def create(self, spec: PoolSpec, request: NodeRequest, labels: Labels) -> str:
        with self._mutex:
            self._ids += 1
            self.scripts[request.node] = request.script
            return f"i-{self._ids}"

    def describe(self, instance_ids: Sequence[str]) -> Mapping[str, Instance]:
        return {i: Instance(i, InstanceState.RUNNING, ip="127.0.0.1") for i in instance_ids}

    def delete(self, instance_ids: Sequence[str]) -> None:
        pass


def _spec(nodes: int) -> PoolSpec:
    return build_spec(
        provider=Counted(), image=None, pip=None, nodes=nodes, machine=None, accelerator=None, cpu=None,
        memory=None, volume=None, spot=None, timeout=600, env=None, concurrency=1, display="quiet",
        collect_metrics=False,
    )  # fmt: skip


def _script(node: int, bind: str, context: BootstrapContext, *, run_dir: str, **_: Any) -> str:
    return f"#!/bin/sh\n# node {node} installs {context.skyward_requirement}\n"


def test_a_sixteen_node_launch_reads_what_the_nodes_install_once() -> None:
    driver = CountingDriver()
    spec = _spec(16)
    driver.prepare(spec, lambda _: None)
    handles = driver.launch(spec, _script, lambda _: None)
    assert len(handles) == 16
    assert driver.reads == 1  # it was 16: one read of every installed distribution per node
    assert all(f"installs {REQUIREMENT}" in driver.scripts[n] for n in range(16))
