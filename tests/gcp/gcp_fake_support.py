"""Helpers for tests on the fake Google Cloud (tests/fakes/gcp.py): its emulated machines,
a service-account key file for it, and the official SDK clients pointed at it (a module name
of its own: test folders here are not packages)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fakes.gcp import FakeGCP
from google.api_core.client_options import ClientOptions
from google.api_core.future.polling import DEFAULT_POLLING
from google.cloud import compute_v1, tpu_v2
from google.oauth2 import service_account
from providers_support import World
from providers_support import emulate as emulate_on

__all__ = [
    "FAST_POLLING", "GcpClients", "GcpWorld", "clients", "emulate", "instance_body", "nothing_left",
    "write_credentials",
]  # fmt: skip

FAST_POLLING = DEFAULT_POLLING.with_delay(initial=0.02, maximum=0.2, multiplier=1.5).with_timeout(20.0)
"""For ``operation.result(polling=FAST_POLLING)`` on a Cloud TPU long-running operation: the
default polls after 1 s, then less often, which is most of a test's time on the fake."""

GcpWorld = World[FakeGCP]


def emulate(
    fake: FakeGCP, *, shutdown_time_scale: float = 1.0, extra_stubs: Mapping[str, str] | None = None
) -> Iterator[GcpWorld]:
    """Each VM runs its ``startup-script`` metadata in the harness as instance ``name``, and each
    TPU host as ``{node}-w-{i}``; a machine that shuts itself down is TERMINATED (a VM, still
    billed for its disk) or noted in ``fake.stopped_hosts`` (a TPU host)."""
    yield from emulate_on(fake, fake.power_off, shutdown_time_scale=shutdown_time_scale, extra_stubs=extra_stubs)


def write_credentials(fake: FakeGCP, directory: Path) -> Path:
    """The fake's service-account key as a 0600 JSON file in ``directory`` (for
    ``GOOGLE_APPLICATION_CREDENTIALS`` or a provider's credentials-file setting)."""
    path = directory / "gcp-service-account.json"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as file:
        json.dump(fake.service_account_info(), file)
    return path


def nothing_left(fake: FakeGCP) -> dict[str, list[str]]:
    """What the fake still holds, the empty kinds left out ({} when nothing is)."""
    return {k: v for k, v in fake.live().items() if v}


@dataclass(frozen=True)
class GcpClients:
    """google-cloud-compute and google-cloud-tpu clients (REST) on the fake. The SDK's
    ``ExtendedOperation.result()`` polls compute.googleapis.com whatever ``api_endpoint`` says
    (InstancesRestTransport builds its ZoneOperationsClient without the client options), so
    wait through :attr:`zone_operations` / :attr:`global_operations` instead."""

    instances: compute_v1.InstancesClient
    zone_operations: compute_v1.ZoneOperationsClient
    global_operations: compute_v1.GlobalOperationsClient
    firewalls: compute_v1.FirewallsClient
    zones: compute_v1.ZonesClient
    regions: compute_v1.RegionsClient
    machine_types: compute_v1.MachineTypesClient
    accelerator_types: compute_v1.AcceleratorTypesClient
    images: compute_v1.ImagesClient
    projects: compute_v1.ProjectsClient
    tpu: tpu_v2.TpuClient
    project: str

    def wait_zone(self, zone: str, operation: Any) -> compute_v1.Operation:
        """The zone operation (or the name of one) once DONE."""
        name = operation if isinstance(operation, str) else operation.name
        return self.zone_operations.wait(project=self.project, zone=zone, operation=name)

    def wait_global(self, operation: Any) -> compute_v1.Operation:
        name = operation if isinstance(operation, str) else operation.name
        return self.global_operations.wait(project=self.project, operation=name)


def clients(fake: FakeGCP, credentials: Any = None) -> GcpClients:
    """Clients on ``fake``, with its service account's credentials unless ``credentials``."""
    if credentials is None:
        credentials = service_account.Credentials.from_service_account_info(fake.service_account_info())
    options = ClientOptions(api_endpoint=fake.url)
    args: dict[str, Any] = dict(transport="rest", credentials=credentials, client_options=options)
    return GcpClients(
        compute_v1.InstancesClient(**args), compute_v1.ZoneOperationsClient(**args),
        compute_v1.GlobalOperationsClient(**args), compute_v1.FirewallsClient(**args), compute_v1.ZonesClient(**args),
        compute_v1.RegionsClient(**args), compute_v1.MachineTypesClient(**args),
        compute_v1.AcceleratorTypesClient(**args), compute_v1.ImagesClient(**args),
        compute_v1.ProjectsClient(**args), tpu_v2.TpuClient(**args),
        fake.project,
    )  # fmt: skip


def instance_body(
    name: str,
    zone: str = "us-central1-a",
    machine: str = "n1-standard-1",
    *,
    script: str | None = None,
    labels: Mapping[str, str] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """An ``instances.insert`` body Compute Engine accepts (``extra``: more fields)."""
    body: dict[str, Any] = {
        "name": name,
        "machine_type": f"zones/{zone}/machineTypes/{machine}",
        "disks": [
            {
                "boot": True,
                "auto_delete": True,
                "initialize_params": {"source_image": "projects/debian-cloud/global/images/family/debian-12"},
            }
        ],
        "network_interfaces": [{"access_configs": [{"name": "External NAT", "type_": "ONE_TO_ONE_NAT"}]}],
        "labels": dict(labels or {}),
        **extra,
    }
    if script is not None:
        body["metadata"] = {"items": [{"key": "startup-script", "value": script}]}
    return body
