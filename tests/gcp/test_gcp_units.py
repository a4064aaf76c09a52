"""Pure parts of the Google Cloud provider: config, credentials' errors, the catalog and
TPU slice sizing, names and labels, firewall rules, error mapping, the VM insert body."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import skyward as sky
from skyward.errors import CapacityError, ConfigurationError, NoOfferError, QuotaError
from skyward.instances import select_instance
from skyward.providers import OfferQuery
from skyward_gcp import GCP
from skyward_gcp.api import GcpAPIError, unavailable
from skyward_gcp.catalog import catalog, choose_slice
from skyward_gcp.config import region_of
from skyward_gcp.credentials import CREDENTIALS_ENV, find_credentials, project_of
from skyward_gcp.driver import STATES, vm_body
from skyward_gcp.firewall import firewall_bodies, firewall_problems
from skyward_gcp.naming import (
    NodeView,
    expired_firewalls,
    firewall_name,
    is_resource_name,
    label_problems,
    mark_of,
    nodes_to_reap,
    parse_firewall_name,
    pool_labels,
)
from skyward_gcp.tools import GCPSession

pool_ids = st.from_regex(r"sky-[0-9a-f]{8}", fullmatch=True)
epochs = st.integers(min_value=10**9, max_value=10**10 - 1)
regions = st.from_regex(r"[a-z]{2,12}-[a-z]{4,10}[0-9]{1,2}", fullmatch=True)

# -- config ----------------------------------------------------------------------------


@given(regions, st.sampled_from("abcdf"))
def test_a_zone_names_its_region_and_a_zone_outside_the_region_is_refused(region: str, letter: str) -> None:
    zone = f"{region}-{letter}"
    assert region_of(zone) == region
    assert GCP(zone=zone).the_region == region
    with pytest.raises(ConfigurationError, match="is not in region"):
        GCP(region=f"{region}9", zone=zone)


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("project", "My Project", "project id"),
        ("region", "us central", "region name"),
        ("zone", "us-central1", "zone name"),
        ("network", "Bad_Net", "VPC network"),
        ("spot_termination", "KEEP", "DELETE, STOP"),
        ("compute_api_url", "ftp://x", "http(s) URL"),
        ("credentials_file", "  ", "non-empty"),
    ],
)
def test_a_bad_setting_is_refused_naming_the_parameter(field: str, value: str, words: str) -> None:
    with pytest.raises(ConfigurationError, match=rf"GCP\({field}=") as caught:
        GCP(**{field: value})  # type: ignore[arg-type]
    assert words in str(caught.value)


def test_the_config_is_frozen_and_defaults_to_us_central1() -> None:
    config = GCP()
    assert config.the_region == "us-central1"
    with pytest.raises(AttributeError):
        config.region = "europe-west4"  # type: ignore[misc]
    assert sky.GCP is GCP


# -- credentials -------------------------------------------------------------------------


def test_missing_credentials_say_how_to_provide_them(no_google_credentials: None) -> None:
    with pytest.raises(ConfigurationError) as caught:
        find_credentials(GCP())
    message = str(caught.value)
    assert CREDENTIALS_ENV in message
    assert "gcloud auth application-default login" in message
    assert "credentials_file" in message


def test_an_unreadable_credentials_file_is_named_and_no_key_is_echoed(tmp_path: Path) -> None:
    key = tmp_path / "key.json"
    secret = "-----BEGIN PRIVATE KEY-----\nNOTAKEY\n-----END PRIVATE KEY-----\n"
    key.write_text(json.dumps({"type": "service_account", "private_key": secret, "client_email": "a@b"}))
    with pytest.raises(ConfigurationError) as caught:
        find_credentials(GCP(credentials_file=str(key)))
    assert str(key) in str(caught.value)
    assert "NOTAKEY" not in str(caught.value)


def test_the_project_comes_from_the_config_then_the_credentials(tmp_path: Path) -> None:
    from skyward_gcp.credentials import Found

    found = Found(credentials=None, project="from-the-key", source="a file")  # type: ignore[arg-type]
    assert project_of(GCP(), found) == "from-the-key"
    assert project_of(GCP(project="given-project"), found) == "given-project"
    with pytest.raises(ConfigurationError, match=r"GCP\(project='my-project'\)"):
        project_of(GCP(), Found(credentials=None, project=None, source="a file"))  # type: ignore[arg-type]


# -- catalog and offers --------------------------------------------------------------------


def test_every_catalog_row_is_an_instance_type_core_can_select() -> None:
    for listed in catalog().instances("us-central1"):
        instance = replace(listed, available=True)
        assert select_instance([instance], machine=instance.name) == instance
        if instance.accelerator is not None:
            assert select_instance([instance], accelerator=instance.accelerator, machine=instance.name)


@pytest.mark.parametrize(
    ("accelerator", "expected"),
    [("L4", "g2-standard-4"), ("T4", "n1-standard-4+1xt4"), ("A100", "a2-highgpu-1g"), ("H100", "a3-highgpu-1g"),
     ("A100:8", "a2-highgpu-8g"), ("V100", "n1-standard-8+1xv100")],
)  # fmt: skip
def test_the_smallest_fitting_gpu_vm_is_chosen(accelerator: str, expected: str) -> None:
    vms = [m.instance("us-central1") for m in catalog().machines]
    assert select_instance(vms, accelerator=accelerator).name == expected


def test_offers_list_gpu_and_tpu_offers_with_on_demand_and_spot_prices() -> None:
    session = GCPSession(GCP(region="us-central1"))
    l4 = session.offers(OfferQuery("L4"))
    assert l4[0].instance == "g2-standard-4"
    assert all(o.spot_hourly is not None and o.spot_hourly < o.on_demand_hourly for o in l4)
    tpus = session.offers(OfferQuery("TPU-v5p", count=4))
    assert tpus[0].instance == "v5p-8"
    assert tpus[0].spot_hourly is not None
    assert not session.offers(OfferQuery("TPU-v4"))  # v4 lives in us-central2 only


@pytest.mark.parametrize(
    ("version", "chips", "nodes", "name"),
    [("v5p", 4, 1, "v5p-8"), ("v5p", 16, 4, "v5p-32"), ("v5p", 1, 1, "v5p-8"), ("v5e", 16, 4, "v5litepod-16"),
     ("v6e", 8, 1, "v6e-8"), ("v5e", 1, 1, "v5litepod-1")],
)  # fmt: skip
def test_a_tpu_slice_is_the_smallest_whose_hosts_are_the_pool_s_nodes(
    version: str, chips: int, nodes: int, name: str
) -> None:
    chosen = choose_slice(catalog().tpus, version, chips, nodes, "us-central1")
    assert chosen.name == name
    assert chosen.hosts == nodes


def test_a_pool_of_the_wrong_size_for_its_slice_is_told_the_size_that_fits() -> None:
    with pytest.raises(ConfigurationError, match=r"nodes=4"):
        choose_slice(catalog().tpus, "v5p", 16, 1, "us-central1")
    with pytest.raises(NoOfferError, match="offered in"):
        choose_slice(catalog().tpus, "v4", 4, 1, "us-central1")


def test_every_slice_s_hosts_hold_its_chips_evenly() -> None:
    for tpu in catalog().tpus:
        assert tpu.chips % tpu.hosts == 0, tpu.name
        assert tpu.on_demand > 0 and (tpu.spot is None or tpu.spot < tpu.on_demand)


# -- names, labels, firewall ---------------------------------------------------------------


@given(pool_ids, epochs, st.integers(min_value=0, max_value=10_000))
def test_labels_follow_google_s_rules_and_carry_the_pool_mark(pool_id: str, expires: int, node: int) -> None:
    labels = pool_labels(pool_id, expires, node)
    assert label_problems(labels) == []
    mark = mark_of(labels)
    assert mark is not None and (mark.pool_id, mark.expires) == (pool_id, expires)


@given(pool_ids, epochs, st.sampled_from(["client", "pool"]))
def test_firewall_names_are_valid_and_parse_back(pool_id: str, expires: int, purpose: str) -> None:
    name = firewall_name(pool_id, expires, purpose)
    assert is_resource_name(name)
    mark = parse_firewall_name(name)
    assert mark is not None and (mark.pool_id, mark.expires) == (pool_id, expires)


def test_label_problems_catch_what_google_refuses() -> None:
    assert label_problems({"Skyward": "1"})
    assert label_problems({"skyward": "UPPER"})
    assert label_problems({"1key": "v"})
    assert label_problems({f"k{i}": "v" for i in range(65)})


def test_the_firewall_rules_target_the_pool_tag_and_admit_the_client_only() -> None:
    client, pool = firewall_bodies("skyward-sky-1-1000000000-client", "skyward-sky-1-1000000000-pool",
                                   "default", "sky-1", "203.0.113.7/32", (16789, 16791))  # fmt: skip
    assert firewall_problems(client) == [] and firewall_problems(pool) == []
    assert client["source_ranges"] == ["203.0.113.7/32"]
    assert client["allowed"] == [{"I_p_protocol": "tcp", "ports": ["16789-16791"]}]
    assert pool["source_tags"] == ["sky-1"] and "source_ranges" not in pool
    assert client["target_tags"] == pool["target_tags"] == ["sky-1"]
    assert firewall_problems({**client, "target_tags": []})
    assert firewall_problems({**client, "source_ranges": ["not a cidr"]})


def test_the_reaper_takes_stopped_and_expired_vms_of_other_pools_only() -> None:
    def view(name: str, pool: str, status: str, expires: int) -> NodeView:
        return NodeView("us-central1-a", name, "instance", status, pool_labels(pool, expires, 0))

    now = 2_000_000_000
    nodes = [
        view("a", "sky-aaaaaaaa", "RUNNING", now + 100),
        view("b", "sky-bbbbbbbb", "TERMINATED", now + 100),
        view("c", "sky-cccccccc", "RUNNING", now - 1),
        view("d", "sky-dddddddd", "TERMINATED", now - 1),
        NodeView("us-central1-a", "e", "instance", "TERMINATED", {"team": "ml"}),
    ]
    doomed = {d.node.name for d in nodes_to_reap(nodes, now, own_pool="sky-dddddddd")}
    assert doomed == {"b", "c"}
    names = [firewall_name("sky-cccccccc", now - 1, "client"), firewall_name("sky-aaaaaaaa", now - 1, "pool")]
    assert expired_firewalls(names, now, {"sky-aaaaaaaa"}) == [names[0]]


# -- errors --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "codes", "message", "kind"),
    [
        (None, ["ZONE_RESOURCE_POOL_EXHAUSTED"], "The zone does not have enough resources", CapacityError),
        (None, ["ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS"], "not enough resources", CapacityError),
        (403, ["QUOTA_EXCEEDED"], "Quota 'NVIDIA_T4_GPUS' exceeded. Limit: 0.0 in region us-central1.", QuotaError),
        (429, ["RESOURCE_EXHAUSTED"], "Quota limit 'TPUV5PPerProjectPerZone' exceeded", QuotaError),
        (429, ["RESOURCE_EXHAUSTED"], "There is no more capacity in the zone", CapacityError),
        (400, ["invalid"], "Invalid value for field", None),
    ],
)
def test_google_refusals_map_to_the_failover_kinds(
    status: int | None, codes: list[str], message: str, kind: type[Exception] | None
) -> None:
    mapped = unavailable(GcpAPIError("creating", status, codes, message), "g2-standard-4", "us-central1-a")
    if kind is None:
        assert mapped is None
    else:
        assert type(mapped) is kind
        assert message in str(mapped)


# -- the insert body -------------------------------------------------------------------------


def _body(name: str, spot: bool) -> dict[str, object]:
    return vm_body(
        name="sky-1-0", zone="us-central1-a", machine=catalog().machine(name), network="default", tag="sky-1",
        labels=pool_labels("sky-1", 1_000_000_000, 0), script="#!/bin/sh\n", image="img", spot=spot,
        termination_action="DELETE",
    )  # fmt: skip


def test_a_spot_vm_says_spot_and_what_preemption_does() -> None:
    body = _body("g2-standard-4", spot=True)
    assert body["scheduling"] == {
        "on_host_maintenance": "TERMINATE", "provisioning_model": "SPOT",
        "instance_termination_action": "DELETE", "automatic_restart": False,
    }  # fmt: skip
    assert _body("e2-standard-2", spot=False)["scheduling"]["on_host_maintenance"] == "MIGRATE"  # type: ignore[index]


def test_only_n1_machines_get_attached_gpus_and_gpu_vms_never_migrate() -> None:
    t4 = _body("n1-standard-4+1xt4", spot=False)
    assert t4["machine_type"] == "zones/us-central1-a/machineTypes/n1-standard-4"
    assert t4["guest_accelerators"] == [
        {"accelerator_type": "zones/us-central1-a/acceleratorTypes/nvidia-tesla-t4", "accelerator_count": 1}
    ]
    assert t4["scheduling"]["on_host_maintenance"] == "TERMINATE"  # type: ignore[index]
    assert "guest_accelerators" not in _body("a2-highgpu-1g", spot=False)
    assert t4["metadata"] == {"items": [{"key": "startup-script", "value": "#!/bin/sh\n"}]}


def test_a_preempted_or_stopping_vm_counts_as_stopped() -> None:
    from skyward.providers.cloud import InstanceState

    assert STATES["TERMINATED"] is InstanceState.STOPPED
    assert STATES["STOPPING"] is InstanceState.STOPPED
    assert STATES["RUNNING"] is InstanceState.RUNNING
    assert STATES["STAGING"] is InstanceState.PENDING
