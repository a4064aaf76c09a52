"""Accelerators: the catalog, MIG partitioning, factories and string shorthand.

``Accelerator`` values say which devices a node needs; ``parse_accelerator`` reads the
shorthand (``"A100"``, ``"H100-SXM:8"``, ``"H100@3g.40gb"``) and checks any request
against the catalog that plugins contribute through ``skyward_accelerators()``.
"""

from skyward.accelerators.catalog import (
    Catalog,
    CatalogEntry,
    catalog_of,
    current_catalog,
)
from skyward.accelerators.factories import (
    AMDFactories,
    AWSFactories,
    GoogleFactories,
    NVIDIAFactories,
    NVIDIAModel,
)
from skyward.accelerators.mig import MigProfile
from skyward.accelerators.names import NVIDIA, NVIDIA_NAMES
from skyward.accelerators.normalize import MigSpec, make_accelerator
from skyward.accelerators.parse import entry_for, is_nvidia, is_trainium, parse_accelerator
from skyward.accelerators.spec import Accelerator, workers_per_node
from skyward.accelerators.vendors import CORE_ENTRIES, skyward_accelerators

__all__ = [
    "CORE_ENTRIES",
    "NVIDIA",
    "NVIDIA_NAMES",
    "AMDFactories",
    "AWSFactories",
    "Accelerator",
    "Catalog",
    "CatalogEntry",
    "GoogleFactories",
    "MigProfile",
    "MigSpec",
    "NVIDIAFactories",
    "NVIDIAModel",
    "catalog_of",
    "current_catalog",
    "entry_for",
    "is_nvidia",
    "is_trainium",
    "make_accelerator",
    "parse_accelerator",
    "skyward_accelerators",
    "workers_per_node",
]
