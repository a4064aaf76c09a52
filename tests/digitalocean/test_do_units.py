"""Pure parts of the DigitalOcean provider: config, names and tags, sizes (the rules it
shares with other HTTP clouds are tested in tests/unit/test_cloud_providers.py)."""

from __future__ import annotations

import pytest
from fakes.digitalocean import SIZES
from hypothesis import given
from hypothesis import strategies as st

import skyward as sky
from skyward.errors import ConfigurationError, ProvisioningError
from skyward_digitalocean import REGIONS, DigitalOcean
from skyward_digitalocean.api import DigitalOceanAPIError, make_client
from skyward_digitalocean.driver import explain_create_error
from skyward_digitalocean.naming import (
    COMMON_TAG,
    DropletView,
    droplets_to_reap,
    expired_marks,
    parse_pool_tag,
    parse_resource_name,
    pool_tag,
    resource_name,
)
from skyward_digitalocean.offers import (
    AMD_IMAGE,
    CPU_IMAGE,
    NVIDIA_IMAGE,
    NVIDIA_MULTI_IMAGE,
    accelerator_name,
    image_for,
    parse_size,
    parse_sizes,
)

pool_ids = st.from_regex(r"sky-[0-9a-f]{8}", fullmatch=True)
epochs = st.integers(min_value=10**9, max_value=10**10)

# -- config ----------------------------------------------------------------------------


def test_public_name_resolves_through_the_plugin() -> None:
    assert sky.DigitalOcean is DigitalOcean
    assert DigitalOcean().region == "nyc1"


def test_unknown_region_lists_the_known_ones() -> None:
    with pytest.raises(ConfigurationError) as info:
        DigitalOcean(region="mars1")
    for region in REGIONS:
        assert region in str(info.value)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"client_address": "0.0.0.0"},
        {"client_address": "not-an-ip"},
        {"client_address": "2001:db8::1"},
        {"agent_port": 0},
        {"agent_port": True},
        {"poll_interval": 0},
        {"api_retries": 0},
        {"api_url": "ftp://example"},
        {"image": " "},
    ],
)
def test_bad_settings_are_refused_early(kwargs: dict[str, object]) -> None:
    with pytest.raises(ConfigurationError):
        DigitalOcean(**kwargs)  # type: ignore[arg-type]


def test_plain_http_api_only_on_loopback() -> None:
    with pytest.raises(ConfigurationError, match="unencrypted"):
        make_client(DigitalOcean(api_url="http://api.example.com"), "t")
    make_client(DigitalOcean(api_url="http://127.0.0.1:9"), "t")  # allowed: a test double


def test_spot_always_is_refused_at_construction(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DIGITALOCEAN_TOKEN", "t")
    for spot in ("always", 0.5, sky.Spot.Always(retries=1)):
        with pytest.raises(ConfigurationError, match="no spot market"):
            sky.ComputePool(provider=DigitalOcean(), spot=spot, display="quiet")
    sky.ComputePool(provider=DigitalOcean(), spot="if-available", display="quiet")  # allowed; told in a Notice
    sky.ComputePool(provider=DigitalOcean(), spot="never", display="quiet")


def test_missing_token_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DIGITALOCEAN_TOKEN", raising=False)
    with pytest.raises(ConfigurationError, match="DIGITALOCEAN_TOKEN"):
        sky.ComputePool(provider=DigitalOcean(), display="quiet")


def test_the_token_never_appears_in_the_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DIGITALOCEAN_TOKEN", "dop_v1_secret")
    config = DigitalOcean()
    assert "dop_v1_secret" not in repr(config)
    import pickle

    assert b"dop_v1_secret" not in pickle.dumps(config)


# -- names, tags, reaping ----------------------------------------------------------------


@given(pool_ids, epochs)
def test_pool_tags_and_names_round_trip(pool_id: str, expires: int) -> None:
    mark = parse_pool_tag(pool_tag(pool_id, expires))
    assert mark is not None and (mark.pool_id, mark.expires) == (pool_id, expires)
    mark = parse_resource_name(resource_name(pool_id, expires))
    assert mark is not None and (mark.pool_id, mark.expires) == (pool_id, expires)


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["new", "active", "off"]),
            st.booleans(),  # carries the common tag
            st.one_of(st.none(), epochs),  # pool tag expiry
        ),
        max_size=12,
    ),
    epochs,
)
def test_reaping_takes_only_skyward_droplets_that_are_off_or_expired(
    rows: list[tuple[str, bool, int | None]], now: int
) -> None:
    droplets = []
    for i, (status, common, expires) in enumerate(rows):
        tags = ([COMMON_TAG] if common else []) + ([pool_tag(f"sky-{i:08x}", expires)] if expires else [])
        droplets.append(DropletView(i, f"d{i}", status, tuple(tags)))
    doomed = {d.droplet.id for d in droplets_to_reap(droplets, now)}
    for i, (status, common, expires) in enumerate(rows):
        expected = common and expires is not None and (status == "off" or now > expires)
        assert (i in doomed) == expected


