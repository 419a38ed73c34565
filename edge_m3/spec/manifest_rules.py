"""manifest.json's validation rules as data: per object, its keys in the order they are checked,
each key's JSON type, required or its default, the values it may take, whether it names a file.

Read by the Python readers (spec/manifest.py, through `read_object`) and by the kits' generator
(tools/codegen/kit_manifest.py: the kits' manifest types take each key's type and presence from
here), so that a rule is written once. Messages are one line naming the field:
"manifest.json: models.file: missing".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from edge_m3.errors import LINE_BREAKS, EdgeM3Error
from edge_m3.spec.names import FORMATS, HEADS, MANIFEST

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
        raise bad(where, f"{name!r} is not a file name in the bundle (a name, not a path)")
    return name


def bad(what: str, why: str) -> EdgeM3Error:
    """The manifest's one-line refusal of field `what`."""
    return EdgeM3Error(f"{MANIFEST}: {what}: {why}")


def typed(value: Any, kind: type | tuple[type, ...], what: str) -> Any:
    """`value` if it is a `kind` (true and false are no integer), else one line naming `what`."""
    if isinstance(value, bool) and kind is not bool or not isinstance(value, kind):
        names = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise bad(what, f"expected {names}, got {type(value).__name__}")
    return value


REQUIRED: Any = ...  # a Rule's default when the key must be present
ANY = object  # a Rule's type when any JSON value is kept as it is (`ops`)
_TYPE_WORDS = {str: "string", int: "integer"}  # a map entry's key types, in its message


@dataclass(frozen=True)
class Rule:
    """One key of a manifest object."""

    key: str
    type: type  # str, int, bool, list, dict, or ANY
    default: Any = REQUIRED  # the value when the key is absent; REQUIRED: refused as missing
    text: bool = False  # informational: any value, read as text (`str(value)`), never refused
    one_of: tuple[str, ...] = ()  # a string that must be one of these
    subset_of: tuple[str, ...] = ()  # a list whose items, as text, must be among these
    items: type | None = None  # a list whose every item has this type
    # A map of file name -> object with these keys (each of its type): `files`.
    entries: tuple[Rule, ...] = ()
    # Where the value names bundle files, checked once every key's type is (is_file_name):
    # ("",) the value itself, ("[]",) each item, or keys of the object (when it is not empty).
    file_names: tuple[str, ...] = ()


def _path(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def get_field(d: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str,
              default: Any = REQUIRED) -> Any:
    """`d[key]` of type `kind`; absent: `default`, or refused as missing."""
    if key not in d:
        if default is REQUIRED:
            raise bad(_path(where, key), "missing")
        return default
    return typed(d[key], kind, _path(where, key))


def _checked(d: Mapping[str, Any], rule: Rule, where: str) -> Any:
    """One key by its rule: type, presence, allowed values, items, map entries."""
    if rule.text:
        return str(d.get(rule.key, rule.default))
    if rule.type is ANY:
        return d.get(rule.key, None if rule.default is REQUIRED else rule.default)
    value = get_field(d, rule.key, rule.type, where, rule.default)
    if rule.one_of and value not in rule.one_of:
        raise bad(_path(where, rule.key), f"{value!r} is not one of {', '.join(rule.one_of)}")
    if rule.subset_of:
        value = [str(v) for v in value]
        if not set(value) <= set(rule.subset_of):
            raise bad(_path(where, rule.key), f"{value} not a subset of {list(rule.subset_of)}")
    if rule.items is not None:
        value = [typed(x, rule.items, _path(where, rule.key)) for x in value]
    if rule.entries:
        needs = " and ".join(f"{e.key} ({_TYPE_WORDS[e.type]})" for e in rule.entries)
        for name, entry in value.items():
            file_name(name, rule.key)  # the name itself is shown with repr: one line
            if not isinstance(entry, dict) or \
                    not all(isinstance(entry.get(e.key), e.type) for e in rule.entries):
                raise bad(f"{_path(where, rule.key)}.{name}", f"needs {needs}")
    return value


def read_object(d: Mapping[str, Any], rules: tuple[Rule, ...], where: str,
                parse: Mapping[str, Callable[[Any], Any]] | None = None) -> dict[str, Any]:
    """The object's keys checked by `rules` in their order, each value then through `parse[key]`
    when given (a nested object's reader), and then the file names they hold (Rule.file_names)."""
    out = {}
    for rule in rules:
        value = _checked(d, rule, where)
        out[rule.key] = parse[rule.key](value) if parse and rule.key in parse else value
    for rule in rules:
        value = out[rule.key]
        for at in rule.file_names:
            if at == "":
                file_name(value, _path(where, rule.key))
            elif at == "[]":
                for i, name in enumerate(value):
                    file_name(name, f"{_path(where, rule.key)}[{i}]")
            elif value:
                file_name(value.get(at), f"{_path(where, rule.key)}.{at}")
    return out


# ------------------------------------------------------------------------------- the rule tables
# Each object's keys in the order a reader checks them (the first problem is the one reported).

TENSOR_RULES = (Rule("shape", list, items=int), Rule("name", str), Rule("dtype", str))
SIGNATURE_RULES = (Rule("name", str), Rule("seq_len", int), Rule("inputs", list), Rule("outputs", list))
MODEL_RULES = (
    Rule("format", str, one_of=FORMATS), Rule("file", str, file_names=("",)), Rule("quant", str),
    Rule("signatures", list), Rule("ops", ANY), Rule("oldest_runtime", dict, {}),
    Rule("self_check", dict, {}),  # runtime -> CheckResult's one line
    Rule("opset", int, None), Rule("ir_version", int, None), Rule("sequence_axis", str, None),
    Rule("extra_files", list, [], file_names=("[]",)),
    Rule("ort", dict, None, file_names=("file", "ops_config")),
)
FILE_ENTRY_RULES = (Rule(FILE_ENTRY_KEYS[0], str), Rule(FILE_ENTRY_KEYS[1], int))
# The root: schema_version first, alone (it must be SCHEMA_VERSION: a manifest of another schema
# is refused whole), then the others; `tokenizer` is TokenizerSpec.from_manifest's.
SCHEMA_RULE = Rule("schema_version", int)
MANIFEST_RULES = (
    Rule("heads", list, subset_of=HEADS), Rule("files", dict, {}, entries=FILE_ENTRY_RULES),
    Rule("edge_m3_version", str, "", text=True), Rule("created", str, "", text=True),
    Rule("source", dict, {}), Rule("quant", str), Rule("hidden_size", int), Rule("max_length", int),
    Rule("tokenizer", dict), Rule("models", list),
)
# Each table by the dataclass that reads it (the kits' generator looks a kit type's keys up here).
RULES = {"TensorSpec": TENSOR_RULES, "Signature": SIGNATURE_RULES, "ModelEntry": MODEL_RULES,
         "FileEntry": FILE_ENTRY_RULES, "Manifest": (SCHEMA_RULE, *MANIFEST_RULES)}
