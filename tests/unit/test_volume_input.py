"""``sky.Volume`` and ``sky.storage``: every bad input is a clear error when it is declared,
before anything is provisioned; a provider whose nodes cannot mount FUSE refuses a mount
(and takes ``mode="sync"``); the keys never show in a repr; the rclone config is exact."""

from __future__ import annotations

import cloudpickle
import pytest
from hypothesis import given
from hypothesis import strategies as st

import skyward as sky
from skyward.agent.mounts import rclone_config
from skyward.api.kept.registration import saved_spec
from skyward.errors import ConfigurationError
from skyward.providers import buckets

KEYS = {"access_key_id": "AKIAEXAMPLE", "secret_access_key": "not-a-real-secret"}


def storage() -> sky.storage.S3Compatible:
    return sky.storage.S3Compatible("http://127.0.0.1:9000", **KEYS)


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"mount": "data"}, r"Volume\(mount='data'\) must be an absolute path"),
        ({"mount": "/etc"}, r"Volume\(mount='/etc'\) would hide a system directory"),
        ({"mount": "/tmp/"}, r"would hide a system directory"),
        ({"mount": "/data/../etc"}, r"would hide a system directory"),
        ({"bucket": "s3://my-bucket"}, r"not a bucket name .*without 's3://'"),
        ({"bucket": "My_Bucket"}, r"Volume\(bucket='My_Bucket'\) is not a bucket name"),
        ({"prefix": "/abs"}, r"Volume\(prefix='/abs'\) must be a key prefix"),
        ({"read_only": "yes"}, r"Volume\(read_only='yes'\) must be True or False"),
        ({"mode": "copy"}, r"Volume\(mode='copy'\): one of 'mount', 'sync'"),
        ({"storage": "s3"}, r"give a sky.storage preset"),
    ],
)
def test_a_bad_volume_is_refused_where_it_is_declared_naming_the_parameter(
    kwargs: dict[str, object], words: str
) -> None:
    options: dict[str, object] = {"bucket": "my-bucket", "mount": "/data", "storage": storage(), **kwargs}
    with pytest.raises(ConfigurationError, match=words):
        sky.Volume(**options)  # type: ignore[arg-type]


def test_a_storage_key_that_is_not_set_in_the_environment_is_an_error_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "R2_ACCESS_KEY_ID", "R2_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ConfigurationError, match=r"storage.R2\(access_key_id=None\).*R2_ACCESS_KEY_ID"):
        sky.storage.R2("0123456789abcdef0123456789abcdef")
    with pytest.raises(
        ConfigurationError, match=r"Volume\(storage=None\) means Amazon S3.*AWS_ACCESS_KEY_ID.*S3Volume"
    ):
        sky.Volume("my-bucket", "/data")
    monkeypatch.setenv("R2_ACCESS_KEY_ID", "id-from-env")
    monkeypatch.setenv("R2_SECRET_ACCESS_KEY", "secret-from-env")
    r2 = sky.storage.R2("0123456789abcdef0123456789abcdef")
    assert r2.endpoint == "https://0123456789abcdef0123456789abcdef.r2.cloudflarestorage.com"
    assert [k.value for k in r2.keys] == ["id-from-env", "secret-from-env"]
    assert "secret-from-env" not in repr(r2) + repr(sky.Volume("my-bucket", "/data", storage=r2))


@pytest.mark.parametrize(
    ("preset", "endpoint", "provider"),
    [
        (lambda: sky.storage.S3("eu-west-1", **KEYS), "https://s3.eu-west-1.amazonaws.com", "AWS"),
        (lambda: sky.storage.GCS(**KEYS), "https://storage.googleapis.com", "Other"),
        (lambda: sky.storage.Wasabi("eu-central-1", **KEYS), "https://s3.eu-central-1.wasabisys.com", "Wasabi"),
        (lambda: sky.storage.Backblaze("us-west-004", **KEYS), "https://s3.us-west-004.backblazeb2.com", "Other"),
        (lambda: sky.storage.Spaces("fra1", **KEYS), "https://fra1.digitaloceanspaces.com", "DigitalOcean"),
    ],
)
def test_each_preset_is_its_store_s_s3_endpoint(preset: object, endpoint: str, provider: str) -> None:
    assert callable(preset)
    made = preset()
    assert (made.endpoint, made.provider) == (endpoint, provider)


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (
            lambda: sky.storage.S3Compatible("s3.example.com", **KEYS),
            r"endpoint='s3.example.com' is not an http\(s\) URL",
        ),
        (lambda: sky.storage.R2("not-an-account", **KEYS), r"32 hexadecimal digits"),
        (lambda: sky.storage.Backblaze("", **KEYS), r"Backblaze\(region=''\)"),
        (lambda: sky.storage.S3Compatible("https://x.io", "id\nprovider = evil", "s"), r"a key is one non-empty line"),
        (lambda: sky.storage.S3Compatible("https://x.io", 42, "s"), r"give a string or a sky.Secret, not int"),
    ],
)
def test_a_bad_storage_is_refused_naming_what_is_wrong(make: object, words: str) -> None:
    assert callable(make)
    with pytest.raises(ConfigurationError, match=words):
        make()


@pytest.mark.parametrize("provider", [sky.RunPod, sky.VastAI])
def test_a_container_marketplace_refuses_a_mount_when_the_pool_is_declared_and_takes_a_sync(
    provider: type, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RUNPOD_API_KEY", "k")
    monkeypatch.setenv("VAST_API_KEY", "k")
    mounted = sky.Volume("my-bucket", "/data", storage=storage())
    with pytest.raises(ConfigurationError, match=r"cannot be mounted on the \w+ provider: .*containers.*mode='sync'"):
        sky.ComputePool(provider=provider(), volume=[mounted], display="quiet")
    synced = sky.Volume("my-bucket", "/data", storage=storage(), mode="sync")
    sky.ComputePool(provider=provider(), volume=[synced], display="quiet")  # declared; nothing opened


def test_the_rclone_config_holds_the_store_and_never_the_node_s_own_credentials() -> None:
    section = sky.storage.S3Compatible("https://s3.example.com", **KEYS, region="eu-1").rclone_section()
    assert rclone_config(section) == (
        "[skyward]\ntype = s3\nprovider = Other\nenv_auth = false\naccess_key_id = AKIAEXAMPLE\n"
        "secret_access_key = not-a-real-secret\nendpoint = https://s3.example.com\nno_check_bucket = true\n"
        "region = eu-1\n"
    )


@given(st.lists(st.sampled_from(["data", "..", ".", "", "etc", "x"]), max_size=5))
def test_a_mount_path_is_refused_or_normalized_to_one_that_hides_no_system_directory(parts: list[str]) -> None:
    path = "/" + "/".join(parts)
    try:
        normalized = buckets.mount_path("Volume(mount={!r})", path)
    except ConfigurationError:
        return
    assert normalized.startswith("/") and normalized not in buckets.SYSTEM_PATHS
    assert ".." not in normalized.split("/") and "//" not in normalized


def test_a_kept_pool_s_saved_spec_holds_no_storage_key() -> None:
    volume = sky.Volume("my-bucket", "/data", storage=storage(), mode="sync")
    pool = sky.ComputePool(provider=sky.Local(), name="vols", keep_alive=60, volume=[volume], display="quiet")
    saved = saved_spec(pool.spec)
    assert KEYS["secret_access_key"].encode() not in saved and KEYS["access_key_id"].encode() not in saved
    assert cloudpickle.loads(saved).volumes == ()
