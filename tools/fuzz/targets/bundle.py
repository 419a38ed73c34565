"""A whole bundle folder (bundle.load_bundle): the manifest, the tokenizer file (SentencePiece
model or WordPiece vocabulary), vocab_map.json and golden.json, read as `check` reads them."""

from __future__ import annotations

from edge_m3.bundle.bundle import Bundle, load_bundle
from edge_m3.harness.check import golden_entry, read_golden, replay_exact
from edge_m3.spec import MANIFEST
from tools.fuzz.harness import SEEDS, TEXTS, base_folder, rehash, unpack, write_folder


def open_bundle(files: dict[str, bytes]) -> Bundle:
    """The files as a bundle folder, the manifest's hashes rewritten to match (harness.rehash)."""
    rehash(files, MANIFEST)
    return load_bundle(write_folder(files))


def exercise(bundle: Bundle) -> None:
    """What `check` and the pipeline read from an accepted bundle, each result checked."""
    tok = bundle.tokenizer()
    rows = bundle.manifest.tokenizer.model_rows
    for text in TEXTS:
        ids = tok.encode(text)
        assert all(0 <= r < rows for r in tok.to_model_ids(ids)), (ids, rows)
    golden = read_golden(bundle)
    golden_entry(bundle, golden)
    assert all(isinstance(p, str) for p in replay_exact(bundle, golden))


def base(seed: str) -> dict[str, bytes]:
    """The files of one committed bundle seed (the golden and vocab_map targets fuzz one file of it)."""
    return unpack((SEEDS / "bundle" / seed).read_bytes())


def opened_base(seed: str) -> Bundle:
    """One committed bundle seed written once (harness.base_folder) and opened verified, as an
    app opens it: the intact bundle a one-file target reads each input around."""
    files = base(seed)
    rehash(files, MANIFEST)
    return load_bundle(base_folder(seed, files))


def run(data: bytes) -> None:
    exercise(open_bundle(unpack(data)))
