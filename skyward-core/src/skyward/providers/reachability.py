"""Telling "the API could not be reached" from "the API refused the credentials".

A cloud client wraps a network failure in its own error class (azure-core's
``ServiceRequestError`` for DigitalOcean, botocore's ``EndpointConnectionError`` for AWS,
requests' ``ConnectionError`` for the others), the same class or family it raises for an
HTTP 401. Reporting both as "credentials not accepted" sends a user who is offline to
create a new token. The cause is still in the exception chain (``__cause__`` /
``__context__``): a ``socket.gaierror``, a refused or timed-out connection, or one of the
HTTP libraries' connection errors. :func:`unreachable` walks that chain (pure: no network,
no import of any client library) and names the host and the reason.
"""

from __future__ import annotations

import errno
import re
import socket
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["Unreachable", "unreachable"]

# The HTTP libraries' connection failures, by class name so that core imports none of them:
# urllib3 (NameResolutionError, NewConnectionError, ConnectTimeoutError, MaxRetryError of
# one), requests (ConnectionError, ConnectTimeout), botocore (EndpointConnectionError,
# ConnectTimeoutError), azure-core (ServiceRequestError: no response at all), httpx
# (ConnectError, ConnectTimeout).
_CONNECTION_CLASSES = frozenset(
    {
        "NameResolutionError",
        "NewConnectionError",
        "ConnectTimeoutError",
        "EndpointConnectionError",
        "ConnectError",
        "ConnectTimeout",
        "ServiceRequestError",
        "ProxyError",
    }
)
_NETWORK_ERRNOS = frozenset({errno.ENETUNREACH, errno.EHOSTUNREACH, errno.ENETDOWN, errno.ECONNREFUSED})
_HOST_PATTERNS = (
    re.compile(r"host='([^']+)'"),
    re.compile(r"https?://([A-Za-z0-9.\-]+|\[[0-9A-Fa-f:]+\])"),
    re.compile(r"Failed to resolve '([^']+)'"),
)
_DEPTH = 12  # chains are a handful deep; a cycle must not loop


@dataclass(frozen=True, slots=True)
class Unreachable:
    """An API that did not answer: ``host`` (``"?"`` when no error names it) and why."""

    host: str
    """The host that did not answer (``"?"`` when no error names it)."""
    reason: str
    """Why, in words: the name does not resolve, the connection was refused, a timeout."""

    def __str__(self) -> str:
        return f"could not reach {self.host}: {self.reason}"


def _chain(error: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen and len(seen) < _DEPTH:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _reason(error: BaseException) -> str | None:
    if isinstance(error, socket.gaierror):
        return f"the name does not resolve ({error.strerror or error})"
    if isinstance(error, ConnectionRefusedError):
        return "connection refused"
    if isinstance(error, TimeoutError):
        return "timed out"
    if isinstance(error, ConnectionError):
        return f"connection failed ({error})"
    if isinstance(error, OSError) and error.errno in _NETWORK_ERRNOS:
        return f"network unreachable ({error.strerror or error})"
    if type(error).__name__ in _CONNECTION_CLASSES:
        text = str(error)
        if "resolve" in text.lower():
            return "the name does not resolve"
        if "timed out" in text.lower() or "timeout" in type(error).__name__.lower():
            return "timed out"
        if "refused" in text.lower():
            return "connection refused"
        return f"no connection ({type(error).__name__})"
    return None


def unreachable(error: BaseException, host: str = "?") -> Unreachable | None:
    """The network failure behind ``error``, or ``None`` when the API answered (a refused
    token, a bad request) or the error is not a network one. The deepest cause gives the
    reason (a resolver error says more than the wrapper around it); ``host`` is used
    when no error in the chain names one."""
    chain = list(_chain(error))
    reasons = [r for r in map(_reason, chain) if r is not None]
    if not reasons:
        return None
    named = host
    for item in chain:
        for pattern in _HOST_PATTERNS:
            found = pattern.search(str(item))
            if found:
                named = found.group(1)
                break
        else:
            continue
        break
    return Unreachable(named, reasons[-1])
