"""Builds every conformance case's input folder from a freshly written valid index (docs/conformance.md).

A case (tests/conformance/<format>/<name>.json) names a fixture (a valid folder this module writes
with Python's own writer), the steps that spoil it, how a reader opens it, and the outcome every
language must reach: a result (count and passage ids) or an error kind (spec.KIT_ERROR_KINDS).
No input is committed: `python -m tests.conformance.generate OUT` writes OUT/<format>/<name>/input
and OUT/<format>/<name>/case.json for the three runners (tests/test_conformance.py, the JUnit
class android_assets/jvm/conformance/IndexConformanceTest.kt, the XCTest class
ios_assets/Tests/EdgeM3Tests/EdgeM3ConformanceTests.swift).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sqlite3
import sys
from pathlib import Path
from typing import Any

import numpy as np

from edge_m3.spec import (
    COLBERT_VECS,
    DENSE_VECS,
    INDEX_DB,
    INDEX_DB_VERSION,
    INDEX_MANIFEST,
    KIT_ERROR_KINDS,
    LEXICAL_WEIGHTS,
)

HERE = Path(__file__).resolve().parent
FORMATS = ("index",)
READERS = ("writable", "index")  # a writable index folder; a format-1 (read-only) index folder
FIXTURES = ("db", "compacted", "base", "empty")
STEPS = ("sql", "json_set", "json_delete", "write", "truncate", "xor", "rename", "remove", "rebase", "nan")
DIM, DENSE, COLBERT = 4, "float32", "fp16"
BUNDLE = {"model_file": "model.tflite", "model_sha256": "a" * 64, "tokenizer_file": "sentencepiece.bpe.model",
          "tokenizer_sha256": "b" * 64, "quant": "int8", "path": ""}
# The fixtures' passages, in logical order: (id, chunks' seeds). The base holds the first three,
# the database adds the last two (its rows seq 1, 2, 3: 10/0, "x"/0, "x"/1).
BASE = [(1, [1]), ("two", [2, 3]), (3, [4])]
ADDED = [(10, [10]), ("x", [11, 12])]
# Strings a case may hold in its SQL, values and paths, filled in here: `{next_db_version}`.
TEMPLATE = {"next_db_version": str(INDEX_DB_VERSION + 1), "db_version": str(INDEX_DB_VERSION)}


class CaseError(Exception):
    """A case file that does not say what this generator reads: one line naming the file."""


def vectors(seed: int) -> dict[str, Any]:
    """One chunk's outputs, from its seed alone (unit dense vector, two ColBERT rows, two weights)."""
    rng = np.random.default_rng(seed)
    d = rng.standard_normal(DIM).astype(np.float32)
    c = rng.standard_normal((2, DIM)).astype(np.float32)
    return {DENSE_VECS: d / np.linalg.norm(d), LEXICAL_WEIGHTS: {str(seed % 5): 0.5, "9": 0.25},
            COLBERT_VECS: c / np.linalg.norm(c, axis=1, keepdims=True)}


def _save_base(folder: Path, passages: list[tuple[Any, list[int]]], shift: int = 0) -> None:
    """A format-1 folder of the passages (one row per chunk), written by Python's Index.save."""
    from edge_m3.retrieval.index import Index
    from edge_m3.retrieval.index_folder import BundleIdentity

    idx = Index(DIM, DENSE, COLBERT, bundle=BundleIdentity(**BUNDLE))
    rows = [(pid, seed) for pid, seeds in passages for seed in seeds]
    idx.add([vectors(seed + shift) for _, seed in rows], [pid for pid, _ in rows])
    idx.save(folder)


def _add(ix: Any, passages: list[tuple[Any, list[int]]]) -> None:
    for pid, seeds in passages:
        ix.add(pid, [vectors(s) for s in seeds])


def make_fixture(name: str, folder: Path) -> None:
    """A valid folder: `base` a format-1 index of BASE; `db` it with a database adding ADDED (the
    root folder its base); `compacted` BASE written, compacted into base-1, then ADDED; `empty`
    an empty folder."""
    from edge_m3.retrieval.index_folder import BundleIdentity
    from edge_m3.retrieval.writable import WritableIndex

    if name == "empty":
        folder.mkdir(parents=True)
    elif name == "base":
        _save_base(folder, BASE)
    elif name == "db":
        _save_base(folder, BASE)
        with WritableIndex.open(folder) as ix:
            _add(ix, ADDED)
    elif name == "compacted":
        with WritableIndex.create(folder, DIM, DENSE, COLBERT, bundle=BundleIdentity(**BUNDLE)) as ix:
            _add(ix, BASE)
            ix.compact()
            _add(ix, ADDED)
    else:
        raise CaseError(f"fixture {name!r} unknown (choose from {', '.join(FIXTURES)})")
    for extra in ("-wal", "-shm"):  # closed: nothing left outside the database file
        Path(f"{folder / INDEX_DB}{extra}").unlink(missing_ok=True)


def _fill(x: Any) -> Any:
    """A case's strings with TEMPLATE's `{name}`s filled in (lists and objects walked)."""
    if isinstance(x, str):
        for k, v in TEMPLATE.items():
            x = x.replace("{" + k + "}", v)
        return x
    if isinstance(x, list):
        return [_fill(v) for v in x]
    if isinstance(x, dict):
        return {k: _fill(v) for k, v in x.items()}
    return x


def _walk(tree: Any, path: list[Any]) -> Any:
    for key in path:
        tree = tree[key]
    return tree


