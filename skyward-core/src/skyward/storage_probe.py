"""Is a volume's bucket reachable with its storage's keys, from here? (``skyward doctor
--bucket``.)

One S3 ``ListObjectsV2`` request (``max-keys=1`` under the prefix), signed with AWS
Signature Version 4 as every store of :mod:`skyward.storage` accepts it, sent with the
standard library: no SDK, so the check works with skyward-core alone. It answers the
questions a mount failing on a node would otherwise raise minutes later: is the endpoint
up, do the keys sign, does the bucket exist, may these keys list it. (A node may reach
what this machine cannot, such as a store on the cloud's private network: then the node's
own error, in the pool's ``VolumeError``, is the one that counts.)
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from skyward.storage import S3Compatible

EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
_ERROR_CODE = re.compile(r"<Code>([^<]+)</Code>")
_ERROR_MESSAGE = re.compile(r"<Message>([^<]*)</Message>")


@dataclass(frozen=True)
class SignedRequest:
    url: str
    headers: dict[str, str]


def _quote(text: str) -> str:
    return urllib.parse.quote(text, safe="-_.~")


def sign_get(
    endpoint: str, path: str, query: Mapping[str, str], region: str, key_id: str, secret: str, now: datetime.datetime
) -> SignedRequest:
    """A GET of ``path`` at ``endpoint`` signed with Signature Version 4 for S3
    (``now`` in UTC; the payload is empty)."""
    parsed = urllib.parse.urlsplit(endpoint)
    base_path = parsed.path.rstrip("/")
    canonical_path = "/".join(_quote(part) for part in f"{base_path}{path}".split("/"))
    canonical_query = "&".join(f"{_quote(k)}={_quote(v)}" for k, v in sorted(query.items()))
    amz_date, day = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
    headers = {"host": parsed.netloc, "x-amz-content-sha256": EMPTY_SHA256, "x-amz-date": amz_date}
    signed = ";".join(sorted(headers))
    canonical = "\n".join(
        ["GET", canonical_path, canonical_query, *(f"{k}:{headers[k]}" for k in sorted(headers)), "", signed,
         EMPTY_SHA256]
    )  # fmt: skip
    scope = f"{day}/{region}/s3/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    key = f"AWS4{secret}".encode()
    for part in (day, region, "s3", "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    headers["authorization"] = (
        f"AWS4-HMAC-SHA256 Credential={key_id}/{scope}, SignedHeaders={signed}, Signature={signature}"
    )
    url = f"{parsed.scheme}://{parsed.netloc}{canonical_path}" + (f"?{canonical_query}" if canonical_query else "")
    return SignedRequest(url, headers)


@dataclass(frozen=True)
class BucketCheck:
    ok: bool
    detail: str


Fetch = Callable[[urllib.request.Request, float], tuple[int, bytes]]


def _fetch(request: urllib.request.Request, timeout: float) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:  # an http(s) URL we built
            return int(answer.status), answer.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def check_bucket(
    storage: S3Compatible,
    bucket: str,
    prefix: str = "",
    timeout: float = 10.0,
    fetch: Fetch = _fetch,
    now: Callable[[], datetime.datetime] = lambda: datetime.datetime.now(datetime.UTC),
) -> BucketCheck:
    """List at most one key of ``bucket`` under ``prefix`` with ``storage``'s keys."""
    key, secret = storage.keys
    request = sign_get(
        storage.endpoint, f"/{bucket}", {"list-type": "2", "max-keys": "1", "prefix": prefix},
        storage.region or "us-east-1", key.value, secret.value, now(),
    )  # fmt: skip
    where = f"{storage.name}:{bucket}/{prefix}"
    try:
        status, body = fetch(urllib.request.Request(request.url, headers=request.headers), timeout)
    except (OSError, ValueError) as error:
        reason = getattr(error, "reason", error)
        return BucketCheck(False, f"{where}: {storage.endpoint} did not answer ({reason})")
    text = body.decode(errors="replace")
    if status == 200:
        seen = "holds objects" if "<Key>" in text else "is empty"
        return BucketCheck(True, f"{where}: listed with the storage's keys (the prefix {seen})")
    code = _ERROR_CODE.search(text)
    message = _ERROR_MESSAGE.search(text)
    said = f"{code[1]}: {message[1] if message else ''}".rstrip(": ") if code else f"HTTP {status}"
    return BucketCheck(False, f"{where}: the store refused the listing ({said})")
