"""boto3 sessions and clients, the credentials check, and AWS errors in words.

Credentials come from boto3's usual chain and stay in this process: the driver passes
none to any node, user-data or log.

boto3 and ``botocore.config`` are imported by :func:`new_session` and
:func:`client_config`, when a session or a client is made, not with this module:
``skyward ls``, ``down``, ``offers`` and ``doctor`` import every installed provider's
tools (this module with them), and those two are ~160 modules and ~50 ms (measured with
``sys.modules`` and ``time.perf_counter`` around the import, the plugins loaded) that only
a command which opens an AWS session needs. ``botocore.exceptions`` (8 modules, ~2 ms) is
imported at the top: the ``except`` clauses need it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError, NoCredentialsError

from skyward.errors import ConfigurationError, ProvisioningError, QuotaError, SkywardError
from skyward_aws.launch import QUOTA_CODES

NO_CREDENTIALS = (
    "no AWS credentials found. boto3 looked in the environment (AWS_ACCESS_KEY_ID and "
    "AWS_SECRET_ACCESS_KEY, or AWS_PROFILE), the shared files (~/.aws/credentials, ~/.aws/config), "
    "SSO and an instance role. Set them up with `aws configure` (or `aws sso login --profile NAME` "
    "and AWS_PROFILE=NAME) and try again"
)

_AUTH_CODES = {
    "AuthFailure": "AWS rejected the credentials",
    "InvalidClientTokenId": "AWS does not know these credentials",
    "SignatureDoesNotMatch": "the secret access key does not match the access key id",
    "ExpiredToken": "the session credentials have expired",
    "ExpiredTokenException": "the session credentials have expired",
    "RequestExpired": "the request expired (is this machine's clock right?)",
    "UnauthorizedOperation": "these credentials may not do this",
    "AccessDenied": "these credentials may not do this",
    "AccessDeniedException": "these credentials may not do this",
}


def new_session(region: str) -> Any:
    """A boto3 Session (credentials from boto3's usual chain) for ``region``."""
    import boto3  # noqa: PLC0415  # deferred: ~120 modules, ~35 ms (see the module docstring)

    return boto3.Session(region_name=region)


def client_config(*, attempts: int, connect_timeout: float, read_timeout: float) -> Any:
    """botocore's client settings: ``attempts`` tries in all (its standard retry mode and
    backoff), each connection and read bounded."""
    from botocore.config import Config  # noqa: PLC0415  # deferred: ~45 modules, ~18 ms (see the module docstring)

    retries = {"mode": "standard", "total_max_attempts": attempts}
    return Config(retries=retries, connect_timeout=connect_timeout, read_timeout=read_timeout)


def require_credentials(session: Any) -> None:
    """Raise a ConfigurationError that says what to do when boto3 finds no credentials."""
    try:
        credentials = session.get_credentials()
    except Exception as error:  # a broken profile, an SSO cache that needs a login
        raise ConfigurationError(f"{NO_CREDENTIALS} (boto3: {error})")
    if credentials is None:
        raise ConfigurationError(NO_CREDENTIALS)


@dataclass(frozen=True)
class Clients:
    ec2: Any
    ssm: Any
    iam: Any
    launch: Any  # EC2 without botocore's own retries: the spot strategy decides


def make_clients(session: Any, region: str, *, attempts: int = 5, timeout: float = 60.0) -> Clients:
    """Clients whose calls try ``attempts`` times (botocore's standard retry mode and its
    backoff) and may take ``timeout`` seconds: ``AWS(api_retries=..., api_timeout=...)``."""
    connect = min(10.0, timeout)
    standard = client_config(attempts=attempts, connect_timeout=connect, read_timeout=timeout)
    single = client_config(attempts=1, connect_timeout=connect, read_timeout=timeout)
    return Clients(
        ec2=session.client("ec2", region_name=region, config=standard),
        ssm=session.client("ssm", region_name=region, config=standard),
        iam=session.client("iam", region_name=region, config=standard),
        launch=session.client("ec2", region_name=region, config=single),
    )


def refused_credentials(error: ClientError) -> bool:
    """AWS refused the credentials or their permissions (asking again will not help)."""
    return str(error.response["Error"]["Code"]) in _AUTH_CODES


def explain(error: BaseException, doing: str) -> SkywardError:
    """A botocore error as a Skyward error that says what happened and what to do."""
    if isinstance(error, NoCredentialsError):
        return ConfigurationError(NO_CREDENTIALS)
    if isinstance(error, ClientError):
        code = error.response["Error"]["Code"]
        message = error.response["Error"].get("Message", "")
        if code in _AUTH_CODES:
            return ConfigurationError(f"while {doing}: {_AUTH_CODES[code]} ({code}: {message})")
        if code in QUOTA_CODES:
            return QuotaError(f"while {doing}: {code}: {message}")
        return ProvisioningError(f"while {doing}: {code}: {message}")
    return ProvisioningError(f"while {doing}: {error}")
