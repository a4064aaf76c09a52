"""The pure parts of ``Image(includes=...)``: patterns, .gitignore rules, the manifest,
the node's content store and the working directory built from it."""

from __future__ import annotations

import hashlib
import itertools
import os
import stat
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skyward.errors import ConfigurationError
from skyward.files.manifest import CHUNK, Entry, Manifest, build_manifest, hash_file
from skyward.files.patterns import check_patterns, manifest_of, select
from skyward.files.store import BlobStore, place
from skyward.image import Image

_NAMES = st.sampled_from(["x", "y", "keep"])
_EXTS = st.sampled_from(["csv", "tmp", "log"])
_DIRS = st.lists(st.sampled_from(["a", "b"]), max_size=2)
_FILES = st.sets(st.tuples(_DIRS.map(tuple), _NAMES, _EXTS), min_size=1, max_size=12)


def _write(root: Path, rel: str, data: bytes = b"x", mode: int = 0o644) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    os.chmod(path, mode)


@settings(max_examples=60, deadline=None)
@given(
    files=_FILES,
    ignored=st.sets(_EXTS),
    excluded=st.sets(_EXTS),
    anchored_b=st.booleans(),
    keep_under_a=st.booleans(),
)
def test_what_is_shipped_follows_git_s_rules_for_root_and_nested_gitignores_then_excludes(
    files: set[tuple[tuple[str, ...], str, str]],
    ignored: set[str],
    excluded: set[str],
    anchored_b: bool,
    keep_under_a: bool,
) -> None:
    with tempfile.TemporaryDirectory() as temp:
        root = Path(temp)
        paths = {"/".join((*dirs, f"{name}.{ext}")) for dirs, name, ext in files}
        for rel in paths:
            _write(root, rel)
        _write(root, ".git/HEAD")
        lines = [f"*.{e}" for e in sorted(ignored)] + (["/b/"] if anchored_b else [])
        (root / ".gitignore").write_text("# comment\n\n" + "\n".join(lines) + "\n")
        shipped_ignores = {".gitignore"}
        if keep_under_a:
            _write(root, "a/.gitignore", b"!keep.*\n")
            shipped_ignores.add("a/.gitignore")

        def expected(rel: str) -> bool:
            name, ext = rel.rsplit("/", 1)[-1], rel.rsplit(".", 1)[-1]
            if ext in excluded and name != ".gitignore":
                return False
            if anchored_b and rel.startswith("b/"):
                return False  # git does not enter an ignored directory
            if name != ".gitignore" and ext in ignored:
                return keep_under_a and rel.startswith("a/") and name.startswith("keep.")
            return True

        selection = select(root, ["**"], [f"*.{e}" for e in sorted(excluded)])
        assert set(selection.files) == {p for p in paths | shipped_ignores if expected(p)}
        assert list(selection.files) == sorted(selection.files)
        assert not any(p.startswith(".git/") for p in selection.files)


def test_includes_are_globs_anchored_at_the_working_directory() -> None:
    with tempfile.TemporaryDirectory() as temp:
        root = Path(temp)
        for rel in ("top.json", "a/deep.json", "a/b/deeper.json", "data/x.csv", "data/sub/y.csv", "configs/c/d.yaml"):
            _write(root, rel)

        def shipped(*includes: str) -> set[str]:
            return set(select(root, includes, ()).files)

        assert shipped("*.json") == {"top.json"}
        assert shipped("**/*.json") == {"top.json", "a/deep.json", "a/b/deeper.json"}
        assert shipped("data/*.csv") == {"data/x.csv"}
        assert shipped("data/") == {"data/x.csv", "data/sub/y.csv"}
        assert shipped("configs/") == {"configs/c/d.yaml"}
        assert shipped("./data/x.csv", "a/?eep.json") == {"data/x.csv", "a/deep.json"}
        assert shipped("data") == shipped("data/**") == {"data/x.csv", "data/sub/y.csv"}
        everything = {p.relative_to(root).as_posix() for p in root.rglob("*.*")}
        assert shipped(".") == shipped("**") == shipped("*") == everything


