"""Local nodes that do not answer within ``bootstrap_timeout`` are a bootstrap timeout, as a
cloud's nodes whose agents do not answer in time: a pool with several candidates moves on to the
next (examples/24_failover.py shows it on Local), and the nodes already started are gone."""

from __future__ import annotations

import skyward as sky
from skyward.api.failover import moves_on
from skyward.errors import BootstrapTimeoutError
from skyward.events import CandidateFailed, SkywardEvent

TOO_SHORT = 0.01  # seconds; no agent answers this soon (a Python interpreter takes longer to start)


@sky.compute
def node_index() -> int:
    return sky.instance_info().node


def test_a_local_candidate_whose_nodes_start_too_late_is_passed_over() -> None:
    seen: list[SkywardEvent] = []
    candidates = [sky.Local(bootstrap_timeout=TOO_SHORT), sky.Local()]
    with sky.ComputePool(provider=candidates, nodes=2, display="quiet", on_event=seen.append) as pool:
        assert (node_index() @ pool) == (0, 1)
    (failed,) = [e for e in seen if isinstance(e, CandidateFailed)]
    assert (failed.candidate, failed.reason) == (0, "bootstrap timeout")
    assert "bootstrap_timeout=0.01" in failed.message


def test_the_local_timeout_is_one_failover_moves_on_from() -> None:
    error = BootstrapTimeoutError("local nodes did not start within bootstrap_timeout=0.01 s")
    assert moves_on(error) is error