def test_reaping_spares_the_own_pool() -> None:
    droplet = DropletView(1, "d", "off", (COMMON_TAG, pool_tag("sky-00000001", 10**9)))
    assert droplets_to_reap([droplet], now=10**10, own_pool="sky-00000001") == []
    assert len(droplets_to_reap([droplet], now=10**10)) == 1


def test_expired_names_skip_live_pools_and_foreign_names() -> None:
    names = [resource_name("sky-00000001", 10**9), resource_name("sky-00000002", 10**9), "my-firewall"]
    assert expired_marks(names, now=2 * 10**9, live_pools={"sky-00000002"}) == [names[0]]


# -- sizes and images ---------------------------------------------------------------------


def test_sizes_become_instance_types_with_gpus_and_prices() -> None:
    sizes = {s.slug: s for s in parse_sizes(SIZES, "tor1")}
    h100 = sizes["gpu-h100x1-80gb"].instance
    assert (h100.accelerator, h100.accelerator_count, h100.on_demand_price, h100.vcpus) == (
        "H100-80GB-SXM",
        1,
        3.39,
        20,
    )
    assert h100.memory == 245760 * 2**20 and h100.spot_price is None and h100.available
    assert sizes["gpu-mi300x1-192gb"].instance.accelerator == "MI300X"
    assert sizes["gpu-4000adax1-20gb"].instance.accelerator == "RTX4000-Ada"
    assert sizes["m-16vcpu-128gb"].instance.available is False  # not offered in tor1
    assert sizes["s-1vcpu-1gb"].instance.accelerator is None


def test_smallest_fitting_size_is_selected() -> None:
    instances = [s.instance for s in parse_sizes(SIZES, "tor1")]
    assert sky.select_instance(instances, accelerator="H100").name == "gpu-h100x1-80gb"
    assert sky.select_instance(instances, accelerator="H100:8").name == "gpu-h100x8-640gb"
    assert sky.select_instance(instances, accelerator="L40S").name == "gpu-l40sx1-48gb"
    assert sky.select_instance(instances, cpu=3).name == "s-4vcpu-8gb"
    assert sky.select_instance(instances).name == "s-1vcpu-1gb"


def test_images_follow_the_accelerator() -> None:
    sizes = {s.slug: s for s in parse_sizes(SIZES, "tor1")}
    assert image_for(sizes["s-1vcpu-1gb"]) == CPU_IMAGE
    assert image_for(sizes["gpu-h100x1-80gb"]) == NVIDIA_IMAGE
    assert image_for(sizes["gpu-l40sx1-48gb"]) == NVIDIA_IMAGE
    assert image_for(sizes["gpu-h100x8-640gb"]) == NVIDIA_MULTI_IMAGE
    assert image_for(sizes["gpu-mi300x1-192gb"]) == AMD_IMAGE
    assert image_for(sizes["gpu-mi300x1-192gb"], "my-snapshot") == "my-snapshot"


