"""Bearer-authenticated HTTPS calls on the retry rules of
:mod:`skyward.providers.cloud.retry`.

:class:`BearerSession` is the request loop every requests-based client shares: the
credential in the ``Authorization`` header, one more try with a fresh token when the API
refuses one (Verda's OAuth tokens can be revoked early), the accepted statuses, the
retries. :class:`JsonAPI` is a JSON client on it with a fixed key: what a provider whose
API is a handful of JSON calls needs (VastAI's REST API, RunPod's GraphQL endpoint).

The key travels only in the ``Authorization`` header, never in a URL (URLs end up in
proxies' and servers' logs), and never in an error message. Plain http is refused except
on a loopback address (a test double).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypedDict, Unpack
from urllib.parse import urlsplit

import requests

from skyward.errors import ConfigurationError, ProvisioningError
from skyward.providers.cloud.addresses import is_loopback
from skyward.providers.cloud.retry import Backoff, Failure, call_with_retry
from skyward.providers.cloud.settings import CloudSettings

JSON = Any  # what json.loads returns

ACCEPTED = (200, 201, 202, 204)
"""The statuses a call accepts unless it names its own ``ok``."""


class Options(TypedDict, total=False):
    """What a call may add to its method and path (one declaration for every client)."""

    params: Mapping[str, Any] | None  # the query string
    body: JSON  # sent as JSON
    ok: Sequence[int]  # the statuses accepted (default: ACCEPTED); any other is an error
    retry_as: str | None  # the method whose retry rules apply (default: the call's own)


class APIError(ProvisioningError):
    """A provider's API call failed; ``status`` (None: no answer) and ``api_message`` are
    the API's own."""

    def __init__(self, provider: str, action: str, status: int | None, message: str, code: str = "") -> None:
        self.provider = provider
        self.action = action
        self.status = status
        self.api_message = message
        self.api_code = code  # the body's machine-readable "error" (VastAI's "invalid_args"), "" if none
        where = f"HTTP {status}" if status is not None else "no response"
        super().__init__(f"{provider} API: {action} failed ({where}): {message}")


class HTTPStatusError(Exception):
    """An answer whose status the call does not accept, raised inside a retried call so
    that :func:`classify` can read its status and ``Retry-After``; every client over
    requests (this one, Verda's OAuth client) raises this one."""

    def __init__(self, response: requests.Response) -> None:
        super().__init__(response.status_code)
        self.response = response


def check_api_url(provider: str, url: str, secret: str = "the API key") -> str:
    """``url`` without its trailing slash; plain http only on loopback (it would send
    ``secret`` unencrypted)."""
    parts = urlsplit(url)
    if parts.scheme != "https" and not (parts.scheme == "http" and is_loopback(parts.hostname)):
        raise ConfigurationError(
            f"{provider}(api_url={url!r}): use https (plain http would send {secret} unencrypted; it is "
            "allowed only on a loopback address, for test doubles)"
        )
    return url.rstrip("/")


def classify(exc: BaseException) -> Failure | None:
    """How :func:`~skyward.providers.cloud.retry.call_with_retry` sees a requests call's
    failure: a refused or unreachable connection was never sent (safe to repeat)."""
    if isinstance(exc, HTTPStatusError):
        return Failure(status=exc.response.status_code, sent=True, headers=dict(exc.response.headers))
    if isinstance(exc, requests.ConnectionError) and not isinstance(exc, requests.ReadTimeout):
        return Failure(status=None, sent=False, headers={})  # refused or unreachable: never arrived
    if isinstance(exc, requests.RequestException):
        return Failure(status=None, sent=True, headers={})
    return None


def _message(response: requests.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:300] or "no message"
    if isinstance(body, dict):
        for key in ("msg", "message", "error", "detail"):
            if body.get(key):
                return str(body[key])[:300]
    return str(body)[:300]


def _code(response: requests.Response) -> str:
    """The body's ``error`` when it is a short code beside a message (``{"error":
    "invalid_args", "msg": ...}``), else ""."""
    try:
        body = response.json()
    except ValueError:
        return ""
    code = body.get("error") if isinstance(body, dict) and body.get("msg") else None
    return code if isinstance(code, str) else ""


