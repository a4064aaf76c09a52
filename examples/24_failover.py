"""Failover: a pool with several candidates, and the offers table behind "cheapest".

- ``ComputePool(provider=[...])`` tries each candidate until one provides the whole pool;
  ``sky.Spec`` gives a candidate its own accelerator, spot strategy or price cap.
- ``selection="cheapest"`` tries them by the pool's live hourly price from the providers'
  offers (``sky.offers``); ``"first"`` in the order given.
- A candidate that fails for capacity, quota, price, a launch or a bootstrap timeout is cleaned up and
  said in a ``CandidateFailed`` event; a bad configuration or credential stops at once.

On Local the cloud pool is a dry run (validated, nothing provisioned), and a pool of two
Local candidates fails over for real: the first one's nodes cannot start within its
``bootstrap_timeout`` of 10 ms (a bootstrap timeout, as a cloud region whose nodes do not
answer in time), so the pool removes what it started and runs on the second. With
SKYWARD_PROVIDER=aws (or digitalocean, verda, vastai, runpod) the cloud pool runs too,
trying its regions in turn.

Run it with:  .venv/bin/python examples/24_failover.py
"""

from __future__ import annotations

import sys

from _provider import cloud_provider, dry_run_unless_cloud, on_cloud, provider_name

import skyward as sky
from skyward.events import CandidateFailed, CostFinal


@sky.compute
def where() -> str:
    info = sky.instance_info()
    return f"node {info.node} of {info.total_nodes}"


def say(event: object) -> None:
    if isinstance(event, CandidateFailed):
        where = f" ({event.region})" if event.region else ""
        print(f"candidate #{event.candidate + 1} {event.provider}{where} failed, {event.reason}: {event.message}")
    elif isinstance(event, CostFinal):
        print(f"ran on {event.provider} in {event.region}: ${event.total_cost:.4f}")


def cloud_candidates() -> list[object]:
    base = cloud_provider()
    if provider_name() == "aws":
        return [sky.AWS(region="us-east-1"), sky.AWS(region="us-west-2"), sky.Spec(provider=base, spot="never")]
    return [sky.Spec(provider=base, spot="if-available" if provider_name() == "verda" else None), base]


def main() -> None:
    if on_cloud():
        table = sky.offers("T4" if provider_name() == "aws" else None, nodes=2, providers=[provider_name()])
        print(table, file=sys.stderr)
    cloud = sky.ComputePool(
        provider=cloud_candidates(), nodes=2, selection="cheapest", max_hourly_cost=5.0, display="quiet", on_event=say
    )
    if dry_run_unless_cloud(cloud):
        with cloud as pool:
            print("instances:", where() @ pool)
    too_slow = sky.Local(bootstrap_timeout=0.01)  # no agent answers within 10 ms
    with sky.ComputePool(provider=[too_slow, sky.Local()], nodes=2, display="quiet", on_event=say) as pool:
        print("ran on", pool.provider_name, "->", where() @ pool)


if __name__ == "__main__":
    main()
