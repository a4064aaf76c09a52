"""moto in server mode, and the public data AWS publishes that moto lacks.

The fixture runs ``moto.server.ThreadedMotoServer`` on 127.0.0.1 (a free port). moto
knows instance types, offerings, spot price history, VPCs, security groups, IAM and SSM,
but not the public images and SSM parameters the provider looks up (AWS's Deep Learning
and Neuron AMIs, Canonical's Ubuntu), and AWS reserves ``/aws/...`` parameter names, so
``seed_public_images`` adds them to moto's backends directly, as AWS publishes them.
"""

from __future__ import annotations

import datetime
import logging
import os
from dataclasses import dataclass
from pathlib import Path

ACCOUNT = "123456789012"
AMAZON_OWNER = "898082745236"  # the account AWS publishes its Deep Learning AMIs from
CANONICAL_OWNER = "099720109477"

# must be set before moto builds its IAM backend: AWS's managed policies (the SSM one)
os.environ.setdefault("MOTO_IAM_LOAD_MANAGED_POLICIES", "true")
# moto's 1,200 stock images (read when moto.ec2 is first imported) are replaced by the
# few seed_public_images adds: faster, and lookups can only find what AWS publishes
os.environ.setdefault("MOTO_AMIS_PATH", str(Path(__file__).with_name("no_amis.json")))
logging.getLogger("werkzeug").setLevel(logging.WARNING)


@dataclass(frozen=True)
class PublicImage:
    image_id: str
    name: str
    owner: str
    alias: str | None
    architecture: str
    created: str
    ssm_parameter: str | None = None


def public_images() -> list[PublicImage]:
    dlami = "/aws/service/deeplearning/ami/{arch}/base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id"
    ubuntu = "/aws/service/canonical/ubuntu/server/22.04/stable/current/{arch}/hvm/ebs-gp2/ami-id"
    return [
        PublicImage("ami-0d1a000000000000a", "Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 22.04) 20250101",
                    AMAZON_OWNER, "amazon", "x86_64", "2025-01-01T00:00:00.000Z"),
        PublicImage("ami-0d1a000000000000b", "Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 22.04) 20250301",
                    AMAZON_OWNER, "amazon", "x86_64", "2025-03-01T00:00:00.000Z", dlami.format(arch="x86_64")),
        PublicImage("ami-0d1a000000000000c", "Deep Learning ARM64 Base OSS Nvidia Driver GPU AMI "
                    "(Ubuntu 22.04) 20250301",
                    AMAZON_OWNER, "amazon", "arm64", "2025-03-01T00:00:00.000Z", dlami.format(arch="arm64")),
        # Neuron images have no parameter here: the provider must find them by name
        PublicImage("ami-0e0e000000000000a", "Deep Learning AMI Neuron (Ubuntu 22.04) 20250110",
                    AMAZON_OWNER, "amazon", "x86_64", "2025-01-10T00:00:00.000Z"),
        PublicImage("ami-0e0e000000000000b", "Deep Learning AMI Neuron (Ubuntu 22.04) 20250210",
                    AMAZON_OWNER, "amazon", "x86_64", "2025-02-10T00:00:00.000Z"),
        PublicImage("ami-0b0b000000000000a", "ubuntu/images/hvm-ssd/ubuntu-jammy-22.04-amd64-server-20250301",
                    CANONICAL_OWNER, None, "x86_64", "2025-03-01T00:00:00.000Z", ubuntu.format(arch="amd64")),
        PublicImage("ami-0b0b000000000000b", "ubuntu/images/hvm-ssd/ubuntu-jammy-22.04-arm64-server-20250301",
                    CANONICAL_OWNER, None, "arm64", "2025-03-01T00:00:00.000Z", ubuntu.format(arch="arm64")),
    ]  # fmt: skip


def seed_public_images(region: str) -> list[PublicImage]:
    from moto.ec2.models import ec2_backends
    from moto.ec2.models.amis import Ami
    from moto.ssm.models import Parameter, ssm_backends

    ec2 = ec2_backends[ACCOUNT][region]
    ssm = ssm_backends[ACCOUNT][region]
    images = public_images()
    for image in images:
        ec2.amis[image.image_id] = Ami(
            ec2,
            image.image_id,
            name=image.name,
            owner_id=image.owner,
            owner_alias=image.alias,
            public=True,
            virtualization_type="hvm",
            architecture=image.architecture,
            creation_date=datetime.datetime.fromisoformat(image.created.replace("Z", "+00:00")),
            root_device_type="ebs",
            root_device_name="/dev/sda1",
            region_name=region,
        )
        if image.ssm_parameter is not None:
            ssm._parameters[image.ssm_parameter].append(
                Parameter(
                    account_id=ACCOUNT,
                    name=image.ssm_parameter,
                    value=image.image_id,
                    parameter_type="String",
                    description=None,
                    allowed_pattern=None,
                    keyid=None,
                    last_modified_date=datetime.datetime.now(datetime.UTC),
                    version=1,
                    data_type="aws:ec2:image",
                )
            )
    return images


class MotoServer:
    def __init__(self) -> None:
        from moto.server import ThreadedMotoServer

        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self._server.start()
        host, port = self._server.get_host_and_port()
        self.url = f"http://{host}:{port}"
        self.images: list[PublicImage] = []

    def stop(self) -> None:
        self._server.stop()
