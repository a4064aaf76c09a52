"""The fake Compute Engine API and its token endpoint, driven by the official SDK clients
(google-cloud-compute over REST, google-auth): what skyward-gcp relies on it to do as Google does."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import google.auth
import pytest
import requests
from fakes.gcp import FakeGCP
from gcp_fake_support import GcpWorld, clients, emulate, instance_body, nothing_left
from google.api_core import exceptions
from google.auth.transport.requests import Request as AuthRequest
from google.cloud import compute_v1
from google.oauth2 import service_account
from providers_support import serve, wait_until

pytestmark = pytest.mark.cloud

ZONE = "us-central1-a"


@pytest.fixture(scope="module")
def shared_gcp() -> Iterator[FakeGCP]:
    """One fake for the tests that leave nothing behind (refusals, the catalog): starting and
    stopping a fake costs about half a second (its server's shutdown poll)."""
    yield from serve(FakeGCP, "Google Cloud")


SPOT = {"provisioning_model": "SPOT", "instance_termination_action": "STOP", "on_host_maintenance": "TERMINATE"}


def _insert(fake: FakeGCP, body: dict[str, Any], zone: str = ZONE) -> compute_v1.Operation:
    c = clients(fake)
    return c.wait_zone(zone, c.instances.insert(project=fake.project, zone=zone, instance_resource=body))


def _running(fake: FakeGCP, name: str, zone: str = ZONE) -> compute_v1.Instance:
    c = clients(fake)
    wait_until(lambda: fake.instance(name).status == "RUNNING", timeout=10, interval=0.01)
    assert fake.instance(name).status == "RUNNING"
    return c.instances.get(project=fake.project, zone=zone, instance=name)


@pytest.fixture
def world(fake_gcp: FakeGCP) -> Iterator[GcpWorld]:
    yield from emulate(fake_gcp)


def test_a_created_instance_runs_its_startup_script_at_its_address(fake_gcp: FakeGCP, world: GcpWorld) -> None:
    script = "#!/bin/bash\necho started-by-startup-script\nsleep 30\n"
    done = _insert(fake_gcp, instance_body("vm-1", script=script, labels={"skyward-pool": "p1"}))
    assert done.status == compute_v1.Operation.Status.DONE and not done.error.errors
    instance = _running(fake_gcp, "vm-1")
    ip = instance.network_interfaces[0].access_configs[0].nat_i_p
    assert ip == instance.network_interfaces[0].network_i_p == world.harness.address_for("vm-1")
    wait_until(lambda: "started-by-startup-script" in world.harness.log("vm-1"), timeout=10)
    assert "started-by-startup-script" in world.harness.log("vm-1")
    assert fake_gcp.instance("vm-1").history[:3] == ["PROVISIONING", "STAGING", "RUNNING"]
    c = clients(fake_gcp)
    deleted = c.wait_zone(ZONE, c.instances.delete(project=fake_gcp.project, zone=ZONE, instance="vm-1"))
    assert not deleted.error.errors
    wait_until(lambda: not world.harness.is_running("vm-1"), timeout=10)
    assert not world.harness.is_running("vm-1")
    assert nothing_left(fake_gcp) == {}
    with pytest.raises(exceptions.NotFound):
        c.instances.get(project=fake_gcp.project, zone=ZONE, instance="vm-1")


def test_a_call_without_a_valid_token_is_refused_as_unauthenticated(fake_gcp: FakeGCP) -> None:
    answer = requests.get(f"{fake_gcp.url}/compute/v1/projects/{fake_gcp.project}/zones", timeout=5)
    assert answer.status_code == 401 and answer.json()["error"]["status"] == "UNAUTHENTICATED"
    forged = service_account.Credentials.from_service_account_info(FakeGCP().service_account_info())
    with pytest.raises(exceptions.Unauthorized) as refused:
        list(clients(fake_gcp, forged).zones.list(project=fake_gcp.project))
    assert refused.value.code == 401 and "service account's key" in refused.value.message
    assert fake_gcp.violations and all("authentication" in v for v in fake_gcp.violations)
    fake_gcp.violations.clear()


def test_the_token_endpoint_grants_a_service_account_s_signed_assertion_only(fake_gcp: FakeGCP) -> None:
    info = fake_gcp.service_account_info()
    scopes = ["https://www.googleapis.com/auth/cloud-platform"]
    credentials = service_account.Credentials.from_service_account_info(info, scopes=scopes)
    credentials.refresh(AuthRequest())  # a JWT-bearer grant at the fake's /token
    assert credentials.token.startswith("ya29.")
    assert fake_gcp.count("POST", "/token", 200) == 1
    url = f"{fake_gcp.url}/compute/v1/projects/{fake_gcp.project}/zones"
    bearer = {"Authorization": f"Bearer {credentials.token}"}
    assert "us-east5-a" in [z["name"] for z in requests.get(url, headers=bearer, timeout=5).json()["items"]]
    fake_gcp.revoke_tokens()  # as if it expired: a 401 the client answers by refreshing, not a violation
    assert requests.get(url, headers=bearer, timeout=5).status_code == 401 and fake_gcp.violations == []
    other = FakeGCP().service_account_info()
    impostor = service_account.Credentials.from_service_account_info(
        {**other, "client_email": info["client_email"], "token_uri": info["token_uri"]}, scopes=scopes
    )
    with pytest.raises(Exception, match="invalid_grant"):
        impostor.refresh(AuthRequest())


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"labels": {"Skyward": "x"}}, "Label key 'Skyward'"),
        ({"labels": {"pool": "Has Space"}}, "Label value"),
        ({"labels": {f"k{i}": "v" for i in range(65)}}, "at most 64 labels"),
        ({"name": "Node_1"}, "resource.name"),
        ({"name": "a" * 64}, "resource.name"),
        ({"machine_type": "zones/us-central1-a/machineTypes/n9-huge"}, "Machine type does not exist"),
        (
            {"guest_accelerators": [{"accelerator_type": f"zones/{ZONE}/acceleratorTypes/nvidia-tesla-t4",
                                     "accelerator_count": 1}]},
            "onHostMaintenance",
        ),
        ({"machine": "g2-standard-4"}, "onHostMaintenance"),
        (
            {"machine": "g2-standard-4", "scheduling": {"on_host_maintenance": "TERMINATE"},
             "guest_accelerators": [{"accelerator_type": "nvidia-l4", "accelerator_count": 1}]},
            "comes with its GPUs",
        ),
        (
            {"scheduling": {"provisioning_model": "SPOT", "on_host_maintenance": "TERMINATE"}},
            "instanceTerminationAction",
        ),
        ({"script": "#!/bin/bash\n" + "x" * (256 * 1024)}, "256 KB"),
    ],
)  # fmt: skip
def test_a_body_google_refuses_is_refused_with_google_s_400(
    shared_gcp: FakeGCP, change: dict[str, Any], match: str
) -> None:
    fake_gcp = shared_gcp
    change = dict(change)
    machine, script = change.pop("machine", "n1-standard-1"), change.pop("script", None)
    body = {**instance_body("vm-bad", machine=machine, script=script), **change}
    with pytest.raises(exceptions.BadRequest, match=match) as refused:
        clients(fake_gcp).instances.insert(project=fake_gcp.project, zone=ZONE, instance_resource=body)
    assert refused.value.code == 400 and refused.value.errors[0]["reason"] == "invalid"
    assert fake_gcp.live()["instances"] == [] and len(fake_gcp.violations) == 1
    fake_gcp.violations.clear()


