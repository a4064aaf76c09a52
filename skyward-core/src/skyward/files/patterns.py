"""Which files ``Image(includes=..., excludes=...)`` names, ``.gitignore`` rules respected.

Includes are globs relative to the client's working directory: ``*`` and ``?`` stay in
one path component, ``**`` crosses any number, and a pattern that names a directory
(``configs/``, ``configs``, ``*``) ships everything below it; ``.`` is the whole
directory. Excludes and ``.gitignore`` files use git's own rules (``pathspec``'s
``GitIgnoreSpec``): every ``.gitignore`` on the way down counts, a deeper
one overrides a shallower one, and a directory git ignores is not entered (git cannot
re-include a file below it either). ``excludes`` apply last, over every ``.gitignore``;
``.git/`` is never shipped. A symlink that an include reaches is refused (its target may
lie outside the directory, and a link's meaning on the node is not the client's): name
its target instead, or exclude it.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import pathspec

from skyward.errors import ConfigurationError
from skyward.files.manifest import Manifest, build_manifest

__all__ = ["Selection", "check_patterns", "manifest_of", "select"]

_GLOB = frozenset("*?[")
GITIGNORE = ".gitignore"
NEVER = ".git"


def check_patterns(value: object, what: str) -> tuple[str, ...]:
    """``Image(includes=...)`` or ``excludes`` as a tuple of relative patterns (pure);
    ``ConfigurationError`` naming the parameter and the fix for anything else."""
    if value is None:
        return ()
    if isinstance(value, str | bytes | bytearray | memoryview) or not isinstance(value, Sequence):
        raise ConfigurationError(
            f"Image({what}={value!r}) takes a list of glob patterns relative to the working directory, "
            f"e.g. {what}=['data/*.csv', 'configs/']"
        )
    out: list[str] = []
    for item in value:
        if not isinstance(item, str) or not item.strip():
            raise ConfigurationError(
                f"Image({what}=...) items must be non-empty strings (glob patterns such as 'data/*.csv'), got {item!r}"
            )
        body = item.removeprefix("!") if what == "excludes" else item
        if body.startswith(("/", "\\", "~/")):
            raise ConfigurationError(
                f"Image({what}=[{item!r}]): patterns are relative to the working directory the pool opens in; "
                f"an absolute path cannot be; write it relative (e.g. {body.lstrip('/~') or 'data/'!r}) "
                "and open the pool from its parent directory"
            )
        if ".." in PurePosixPath(body.replace("\\", "/")).parts:
            raise ConfigurationError(
                f"Image({what}=[{item!r}]): '..' would reach outside the working directory, which is the root of "
                "what is shipped; open the pool from a directory that holds the files"
            )
        if "\x00" in item:
            raise ConfigurationError(f"Image({what}=[{item!r}]): a pattern cannot hold a NUL character")
        out.append(item)
    return tuple(out)


def _normal(pattern: str) -> str:
    """An include without its leading ``./``; ``.`` (the whole directory) is ``**``."""
    while pattern.startswith("./"):
        pattern = pattern[2:]
    return "**" if pattern in ("", ".") else pattern


def _walk_base(pattern: str) -> str:
    """The directory an include is confined to: its leading components without a glob."""
    pattern = _normal(pattern)
    parts = PurePosixPath(pattern).parts
    base: list[str] = []
    for part in parts[:-1] if not pattern.endswith("/") else parts:
        if _GLOB & set(part):
            break
        base.append(part)
    return "/".join(base)


def _include_spec(includes: Sequence[str]) -> pathspec.GitIgnoreSpec:
    # anchored at the root: "*.json" means the top directory's, as a glob does
    return pathspec.GitIgnoreSpec.from_lines(["/" + _normal(p) for p in includes])


@dataclass(frozen=True, slots=True)
class Selection:
    """What a walk found: the files to ship (relative posix paths, sorted) and, per
    include, how many files it matched, ignored ones apart."""

    files: tuple[str, ...]
    matched: tuple[int, ...]
    ignored: tuple[int, ...]


class _Ignores:
    """The ``.gitignore`` specs met on the way down, and the excludes on top."""

    def __init__(self, root: Path, excludes: Sequence[str]) -> None:
        self.root = root
        self.specs: dict[str, pathspec.GitIgnoreSpec | None] = {}
        self.excludes = pathspec.GitIgnoreSpec.from_lines(excludes)

    def _spec(self, directory: str) -> pathspec.GitIgnoreSpec | None:
        if directory not in self.specs:
            path = self.root / directory / GITIGNORE
            try:
                lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
            except OSError:
                self.specs[directory] = None
            else:
                self.specs[directory] = pathspec.GitIgnoreSpec.from_lines(lines)
        return self.specs[directory]

    def ignored(self, rel: str, is_dir: bool) -> bool:
        """Whether git (then ``excludes``) leaves ``rel`` out; its ancestors are not ignored."""
        if PurePosixPath(rel).name == NEVER:
            return True
        probe = rel + "/" if is_dir else rel
        verdict: bool | None = None
        parts = rel.split("/")
        for depth in range(len(parts)):
            directory = "/".join(parts[:depth])
            spec = self._spec(directory)
            if spec is not None:
                result = spec.check_file(probe[len(directory) + 1 :] if directory else probe)
                if result.include is not None:
                    verdict = result.include
        result = self.excludes.check_file(probe)
        if result.include is not None:
            verdict = result.include
        return bool(verdict)


def _walk(root: Path, base: str, ignores: _Ignores | None) -> Iterator[tuple[str, bool]]:
    """(relative path, is a symlink) of every file below ``base`` that is not ignored."""
    top = root / base if base else root
    if base:
        for depth in range(1, len(base.split("/")) + 1):
            ancestor = "/".join(base.split("/")[:depth])
            if os.path.islink(root / ancestor):
                yield ancestor, True
                return
            if ignores is not None and ignores.ignored(ancestor, is_dir=(root / ancestor).is_dir()):
                return
        if top.is_file():
            yield base, False
            return
    for directory, dirnames, filenames in os.walk(top):
        rel_dir = Path(directory).relative_to(root).as_posix()
        rel_dir = "" if rel_dir == "." else rel_dir
        keep = []
        for name in sorted(dirnames):
            rel = f"{rel_dir}/{name}" if rel_dir else name
            if name == NEVER or (ignores is not None and ignores.ignored(rel, is_dir=True)):
                continue
            if os.path.islink(os.path.join(directory, name)):
                yield rel, True
                continue
            keep.append(name)
        dirnames[:] = keep
        for name in sorted(filenames):
            rel = f"{rel_dir}/{name}" if rel_dir else name
            if ignores is not None and ignores.ignored(rel, is_dir=False):
                continue
            mode = os.lstat(os.path.join(directory, name)).st_mode
            if stat.S_ISLNK(mode):
                yield rel, True
            elif stat.S_ISREG(mode):
                yield rel, False


def select(root: Path, includes: Sequence[str], excludes: Sequence[str]) -> Selection:
    """The files under ``root`` that ``includes`` name and neither a ``.gitignore`` nor
    ``excludes`` leave out. A symlink an include reaches is a ``ConfigurationError``."""
    ignores = _Ignores(root, excludes)
    specs = [_include_spec([p]) for p in includes]
    bases = sorted({_walk_base(p) for p in includes})
    # a base inside another base is walked by that one
    bases = [b for b in bases if not any(o != b and (o == "" or b.startswith(o + "/")) for o in bases)]
    chosen: set[str] = set()
    matched = [0] * len(includes)
    for base in bases:
        for rel, is_link in _walk(root, base, ignores):
            hits = [i for i, spec in enumerate(specs) if spec.match_file(rel) or spec.match_file(rel + "/")]
            if not hits:
                continue
            if is_link:
                raise ConfigurationError(
                    f"Image(includes=...): {rel!r} (under {root}) is a symbolic link, and links are not followed; "
                    "include its target's path instead, or leave it out with excludes=[...]"
                )
            chosen.add(rel)
            for i in hits:
                matched[i] += 1
    ignored = [0] * len(includes)
    for i, count in enumerate(matched):
        if count == 0:  # only to explain an empty include: what .gitignore or excludes hid
            base = _walk_base(includes[i])
            ignored[i] = sum(1 for rel, _ in _walk(root, base, None) if specs[i].match_file(rel))
    return Selection(tuple(sorted(chosen)), tuple(matched), tuple(ignored))


def manifest_of(root: Path, includes: Sequence[str], excludes: Sequence[str]) -> Manifest:
    """The manifest of what ``includes`` name under ``root`` (the working directory at
    pool open). An include that names nothing is a ``ConfigurationError`` naming it, the
    directory it was resolved against and, when that is why, how many files a
    ``.gitignore`` or ``excludes`` left out."""
    selection = select(root, includes, excludes)
    for pattern, count, hidden in zip(includes, selection.matched, selection.ignored, strict=True):
        if count == 0:
            why = f"; {hidden} file(s) match it but a .gitignore or excludes=[...] leaves them out" if hidden else ""
            raise ConfigurationError(
                f"Image(includes=[{pattern!r}]) matches no file under {root} (the working directory the pool "
                f"opened in){why}: fix the pattern, or open the pool from the directory that holds the files"
            )
    return build_manifest(root, selection.files)
