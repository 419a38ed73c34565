"""The index folder apps ship (docs/index-format.md): written atomically, read back memory-mapped
after every file's sha256 is checked, and refused (CorruptIndexError, one line) when its files do
not agree with index.json or each other, by edge_m3/spec/index.py's rule tables.

`Index.save` and `Index.load` read and write it through `write_folder` and `read_folder`.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from edge_m3 import __version__
from edge_m3.common.files import atomic_dir, file_entries, sha256_file
from edge_m3.errors import EdgeM3Error, one_line
from edge_m3.spec import (
    INDEX_ARRAYS,
    INDEX_BUNDLE_KEYS,
    INDEX_DTYPES,
    INDEX_FORMAT,
    INDEX_FORMAT_VERSION,
    INDEX_IDS,
    INDEX_MANIFEST,
    INDEX_POSTING_WEIGHTS,
    MANIFEST,
)
from edge_m3.spec.index import (
    INDEX_ARRAY_RULES,
    INDEX_FINITE,
    INDEX_ID_MAX,
    INDEX_ID_MIN,
    INDEX_MANIFEST_FIELDS,
    INDEX_POSITIVE,
    array_dtypes,
    manifest_want,
)

PassageId = int | str
_PW = INDEX_POSTING_WEIGHTS  # the postings' weights array


class CorruptIndexError(EdgeM3Error):
    """An index's files refused for their contents (spec.KIT_ERROR_KINDS' corrupt_index): a file
    missing, malformed, or not what index.json says (or a writable index's database refused): build
    or download the index again. A caller's mistake (a bad query, another bundle) is not one."""

    kind = "corrupt_index"


@dataclass(frozen=True)
class BundleIdentity:
    """The model that embedded an index's passages: queries must come from the same one."""

    model_file: str
    model_sha256: str
    tokenizer_file: str
    tokenizer_sha256: str
    quant: str = ""
    path: str = ""  # where the bundle was at build time (informational)

    @classmethod
    def of(cls, bundle: Any, fmt: str | None = None) -> BundleIdentity:
        """The identity of a loaded bundle's model file of `fmt` (its first one when None)."""
        entry = bundle.model_entry(fmt)
        files = bundle.manifest.files
        tok = bundle.manifest.tokenizer.file
        return cls(entry.file, files.get(entry.file, {}).get("sha256", ""), tok,
                   files.get(tok, {}).get("sha256", ""), bundle.manifest.quant,
                   str(Path(bundle.path).resolve()))

    def to_json(self) -> dict[str, str]:
        return {"model_file": self.model_file, "model_sha256": self.model_sha256,
                "tokenizer_file": self.tokenizer_file, "tokenizer_sha256": self.tokenizer_sha256,
                "quant": self.quant, "path": self.path}

    @classmethod
    def from_json(cls, d: Any, where: str) -> BundleIdentity:
        if not isinstance(d, dict) or not all(isinstance(d.get(k), str) for k in INDEX_BUNDLE_KEYS):
            raise CorruptIndexError(f"{where}: bundle: needs {', '.join(INDEX_BUNDLE_KEYS)} (strings)")
        return cls(d["model_file"], d["model_sha256"], d["tokenizer_file"], d["tokenizer_sha256"],
                   str(d.get("quant", "")), str(d.get("path", "")))

    def check(self, bundle: Any, where: str) -> None:
        """Refuse (one line) a bundle whose manifest lacks this model or tokenizer file."""
        files = bundle.manifest.files
        for name, sha in ((self.model_file, self.model_sha256), (self.tokenizer_file, self.tokenizer_sha256)):
            if files.get(name, {}).get("sha256") != sha:
                raise EdgeM3Error(f"{where}: built by another bundle ({name} sha256 {sha[:12]}..., "
                                  f"{Path(bundle.path) / MANIFEST} has "
                                  f"{str(files.get(name, {}).get('sha256', 'no such file'))[:12]}...); "
                                  "rebuild the index with this bundle or give the index's bundle")


@dataclass(frozen=True)
class Layout:
    """An index's arrays in the folder's layout and what they must agree with: its dim, its
    stores and its ids (one row each)."""

    dim: int
    dense_store: str
    colbert_store: str
    ids: list[PassageId]
    arrays: dict[str, np.ndarray]


def write_folder(out: Path, layout: Layout, bundle: BundleIdentity | None) -> Path:
    """Write the index folder atomically (docs/index-format.md): a reader never sees half of it."""
    with atomic_dir(Path(out)) as tmp:
        arrays = {}
        for name, arr in layout.arrays.items():
            dtype = arr.dtype.name  # float32, float16, int8, int32 or int64
            np.ascontiguousarray(arr, dtype=INDEX_DTYPES[dtype]).tofile(tmp / INDEX_ARRAYS[name])
            arrays[name] = {"file": INDEX_ARRAYS[name], "dtype": dtype, "shape": list(arr.shape)}
        (tmp / INDEX_IDS).write_text(json.dumps(layout.ids, ensure_ascii=False), encoding="utf-8")
        names = [INDEX_IDS] + [v["file"] for v in arrays.values()]
        manifest = {"format": INDEX_FORMAT, "format_version": INDEX_FORMAT_VERSION,
                    "edge_m3_version": __version__,
                    "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    "bundle": bundle.to_json() if bundle else None,
                    "count": len(layout.ids), "dim": layout.dim, "dense": layout.dense_store,
                    "colbert": layout.colbert_store, "arrays": arrays,
                    "files": file_entries(tmp, names)}
        (tmp / INDEX_MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    return Path(out)


def read_folder(path: Path, bundle: Any, verify: bool) -> tuple[Layout, BundleIdentity | None]:
    """A saved index's arrays memory-mapped and its bundle identity, every check passed (index.json,
    `bundle`'s files, the files' sizes and (`verify`) sha256s, ids.json, the layout, and with
    `verify` the stored floats finite); OSError is the caller's to report."""
    m = read_manifest(path)
    where = str(path)
    ident = BundleIdentity.from_json(m["bundle"], where) if m.get("bundle") is not None else None
    if bundle is not None:
        if ident is None:
            raise EdgeM3Error(f"{where}: records no bundle, so queries cannot be checked against it")
        ident.check(bundle, where)
    _check_files(path, m["files"], verify)
    ids = _read_ids(path, m["count"])
    arrays = {name: _map_array(path, spec) for name, spec in m["arrays"].items()}
    layout = Layout(m["dim"], m["dense"], m["colbert"], ids, arrays)
    check_layout(layout, where)
    # float32 dense and fp16 ColBERT values finite: checked with the sha256 (which reads every
    # byte anyway); an index opened unverified is trusted to hold what Index.add writes
    floats = [x for x in INDEX_FINITE if x in arrays and arrays[x].dtype != np.int8]
    if verify and not all(_finite(arrays[x]) for x in floats):
        raise CorruptIndexError(f"{where}: a stored vector is not finite; refusing a corrupt index")
    return layout, ident


def _check_files(path: Path, files: Mapping[str, Any], verify: bool) -> None:
    """Every file index.json lists: a plain name, there, of its size and (`verify`) its sha256."""
    for name, entry in files.items():
        f = path / name
        if Path(name).name != name:
            raise CorruptIndexError(f"{path / INDEX_MANIFEST}: file name {name!r} is not a plain name")
        if not f.is_file():
            raise CorruptIndexError(f"{f}: listed in {INDEX_MANIFEST} but missing")
        if f.stat().st_size != entry["size"] or (verify and sha256_file(f) != entry["sha256"]):
            raise CorruptIndexError(f"{f}: sha256 does not match {INDEX_MANIFEST}; refusing a modified or "
                                    "corrupt index")


def _is_id(i: Any) -> bool:
    """A passage id: a string or an int64 (spec.index.INDEX_ID_MIN..MAX), as the kits store them
    (issue 38: 2^63 was an id here only)."""
    return isinstance(i, str) or (isinstance(i, int) and not isinstance(i, bool)
                                  and INDEX_ID_MIN <= i <= INDEX_ID_MAX)


def _read_ids(path: Path, count: int) -> list[PassageId]:
    """ids.json: a list of `count` ids."""
    try:
        ids = json.loads((path / INDEX_IDS).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise CorruptIndexError(f"{path / INDEX_IDS}: unreadable ({one_line(exc)})") from None
    if not isinstance(ids, list) or len(ids) != count or not all(_is_id(i) for i in ids):
        raise CorruptIndexError(f"{path / INDEX_IDS}: must be a list of {count} ids "
                                "(int64s or strings)")
    return ids


def _map_array(path: Path, spec: Mapping[str, Any]) -> np.ndarray:
    """An array's file memory-mapped as its manifest entry says, refused when its size is not that."""
    shape = tuple(spec["shape"])
    dtype = np.dtype(INDEX_DTYPES[spec["dtype"]])
    f = path / spec["file"]
    need = math.prod(shape) * dtype.itemsize  # Python ints: a lying shape cannot wrap round
    if f.stat().st_size != need:
        raise CorruptIndexError(f"{f}: {f.stat().st_size} bytes, {spec['dtype']} {list(shape)} "
                                f"needs {need}")
    return np.memmap(f, dtype=dtype, mode="r", shape=shape) if need else np.zeros(shape, dtype)


def read_manifest(path: Path) -> dict[str, Any]:
    """index.json parsed and checked field by field (spec.index.INDEX_MANIFEST_FIELDS; one line
    per problem)."""
    mpath = Path(path) / INDEX_MANIFEST
    if not mpath.is_file():
        raise CorruptIndexError(f"{mpath}: not found (is {path} an edge-m3 index?)")
    try:
        m = json.loads(mpath.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as exc:
        raise CorruptIndexError(f"{mpath}: not valid JSON ({exc})") from None
    if not isinstance(m, dict) or m.get("format") != INDEX_FORMAT:
        raise CorruptIndexError(f"{mpath}: not an {INDEX_FORMAT} manifest")
    if m.get("format_version") != INDEX_FORMAT_VERSION:
        raise CorruptIndexError(f"{mpath}: format_version {m.get('format_version')!r} unsupported "
                                f"(this edge-m3 reads {INDEX_FORMAT_VERSION})")
    for key, kind, rule in INDEX_MANIFEST_FIELDS:
        if not _FIELD_CHECKS[kind](m.get(key), rule):
            raise CorruptIndexError(f"{mpath}: {key}: must be {manifest_want(kind, rule)}")
    listed = set(m["files"])
    for name in [INDEX_IDS] + [s["file"] for s in m["arrays"].values()]:
        if name not in listed:
            raise CorruptIndexError(f"{mpath}: files: {name} has no sha256")
    return m


def _int_ok(v: Any, rule: tuple[int, int | None]) -> bool:
    return isinstance(v, int) and v >= rule[0] and (rule[1] is None or v <= rule[1])


def _array_entry_ok(name: Any, entry: Any) -> bool:
    """An `arrays` entry: a known array's file, a known dtype, a shape of integers >= 0."""
    return (name in INDEX_ARRAYS and isinstance(entry, dict) and entry.get("file") == INDEX_ARRAYS[name]
            and isinstance(entry.get("dtype"), str) and entry["dtype"] in INDEX_DTYPES
            and isinstance(entry.get("shape"), list)
            and all(isinstance(x, int) and x >= 0 for x in entry["shape"]))


def _file_entry_ok(entry: Any) -> bool:
    return (isinstance(entry, dict) and isinstance(entry.get("sha256"), str)
            and isinstance(entry.get("size"), int))


# index.json field types (spec.index.INDEX_MANIFEST_FIELDS) -> (value, rule) -> whether it holds
_FIELD_CHECKS: dict[str, Callable[[Any, Any], bool]] = {
    "int": _int_ok,
    "enum": lambda v, rule: isinstance(v, str) and v in rule,
    "arrays": lambda v, _: isinstance(v, dict) and all(_array_entry_ok(k, e) for k, e in v.items()),
    "files": lambda v, _: isinstance(v, dict) and all(_file_entry_ok(e) for e in v.values()),
}


def check_layout(lay: Layout, where: str) -> None:
    """The arrays agree with each other (a hand-edited manifest cannot make search read past an end):
    spec.index.INDEX_ARRAY_RULES' names, dtypes and shapes, then the offsets, order and values."""
    need = array_dtypes(lay.dense_store, lay.colbert_store)
    bad = _names_and_shapes(lay, need)
    for check in (_colbert_bad, _sparse_bad, _values_bad):
        if bad:
            break
        bad = check(lay, need)
    if bad:
        raise CorruptIndexError(f"{where}: inconsistent arrays ({', '.join(bad)}); refusing a corrupt index")


def _names_and_shapes(lay: Layout, need: Mapping[str, str]) -> list[str]:
    """The arrays the stores use, and only those (a stray one was read here and ignored by the kits,
    issue 38), of their dtypes; those sized by rows and dim of their shape, the others of their rank."""
    a, n, d = lay.arrays, len(lay.ids), lay.dim
    missing = _missing(lay, need)
    sizes = {"rows": n, "rows+1": n + 1, "dim": d}
    shapes = {name: shape for name, _, _, shape in INDEX_ARRAY_RULES}
    want = {x: tuple(sizes[v] for v in s) for x, s in shapes.items() if all(v in sizes for v in s)}
    bad = missing or [x for x, s in want.items() if x in a and a[x].shape != s]
    # Every other array has its rank; a 0-D one has no length to check against.
    return bad + [x for x in need if x not in want and x in a and a[x].ndim != len(shapes[x])]


def _missing(lay: Layout, need: Mapping[str, str]) -> list[str]:
    """The arrays the stores need that are absent, stray ones, and those of another dtype."""
    a = lay.arrays
    missing = [x for x in need if x not in a]
    missing += [f"{x} unused by the {lay.dense_store}/{lay.colbert_store} stores" for x in a if x not in need]
    return missing + [f"{x} is {a[x].dtype.name}" for x in need if x in a and a[x].dtype.name != need[x]]


def _offsets_ok(off: np.ndarray, starts: int, end: int) -> bool:
    """spec.index.INDEX_OFFSETS: one more than the starts, from 0, never decreasing, to the end."""
    return off.shape == (starts + 1,) and off[0] == 0 and off[-1] == end and not (np.diff(off) < 0).any()


def _colbert_bad(lay: Layout, need: Mapping[str, str]) -> list[str]:
    """The ColBERT vectors: [V, dim], their offsets over them, a scale per vector."""
    a = lay.arrays
    if "colbert" not in need:
        return []
    v = a["colbert"].shape
    if v[1] != lay.dim or not _offsets_ok(np.asarray(a["colbert_offsets"]), len(lay.ids), v[0]) \
            or ("colbert_scale" in a and a["colbert_scale"].shape != (v[0],)):
        return ["colbert"]
    return []


def _sparse_bad(lay: Layout, need: Mapping[str, str]) -> list[str]:
    """The postings: offsets over them, a weight per posting, rows of the index, tokens strictly
    ascending (searched by bisection), each posting's rows strictly ascending."""
    a, n = lay.arrays, len(lay.ids)
    off, p = np.asarray(a["sparse_offsets"]), a["sparse_rows"].shape
    rows, tokens = np.asarray(a["sparse_rows"]), np.asarray(a["sparse_tokens"])
    if not _offsets_ok(off, len(tokens), p[0]) or a[_PW].shape != p \
            or (len(rows) and (rows.min() < 0 or rows.max() >= n)) \
            or (tokens[1:] <= tokens[:-1]).any():  # (np.diff of int32 wraps)
        return ["sparse"]
    if len(rows) > 1:  # a posting's rows strictly ascending, as `postings` writes them (issue 38:
        within = np.ones(len(rows) - 1, bool)  # a row twice in one was summed once here, twice by the kits)
        within[off[1:-1][(off[1:-1] > 0) & (off[1:-1] < len(rows))] - 1] = False
        if (within & (np.diff(rows) <= 0)).any():
            return ["sparse_rows"]
    return []


def _values_bad(lay: Layout, need: Mapping[str, str]) -> list[str]:
    """spec.index.INDEX_POSITIVE: scales are max|x| / 127 (> 0) and weights > 0: anything else is
    not ours (issue 38: a negative scale made an error bound negative and a row vanish from
    Python's hits only). Only the arrays the stores use: a stray one is ignored, as the kits do."""
    return [x for x in INDEX_POSITIVE if x in need and not _positive(lay.arrays[x])]


def _positive(x: np.ndarray) -> bool:
    """Every value finite and > 0 (read in blocks: the array may be memory-mapped)."""
    for start in range(0, len(x), 1 << 20):
        b = np.asarray(x[start:start + (1 << 20)], np.float32)
        if not (np.isfinite(b) & (b > 0)).all():
            return False
    return True


def _finite(x: np.ndarray) -> bool:
    """Every value finite (read in blocks: the array may be memory-mapped)."""
    step = max(1, (1 << 22) // max(1, int(np.prod(x.shape[1:]))))
    return all(np.isfinite(np.asarray(x[start:start + step])).all() for start in range(0, len(x), step))
