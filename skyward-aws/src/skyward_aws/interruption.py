"""Spot interruption notices, read on the node from the instance metadata service.

AWS gives a spot instance two minutes' warning: IMDS answers
``GET /latest/meta-data/spot/instance-action`` with 404 until then, and afterwards with
``{"action": "terminate", "time": "2025-01-01T12:00:00Z"}`` (``stop`` and ``hibernate``
also exist). A rebalance recommendation, an earlier hint that capacity is getting
scarce, appears at ``/latest/meta-data/events/recommendations/rebalance`` as
``{"noticeTime": "..."}``. Nodes require IMDSv2, so every read carries a session token
from ``PUT /latest/api/token``.

The bootstrap starts ``python -m skyward_aws.interruption --notices DIR`` in the
background on spot nodes. It polls IMDS and, when a notice appears, drops it as one JSON
file into ``DIR`` (written whole, then renamed, so a reader never sees half of it), the
drop box the node's agent forwards to the pool as a NOTICE message. The metadata address
is ``$AWS_EC2_METADATA_SERVICE_ENDPOINT`` when set (the variable the AWS SDKs honour),
else ``http://169.254.169.254``.

Standard library only: this runs on the node.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path

from skyward.providers import NoticeKind

DEFAULT_ENDPOINT = "http://169.254.169.254"
ENDPOINT_ENV = "AWS_EC2_METADATA_SERVICE_ENDPOINT"
TOKEN_PATH = "/latest/api/token"
INSTANCE_ACTION_PATH = "/latest/meta-data/spot/instance-action"
REBALANCE_PATH = "/latest/meta-data/events/recommendations/rebalance"
TOKEN_TTL = 21600
NOTICE_FILE = "aws-spot-interruption.json"
REBALANCE_FILE = "aws-rebalance-recommendation.json"
ACTIONS = ("terminate", "stop", "hibernate")


@dataclass(frozen=True, slots=True)
class InterruptionNotice:
    """What the agent forwards to the pool (``kind`` tells the pool what it is)."""

    kind: str  # "interruption" or "rebalance"
    action: str  # "terminate", "stop", "hibernate", or "rebalance"
    time: str  # when AWS will act (ISO 8601 UTC), or when it recommended rebalancing
    message: str
    provider: str = "aws"

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)


def parse_instance_action(body: str) -> InterruptionNotice:
    """The notice in ``/spot/instance-action``'s answer; ValueError for anything else."""
    data = json.loads(body)
    action, when = data.get("action"), data.get("time")
    if action not in ACTIONS or not isinstance(when, str) or not when:
        raise ValueError(f"not a spot instance-action notice: {body!r}")
    return InterruptionNotice(
        kind=NoticeKind.INTERRUPTION.value,
        action=action,
        time=when,
        message=f"AWS reclaims this spot instance: it will {action} at {when}",
    )


def parse_rebalance(body: str) -> InterruptionNotice:
    data = json.loads(body)
    when = data.get("noticeTime")
    if not isinstance(when, str) or not when:
        raise ValueError(f"not a rebalance recommendation: {body!r}")
    return InterruptionNotice(
        kind=NoticeKind.REBALANCE.value,
        action="rebalance",
        time=when,
        message=f"AWS recommends moving work off this spot instance (since {when}): interruption risk is high",
    )


class MetadataClient:
    """A minimal IMDSv2 client (token, then reads with it)."""

    def __init__(self, endpoint: str | None = None, timeout: float = 2.0) -> None:
        self.endpoint = (endpoint or os.environ.get(ENDPOINT_ENV) or DEFAULT_ENDPOINT).rstrip("/")
        self.timeout = timeout
        self._token: str | None = None

    def _new_token(self) -> str:
        request = urllib.request.Request(
            self.endpoint + TOKEN_PATH, method="PUT", headers={"X-aws-ec2-metadata-token-ttl-seconds": str(TOKEN_TTL)}
        )
        with urllib.request.urlopen(request, timeout=self.timeout) as response:
            return str(response.read().decode())

    def get(self, path: str) -> str | None:
        """The body at ``path``, or ``None`` for 404 (nothing there yet)."""
        for attempt in (1, 2):
            if self._token is None:
                self._token = self._new_token()
            request = urllib.request.Request(self.endpoint + path, headers={"X-aws-ec2-metadata-token": self._token})
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as response:
                    return str(response.read().decode())
            except urllib.error.HTTPError as error:
                if error.code == 404:
                    return None
                if error.code == 401 and attempt == 1:  # the token expired: get a new one
                    self._token = None
                    continue
                raise
        return None  # pragma: no cover - the loop returns or raises

    def instance_action(self) -> InterruptionNotice | None:
        body = self.get(INSTANCE_ACTION_PATH)
        return None if body is None else parse_instance_action(body)

    def rebalance(self) -> InterruptionNotice | None:
        body = self.get(REBALANCE_PATH)
        return None if body is None else parse_rebalance(body)


def drop(directory: Path, name: str, notice: InterruptionNotice) -> Path:
    """Write ``notice`` into the drop box atomically."""
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    final = directory / name
    partial = directory / f".{name}.partial"
    partial.write_text(notice.to_json())
    partial.replace(final)
    return final


def watch(
    client: MetadataClient, notices: Path, interval: float, *, max_polls: int | None = None
) -> InterruptionNotice | None:
    """Poll until an interruption notice appears (returned after it is dropped)."""
    rebalance_seen = False
    polls = 0
    while max_polls is None or polls < max_polls:
        polls += 1
        try:
            notice = client.instance_action()
            if notice is not None:
                drop(notices, NOTICE_FILE, notice)
                print(f"skyward-aws: {notice.message}", file=sys.stderr, flush=True)
                return notice
            if not rebalance_seen:
                hint = client.rebalance()
                if hint is not None:
                    rebalance_seen = True
                    drop(notices, REBALANCE_FILE, hint)
                    print(f"skyward-aws: {hint.message}", file=sys.stderr, flush=True)
        except (OSError, ValueError) as error:  # IMDS briefly unreachable, or an odd answer
            print(f"skyward-aws: metadata read failed ({error}); retrying", file=sys.stderr, flush=True)
        time.sleep(interval)
    return None


def bootstrap_step(notices_dir: str, interval: float = 2.0) -> str:
    """The bootstrap lines that start the watcher in the background (after the node's
    environment exists, so ``$PY`` has skyward-aws)."""
    log = '"$SKYWARD_HOME/spot-watch.log"'
    return (
        f'nohup "$PY" -m skyward_aws.interruption --notices {shlex.quote(notices_dir)} '
        f"--interval {interval:g} >>{log} 2>&1 </dev/null &\n"
        'echo "skyward-aws: watching for spot interruption notices (pid $!)"'
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Watch IMDS for spot interruption notices.")
    parser.add_argument("--notices", required=True, type=Path, help="drop box the agent reads")
    parser.add_argument("--interval", type=float, default=2.0, help="seconds between polls (AWS suggests <= 5)")
    args = parser.parse_args(argv)
    watch(MetadataClient(), args.notices, args.interval)
    return 0


if __name__ == "__main__":
    sys.exit(main())
