"""What the nodes run: ``Image`` (Python version, pip and apt packages, environment).

On Local, an image without pip packages runs on this interpreter; with pip packages the
node builds a cached uv environment first (which needs the network). This example sets
only environment variables, so it runs anywhere; ``content_hash`` is what the cache key
of an environment is made from.

Run it with:  .venv/bin/python examples/04_image_and_environment.py
"""

from __future__ import annotations

import os
import sys

from _provider import provider

import skyward as sky


@sky.compute
def environment() -> dict[str, str]:
    return {
        "python": f"{sys.version_info.major}.{sys.version_info.minor}",
        "GREETING": os.environ.get("GREETING", ""),
        "MODE": os.environ.get("MODE", ""),
    }


def main() -> None:
    image = sky.Image(env={"GREETING": "hello from the image"})
    print(f"image {image.content_hash()}: python {image.python}, pip {list(image.pip)}")
    with sky.ComputePool(provider=provider(), image=image, env={"MODE": "example"}, display="quiet") as pool:
        seen = environment() >> pool
    print(seen)
    assert seen["GREETING"] == "hello from the image" and seen["MODE"] == "example"
    assert seen["python"] == f"{sys.version_info.major}.{sys.version_info.minor}"  # always the client's


if __name__ == "__main__":
    main()
