"""The provider conformance suite: the checks every provider passes, for any plugin.

A provider author subclasses :class:`ProviderConformance` in a test module and gives it
one fixture, ``cloud``, returning a :class:`CloudUnderTest`: their fake of the provider's
API with the emulated-instance harness attached (``skyward.testing.EmulatedInstances``
runs each instance's own user-data), and a few questions answered about it::

    class TestMyCloud(ProviderConformance):
        @pytest.fixture
        def cloud(self, my_fake_world) -> CloudUnderTest:
            return MyCloudUnderTest(my_fake_world)

pytest then runs every ``test_*`` method below against it: lifecycle events in order,
``>>``/``@``/``gather`` end to end, cleanup after a failure at node k of N, cleanup after a
bootstrap timeout, terminate verified, teardown removing what prepare made, every
resource labelled with the pool id and its expiry, nothing open to everyone (no inbound
rule from everywhere, and every node's agent refusing a client without the pool's CURVE
keys, which is what protects a provider without a firewall), no credential in any
user-data or event, and spot mapping where the provider has a market.

:class:`ElasticConformance` (which ``ProviderConformance`` includes) checks the two
abilities of a pool whose nodes come and go, for a provider that declares them
(``ElasticNodes``, ``NodeWatch``): a node added at the next index whose agent answers the
handshake with its own key and identity, one node removed while the others keep
answering and running work, a node replaced (removed, then added at its index), and
``gone()`` reporting a node that was deleted. It needs only ``config()`` and
``leftovers()`` of the ``cloud`` fixture, so a provider without a cloud API to inspect
(processes on this machine) runs it alone.

Every test is marked ``cloud``: the kit's pytest plugin runs it only inside an isolated
network namespace (only loopback up), because an emulated cloud hands out addresses that
must never be dialled for real. Run them with
``unshare --net -- sh -c 'ip link set lo up && exec python -m pytest -m cloud ...'``
(as root, or ``unshare --user --map-root-user --net``).

A provider that uses no credential at all (nothing for the no-credential check to look
for) says so with :class:`UsesNoCredential`; otherwise an empty ``secrets()`` fails that
check, so a forgotten answer is never a silent pass.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

import pytest
import zmq

import skyward
from skyward.api.compute import compute
from skyward.errors import SkywardError
from skyward.events import (
    BootstrapCompleted,
    BootstrapStarting,
    CostFinal,
    InfraCreated,
    InfraCreating,
    InstanceProvisioned,
    InstanceStopping,
    PoolStarted,
    PoolStopping,
)
from skyward.providers.cloud.naming import PoolMark
from skyward.providers.protocol import ElasticNodes, NodeHandle, NodeWatch
from skyward.providers.settings import ProviderSettings
from skyward.scaling import Nodes
from skyward.testing.probes import open_endpoint_problem
from skyward.transport import handshake
from skyward.transport.security import configure_client

EVERYWHERE = frozenset({"0.0.0.0/0", "::/0", "0.0.0.0", "::"})

LIFECYCLE = (
    InfraCreating,
    InfraCreated,
    InstanceProvisioned,
    BootstrapStarting,
    BootstrapCompleted,
    PoolStarted,
    PoolStopping,
    InstanceStopping,
    CostFinal,
)
"""The phases of a pool's life, in the order their first events must come."""


@dataclass(frozen=True, slots=True)
class Resource:
    """Something the provider made for a pool, with the labels read back from the fake."""

    what: str  # "droplet 123", "firewall fw-1"
    pool_id: str | None
    expires: int | None  # Unix time

    @classmethod
    def marked(cls, what: str, mark: PoolMark | None) -> Resource:
        """From the mark a provider's naming module parsed back (None: unlabelled)."""
        return cls(what, mark.pool_id if mark else None, mark.expires if mark else None)


