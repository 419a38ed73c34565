"""The bundle on disk, as apps and the harness read it: a typed manifest and verified files.

Apps and the harness trust a bundle only through its manifest: every file's sha256 and size is
recorded at build time and checked before anything runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edge_m3.common.files import sha256_file
from edge_m3.errors import EdgeM3Error
from edge_m3.spec import GOLDEN, MANIFEST, Manifest, ModelEntry


@dataclass
class Bundle:
    """A verified bundle directory and its manifest."""

    path: Path
    manifest: Manifest

    def model_entry(self, fmt: str | None = None) -> ModelEntry:
        """The manifest's entry for the model file of `fmt` (first one when None)."""
        entry = self.manifest.model(fmt)
        if entry is None:
            have = ", ".join(e.format for e in self.manifest.models)
            raise EdgeM3Error(f"{self.path / MANIFEST}: no {fmt} model in this bundle (has {have})")
        return entry

    @property
    def tokenizer_path(self) -> Path:
        """The tokenizer's file (a SentencePiece model, a WordPiece vocabulary)."""
        return self.path / self.manifest.tokenizer.file

    def tokenizer(self) -> Any:
        """The device tokenizer of the manifest's kind (edge_m3.tokenizer.open_tokenizer)."""
        from edge_m3.tokenizer import open_tokenizer

        return open_tokenizer(self.tokenizer_path, self.manifest.tokenizer)


def load_bundle(path: Path, verify: bool = True) -> Bundle:
    """Read a bundle's manifest and (by default) refuse it unless every file hash matches."""
    path = Path(path)
    mpath = path / MANIFEST
    if not mpath.is_file():
        raise EdgeM3Error(f"{mpath}: not found (is {path} an edge-m3 bundle?)")
    manifest = Manifest.read(mpath)
    if verify:
        # Every file a reader opens is one whose sha256 is checked here (names: Manifest.read).
        read = [*manifest.shipped_files(), *([GOLDEN] if (path / GOLDEN).exists() else [])]
        unlisted = [name for name in read if name not in manifest.files]
        if unlisted:
            raise EdgeM3Error(f"{mpath}: {unlisted[0]} is not in files (no sha256 to check it "
                              "against); refusing a modified or corrupt bundle")
        for name, entry in manifest.files.items():
            fpath = path / name
            if not fpath.is_file():
                raise EdgeM3Error(f"{fpath}: listed in the manifest but missing")
            if fpath.stat().st_size != entry["size"] or sha256_file(fpath) != entry["sha256"]:
                raise EdgeM3Error(f"{fpath}: sha256 does not match the manifest; refusing "
                                  "a modified or corrupt bundle")
    return Bundle(path=path, manifest=manifest)
