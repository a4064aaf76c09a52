"""How a cloud node installs the client's skyward and plugins."""

from __future__ import annotations

from skyward.image import BootstrapContext


def cloud_bootstrap_context() -> BootstrapContext:
    """A fresh machine's context: not local, installing the same skyward and plugins as
    the client (``client_requirements``)."""
    from skyward.bootstrap import client_requirements

    core, pinned = client_requirements()
    return BootstrapContext(local=False, skyward_requirement=core, pinned=tuple(pinned))
