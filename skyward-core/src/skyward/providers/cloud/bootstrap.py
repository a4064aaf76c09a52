"""How a cloud node installs the client's skyward and plugins."""

from __future__ import annotations

from skyward.bootstrap import client_requirements
from skyward.image import BootstrapContext
from skyward.wheels.cache import WheelCache, local_source, plan_wheels


def cloud_bootstrap_context(cache: WheelCache | None = None) -> BootstrapContext:
    """A fresh machine's context: not local, installing the same skyward and plugins as
    the client (``client_requirements``). A requirement from a local checkout (an
    editable install: every developer, CI) cannot be installed from its path on a node,
    so it goes as a wheel built once here (``cache``, by default the user's wheel cache),
    its dependencies from the index; a released version installs from the index."""
    core, pinned = client_requirements()
    requirements = [core, *pinned]
    plan = plan_wheels(requirements, (cache or WheelCache()).wheels(requirements))
    from_index = core if local_source(core) is None else None
    return BootstrapContext(
        local=False,
        skyward_requirement=from_index,
        pinned=tuple(r for r in plan.index if r != from_index),
        wheels=plan.wheels,
    )
