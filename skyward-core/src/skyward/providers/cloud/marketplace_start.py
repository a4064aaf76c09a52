"""A container marketplace's start command (VastAI's ``args``, RunPod's ``dockerArgs``).

VastAI refuses a rental whose ``args``, ``args_str`` and ``onstart`` together pass 4,096
characters; a node's bootstrap script is 5.4 KB for a bare ``Image()`` and 13 to 16 KB
for a pool with packages from a checkout, and grows with the ``Image``. So the command
does not carry the script: it carries the agent config's essentials (bind, keys, pool id,
node), the script's sha256 and a loader (:mod:`skyward.wheels.loader`, whose docstring
draws the trust boundary) that fetches the script from the pool's client over the pool's
CURVE channel, checks the digest and runs it: about 2.8 KB whatever the ``Image`` holds.
The pool's client offers every node's script by its sha256 (``OfferedWheels``), and its
handshake answers the loader's request as it answers a wheel request.
"""

from __future__ import annotations

import ast
import base64
import functools
import hashlib
import json
import re
import shlex
import threading
import zlib
from collections.abc import Iterable
from pathlib import Path

from skyward.agent.config import CONFIG_END, AgentConfig
from skyward.wheels import loader

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

_CONFIG_LINE = re.compile(rf"<<'{CONFIG_END}'[^\n]*\n(\{{[^\n]*\}})\n{CONFIG_END}$", re.MULTILINE)

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


_LOADER_LOCK = threading.Lock()


def loader_source() -> str:
    """:mod:`skyward.wheels.loader` as the start command carries it: without docstrings,
    comments and annotations, zlib-compressed, base64 (1.8 KB; the whole command is 2.8 KB
    for the longest pool id, measured by tests/unit/test_marketplace_start.py).

    Built once, under a lock: a pool creates its containers from several threads, and
    CPython 3.11's AST constructor keeps its recursion depth per interpreter, not per
    thread, so two threads in ``ast.parse`` at once fail with ``SystemError: AST
    constructor recursion depth mismatch`` (cpython#106905; seen in CI on a 2-pod RunPod
    pool). ``functools.cache`` alone lets both threads in on the first call."""
    with _LOADER_LOCK:
        return _loader_source()


@functools.cache
def _loader_source() -> str:
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
    essentials = json.dumps(
        {"pool_id": config.pool_id, "node": config.node, "bind": config.bind,
         "server_secret": config.server_secret, "client_public": config.client_public},
        separators=(",", ":"),
    )  # fmt: skip
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
