"""Spot instances: ``spot=`` says how much of a pool may, or must, run on spot.

``"always"`` (spot only, retried; AWS's default), ``"if-available"`` (spot, else on
demand), ``"never"``, or a fraction such as ``0.8`` (at least 80% spot). Providers without
a spot market (Local, DigitalOcean) refuse ``"always"`` at construction. When AWS warns
that a spot node will be reclaimed, the pool emits ``InstanceInterrupted``, re-runs that
node's tasks elsewhere and, under ``Spot.Always``, replaces the node.

On Local this validates an AWS pool per strategy without provisioning (dry run);
SKYWARD_PROVIDER=aws runs the last one for real.
Run it with:  .venv/bin/python examples/15_spot_strategies.py
"""

from __future__ import annotations

from _provider import cloud_provider, dry_run_unless_cloud

import skyward as sky
from skyward.events import InstanceInterrupted


@sky.compute
def hello() -> str:
    return f"node {sky.instance_info().node} is up"


def main() -> None:
    cloud = cloud_provider()
    for spot in ["always", "if-available", "never", 0.8, sky.Spot.Always(retries=3, interval=5.0)]:
        try:
            pool = sky.ComputePool(provider=cloud, nodes=2, spot=spot, display="quiet")
            print(f"spot={spot!r:<40} -> {pool.spec.spot!r}")
        except sky.ConfigurationError as error:  # DigitalOcean has no spot market
            print(f"spot={spot!r:<40} -> refused: {error}")
    try:
        sky.ComputePool(provider=sky.Local(), spot="always")
    except sky.ConfigurationError as error:
        print(f"Local refuses spot: {error}")

    # every provider accepts "if-available": spot where there is a market and capacity
    pool = sky.ComputePool(provider=cloud, nodes=2, spot="if-available", display="quiet")
    pool.on(InstanceInterrupted, lambda e: print(f"node {e.node} interrupted: {e.reason}"))
    if dry_run_unless_cloud(pool):
        with pool:
            print(hello() @ pool)


if __name__ == "__main__":
    main()
