"""The pieces of an HTTP client that every provider shares (one home each)."""

from __future__ import annotations

from typing import Any

import harness
import pytest
import requests

import skyward.testing
from skyward.providers.cloud import http
from skyward.providers.cloud.addresses import is_loopback
from skyward.providers.cloud.retry import Backoff


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("localhost", True),
        ("127.0.0.1", True),
        ("127.9.8.7", True),
        ("::1", True),
        ("", False),
        (None, False),
        ("10.0.0.1", False),
        ("api.example.com", False),
        ("localhost.example.com", False),
    ],
)
def test_only_this_machine_counts_as_loopback(host: str | None, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_verda_retries_by_the_core_rules() -> None:
    pytest.importorskip("skyward_verda")
    from skyward_verda import api

    assert api.classify is http.classify
    assert api.HTTPStatusError is http.HTTPStatusError


def test_the_test_harness_exports_exactly_the_public_testing_names() -> None:
    assert harness.__all__ == skyward.testing.__all__
    assert all(getattr(harness, name) is getattr(skyward.testing, name) for name in skyward.testing.__all__)


class _Answers(requests.Session):
    """A session whose answers are given in advance; it records each request's token."""

    def __init__(self, *statuses: int) -> None:
        super().__init__()
        self.statuses = list(statuses)
        self.tokens: list[str] = []

    def request(self, method: str | bytes, url: str | bytes, *args: Any, **kwargs: Any) -> requests.Response:
        self.tokens.append(kwargs["headers"]["Authorization"].removeprefix("Bearer "))
        response = requests.Response()
        response.status_code = self.statuses.pop(0)
        response._content = b"{}"
        return response


class _Rotating:
    def __init__(self) -> None:
        self.issued = 0

    def token(self) -> str:
        return f"t{self.issued}"

    def refused(self, token: str) -> bool:
        self.issued += 1
        return True


def _bearer(session: requests.Session, credential: http.Credential, sleeps: list[float]) -> http.BearerSession:
    backoff = Backoff(attempts=3, base=0.01)
    return http.BearerSession(
        "http://127.0.0.1:9", credential, user_agent="t", timeout=1.0, backoff=backoff, sleep=sleeps.append,
        session=session,
    )  # fmt: skip


def test_a_refused_token_is_renewed_once_and_the_request_sent_again() -> None:
    session = _Answers(401, 200)
    response = _bearer(session, _Rotating(), []).send("GET", "/x")
    assert response.status_code == 200 and session.tokens == ["t0", "t1"]


def test_a_refused_api_key_is_not_sent_again_and_never_shown() -> None:
    session = _Answers(401)
    key = http.StaticKey("secret-key-123")
    with pytest.raises(http.HTTPStatusError):
        _bearer(session, key, []).send("GET", "/x")
    assert session.tokens == ["secret-key-123"]  # a 4xx is not retried either
    assert "secret-key-123" not in repr(key)


def test_a_server_error_is_retried_by_the_core_rules() -> None:
    session, sleeps = _Answers(503, 503, 200), []
    assert _bearer(session, http.StaticKey("k"), sleeps).send("GET", "/x").status_code == 200
    assert len(session.tokens) == 3 and len(sleeps) == 2
