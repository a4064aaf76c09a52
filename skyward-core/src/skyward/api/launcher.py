"""Starting a pool: its candidates, checked at construction, and the start on the first
that can provide every node.

``make_candidates`` validates every candidate's configuration before anything is made
(a pool that fails validation has provisioned nothing). ``Launcher.launch`` then starts
on them in the order the selection gives: the provider prepares its infrastructure and
launches the nodes, each with its bootstrap script (``NodeUserData``); the client
connects to every agent and checks it can serve this client (same Python minor, same
cloudpickle); a pool that asked for it bakes its image. A candidate that fails for a
reason another may not share (``failover.moves_on``) is cleaned up entirely, said in a
``CandidateFailed`` event, and the next one starts from nothing; any other failure
stops the start.
"""

from __future__ import annotations

import dataclasses
import os
import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import cloudpickle

from skyward.api import failover
from skyward.api.autoscale import AutoscaleSettings
from skyward.api.candidate_prices import candidate_price
from skyward.api.failover import ProviderChoice
from skyward.api.fleet import Fleet
from skyward.api.fleet_state import FleetState
from skyward.api.kept.registration import saved_spec
from skyward.api.node_changes import NodeChanges, open_when_ready, version_mismatch
from skyward.api.options import PoolOptions
from skyward.api.scaler import Scaler, client_healing
from skyward.api.spec import PoolSpec, build_spec
from skyward.api.user_data import NodeUserData, plugin_steps
from skyward.errors import ConfigurationError, ProvisioningError, UnavailableError, VersionMismatchError, VolumeError
from skyward.events import CandidateFailed, InfraCreated, InfraCreating, Notice
from skyward.files.sender import FileShipment
from skyward.image import CLIENT_PYTHON, Image
from skyward.plugins.registry import registry
from skyward.providers import rules
from skyward.providers.baking import Bakes
from skyward.providers.local import Local
from skyward.providers.protocol import (
    CONTAINERS_HAVE_NO_FUSE,
    ElasticNodes,
    EventSink,
    FuseMounts,
    NodeHandle,
    ProviderDriver,
    SpotMarket,
    VolumeMounts,
)
from skyward.providers.settings import ProviderSettings, settings_of, third_party_hosts
from skyward.scaling import Nodes
from skyward.secrets import resolve_env
from skyward.transport import wire
from skyward.transport.client import PoolClient
from skyward.transport.handshake import NodeIdentity
from skyward.transport.links import NodeInfo
from skyward.transport.results import ResultDecoder
from skyward.transport.safe_pickle import ResultPolicy, safe_loads
from skyward.transport.security import PoolKeys
from skyward.transport.shm import SHM_DIR, SharedMemory, shared_memory_applies
from skyward.volume import Volume
from skyward.wheels.cache import OfferedWheels


@dataclass(frozen=True, slots=True)
class Candidate:
    """One candidate, validated at construction: what the pool needs to start on it."""

    index: int
    label: str
    spec: PoolSpec
    provider_name: str
    driver: ProviderDriver
    settings: ProviderSettings
    spot_notice: str | None
    decoder: ResultDecoder


def common_rules(provider_name: str, driver: ProviderDriver, spec: PoolSpec) -> str | None:
    """The rules every provider shares (skyward.providers.rules); returns the Notice
    a pool that runs on-demand instead of spot says when it opens."""
    plugin_volumes = [v for v in spec.volumes if not isinstance(v, Volume)]  # sky.Volume: every provider
    rules.unmounted_volumes(provider_name, plugin_volumes, isinstance(driver, VolumeMounts))
    mounted = [v for v in spec.volumes if isinstance(v, Volume) and v.mode == "mount"]
    if mounted:
        why = driver.fuse_unavailable(spec) if isinstance(driver, FuseMounts) else CONTAINERS_HAVE_NO_FUSE
        if why is not None:
            raise ConfigurationError(
                f"ComputePool(volume=...): {mounted[0]!r} cannot be mounted on the {provider_name} provider: {why}. "
                "Use Volume(..., mode='sync') instead: the prefix is downloaded before the first task and, "
                "unless read_only, uploaded when the node stops"
            )
    if isinstance(driver, VolumeMounts):
        for volume in plugin_volumes:
            if not driver.mounts(volume):
                raise ConfigurationError(
                    f"ComputePool(volume=...): the {provider_name} provider cannot mount {volume!r}"
                )
    if isinstance(driver, SpotMarket):
        return None
    return rules.spot_without_market(provider_name, spec.spot)


