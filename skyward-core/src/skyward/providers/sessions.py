"""What every provider plugin's ``tools.py`` session does the same way, written once.

Each plugin's session (``skyward ls``/``down``/``offers``/``doctor``) opens from an
optional config of its own class, checks credentials in two steps (present, then one
read that changes nothing), and turns its API's errors into a ``ProvisioningError``
that says what it was doing. VastAI, RunPod, DigitalOcean and Verda had each written
these out; the plugins now call these helpers, so a rule (e.g. a wrong config type is a
``ConfigurationError`` naming the class wanted) holds for a third-party plugin too. Part
of the provider contract (``skyward.providers``): nothing here imports a CLI library.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, TypeVar

from skyward.errors import ConfigurationError, ProvisioningError
from skyward.providers.reachability import unreachable
from skyward.providers.resources import CredentialCheck

NETWORK_FIX = "check this machine's network connection (or proxy); the credentials were not checked"
"""The fix a credential check gives when the API did not answer at all: no new token."""

if TYPE_CHECKING:  # the type only: the cloud package imports much more than its settings
    from skyward.providers.cloud.settings import CloudSettings

C = TypeVar("C")
S = TypeVar("S", bound="CloudSettings")

CHECK_RETRIES = 2  # one retry: a blip is forgiven, an unreachable API is said within seconds
CHECK_TIMEOUT = 15.0  # seconds for the one read


def for_one_check(config: S) -> S:
    """``config`` for a credential check's one read: at most :data:`CHECK_RETRIES` attempts
    and :data:`CHECK_TIMEOUT` seconds. A pool's defaults (8 attempts, backoff doubling to
    30 s) held ``skyward doctor`` 50 s per unreachable marketplace (RunPod, VastAI,
    measured offline against a closed port); with these it says "could not reach" within
    seconds (0.4 s RunPod, 0.3 s VastAI, 5 s Verda, whose token request retries on its own)."""
    return dataclasses.replace(
        config,
        api_retries=min(config.api_retries, CHECK_RETRIES),
        api_timeout=min(config.api_timeout, CHECK_TIMEOUT),
    )


def config_for(config: object | None, kind: type[C], tools: str) -> C:
    """``config`` when it is a ``kind`` (the default ``kind()`` for None); a
    ConfigurationError naming the class the ``tools`` (the plugin's name) take otherwise."""
    chosen = kind() if config is None else config
    if not isinstance(chosen, kind):
        raise ConfigurationError(f"the {tools} tools take a {kind.__name__}(...) configuration, got {chosen!r}")
    return chosen


class reported_as:
    """Re-raise an API ``error`` as ``ProvisioningError("while <doing>: <error>")`` (the
    command shows ProvisioningErrors as a provider's failure, not as a crash).

    A class rather than ``@contextmanager``: its ``__exit__`` returns None, so mypy knows
    it never swallows an exception and a ``return`` inside the ``with`` type-checks."""

    def __init__(self, doing: str, error: type[Exception]) -> None:
        self._doing = doing
        self._error = error

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if exc is not None and isinstance(exc, self._error):
            raise ProvisioningError(f"while {self._doing}: {exc}") from exc


def credential_check(
    provider: str,
    *,
    find: Callable[[], object],
    read: Callable[[], object],
    error: type[Exception],
    missing: str | Callable[[ConfigurationError], str],
    accepted: str,
    fix: str,
    host: str = "?",
) -> CredentialCheck:
    """``find`` the credentials (a ConfigurationError: not found, said by ``missing``),
    then make one ``read`` that changes nothing (an ``error``: found but refused, unless
    no answer came at all: then unreachable, naming ``host`` when the error does not).
    Three outcomes, because "not set", "set but wrong" and "offline" want different fixes."""
    try:
        find()
    except ConfigurationError as exc:
        return CredentialCheck(provider, False, False, missing if isinstance(missing, str) else missing(exc), fix)
    try:
        read()
    except error as exc:
        offline = unreachable(exc, host)
        if offline is not None:
            return CredentialCheck(provider, True, False, str(offline), NETWORK_FIX, reachable=False)
        return CredentialCheck(provider, True, False, str(exc), fix)
    return CredentialCheck(provider, True, True, accepted, fix="")
