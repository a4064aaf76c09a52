"""The boot image a VM gets (pure).

GPU machines boot a Deep Learning VM image (Google's, with the NVIDIA driver and CUDA
preinstalled: a plain OS image would need the driver installed first, several minutes
and a reboot); CPU machines plain Ubuntu 24.04. ``GCP(image=...)`` overrides both. A TPU
VM boots its TPU runtime (``GCP(tpu_runtime=...)``, else the slice's recommended one).
"""

from __future__ import annotations

DLVM_IMAGE = "projects/deeplearning-platform-release/global/images/family/common-cu128-ubuntu-2204-nvidia-570"
CPU_IMAGE = "projects/ubuntu-os-cloud/global/images/family/ubuntu-2404-lts-amd64"
GPU_DISK_GB = 100  # the DLVM image is ~50 GB; room for a framework's wheels and a model
CPU_DISK_GB = 50


def image_for(has_gpu: bool, override: str | None) -> str:
    if override is not None:
        return override
    return DLVM_IMAGE if has_gpu else CPU_IMAGE


def disk_for(has_gpu: bool) -> int:
    return GPU_DISK_GB if has_gpu else CPU_DISK_GB
