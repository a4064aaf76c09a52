"""The ``NVIDIA`` literal type: the GPU spellings a type checker can verify."""

from __future__ import annotations

from typing import Literal, get_args

NVIDIA = Literal[
    "T4",
    "T4G",
    "L4",
    "L40",
    "L40S",
    "A10",
    "A10G",
    "A40",
    "A6000",
    "A100",
    "A100-40GB",
    "A100-80GB",
    "H100",
    "H100-80GB",
    "H100-SXM",
    "H100-PCIe",
    "H100-NVL",
    "H200",
    "GH200",
    "B100",
    "B200",
    "B300",
    "GB200",
    "V100",
    "V100-16GB",
    "V100-32GB",
    "RTX4000-Ada",
    "RTX6000-Ada",
]
"""Use as a type hint (``def train(gpu: NVIDIA)``); every value is valid shorthand."""

NVIDIA_NAMES: tuple[str, ...] = get_args(NVIDIA)
