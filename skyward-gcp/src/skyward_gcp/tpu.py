"""Cloud TPU VMs (pure): the TPU node a pool asks for, its hosts as the pool's nodes, and
the one startup script every host runs.

A TPU slice is one *node* of the TPU API with ``hosts`` VMs (``v5p-32``: 4). The pool's
nodes are those hosts, node ``i`` the slice's worker ``i`` (JAX numbers its processes the
same way, and ``jax.distributed`` takes node 0 as the coordinator: see
``skyward.distributed.backends.jax_backend``). The API takes one ``startup-script`` for
the whole node and runs it on every host, while each of the pool's nodes has its own
bootstrap (its index, its keys). So the node's script holds every host's bootstrap and
runs the one for the host it finds itself on: the metadata server's
``instance/attributes/agent-worker-number``, which Google sets on each TPU host.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from skyward.providers.cloud import Instance, InstanceState

WORKER_URL = "http://metadata.google.internal/computeMetadata/v1/instance/attributes/agent-worker-number"

TPU_STATES = {
    "CREATING": InstanceState.PENDING,
    "STARTING": InstanceState.PENDING,
    "RESTARTING": InstanceState.PENDING,
    "REPAIRING": InstanceState.PENDING,
    "READY": InstanceState.RUNNING,
    "STOPPING": InstanceState.STOPPED,
    "STOPPED": InstanceState.STOPPED,
    "PREEMPTED": InstanceState.STOPPED,
    "TERMINATED": InstanceState.STOPPED,
    "DELETING": InstanceState.GONE,
    "HIDING": InstanceState.GONE,
    "HIDDEN": InstanceState.GONE,
}
"""The TPU API's node states as the template cares: a spot slice Google takes back is
PREEMPTED (every host at once)."""


def host_id(zone: str, node_id: str, host: int) -> str:
    """The template's id of one host: ``<zone>/<node id>-w-<host>`` (the hosts' own names end so too)."""
    return f"{zone}/{node_id}-w-{host}"


def parse_host_id(instance_id: str) -> tuple[str, str, int]:
    zone, _, name = instance_id.partition("/")
    node_id, _, host = name.rpartition("-w-")
    return zone, node_id, int(host)


def slice_script(scripts: Sequence[str]) -> str:
    """One script that runs ``scripts[i]`` on host ``i`` of the slice."""
    lines = [
        "#!/bin/bash",
        "# skyward: every host of the TPU slice runs this; each runs its own bootstrap below",
        "set -eu",
        f"worker=$(curl -sf -H 'Metadata-Flavor: Google' '{WORKER_URL}')",
        "script=$(mktemp /var/tmp/skyward-host-XXXXXX.sh 2>/dev/null || mktemp)",
        'case "$worker" in',
    ]
    for index, script in enumerate(scripts):
        end = f"SKYWARD_HOST_{index}_END"
        while end in script:
            end += "_"
        lines += [f"{index})", f"cat > \"$script\" <<'{end}'", script.rstrip("\n"), end, ";;"]
    lines += ['*) echo "skyward: unknown TPU worker number: $worker" >&2; exit 1;;', "esac", 'exec bash "$script"', ""]
    return "\n".join(lines)


def node_body(
    *,
    accelerator_type: str,
    runtime: str,
    network: str,
    tag: str,
    labels: Mapping[str, str],
    script: str,
    spot: bool,
) -> dict[str, Any]:
    """The create body (TPU REST v2 ``nodes.create``): external IPs on (the client reaches
    each host's agent), the pool's network tag (its firewall rules), labels, the script."""
    body: dict[str, Any] = {
        "accelerator_type": accelerator_type,
        "runtime_version": runtime,
        "network_config": {"network": network, "enable_external_ips": True},
        "tags": [tag],
        "labels": dict(labels),
        "metadata": {"startup-script": script},
    }
    if spot:
        body["scheduling_config"] = {"spot": True}
    return body


def host_instances(zone: str, node: Any, hosts: int) -> dict[str, Instance]:
    """Each host of a TPU node (as the API answered it) as a template instance."""
    state_name = getattr(node.state, "name", str(node.state))
    state = TPU_STATES.get(state_name, InstanceState.PENDING)
    node_id = str(node.name).rsplit("/", 1)[-1]
    endpoints = list(node.network_endpoints or ())
    found = {}
    for host in range(hosts):
        public = private = None
        if host < len(endpoints):
            endpoint = endpoints[host]
            private = str(endpoint.ip_address) or None
            public = str(endpoint.access_config.external_ip) or None if endpoint.access_config else None
        ident = host_id(zone, node_id, host)
        found[ident] = Instance(ident, state, ip=public, private_ip=private, status=state_name)
    return found
