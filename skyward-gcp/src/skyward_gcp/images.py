"""The boot image a VM gets (pure).

GPU machines boot Google's Ubuntu accelerator image (Ubuntu 22.04 with the NVIDIA driver
preinstalled: a plain OS image would need the driver installed first, several minutes
and a reboot; the CUDA libraries come with the framework's wheels, as on every cloud);
CPU machines plain Ubuntu 24.04. ``GCP(image=...)`` overrides both. A TPU
VM boots its TPU runtime (``GCP(tpu_runtime=...)``, else the slice's recommended one).
"""

from __future__ import annotations

GPU_IMAGE = "projects/ubuntu-os-accelerator-images/global/images/family/ubuntu-accelerator-2204-amd64-with-nvidia-550"
CPU_IMAGE = "projects/ubuntu-os-cloud/global/images/family/ubuntu-2404-lts-amd64"
GPU_DISK_GB = 100  # room for a framework's CUDA wheels (torch: ~5 GB) and a model
CPU_DISK_GB = 50


def image_for(has_gpu: bool, override: str | None) -> str:
    if override is not None:
        return override
    return GPU_IMAGE if has_gpu else CPU_IMAGE


def disk_for(has_gpu: bool) -> int:
    return GPU_DISK_GB if has_gpu else CPU_DISK_GB
