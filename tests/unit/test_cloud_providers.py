"""What the HTTP cloud providers share (skyward.providers.cloud): retries, the client's
address, expiry and reaping rules."""

from __future__ import annotations

import random
import socket
import time
from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from skyward.errors import ConfigurationError, ProvisioningError
from skyward.providers.cloud.addresses import client_address, firewall_source, parse_client_address
from skyward.providers.cloud.naming import PoolMark, expired_names, expiry, is_expired
from skyward.providers.cloud.reaping import delete_doomed
from skyward.providers.cloud.retry import Backoff, Failure, call_with_retry, retry_after, should_retry
from skyward.providers.cloud.settings import check_attempts, check_port, check_seconds, check_urls
from skyward.providers.cloud.sizing import NodeSize, node_request
from skyward.units import MIB

# -- the client's address -------------------------------------------------------------------


def test_client_address_is_one_ipv4_host() -> None:
    assert firewall_source(parse_client_address(" 203.0.113.7\n", "x")) == "203.0.113.7/32"
    for bad in ("0.0.0.0", "224.0.0.1", "169.254.1.1", "::1", "10.0.0.0/8"):
        with pytest.raises(ConfigurationError):
            parse_client_address(bad, "x")


def test_a_given_address_is_checked_and_names_the_provider() -> None:
    assert str(client_address("203.0.113.7", "http://127.0.0.1:9/", 1.0, "Verda")) == "203.0.113.7"
    with pytest.raises(ConfigurationError, match=r"^DigitalOcean\(client_address=\.\.\.\): '0\.0\.0\.0'"):
        client_address("0.0.0.0", "http://127.0.0.1:9/", 1.0, "DigitalOcean")


def test_failed_discovery_says_how_to_pass_the_address_to_this_provider() -> None:
    with socket.socket() as sock:  # a loopback port nobody listens on: the request is refused
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(ProvisioningError, match=r"Verda\(client_address='203\.0\.113\.7'\)"):
        client_address(None, f"http://127.0.0.1:{port}/whoami", 2.0, "Verda")


# -- settings ------------------------------------------------------------------------------


def test_settings_errors_name_the_provider_and_the_setting() -> None:
    config = SimpleNamespace(poll=0.5, wait=0, url="https://x", other="ftp://x")
    check_port("P", "agent_port", 16789)
    check_seconds("P", config, ["poll"])
    check_attempts("P", "api_retries", 1)
    check_urls("P", config, ["url"])
    for bad_port in (0, 65536, True, "22", 1.0):
        with pytest.raises(ConfigurationError, match=r"^P\(agent_port=.*\) must be a TCP port"):
            check_port("P", "agent_port", bad_port)
    with pytest.raises(ConfigurationError, match=r"^P\(wait=0\) must be a positive number of seconds"):
        check_seconds("P", config, ["poll", "wait"])
    for bad_attempts in (0, True, 2.0):
        with pytest.raises(ConfigurationError, match=r"^P\(api_retries=.*\) must be an integer >= 1"):
            check_attempts("P", "api_retries", bad_attempts)
    with pytest.raises(ConfigurationError, match=r"^P\(other='ftp://x'\) must be an http\(s\) URL"):
        check_urls("P", config, ["url", "other"])


# -- sizing --------------------------------------------------------------------------------


def test_a_node_must_hold_every_worker_it_runs() -> None:
    spec = SimpleNamespace(workers_per_node=4, accelerator=None, cpu=2, memory_mb=512, machine="m")
    assert node_request(spec) == NodeSize(accelerator=None, cpu=8, memory=4 * 512 * MIB, machine="m")
    unset = SimpleNamespace(workers_per_node=4, accelerator="H100", cpu=None, memory_mb=None, machine=None)
    assert node_request(unset) == NodeSize(accelerator="H100", cpu=None, memory=None, machine=None)


# -- expiry and reaping ---------------------------------------------------------------------


def test_expiry_covers_bootstrap_timeout_and_margin() -> None:
    assert expiry(1000.0, timeout=600, bootstrap_timeout=300, ttl_margin=60) == 1000 + 300 + 600 + 60 + 300


def test_only_expired_marks_of_pools_without_nodes_go() -> None:
    assert is_expired(PoolMark("a", 10), now=11, live_pools=set())
    assert not is_expired(PoolMark("a", 10), now=10, live_pools=set())
    assert not is_expired(PoolMark("a", 10), now=11, live_pools={"a"})
    assert not is_expired(None, now=11, live_pools=set())
    marks = {"x-old": PoolMark("x", 5), "y-live": PoolMark("y", 5), "z-new": PoolMark("z", 50)}
    assert expired_names([*marks, "foreign"], marks.get, now=10, live_pools={"y"}) == ["x-old"]


