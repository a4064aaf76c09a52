"""How a BakeKey's labels become DigitalOcean tags and back (pure)."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from skyward.providers.baking import BakeKey
from skyward_digitalocean.baking import decode_value, encode_value, label_tags, labels_of

DO_TAG = re.compile(r"^[A-Za-z0-9_\-:]{1,255}$")  # DigitalOcean's rule for a tag name


@given(st.text(max_size=40))
def test_an_encoded_value_decodes_to_itself_and_fits_the_tag_alphabet(value: str) -> None:
    encoded = encode_value(value)
    assert decode_value(encoded) == value
    assert re.fullmatch(r"[A-Za-z0-9_\-]*", encoded)


@given(st.text(min_size=1, max_size=16), st.text(min_size=1, max_size=16), st.text(min_size=1, max_size=16))
def test_a_bake_keys_tags_are_valid_tag_names_and_give_back_the_key(image_hash: str, version: str, base: str) -> None:
    key = BakeKey(image_hash, f"{image_hash}-0123abcd", version, base)
    tags = label_tags(key)
    assert all(DO_TAG.match(t) for t in tags)
    assert BakeKey.from_labels(labels_of([*tags, "skyward", "skyward-pool:p1:1700000000"])) == key


def test_a_version_with_dots_is_written_with_escapes_and_a_malformed_escape_is_no_label() -> None:
    assert encode_value("0.1.0+g1_x") == "0_2E1_2E0_2Bg1_5Fx"
    assert decode_value("0_2") is None and decode_value("a.b") is None
    assert labels_of(["skyward:version:0_zz"]) == {}
