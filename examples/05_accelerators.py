"""Asking for accelerators: names, counts, memory variants, and how an instance is chosen.

Instance selection is a pure function, so this example shows it on a made-up catalog of
three machines; then, when SKYWARD_PROVIDER names a cloud, it runs a computation on a T4
and reports what the worker sees (skipped on Local).

Run it with:  .venv/bin/python examples/05_accelerators.py
"""

from __future__ import annotations

import os

from _provider import gpus_here, on_cloud, provider

import skyward as sky
from skyward.accelerators import parse_accelerator


@sky.compute
def which_gpu() -> str:
    return f"accelerator {sky.current_accelerator()}, CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')}"


def main() -> None:
    for request in ["A100", "A100-80GB", "H100-SXM:8", "H100@3g.40gb", sky.Accelerator.NVIDIA.L4(count=2)]:
        print(f"{request!s:>14} -> {parse_accelerator(request)!r}")

    gib = 1024**3
    catalog = [
        sky.InstanceType(name="small-cpu", vcpus=8, memory=32 * gib, on_demand_price=0.4),
        sky.InstanceType(
            name="one-a100",
            vcpus=12,
            memory=85 * gib,
            on_demand_price=3.7,
            accelerator="A100-40GB",
            accelerator_count=1,
        ),
        sky.InstanceType(
            name="one-a100-80",
            vcpus=12,
            memory=170 * gib,
            on_demand_price=5.1,
            accelerator="A100-80GB",
            accelerator_count=1,
        ),
    ]
    print("A100       ->", sky.select_instance(catalog, accelerator="A100").name)  # any memory: the cheapest
    print("A100-80GB  ->", sky.select_instance(catalog, accelerator="A100-80GB").name)
    print("cpu=4      ->", sky.select_instance(catalog, cpu=4).name)

    if not on_cloud():
        print(f"{gpus_here()} NVIDIA GPU(s) here; the GPU run needs a cloud: SKYWARD_PROVIDER=aws (skipped)")
        return
    with sky.ComputePool(provider=provider(), accelerator="T4", display="quiet") as pool:
        print(which_gpu() >> pool)


if __name__ == "__main__":
    main()