def test_a_gpu_vm_with_terminate_on_maintenance_is_accepted(fake_gcp: FakeGCP) -> None:
    t4 = [{"accelerator_type": f"zones/{ZONE}/acceleratorTypes/nvidia-tesla-t4", "accelerator_count": 1}]
    body = instance_body("gpu-1", guest_accelerators=t4, scheduling={"on_host_maintenance": "TERMINATE", **SPOT})
    assert not _insert(fake_gcp, body).error.errors
    instance = _running(fake_gcp, "gpu-1")
    assert instance.guest_accelerators[0].accelerator_type.endswith("/acceleratorTypes/nvidia-tesla-t4")
    assert instance.scheduling.provisioning_model == "SPOT"


def test_a_stock_out_and_a_quota_end_the_insert_operation_with_google_s_codes(fake_gcp: FakeGCP) -> None:
    fake_gcp.stock_out(ZONE, "nvidia-l4")
    maintenance = {"on_host_maintenance": "TERMINATE"}
    out = _insert(fake_gcp, instance_body("l4-1", machine="g2-standard-4", scheduling=maintenance))
    assert out.error.errors[0].code == "ZONE_RESOURCE_POOL_EXHAUSTED" and out.http_error_status_code == 503
    assert fake_gcp.live()["instances"] == []
    assert not _insert(fake_gcp, instance_body("l4-2", "us-central1-b", "g2-standard-4", scheduling=maintenance),
                       "us-central1-b").error.errors  # fmt: skip
    fake_gcp.set_quota("us-central1", "PREEMPTIBLE_NVIDIA_T4_GPUS", 1)
    t4 = [{"accelerator_type": "nvidia-tesla-t4", "accelerator_count": 1}]
    assert not _insert(fake_gcp, instance_body("t4-1", guest_accelerators=t4, scheduling=SPOT)).error.errors
    over = _insert(fake_gcp, instance_body("t4-2", guest_accelerators=t4, scheduling=SPOT))
    assert (
        over.error.errors[0].code == "QUOTA_EXCEEDED" and "PREEMPTIBLE_NVIDIA_T4_GPUS" in over.error.errors[0].message
    )
    assert not _insert(fake_gcp, instance_body("t4-3", guest_accelerators=t4, scheduling=maintenance)).error.errors
    region = clients(fake_gcp).regions.get(project=fake_gcp.project, region="us-central1")
    quota = {q.metric: q for q in region.quotas}
    assert quota["PREEMPTIBLE_NVIDIA_T4_GPUS"].limit == 1 and quota["PREEMPTIBLE_NVIDIA_T4_GPUS"].usage == 1
    assert quota["NVIDIA_L4_GPUS"].usage == 1