def elastic_rules(provider_name: str, driver: ProviderDriver, spec: PoolSpec) -> None:
    """An elastic pool (its size may change: ``nodes=(desired, max)``, ``sky.Nodes`` with
    ``min`` or ``max``) needs a provider that adds and removes nodes of a running pool."""
    scaling = spec.scaling
    if scaling is None or not scaling.elastic or isinstance(driver, ElasticNodes):
        return
    raise ConfigurationError(
        f"ComputePool(nodes={scaling!r}): the {provider_name} provider cannot add or remove nodes of a running pool "
        f"(it has no ElasticNodes ability); use a fixed size such as nodes={scaling.desired or 1}, or a provider "
        "that scales (Local, AWS and the cloud template's providers do)"
    )


def kept_rules(provider_name: str, spec: PoolSpec) -> None:
    """A kept pool's spec (its provider configuration and image) is saved for the clients
    that attach later: it must pickle."""
    try:
        saved_spec(spec)
    except Exception as error:
        raise ConfigurationError(
            f"ComputePool(keep_alive={spec.keep_alive:g}): the {provider_name} configuration cannot be saved for "
            f"sky.attach ({error}); build the provider from plain values, or leave keep_alive out"
        ) from None


def result_decoder(provider: object, safe: bool | None, allow: Sequence[str | type]) -> ResultDecoder:
    """How results are read: ``safe_results=None`` follows the provider (safe where its
    hosts are third parties); ``allow_results`` widens safe mode's allow-list."""
    if safe is not None and not isinstance(safe, bool):
        raise ConfigurationError(
            f"ComputePool(safe_results={safe!r}): must be True, False or None (the provider's default)"
        )
    policy = ResultPolicy.build(allow)
    if safe is None:
        safe = third_party_hosts(provider)
    return ResultDecoder(safe_loads(policy)) if safe else ResultDecoder()