class Credential(Protocol):
    """What a request carries as ``Authorization: Bearer <token>``."""

    def token(self) -> str: ...

    def refused(self, token: str) -> bool:
        """The API answered 401 to ``token``: whether a new token is worth one more try."""
        ...


@dataclass(frozen=True, slots=True)
class StaticKey:
    """An API key: the same token every time; a refused key stays refused."""

    key: str = field(repr=False)  # never in a log line

    def token(self) -> str:
        return self.key

    def refused(self, token: str) -> bool:
        return False


class BearerSession:
    """Blocking requests to ``base_url`` (already checked) carrying ``credential``."""

    def __init__(
        self,
        base_url: str,
        credential: Credential,
        *,
        user_agent: str,
        timeout: float,
        backoff: Backoff,
        sleep: Callable[[float], None] = time.sleep,
        session: requests.Session | None = None,
    ) -> None:
        self.base_url = base_url
        self.session = session or requests.Session()
        self._credential = credential
        self._user_agent = user_agent
        self._timeout = timeout
        self._backoff = backoff
        self._sleep = sleep

    def close(self) -> None:
        self.session.close()

    def send(self, method: str, path: str, **options: Unpack[Options]) -> requests.Response:
        """The answer, once its status is accepted; after the retries, the last
        :class:`HTTPStatusError` or ``requests.RequestException`` (for the client to name).
        ``retry_as`` serves a GraphQL read: a POST that may be repeated like a GET."""
        ok = options.get("ok", ACCEPTED)

        def attempt(token: str) -> requests.Response:
            return self.session.request(
                method,
                f"{self.base_url}{path}",
                params=options.get("params"),
                json=options.get("body"),
                timeout=self._timeout,
                headers={"Authorization": f"Bearer {token}", "User-Agent": self._user_agent},
            )

        def once() -> requests.Response:
            token = self._credential.token()
            response = attempt(token)
            if response.status_code == 401 and self._credential.refused(token):
                response = attempt(self._credential.token())  # expired or revoked early: once more
            if response.status_code not in ok:
                raise HTTPStatusError(response)
            return response

        retry_as = options.get("retry_as") or method
        return call_with_retry(once, method=retry_as, classify=classify, backoff=self._backoff, sleep=self._sleep)


class JsonAPI:
    """Blocking JSON calls to ``base_url`` with ``Authorization: Bearer <key>``."""

    def __init__(
        self,
        provider: str,
        base_url: str,
        key: str,
        *,
        timeout: float,
        backoff: Backoff,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.provider = provider
        self.base_url = check_api_url(provider, base_url)
        self._http = BearerSession(
            self.base_url,
            StaticKey(key),
            user_agent=f"skyward-{provider.lower()}",
            timeout=timeout,
            backoff=backoff,
            sleep=sleep,
        )

    @classmethod
    def for_cloud(
        cls,
        provider: str,
        settings: CloudSettings,
        api_url: str,
        key: str,
        sleep: Callable[[float], None] = time.sleep,
    ) -> JsonAPI:
        """A client on a cloud config's own ``api_timeout``/``api_retries``/``api_backoff``
        (the one mapping from settings to client, which VastAI and RunPod had each written)."""
        backoff = Backoff(attempts=settings.api_retries, base=settings.api_backoff)
        return cls(provider, api_url, key, timeout=settings.api_timeout, backoff=backoff, sleep=sleep)

    def close(self) -> None:
        self._http.close()

    def call(self, action: str, method: str, path: str, **options: Unpack[Options]) -> JSON:
        """The answer's JSON (None when empty); an :class:`APIError` after the retries."""
        try:
            response = self._http.send(method, path, **options)
        except HTTPStatusError as exc:
            response = exc.response
            raise APIError(self.provider, action, response.status_code, _message(response), _code(response)) from None
        except requests.RequestException as exc:
            raise APIError(self.provider, action, None, type(exc).__name__) from None
        if not response.content:
            return None
        try:
            return response.json()
        except ValueError:
            raise APIError(self.provider, action, response.status_code, "the answer is not JSON") from None