@runtime_checkable
class CloudUnderTest(Protocol):
    """What the suite needs to know about a provider and its fake."""

    has_market: bool  # whether the provider sells spot capacity

    def config(self, **overrides: object) -> ProviderSettings:
        """A provider config pointed at the fake (quick polls, short timeouts), with
        ``overrides`` (``bootstrap_timeout=...``) applied."""
        ...

    def leftovers(self) -> Mapping[str, Sequence[str]]:
        """Everything still on the fake that a pool made and should have removed, by kind
        (an empty mapping when nothing is left)."""
        ...

    def resources(self) -> Sequence[Resource]:
        """Every resource a pool made that exists now, with its labels."""
        ...

    def ingress_sources(self) -> Sequence[str]:
        """Every source address or CIDR an inbound rule admits (cloud firewalls, and rules
        a node's script sets up), for resources that exist now. Empty for a provider
        without a firewall API (a marketplace, processes on a host): the suite then relies
        on, and checks, the agent's CURVE handshake alone."""
        ...

    def user_data(self) -> Sequence[str]:
        """Every script the fake received for an instance."""
        ...

    def secrets(self) -> Sequence[str]:
        """The credentials the provider uses (tokens, secret keys). Empty fails the
        no-credential check unless the CloudUnderTest is also :class:`UsesNoCredential`."""
        ...

    def fail_create(self, after: int) -> None:
        """Make the fake refuse every create call after the first ``after``."""
        ...

    def stall_boot(self) -> None:
        """Make instances run but never start their agent (a bootstrap that hangs)."""
        ...

    def is_spot(self, instance_id: str) -> bool:
        """Whether the fake made this instance on the spot market."""
        ...


@runtime_checkable
class UsesNoCredential(Protocol):
    """A CloudUnderTest whose provider needs no credential (an on-premises or test
    provider): its empty ``secrets()`` is then an answer, and the no-credential check is
    reported as an expected failure with that reason instead of failing."""

    uses_no_credential: Literal[True]


@compute
def _where(x: int) -> tuple[int, int]:
    return x * x, skyward.instance_info().node


_SECRET_VARIABLE = "SKYWARD_CONFORMANCE_SECRET"


@compute
def _secret_env() -> str | None:
    return os.environ.get(_SECRET_VARIABLE)


def lifecycle_order_problems(events: Sequence[object], nodes: int) -> list[str]:
    """What is wrong with ``events`` as the life of a pool of ``nodes`` nodes (empty when
    nothing is): every phase present, first events in order, one InstanceProvisioned,
    BootstrapCompleted and InstanceStopping per node, CostFinal last."""
    kinds = [type(e) for e in events]
    missing = [k.__name__ for k in LIFECYCLE if k not in kinds]
    if missing:
        return [f"no {name}" for name in missing]
    problems = []
    firsts = [kinds.index(k) for k in LIFECYCLE]
    if firsts != sorted(firsts):
        problems.append(f"phases out of order: {[type(events[i]).__name__ for i in sorted(firsts)]}")
    for kind in (InstanceProvisioned, BootstrapCompleted, InstanceStopping):
        if kinds.count(kind) != nodes:
            problems.append(f"{kinds.count(kind)} {kind.__name__} for {nodes} nodes")
    if kinds[-1] is not CostFinal:
        problems.append(f"the last event is {kinds[-1].__name__}, not CostFinal")
    return problems


