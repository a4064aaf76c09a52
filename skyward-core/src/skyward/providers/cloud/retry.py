"""Retrying API calls: rate limits (HTTP 429) always, other failures only where safe.

A request refused with 429 was not carried out, so any method may repeat it. A server
error (5xx) or a lost response may come after the server acted: only idempotent methods
repeat then, never a POST that creates a machine (a second one would be billed). A
request that never reached the server (connection refused) may always repeat.

Waits follow ``Retry-After`` when the server sends it, else a ``ratelimit-reset`` time
once ``ratelimit-remaining`` is 0 (as DigitalOcean and Verda send it), else an
exponential backoff with jitter.

Some failures no retry can fix, and they fail at once: the API's host name does not
resolve (a typo in ``api_url``, no network or no DNS) or its certificate does not verify.
Retrying those eight times would take 78 s (measured by opening a pool in an offline
network namespace) before DigitalOcean reported an unreachable API; failing at once takes
0.2 s.
"""

from __future__ import annotations

import email.utils
import random
import socket
import ssl
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")

RATE_LIMITED = 429
SERVER_ERRORS = frozenset({500, 502, 503, 504})
IDEMPOTENT = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})


@dataclass(frozen=True, slots=True)
class Failure:
    """How a call failed, as far as retrying cares.

    status:  the HTTP status, or None when no response came back.
    sent:    whether the request may have reached the server.
    headers: the response headers (empty without a response).
    """

    status: int | None
    sent: bool
    headers: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class Backoff:
    """``attempts`` tries in all; the n-th wait is about ``base * 2**n`` s, at most ``cap``."""

    attempts: int = 8
    base: float = 0.5
    cap: float = 30.0

    def delay(self, retry: int, retry_after: float | None, rng: random.Random) -> float:
        """Seconds to wait before retry number ``retry`` (0 for the first)."""
        if retry_after is not None:
            return min(self.cap, max(0.0, retry_after))
        ceiling = min(self.cap, self.base * 2.0**retry)
        return ceiling / 2 + rng.uniform(0.0, ceiling / 2)  # "equal jitter": never 0, never in lockstep


def should_retry(method: str, failure: Failure) -> bool:
    if failure.status == RATE_LIMITED:
        return True
    if not failure.sent:
        return True
    idempotent = method.upper() in IDEMPOTENT
    if failure.status is None:
        return idempotent
    return failure.status in SERVER_ERRORS and idempotent


def retry_after(headers: Mapping[str, str], now: float) -> float | None:
    """The wait the server asked for, in seconds, or None."""
    lower = {k.lower(): v for k, v in headers.items()}
    value = lower.get("retry-after")
    if value:
        try:
            return max(0.0, float(value))
        except ValueError:
            try:
                when = email.utils.parsedate_to_datetime(value)
            except (TypeError, ValueError):
                when = None
            if when is not None:
                return max(0.0, when.timestamp() - now)
    if lower.get("ratelimit-remaining", "").strip() == "0" and "ratelimit-reset" in lower:
        try:
            return max(0.0, float(lower["ratelimit-reset"]) - now)
        except ValueError:
            return None
    return None


HOPELESS: tuple[type[BaseException], ...] = (socket.gaierror, ssl.SSLCertVerificationError)
"""Failures that repeating the request cannot fix (see the module docstring)."""


def hopeless(exc: BaseException) -> BaseException | None:
    """The failure in ``exc``'s chain that no retry can fix, if there is one. HTTP
    clients wrap the socket's error several layers deep (requests, urllib3, azure-core):
    follow causes, contexts, ``reason``/``inner_exception`` and exception arguments."""
    seen: set[int] = set()
    todo: list[object] = [exc]
    while todo:
        item = todo.pop()
        if not isinstance(item, BaseException) or id(item) in seen or len(seen) > 50:
            continue
        seen.add(id(item))
        if isinstance(item, HOPELESS):
            return item
        todo += [item.__cause__, item.__context__, *item.args]
        todo += [getattr(item, name, None) for name in ("reason", "inner_exception")]
    return None


def call_with_retry(
    fn: Callable[[], T],
    *,
    method: str,
    classify: Callable[[BaseException], Failure | None],
    backoff: Backoff,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.time,
    rng: random.Random | None = None,
) -> T:
    """``fn()``, repeated as this module's rules allow. ``classify`` turns an exception
    into a Failure (None: not an API failure, raise it as it is)."""
    rng = rng or random.Random()
    retry = 0
    while True:
        try:
            return fn()
        except Exception as exc:
            failure = classify(exc)
            if failure is None or retry + 1 >= backoff.attempts or not should_retry(method, failure):
                raise
            if hopeless(exc) is not None:
                raise
            sleep(backoff.delay(retry, retry_after(failure.headers, clock()), rng))
            retry += 1
