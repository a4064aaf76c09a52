"""What the container marketplaces (VastAI, RunPod) share (pure).

Both rent a GPU host's container, not a VM: an image plus a start-up command, ports the
host maps to others, no tags and no firewall API. This holds the rules both plugins
follow, once:

* :data:`DEFAULT_CUDA_IMAGE`: the image a node runs unless the config names another;
* :func:`start_command`: the container command that fetches the node's bootstrap script
  from the pool's client and runs it (``skyward.wheels.loader``);
* :func:`pool_label` / :func:`parse_pool_label`: the one name a container carries (its
  VastAI label, its RunPod pod name), holding the pool id, its expiry and the node;
* :func:`catalog_gpu`: the accelerator catalog's name for a marketplace's GPU name.
"""

from __future__ import annotations

import ast
import base64
import functools
import hashlib
import json
import re
import shlex
import zlib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from skyward.agent.config import CONFIG_END, AgentConfig
from skyward.errors import ConfigurationError
from skyward.providers.cloud.naming import PoolMark
from skyward.wheels import loader

DEFAULT_CUDA_IMAGE = "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime"
"""Ubuntu 22.04 with CUDA 12.4, cuDNN 9 and Python 3.11: runs on every host whose driver
supports CUDA >= 12.4 (the offer search asks for that), and already holds the python
and CA certificates the bootstrap needs, so a node spends its first minute on skyward's
own packages rather than on apt."""

MIN_CUDA = 12.4
"""The CUDA version :data:`DEFAULT_CUDA_IMAGE` needs of the host's driver."""

START_COMMAND_LIMIT = 4096
"""The most characters VastAI accepts in a rental's ``args``, ``args_str`` and ``onstart``
together (``x-input-validation: args: max_length: 4096``, "Combined length of args,
args_str and onstart", in VastAI's published OpenAPI file
``api-reference/openapi/yaml/create_instance.yaml``, github.com/vast-ai/docs, read
2026-11-25 at commit c624622). RunPod documents no limit for ``dockerArgs``; the same
command is sent there, so nothing depends on RunPod accepting more."""

BOOT_SCRIPT = "bootstrap.sh"
"""Where, under ``$SKYWARD_HOME``, the loader writes the script it fetched before the start
command runs it (the container's own disk: nothing of it outlives the container)."""

_ESSENTIALS = ("pool_id", "node", "bind", "server_secret", "client_public")
_CONFIG_LINE = re.compile(rf"<<'{CONFIG_END}'[^\n]*\n(\{{[^\n]*\}})\n{CONFIG_END}$", re.MULTILINE)
_POOL_ID = re.compile(r"^[a-z0-9][a-z0-9-]{0,40}$")
_LABEL = re.compile(r"^skyward-(?P<pool>[a-z0-9][a-z0-9-]{0,40}?)-(?P<expires>\d{9,11})-(?P<node>\d{1,4})$")

# The start command, one bash line (a marketplace re-splits a command line with shell rules:
# no newline, and no single quote, so RunPod's shell-quoted line has no escapes). It finds
# uv as the bootstrap does (and in the same place, which the bootstrap then reuses), makes
# a small environment holding pyzmq, runs the loader from its compressed source (an
# argument: base64 needs no quoting) with the essentials on stdin, and execs the script.
_SHELL = (
    'set -eu;H=${{SKYWARD_HOME:-${{HOME:-/root}}/.skyward}};mkdir -p "$H";cd "$H";'
    "export UV_CACHE_DIR=${{UV_CACHE_DIR:-$H/cache/uv}};U=$H/tools/bin/uv;"
    "if command -v uv >/dev/null;then U=$(command -v uv);"
    'elif [ ! -x "$U" ];then python3 -m venv tools >/dev/null 2>&1&&tools/bin/pip install -q uv||'
    "curl -LsSf https://astral.sh/uv/install.sh|env UV_UNMANAGED_INSTALL=$H/tools/bin sh;fi;"
    '[ -x loader/bin/python ]||{{ "$U" venv -q loader&&"$U" pip install -q --python loader/bin/python pyzmq;}};'
    'loader/bin/python -c "import sys,zlib,base64;exec(zlib.decompress(base64.b64decode(sys.argv.pop(1))))" '
    "{source} {script} {digest} {wait} <<<{essentials}||exit 3;exec ./{script}"
)


