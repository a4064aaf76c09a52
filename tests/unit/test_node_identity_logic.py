"""The pure parts of node identity: who may answer for a node, per-node keys, bind messages."""

from __future__ import annotations

import errno
import socket
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from skyward.agent.config import narrow_wildcard
from skyward.agent.listen import ipc_in_use, why_cannot_listen
from skyward.transport.handshake import NodeIdentity, identity_mismatch, refusal_note, shared_endpoint
from skyward.transport.security import PoolKeys

pools = st.sampled_from(["p-a", "p-b"])
nodes = st.integers(0, 3)
instances = st.sampled_from(["", "i-0", "i-1"])


@given(pools, nodes, instances, pools, nodes, instances)
def test_an_agent_is_accepted_exactly_when_it_is_the_expected_node_of_the_expected_pool(
    want_pool: str, want_node: int, want_instance: str, pool: str, node: int, instance: str
) -> None:
    info = {"pool_id": pool, "node": node, "instance_id": instance, "pid": 7, "hostname": "h"}
    problem = identity_mismatch(NodeIdentity(want_pool, want_node, want_instance), info, "tcp://10.0.0.1:16789")
    same = (pool, node) == (want_pool, want_node) and (not want_instance or instance == want_instance)
    assert (problem is None) == same
    if problem is not None:
        assert (
            f"node {want_node}'s endpoint tcp://10.0.0.1:16789 was answered by the agent of node {node} of pool {pool}"
            in problem
        )
        assert "pid 7 on host h" in problem and "Two agents likely share" in problem


def test_an_agent_that_does_not_say_who_it_is_is_refused() -> None:
    problem = identity_mismatch(NodeIdentity("p-a", 0), {"endpoints": []}, "ipc:///x")
    assert problem is not None and "node -1 of pool ?" in problem


@given(st.lists(st.sampled_from([f"tcp://127.0.0.1:{p}" for p in range(16789, 16795)]), max_size=6))
def test_node_endpoints_are_refused_exactly_when_two_nodes_share_one(endpoints: list[str]) -> None:
    problem = shared_endpoint(endpoints)
    assert (problem is None) == (len(set(endpoints)) == len(endpoints))
    if problem is not None:
        first = next(e for i, e in enumerate(endpoints) if e in endpoints[:i])
        assert f"given the endpoint {first}" in problem


def test_a_silent_node_whose_address_refused_its_key_is_explained() -> None:
    assert refusal_note([0]) == ""
    assert refusal_note([]) == ""
    note = refusal_note([12])
    assert note.startswith(". Something at its address refused the node's CURVE key (12 handshakes)")
    assert "Two agents likely share one address and port" in note
    assert "the address of 1 of them" in refusal_note([0, 3])


@given(st.sampled_from(["0.0.0.0", "127.0.0.1", "10.1.2.3"]), st.integers(1, 65535), st.sampled_from(["", "127.9.9.9"]))
def test_only_a_wildcard_bind_becomes_the_emulated_machines_address(host: str, port: int, machine: str) -> None:
    bind = f"tcp://{host}:{port}"
    narrowed = narrow_wildcard(bind, machine)
    if host == "0.0.0.0" and machine:
        assert narrowed == f"tcp://{machine}:{port}"
    else:
        assert narrowed == bind  # an address the provider chose stays as given
    assert narrow_wildcard("ipc:///run/a.sock", machine) == "ipc:///run/a.sock"


def test_a_taken_port_is_explained_with_the_nodes_whole_port_range_and_what_to_do() -> None:
    message = why_cannot_listen("skyward agent (node 1)", "tcp://127.0.0.1:16789", errno.EADDRINUSE, ports=3)
    assert message.startswith(
        "skyward agent (node 1): cannot listen on tcp://127.0.0.1:16789: Address already in use (EADDRINUSE)."
    )
    assert "ports 16789-16791" in message and "ss -ltnp 'sport = :16789'" in message
    assert "gives each node its own address or port" in message


def test_an_address_of_another_machine_and_a_privileged_port_are_explained() -> None:
    foreign = why_cannot_listen("skyward agent (node 0)", "tcp://10.9.9.9:16789", errno.EADDRNOTAVAIL)
    assert "(EADDRNOTAVAIL)" in foreign and "10.9.9.9 is not an address of this machine" in foreign
    low = why_cannot_listen("skyward agent (node 0)", "tcp://127.0.0.1:80", errno.EACCES)
    assert "(EACCES)" in low and "Ports below 1024 need root" in low
    unknown = why_cannot_listen("skyward agent (node 0)", "tcp://127.0.0.1:0", None)
    assert "no free port" in unknown


def test_each_node_has_its_own_key_the_same_on_every_call_until_renewed() -> None:
    keys = PoolKeys()
    first = [keys.node(i) for i in range(4)]
    assert len({k.public for k in first}) == 4 and len({k.secret for k in first}) == 4
    assert [keys.node(i) for i in range(4)] == first  # rendering a node twice gives it one key
    assert keys.client.public not in {k.public for k in first}
    renewed = keys.renew(2)
    assert renewed != first[2] and keys.node(2) == renewed  # a replacement's key
    assert [keys.node(i) for i in (0, 1, 3)] == [first[0], first[1], first[3]]  # the others keep theirs
    assert all(len(k.public) == 40 and len(k.secret) == 40 for k in (*first, renewed))


def test_a_node_asked_for_from_many_threads_at_once_gets_one_key() -> None:
    keys = PoolKeys()
    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(lambda _: keys.node(5), range(64)))
    assert {k.public for k in got} == {keys.node(5).public}


@pytest.mark.parametrize("index", [-1, True, 1.0, "0"])
def test_a_node_index_that_is_not_a_natural_number_is_refused(index: object) -> None:
    with pytest.raises(ValueError, match=r"PoolKeys.node\(.*\): a node index is an int >= 0"):
        PoolKeys().node(index)  # type: ignore[arg-type]


def test_an_ipc_path_is_in_use_only_while_something_listens_on_it(tmp_path: Path) -> None:
    path = tmp_path / "a.sock"
    assert not ipc_in_use(str(path))  # nothing there
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(path))
    listener.listen()
    assert ipc_in_use(str(path))
    listener.close()
    assert path.exists() and not ipc_in_use(str(path))  # a stale file: binding may replace it
