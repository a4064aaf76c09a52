"""The fake Google Cloud's rules as pure functions (tests/fakes/gcp_rules.py, gcp_catalog.py):
they must refuse what Google documents it refuses, and nothing more."""

from __future__ import annotations

import string

import pytest
from fakes.gcp_catalog import TpuType, rfc1035_problem
from fakes.gcp_rules import firewall_problem, labels_problem, metadata_problem
from hypothesis import given
from hypothesis import strategies as st

_LOWER = set(string.ascii_lowercase)
_LABEL_CHARS = _LOWER | set(string.digits) | {"_", "-"}


@given(st.text(alphabet=string.ascii_letters + string.digits + "_-. ", max_size=70))
def test_a_label_key_is_accepted_exactly_when_google_s_requirements_hold(key: str) -> None:
    documented = 0 < len(key) <= 63 and key[0] in _LOWER and set(key) <= _LABEL_CHARS
    assert (labels_problem({key: "v"}) is None) == documented


@given(st.text(alphabet=string.ascii_letters + string.digits + "_-. ", max_size=70))
def test_a_label_value_may_be_empty_but_not_uppercase_or_long(value: str) -> None:
    documented = len(value) <= 63 and set(value) <= _LABEL_CHARS
    assert (labels_problem({"k": value}) is None) == documented


def test_sixty_four_labels_are_the_most_a_resource_takes() -> None:
    assert labels_problem({f"k{i}": "" for i in range(64)}) is None
    assert labels_problem({f"k{i}": "" for i in range(65)}) is not None


@given(st.text(alphabet=string.ascii_lowercase + string.digits + "-A_", max_size=66))
def test_a_name_is_accepted_exactly_when_it_is_rfc_1035(name: str) -> None:
    documented = (
        0 < len(name) <= 63
        and name[0] in _LOWER
        and set(name) <= _LOWER | set(string.digits) | {"-"}
        and not name.endswith("-")
    )
    assert (rfc1035_problem("name", name) is None) == documented


def test_a_startup_script_of_256_kb_fits_and_one_byte_more_does_not() -> None:
    def script(size: int) -> dict[str, object]:
        return {"items": [{"key": "startup-script", "value": "x" * size}]}

    assert metadata_problem(script(256 * 1024)) is None
    assert metadata_problem(script(256 * 1024 + 1)) is not None
    two = {"items": [{"key": "a", "value": "x" * 256 * 1024}, {"key": "b", "value": "x" * 256 * 1024}]}
    assert metadata_problem(two) is not None  # 512 KB in all, keys included


@pytest.mark.parametrize(
    ("kind", "chips", "hosts"),
    [
        ("v4-8", 4, 1), ("v4-16", 8, 2), ("v4-32", 16, 4), ("v4-128", 64, 16),
        ("v5p-8", 4, 1), ("v5p-32", 16, 4),
        ("v5litepod-1", 1, 1), ("v5litepod-4", 4, 1), ("v5litepod-8", 8, 1), ("v5litepod-16", 16, 4),
        ("v5litepod-256", 256, 64), ("v6e-8", 8, 1), ("v6e-16", 16, 4),
    ],
)  # fmt: skip
def test_a_tpu_slice_has_google_s_chips_and_hosts(kind: str, chips: int, hosts: int) -> None:
    assert (TpuType(kind).chips, TpuType(kind).hosts) == (chips, hosts)


def _rule(**change: object) -> dict[str, object]:
    base: dict[str, object] = {
        "name": "fw", "direction": "INGRESS", "sourceRanges": ["203.0.113.0/24"],
        "allowed": [{"IPProtocol": "tcp", "ports": ["22"]}],
    }  # fmt: skip
    return {**base, **change}


@pytest.mark.parametrize(
    ("rule", "refused"),
    [
        (_rule(), False),
        (_rule(allowed=[{"IPProtocol": "tcp", "ports": ["1-65535"]}]), False),
        (_rule(allowed=[{"IPProtocol": "icmp"}]), False),
        (_rule(allowed=[{"IPProtocol": "17"}]), False),
        (_rule(allowed=[{"IPProtocol": "tcp", "ports": ["0"]}]), True),
        (_rule(allowed=[{"IPProtocol": "tcp", "ports": ["70000"]}]), True),
        (_rule(allowed=[{"IPProtocol": "tcp", "ports": ["30-20"]}]), True),
        (_rule(allowed=[{"IPProtocol": "icmp", "ports": ["22"]}]), True),
        (_rule(allowed=[{"IPProtocol": "gre2"}]), True),
        (_rule(denied=[{"IPProtocol": "tcp"}]), True),  # allowed and denied together
        (_rule(sourceRanges=["10.0.0.300/32"]), True),
        (_rule(priority=70000), True),
        (_rule(targetTags=["Bad_Tag"]), True),
        (_rule(sourceRange=["0.0.0.0/0"]), True),  # unknown field
    ],
)
def test_a_firewall_is_refused_exactly_where_the_reference_says(rule: dict[str, object], refused: bool) -> None:
    assert (firewall_problem(rule) is not None) == refused