def check_container(owner: str, image: object, disk_gb: object) -> None:
    """The settings every marketplace container has: an image name and whole GB of disk
    (8 GB: the smallest disk the CUDA image and the bootstrap's packages fit on)."""
    if not isinstance(image, str) or not image.strip():
        raise ConfigurationError(f"{owner}(image={image!r}) must name a container image")
    if isinstance(disk_gb, bool) or not isinstance(disk_gb, int) or not 8 <= disk_gb <= 10_000:
        raise ConfigurationError(f"{owner}(disk_gb={disk_gb!r}) must be whole GB between 8 and 10000")


def check_number(owner: str, name: str, value: object, low: float, high: float) -> None:
    """``value`` is a real number (not a bool) from ``low`` to ``high``."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise ConfigurationError(f"{owner}({name}={value!r}) must be a number from {low:g} to {high:g}")


@functools.cache
def loader_source() -> str:
    """:mod:`skyward.wheels.loader` as the start command carries it: without docstrings
    and comments, zlib-compressed, base64 (about 1.3 KB of the 4 KB)."""
    tree = _Bare().visit(ast.parse(Path(loader.__file__).read_text()))
    return base64.b64encode(zlib.compress(ast.unparse(tree).encode(), 9)).decode("ascii")


class _Bare(ast.NodeTransformer):
    """Drops what Python does not run: docstrings, annotations (the loader's
    ``from __future__ import annotations`` never evaluates them) and that import."""

    def generic_visit(self, node: ast.AST) -> ast.AST:
        super().generic_visit(node)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef):
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                node.body = node.body[1:] or [ast.Pass()]
        if isinstance(node, ast.FunctionDef):
            node.returns = None
        if isinstance(node, ast.arg):
            node.annotation = None
        return node

    def visit_AnnAssign(self, node: ast.AnnAssign) -> ast.AST:
        return ast.Assign(targets=[node.target], value=node.value or ast.Constant(None), lineno=node.lineno)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> ast.AST | None:
        return None if node.module == "__future__" else node


def agent_config_of(script: str) -> AgentConfig:
    """The agent config a bootstrap script holds (its one here-document line)."""
    match = _CONFIG_LINE.search(script)
    if match is None:
        raise ValueError("the bootstrap script holds no agent config (a node's script always does)")
    return AgentConfig.from_json(match[1])


def start_command(script: str, wait: float) -> list[str]:
    """The container command that runs ``script`` (a node's bootstrap) without carrying
    it: the agent config's essentials, the script's sha256 and the loader
    (``skyward.wheels.loader``, whose docstring draws the trust boundary), which fetches
    the script from the pool's client, checks it and runs it. Its length does not depend
    on the script (under :data:`START_COMMAND_LIMIT` whatever the ``Image`` holds); the
    pool's client must offer ``script`` by its sha256 (the pool does, for every node).
    ``wait``: seconds the loader waits for the script before the container ends."""
    config = agent_config_of(script)
    essentials = json.dumps({k: getattr(config, k) for k in _ESSENTIALS}, separators=(",", ":"))
    return [
        "bash",
        "-c",
        _SHELL.format(
            source=loader_source(),
            script=BOOT_SCRIPT,
            digest=hashlib.sha256(script.encode()).hexdigest(),
            wait=max(1, round(wait)),
            essentials=base64.b64encode(essentials.encode()).decode("ascii"),
        ),
    ]


def start_command_line(script: str, wait: float) -> str:
    """:func:`start_command` as one shell line (RunPod's ``dockerArgs``)."""
    return shlex.join(start_command(script, wait))


def command_length(args: Iterable[str]) -> int:
    """A start command's length as VastAI's limit counts it at most: its words joined by
    spaces (VastAI does not say how it counts an array; this is the larger reading)."""
    return len(" ".join(args))


def pool_label(pool_id: str, expires: int, node: int) -> str:
    """``skyward-<pool id>-<expiry>-<node>``: what a container of the pool is called."""
    if not _POOL_ID.match(pool_id):
        raise ConfigurationError(f"pool id {pool_id!r} cannot name a container: use lowercase letters, digits, '-'")
    return f"skyward-{pool_id}-{expires}-{node}"


def parse_pool_label(label: str | None) -> PoolMark | None:
    match = _LABEL.match(label or "")
    return None if match is None else PoolMark(match["pool"], int(match["expires"]))


def pool_members(listing: Iterable[Mapping[str, Any]], label_key: str, pool_id: str) -> list[str]:
    """The ids of the containers in ``listing`` whose label (under ``label_key``: VastAI's
    ``label``, RunPod's ``name``) marks them as ``pool_id``'s: what a pool's teardown
    verifies is gone, found the same way on both marketplaces."""
    return [
        str(raw["id"])
        for raw in listing
        if (mark := parse_pool_label(str(raw.get(label_key) or ""))) is not None and mark.pool_id == pool_id
    ]


# The marketplaces' spellings, upper-cased without spaces or dashes, -> the catalog's model
_MODELS = {
    "H100SXM": "H100-SXM",
    "H100SXM5": "H100-SXM",
    "H10080GBHBM3": "H100-SXM",
    "H100PCIE": "H100-PCIe",
    "H100NVL": "H100-NVL",
    "H200": "H200",
    "H200SXM": "H200",
    "H200NVL": "H200",
    "GH200": "GH200",
    "B200": "B200",
    "A100SXM4": "A100",
    "A100SXM": "A100",
    "A100PCIE": "A100",
    "A100X": "A100",
    "A10080GBPCIE": "A100",
    "A100": "A100",
    "RTXA6000": "A6000",
    "A6000": "A6000",
    "A40": "A40",
    "A10": "A10",
    "L40S": "L40S",
    "L40": "L40",
    "L4": "L4",
    "RTX6000ADA": "RTX6000-Ada",
    "RTX4000ADA": "RTX4000-Ada",
    "TESLAV100": "V100",
    "V100": "V100",
    "TESLAT4": "T4",
    "T4": "T4",
}
_HAS_MEMORY_VARIANTS = {"A100": (40, 80), "V100": (16, 32)}


def catalog_gpu(name: str, memory_gb: float | None = None) -> str | None:
    """The catalog's spelling of a marketplace GPU (``"A100 SXM4"`` with 80 GB ->
    ``"A100-80GB"``, ``"NVIDIA H100 80GB HBM3"`` -> ``"H100-SXM"``, ``"RTX A6000"`` ->
    ``"A6000"``), or None for one the catalog does not know (a consumer ``"RTX 4090"``)."""
    key = re.sub(r"[\s_-]", "", name.upper()).removeprefix("NVIDIA").removeprefix("GEFORCE")
    model = _MODELS.get(key)
    if model is None:
        return None
    sizes = _HAS_MEMORY_VARIANTS.get(model)
    if sizes and memory_gb:
        nearest = min(sizes, key=lambda size: abs(size - memory_gb))
        return f"{model}-{nearest}GB"
    return model


def reap_reason(mark: PoolMark | None, stopped: bool, now: float, own_pool: str | None) -> str | None:
    """Why a container of another pool may be destroyed at a pool's start (None: keep
    it): stopped (skyward never starts one again; VastAI bills a stopped one's disk) or
    past its pool's expiry. Containers without a skyward label are never touched."""
    if mark is None or mark.pool_id == own_pool:
        return None
    if stopped:
        return "stopped (a stopped container still bills its disk)"
    if now > mark.expires:
        return f"its pool {mark.pool_id} expired at {mark.expires}"
    return None
