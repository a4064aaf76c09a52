"""DigitalOcean's published request and response schemas, to check bodies against.

The schemas are a vendored subset of DigitalOcean's OpenAPI specification
(tests/fakes/specs/digitalocean, Apache-2.0; its NOTICE says which commit). The fake
validates every request body with :func:`problems`, and the tests validate the fake's
answers with it, so neither side can drift from the published shapes unnoticed.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft7Validator

SPEC = Path(__file__).with_name("specs") / "digitalocean" / "schemas.json"


@cache
def _document() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(SPEC.read_text())
    return data


def commit() -> str:
    return str(_document()["commit"])


@cache
def _validator(name: str) -> Draft7Validator:
    schemas = _document()["schemas"]
    if name not in schemas:
        raise KeyError(f"no vendored DigitalOcean schema {name!r}; known: {', '.join(sorted(schemas))}")
    return Draft7Validator(schemas[name])


def problems(name: str, document: Any) -> list[str]:
    """Why ``document`` does not match the schema ``name`` (empty: it does)."""
    return [
        f"{'/'.join(str(p) for p in error.absolute_path) or '(body)'}: {error.message}"
        for error in _validator(name).iter_errors(document)
    ]