def test_unknown_gpu_models_keep_a_readable_name_and_bad_sizes_are_skipped() -> None:
    assert accelerator_name("nvidia_b300") == "B300"
    assert accelerator_name("amd_mi999x") == "MI999X"
    assert parse_size({"slug": "x"}, "tor1") is None
    assert parse_size({"slug": "x", "vcpus": 1, "memory": 1024, "price_hourly": "n/a"}, "tor1") is None


def test_capacity_errors_say_what_to_try() -> None:
    size = next(s for s in parse_sizes(SIZES, "tor1") if s.slug == "gpu-h100x1-80gb")
    exc = DigitalOceanAPIError(
        "create droplet", 422, "unprocessable_entity", "temporarily unavailable because of GPU capacity",
        {"id": "unprocessable_entity", "message": "temporarily unavailable because of GPU capacity"},
    )  # fmt: skip
    explained = explain_create_error(exc, size, "tor1", created=1, total=2)
    assert isinstance(explained, ProvisioningError)
    text = str(explained)
    assert "no capacity for gpu-h100x1-80gb in tor1" in text and "1 of 2 droplets" in text
    assert "nyc2" in text and "atl1" in text  # where the size is offered, from GET /v2/sizes
    assert "another size" in text and "later" in text
    limit = DigitalOceanAPIError("create droplet", 422, "unprocessable_entity", "will exceed your droplet limit", {})
    assert "limit" in str(explain_create_error(limit, size, "tor1", 0, 1))


def test_a_test_whose_fake_recorded_a_violation_fails() -> None:
    from types import SimpleNamespace

    from providers_support import fail_on_violations

    fail_on_violations(SimpleNamespace(violations=[]), "DigitalOcean")  # nothing recorded: passes
    recorded = SimpleNamespace(violations=["inbound rule open to the whole internet: 0.0.0.0/0"])
    with pytest.raises(pytest.fail.Exception, match=r"0\.0\.0\.0/0"):
        fail_on_violations(recorded, "DigitalOcean")


# -- the firewall's documented rules ------------------------------------------------------


@given(pool_ids, epochs, st.integers(min_value=1, max_value=65000), st.integers(min_value=0, max_value=64))
def test_every_firewall_a_pool_sends_obeys_the_documented_rules(pool: str, expires: int, port: int, extra: int) -> None:
    from skyward_digitalocean.firewall import firewall_body, firewall_problems

    body = firewall_body(resource_name(pool, expires), pool_tag(pool, expires), "203.0.113.7/32", (port, port + extra))
    assert firewall_problems(body) == []
    assert all("ports" in rule for rule in [*body["inbound_rules"], *body["outbound_rules"]])


@pytest.mark.parametrize(
    ("rule", "why"),
    [
        ({"protocol": "icmp", "sources": {"tags": ["t"]}}, "ports is required (for icmp rules too)"),
        ({"protocol": "sctp", "ports": "1", "sources": {"tags": ["t"]}}, "protocol 'sctp'"),
        ({"protocol": "tcp", "ports": 22, "sources": {"tags": ["t"]}}, "not a string"),
        ({"protocol": "tcp", "ports": "70000", "sources": {"tags": ["t"]}}, "1-65535"),
        ({"protocol": "tcp", "ports": "9-8", "sources": {"tags": ["t"]}}, "1-65535"),
        ({"protocol": "tcp", "ports": "22", "sources": {}}, "sources is required"),
        ({"protocol": "tcp", "ports": "22", "sources": {"cidrs": ["x"]}}, "unknown keys"),
    ],
)
def test_a_firewall_rule_the_api_would_refuse_is_named(rule: dict[str, object], why: str) -> None:
    from skyward_digitalocean.firewall import firewall_problems

    (problem,) = firewall_problems({"name": "skyward-x-1", "inbound_rules": [rule]})
    assert why in problem and problem.startswith("inbound rule 0")
    assert firewall_problems({"name": "-x", "outbound_rules": []}) == [
        "name '-x': letters, digits, '.' and '-', starting with a letter or digit",
        "a firewall needs at least one inbound or outbound rule",
    ]