def test_an_include_hidden_by_gitignore_says_so() -> None:
    with tempfile.TemporaryDirectory() as temp:
        root = Path(temp)
        _write(root, "data/x.csv")
        _write(root, ".gitignore", b"data/\n")
        with pytest.raises(ConfigurationError, match=r"\['data/\*.csv'\]\) matches no file under .*1 file\(s\) match"):
            manifest_of(root, ["data/*.csv"], ())


_SAFE_PART = st.text(alphabet="abcXYZ019_-. ", min_size=1, max_size=8).filter(lambda p: p not in (".", ".."))
_SAFE_PATH = st.lists(_SAFE_PART, min_size=1, max_size=3).map("/".join)
_ENTRY = st.builds(
    Entry,
    path=_SAFE_PATH,
    sha256=st.binary(min_size=1, max_size=8).map(lambda b: hashlib.sha256(b).hexdigest()),
    size=st.integers(0, 2**40),
    mode=st.integers(0, 0o777),
)


def _valid(entries: list[Entry]) -> Manifest | None:
    by_path = {e.path: e for e in entries}
    try:
        return Manifest(tuple(by_path[p] for p in sorted(by_path)))
    except ValueError:  # a path that is also another's directory
        return None


@given(st.lists(_ENTRY, max_size=10))
def test_a_manifest_reads_back_as_itself_and_its_hash_follows_its_content(entries: list[Entry]) -> None:
    manifest = _valid(entries)
    if manifest is None:
        return
    again = Manifest.from_json(manifest.to_json())
    assert again == manifest and again.sha256 == manifest.sha256
    if manifest.entries:
        first = manifest.entries[0]
        changed = Entry(first.path, hashlib.sha256(first.sha256.encode()).hexdigest(), first.size, first.mode)
        assert Manifest((changed, *manifest.entries[1:])).sha256 != manifest.sha256


@given(st.sampled_from(["/etc/passwd", "../x", "a/../../b", "a//b", "./a", "a/./b", "", "a\\b", "a\x00b", "a/"]))
def test_a_manifest_path_that_could_leave_the_directory_is_refused_on_the_node(path: str) -> None:
    raw = f'[["{path}", "{"0" * 64}", 1, 420]]'.replace("\\", "\\\\").replace("\x00", "\\u0000").encode()
    with pytest.raises(ValueError):
        Manifest.from_json(raw)


def test_a_manifest_with_a_file_that_is_also_a_directory_is_refused() -> None:
    sha = "0" * 64
    with pytest.raises(ValueError, match="both a file and a directory"):
        Manifest((Entry("a", sha, 1, 0o644), Entry("a/b", sha, 1, 0o644)))


@pytest.mark.parametrize("size", [0, 1, CHUNK - 1, CHUNK, CHUNK + 1, 2 * CHUNK + 3])
def test_a_file_is_hashed_in_pieces_as_if_whole(size: int) -> None:
    data = os.urandom(size)
    with tempfile.TemporaryDirectory() as temp:
        path = Path(temp) / "f"
        path.write_bytes(data)
        assert hash_file(path) == (hashlib.sha256(data).hexdigest(), size)


@settings(max_examples=40, deadline=None)
@given(data=st.binary(max_size=300), cuts=st.lists(st.integers(0, 300), max_size=5), flip=st.booleans())
def test_a_blob_is_stored_only_when_its_chunks_hash_to_its_name(data: bytes, cuts: list[int], flip: bool) -> None:
    sha = hashlib.sha256(data).hexdigest()
    bounds = sorted({0, len(data), *(c for c in cuts if c < len(data))})
    chunks = [data[a:b] for a, b in itertools.pairwise(bounds)] or [b""]
    if flip and data:
        chunks[-1] = chunks[-1][:-1] + bytes([chunks[-1][-1] ^ 1])
    with tempfile.TemporaryDirectory() as temp:
        store = BlobStore(Path(temp) / "blobs")
        offset, problem = 0, None
        for index, chunk in enumerate(chunks):
            problem = store.receive(sha, len(data), offset, chunk, index == len(chunks) - 1)
            offset += len(chunk)
        if flip and data:
            assert problem is not None and "not the content the manifest names" in problem
            assert not store.path(sha).exists()
        else:
            assert problem is None and store.path(sha).read_bytes() == data
        assert not [p for p in store.root.iterdir() if p.name.endswith(".part")]  # nothing half-received


