"""The bundle on disk: manifest, file hashes, atomic replacement, and the platform kits.

Apps and the harness trust a bundle only through its manifest: every file's sha256 and size is
recorded at build time and checked before anything runs.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edge_m3.errors import EdgeM3Error

SCHEMA_VERSION = 1
HEADS = ("dense", "sparse", "colbert")  # the outputs a bundle may export
MANIFEST = "manifest.json"
GOLDEN = "golden.json"
ANDROID_ASSETS = Path("src/main/assets/edge_m3")
IOS_RESOURCES = Path("EdgeM3Resources")
# golden.json is test data (42 MB at full size): it goes to the test targets, never into the app.
ANDROID_TEST_ASSETS = Path("src/androidTest/assets/edge_m3")
IOS_TEST_RESOURCES = Path("EdgeM3TestResources")


def sha256_file(path: Path, chunk: int = 1 << 22) -> str:
    """Streamed sha256: model files are hundreds of MB."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


def file_entries(directory: Path, names: list[str]) -> dict[str, dict[str, Any]]:
    """`{name: {sha256, size}}` for the manifest."""
    return {n: {"sha256": sha256_file(directory / n), "size": (directory / n).stat().st_size}
            for n in sorted(names)}


def write_json(path: Path, data: Any) -> None:
    """Write JSON through a temp file and rename, so a reader never sees half a file."""
    tmp = path.with_name(path.name + ".part")
    tmp.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def check_writable(out_dir: Path) -> None:
    """Fail before any heavy work when the bundle could not be written (exit 2 in the CLI)."""
    parent = out_dir.resolve().parent
    probe = parent
    while not probe.exists():
        probe = probe.parent
    if out_dir.exists() and not out_dir.is_dir():
        raise EdgeM3Error(f"--out {out_dir}: exists and is not a directory")
    if not probe.is_dir():
        raise EdgeM3Error(f"--out {out_dir}: {probe} is not a directory")
    try:  # a real write: os.access says yes to root even on read-only mounts
        with tempfile.TemporaryFile(dir=probe):
            pass
    except OSError as exc:
        raise EdgeM3Error(f"--out {out_dir}: {probe} is not writable ({exc.strerror})") from None


@contextlib.contextmanager
def atomic_dir(out_dir: Path) -> Iterator[Path]:
    """Yield a private temp dir; on success it replaces out_dir, on any failure it vanishes.

    The previous bundle stays in place (and complete) until the new one is fully written.
    """
    out_dir = out_dir.resolve()
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.building-", dir=out_dir.parent))
    os.chmod(tmp, 0o755)  # mkdtemp's 0700 would make the bundle unreadable to others
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    old = None
    if out_dir.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.old-", dir=out_dir.parent))
        os.replace(out_dir, old / "bundle")
    try:
        os.replace(tmp, out_dir)
    except BaseException:
        if old is not None:
            os.replace(old / "bundle", out_dir)
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)


def model_bytes(manifest: dict[str, Any], entry: dict[str, Any]) -> int:
    """A model's size as shipped: its file plus its extra files (ONNX external data)."""
    return sum(manifest["files"][f]["size"] for f in [entry["file"], *entry.get("extra_files", [])])


@dataclass
class Bundle:
    """A verified bundle directory and its manifest."""

    path: Path
    manifest: dict[str, Any]

    def model_entry(self, fmt: str | None = None) -> dict[str, Any]:
        """The manifest's entry for the model file of `fmt` (first one when None)."""
        for entry in self.manifest["models"]:
            if fmt is None or entry["format"] == fmt:
                return entry
        have = ", ".join(e["format"] for e in self.manifest["models"])
        raise EdgeM3Error(f"{self.path / MANIFEST}: no {fmt} model in this bundle (has {have})")

    @property
    def sentencepiece_path(self) -> Path:
        return self.path / self.manifest["tokenizer"]["file"]


def load_bundle(path: Path, verify: bool = True) -> Bundle:
    """Read a bundle's manifest and (by default) refuse it unless every file hash matches."""
    path = Path(path)
    mpath = path / MANIFEST
    if not mpath.is_file():
        raise EdgeM3Error(f"{mpath}: not found (is {path} an edge-m3 bundle?)")
    try:
        manifest = json.loads(mpath.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise EdgeM3Error(f"{mpath}: not valid JSON ({exc})") from exc
    if not isinstance(manifest, dict) or manifest.get("schema_version") != SCHEMA_VERSION:
        raise EdgeM3Error(f"{mpath}: unsupported schema_version (want {SCHEMA_VERSION})")
    if verify:
        for name, entry in manifest.get("files", {}).items():
            fpath = path / name
            if not fpath.is_file():
                raise EdgeM3Error(f"{fpath}: listed in the manifest but missing")
            if fpath.stat().st_size != entry["size"] or sha256_file(fpath) != entry["sha256"]:
                raise EdgeM3Error(f"{fpath}: sha256 does not match the manifest; refusing "
                                  "a modified or corrupt bundle")
    return Bundle(path=path, manifest=manifest)


def copy_to_kits(bundle_dir: Path, android_root: Path, ios_root: Path) -> list[Path]:
    """Place the bundle where apps read it (Android assets, an iOS resource folder), and
    golden.json where only the test targets read it, so it never ships inside the app."""
    placed = []
    files = sorted(item for item in bundle_dir.iterdir() if item.is_file())
    for dest, test_dest in ((android_root / ANDROID_ASSETS, android_root / ANDROID_TEST_ASSETS),
                            (ios_root / IOS_RESOURCES, ios_root / IOS_TEST_RESOURCES)):
        for folder, wanted in ((dest, [f for f in files if f.name != GOLDEN]),
                               (test_dest, [f for f in files if f.name == GOLDEN])):
            with atomic_dir(folder) as tmp:
                for item in wanted:
                    shutil.copy2(item, tmp / item.name)
            placed.append(folder)
    return placed
