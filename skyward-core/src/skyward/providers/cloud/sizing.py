"""What one node must hold, as ``select_instance`` keywords."""

from __future__ import annotations

from typing import Any

from skyward.units import MIB


def node_request(spec: Any) -> dict[str, Any]:
    """``select_instance`` keywords for one node of ``spec``: the per-worker cpu and memory
    times the workers it runs, its accelerator and any machine the user named."""
    workers = spec.workers_per_node
    return dict(
        accelerator=spec.accelerator,
        cpu=spec.cpu * workers if spec.cpu is not None else None,
        memory=spec.memory_mb * MIB * workers if spec.memory_mb is not None else None,
        machine=spec.machine,
    )
