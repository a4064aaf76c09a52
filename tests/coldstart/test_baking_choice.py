"""Which baked image a pool may start from (skyward.providers.baking, pure)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from skyward import Image
from skyward.errors import ConfigurationError
from skyward.image import BootstrapContext
from skyward.providers.baking import BakedImage, BakeKey, bake_key, being_baked, choose_baked

WANT = BakeKey("abc123abc123", "abc123abc123-0011aabb", "1.2.0", "ami-base")

keys = st.builds(
    BakeKey,
    st.sampled_from([WANT.image_hash, "ffffffffffff"]),
    st.sampled_from([WANT.env_key, "abc123abc123-99999999"]),
    st.sampled_from([WANT.version, "1.1.0"]),
    st.sampled_from([WANT.base, "ami-other"]),
)
images = st.builds(
    BakedImage,
    id=st.text("abcdef0123456789", min_size=4, max_size=8).map(lambda s: f"ami-{s}"),
    key=st.one_of(st.none(), keys),
    created=st.datetimes().map(lambda d: d.isoformat()),
    ready=st.booleans(),
)


@given(st.lists(images, max_size=12))
def test_a_chosen_image_matches_every_part_of_the_key_and_is_ready(candidates: list[BakedImage]) -> None:
    chosen = choose_baked(candidates, WANT)
    usable = [c for c in candidates if c.ready and c.key == WANT]
    if not usable:
        assert chosen is None  # a stale, pending or unlabelled image is never used
    else:
        assert chosen is not None and chosen.key == WANT and chosen.ready
        assert chosen.created == max(c.created for c in usable)  # the newest


@given(st.lists(images, max_size=12))
def test_a_bake_is_under_way_only_when_a_pending_image_has_the_very_key(candidates: list[BakedImage]) -> None:
    assert being_baked(candidates, WANT) == any(c.key == WANT and not c.ready for c in candidates)


def test_labels_round_trip_and_an_incomplete_set_is_no_key() -> None:
    labels = WANT.labels()
    assert BakeKey.from_labels(labels) == WANT
    assert BakeKey.from_labels({k: v for k, v in labels.items() if k != "skyward:version"}) is None
    assert BakeKey.from_labels({**labels, "skyward:baked": "false"}) is None


def test_bake_is_not_part_of_the_environment_and_survives_with_pip_and_with_env() -> None:
    image = Image(pip=["six"], bake=True)
    assert image.content_hash() == Image(pip=["six"]).content_hash()
    assert image.with_pip("rich").bake and image.with_env(A="1").bake
    key = bake_key(image, BootstrapContext(skyward_requirement="skyward-core==1.2.0"), "ami-base")
    assert key.image_hash == image.content_hash() and key.env_key.startswith(image.content_hash())
    assert key != bake_key(image, BootstrapContext(skyward_requirement="skyward-core==1.3.0"), "ami-base")


def test_bake_takes_a_bool_only() -> None:
    with pytest.raises(ConfigurationError, match=r"Image\(bake='yes'\) takes True or False"):
        Image(bake="yes")  # type: ignore[arg-type]


def test_a_provider_that_cannot_bake_says_so_and_starts_as_usual() -> None:
    import skyward
    from skyward.events import Notice

    seen: list[object] = []
    with skyward.ComputePool(provider=skyward.Local(), image=Image(bake=True), display="quiet", on_event=seen.append):
        pass
    notices = [e.message for e in seen if isinstance(e, Notice)]
    assert "Image(bake=True): the local provider does not bake images" in notices