def make_candidates(provider: ProviderChoice, options: PoolOptions) -> list[Candidate]:
    """Every candidate of the pool, validated (spec, common rules, the driver's own
    checks); one pool id for all of them, whichever runs the pool."""
    candidates = failover.candidates_from(
        provider,
        accelerator=options.get("accelerator"),
        spot=options.get("spot"),
        machine=options.get("machine"),
        max_hourly_cost=options.get("max_hourly_cost"),
    )
    out: list[Candidate] = []
    pool_id: str | None = None
    for index, candidate in enumerate(candidates):
        spec = build_spec(
            provider=candidate.provider, image=options.get("image"), pip=options.get("pip"),
            nodes=options.get("nodes", 1), machine=candidate.machine, accelerator=candidate.accelerator,
            cpu=options.get("cpu"), memory=options.get("memory"), volume=options.get("volume"), spot=candidate.spot,
            timeout=options.get("timeout", 3600), env=options.get("env"), concurrency=options.get("concurrency", 1),
            display=options.get("display", "log"), collect_metrics=options.get("collect_metrics", True),
            max_hourly_cost=candidate.max_hourly_cost, name=options.get("name"),
            keep_alive=options.get("keep_alive"),
        )  # fmt: skip
        pool_id = pool_id or spec.pool_id
        spec = dataclasses.replace(spec, pool_id=pool_id)  # one pool, whichever candidate runs it
        plugin = registry.provider_for(candidate.provider)
        driver: ProviderDriver = plugin.create_driver(candidate.provider)
        notice = common_rules(plugin.name, driver, spec)
        elastic_rules(plugin.name, driver, spec)
        driver.validate(spec)  # every candidate's configuration, before anything is made
        if spec.kept:
            kept_rules(plugin.name, spec)
        out.append(
            Candidate(
                index=index,
                label=failover.label(index, plugin.name, candidate.provider),
                spec=spec,
                provider_name=plugin.name,
                driver=driver,
                settings=settings_of(candidate.provider),
                spot_notice=notice,
                decoder=result_decoder(
                    candidate.provider, options.get("safe_results"), options.get("allow_results", ())
                ),
            )
        )
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Launcher:
    """Starts a pool on one of its candidates; ``candidate`` is the first until a start
    began, then the one that runs (or last ran) the pool, and ``fleet`` its nodes once
    the provider launched them."""

    def __init__(
        self,
        candidates: Sequence[Candidate],
        selection: failover.Selection,
        emit: EventSink,
        active: Callable[[], bool],
        autoscale: AutoscaleSettings | None = None,
    ) -> None:
        self.candidates = tuple(candidates)
        self.candidate = self.candidates[0]
        self._selection = selection
        self._emit = emit
        self._active = active
        self._autoscale = autoscale or AutoscaleSettings()
        self.keys = PoolKeys()  # a server keypair per node, made as its user-data is rendered
        self.wheels = OfferedWheels()  # what the nodes' user-data names: sent when they ask
        self._steps = plugin_steps(self.candidate.spec.image)  # once, and before anything starts
        self._head_port = _free_port()
        self.region = ""  # where the pool runs, as the provider's prepare() named it
        self.fleet: Fleet | None = None
        self.scaler: Scaler | None = None  # the fleet's, once it launched
        self.client: PoolClient | None = None  # made before its handshake: a failed start closes it
        self.agent_pids: dict[int, int] = {}  # node -> its agent's pid, as its hello said
        self.files: FileShipment | None = None  # Image(includes=...), read at launch
        self.user_data = self._user_data_of(self.candidate)
        self._clean = False  # the current candidate's resources were all removed

    def _user_data_of(self, candidate: Candidate) -> NodeUserData:
        return NodeUserData(candidate.spec, candidate.settings, self.keys, self.wheels, self._steps)

    def launch(self) -> Fleet:
        """Start the pool on the first candidate (in the selection's order) that can
        provide it; with one candidate, its error is raised as is. The project's files
        are read first: an include that names nothing fails before anything is made."""
        candidates = self.candidates
        self.files = self._read_files(candidates[0].spec.image)
        if len(candidates) == 1:
            return self._start(candidates[0])
        prices: list[float | None] = [None] * len(candidates)
        if self._selection == "cheapest":
            prices = [candidate_price(c.spec, c.driver) for c in candidates]
            ranked = failover.order(self._selection, prices)
            labels = [candidates[i].label for i in ranked]
            self._emit(Notice(message="cheapest first: " + failover.ranking(labels, [prices[i] for i in ranked])))
        failures: list[tuple[str, UnavailableError]] = []
        for index in failover.order(self._selection, prices):
            candidate = candidates[index]
            try:
                return self._start(candidate)
            except Exception as error:
                reason = failover.moves_on(error)
                if reason is None:
                    raise
                self._clean_candidate()  # raises (and stops) when something was left behind
                failures.append((candidate.label, reason))
                region = (
                    candidate.spec.provider.region if isinstance(candidate.spec.provider, failover.Regional) else None
                )
                self._emit(
                    CandidateFailed(
                        candidate=index, provider=candidate.provider_name, region=region, reason=reason.reason,
                        message=str(reason),
                    )
                )  # fmt: skip
        raise failover.all_failed(failures)

    def _read_files(self, image: Image) -> FileShipment | None:
        """The project's files (``Image(includes=...)``) under the working directory now."""
        if not image.includes:
            return None
        root = Path.cwd()
        manifest = image.files(root)
        self._emit(
            Notice(
                message=f"files: {len(manifest.entries)} file(s), {manifest.total_bytes / 2**20:.1f} MiB from {root} "
                f"(files_hash {manifest.sha256[:12]})"
            )
        )
        return FileShipment(manifest, root, self._emit)

    def _start(self, candidate: Candidate) -> Fleet:
        self.candidate = candidate
        self.keys = PoolKeys()  # nothing a failed candidate left running answers to this one's keys
        self.user_data = self._user_data_of(candidate)
        self._clean = False
        self._emit(InfraCreating())
        if candidate.spot_notice is not None:
            self._emit(Notice(message=candidate.spot_notice))
        self.region = candidate.driver.prepare(candidate.spec, self._emit)
        self._emit(InfraCreated(region=self.region))
        handles = candidate.driver.launch(candidate.spec, self.user_data, self._emit)
        scaling = candidate.spec.scaling or Nodes(max(len(handles), 1))
        staged = scaling.ready < len(handles) or not handles  # the rest join as they answer
        fleet = self.fleet = Fleet(
            spec=candidate.spec,
            driver=candidate.driver,
            provider_name=candidate.provider_name,
            region=self.region,
            handles=handles,
            user_data=self.user_data,
            identities=self.user_data,
            bootstrap_timeout=float(candidate.settings.bootstrap_timeout),
            emit=self._emit,
            active=self._active,
            state=FleetState.launched_all(handles) if staged else None,
        )
        driver = candidate.driver
        changes = NodeChanges(fleet, driver) if isinstance(driver, ElasticNodes) else None
        self.scaler = Scaler(fleet, changes, scaling, self._autoscale)
        if staged and changes is not None:
            self._connect(candidate, fleet, handles, [])
            open_when_ready(fleet, changes, handles, scaling.ready)
        else:
            infos = self._connect(candidate, fleet, handles, handles)
            for handle, info in zip(fleet.handles, infos, strict=True):
                fleet.report_bootstrap(handle, info)
        self._bake_if_asked(candidate, fleet)
        return fleet

    @staticmethod
    def _shared_memory(candidate: Candidate) -> SharedMemory | None:
        """The pool's shared memory for large buffers: Local pools only (see skyward.transport.shm)."""
        settings = candidate.settings
        transport = settings.transport if isinstance(settings, Local) else "tcp"
        asked = settings.shared_memory if isinstance(settings, Local) else False
        if not asked or not shared_memory_applies(candidate.provider_name, transport) or not os.path.isdir(SHM_DIR):
            return None
        return SharedMemory(candidate.spec.pool_id)

    def reconnect(
        self,
        handles: Sequence[NodeHandle],
        keys: PoolKeys,
        answers_as: Mapping[int, str],
        region: str,
        port_map: Callable[[int, int], str] | None,
        timeout: float,
    ) -> Fleet:
        """Connect to the running nodes of a kept pool (``sky.attach``): no provider call,
        no new node; the same handshake (each agent must answer as its node, to this
        client's key) and version check as at start. The fleet does not heal or resize:
        replacing a node needs what the provider's ``prepare`` made in the process that
        opened the pool (its firewall, its tunnels), which this one does not have."""
        candidate = self.candidate
        self.keys = keys
        self.region = region
        self.user_data = self._user_data_of(candidate)
        fleet = self.fleet = Fleet(
            spec=candidate.spec, driver=candidate.driver, provider_name=candidate.provider_name, region=region,
            handles=handles, user_data=self.user_data, identities=None,
            bootstrap_timeout=float(candidate.settings.bootstrap_timeout), emit=self._emit, active=self._active,
        )  # fmt: skip
        self.scaler = Scaler(fleet, None, Nodes(len(handles)), AutoscaleSettings(replace_lost=False), watch=False)
        pool_id = candidate.spec.pool_id
        client = PoolClient(
            [n.endpoint for n in handles], keys, fleet.on_node_message, rerun_lost=False,
            on_node_lost=self.scaler.node_lost, wait_for_nodes=False, decoder=candidate.decoder, port_map=port_map,
            wheels=self.wheels, identities=[NodeIdentity(pool_id, n.node, answers_as.get(n.node, "")) for n in handles],
            shm=self._shared_memory(candidate),
        )  # fmt: skip
        self.client = client
        fleet.attach(client)
        infos = client.connect(timeout=timeout)
        for node, info in zip(handles, infos, strict=True):
            problem = version_mismatch(node.node, info, CLIENT_PYTHON, cloudpickle.__version__)
            if problem is not None:
                raise VersionMismatchError(problem)
        return fleet

    def _connect(
        self, candidate: Candidate, fleet: Fleet, launched: Sequence[NodeHandle], handles: Sequence[NodeHandle]
    ) -> list[NodeInfo]:
        """Connects to the agents of ``handles`` (every node launched, or none where they
        join as they answer) and checks each can serve this client; returns their hellos."""
        healing = client_healing(candidate.spec, candidate.driver, self._autoscale)
        shm = self._shared_memory(candidate)
        client = PoolClient(
            [n.endpoint for n in handles],
            self.keys,
            fleet.on_node_message,
            rerun_lost=any(n.spot for n in launched) or healing.rerun_lost,
            on_node_lost=self.scaler.node_lost if self.scaler is not None else None,
            wait_for_nodes=healing.wait_for_nodes,
            decoder=candidate.decoder,
            port_map=fleet.port_map(),
            wheels=self.wheels,
            identities=[self.user_data.identity(n.node) for n in handles],
            files=self.files,
            shm=shm,
        )
        self.client = client
        fleet.attach(client)
        infos = client.connect(timeout=float(candidate.settings.bootstrap_timeout))
        self.agent_pids.update({n.node: int(i["pid"]) for n, i in zip(handles, infos, strict=True) if "pid" in i})
        for node, info in zip(handles, infos, strict=True):
            problem = version_mismatch(node.node, info, CLIENT_PYTHON, cloudpickle.__version__)
            if problem is not None:
                raise VersionMismatchError(problem)
        head = launched[0] if launched else None
        cluster = {
            "head_addr": (head.private_ip or head.ip or "127.0.0.1") if head is not None else "127.0.0.1",
            "head_port": self._head_port,
            "total_nodes": len(launched),
            "job_id": candidate.spec.pool_id,
            # the workers' env travels here only, under CURVE (see skyward.secrets)
            "env": resolve_env(candidate.spec.image.env),
            "shared_memory": shm is not None,  # the workers send large results through it too
        }
        frames = [wire.CLUSTER, wire.encode_json(cluster)]
        volumes = [v.node_spec() for v in candidate.spec.volumes if isinstance(v, Volume)]
        if volumes:  # for the agents alone (they mount, then pass the rest to their workers)
            frames.append(wire.encode_json(volumes))
        fleet.set_cluster(frames)
        client.broadcast_control(frames)
        if volumes:
            self._await_volumes(fleet, [n.node for n in handles], float(candidate.settings.bootstrap_timeout))
        return list(infos)

    def _await_volumes(self, fleet: Fleet, nodes: list[int], timeout: float) -> None:
        """Every node mounted (or downloaded) its volumes, or the open fails with the
        first node's reason (the pool then tears down what it made)."""
        failed = fleet.volume_reports.wait(nodes, timeout)
        if failed:
            raise VolumeError(
                "sky.Volume: " + "; ".join(failed[n] for n in sorted(failed))
                + " (check the bucket, the prefix and the storage's keys: `skyward doctor` tries them from here)"
            )  # fmt: skip

    def _bake_if_asked(self, candidate: Candidate, fleet: Fleet) -> None:
        """``Image(bake=True)``: once every agent has answered, a provider that bakes
        saves node 0's disk when no baked image matched (skyward.providers.baking)."""
        if not candidate.spec.image.bake or not fleet.handles:
            return
        if isinstance(candidate.driver, Bakes):
            candidate.driver.bake(candidate.spec, fleet.handles[0], self._emit)
        else:
            self._emit(Notice(message=f"Image(bake=True): the {candidate.provider_name} provider does not bake images"))

    def _clean_candidate(self) -> None:
        """Remove everything the current candidate made (client, nodes, infrastructure)
        before the next one starts."""
        fleet, client = self.fleet, self.client
        self.fleet, self.client, self.scaler = None, None, None
        driver = self.candidate.driver
        try:
            if client is not None:
                client.close(ProvisioningError("the pool moved on to another candidate"))
        finally:
            try:
                driver.terminate(list(fleet.state.everything) if fleet is not None else [])
            finally:
                driver.teardown()
        self._clean = True  # nothing for teardown_after_failure to remove twice

    def teardown_after_failure(self) -> None:
        """The start failed: close the client, terminate the nodes and remove the
        infrastructure of the candidate it failed on (unless already removed)."""
        driver = self.candidate.driver
        try:
            if self.client is not None:
                self.client.close(ProvisioningError("the pool failed to start"))
        finally:
            try:
                if not self._clean:
                    driver.terminate(list(self.fleet.state.everything) if self.fleet is not None else [])
            finally:
                if not self._clean:
                    driver.teardown()