def test_a_preempted_spot_vm_is_terminated_with_a_preempted_operation(fake_gcp: FakeGCP) -> None:
    _insert(fake_gcp, instance_body("spot-1", scheduling=SPOT))
    _running(fake_gcp, "spot-1")
    fake_gcp.preempt("spot-1")
    c = clients(fake_gcp)
    assert c.instances.get(project=fake_gcp.project, zone=ZONE, instance="spot-1").status == "TERMINATED"
    filter_ = 'operationType="compute.instances.preempted"'
    ops = list(c.zone_operations.list(request={"project": fake_gcp.project, "zone": ZONE, "filter": filter_}))
    assert [o.target_link.rsplit("/", 1)[-1] for o in ops] == ["spot-1"]
    with pytest.raises(ValueError, match="not a live spot VM"):
        _insert(fake_gcp, instance_body("std-1"))
        fake_gcp.preempt("std-1")


def test_labels_change_only_with_the_current_fingerprint(fake_gcp: FakeGCP) -> None:
    _insert(fake_gcp, instance_body("vm-l", labels={"a": "1"}))
    c = clients(fake_gcp)
    current = c.instances.get(project=fake_gcp.project, zone=ZONE, instance="vm-l")
    stale = {"labels": {"a": "2"}, "label_fingerprint": "AAAAAAAAAAA="}
    with pytest.raises(exceptions.PreconditionFailed):
        c.instances.set_labels(project=fake_gcp.project, zone=ZONE, instance="vm-l",
                               instances_set_labels_request_resource=stale)  # fmt: skip
    fresh = {"labels": {"a": "2", "b": "x"}, "label_fingerprint": current.label_fingerprint}
    c.wait_zone(ZONE, c.instances.set_labels(project=fake_gcp.project, zone=ZONE, instance="vm-l",
                                             instances_set_labels_request_resource=fresh))  # fmt: skip
    assert c.instances.get(project=fake_gcp.project, zone=ZONE, instance="vm-l").labels == {"a": "2", "b": "x"}
    fake_gcp.violations.clear()


def test_listing_filters_by_label_across_zones_and_pages(fake_gcp: FakeGCP) -> None:
    for i, zone in enumerate(("us-central1-a", "us-central1-b", "europe-west4-a")):
        _insert(fake_gcp, instance_body(f"vm-{i}", zone, labels={"skyward-pool": "p1"}), zone)
    _insert(fake_gcp, instance_body("other", labels={"skyward-pool": "p2"}))
    c = clients(fake_gcp)
    request = {"project": fake_gcp.project, "filter": 'labels.skyward-pool = "p1"'}
    found = {z: [i.name for i in scoped.instances] for z, scoped in c.instances.aggregated_list(request=request)}
    assert {z: n for z, n in found.items() if n} == {
        "zones/us-central1-a": ["vm-0"], "zones/us-central1-b": ["vm-1"], "zones/europe-west4-a": ["vm-2"],
    }  # fmt: skip
    pages = c.instances.list(request={"project": fake_gcp.project, "zone": ZONE, "max_results": 1})
    assert sorted(i.name for i in pages) == ["other", "vm-0"]
    with pytest.raises(exceptions.BadRequest):
        list(c.instances.list(request={"project": fake_gcp.project, "zone": ZONE, "filter": "a = 1 OR b = 2"}))
    fake_gcp.violations.clear()


