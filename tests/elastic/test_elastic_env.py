"""Nodes that join a running pool (resize, a lost node's replacement) get the pool's env
over the channel, as the first nodes do: it is in no user-data to inherit."""

from __future__ import annotations

import os

from deadline_support import within
from elastic_support import EventLog, kill_group, live_count, node_group, until

import skyward as sky

ENV = {"HF_TOKEN": sky.Secret("sekrit-joining-node-value"), "PLAIN": "plain-joining-node-value"}
SEEN = ("sekrit-joining-node-value", "plain-joining-node-value")


@sky.compute
def node_and_env() -> tuple[int, str | None, str | None]:
    return sky.instance_info().node, os.environ.get("HF_TOKEN"), os.environ.get("PLAIN")


def _pool(nodes: sky.Nodes | int, log: EventLog) -> sky.ComputePool:
    return sky.ComputePool(
        provider=sky.Local(grace_period=10), nodes=nodes, env=ENV, display="quiet", on_event=log,
        autoscale_cooldown=0.2, autoscale_idle_timeout=600.0,
    )  # fmt: skip


def test_a_node_added_by_resize_gets_the_pool_s_env() -> None:
    with _pool(sky.Nodes(desired=1, max=2, min=1), EventLog()) as pool:
        pool.resize(2)
        until("resize(2) to reach 2 nodes", lambda: live_count(pool) == 2)
        # a worker without its env holds its tasks: this would hang, not fail, without the bound
        assert sorted(within("a broadcast to every node", lambda: node_and_env() @ pool)) == [(0, *SEEN), (1, *SEEN)]


def test_a_lost_node_s_replacement_gets_the_pool_s_env() -> None:
    log = EventLog()
    with _pool(2, log) as pool:
        kill_group(node_group(pool, 1))
        until("the lost node's replacement", lambda: len(log.added("replacement")) == 1 and live_count(pool) == 2)
        # a worker without its env holds its tasks: this would hang, not fail, without the bound
        assert sorted(within("a broadcast to every node", lambda: node_and_env() @ pool)) == [(0, *SEEN), (1, *SEEN)]
