"""manifest.json: its types, read, written and validated here only (docs/bundle-format.md;
moved verbatim from contract.py's "manifest" section)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar

from edge_m3.errors import LINE_BREAKS, EdgeM3Error
from edge_m3.spec.names import (
    BPE_NORMALIZERS,
    BYTE_LEVEL_BPE,
    FORMATS,
    HEADS,
    MANIFEST,
    SCHEMA_VERSION,
    SENTENCEPIECE,
    SPECIAL_KEYS,
    TOKENIZER_KINDS,
    TOKENIZER_OPTIONS,
    VOCAB_MAP,
    XLMR_SENTENCEPIECE,
    XLMR_SPECIAL_TOKENS,
)
from edge_m3.spec.recipes import RENAMED, QuantRecipe, recipe

FILE_ENTRY_KEYS = ("sha256", "size")  # manifest.json `files.<name>`: hex digest (string), bytes (integer)
# A bundle file's name as manifest.json gives it (tokenizer.file, tokenizer.vocab_map.file,
# models[].file, extra_files and ort files, the keys of `files`) names a file in the bundle's own
# folder, never a path: "../x" or "/x" had every reader open a file outside the bundle that no
# sha256 covers (issue 38); nor holds a line break (LINE_BREAKS). Read by the kits'
# checkedFileName (EdgeM3Contract, generated).
NOT_FILE_NAMES = ("", ".", "..")
FILE_NAME_SEPARATORS = ("/", "\\")


def is_file_name(name: Any) -> bool:
    """`name` is a file name in the bundle's folder by the rule above (not a path, not `..`, no
    line break: every refusal that names the file stays one line)."""
    return isinstance(name, str) and name not in NOT_FILE_NAMES and not any(
        s in name for s in (*FILE_NAME_SEPARATORS, *LINE_BREAKS))


def file_name(name: Any, where: str) -> str:
    """`name` if it is a file name in the bundle (is_file_name), else one line naming `where`."""
    if not is_file_name(name):
        raise _bad(where, f"{name!r} is not a file name in the bundle (a name, not a path)")
    return name


def _bad(what: str, why: str) -> EdgeM3Error:
    return EdgeM3Error(f"{MANIFEST}: {what}: {why}")


def _typed(value: Any, kind: type | tuple[type, ...], what: str) -> Any:
    if isinstance(value, bool) and kind is not bool or not isinstance(value, kind):
        names = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise _bad(what, f"expected {names}, got {type(value).__name__}")
    return value


def _field(d: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str,
           default: Any = ...) -> Any:
    if key not in d:
        if default is ...:
            raise _bad(f"{where}.{key}" if where else key, "missing")
        return default
    return _typed(d[key], kind, f"{where}.{key}" if where else key)


@dataclass(frozen=True)
class TensorSpec:
    """One input or output of a signature, as the interpreter reports it."""

    name: str
    shape: list[int]
    dtype: str

    @classmethod
    def from_json(cls, d: Any, where: str) -> TensorSpec:
        _typed(d, dict, where)
        shape = [int(_typed(x, int, f"{where}.shape")) for x in _field(d, "shape", list, where)]
        return cls(_field(d, "name", str, where), shape, _field(d, "dtype", str, where))

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "shape": list(self.shape), "dtype": self.dtype}


@dataclass(frozen=True)
class Signature:
    """One fixed-length entry point of a model file."""

    name: str
    seq_len: int
    inputs: list[TensorSpec]
    outputs: list[TensorSpec]

    @classmethod
    def from_json(cls, d: Any, where: str) -> Signature:
        _typed(d, dict, where)
        return cls(_field(d, "name", str, where), _field(d, "seq_len", int, where),
                   [TensorSpec.from_json(x, f"{where}.inputs") for x in _field(d, "inputs", list, where)],
                   [TensorSpec.from_json(x, f"{where}.outputs")
                    for x in _field(d, "outputs", list, where)])

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "seq_len": self.seq_len,
                "inputs": [t.to_json() for t in self.inputs],
                "outputs": [t.to_json() for t in self.outputs]}


@dataclass(frozen=True)
class CheckResult:
    """One runtime's verdict on one model file (the build's self-check, `edge-m3 check`).

    The manifest keeps it as one line, `str(result)`: "ok (2.3.0, XNNPACK runs 9 of 9
    FULLY_CONNECTED)", "FAILED (2.14.0): Registration failed.", "not installed"; `parse` reads
    that line back, so nothing else takes the string apart.
    """

    status: str  # OK, FAILED or NOT_INSTALLED
    version: str | None = None  # the runtime's, when it ran
    detail: str = ""  # ok: what it also saw; FAILED: why

    OK: ClassVar[str] = "ok"
    FAILED: ClassVar[str] = "FAILED"
    NOT_INSTALLED: ClassVar[str] = "not installed"
    _OK_LINE: ClassVar[re.Pattern[str]] = re.compile(r"ok \(([^,()]*)(?:, (.*))?\)", re.DOTALL)
    _FAILED_LINE: ClassVar[re.Pattern[str]] = re.compile(r"FAILED \(([^()]*)\): (.*)", re.DOTALL)

    @classmethod
    def passed(cls, version: str, detail: str = "") -> CheckResult:
        return cls(cls.OK, version, detail)

    @classmethod
    def failed(cls, version: str | None, why: str) -> CheckResult:
        return cls(cls.FAILED, version, why)

    @property
    def ok(self) -> bool:
        return self.status == self.OK

    @property
    def is_failure(self) -> bool:
        """The runtime ran and failed (not installed is no failure)."""
        return self.status == self.FAILED

    def __str__(self) -> str:
        if self.status == self.OK:
            return f"ok ({self.version}{', ' + self.detail if self.detail else ''})"
        if self.status == self.FAILED:
            return f"FAILED ({self.version}): {self.detail}"
        return self.status

    @classmethod
    def parse(cls, line: str) -> CheckResult:
        """The manifest's line back as a result; ValueError for any other text."""
        if line == cls.NOT_INSTALLED:
            return cls(cls.NOT_INSTALLED)
        if m := cls._OK_LINE.fullmatch(line):
            return cls(cls.OK, m.group(1), m.group(2) or "")
        if m := cls._FAILED_LINE.fullmatch(line):
            return cls(cls.FAILED, m.group(1), m.group(2))
        raise ValueError(f"{line!r} is not 'ok (VERSION[, ...])', 'FAILED (VERSION): ...' or "
                         f"'{cls.NOT_INSTALLED}'")


