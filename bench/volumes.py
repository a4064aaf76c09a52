#!/usr/bin/env python3
"""Volumes: the first read of one file of a large prefix, mounted against synced.

``python bench/volumes.py`` (3 rounds of each, 64 files of 4 MiB: 256 MiB) against moto's
S3 server on loopback, with a one-node Local pool (root, rclone and fuse3 needed, as for
the volume tests). Each round opens a pool with the prefix as a ``sky.Volume`` and times
``open()`` to a task returning the first 16 bytes of one file: the time until a task can
use the data. ``mode="sync"`` downloads the whole prefix before the first task;
``mode="mount"`` reads only what the task opens. Memory: the node's rclone resident set
is not the point here; the disk a sync fills is (the whole prefix on every node).

The target, a same-run ratio reported and never asserted: a mount's first read at most
0.5x a sync's for a prefix of this size (the mount's cost does not grow with the prefix;
the sync's does).
"""

from __future__ import annotations

import argparse
import secrets
import shutil
import statistics
import sys
import time

import boto3
from moto.server import ThreadedMotoServer

import skyward as sky

TARGET = 0.5


@sky.compute
def head(path: str) -> bytes:
    with open(path, "rb") as file:
        return file.read(16)


def one_round(storage: sky.storage.S3Compatible, bucket: str, mode: str) -> float:
    mount = f"/mnt/skyward-bench-{secrets.token_hex(4)}"
    volume = sky.Volume(bucket, mount, prefix="data/", storage=storage, mode=mode)  # type: ignore[arg-type]
    started = time.perf_counter()
    with sky.ComputePool(provider=sky.Local(), nodes=1, volume=[volume], display="quiet") as pool:
        assert len(head(f"{mount}/part-00007.bin") >> pool) == 16
        elapsed = time.perf_counter() - started
    shutil.rmtree(mount)  # a synced prefix is on this machine's disk; a mount leaves its empty directory
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--files", type=int, default=64)
    parser.add_argument("--mib", type=int, default=4, help="MiB per file")
    args = parser.parse_args()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    url = f"http://{host}:{port}"
    key_id, secret = "AKIABENCH", secrets.token_hex(16)
    s3 = boto3.client("s3", endpoint_url=url, aws_access_key_id=key_id, aws_secret_access_key=secret,
                      region_name="us-east-1")  # fmt: skip
    bucket = f"bench-{secrets.token_hex(4)}"
    s3.create_bucket(Bucket=bucket)
    blob = secrets.token_bytes(args.mib * 1024 * 1024)
    for index in range(args.files):
        s3.put_object(Bucket=bucket, Key=f"data/part-{index:05d}.bin", Body=blob)
    storage = sky.storage.S3Compatible(url, key_id, sky.Secret(secret), region="us-east-1")
    times = {mode: [one_round(storage, bucket, mode) for _ in range(args.rounds)] for mode in ("sync", "mount")}
    server.stop()
    sync, mount = statistics.median(times["sync"]), statistics.median(times["mount"])
    ratio = mount / sync
    verdict = "met" if ratio <= TARGET else "MISSED"
    size = args.files * args.mib
    print(f"prefix of {args.files} files, {size} MiB; median of {args.rounds} rounds, open to first read")
    print(f"sync  {sync:6.2f} s  ({', '.join(f'{t:.2f}' for t in times['sync'])})")
    print(f"mount {mount:6.2f} s  ({', '.join(f'{t:.2f}' for t in times['mount'])})")
    print(f"mount / sync {ratio:.2f}x (target <= {TARGET}x): {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
