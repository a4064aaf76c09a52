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
from skyward.accelerators.vendors import CORE_ENTRIES

# The NVIDIA factories at module level as well: ``sky.accelerators.A100()`` (the seed's
# readme writes it so) is ``sky.Accelerator.NVIDIA.A100()``.
T4 = NVIDIAFactories.T4
T4G = NVIDIAFactories.T4G
L4 = NVIDIAFactories.L4
L40 = NVIDIAFactories.L40
L40S = NVIDIAFactories.L40S
A10 = NVIDIAFactories.A10
A10G = NVIDIAFactories.A10G
A40 = NVIDIAFactories.A40
A6000 = NVIDIAFactories.A6000
A100 = NVIDIAFactories.A100
H100 = NVIDIAFactories.H100
H200 = NVIDIAFactories.H200
GH200 = NVIDIAFactories.GH200
B100 = NVIDIAFactories.B100
B200 = NVIDIAFactories.B200
B300 = NVIDIAFactories.B300
GB200 = NVIDIAFactories.GB200
V100 = NVIDIAFactories.V100

__all__ = [
    "T4",
    "T4G",
    "L4",
    "L40",
    "L40S",
    "A10",
    "A10G",
    "A40",
    "A6000",
    "A100",
    "H100",
    "H200",
    "GH200",
    "B100",
    "B200",
    "B300",
    "GB200",
    "V100",
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
    "workers_per_node",
]
