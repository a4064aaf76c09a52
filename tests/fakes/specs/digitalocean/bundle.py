"""Rebuild ``schemas.json`` from a checkout of DigitalOcean's OpenAPI specification.

    python tests/fakes/specs/digitalocean/bundle.py /path/to/digitalocean/openapi

It reads the schemas the provider's requests and the fake's answers must obey (listed
in ``PICKS``), inlines every ``$ref``, turns OpenAPI 3.0's ``nullable`` into JSON
Schema's ``"null"`` type, drops what only documents (descriptions, examples) and writes
them with the upstream commit. Only the standard library, PyYAML and git are needed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

# name -> (file under specification/, JSON pointer in it ("" for the whole file), where in it)
PICKS: dict[str, tuple[str, str]] = {
    "firewall_create_request": (
        "resources/firewalls/firewalls_create.yml",
        "/requestBody/content/application~1json/schema",
    ),
    "firewall_create_response": (
        "resources/firewalls/responses/create_firewall_response.yml",
        "/content/application~1json/schema",
    ),
    "droplet_single_create_request": ("resources/droplets/models/droplet_single_create.yml", ""),
    "droplet_action_snapshot_request": ("resources/droplets/models/droplet_actions.yml", "/droplet_action_snapshot"),
    "ssh_key_create_request": ("resources/ssh_keys/models/sshKeys.yml", ""),
    "tag_create_request": ("resources/tags/models/tags.yml", ""),
    "tag_assign_resources_request": ("resources/tags/models/tags_resource.yml", ""),
    "size": ("resources/sizes/models/size.yml", ""),
    "account": ("resources/account/models/account.yml", ""),
    "error": ("shared/models/error.yml", ""),
    "error_with_root_causes": ("shared/models/error_with_root_causes.yml", ""),
}
_DROP = {"description", "example", "examples", "discriminator", "x-codeSamples", "title", "externalDocs"}


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def _load(repo: Path, commit: str, path: PurePosixPath, cache: dict[PurePosixPath, Any]) -> Any:
    if path not in cache:
        cache[path] = yaml.safe_load(_git(repo, "show", f"{commit}:specification/{path}"))
    return cache[path]


def _pointer(doc: Any, pointer: str) -> Any:
    for part in [p for p in pointer.split("/") if p]:
        doc = doc[part.replace("~1", "/").replace("~0", "~")]
    return doc


def _inline(node: Any, here: PurePosixPath, repo: Path, commit: str, cache: dict[PurePosixPath, Any]) -> Any:
    if isinstance(node, list):
        return [_inline(n, here, repo, commit, cache) for n in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        target, _, pointer = str(node["$ref"]).partition("#")
        where = here if not target else PurePosixPath(*_normal(here.parent / target).parts)
        resolved = _pointer(_load(repo, commit, where, cache), pointer)
        rest = {k: v for k, v in node.items() if k != "$ref"}
        inlined = _inline(resolved, where, repo, commit, cache)
        return {"allOf": [inlined, _inline(rest, here, repo, commit, cache)]} if rest else inlined
    out = {k: _inline(v, here, repo, commit, cache) for k, v in node.items() if k not in _DROP}
    if out.pop("nullable", False):
        kind = out.get("type")
        out["type"] = [kind, "null"] if isinstance(kind, str) else out.get("type")
        if "enum" in out:
            out["enum"] = [*out["enum"], None]
    out.pop("readOnly", None)
    out.pop("writeOnly", None)
    return out


def _normal(path: PurePosixPath) -> PurePosixPath:
    parts: list[str] = []
    for part in path.parts:
        if part == "..":
            parts.pop()
        elif part != ".":
            parts.append(part)
    return PurePosixPath(*parts)


def main(repo: Path) -> None:
    commit = _git(repo, "rev-parse", "HEAD").strip()
    cache: dict[PurePosixPath, Any] = {}
    schemas = {}
    for name, (file, pointer) in PICKS.items():
        here = PurePosixPath(file)
        schemas[name] = _inline(_pointer(_load(repo, commit, here, cache), pointer), here, repo, commit, cache)
    out = {
        "source": "https://github.com/digitalocean/openapi (specification/), Apache License 2.0",
        "commit": commit,
        "committed": _git(repo, "show", "-s", "--format=%cI", commit).strip(),
        "schemas": schemas,
    }
    target = Path(__file__).with_name("schemas.json")
    target.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    print(f"wrote {target} from {commit}", file=sys.stderr)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