def _check_results(d: Mapping[str, Any], where: str) -> dict[str, CheckResult]:
    out = {}
    for runtime, line in d.items():
        try:
            out[runtime] = CheckResult.parse(_typed(line, str, f"{where}.{runtime}"))
        except ValueError as exc:
            raise _bad(f"{where}.{runtime}", str(exc)) from None
    return out


@dataclass
class ModelEntry:
    """One model file of a bundle (TFLite or ONNX) and what the build learnt about it."""

    format: str
    file: str
    quant: str
    signatures: list[Signature]
    ops: Any = None  # TFLite: {op: version}; ONNX: [op types]
    oldest_runtime: dict[str, str] = field(default_factory=dict)
    self_check: dict[str, CheckResult] = field(default_factory=dict)  # by runtime name
    # ONNX only
    opset: int | None = None
    ir_version: int | None = None
    sequence_axis: str | None = None
    extra_files: list[str] = field(default_factory=list)
    ort: dict[str, Any] | None = None

    @property
    def seq_lens(self) -> list[int]:
        return sorted(s.seq_len for s in self.signatures)

    def files(self) -> list[str]:
        """Every file this entry ships: the model, its external data, its ORT copy."""
        ort = [self.ort[k] for k in ("file", "ops_config")] if self.ort else []
        return [self.file, *self.extra_files, *ort]

    @classmethod
    def from_json(cls, d: Any, where: str) -> ModelEntry:
        _typed(d, dict, where)
        fmt = _field(d, "format", str, where)
        if fmt not in FORMATS:
            raise _bad(f"{where}.format", f"{fmt!r} is not one of {', '.join(FORMATS)}")
        entry = cls(
            format=fmt, file=_field(d, "file", str, where), quant=_field(d, "quant", str, where),
            signatures=[Signature.from_json(s, f"{where}.signatures")
                        for s in _field(d, "signatures", list, where)],
            ops=d.get("ops"), oldest_runtime=dict(_field(d, "oldest_runtime", dict, where, {})),
            self_check=_check_results(_field(d, "self_check", dict, where, {}), f"{where}.self_check"),
            opset=_field(d, "opset", int, where, None), ir_version=_field(d, "ir_version", int, where, None),
            sequence_axis=_field(d, "sequence_axis", str, where, None),
            extra_files=list(_field(d, "extra_files", list, where, [])),
            ort=_field(d, "ort", dict, where, None))
        file_name(entry.file, f"{where}.file")
        for i, name in enumerate(entry.extra_files):
            file_name(name, f"{where}.extra_files[{i}]")
        for key in ("file", "ops_config") if entry.ort else ():
            file_name(entry.ort.get(key), f"{where}.ort.{key}")  # type: ignore[union-attr]
        return entry

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"ort": self.ort} if self.ort else {}
        out |= {"format": self.format, "file": self.file, "quant": self.quant}
        if self.format == "onnx":
            out |= {"opset": self.opset, "ir_version": self.ir_version}
        out["signatures"] = [s.to_json() for s in self.signatures]
        if self.format == "onnx":
            out["sequence_axis"] = self.sequence_axis
        if self.format == "tflite":
            out["ops"] = self.ops
        out |= {"oldest_runtime": dict(self.oldest_runtime),
                "self_check": {rt: str(res) for rt, res in self.self_check.items()}}
        if self.format == "onnx":
            out |= {"ops": self.ops, "extra_files": list(self.extra_files)}
        return out


