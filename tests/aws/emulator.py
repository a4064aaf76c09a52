"""AWS glue for the emulated-instance harness.

:class:`MotoInstances` watches moto: every instance moto reports ``running`` becomes an
emulated instance that runs the user-data fetched back from moto
(``describe_instance_attribute(Attribute="userData")``, base64, gzip as cloud-init
would unpack it), at its own loopback address, with its own fake instance metadata
service (:class:`FakeIMDS`, IMDSv2, reached through ``AWS_EC2_METADATA_SERVICE_ENDPOINT``).
An instance moto reports terminated or stopped is stopped. ``shutdown``/``poweroff``
inside an instance end it in moto, as its InstanceInitiatedShutdownBehavior says.

:class:`HarnessEndpoints` is the driver's endpoint seam: it maps each instance to its
loopback address, so nothing ever connects to moto's made-up public addresses.
"""

from __future__ import annotations

import base64
import json
import re
import secrets
import shutil
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from harness import EmulatedInstances, decode_user_data

from skyward_aws.endpoints import NodeAddress


@dataclass
class FakeIMDS:
    """One instance's metadata service: IMDSv2 tokens, instance id, spot notices."""

    ip: str
    instance_id: str
    require_token: bool = True
    instance_action: dict[str, str] | None = None
    rebalance: dict[str, str] | None = None
    requests: list[tuple[str, str, bool]] = field(default_factory=list)  # (method, path, had a valid token)

    def __post_init__(self) -> None:
        self._tokens: set[str] = set()
        imds = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                return None

            def _send(self, status: int, body: str = "", content_type: str = "text/plain") -> None:
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_PUT(self) -> None:
                if self.path != "/latest/api/token":
                    return self._send(404)
                ttl = self.headers.get("X-aws-ec2-metadata-token-ttl-seconds", "")
                if not ttl.isdigit() or not 1 <= int(ttl) <= 21600:
                    imds.requests.append(("PUT", self.path, False))
                    return self._send(400, "missing or invalid X-aws-ec2-metadata-token-ttl-seconds")
                token = secrets.token_urlsafe(24)
                imds._tokens.add(token)
                imds.requests.append(("PUT", self.path, True))
                return self._send(200, token)

            def do_GET(self) -> None:
                valid = self.headers.get("X-aws-ec2-metadata-token") in imds._tokens
                imds.requests.append(("GET", self.path, valid))
                if imds.require_token and not valid:
                    return self._send(401)
                return self._send(*imds.answer(self.path))

        self._server = ThreadingHTTPServer((self.ip, 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://{self.ip}:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def answer(self, path: str) -> tuple[int, str, str]:
        if path == "/latest/meta-data/instance-id":
            return 200, self.instance_id, "text/plain"
        if path == "/latest/meta-data/spot/instance-action":
            if self.instance_action is None:
                return 404, "", "text/plain"
            return 200, json.dumps(self.instance_action), "application/json"
        if path == "/latest/meta-data/events/recommendations/rebalance":
            if self.rebalance is None:
                return 404, "", "text/plain"
            return 200, json.dumps(self.rebalance), "application/json"
        return 404, "", "text/plain"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def _iso_in(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + seconds))


class MotoInstances:
    """Keeps the harness in step with moto (see the module docstring)."""

    def __init__(self, ec2: Any, harness: EmulatedInstances, poll_interval: float = 0.2) -> None:
        self.ec2 = ec2
        self.harness = harness
        self.poll_interval = poll_interval
        self.user_data: dict[str, str] = {}
        self.imds: dict[str, FakeIMDS] = {}
        self.restored: dict[str, str] = {}  # instance -> the instance whose baked disk it got
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="moto-instances", daemon=True)
        self._thread.start()

    def _state(self, instance_id: str) -> str:
        reservations = self.ec2.describe_instances(InstanceIds=[instance_id])["Reservations"]
        return str(reservations[0]["Instances"][0]["State"]["Name"])

    def terminate_from_inside(self, instance_id: str) -> None:
        """What EC2 does when an instance shuts itself down: terminate (or stop) it, as its
        InstanceInitiatedShutdownBehavior says; nothing when it is already going."""
        from botocore.exceptions import ClientError

        if self._state(instance_id) in ("shutting-down", "terminated", "stopping", "stopped"):
            return
        try:
            self._terminate_or_stop(instance_id)
        except ClientError:
            # the driver terminated it at the same moment; moto (unlike EC2) refuses a second
            # termination, so accept it when the instance is indeed gone
            if self._state(instance_id) not in ("shutting-down", "terminated"):
                raise

    def _terminate_or_stop(self, instance_id: str) -> None:
        behavior = self.ec2.describe_instance_attribute(
            InstanceId=instance_id, Attribute="instanceInitiatedShutdownBehavior"
        )["InstanceInitiatedShutdownBehavior"]["Value"]
        if behavior == "terminate":
            self.ec2.terminate_instances(InstanceIds=[instance_id])
        else:
            self.ec2.stop_instances(InstanceIds=[instance_id])

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self._sync()
            except Exception as error:  # seen by the test through .errors
                self.errors.append(repr(error))
            self._stop.wait(self.poll_interval)

    def _sync(self) -> None:
        # Every page (moto answers 100 reservations a page: after a hundred instances, a
        # first page alone never showed a new one), and only what can change: running
        # instances not started yet, and the started ones, to stop those EC2 stopped.
        # Listing every terminated instance each poll cost the client's process more
        # time, the more instances a session had made.
        running = [{"Name": "instance-state-name", "Values": ["running"]}]
        for instance in self._described(running):
            if instance["InstanceId"] not in self.user_data:
                self._start(instance)
        known = set(self.harness.started())
        started = [i for i in self.user_data if i in known and not self.harness.instance(i).stopping]
        if not started:
            return
        gone = {"Name": "instance-state-name", "Values": ["shutting-down", "terminated", "stopping", "stopped"]}
        for instance in self._described([{"Name": "instance-id", "Values": started}, gone]):
            self.harness.stop(instance["InstanceId"], reason=f"{instance['State']['Name']} in EC2")

    def _described(self, filters: list[dict[str, Any]]) -> list[Mapping[str, Any]]:
        pages = self.ec2.get_paginator("describe_instances").paginate(Filters=filters)
        return [i for page in pages for r in page["Reservations"] for i in r["Instances"]]

    def _start(self, instance: Mapping[str, Any]) -> None:
        instance_id = instance["InstanceId"]
        raw = self.ec2.describe_instance_attribute(InstanceId=instance_id, Attribute="userData")["UserData"]
        text = decode_user_data(base64.b64decode(raw.get("Value", "")))
        self.user_data[instance_id] = text
        self._restore_baked_disk(instance)
        ip = self.harness.address_for(instance_id)
        require = instance.get("MetadataOptions", {}).get("HttpTokens", "optional") == "required"
        imds = FakeIMDS(ip, instance_id, require_token=require)
        self.imds[instance_id] = imds
        self.harness.start(instance_id, text, ip=ip, env={"AWS_EC2_METADATA_SERVICE_ENDPOINT": imds.url})

    def _restore_baked_disk(self, instance: Mapping[str, Any]) -> None:
        """An instance launched from a baked AMI (tagged ``skyward:baked-from``) starts
        with a copy of the source instance's disk: here, its skyward home."""
        images = self.ec2.describe_images(ImageIds=[instance["ImageId"]])["Images"]
        tags = {t["Key"]: t["Value"] for image in images for t in image.get("Tags", [])}
        source = tags.get("skyward:baked-from")
        if source is None or source not in self.harness.started():
            return
        disk = self.harness.instance(source).directory / "home" / ".skyward"
        target = self.harness.root / re.sub(r"[^\w.-]", "_", str(instance["InstanceId"])) / "home" / ".skyward"
        shutil.copytree(disk, target, symlinks=True, ignore=shutil.ignore_patterns("*.lock"))
        self.restored[str(instance["InstanceId"])] = source

    def interrupt(self, instance_id: str, action: str = "terminate", in_seconds: float = 120) -> None:
        """Serve a spot interruption notice on the instance's metadata service."""
        self.imds[instance_id].instance_action = {"action": action, "time": _iso_in(in_seconds)}

    def recommend_rebalance(self, instance_id: str) -> None:
        self.imds[instance_id].rebalance = {"noticeTime": _iso_in(0)}

    def wait_started(self, count: int, timeout: float = 30.0) -> list[str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if len(self.user_data) >= count:
                return list(self.user_data)
            time.sleep(0.05)
        raise TimeoutError(f"only {len(self.user_data)} of {count} instances started; errors: {self.errors}")

    def wait_stopped(self, instance_ids: list[str], timeout: float = 10.0) -> None:
        """Wait until the harness has ended these instances' process trees."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not any(self.harness.is_running(i) for i in instance_ids):
                return
            time.sleep(0.05)
        running = [i for i in instance_ids if self.harness.is_running(i)]
        raise TimeoutError(f"still running after {timeout:g} s: {running}")

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        for imds in self.imds.values():
            imds.close()


@dataclass
class HarnessEndpoints:
    """The driver's endpoint seam, pointed at the emulated instances' loopback addresses."""

    harness: EmulatedInstances
    resolved: list[str] = field(default_factory=list)

    def resolve(self, instance: Mapping[str, Any]) -> NodeAddress:
        endpoint = self.harness.endpoint_for(str(instance["InstanceId"]))
        self.resolved.append(endpoint.instance_id)
        return NodeAddress(endpoint=endpoint.endpoint, ip=endpoint.ip, private_ip=endpoint.ip)

    def close(self) -> None:
        return None
