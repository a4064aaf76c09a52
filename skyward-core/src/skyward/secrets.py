"""``Secret``: an environment value that must not leave the client except to the workers.

Every ``Image(env=...)`` / ``ComputePool(env=...)`` value reaches a node only after the
handshake, inside the CLUSTER message on the pool's CURVE-encrypted channel (the private
ipc directory on Local), and lives there in the workers' ``os.environ`` only: never in
user-data (readable through the provider's API and the metadata service), the bootstrap
script, a file on the node, the agent's environment or the environment cache key. A
``Secret`` adds what a plain value does not need: its repr never shows it, and a line a
node forwards that contains it is shown as ``***``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from skyward.errors import ConfigurationError

REDACTED = "***"


@dataclass(frozen=True)
class Secret:
    """A secret value for ``Image(env=...)`` or ``ComputePool(env=...)``.

    ``Secret("literal")`` holds a value given in code; ``Secret.from_env("NAME")`` and
    ``Secret.from_file(path)`` read it once, when called, so a missing variable or file
    fails while the pool is declared, before anything is provisioned.
    """

    value: str = field(repr=False)
    """The secret itself; only the workers' ``os.environ`` receives it."""
    origin: str = "literal"
    """Where the value came from, for the repr (``from env``, ``from file``, ``literal``)."""

    def __post_init__(self) -> None:
        if not isinstance(self.value, str):
            raise ConfigurationError(
                f"Secret(value) takes a string, got a {type(self.value).__name__}; "
                "use Secret.from_env('NAME') or Secret.from_file(path) to read one"
            )
        if "\0" in self.value:
            raise ConfigurationError("Secret(value): an environment value cannot hold a NUL character")

    def __repr__(self) -> str:
        return f"Secret({self.origin})"

    __str__ = __repr__

    @classmethod
    def from_env(cls, name: str) -> Secret:
        """The client's environment variable ``name``, read now; unset is an error naming it."""
        value = os.environ.get(name)
        if value is None:
            raise ConfigurationError(
                f"Secret.from_env({name!r}): the variable {name} is not set in this client's environment; "
                f"export {name}=... before declaring the pool"
            )
        return cls(value, f"{name!r}, from env")

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> Secret:
        """The text of ``path`` without its trailing newline, read now; a missing or
        unreadable file is an error naming it."""
        try:
            text = Path(path).read_text()
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigurationError(
                f"Secret.from_file({str(path)!r}): cannot read the file ({exc.__class__.__name__}: {exc}); "
                "give a readable text file"
            ) from None
        return cls(text.rstrip("\r\n"), f"{str(path)!r}, from file")


EnvValue = str | Secret
"""A value in ``Image(env=...)``: a plain string, or a ``Secret``."""


def resolve_env(env: Mapping[str, EnvValue]) -> dict[str, str]:
    """The values the workers put into ``os.environ`` (secrets revealed)."""
    return {k: v.value if isinstance(v, Secret) else v for k, v in env.items()}


def secret_values(env: Mapping[str, EnvValue], more: Iterable[Secret] = ()) -> tuple[str, ...]:
    """The secret values of ``env`` and ``more`` (a volume's storage keys), longest first
    (redaction replaces the longest match); empty values are left out (redacting "" would
    mark every line)."""
    secrets = [*(v for v in env.values() if isinstance(v, Secret)), *more]
    values = {s.value for s in secrets if s.value}
    return tuple(sorted(values, key=len, reverse=True))


def redact(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every occurrence of a secret value replaced by ``***``."""
    for value in secrets:
        if value in text:
            text = text.replace(value, REDACTED)
    return text