@dataclass(frozen=True)
class TokenizerSpec:
    """How a bundle tokenizes, as recorded in the manifest: the kind, its file, the special ids.

    `xlmr-sentencepiece`: XLM-R's mapping from SentencePiece ids to model ids (`sp_unk_id`,
    `id_offset`). `wordpiece`: `file` is the vocabulary (one token a line) and `options` the
    normalizer and model settings (WORDPIECE_OPTIONS). `byte-level-bpe`: `file` is BPE_FILE and
    `options` BPE_OPTIONS. `special_tokens` are the strings that the
    reference turns into special ids wherever they occur in the input text (manifests without
    the key get XLM-R's)."""

    special_ids: Mapping[str, int]
    sp_unk_id: int = 0
    id_offset: int = 1
    vocab_size: int = 0
    vocab_map: Mapping[str, Any] | None = field(default=None)
    special_tokens: Mapping[str, str] = field(default_factory=lambda: dict(XLMR_SPECIAL_TOKENS))
    file: str = SENTENCEPIECE
    kind: str = XLMR_SENTENCEPIECE
    options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in TOKENIZER_KINDS:
            raise EdgeM3Error(f"{MANIFEST}: tokenizer kind {self.kind!r} unknown (known: "
                              f"{', '.join(TOKENIZER_KINDS)})")
        schema = TOKENIZER_OPTIONS.get(self.kind)
        if schema is not None:
            for key, kind in schema.items():
                value = self.options.get(key)
                if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
                    raise EdgeM3Error(f"{MANIFEST}: tokenizer options.{key} must be a "
                                      f"{kind.__name__}, got {value!r}")
            extra = sorted(set(self.options) - set(schema))
            if extra:
                raise EdgeM3Error(f"{MANIFEST}: tokenizer options.{extra[0]} unknown")
        if self.kind == BYTE_LEVEL_BPE and self.options["normalizer"] not in BPE_NORMALIZERS:
            raise EdgeM3Error(f"{MANIFEST}: tokenizer options.normalizer {self.options['normalizer']!r} "
                              f"unknown (known: {', '.join(map(repr, BPE_NORMALIZERS))})")

    @classmethod
    def from_manifest(cls, d: Mapping[str, Any]) -> TokenizerSpec:
        """The manifest's `tokenizer` object (docs/bundle-format.md)."""
        try:
            kind = str(d.get("kind", XLMR_SENTENCEPIECE))
            options = d.get("options") or {}
            if not isinstance(options, Mapping):
                raise TypeError(f"options must be an object, got {type(options).__name__}")
            special = {k: int(d["special_ids"][k]) for k in SPECIAL_KEYS}
            tokens = d.get("special_tokens") or XLMR_SPECIAL_TOKENS
            tokens = {k: str(tokens[k]) for k in SPECIAL_KEYS}
            vocab_map = d.get("vocab_map")
            if vocab_map is not None and not isinstance(vocab_map, Mapping):
                raise TypeError(f"vocab_map must be an object or null, got {type(vocab_map).__name__}")
            file = str(d.get("file", SENTENCEPIECE))
            spec = cls(special_ids=special, sp_unk_id=int(d["sp_unk_id"]),
                       id_offset=int(d["id_offset"]), vocab_size=int(d["vocab_size"]),
                       vocab_map=vocab_map, special_tokens=tokens,
                       file=file, kind=kind, options=dict(options))
        except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as exc:  # 1e999: int(inf)
            raise EdgeM3Error(f"{MANIFEST}: bad tokenizer entry ({exc!r})") from None
        file_name(file, "tokenizer.file")
        if vocab_map is not None:
            file_name(vocab_map.get("file"), "tokenizer.vocab_map.file")
        return spec

    def to_manifest(self) -> dict[str, Any]:
        out = {"file": self.file, "kind": self.kind, "special_ids": dict(self.special_ids),
               "special_tokens": dict(self.special_tokens),
               "sp_unk_id": self.sp_unk_id, "id_offset": self.id_offset,
               "vocab_size": self.vocab_size, "vocab_map": self.vocab_map}
        if self.kind != XLMR_SENTENCEPIECE:
            out["options"] = dict(self.options)
        return out

    @property
    def model_rows(self) -> int:
        """Rows of the bundled embedding table (a trimmed vocabulary keeps fewer)."""
        kept = (self.vocab_map or {}).get("kept")
        return int(kept) if isinstance(kept, int) else int(self.vocab_size)


