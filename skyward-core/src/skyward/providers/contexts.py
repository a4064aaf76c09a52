"""The bootstrap contexts a provider chooses from: what a node's script does besides the
image's own steps (see :class:`~skyward.image.BootstrapContext` for each field).

Three, and the difference matters most at the end of a node's life:

- ``BootstrapContext()`` (the bare default, ``Image.bootstrap()`` without a context): a
  fresh cloud machine that installs skyward-core from the index and starts no agent
  unless told to. Like every non-local context it arms the pool's TTL with
  ``shutdown -h +<minutes>`` and, when the agent exits, runs ``shutdown -h now``: the
  machine powers off (a cloud that terminates on shutdown deletes it).
- :func:`skyward.providers.cloud.cloud_bootstrap_context` (what
  :class:`~skyward.providers.cloud.CloudProvider` gives every node unless a driver
  overrides ``bootstrap_context``): the same, installing the client's skyward and plugins
  (a checkout's as wheels the client sends). For single-tenant VMs only: the node powers
  itself off when its agent exits and at the TTL.
- :func:`local_bootstrap_context`: a node that is a process tree on *this* machine (the
  Local provider, a host-process or on-premises provider whose "instances" share a host
  that outlives them). It never shuts the machine down (the agent enforces the TTL
  itself and exits), never runs ``apt-get`` (it checks the packages are there), and
  reuses this interpreter when the image asks for no pip packages. A provider whose
  nodes run on a machine it does not own must use this one, or the first node to stop
  powers the host off.

A node's run directory (the ``run_dir`` a driver passes to its ``UserDataFactory``) holds
its agent's ipc sockets and its notices drop box. On a cloud VM it dies with the machine;
on a host that outlives its nodes it must be removed by the driver after the nodes stop:
``LocalDriver`` removes its own in ``teardown``, and ``CloudProvider.teardown`` removes
the run directories it handed out when they are on this machine.
"""

from __future__ import annotations

import sys

from skyward.bootstrap import client_requirements
from skyward.home import uv_path
from skyward.image import BootstrapContext

__all__ = ["BootstrapContext", "local_bootstrap_context", "uv_path"]


def local_bootstrap_context() -> BootstrapContext:
    """The context of a node that runs on this machine: this interpreter's Python and uv,
    the same skyward and plugins, no shutdown and no apt-get (see the module)."""
    core, pinned = client_requirements()
    return BootstrapContext(
        local=True,
        python_executable=sys.executable,
        skyward_requirement=core,
        pinned=tuple(pinned),
        uv=uv_path(),
    )
