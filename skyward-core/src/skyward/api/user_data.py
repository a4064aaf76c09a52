"""Each node's bootstrap script: the image's bootstrap with the agent's configuration,
the GPU partitioning (MIG), the plugins' steps and the volume mounts added to what the
provider's ``BootstrapContext`` already carries.

A provider calls it once per node it launches (``UserDataFactory``), at start and for a
replacement, so the script of a node that joins later is built the same way.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from skyward.accelerators.mig_node import mig_setup_script
from skyward.agent.config import ENV_VAR, AgentConfig
from skyward.api.spec import PoolSpec
from skyward.bootstrap import environment_key, needs_environment, shares_client_environment
from skyward.image import BootstrapContext, Image
from skyward.plugins.contributions import BootstrapStep
from skyward.plugins.registry import plugin_census, registry, worker_startup_plugins
from skyward.providers.settings import NODE_TTL_MARGIN, ProviderSettings
from skyward.transport.handshake import NodeIdentity
from skyward.transport.security import PoolKeys
from skyward.wheels.cache import OfferedWheels


def plugin_steps(image: Image) -> list[BootstrapStep]:
    """The bootstrap steps plugins contribute for ``image`` (asked once per pool, before
    anything starts: a plugin that fails, fails the constructor)."""
    results = registry.pm.hook.skyward_bootstrap_steps(image=image)
    return [step for group in results for step in group]


def volume_scripts(volumes: Sequence[object]) -> list[str]:
    """The mount script of each volume, from the plugin that mounts its type."""
    plugins = registry.volumes()
    scripts = []
    for volume in volumes:
        plugin = next(p for p in plugins if isinstance(volume, p.volume_type))
        scripts.append(plugin.mount_script(volume))
    return scripts


class NodeUserData:
    """The ``UserDataFactory`` of one candidate: renders node ``node``'s bootstrap script.

    The wheels a provider's context names are offered to the nodes (``OfferedWheels``):
    the client sends them to an agent that asks in its handshake. Each node's script holds
    only that node's CURVE server secret (``PoolKeys.node``), and the instance id it names
    is the identity the handshake then requires of the agent answering for that node."""

    def __init__(
        self,
        spec: PoolSpec,
        settings: ProviderSettings,
        keys: PoolKeys,
        wheels: OfferedWheels,
        steps: Sequence[BootstrapStep],
    ) -> None:
        self._spec = spec
        self._settings = settings
        self._keys = keys
        self._wheels = wheels
        self._steps = tuple(steps)
        self._rendered: dict[int, str] = {}  # node -> the instance id its latest user-data names
        # what the environment key depends on besides the image -> the key (BootstrapContext.environment_key)
        self._environment_keys: dict[tuple[object, ...], str] = {}

    def __call__(
        self,
        node: int,
        bind: str,
        context: BootstrapContext,
        *,
        run_dir: str,
        visible_devices: Sequence[str | None] = (),
        instance_id: str = "",
    ) -> str:
        spec = self._spec
        # one rule on every node: stop when no client has been heard for the grace period;
        # a kept pool's grace is its keep-alive, so its nodes outlive the client that left
        grace = spec.keep_alive if spec.keep_alive is not None else float(self._settings.grace_period)
        # A cloud node partitions its own GPUs; a driver that maps devices itself (Local,
        # or a provider whose machines come partitioned) passes visible_devices instead.
        mig = spec.accelerator is not None and bool(spec.accelerator.mig) and not visible_devices
        mig_steps: list[tuple[str, str]] = []
        if mig and spec.accelerator is not None:
            mig_steps.append(("mig", mig_setup_script(spec.accelerator.mig, spec.accelerator.count)))
        shared = shares_client_environment(spec.image, context)
        config = AgentConfig(
            pool_id=spec.pool_id,
            node=node,
            total_nodes=spec.nodes,
            workers=spec.workers_per_node,
            bind=bind,
            run_dir=run_dir,
            server_secret=self._keys.node(node).secret.decode() if bind.startswith("tcp://") else None,
            client_public=self._keys.client.public.decode() if bind.startswith("tcp://") else None,
            ttl_seconds=spec.timeout + NODE_TTL_MARGIN,
            grace_seconds=grace,
            metrics_interval=2.0 if spec.collect_metrics else 0.0,
            accelerators=[str(spec.accelerator)] * max(1, spec.partitions) if spec.accelerator else [],
            visible_devices=list(visible_devices),
            mig_devices=spec.partitions if mig else 0,
            instance_id=instance_id,
            worker_plugins=worker_startup_plugins() if shared else None,
            plugin_census=None if shared else plugin_census(),
        )
        self._rendered[node] = instance_id
        self._wheels.offer(context.wheels)
        steps = [*mig_steps, *((s.name, s.script) for s in self._steps)]
        steps += [("volumes", script) for script in volume_scripts(spec.volumes)]
        ctx = dataclasses.replace(  # every field the provider set (``baked`` among them)
            context,
            agent_env={**context.agent_env, ENV_VAR: config.to_json()},
            extra_steps=(*context.extra_steps, *steps),
            environment_key=self._environment_key(context),
        )
        script = spec.image.bootstrap(int(spec.timeout + NODE_TTL_MARGIN), context=ctx)
        self._wheels.offer_script(script)  # a container node's start command fetches it by sha256
        return script

    def _environment_key(self, context: BootstrapContext) -> str | None:
        """The environment's key, computed once per pool for each context that builds one."""
        image = self._spec.image
        if context.environment_key is not None or not needs_environment(image, context):
            return context.environment_key
        inputs = (
            context.skyward_requirement, tuple(context.pinned), context.python_executable,
            tuple(w.sha256 for w in context.wheels),
        )  # fmt: skip
        key = self._environment_keys.get(inputs)
        if key is None:
            key = self._environment_keys[inputs] = environment_key(image, context)
        return key

    def identity(self, node: int) -> NodeIdentity:
        """Who must answer at node ``node``'s endpoint: what its latest user-data names."""
        return NodeIdentity(self._spec.pool_id, node, self._rendered.get(node, ""))

    def renew(self, node: int) -> None:
        """A new server key for node ``node``, before its replacement's user-data is
        rendered: the node it replaces cannot answer for the replacement."""
        self._keys.renew(node)
