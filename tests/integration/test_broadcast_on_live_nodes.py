"""``@`` on a pool whose nodes change: it runs on the nodes live when it is called, and
says which it left out."""

from __future__ import annotations

import time

import skyward as sky
from skyward.events import Notice, SkywardEvent


@sky.compute
def node_index() -> int:
    return sky.instance_info().node


def test_at_runs_on_the_live_nodes_and_a_notice_names_the_one_left_out() -> None:
    seen: list[SkywardEvent] = []
    with sky.ComputePool(provider=sky.Local(), nodes=2, display="quiet", on_event=seen.append) as pool:
        assert (node_index() @ pool) == (0, 1)
        assert not [e for e in seen if isinstance(e, Notice) and e.message.startswith("@ runs")]
        client = pool._client
        assert client is not None
        client.drain_node(1)  # as a scale-down or a spot notice does: it takes no new work
        deadline = time.monotonic() + 10  # the client's I/O thread takes the drain
        while client.live_nodes() != [0] and time.monotonic() < deadline:
            time.sleep(0.01)
        assert (node_index() @ pool) == (0,)

        def said() -> list[str]:
            return [e.message for e in seen if isinstance(e, Notice) and e.message.startswith("@ runs")]

        deadline = time.monotonic() + 10  # events reach on_event from the pool's event thread, after the result
        while not said() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert said() == ["@ runs on nodes 0: node(s) 1 not live now (joining, draining or being replaced)"]
