"""Baked machine images: moved to :mod:`skyward.providers.baking`, the provider contract's
home (a provider's bake store is part of it). Re-exported here for the pool's modules,
which import ``Bakes`` from this path; a provider plugin imports it from
``skyward.providers``."""

from skyward.providers.baking import (
    BAKED_IMAGE,
    BAKED_POOL,
    HOURS_PER_MONTH,
    LABEL_BAKED,
    LABEL_BAKED_FROM,
    LABEL_BASE,
    LABEL_ENV_KEY,
    LABEL_IMAGE_HASH,
    LABEL_VERSION,
    BakedImage,
    BakeKey,
    Bakery,
    Bakes,
    BakeStore,
    bake_key,
    baked_resource,
    being_baked,
    choose_baked,
)

__all__ = [
    "BAKED_IMAGE", "BAKED_POOL", "HOURS_PER_MONTH", "LABEL_BAKED", "LABEL_BAKED_FROM", "LABEL_BASE", "LABEL_ENV_KEY",
    "LABEL_IMAGE_HASH", "LABEL_VERSION", "BakeKey", "BakeStore", "BakedImage", "Bakery", "Bakes", "bake_key",
    "baked_resource", "being_baked", "choose_baked",
]  # fmt: skip
