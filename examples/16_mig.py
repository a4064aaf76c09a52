"""MIG: split each NVIDIA A100/H100 into isolated partitions, one worker per partition.

``H100(mig="3g.40gb")`` gives two partitions per GPU (two workers); ``@`` then runs once
per partition, and each worker sees only its own MIG device in ``CUDA_VISIBLE_DEVICES``.
The bootstrap partitions the GPUs on the node. MIG needs a cloud GPU; on Local this shows
the layouts and validates an AWS pool without provisioning (dry run).

Run it with:  .venv/bin/python examples/16_mig.py      (SKYWARD_PROVIDER=aws to run it)
"""

from __future__ import annotations

import os

from _provider import cloud_provider, dry_run_unless_cloud

import skyward as sky


@sky.compute
def partition() -> str:
    info = sky.instance_info()
    return f"worker {info.worker} of node {info.node}: {os.environ.get('CUDA_VISIBLE_DEVICES')}"


def main() -> None:
    for mig in ["3g.40gb", "1g.10gb", ["4g.40gb", "3g.40gb"]]:
        accelerator = sky.Accelerator.NVIDIA.H100(mig=mig)
        print(f"H100(mig={mig!r}) -> {len(accelerator.mig)} partitions: {accelerator.mig}")
    try:
        sky.Accelerator.NVIDIA.H100(mig=["4g.40gb", "4g.40gb"])
    except sky.ConfigurationError as error:
        print(f"refused: {error}")

    pool = sky.ComputePool(
        provider=cloud_provider(), accelerator=sky.Accelerator.NVIDIA.H100(mig="3g.40gb"), display="quiet"
    )
    if dry_run_unless_cloud(pool):
        with pool:
            for line in partition() @ pool:
                print(line)


if __name__ == "__main__":
    main()