def test_a_chunk_out_of_order_or_past_the_size_is_refused_and_dropped() -> None:
    data = b"0123456789"
    sha = hashlib.sha256(data).hexdigest()
    with tempfile.TemporaryDirectory() as temp:
        store = BlobStore(Path(temp))
        assert store.receive(sha, 10, 0, data[:4], False) is None
        assert "does not follow" in (store.receive(sha, 10, 6, data[6:], True) or "")
        assert "began at offset 6" in (store.receive(sha, 10, 6, data[6:], True) or "")
        assert store.receive(sha, 5, 0, data, True) is not None  # more than the manifest's size
        assert list(store.root.iterdir()) == []


def test_the_working_directory_is_built_from_the_store_with_the_manifest_s_modes() -> None:
    with tempfile.TemporaryDirectory() as temp:
        src = Path(temp) / "src"
        _write(src, "run.sh", b"#!/bin/sh\n", 0o750)
        _write(src, "data/x.csv", b"1,2\n", 0o600)
        _write(src, "data/same.csv", b"1,2\n", 0o644)
        manifest = build_manifest(src, ["run.sh", "data/x.csv", "data/same.csv"])
        assert len(manifest.blobs()) == 2  # one content, one blob
        store = BlobStore(Path(temp) / "blobs")
        assert sorted(store.missing(manifest)) == sorted(manifest.blobs())
        for sha, size in manifest.blobs().items():
            path = src / next(e.path for e in manifest.entries if e.sha256 == sha)
            assert store.receive(sha, size, 0, path.read_bytes(), True) is None
        assert store.missing(manifest) == []
        work = Path(temp) / "work"
        place(manifest, store, work)
        for entry in manifest.entries:
            built = work / entry.path
            assert built.read_bytes() == (src / entry.path).read_bytes()
            assert stat.S_IMODE(built.stat().st_mode) == entry.mode
        (work / "data" / "x.csv").write_bytes(b"changed by a task")  # a copy: the store keeps its bytes
        assert hash_file(store.path(manifest.entries[1].sha256))[0] == manifest.entries[1].sha256


@given(st.sampled_from(["/abs", "~/x", "../up", "a/../../b", "\\win"]))
def test_a_pattern_outside_the_working_directory_is_refused_naming_the_parameter(pattern: str) -> None:
    for what in ("includes", "excludes"):
        with pytest.raises(ConfigurationError, match=rf"Image\({what}="):
            check_patterns([pattern], what)


def test_a_deeper_gitignore_overrides_a_shallower_one_and_an_ignored_directory_is_not_entered() -> None:
    with tempfile.TemporaryDirectory() as temp:
        root = Path(temp)
        for rel in ("a/keep.tmp", "a/x.tmp", "a/b/keep.tmp", "b/x.csv", "a/b/x.csv", "c/y.csv", "c/z.csv", "top.tmp"):
            _write(root, rel)
        _write(root, ".gitignore", b"*.tmp\n/b/\nc/\n")
        _write(root, "a/.gitignore", b"!keep.*\n")
        _write(root, "c/.gitignore", b"!y.csv\n")  # c/ is ignored: git never reads this
        _write(root, "a/b/.gitignore", b"*.csv\n")
        assert select(root, ["**"], ()).files == (
            ".gitignore", "a/.gitignore", "a/b/.gitignore", "a/b/keep.tmp", "a/keep.tmp",
        )  # fmt: skip


def test_an_image_s_includes_survive_the_pool_s_pip_and_env_and_stay_out_of_its_cache_key() -> None:
    image = Image(includes=["data/"], excludes=["*.tmp"]).with_pip("numpy").with_env(A="b")
    assert (image.includes, image.excludes, image.pip) == (("data/",), ("*.tmp",), ("numpy",))
    assert image.content_hash() == Image(pip=["numpy"]).content_hash()


def test_a_baked_image_with_included_files_is_refused_where_it_is_declared() -> None:
    with pytest.raises(ConfigurationError, match=r"bake=True, includes=.*baked image would hold your included files"):
        Image(bake=True, includes=["data/"])
    assert Image(bake=True).bake and Image(includes=["data/"]).includes == ("data/",)
