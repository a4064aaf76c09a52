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

import dataclasses
import sys

from skyward.bootstrap import client_requirements, needs_environment
from skyward.home import uv_path
from skyward.image import BootstrapContext, Image

__all__ = ["BootstrapContext", "local_bootstrap_context", "uv_path"]


def local_bootstrap_context(image: Image | None = None) -> BootstrapContext:
    """The context of a node that runs on this machine: this interpreter's Python and uv,
    the same skyward and plugins, no shutdown and no apt-get (see the module).

    Given the ``image``, and when it asks for no pip packages (the node runs this very
    interpreter, so no environment is built), the requirements a fresh environment would
    install are left out: finding them reads every installed distribution's metadata and
    entry points, 0.14 s of the client's CPU on each pool start (cProfile of a 2-node
    Local start on this 2-core machine), for a script that would never use them."""
    context = BootstrapContext(local=True, python_executable=sys.executable, uv=uv_path())
    if image is not None and not needs_environment(image, context):
        return context
    core, pinned = client_requirements()
    return dataclasses.replace(context, skyward_requirement=core, pinned=tuple(pinned))
