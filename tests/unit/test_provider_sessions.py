"""The shared pieces of the plugins' CLI sessions (skyward.providers.sessions)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from skyward.errors import ConfigurationError, ProvisioningError
from skyward.providers import CredentialCheck, config_for, credential_check, reported_as


@dataclass(frozen=True)
class FakeConfig:
    region: str = "here"


class Refused(Exception):
    pass


def test_no_config_opens_the_default_one() -> None:
    assert config_for(None, FakeConfig, "fake") == FakeConfig()


def test_a_config_of_another_class_is_refused_naming_the_class_wanted() -> None:
    with pytest.raises(ConfigurationError, match=r"the fake tools take a FakeConfig\(\.\.\.\) configuration, got 3"):
        config_for(3, FakeConfig, "fake")


def test_an_api_error_becomes_a_provisioning_error_saying_what_was_done() -> None:
    with pytest.raises(ProvisioningError, match=r"^while listing boxes: 503 busy$") as caught:
        with reported_as("listing boxes", Refused):
            raise Refused("503 busy")
    assert isinstance(caught.value.__cause__, Refused)


def test_other_exceptions_pass_through_unchanged() -> None:
    with pytest.raises(KeyError):
        with reported_as("listing boxes", Refused):
            raise KeyError("x")


def test_missing_credentials_are_not_read_with() -> None:
    reads: list[int] = []

    def find() -> None:
        raise ConfigurationError("FAKE_KEY is not set (see the docs)")

    check = credential_check(
        "fake",
        find=find,
        read=lambda: reads.append(1),
        error=Refused,
        missing=lambda error: str(error).split(" (")[0],
        accepted="ok",
        fix="export FAKE_KEY",
    )
    assert check == CredentialCheck("fake", False, False, "FAKE_KEY is not set", "export FAKE_KEY")
    assert reads == []


def test_refused_credentials_are_found_but_not_valid() -> None:
    def read() -> None:
        raise Refused("401 unauthorized")

    check = credential_check(
        "fake", find=lambda: None, read=read, error=Refused, missing="none", accepted="ok", fix="fix it"
    )
    assert check == CredentialCheck("fake", True, False, "401 unauthorized", "fix it")


def test_accepted_credentials_need_no_fix() -> None:
    check = credential_check(
        "fake", find=lambda: None, read=lambda: None, error=Refused, missing="none", accepted="key ok", fix="fix it"
    )
    assert check == CredentialCheck("fake", True, True, "key ok", "")


@given(st.integers() | st.floats(allow_nan=False) | st.text() | st.none())
def test_a_listing_number_is_read_only_from_a_json_number(value: object) -> None:
    from skyward.providers import parse_number

    read = parse_number(value)
    if isinstance(value, int | float):
        assert read == float(value)
    else:
        assert read is None
