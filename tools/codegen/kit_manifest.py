"""The kits' manifest types (Kotlin Manifest.kt, Swift Manifest.swift), written from one table.

The table names, per kit type, its properties and the manifest.json keys they read; every key is
checked against edge_m3/spec/manifest.py (the dataclass fields of Manifest, ModelEntry, Signature,
TensorSpec, TokenizerSpec; SPECIAL_KEYS; FILE_ENTRY_KEYS), so a renamed manifest field breaks the
generator, not a phone. What the types *do* beyond holding and reading fields (the schema check,
sorting and checking signatures, the special-token strings) is hand-written in each kit
(ManifestRules.kt / ManifestRules.swift) and called by name from here (`hook`).
`python -m tools.codegen.gen_kit_contract` writes both files; `--check` compares them.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from edge_m3 import spec as c


@dataclass(frozen=True)
class Field:
    """One property. kind: String, Int, Int64, Bool, [Int], [String], [Type], {Type} (a JSON object
    of Type by name), Type, Type? (an object, or null / absent), or file? (an object {"file": ...}
    or null, read as its file name)."""

    prop: str
    key: str
    kind: str
    # None: required; "empty": [], {}, "" when absent; "hook": see hook; "absent": `absent` when
    # the key is missing (null is refused).
    default: str | None = None
    hook: str | None = None  # a kit function that checks / completes the decoded value
    doc: str = ""
    absent: str | None = None  # default "absent": the contract constant (its name) a missing key means
    # Read only for some kinds (an optional object): "NAME" when the type's `kind` is the contract
    # constant NAME, "!NAME" when it is not; fields sharing a key then each read it for their kinds.
    when: str | None = None


@dataclass(frozen=True)
class KitType:
    name: str
    doc: str
    source: tuple[str, ...]  # the JSON keys this type may read (from spec/manifest.py)
    fields: tuple[Field, ...]
    mutable: bool = True  # Swift `var` (else `let`)
    init_hook: str | None = None  # a property the memberwise init checks: `hook(value, file)` throws


def _keys(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in fields(cls))


def _default(cls: type, key: str, name: str) -> str:
    """`name`, the contract constant that is the dataclass field's default (what a manifest without
    the key means); the kits read it from the generated EdgeM3Contract."""
    (f,) = [f for f in fields(cls) if f.name == key]
    if getattr(c, name) != f.default:
        raise SystemExit(f"kit manifest: {cls.__name__}.{key} defaults to {f.default!r}, not {name}")
    return name


def camel(name: str) -> str:
    """lower_snake or UPPER_SNAKE -> lowerCamel (Swift's names; Kotlin properties)."""
    head, *rest = name.lower().split("_")
    return head + "".join(p.capitalize() for p in rest)


# WORDPIECE_OPTIONS' and BPE_OPTIONS' Python types -> the table's kinds.
_OPTION_KINDS = {bool: "Bool", str: "String", int: "Int"}


TYPES = (
    KitType("SpecialIds", "The five special tokens' ids: all required (EdgeM3Contract.SPECIAL_KEYS).",
            c.SPECIAL_KEYS, tuple(Field(k, k, "Int") for k in c.SPECIAL_KEYS)),
    KitType("TokenizerSpec", "The manifest's `tokenizer` entry: the kind, its file (sentencepiece.bpe.model, "
            "vocab.txt, bpe.json), the special ids and strings; EdgeM3Tokenizer.open picks the class by kind.",
            _keys(c.TokenizerSpec), (
                Field("file", "file", "String", hook="checkedFileName"),
                Field("special", "special_ids", "SpecialIds"),
                Field("specialTokens", "special_tokens", "tokens", "hook", "checkedSpecialTokens",
                      "The strings the reference turns into special ids wherever the text holds them; "
                      "absent or null: XLM-R's (as edge_m3/spec/manifest.py)."),
                Field("spUnkId", "sp_unk_id", "Int"),
                Field("idOffset", "id_offset", "Int"),
                Field("vocabSize", "vocab_size", "Int"),
                Field("vocabMapFile", "vocab_map", "file?", hook="checkedFileName",
                      doc="`vocab_map.file`: the trimmed vocabulary's row map, null for the full vocabulary."),
                Field("kind", "kind", "String", "absent", "checkedTokenizerKind",
                      "How the bundle tokenizes (EdgeM3Contract.TOKENIZER_KINDS); absent: "
                      f"{c.XLMR_SENTENCEPIECE}.",
                      absent=_default(c.TokenizerSpec, "kind", "XLMR_SENTENCEPIECE")),
                Field("options", "options", "WordPieceOptions?", doc="A `wordpiece` tokenizer's settings "
                      "(required for that kind; never read for `byte-level-bpe`).", when="!BYTE_LEVEL_BPE"),
                Field("bpeOptions", "options", "BpeOptions?", doc="A `byte-level-bpe` tokenizer's settings, "
                      "the same manifest key (required for that kind, null for the others).",
                      when="BYTE_LEVEL_BPE"))),
    KitType("WordPieceOptions", "A WordPiece tokenizer's settings (EdgeM3Contract's WORDPIECE_OPTIONS): "
            "BertNormalizer, BertPreTokenizer and WordPiece as `tokenizers` names them; all required.",
            tuple(c.WORDPIECE_OPTIONS), tuple(Field(camel(k), k, _OPTION_KINDS[t])
                                              for k, t in c.WORDPIECE_OPTIONS.items())),
    KitType("BpeOptions", "A byte-level BPE tokenizer's settings (EdgeM3Contract's BPE_OPTIONS): the "
            "normalizer (\"\" or NFC), ByteLevel and BPE as `tokenizers` names them; all required.",
            tuple(c.BPE_OPTIONS),
            tuple(Field(camel(k), k, _OPTION_KINDS[t]) for k, t in c.BPE_OPTIONS.items())),
    KitType("TensorSpec", "One input or output of a signature, as the interpreter reports it.",
            _keys(c.TensorSpec), (Field("name", "name", "String"), Field("shape", "shape", "[Int]"),
                                  Field("dtype", "dtype", "String"))),
    KitType("Signature", "One fixed-length entry point of the model (`embed_<L>`).", _keys(c.Signature), (
        Field("name", "name", "String"), Field("seqLen", "seq_len", "Int"),
        Field("inputs", "inputs", "[TensorSpec]", "empty"),
        Field("outputs", "outputs", "[TensorSpec]", "empty"))),
    KitType("ModelEntry", "One model file of the bundle; its signatures sorted by length, never empty.",
            _keys(c.ModelEntry), (
                Field("format", "format", "String"), Field("file", "file", "String", hook="checkedFileName"),
                Field("quant", "quant", "String", "empty"), Field("signatures", "signatures", "[Signature]")),
            mutable=False, init_hook="signatures:checkedSignatures"),
    KitType("FileEntry", "A shipped file's SHA-256 (lowercase hex) and size in bytes.", c.FILE_ENTRY_KEYS,
            (Field("sha256", c.FILE_ENTRY_KEYS[0], "String"), Field("size", c.FILE_ENTRY_KEYS[1], "Int64"))),
    KitType("Manifest",
            "manifest.json: the fields the kit reads (others, e.g. `source` or `ops`, are ignored).",
            _keys(c.Manifest), (
                Field("schemaVersion", "schema_version", "Int", hook="checkedSchemaVersion"),
                Field("quant", "quant", "String"), Field("hiddenSize", "hidden_size", "Int"),
                Field("maxLength", "max_length", "Int"), Field("heads", "heads", "[String]"),
                Field("tokenizer", "tokenizer", "TokenizerSpec"), Field("models", "models", "[ModelEntry]"),
                Field("files", "files", "{FileEntry}", "empty", "checkedFileNames")), mutable=False),
)


def quote(s: str | None) -> str:
    """A string literal in both languages."""
    assert s is not None
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def check_against_contract() -> None:
    """Every key a kit reads is one spec/manifest.py defines."""
    for t in TYPES:
        for f in t.fields:
            if f.key not in t.source:
                raise SystemExit(f"kit manifest type {t.name}.{f.prop}: key {f.key!r} is not in "
                                 "edge_m3/spec/manifest.py "
                                 f"({', '.join(t.source)})")


# ---------------------------------------------------------------------------------------- Kotlin

def _kt_type(kind: str) -> str:
    return {"String": "String", "Int": "Int", "Int64": "Long", "Bool": "Boolean", "[Int]": "IntArray",
            "[String]": "List<String>", "tokens": "SpecialTokens", "file?": "String?"}.get(kind) or (
        f"List<{kind[1:-1]}>" if kind.startswith("[") else f"Map<String, {kind[1:-1]}>" if kind.startswith("{")
        else kind)


def _kt_read(f: Field, tree: str, where: str) -> str:
    """Kotlin expression reading field `f` of the JSON object `tree` (`where`: the message prefix)."""
    path = f"{where} {f.key}" if where.endswith(":") else f"{where}.{f.key}"
    w = f'"{path}"'
    at = "where" if where.rstrip(":") == "$where" else f'"{where.rstrip(":")}"'
    optional = f.default or f.kind.endswith("?")
    raw = f'{tree}["{f.key}"]' if optional else f'JsonTree.field({tree}, "{f.key}", {at})'
    k = f.kind
    if k in ("String", "Int", "Bool"):
        read = f"JsonTree.{ {'String': 'str', 'Int': 'int', 'Bool': 'bool'}[k] }({raw}, {w})"
    elif k == "Int64":
        read = f"JsonTree.long({raw}, {w})"
    elif k == "[Int]":
        read = f"JsonTree.ints({raw}, {w})"
    elif k == "[String]":
        read = f'JsonTree.list({raw}, {w}).mapIndexed {{ i, x -> JsonTree.str(x, "{path}[$i]") }}'
    elif k.startswith("["):
        read = (f'JsonTree.list({raw}, {w}).mapIndexed {{ i, x -> {k[1:-1]}.fromJson(x, "{path}[$i]") }}')
    elif k.startswith("{"):
        read = (f'JsonTree.obj({raw}, {w}).entries.associate {{ (name, x) -> '
                f'name to {k[1:-1]}.fromJson(x, "{path}.$name") }}')
    elif k == "tokens":
        read = f"{f.hook}({raw}, {w})"
    elif k == "file?":
        read = (f'{raw}?.let {{ JsonTree.str(JsonTree.field(JsonTree.obj(it, {w}), "file", {w}), '
                f'"{path}.file") }}')
    elif k.endswith("?"):
        if f.when:
            op = "!=" if f.when.startswith("!") else "=="
            raw = f'{raw}?.takeIf {{ {tree}["kind"] {op} EdgeM3Contract.{f.when.lstrip("!")} }}'
        read = f"{raw}?.let {{ {k[:-1]}.fromJson(it, {w}) }}"
    else:
        read = f"{k}.fromJson({raw}, {w})"
    if f.default == "absent":
        read = f'if ({tree}.containsKey("{f.key}")) {read} else EdgeM3Contract.{f.absent}'
    if f.default == "empty" and k != "tokens":
        empty = {"String": '""'}.get(k) or ("emptyList()" if k.startswith("[") else "emptyMap()")
        read = f'if ({raw} == null) {empty} else {read}'
    if f.hook and k != "tokens":
        read = f"{f.hook}({read}, {w})"
    return read


def kotlin_manifest(header: str) -> str:
    check_against_contract()
    out = [f"// {header}",
           "// The manifest types' rules (schema, signatures, special-token strings): ManifestRules.kt.",
           "package dev.edgem3", ""]
    for t in TYPES:
        hook_prop, _, hook = (t.init_hook or ":").partition(":")
        params = []
        for f in t.fields:
            default = (" = SpecialTokens.XLMR" if f.kind == "tokens" else f" = EdgeM3Contract.{f.absent}"
                       if f.default == "absent" else " = null" if f.kind.endswith("?") else "")
            val = "" if f.prop == hook_prop else "val "
            params.append(f"    {val}{f.prop}: {_kt_type(f.kind)}{default}")
        out += [f"/** {t.doc} */", f"class {t.name}(", ",\n".join(params), ") {"]
        if hook:
            f = next(f for f in t.fields if f.prop == hook_prop)
            out += [f"    val {f.prop}: {_kt_type(f.kind)} = {hook}({f.prop}, file)", ""]
        where = "EdgeM3Contract.MANIFEST" if t.name == "Manifest" else '"${EdgeM3Contract.MANIFEST}: ' + (
            "tokenizer" if t.name == "TokenizerSpec" else t.name) + '"'
        out += ["    companion object {",
                f"        /** Reads and checks one `{t.name}` of parsed JSON; errors name `where` and the "
                "key. */",
                f'        fun fromJson(tree: Any?, where: String = {where}): {t.name} {{',
                '            val t = JsonTree.obj(tree, where)',
                f"            return {t.name}("]
        # The root's keys read "manifest.json: models[0].file", nested ones "<where>.file".
        reads = [_kt_read(f, "t", "$where:" if t.name == "Manifest" else "$where") for f in t.fields]
        out.append(",\n".join(f"                {r}" for r in reads))
        out += ["            )", "        }", "    }", "}", ""]
    return "\n".join(out)


# ----------------------------------------------------------------------------------------- Swift

def _sw_type(kind: str) -> str:
    return {"String": "String", "Int": "Int", "Int64": "Int64", "Bool": "Bool", "[Int]": "[Int]",
            "[String]": "[String]", "tokens": "[String: String]", "file?": "String?"}.get(kind) or (
        f"[String: {kind[1:-1]}]" if kind.startswith("{") else kind)


def _sw_default(f: Field) -> str:
    if f.kind == "tokens":
        return "TokenizerSpec.xlmrSpecialTokens"
    if f.kind.endswith("?"):
        return "nil"
    if f.default == "absent":
        return f"EdgeM3Contract.{camel(f.absent or '')}"
    if f.default == "empty":
        return '""' if f.kind == "String" else "[:]" if f.kind.startswith("{") else "[]"
    return ""


def swift_manifest(header: str) -> str:
    check_against_contract()
    out = [f"// {header}",
           "// The manifest types' rules (schema, signatures, special-token strings): ManifestRules.swift.",
           "", "import Foundation", ""]
    for t in TYPES:
        hook_prop, _, hook = (t.init_hook or ":").partition(":")
        throws = " throws" if hook else ""
        out += [f"/// {t.doc}", f"nonisolated public struct {t.name}: Codable, Hashable, Sendable {{"]
        for f in t.fields:
            if f.doc:
                out.append(f"    /// {f.doc}")
            out.append(f"    public {'var' if t.mutable else 'let'} {f.prop}: {_sw_type(f.kind)}")
        params = []
        for f in t.fields:
            d = _sw_default(f)
            # Keep today's call shapes: defaults only where the kit always had them.
            use_default = d and (f.kind == "tokens" or f.kind.endswith("?") or f.default == "absent"
                                 or t.name == "Signature")
            params.append(f"{f.prop}: {_sw_type(f.kind)}{' = ' + d if use_default else ''}")
        out += ["", f"    public init({', '.join(params)}){throws} {{"]
        for f in t.fields:
            value = f"try {hook}({f.prop}, file: file)" if f.prop == hook_prop else f.prop
            out.append(f"        self.{f.prop} = {value}")
        out += ["    }", "", "    enum CodingKeys: String, CodingKey {"]
        case: dict[str, str] = {}  # key -> its CodingKeys case (the first field reading it)
        for f in t.fields:
            if f.key not in case:
                case[f.key] = f.prop
                out.append(f'        case {f.prop} = "{f.key}"' if f.prop != f.key
                           else f"        case {f.prop}")
        out += ["    }", "", "    public init(from decoder: Decoder) throws {",
                "        let c = try decoder.container(keyedBy: CodingKeys.self)"]
        for f in t.fields:
            key = f"CodingKeys.{f.prop}"
            if f.kind == "file?":
                read = f"try c.decodeIfPresent(FileRef.self, forKey: .{f.prop})?.file"
            elif f.kind.endswith("?") and f.when:
                op = "!=" if f.when.startswith("!") else "=="
                read = (f"try kind {op} EdgeM3Contract.{camel(f.when.lstrip('!'))} ? "
                        f"c.decodeIfPresent({f.kind[:-1]}.self, forKey: .{case[f.key]}) : nil")
            elif f.kind.endswith("?"):
                read = f"try c.decodeIfPresent({f.kind[:-1]}.self, forKey: .{f.prop})"
            elif f.default == "absent":  # absent: the contract's default; null: refused
                read = (f"try c.contains(.{f.prop}) ? c.decode({_sw_type(f.kind)}.self, forKey: .{f.prop}) "
                        f": {_sw_default(f)}")
            elif f.kind == "tokens":
                read = (f"try {f.hook}(c.decodeIfPresent({_sw_type(f.kind)}.self, forKey: .{f.prop}), "
                        f"at: c.codingPath + [{key}])")
            elif f.default == "empty":
                read = f"try c.decodeIfPresent({_sw_type(f.kind)}.self, forKey: .{f.prop}) ?? {_sw_default(f)}"
            else:
                read = f"try c.decode({_sw_type(f.kind)}.self, forKey: .{f.prop})"
            if f.hook and f.kind != "tokens":
                read = f"try {f.hook}({read})"
            out.append(f"        let {f.prop} = {read}")
        args = ", ".join(f"{f.prop}: {f.prop}" for f in t.fields)
        out += [f"        {'try ' if hook else ''}self.init({args})", "    }", "",
                "    public func encode(to encoder: Encoder) throws {",
                "        var c = encoder.container(keyedBy: CodingKeys.self)"]
        for f in t.fields:
            if f.kind == "file?":
                out.append(f"        try c.encode({f.prop}.map {{ FileRef(file: $0) }}, forKey: .{f.prop})"
                           "  // null when absent")
            elif f.kind.endswith("?"):
                out.append(f"        try c.encodeIfPresent({f.prop}, forKey: .{case[f.key]})")
            else:
                out.append(f"        try c.encode({f.prop}, forKey: .{f.prop})")
        out += ["    }", "}", ""]
    out += ['/// `{"file": ...}`: how the manifest names a side file (`tokenizer.vocab_map`).',
            "nonisolated struct FileRef: Codable { var file: String }", ""]
    return "\n".join(out)
