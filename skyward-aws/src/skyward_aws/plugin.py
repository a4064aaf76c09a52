"""Hook implementations of skyward-aws, loaded through the ``skyward`` entry-point group.

pluggy imports this module in every process that loads the plugins (each worker on each
node included), so it imports only what the package's ``__init__`` already loads (the
config and volume classes). The driver (~170 modules and ~70 ms: the cloud template,
asyncio, the EC2 steps, botocore's exceptions) is imported when a pool is about to run on
AWS, the command line's tools (~20 modules, ~18 ms) when a command, ``sky.offers`` or
``selection="cheapest"`` asks for them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from skyward.providers import ProviderPlugin, ProviderTools, VolumePlugin, deferred_driver, hookimpl
from skyward_aws.config import AWS
from skyward_aws.volumes import S3Volume, mount_script


@hookimpl
def skyward_providers() -> Sequence[ProviderPlugin[AWS]]:
    return [
        ProviderPlugin(
            name="aws", config_type=AWS, create_driver=deferred_driver(AWS, "skyward_aws.driver", "AWSDriver")
        )
    ]


@hookimpl
def skyward_volumes() -> Sequence[VolumePlugin[S3Volume]]:
    return [VolumePlugin(name="s3", volume_type=S3Volume, mount_script=mount_script)]


@hookimpl
def skyward_exports() -> Mapping[str, object]:
    return {"AWS": AWS, "S3Volume": S3Volume}


@hookimpl
def skyward_provider_tools() -> Sequence[ProviderTools]:
    """``skyward ls``, ``down``, ``offers`` and ``doctor`` for this provider."""
    from skyward_aws.tools import TOOLS  # noqa: PLC0415  # deferred: ~20 modules, ~18 ms; the command line only

    return [TOOLS]