def test_firewalls_are_global_and_one_open_to_the_internet_is_recorded(fake_gcp: FakeGCP) -> None:
    c = clients(fake_gcp)
    rule = {
        "name": "skyward-p1", "direction": "INGRESS", "source_ranges": ["203.0.113.7/32"],
        "target_tags": ["skyward-p1"], "allowed": [{"I_p_protocol": "tcp", "ports": ["22", "16000-16010"]}],
    }  # fmt: skip
    assert not c.wait_global(c.firewalls.insert(project=fake_gcp.project, firewall_resource=rule)).error.errors
    got = c.firewalls.get(project=fake_gcp.project, firewall="skyward-p1")
    assert got.allowed[0].ports == ["22", "16000-16010"] and got.target_tags == ["skyward-p1"]
    with pytest.raises(exceptions.Conflict):
        c.firewalls.insert(project=fake_gcp.project, firewall_resource=rule)
    with pytest.raises(exceptions.BadRequest, match="ports"):
        bad = {**rule, "name": "bad", "allowed": [{"I_p_protocol": "icmp", "ports": ["22"]}]}
        c.firewalls.insert(project=fake_gcp.project, firewall_resource=bad)
    fake_gcp.violations.clear()
    wide = {**rule, "name": "wide", "source_ranges": ["0.0.0.0/0"]}
    c.wait_global(c.firewalls.insert(project=fake_gcp.project, firewall_resource=wide))
    assert fake_gcp.violations == ["firewall wide lets the whole internet in: ['0.0.0.0/0']"]
    fake_gcp.violations.clear()
    for name in ("skyward-p1", "wide"):
        c.wait_global(c.firewalls.delete(project=fake_gcp.project, firewall=name))
    assert nothing_left(fake_gcp) == {}


def test_the_catalog_lists_zones_machine_types_gpus_and_quotas(shared_gcp: FakeGCP) -> None:
    fake_gcp = shared_gcp
    c = clients(fake_gcp)
    zones = {z.name for z in c.zones.list(project=fake_gcp.project)}
    assert {"us-central1-a", "us-central1-b", "us-central1-c", "us-east1-c", "us-east1-d", "europe-west4-a"} <= zones
    g2 = c.machine_types.get(project=fake_gcp.project, zone=ZONE, machine_type="g2-standard-8")
    assert (g2.guest_cpus, g2.memory_mb, g2.accelerators[0].guest_accelerator_type) == (8, 32768, "nvidia-l4")
    a3 = c.machine_types.get(project=fake_gcp.project, zone=ZONE, machine_type="a3-highgpu-8g")
    assert a3.accelerators[0].guest_accelerator_count == 8
    gpus = {a.name for a in c.accelerator_types.list(project=fake_gcp.project, zone="us-east1-d")}
    assert gpus == {"nvidia-tesla-t4", "nvidia-l4"}
    every = {z: [m.name for m in s.machine_types] for z, s in c.machine_types.aggregated_list(project=fake_gcp.project)}
    assert "a2-highgpu-1g" in every["zones/europe-west4-a"] and "a2-highgpu-1g" not in every["zones/us-east5-a"]


def test_a_machine_that_shuts_itself_down_is_terminated_and_still_listed(fake_gcp: FakeGCP, world: GcpWorld) -> None:
    _insert(fake_gcp, instance_body("vm-off", script="#!/bin/bash\nsleep 0.2\nshutdown -h now\n"))
    wait_until(lambda: fake_gcp.instance("vm-off").status == "TERMINATED", timeout=15)
    assert world.stopped == ["vm-off"]
    assert fake_gcp.live()["instances"] == ["us-central1-a/vm-off (TERMINATED)"]
    got = clients(fake_gcp).instances.get(project=fake_gcp.project, zone=ZONE, instance="vm-off")
    assert got.status == "TERMINATED"