@dataclass
class Manifest:
    """manifest.json: read, written and validated here only (docs/bundle-format.md)."""

    edge_m3_version: str
    created: str
    source: dict[str, Any]
    quant: str
    hidden_size: int
    max_length: int
    heads: list[str]
    tokenizer: TokenizerSpec
    models: list[ModelEntry]
    files: dict[str, dict[str, Any]] = field(default_factory=dict)
    schema_version: int = SCHEMA_VERSION

    @property
    def recipe(self) -> QuantRecipe:
        """The variant's recipe (bundles built under a renamed variant name get its new one)."""
        return recipe(RENAMED.get(self.quant, self.quant), f"{MANIFEST}: quant")

    @property
    def formats(self) -> set[str]:
        return {m.format for m in self.models}

    @property
    def seq_lens(self) -> list[int]:
        return sorted({n for m in self.models for n in m.seq_lens})

    def model(self, fmt: str | None = None) -> ModelEntry | None:
        """The entry for the model file of `fmt` (the first one when None)."""
        return next((m for m in self.models if fmt is None or m.format == fmt), None)

    def model_bytes(self, entry: ModelEntry) -> int:
        """A model's size as shipped: its file plus its extra files (ONNX external data)."""
        return sum(self.files[f]["size"] for f in [entry.file, *entry.extra_files])

    def shipped_files(self) -> list[str]:
        """Every file the models and the tokenizer bring (golden.json is added last)."""
        extra = [self.tokenizer.file]
        if self.tokenizer.vocab_map:
            extra.append(str(self.tokenizer.vocab_map.get("file", VOCAB_MAP)))
        return [f for m in self.models for f in m.files()] + extra

    @classmethod
    def from_json(cls, d: Any) -> Manifest:
        """Validate a parsed manifest.json; every problem is one line naming the field."""
        if not isinstance(d, dict) or d.get("schema_version") != SCHEMA_VERSION:
            raise EdgeM3Error(f"{MANIFEST}: unsupported schema_version (want {SCHEMA_VERSION})")
        heads = [str(h) for h in _field(d, "heads", list, "")]
        if not set(heads) <= set(HEADS):
            raise _bad("heads", f"{heads} not a subset of {list(HEADS)}")
        files = _field(d, "files", dict, "", {})
        for name, entry in files.items():
            file_name(name, "files")  # the name itself is shown with repr: one line
            digest, size = FILE_ENTRY_KEYS
            if not isinstance(entry, dict) or not isinstance(entry.get(digest), str) \
                    or not isinstance(entry.get(size), int):
                raise _bad(f"files.{name}", "needs sha256 (string) and size (integer)")
        return cls(
            edge_m3_version=str(d.get("edge_m3_version", "")), created=str(d.get("created", "")),
            source=dict(_field(d, "source", dict, "", {})), quant=_field(d, "quant", str, ""),
            hidden_size=_field(d, "hidden_size", int, ""), max_length=_field(d, "max_length", int, ""),
            heads=heads, tokenizer=TokenizerSpec.from_manifest(_field(d, "tokenizer", dict, "")),
            models=[ModelEntry.from_json(m, "models") for m in _field(d, "models", list, "")],
            files=files)

    def to_json(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        return {"schema_version": self.schema_version, **{k: v for k, v in out.items()
                                                         if k != "schema_version"}} | {
            "tokenizer": self.tokenizer.to_manifest(), "models": [m.to_json() for m in self.models]}

    @classmethod
    def read(cls, path: Path) -> Manifest:
        """Parse and validate `path` (a bundle's manifest.json)."""
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except OSError as exc:
            raise EdgeM3Error(f"{path}: cannot read ({exc.strerror})") from None
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:
            raise EdgeM3Error(f"{path}: not valid JSON ({exc})") from None
        try:
            return cls.from_json(data)
        except EdgeM3Error as exc:
            raise EdgeM3Error(str(exc).replace(MANIFEST, str(path), 1)) from None