def wait_for(done: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@runtime_checkable
class ProviderUnderTest(Protocol):
    """What :class:`ElasticConformance` needs of a provider: a config and what is left."""

    def config(self, **overrides: object) -> ProviderSettings: ...

    def leftovers(self) -> Mapping[str, Sequence[str]]: ...


class ElasticPool:
    """An open pool's provider, driven by hand: nodes added and removed as an elastic
    pool does (the provider's ``add_nodes``/``remove_nodes``, the client's
    ``remove_node``), and each new agent's handshake made here, with the key and identity
    the pool's user-data gave that node, so what is checked is the provider's part alone."""

    def __init__(self, pool: skyward.ComputePool, events: list[object]) -> None:
        driver = pool._driver
        if not isinstance(driver, ElasticNodes):
            pytest.fail(f"the {pool.provider_name} provider is not ElasticNodes (add_nodes, remove_nodes)", False)
        launcher = pool._launcher
        self.pool, self.driver, self.events = pool, driver, events
        self.user_data = launcher.user_data
        self.timeout = float(launcher.candidate.settings.bootstrap_timeout)

    def add(self, index: int) -> NodeHandle:
        """A node at ``index`` (a fresh key first, as a replacement gets), once its agent
        answered the handshake as node ``index`` of this pool."""
        self.pool._keys.renew(index)
        spec = self.pool.spec
        if spec.max_nodes <= index:  # the pool's own spec says how far it may grow, once it does
            spec = dataclasses.replace(spec, scaling=Nodes(desired=spec.nodes, max=index + 1))
        (handle,) = self.driver.add_nodes(spec, [index], self.user_data, self.events.append)
        assert handle.node == index, handle
        info = self.hello(handle)
        assert info["node"] == index and info["pool_id"] == self.pool.spec.pool_id, info
        return handle

    def hello(self, handle: NodeHandle) -> dict[str, Any]:
        """The agent's INFO for ``handle``: the pool's handshake, wheels and identity check
        included (``NodeIdentityError`` when another node's agent answers)."""
        context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
        try:
            sock = context.socket(zmq.DEALER)
            sock.setsockopt(zmq.LINGER, 0)
            if handle.endpoint.startswith("tcp://"):
                keys = self.pool._keys
                configure_client(sock, keys.node(handle.node).public, keys.client)
            sock.connect(handle.endpoint)
            expected = self.user_data.identity(handle.node)

            def describe(_silent: list[int]) -> str:
                return (
                    f"node {handle.node} ({handle.endpoint}) added to the pool did not answer within {self.timeout:g} s"
                )

            (info,) = handshake.hello(
                [sock], describe, self.timeout, wheels=self.pool._launcher.wheels, expected=[expected]
            )
            return info
        finally:
            context.destroy(linger=0)

    def remove(self, handle: NodeHandle) -> None:
        """Node ``handle.node`` leaves: the client forgets it, the provider deletes it."""
        client = self.pool._client
        assert client is not None
        client.remove_node(handle.node, timeout=5.0)
        self.driver.remove_nodes([handle])

    def gone(
        self, nodes: Sequence[NodeHandle], timeout: float = 60.0, until: Sequence[NodeHandle] | None = None
    ) -> dict[str, str]:
        """``gone(nodes)`` once it reports every one of ``until`` (default: all of
        ``nodes``), or its last answer at ``timeout``."""
        driver = self.driver
        if not isinstance(driver, NodeWatch):
            pytest.fail(f"the {self.pool.provider_name} provider is not NodeWatch (gone)", False)
        wanted = {n.instance_id for n in (nodes if until is None else until)}
        found = driver.gone(nodes)
        deadline = time.monotonic() + timeout
        while not wanted <= set(found) and time.monotonic() < deadline:
            time.sleep(min(driver.node_poll_interval, 0.5))
            found = driver.gone(nodes)
        return found


def _nodes_answering(pool: skyward.ComputePool) -> list[int]:
    """The node of each worker that runs ``@`` (every live one), after a gather ran."""
    many = skyward.gather(*(_where(x) for x in range(4))) >> pool
    assert [r for r, _ in many] == [x * x for x in range(4)]
    return sorted({node for _, node in _where(2) @ pool})


class ElasticConformance:
    """Nodes that come and go (see the module); ``ProviderConformance`` includes it, and
    a provider without a cloud API subclasses it alone, its ``cloud`` fixture returning a
    :class:`ProviderUnderTest`."""

    nodes = 2

    def _elastic(self, cloud: ProviderUnderTest, events: list[object]) -> skyward.ComputePool:
        # on-demand: a spot node deleted here would be seen as reclaimed, and the pool's own
        # replacement (Spot.Always, AWS's default) would race the one the test makes
        return skyward.ComputePool(
            provider=cloud.config(), nodes=self.nodes, display="quiet", on_event=events.append, spot="never"
        )

    def test_a_node_added_at_the_next_index_answers_as_that_node(self, cloud: ProviderUnderTest) -> None:
        events: list[object] = []
        with self._elastic(cloud, events) as pool:
            elastic = ElasticPool(pool, events)
            before = {n.instance_id for n in pool.nodes}
            added = elastic.add(self.nodes)
            assert added.instance_id not in before and added.endpoint not in {n.endpoint for n in pool.nodes}
            mine = [e for e in events if getattr(e, "instance_id", None) == added.instance_id]
            assert [type(e) for e in mine][:1] == [InstanceProvisioned], mine
            assert elastic.gone([*pool.nodes, added], timeout=0) == {}, "a running node is reported gone"
            assert _nodes_answering(pool) == list(range(self.nodes))  # the first nodes go on
        # the pool's stop removes a node added later too
        assert wait_for(lambda: not cloud.leftovers(), timeout=30), cloud.leftovers()

    def test_a_removed_node_is_gone_and_the_others_keep_running(self, cloud: ProviderUnderTest) -> None:
        events: list[object] = []
        with self._elastic(cloud, events) as pool:
            elastic = ElasticPool(pool, events)
            *kept, last = pool.nodes
            elastic.remove(last)
            assert set(elastic.gone([last])) == {last.instance_id}
            assert elastic.gone(kept, timeout=0) == {}, "remove_nodes took more than it was given"
            assert _nodes_answering(pool) == [n.node for n in kept]
            elastic.driver.remove_nodes([last])  # again: a node already gone is not an error
        assert wait_for(lambda: not cloud.leftovers(), timeout=30), cloud.leftovers()

    def test_a_replaced_node_answers_at_its_index_with_a_new_instance(self, cloud: ProviderUnderTest) -> None:
        events: list[object] = []
        with self._elastic(cloud, events) as pool:
            elastic = ElasticPool(pool, events)
            old = pool.nodes[-1]
            elastic.remove(old)
            new = elastic.add(old.node)
            assert new.instance_id != old.instance_id
            assert set(elastic.gone([old])) == {old.instance_id}
            assert elastic.gone([new], timeout=0) == {}
            assert _nodes_answering(pool) == [n.node for n in pool.nodes[:-1]]
        assert wait_for(lambda: not cloud.leftovers(), timeout=30), cloud.leftovers()

    def test_gone_names_a_deleted_node_and_only_it(self, cloud: ProviderUnderTest) -> None:
        events: list[object] = []
        with self._elastic(cloud, events) as pool:
            elastic = ElasticPool(pool, events)
            first, *others = pool.nodes
            elastic.remove(first)
            found = elastic.gone(pool.nodes, until=[first])  # and not the others
            assert set(found) == {first.instance_id}, found
            assert found[first.instance_id].strip(), "gone() must say why"
            assert _nodes_answering(pool) == [n.node for n in others]
        assert wait_for(lambda: not cloud.leftovers(), timeout=30), cloud.leftovers()


@pytest.mark.cloud
class ProviderConformance(ElasticConformance):
    """The suite; subclass it and provide the ``cloud`` fixture (see the module)."""

    nodes = 2

    @pytest.fixture
    def cloud(self) -> CloudUnderTest:
        raise NotImplementedError("provide a `cloud` fixture returning a CloudUnderTest")

    def _pool(self, cloud: CloudUnderTest, events: list[object], spot: str | None = None) -> skyward.ComputePool:
        return skyward.ComputePool(
            provider=cloud.config(), nodes=self.nodes, display="quiet", on_event=events.append, spot=spot
        )

    def test_a_pool_runs_every_operator_end_to_end_and_leaves_nothing(self, cloud: CloudUnderTest) -> None:
        events: list[object] = []
        with self._pool(cloud, events) as pool:
            labelled = list(cloud.resources())
            sources = list(cloud.ingress_sources())
            assert (_where(3) >> pool)[0] == 9
            assert sorted(node for _, node in _where(2) @ pool) == list(range(self.nodes))
            many = skyward.gather(*(_where(x) for x in range(6))) >> pool
            assert [r for r, _ in many] == [x * x for x in range(6)]
            pool_id = pool.spec.pool_id
            # where there is no firewall (no inbound rule), the agent itself is the gate
            open_to_strangers = [p for p in (open_endpoint_problem(n.endpoint) for n in pool.nodes) if p]
            started = time.time()
        assert lifecycle_order_problems(events, self.nodes) == []
        # every resource labelled with this pool and an expiry in the future
        assert labelled, "the pool made no resource the cloud reports"
        for resource in labelled:
            assert resource.pool_id == pool_id, resource
            assert resource.expires is not None and resource.expires > started, resource
        # no inbound rule admits everyone, and a stranger who reaches an agent completes no handshake
        assert not EVERYWHERE & set(sources), f"an inbound rule admits everyone: {sources}"
        assert open_to_strangers == []
        assert wait_for(lambda: not cloud.leftovers(), timeout=30), cloud.leftovers()

    def test_no_credential_reaches_a_node_or_an_event(
        self, cloud: CloudUnderTest, capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
    ) -> None:
        caplog.set_level(logging.DEBUG)  # every record, whatever the application configured
        events: list[object] = []
        token = f"conformance-secret-{uuid.uuid4().hex}"  # a user's sky.Secret: the workers' env alone
        with skyward.ComputePool(
            provider=cloud.config(), nodes=self.nodes, display="quiet", on_event=events.append,
            env={_SECRET_VARIABLE: skyward.Secret(token)},
        ) as pool:  # fmt: skip
            assert (_where(1) >> pool)[0] == 1
            assert (_secret_env() >> pool) == token
            scripts = list(cloud.user_data())  # while they exist: teardown may delete them
        assert scripts, "the provider under test reports no user-data"
        assert not any(token in script for script in scripts), "an env sky.Secret is in a node's user-data"
        assert not any(token in repr(event) for event in events), "an env sky.Secret is in an event"
        secrets = [s for s in cloud.secrets() if s]
        if not secrets:
            if isinstance(cloud, UsesNoCredential):
                pytest.xfail(f"{type(cloud).__name__} declares that its provider uses no credential: none to look for")
            pytest.fail(
                f"{type(cloud).__name__}.secrets() returned no credential, so nothing was checked: return the "
                "tokens and keys your provider uses, or, if it truly uses none, declare it with "
                "`uses_no_credential = True` (skyward.testing.conformance.UsesNoCredential)",
                pytrace=False,
            )
        assert scripts, "the provider under test reports no user-data"
        for secret in secrets:
            assert not any(secret in script for script in scripts), "a credential is in a node's user-data"
            assert not any(secret in repr(event) for event in events), "a credential is in an event"
        output = capfd.readouterr()
        # skyward's own records (a provider's SDK may log its request headers at DEBUG; that
        # is the application's logging configuration to keep)
        logged = "\n".join(r.getMessage() for r in caplog.records if r.name.split(".")[0].startswith("skyward"))
        for secret in secrets:
            assert secret not in output.err and secret not in output.out, "a credential was printed"
            assert secret not in logged, "a credential was logged"

    @pytest.mark.parametrize("k", ["first", "last"])
    def test_a_failure_at_node_k_of_n_removes_everything(self, cloud: CloudUnderTest, k: str) -> None:
        cloud.fail_create(after=0 if k == "first" else self.nodes - 1)
        with pytest.raises(SkywardError), self._pool(cloud, []):
            pass
        assert wait_for(lambda: not cloud.leftovers(), timeout=30), cloud.leftovers()

    def test_a_bootstrap_that_never_finishes_times_out_and_removes_everything(self, cloud: CloudUnderTest) -> None:
        cloud.stall_boot()
        started = time.monotonic()
        pool = skyward.ComputePool(provider=cloud.config(bootstrap_timeout=2.0), nodes=self.nodes, display="quiet")
        with pytest.raises(SkywardError):
            pool.open()
        assert time.monotonic() - started < 60
        assert wait_for(lambda: not cloud.leftovers(), timeout=30), cloud.leftovers()

    def test_spot_always_runs_every_node_on_the_spot_market(self, cloud: CloudUnderTest) -> None:
        if not cloud.has_market:
            with pytest.raises(SkywardError, match="no spot market"):
                self._pool(cloud, [], spot="always")
            return
        with self._pool(cloud, [], spot="always") as pool:
            assert all(n.spot for n in pool.nodes)
            assert all(cloud.is_spot(n.instance_id) for n in pool.nodes)
        with self._pool(cloud, [], spot="never") as pool:
            assert not any(n.spot or cloud.is_spot(n.instance_id) for n in pool.nodes)
        assert wait_for(lambda: not cloud.leftovers(), timeout=30), cloud.leftovers()