def test_a_retried_insert_with_the_same_request_id_creates_one_instance(fake_gcp: FakeGCP) -> None:
    fake_gcp.fail("POST", r".*/zones/us-central1-a/instances", 503, process=True)  # carried out, answer lost
    c = clients(fake_gcp)
    request = {"project": fake_gcp.project, "zone": ZONE, "instance_resource": instance_body("vm-r"),
               "request_id": "6f1c1d3e-3b9e-4c89-9a4b-2d7c0e6a1f55"}  # fmt: skip
    with pytest.raises(exceptions.ServiceUnavailable):
        c.instances.insert(request=request)
    again = c.instances.insert(request=request)
    assert not c.wait_zone(ZONE, again).error.errors
    assert len(fake_gcp.live()["instances"]) == 1
    assert [o.operation_type for o in fake_gcp.operations.values()] == ["insert"]
    with pytest.raises(exceptions.BadRequest, match="requestId"):
        c.instances.insert(request={**request, "request_id": "00000000-0000-0000-0000-000000000000"})
    fake_gcp.violations.clear()


def test_a_detailed_stock_out_names_the_resource(fake_gcp: FakeGCP) -> None:
    fake_gcp.stock_out("us-east1-c", "n2-standard-8", detailed=True)
    done = _insert(fake_gcp, instance_body("vm-d", "us-east1-c", "n2-standard-8"), "us-east1-c")
    assert done.error.errors[0].code == "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS"
    assert done.http_error_message == "SERVICE UNAVAILABLE"


def test_public_images_resolve_by_family_and_others_are_not_found(fake_gcp: FakeGCP) -> None:
    images = clients(fake_gcp).images
    image = images.get_from_family(project="ubuntu-os-cloud", family="ubuntu-2204-lts")
    assert image.family == "ubuntu-2204-lts" and image.status == "READY"
    with pytest.raises(exceptions.NotFound):
        images.get_from_family(project="ubuntu-os-cloud", family="windows-2022")
    with pytest.raises(exceptions.NotFound):
        body = instance_body("vm-i")
        body["disks"][0]["initialize_params"]["source_image"] = "projects/debian-cloud/global/images/family/nope"
        clients(fake_gcp).instances.insert(project=fake_gcp.project, zone=ZONE, instance_resource=body)
    fake_gcp.violations.clear()


def test_a_stopped_vm_holds_no_cpu_quota_but_is_still_listed(fake_gcp: FakeGCP) -> None:
    fake_gcp.set_quota("us-central1", "CPUS", 4)
    _insert(fake_gcp, instance_body("vm-s", machine="n1-standard-4"))
    assert _insert(fake_gcp, instance_body("vm-t", machine="n1-standard-4")).error.errors[0].code == "QUOTA_EXCEEDED"
    c = clients(fake_gcp)
    assert not c.wait_zone(ZONE, c.instances.stop(project=fake_gcp.project, zone=ZONE, instance="vm-s")).error.errors
    assert c.instances.get(project=fake_gcp.project, zone=ZONE, instance="vm-s").status == "TERMINATED"
    assert not _insert(fake_gcp, instance_body("vm-u", machine="n1-standard-4")).error.errors
    assert sorted(fake_gcp.live()["instances"])[0] == "us-central1-a/vm-s (TERMINATED)"


def test_application_default_credentials_from_the_key_file_reach_the_fake(
    fake_gcp: FakeGCP, gcp_credentials: Path
) -> None:
    assert gcp_credentials.stat().st_mode & 0o777 == 0o600
    credentials, project = google.auth.default(scopes=["https://www.googleapis.com/auth/cloud-platform"])
    assert project == fake_gcp.project
    assert "europe-west4-a" in [z.name for z in clients(fake_gcp, credentials).zones.list(project=project)]


def test_the_project_wide_gpu_quota_counts_gpus_in_every_region(fake_gcp: FakeGCP) -> None:
    fake_gcp.set_quota("global", "GPUS_ALL_REGIONS", 1)
    maintenance = {"on_host_maintenance": "TERMINATE"}
    assert not _insert(fake_gcp, instance_body("l4-a", machine="g2-standard-4", scheduling=maintenance)).error.errors
    other = instance_body("l4-b", "europe-west4-a", "g2-standard-4", scheduling=maintenance)
    refused = _insert(fake_gcp, other, "europe-west4-a").error.errors[0]
    assert refused.code == "QUOTA_EXCEEDED" and "GPUS_ALL_REGIONS" in refused.message
    assert not _insert(fake_gcp, instance_body("cpu-b", "europe-west4-a"), "europe-west4-a").error.errors
    project = clients(fake_gcp).projects.get(project=fake_gcp.project)
    quota = {q.metric: q for q in project.quotas}["GPUS_ALL_REGIONS"]
    assert (quota.limit, quota.usage) == (1, 1)
