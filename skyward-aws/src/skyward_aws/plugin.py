"""Hook implementations of skyward-aws, loaded through the ``skyward`` entry-point group."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from skyward.providers import ProviderPlugin, ProviderTools, VolumePlugin, hookimpl

if TYPE_CHECKING:  # the config class, for the record's type; the hooks import it when called
    from skyward_aws.config import AWS
    from skyward_aws.volumes import S3Volume


@hookimpl
def skyward_providers() -> Sequence[ProviderPlugin[AWS]]:
    from skyward_aws.config import AWS
    from skyward_aws.driver import AWSDriver

    return [ProviderPlugin(name="aws", config_type=AWS, create_driver=AWSDriver)]


@hookimpl
def skyward_volumes() -> Sequence[VolumePlugin[S3Volume]]:
    from skyward_aws.volumes import S3Volume, mount_script

    return [VolumePlugin(name="s3", volume_type=S3Volume, mount_script=mount_script)]


@hookimpl
def skyward_exports() -> Mapping[str, object]:
    from skyward_aws.config import AWS
    from skyward_aws.volumes import S3Volume

    return {"AWS": AWS, "S3Volume": S3Volume}


@hookimpl
def skyward_provider_tools() -> Sequence[ProviderTools]:
    """``skyward ls``, ``down``, ``offers`` and ``doctor`` for this provider."""
    from skyward_aws.tools import TOOLS

    return [TOOLS]
