"""Google credentials for the provider: found once, never written anywhere.

The chain, in order: ``GCP(credentials_file=...)`` (a service-account key file), then
``GOOGLE_APPLICATION_CREDENTIALS``, then application default credentials (``gcloud auth
application-default login``, or a VM's metadata server). Missing credentials are a
:class:`ConfigurationError` that says how to provide them.

A service account signs its own short-lived JWTs for the APIs (what Google's clients do
by default, ``always_use_jwt_access``); user credentials refresh through Google's token
endpoint. Nothing here prints or stores a token or a key: errors name the file, never
its content.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

import google.auth
import google.auth.exceptions
from google.auth.credentials import Credentials as BaseCredentials
from google.oauth2 import service_account

from skyward.errors import ConfigurationError
from skyward_gcp.config import GCP

CREDENTIALS_ENV = "GOOGLE_APPLICATION_CREDENTIALS"
SCOPES = ("https://www.googleapis.com/auth/cloud-platform",)
HOW_TO = (
    "give GCP(credentials_file='key.json') a service-account key file, export "
    f"{CREDENTIALS_ENV}=/path/to/key.json, or run `gcloud auth application-default login` "
    "(the account needs the Compute Admin and TPU Admin roles, or compute.* and tpu.* permissions)"
)


@dataclass(frozen=True, slots=True)
class Found:
    """Credentials and the project they name; ``source`` says where they came from (no secret)."""

    credentials: BaseCredentials
    project: str | None
    source: str


def _from_file(path: str, source: str) -> Found:
    try:
        with open(path, encoding="utf-8") as handle:
            info = json.load(handle)
    except (OSError, ValueError) as exc:
        raise ConfigurationError(f"the Google credentials file {path} ({source}) cannot be read: {exc}; {HOW_TO}")
    if not isinstance(info, dict):
        raise ConfigurationError(f"the Google credentials file {path} ({source}) is not a JSON object; {HOW_TO}")
    try:
        if info.get("type") == "service_account":
            credentials: BaseCredentials = service_account.Credentials.from_service_account_info(
                info, scopes=list(SCOPES)
            )
        else:
            credentials, _ = google.auth.load_credentials_from_file(path, scopes=list(SCOPES))
    except (ValueError, KeyError, google.auth.exceptions.GoogleAuthError) as exc:
        # the message of a parse error never holds the key: google-auth names the field
        raise ConfigurationError(f"the Google credentials file {path} ({source}) is not usable: {exc}; {HOW_TO}")
    project = info.get("project_id") or info.get("quota_project_id")
    return Found(credentials, str(project) if project else None, f"{source} ({path})")


def find_credentials(config: GCP) -> Found:
    """The credentials of the chain (see the module), or a ConfigurationError naming the fix."""
    if config.credentials_file is not None:
        return _from_file(os.path.expanduser(config.credentials_file), "GCP(credentials_file=...)")
    env_path = os.environ.get(CREDENTIALS_ENV, "").strip()
    if env_path:
        return _from_file(env_path, CREDENTIALS_ENV)
    try:
        credentials, project = google.auth.default(scopes=list(SCOPES))
    except google.auth.exceptions.DefaultCredentialsError:
        raise ConfigurationError(f"no Google Cloud credentials found; {HOW_TO}") from None
    return Found(credentials, project, "application default credentials")


def project_of(config: GCP, found: Found) -> str:
    """The project the pool uses: ``GCP(project=...)``, else the credentials'."""
    if config.project is not None:
        return config.project
    if found.project:
        return found.project
    raise ConfigurationError(
        f"GCP(project=None) and the {found.source} name no project: give GCP(project='my-project') "
        "or run `gcloud config set project my-project`"
    )
