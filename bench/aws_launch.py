"""Launch time of N nodes with AWSDriver on the cloud template against moto, parallel
creates against one at a time, as a same-run ratio (not a timed test). moto answers in
milliseconds; a proxy holds each RunInstances answer back LATENCY seconds (EC2 takes about
that), each request on its own thread. Endpoints are loopback listeners (tests/aws).

Runs moto, so only in a network namespace with loopback alone:

    SKYWARD_TEST_NETNS=1 unshare --net -- \\
        sh -c 'ip link set lo up && exec .venv/bin/python -W ignore bench/aws_launch.py'

Measured (2 shared cores): nodes=8 one-at-a-time 4.70 s, parallel 0.65 s (7.2x); nodes=16
9.10 s against 1.30 s (7.0x). The driver before the port launched one node at a time: 4.50 s
for 8 nodes under the same proxy.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from aws.faults import FaultProxy
from aws.listeners import Listeners, trivial_user_data
from aws.moto_world import MotoServer, seed_public_images
from aws.specs import make_spec

import skyward.providers.cloud.template as template
from skyward.testing import isolation_problem
from skyward_aws import AWS
from skyward_aws.driver import AWSDriver

LATENCY = 0.5


class SlowRunInstances(FaultProxy):
    def handle(self, method: str, path: str, headers: dict[str, str], body: bytes) -> Any:
        if b"Action=RunInstances" in body:
            time.sleep(LATENCY)
        return super().handle(method, path, headers, body)


def launch_seconds(nodes: int, concurrency: int) -> float:
    template.CREATE_CONCURRENCY = concurrency
    provider = AWS(client_address="203.0.113.7", endpoint_resolver=Listeners())
    spec = make_spec(provider, nodes=nodes, machine="c5.large", spot="never")
    driver = AWSDriver(provider)
    driver.prepare(spec, lambda e: None)
    started = time.perf_counter()
    handles = driver.launch(spec, trivial_user_data, lambda e: None)
    elapsed = time.perf_counter() - started
    driver.terminate(handles)
    driver.teardown()
    return elapsed


def main() -> None:
    problem = isolation_problem()
    if problem is not None:
        sys.exit(f"run this in a network namespace (see the docstring): {problem}")
    server = MotoServer()
    seed_public_images("us-east-1")
    proxy = SlowRunInstances(server.url)
    os.environ.update(
        AWS_ENDPOINT_URL=proxy.url, AWS_ACCESS_KEY_ID="AKIABENCH", AWS_SECRET_ACCESS_KEY="bench",
        AWS_DEFAULT_REGION="us-east-1", AWS_EC2_METADATA_DISABLED="true",
    )  # fmt: skip
    default = template.CREATE_CONCURRENCY
    try:
        for nodes in (1, 8, 16):
            serial, parallel = launch_seconds(nodes, 1), launch_seconds(nodes, default)
            print(
                f"nodes={nodes:2d} one-at-a-time={serial:.2f}s parallel={parallel:.2f}s ratio={serial / parallel:.1f}x"
            )
    finally:
        proxy.close()
        server.stop()


if __name__ == "__main__":
    main()