def test_one_failed_deletion_is_reported_and_the_rest_go_on() -> None:
    class Refused(Exception):
        pass

    deleted: list[str] = []

    def delete(resource: Mapping[str, Any]) -> None:
        if resource["id"] == 2:
            raise Refused("in use")
        deleted.append(str(resource["name"]))

    listed = [{"id": 1, "name": "old-1"}, {"id": 2, "name": "old-2"}, {"id": 3, "name": "keep"}, {"id": 4}]
    failures: list[str] = []
    gone = delete_doomed(listed, lambda name: name.startswith("old"), delete, "SSH key", Refused, failures)
    assert gone == deleted == ["old-1"]
    assert failures == ["SSH key old-2: in use"]
    with pytest.raises(KeyError):  # not the API's refusal: it propagates
        delete_doomed([{"name": "old"}], lambda name: True, lambda r: r["id"], "tag", Refused, [])


# -- retries ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "failure", "expected"),
    [
        ("POST", Failure(429, True, {}), True),
        ("POST", Failure(500, True, {}), False),  # the machine may exist: never a second one
        ("POST", Failure(None, True, {}), False),  # timed out after sending
        ("POST", Failure(None, False, {}), True),  # never reached the server
        ("GET", Failure(503, True, {}), True),
        ("DELETE", Failure(None, True, {}), True),
        ("GET", Failure(404, True, {}), False),
        ("GET", Failure(422, True, {}), False),
    ],
)
def test_what_is_retried(method: str, failure: Failure, expected: bool) -> None:
    assert should_retry(method, failure) is expected


@given(st.integers(min_value=0, max_value=20), st.floats(min_value=0.001, max_value=5), st.integers())
def test_backoff_grows_and_stays_under_the_cap(retry: int, base: float, seed: int) -> None:
    backoff = Backoff(attempts=5, base=base, cap=30.0)
    delay = backoff.delay(retry, None, random.Random(seed))
    ceiling = min(30.0, base * 2**retry)
    assert ceiling / 2 <= delay <= ceiling


def test_retry_after_headers() -> None:
    now = 1_000_000.0
    assert retry_after({"Retry-After": "3"}, now) == 3.0
    assert retry_after({"ratelimit-remaining": "0", "ratelimit-reset": str(int(now) + 7)}, now) == 7.0
    assert retry_after({"ratelimit-remaining": "12", "ratelimit-reset": str(int(now) + 7)}, now) is None
    assert retry_after({"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}, 1.7e9) == 0.0  # in the past
    assert retry_after({"Retry-After": "Wed, 21 Oct 2015 07:28:10 GMT"}, 1445412480.0) == 10.0
    assert retry_after({}, now) is None


def test_call_with_retry_repeats_429_then_gives_up() -> None:
    calls: list[int] = []
    waits: list[float] = []

    class RateLimited(Exception):
        pass

    def fn() -> int:
        calls.append(1)
        raise RateLimited

    with pytest.raises(RateLimited):
        call_with_retry(
            fn, method="POST", classify=lambda e: Failure(429, True, {}), backoff=Backoff(attempts=4, base=0.1),
            sleep=waits.append, clock=time.time, rng=random.Random(1),
        )  # fmt: skip
    assert len(calls) == 4 and len(waits) == 3
    assert waits[0] < waits[2]  # backing off


def _wrapped(inner: BaseException) -> Exception:
    """``inner`` the way an HTTP client hands it over: a few layers deep."""
    try:
        try:
            raise inner
        except BaseException as exc:
            raise OSError("connection failed") from exc
    except OSError as exc:
        return RuntimeError(exc)  # as an argument, like requests' ConnectionError(MaxRetryError)


def test_a_host_name_that_does_not_resolve_fails_at_once_instead_of_eight_times() -> None:
    import socket
    import ssl

    def attempt(error: Exception) -> int:
        calls = 0

        def fn() -> None:
            nonlocal calls
            calls += 1
            raise error

        with pytest.raises(type(error)):
            call_with_retry(
                fn, method="GET", classify=lambda e: Failure(None, False, {}), backoff=Backoff(attempts=8),
                sleep=lambda s: None,
            )  # fmt: skip
        return calls

    assert attempt(_wrapped(socket.gaierror(-2, "Name or service not known"))) == 1
    assert attempt(_wrapped(ssl.SSLCertVerificationError("certificate verify failed"))) == 1
    assert attempt(_wrapped(ConnectionRefusedError("refused"))) == 8  # may come back: retried
