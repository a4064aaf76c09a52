"""The pure parts of skyward.secrets: resolving env, and redacting secret values."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

import skyward as sky
from skyward.errors import ConfigurationError
from skyward.secrets import REDACTED, redact, resolve_env, secret_values

_text = st.text(alphabet=st.characters(blacklist_characters="\0*"), max_size=30)


@given(_text.filter(bool), _text, _text)
def test_a_secret_inside_any_line_is_redacted_and_the_rest_kept(secret: str, before: str, after: str) -> None:
    line = redact(before + secret + after, secret_values({"T": sky.Secret(secret)}))
    assert secret not in line
    assert REDACTED in line


@given(_text)
def test_plain_values_are_never_redacted(value: str) -> None:
    line = f"value={value}"
    assert redact(line, secret_values({"P": value})) == line


def test_the_longer_of_two_overlapping_secrets_goes_first() -> None:
    values = secret_values({"A": sky.Secret("abc"), "B": sky.Secret("abcdef"), "C": sky.Secret("")})
    assert values == ("abcdef", "abc")  # an empty secret would mark every line
    assert redact("x abcdef y abc", values) == "x *** y ***"


def test_resolving_reveals_secrets_and_keeps_plain_values() -> None:
    assert resolve_env({"A": sky.Secret("s"), "B": "p"}) == {"A": "s", "B": "p"}


def test_a_secret_of_a_non_string_is_refused_naming_the_constructors() -> None:
    with pytest.raises(ConfigurationError, match=r"Secret\.from_env"):
        sky.Secret(42)  # type: ignore[arg-type]
