"""Where the client reaches a node's workers: one rule for the first nodes and replacements."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from skyward.transport.handshake import worker_endpoints


@given(
    agent_port=st.integers(1024, 60000),
    mapped_port=st.integers(1024, 60000),
    offsets=st.lists(st.integers(1, 64), min_size=1, max_size=8),
)
def test_workers_keep_their_offset_from_the_agent_behind_a_port_mapping(
    agent_port: int, mapped_port: int, offsets: list[int]
) -> None:
    info = {
        "agent_endpoint": f"tcp://0.0.0.0:{agent_port}",
        "endpoints": [f"tcp://0.0.0.0:{agent_port + o}" for o in offsets],
    }
    got = worker_endpoints(f"tcp://127.0.0.1:{mapped_port}", info)
    assert got == [f"tcp://127.0.0.1:{mapped_port + o}" for o in offsets]


def test_ipc_workers_are_reached_at_their_own_paths() -> None:
    info = {"agent_endpoint": "ipc:///run/a.sock", "endpoints": ["ipc:///run/w0.sock"]}
    assert worker_endpoints("ipc:///run/a.sock", info) == ["ipc:///run/w0.sock"]


def test_an_agent_that_reports_no_bound_endpoint_is_reached_at_the_workers_ports() -> None:
    info = {"endpoints": ["tcp://0.0.0.0:16790"]}
    assert worker_endpoints("tcp://10.0.0.5:16789", info) == ["tcp://10.0.0.5:16790"]
