"""MIG on a cloud node: partition the GPUs in the bootstrap, give each worker one partition.

The pool knows the partitions (``Accelerator.mig``) and how many GPUs a node has; the
node's bootstrap runs :func:`mig_setup_script` before the agent starts, and the agent
reads the MIG devices that ``nvidia-smi -L`` then lists (:func:`mig_devices`) and puts
one in each worker's ``CUDA_VISIBLE_DEVICES`` (:func:`assign_mig_devices`). Providers
that map devices themselves (``visible_devices`` from the driver) bypass all of this.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence

# "  MIG 3g.40gb     Device  0: (UUID: MIG-5c2b0f7e-...)" in `nvidia-smi -L`
_MIG_UUID = re.compile(r"\(UUID:\s*(MIG-[0-9A-Za-z-]+(?:/\d+/\d+)?)\)")


class MigSetupError(RuntimeError):
    """The node's GPUs do not show the MIG partitions the pool asked for."""


def mig_setup_script(partitions: Sequence[str], gpus: int) -> str:
    """Bash (for the bootstrap) that leaves ``gpus`` GPUs each split into ``partitions``.

    Idempotent: when ``nvidia-smi -L`` already lists the expected number of MIG devices
    (a re-run, or an image that comes partitioned) it changes nothing. Otherwise it
    enables MIG mode on each GPU, removes whatever instances were there and creates the
    requested GPU and compute instances (``-cgi ... -C``), then checks the count.
    """
    if gpus < 1 or not partitions:
        raise ValueError("MIG set-up needs at least one GPU and one partition")
    want = gpus * len(partitions)
    profiles = shlex.quote(",".join(partitions))
    return "\n".join(
        [
            "command -v nvidia-smi >/dev/null \\",
            '  || fail "MIG partitions were asked for, but nvidia-smi is not on this node"',
            f"mig_want={want}",
            "mig_count() { nvidia-smi -L | grep -c '(UUID: MIG-' || true; }",
            'if [ "$(mig_count)" -ne "$mig_want" ]; then',
            f"  for gpu in $(seq 0 {gpus - 1}); do",
            '    nvidia-smi -i "$gpu" -mig 1 >/dev/null || fail "cannot enable MIG mode on GPU $gpu"',
            '    nvidia-smi mig -i "$gpu" -dci >/dev/null 2>&1 || true',
            '    nvidia-smi mig -i "$gpu" -dgi >/dev/null 2>&1 || true',
            f'    nvidia-smi mig -i "$gpu" -cgi {profiles} -C >/dev/null \\',
            f'      || fail "cannot create the MIG partitions {",".join(partitions)} on GPU $gpu"',
            "  done",
            '  [ "$(mig_count)" -eq "$mig_want" ] \\',
            '    || fail "expected $mig_want MIG devices after partitioning; nvidia-smi -L lists $(mig_count)"',
            "fi",
            'echo "skyward bootstrap: $mig_want MIG devices ready"',
        ]
    )


def mig_devices(listing: str) -> list[str]:
    """The MIG device UUIDs in ``nvidia-smi -L`` output, in its order (GPU by GPU)."""
    return _MIG_UUID.findall(listing)


def assign_mig_devices(devices: Sequence[str], workers: int, expected: int) -> list[str | None]:
    """``CUDA_VISIBLE_DEVICES`` for each of ``workers``: partitions in order, consecutive
    workers sharing one when ``concurrency`` puts several workers on each partition."""
    if len(devices) != expected:
        listed = ", ".join(devices) or "none"
        raise MigSetupError(f"this node should have {expected} MIG devices; nvidia-smi -L lists {listed}")
    if workers % expected:
        raise MigSetupError(f"{workers} workers cannot share {expected} MIG devices evenly")
    per_device = workers // expected
    return [devices[w // per_device] for w in range(workers)]