def _json_edit(file: Path, step: dict[str, Any]) -> None:
    """Sets (a value, or {"$copy": path} another node's value) or deletes one node of a JSON file."""
    tree = json.loads(file.read_text(encoding="utf-8"))
    *parent, last = step["path"]
    node = _walk(tree, parent)
    if step["step"] == "json_delete":
        del node[last]
    else:
        value = step["value"]
        if isinstance(value, dict) and set(value) == {"$copy"}:
            value = json.loads(json.dumps(_walk(tree, value["$copy"])))
        node[last] = value
    file.write_text(json.dumps(tree, indent=1), encoding="utf-8")


def _nan(folder: Path, file: str) -> None:
    """A float32 NaN as the file's first value, the file then listed as it now is (size, sha256)."""
    data = bytearray((folder / file).read_bytes())
    data[:4] = np.array([np.nan], "<f4").tobytes()
    (folder / file).write_bytes(bytes(data))
    _json_edit(folder / INDEX_MANIFEST, {"step": "json_set", "path": ["files", file, "sha256"],
                                         "value": hashlib.sha256(data).hexdigest()})


def apply_step(folder: Path, step: dict[str, Any]) -> None:
    """One spoiling step on the fixture's copy (docs/conformance.md lists them)."""
    kind = step.get("step")
    file = folder / step.get("file", INDEX_DB if kind == "sql" else INDEX_MANIFEST)
    if kind == "sql":
        con = sqlite3.connect(file, isolation_level=None)
        try:
            for sql in step["sql"] if isinstance(step["sql"], list) else [step["sql"]]:
                con.execute(sql)
        finally:
            con.close()
    elif kind in ("json_set", "json_delete"):
        _json_edit(file, step)
    elif kind == "write":
        data = bytes.fromhex(step["hex"]) if "hex" in step else step["text"].encode("utf-8")
        file.write_bytes(data * int(step.get("repeat", 1)))
    elif kind == "truncate":
        file.write_bytes(file.read_bytes()[: int(step["size"])])
    elif kind == "xor":  # every byte of [offset, offset + length) flipped
        data = bytearray(file.read_bytes())
        for i in range(int(step["offset"]), int(step["offset"]) + int(step["length"])):
            data[i] ^= 0xFF
        file.write_bytes(bytes(data))
    elif kind == "rename":
        (folder / step["from"]).rename(folder / step["to"])
    elif kind == "remove":
        file.unlink()
    elif kind == "rebase":  # the root base written again with other vectors, the database kept
        db = (folder / INDEX_DB).read_bytes()
        shutil.rmtree(folder)
        _save_base(folder, BASE, shift=int(step["shift"]))
        (folder / INDEX_DB).write_bytes(db)
    elif kind == "nan":
        _nan(folder, step["file"])
    else:
        raise CaseError(f"step {kind!r} unknown (choose from {', '.join(STEPS)})")


def read_case(path: Path) -> dict[str, Any]:
    """A case file checked: its fixture, reader, steps and one outcome (`error` a kit error kind,
    or `count` and `ids`)."""
    try:
        case = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CaseError(f"{path}: not a JSON case ({exc})") from None
    where = f"{path}"
    if not isinstance(case, dict) or case.get("fixture") not in FIXTURES or case.get("reader") not in READERS:
        raise CaseError(f"{where}: needs fixture ({', '.join(FIXTURES)}) and reader ({', '.join(READERS)})")
    expect = case.get("expect")
    if not isinstance(expect, dict) or not (expect.get("error") in KIT_ERROR_KINDS or "count" in expect):
        raise CaseError(f"{where}: expect needs error (a kit error kind) or count and ids")
    if not all(isinstance(s, dict) and s.get("step") in STEPS for s in case.get("steps", [])):
        raise CaseError(f"{where}: every step needs step ({', '.join(STEPS)})")
    case["name"] = path.stem
    return case


def cases(fmt: str = "index") -> list[Path]:
    """The case files of a format, by name."""
    return sorted((HERE / fmt).glob("*.json"))


def generate(out: Path, fmt: str = "index") -> list[str]:
    """Writes every case of `fmt` under out/fmt/NAME (input/ and case.json); returns the names."""
    fixtures: dict[str, Path] = {}
    names = []
    for path in cases(fmt):
        case = _fill(read_case(path))
        if case["fixture"] not in fixtures:
            fixtures[case["fixture"]] = out / ".fixtures" / case["fixture"]
            make_fixture(case["fixture"], fixtures[case["fixture"]])
        target = out / fmt / case["name"]
        target.mkdir(parents=True)
        shutil.copytree(fixtures[case["fixture"]], target / "input")
        for n, step in enumerate(case.get("steps", [])):
            try:
                apply_step(target / "input", step)
            except (OSError, sqlite3.Error, KeyError, IndexError, TypeError, ValueError) as exc:
                raise CaseError(f"{path}: step {n + 1} ({step.get('step')}) failed: {exc}") from None
        case["dim"] = DIM  # the fixtures' width, for a runner that needs a query (Swift's ids)
        (target / "case.json").write_text(json.dumps(case, indent=1, ensure_ascii=False), encoding="utf-8")
        names.append(case["name"])
    return names


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="an empty or new folder")
    args = parser.parse_args(argv)
    try:
        for fmt in FORMATS:
            print(f"{fmt}: {len(generate(args.out, fmt))} cases")
    except CaseError as exc:
        print(exc, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
