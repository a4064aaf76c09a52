"""``skyward doctor --bucket``: a volume's bucket listed with its storage's keys, against
moto's S3 server; a missing bucket and a store that does not answer are fixes (exit 1);
a bad bucket or storage is a one-line error."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner
from volume_support import Store

from skyward.api.kept.record import PoolStore
from skyward.cli.app import make_app

runner = CliRunner()


def doctor(store: Store, tmp_store: PoolStore, *args: str) -> tuple[int, str]:
    app = make_app(clock=lambda: 1.0e9, address=lambda: "198.51.100.4/32", store=tmp_store)
    result = runner.invoke(app, ["doctor", "-p", "local", *args])
    return result.exit_code, result.stdout + result.stderr


@pytest.fixture
def keyed(store: Store, monkeypatch: pytest.MonkeyPatch, tmp_path: object) -> Store:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", store.key_id)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", store.secret)
    return store


def test_doctor_lists_a_volume_s_bucket_with_its_keys_and_makes_a_missing_one_a_fix(
    keyed: Store, tmp_path: object
) -> None:
    keyed.put("ds/a.txt", b"x")
    store_args = ["--storage", "s3-compatible", "--endpoint", keyed.url, "--region", "us-east-1"]
    pools = PoolStore(tmp_path)  # type: ignore[arg-type]
    code, out = doctor(keyed, pools, "--bucket", f"{keyed.bucket}/ds", *store_args)
    assert code == 0, out
    assert (
        f"volume ok s3-compatible:{keyed.bucket}/ds/: listed with the storage's keys (the prefix holds objects)" in out
    )
    code, out = doctor(keyed, pools, "--bucket", "no-such-bucket", *store_args, "--json")
    assert code == 1
    report = json.loads(out[: out.rindex("}") + 1])
    assert report["volumes"][0]["ok"] is False and "NoSuchBucket" in report["volumes"][0]["detail"]
    assert any("NoSuchBucket" in fix for fix in report["fixes"])
    assert keyed.secret not in out


def test_doctor_refuses_a_bad_bucket_or_storage_in_one_line(keyed: Store, tmp_path: object) -> None:
    pools = PoolStore(tmp_path)  # type: ignore[arg-type]
    code, out = doctor(keyed, pools, "--bucket", "s3://x-bucket")
    assert code != 0 and "without 's3://'" in out and "Traceback" not in out
    code, out = doctor(keyed, pools, "--bucket", "x-bucket", "--storage", "dropbox")
    assert code != 0 and "storage 'dropbox' is not known; one of s3, gcs, r2" in out
    code, out = doctor(keyed, pools, "--bucket", "x-bucket", "--storage", "s3-compatible")
    assert code != 0 and "needs an endpoint" in out
