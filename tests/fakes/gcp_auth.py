"""The fake Google Cloud's identity: a service account whose key it made, its OAuth token
endpoint, and the check every API call's bearer token passes.

Two kinds of bearer token are accepted, as Google accepts both:

* an access token this fake issued at ``POST /token`` for a JWT-bearer grant (RFC 7523;
  developers.google.com/identity/protocols/oauth2/service-account#httprest: the assertion is an
  RS256 JWT signed with the service account's key, ``iss`` its email, ``aud`` Google's token URI,
  ``exp`` at most an hour after ``iat``, a ``scope``);
* a self-signed JWT (google.aip.dev/auth/4111, what google-auth sends when a client library
  asks for "always use JWT access", as the Cloud client libraries do): signed with the key,
  ``iss`` == ``sub`` == the email, and a ``scope`` claim or an ``aud`` of the API.
"""

from __future__ import annotations

import base64
import json
import secrets
import threading
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from fakes.http import Request, Response

GOOGLE_TOKEN_URI = "https://oauth2.googleapis.com/token"  # the aud google-auth signs, whatever token_uri says
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
TOKEN_LIFETIME = 3600
EXPIRED = "Request had invalid authentication credentials (expired)."
CLOCK_SKEW = 300  # seconds of leeway on iat/exp, as Google's token endpoint allows


def _b64decode(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


@dataclass
class ServiceAccount:
    project: str
    email: str
    key_id: str = field(default_factory=lambda: secrets.token_hex(20))
    key: rsa.RSAPrivateKey = field(
        default_factory=lambda: rsa.generate_private_key(public_exponent=65537, key_size=2048)
    )
    client_id: str = field(default_factory=lambda: str(secrets.randbelow(10**20)).zfill(21))

    def info(self, token_uri: str) -> dict[str, str]:
        """The key file's JSON (the fields google-auth's ``from_service_account_info`` reads)."""
        pem = self.key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ).decode()
        return {
            "type": "service_account",
            "project_id": self.project,
            "private_key_id": self.key_id,
            "private_key": pem,
            "client_email": self.email,
            "client_id": self.client_id,
            "auth_uri": "https://accounts.google.com/o/oauth2/auth",
            "token_uri": token_uri,
            "auth_provider_x509_cert_url": "https://www.googleapis.com/oauth2/v1/certs",
            "client_x509_cert_url": f"https://www.googleapis.com/robot/v1/metadata/x509/{self.email}",
            "universe_domain": "googleapis.com",
        }

    def verify(self, token: str) -> dict[str, Any]:
        """The claims of an RS256 JWT this account's key signed; ValueError otherwise."""
        parts = token.split(".")
        if len(parts) != 3:
            raise ValueError("not a JWT")
        try:
            header = json.loads(_b64decode(parts[0]))
            claims = json.loads(_b64decode(parts[1]))
            signature = _b64decode(parts[2])
        except ValueError as exc:
            raise ValueError(f"not a JWT: {exc}") from exc
        if not isinstance(header, dict) or header.get("alg") != "RS256":
            raise ValueError(f"JWT alg {header.get('alg') if isinstance(header, dict) else header!r}: RS256 only")
        if header.get("kid") not in (None, self.key_id):
            raise ValueError(f"JWT kid {header.get('kid')!r} is not this service account's key")
        try:
            self.key.public_key().verify(
                signature, f"{parts[0]}.{parts[1]}".encode(), padding.PKCS1v15(), hashes.SHA256()
            )
        except InvalidSignature as exc:
            raise ValueError("JWT signature does not verify with the service account's key") from exc
        if not isinstance(claims, dict):
            raise ValueError("JWT claims are not an object")
        now = time.time()
        iat, exp = claims.get("iat"), claims.get("exp")
        if not isinstance(iat, int | float) or not isinstance(exp, int | float):
            raise ValueError("JWT needs numeric iat and exp")
        if iat > now + CLOCK_SKEW or exp < now - CLOCK_SKEW or exp - iat > TOKEN_LIFETIME:
            raise ValueError("JWT is expired, from the future, or lives longer than an hour")
        if claims.get("iss") != self.email:
            raise ValueError(f"JWT iss {claims.get('iss')!r} is not {self.email}")
        return claims


class Tokens:
    """Access tokens issued, and the check of a request's bearer token."""

    def __init__(self, account: ServiceAccount) -> None:
        self.account = account
        self._issued: dict[str, float] = {}  # token -> expiry
        self._lock = threading.Lock()

    def revoke_all(self) -> None:
        with self._lock:
            for token in self._issued:
                self._issued[token] = 0.0

    def grant(self, request: Request, token_uri: str) -> Response:
        """``POST /token``: RFC 6749 section 5.2 error bodies on refusal."""
        form = parse_qs(request.body.decode(errors="replace"))
        grant_type = (form.get("grant_type") or [""])[0]
        if grant_type != JWT_BEARER:
            return Response(
                400, {"error": "unsupported_grant_type", "error_description": f"Invalid grant_type: {grant_type}"}
            )
        try:
            claims = self.account.verify((form.get("assertion") or [""])[0])
        except ValueError as exc:
            return Response(400, {"error": "invalid_grant", "error_description": f"Invalid JWT Signature. ({exc})"})
        if claims.get("aud") not in (GOOGLE_TOKEN_URI, token_uri):
            why = f"Invalid JWT: aud must be {GOOGLE_TOKEN_URI} (or this fake's {token_uri})"
            return Response(400, {"error": "invalid_grant", "error_description": why})
        if not claims.get("scope"):
            return Response(400, {"error": "invalid_scope", "error_description": "Empty or missing scope not allowed."})
        token = "ya29.fake-" + secrets.token_urlsafe(32)
        with self._lock:
            self._issued[token] = time.time() + TOKEN_LIFETIME
        return Response(200, {"access_token": token, "expires_in": TOKEN_LIFETIME, "token_type": "Bearer"})

    def problem(self, request: Request) -> str | None:
        """Why the request's ``Authorization`` is refused (None: accepted)."""
        header = request.headers.get("authorization", "")
        if not header.startswith("Bearer "):
            return "Request is missing required authentication credential. Expected OAuth 2 access token."
        token = header.removeprefix("Bearer ").strip()
        with self._lock:
            expiry = self._issued.get(token)
        if expiry is not None:
            return None if expiry > time.time() else EXPIRED
        try:
            claims = self.account.verify(token)
        except ValueError as exc:
            return f"Request had invalid authentication credentials: {exc}"
        if claims.get("sub") != self.account.email:
            return "Request had invalid authentication credentials: a self-signed JWT needs sub == iss"
        if not claims.get("scope") and not str(claims.get("aud", "")).startswith(("https://", "http://")):
            return "Request had invalid authentication credentials: a self-signed JWT needs a scope or an aud"
        return None
