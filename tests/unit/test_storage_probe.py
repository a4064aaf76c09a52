"""``skyward doctor --bucket``'s probe: its Signature Version 4 is botocore's, byte for byte,
and it says what the store answered (listed, refused with the store's code, no answer)."""

from __future__ import annotations

import datetime
import urllib.request

from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from hypothesis import given
from hypothesis import strategies as st

import skyward as sky
from skyward.storage_probe import EMPTY_SHA256, check_bucket, sign_get

NOW = datetime.datetime(2026, 11, 28, 9, 30, 5, tzinfo=datetime.UTC)


def botocore_signature(url: str, query: dict[str, str], amz_date: str, region: str, key_id: str, secret: str) -> str:
    """botocore's signature of a GET of ``url`` with ``query`` unencoded (botocore encodes it)."""
    headers = {"x-amz-content-sha256": EMPTY_SHA256, "X-Amz-Date": amz_date}
    request = AWSRequest(method="GET", url=url, params=query, headers=headers)
    request.context["timestamp"] = amz_date
    auth = S3SigV4Auth(Credentials(key_id, secret), "s3", region)
    canonical = auth.canonical_request(request)
    return auth.signature(auth.string_to_sign(request, canonical), request)


@given(
    prefix=st.text(alphabet="abcXYZ019-_./~ +=&%", max_size=20),
    region=st.sampled_from(["us-east-1", "auto", "eu-central-1"]),
    endpoint=st.sampled_from(["https://s3.example.com", "http://127.0.0.1:9000", "https://acct.r2.example.com/base"]),
)
def test_the_probe_signs_a_listing_exactly_as_botocore_does(prefix: str, region: str, endpoint: str) -> None:
    query = {"list-type": "2", "max-keys": "1", "prefix": prefix}
    signed = sign_get(
        endpoint, "/my-bucket", query, region, "AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", NOW
    )
    ours = signed.headers["authorization"].rsplit("Signature=", 1)[1]
    theirs = botocore_signature(f"{endpoint}/my-bucket", query, "20261128T093005Z", region, "AKIDEXAMPLE",
                                "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")  # fmt: skip
    assert ours == theirs


def store() -> sky.storage.S3Compatible:
    return sky.storage.S3Compatible("https://s3.example.com", "AKID", sky.Secret("secret-key"), region="eu-1")


def test_the_probe_says_what_the_store_answered() -> None:
    def answering(status: int, body: bytes):  # type: ignore[no-untyped-def]
        def fetch(request: urllib.request.Request, timeout: float) -> tuple[int, bytes]:
            assert request.full_url.startswith("https://s3.example.com/b-1?list-type=2&max-keys=1&prefix=ds%2F")
            return status, body

        return fetch

    listed = check_bucket(store(), "b-1", "ds/", fetch=answering(200, b"<ListBucketResult><Key>ds/a</Key>"))
    assert listed.ok and "the prefix holds objects" in listed.detail
    refused = b"<Error><Code>SignatureDoesNotMatch</Code><Message>The request signature we calculated</Message>"
    denied = check_bucket(store(), "b-1", "ds/", fetch=answering(403, refused))
    assert not denied.ok and "(SignatureDoesNotMatch: The request signature we calculated)" in denied.detail

    def unreachable(request: urllib.request.Request, timeout: float) -> tuple[int, bytes]:
        raise OSError("Connection refused")

    down = check_bucket(store(), "b-1", fetch=unreachable)
    assert not down.ok and "https://s3.example.com did not answer (Connection refused)" in down.detail
    assert "secret-key" not in listed.detail + denied.detail + down.detail
