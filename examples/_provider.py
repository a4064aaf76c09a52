"""The one switch every example shares: where its pool runs.

``SKYWARD_PROVIDER`` unset (or ``local``) runs on :class:`skyward.Local`, processes on
this machine, which is how CI runs every example. ``aws``, ``digitalocean``, ``gcp``, ``verda``,
``vastai`` or ``runpod`` runs on that cloud with its credentials from the environment (see docs/providers.md).

Examples that only mean something on a cloud (spot, MIG, S3 volumes) call
:func:`dry_run_unless_cloud`: on Local they build the cloud pool, which validates every
option without provisioning anything, and print what would run.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import skyward as sky

CLASSES = {
    "local": "Local",
    "aws": "AWS",
    "digitalocean": "DigitalOcean",
    "gcp": "GCP",
    "verda": "Verda",
    "vastai": "VastAI",
    "runpod": "RunPod",
}
CHOICES = tuple(CLASSES)
FAKE_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "example",
    "AWS_SECRET_ACCESS_KEY": "example",
    "DIGITALOCEAN_TOKEN": "example",
    "VERDA_CLIENT_ID": "example",
    "VERDA_CLIENT_SECRET": "example",
    "VAST_API_KEY": "example",
    "RUNPOD_API_KEY": "example",
}


def provider_name() -> str:
    name = os.environ.get("SKYWARD_PROVIDER", "local").strip().lower() or "local"
    if name not in CHOICES:
        raise SystemExit(f"SKYWARD_PROVIDER={name!r}: use one of {', '.join(CHOICES)}")
    return name


def on_cloud() -> bool:
    return provider_name() != "local"


def provider() -> Any:
    """The provider the switch names: ``sky.Local()``, ``sky.AWS()``, ..."""
    return _make(provider_name())


def _make(name: str) -> Any:
    # sky.<Class> of a cloud resolves only when its plugin is installed, so only the named one is looked up
    return getattr(sky, CLASSES[name])()


def cloud_provider(default: str = "aws") -> Any:
    """The cloud the switch names, or ``default`` when it names Local (for a dry run).

    For a dry run, placeholder credentials are put in this process's environment when none
    are set: building a pool checks that credentials exist but sends nothing anywhere."""
    name = provider_name() if on_cloud() else default
    if not on_cloud():
        for key, value in FAKE_CREDENTIALS.items():
            os.environ.setdefault(key, value)
    return _make(name)


def dry_run_unless_cloud(pool: sky.ComputePool) -> bool:
    """True when the example should go on and run ``pool``; on Local, print the validated
    plan instead and return False."""
    if on_cloud():
        return True
    spec = pool.spec
    print(
        f"dry run on {pool.provider_name}: nodes={spec.nodes}, accelerator={spec.accelerator}, "
        f"workers per node={spec.workers_per_node}, spot={spec.spot!r}; validated, nothing provisioned. "
        f"Set SKYWARD_PROVIDER to one of {', '.join(CHOICES[1:])} to run it.",
        file=sys.stderr,
    )
    return False


def gpus_here() -> int:
    """NVIDIA GPUs this machine has (0 without nvidia-ml-py or a driver)."""
    try:
        import pynvml  # type: ignore[import-not-found]

        pynvml.nvmlInit()
        return int(pynvml.nvmlDeviceGetCount())
    except Exception:
        return 0
