"""The typed contract and the layout: one definition of each name, a manifest that validates,
generated kit copies that are current, no import cycles, no TensorFlow on the runtime path."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from edge_m3 import spec as c
from edge_m3.errors import EdgeM3Error

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "edge_m3"


def _manifest() -> dict:
    sig = {"name": "embed_8", "seq_len": 8,
           "inputs": [{"name": n, "shape": [1, 8], "dtype": "int32"} for n in c.INPUTS],
           "outputs": [{"name": c.DENSE_VECS, "shape": [1, 32], "dtype": "float32"}]}
    return {"schema_version": 1, "edge_m3_version": "0.1.0", "created": "2026-11-23T00:00:00Z",
            "source": {"id": "x"}, "quant": "int8", "hidden_size": 32, "max_length": 8,
            "heads": ["dense"],
            "tokenizer": {"file": c.SENTENCEPIECE, "kind": "xlmr-sentencepiece",
                          "special_ids": {"bos": 0, "pad": 1, "eos": 2, "unk": 3, "mask": 401},
                          "special_tokens": dict(c.XLMR_SPECIAL_TOKENS), "sp_unk_id": 0, "id_offset": 1,
                          "vocab_size": 402, "vocab_map": None},
            "models": [{"format": "tflite", "file": "model_int8.tflite", "quant": "int8",
                        "signatures": [sig], "ops": {"FULLY_CONNECTED": 9},
                        "oldest_runtime": {"tflite-runtime": "2.14.0"}, "self_check": {}}],
            "files": {"model_int8.tflite": {"sha256": "0" * 64, "size": 10}}}


def test_manifest_round_trips() -> None:
    data = _manifest()
    m = c.Manifest.from_json(data)
    assert m.models[0].signatures[0].seq_len == 8 and m.tokenizer.special_ids["mask"] == 401
    assert m.to_json() == data
    assert list(m.to_json()) == list(data)  # the key order of the file is kept too
    assert m.recipe is c.RECIPES["int8"] and m.seq_lens == [8] and m.formats == {"tflite"}


@pytest.mark.parametrize(("edit", "needle"), [
    (lambda d: d.update(schema_version=2), "unsupported schema_version"),
    (lambda d: d.pop("quant"), "manifest.json: quant: missing"),
    (lambda d: d.update(hidden_size="32"), "manifest.json: hidden_size: expected int"),
    (lambda d: d.update(heads=["dense", "bogus"]), "manifest.json: heads"),
    (lambda d: d["models"][0].update(format="coreml"), "models.format"),
    (lambda d: d["models"][0]["signatures"][0].pop("seq_len"), "signatures.seq_len: missing"),
    (lambda d: d["tokenizer"]["special_ids"].pop("mask"), "bad tokenizer entry"),
    (lambda d: d["files"].update(x={"sha256": 1}), "files.x"),
])
def test_manifest_errors_name_the_field(edit, needle: str) -> None:
    data = _manifest()
    edit(data)
    with pytest.raises(EdgeM3Error, match=needle.replace(".", r"\.")) as exc:
        c.Manifest.from_json(data)
    assert "\n" not in str(exc.value)


def test_manifest_read_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps({**_manifest(), "max_length": None}))
    with pytest.raises(EdgeM3Error, match=f"{path}: max_length: expected int"):
        c.Manifest.read(path)


def test_every_variant_is_complete() -> None:
    """Each registered variant has a recipe per format that the exporters know, thresholds the
    gate accepts and a device tolerance."""
    from edge_m3.export.aeq import AEQ_RECIPES, STATIC_RECIPES
    from edge_m3.export.onnx import CALIBRATED_ONNX_RECIPES, ONNX_RECIPES
    from edge_m3.export.tflite import CONVERTER_RECIPES
    from edge_m3.lab.metrics import check_limits

    registries = {c.TFLITE_CONVERTER: CONVERTER_RECIPES, c.AI_EDGE_QUANTIZER: {**AEQ_RECIPES, **STATIC_RECIPES}}
    assert c.QUANTS == ("fp32", "fp16", "int8", "int8-tflite214", "int4", "int16x8")
    for r in c.RECIPES.values():
        assert r.tflite.name in registries[r.tflite.tool], (r.name, r.tflite)
        onnx_registry = CALIBRATED_ONNX_RECIPES if r.onnx and r.onnx.calibrated else ONNX_RECIPES
        assert r.onnx is None or (r.onnx.tool == c.ONNX_EXPORTER and r.onnx.name in onnx_registry), r.name
        assert check_limits(r.thresholds, r.name) == r.thresholds
        assert 0 < r.device_tolerance.dense_cosine_min < 1 and r.device_tolerance.max_abs > 0
        assert r.min_size(1000) < r.estimated_size(1000)
        assert r.tflite.calibrated == (r.tflite.name in STATIC_RECIPES), r.name
        assert r.calibrated == (r.tflite.calibrated or bool(r.onnx and r.onnx.calibrated)), r.name
    with pytest.raises(EdgeM3Error, match="quant int3: unknown"):
        c.recipe("int3", "quant")
    with pytest.raises(EdgeM3Error, match="quant int8pc: renamed to int8"):
        c.recipe("int8pc", "quant")
    assert c.RECIPES["int8"].thresholds == c.RECIPES["int8-tflite214"].thresholds  # one gate


def test_kit_manifest_types_follow_the_contract(monkeypatch: pytest.MonkeyPatch) -> None:
    """Manifest.kt / Manifest.swift read exactly the keys spec/manifest.py defines: every kit type's keys
    are contract fields, the generated files name each key, and a key the contract lacks (a renamed
    manifest field) stops the generator."""
    import dataclasses

    from tools.codegen import gen_kit_contract, kit_manifest

    kotlin = gen_kit_contract.KOTLIN_MANIFEST.read_text(encoding="utf-8")
    swift = gen_kit_contract.SWIFT_MANIFEST.read_text(encoding="utf-8")
    for t in kit_manifest.TYPES:
        assert f"class {t.name}(" in kotlin and f"public struct {t.name}: Codable" in swift
        for f in t.fields:
            in_swift = f'"{f.key}"' in swift or f"case {f.key}\n" in swift  # `case bos`: key = name
            assert f'"{f.key}"' in kotlin and in_swift, (t.name, f.key)
    assert [f.key for f in kit_manifest.TYPES[0].fields] == list(c.SPECIAL_KEYS)
    renamed = dataclasses.replace(kit_manifest.TYPES[-1],
                                  fields=(kit_manifest.Field("quant", "quantization", "String"),))
    monkeypatch.setattr(kit_manifest, "TYPES", (renamed,))
    with pytest.raises(SystemExit, match="key 'quantization' is not in edge_m3/spec/manifest.py"):
        kit_manifest.kotlin_manifest("header")


def test_manifest_rules_cover_every_field() -> None:
    """spec.RULES is the one table of each object's keys: every dataclass field the manifest
    holds has a rule (the tokenizer entry aside: TokenizerSpec.from_manifest), and no rule names a
    key the dataclass lacks."""
    import dataclasses

    for name, rules in c.RULES.items():
        keys = {r.key for r in rules}
        assert len(keys) == len(rules), name
        if name == "FileEntry":
            assert tuple(keys) == c.FILE_ENTRY_KEYS or keys == set(c.FILE_ENTRY_KEYS)
            continue
        assert keys == {f.name for f in dataclasses.fields(getattr(c, name))}, name


def test_kit_manifest_types_follow_the_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    """The kits' manifest types take each key's type and presence from spec.RULES: a kit default
    on a key the rule requires must be marked lenient, a kind must read the rule's JSON type, and
    a changed rule stops the generator."""
    import dataclasses

    from tools.codegen import kit_manifest

    kinds = {(t.name, f.key): f.kind for t in kit_manifest.check_against_contract() for f in t.fields}
    assert kinds[("Manifest", "hidden_size")] == "Int" and kinds[("TensorSpec", "shape")] == "[Int]"
    assert kinds[("Manifest", "heads")] == "[String]"
    types = kit_manifest.TYPES
    model = next(t for t in types if t.name == "ModelEntry")
    strict = dataclasses.replace(model, fields=tuple(dataclasses.replace(f, lenient=False)
                                                     for f in model.fields))
    monkeypatch.setattr(kit_manifest, "TYPES", (strict,))
    with pytest.raises(SystemExit, match="ModelEntry.quant: key 'quant': required by its rule"):
        kit_manifest.kotlin_manifest("header")
    monkeypatch.setattr(kit_manifest, "TYPES", types)
    monkeypatch.setitem(c.RULES, "Signature", tuple(
        dataclasses.replace(r, type=dict) if r.key == "inputs" else r for r in c.SIGNATURE_RULES))
    with pytest.raises(SystemExit, match=r"kind \[TensorSpec\] does not read the rule's dict"):
        kit_manifest.swift_manifest("header")
    monkeypatch.setitem(c.RULES, "Signature", c.SIGNATURE_RULES[1:])  # a key without its rule
    with pytest.raises(SystemExit, match="Signature.name: key 'name' has no rule"):
        kit_manifest.kotlin_manifest("header")


def test_names_are_spelled_only_in_the_contract() -> None:
    """Tensor and output names appear as string literals in edge_m3/spec/ alone."""
    names = {c.INPUT_IDS, c.ATTENTION_MASK, c.DENSE_VECS, c.SPARSE_WEIGHTS, c.COLBERT_VECS,
             c.LEXICAL_WEIGHTS, c.DYNAMIC_SIGNATURE}
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.parent == PACKAGE / "spec":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and node.value in names:
                # "input_ids" is also the key of a result's token ids, the same name on purpose
                if node.value == c.INPUT_IDS and path.parent.name in ("device", "lab", "runtime", "bulk"):
                    continue
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.value!r}")
    assert not offenders, offenders


def test_kits_spell_no_contract_value() -> None:
    """Kotlin and Swift sources read names and tolerances from the generated EdgeM3Contract: none
    re-spells a tensor, output or file name (test data in the kits' test targets aside)."""
    import re

    from tools.codegen import gen_kit_contract

    values = set(gen_kit_contract.STRINGS.values())
    kit_sources = [*(ROOT / "android_assets/src/main").rglob("*.kt"),
                   *(ROOT / "android_assets/src/androidTest").rglob("*.kt"),
                   *(ROOT / "android_assets/jvm").glob("*.kt"), *(ROOT / "ios_assets/Sources").rglob("*.swift")]
    offenders = []
    for path in kit_sources:
        if path.stem in ("EdgeM3Contract", "TokenizerTables"):
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            code = line.split("//")[0]
            offenders += [f"{path.relative_to(ROOT)}:{n} {lit}" for lit in re.findall(r'"([^"\\$]*)"', code)
                          if lit in values]
    assert len(kit_sources) > 10 and not offenders, offenders


def test_line_breaks_are_what_splitlines_splits_on() -> None:
    """spec.LINE_BREAKS (escaped by both kits' exception constructors, issue 38) is exactly the
    set of characters str.splitlines splits on, and every escape is one line of printable ASCII."""
    splits = {chr(i) for i in range(0x110000) if len(f"a{chr(i)}b".splitlines()) == 2}
    assert set(c.LINE_BREAKS) == splits and len(c.LINE_BREAKS) == len(splits)
    for ch in c.LINE_BREAKS:
        escaped = c.escape_line_breaks(f"x{ch}y")
        assert escaped.splitlines() == [escaped] and escaped.isascii() and escaped.isprintable()
    assert c.escape_line_breaks("a\r\nb\u2028") == "a\\r\\nb\\u2028"


def test_every_python_refusal_is_one_line() -> None:
    """EdgeM3Error escapes its message's line breaks itself, as the kits' exception constructors
    do, so no message quoting a file's string can be two lines (issue 38's findings 5 to 7 were
    three such messages): every subclass, and an OptionError's line as the CLI renders it."""
    from edge_m3.errors import DiskFull, EdgeM3Error, OptionError
    from edge_m3.retrieval.index_folder import CorruptIndexError
    from edge_m3.retrieval.writable import WriteRefused
    name = "".join(f"x{ch}" for ch in c.LINE_BREAKS)
    for exc in (EdgeM3Error(f"bad {name}"), DiskFull(f"full {name}"), CorruptIndexError(f"bad {name}"),
                WriteRefused("unknown_id", f"no {name}"), OptionError("texts", name, f"why {name}")):
        assert str(exc).splitlines() == [str(exc)] and c.escape_line_breaks(name) in str(exc), exc
    assert OptionError("texts", name, "why").render({"texts": "--texts"}).splitlines() == [
        f"--texts {c.escape_line_breaks(name)}: why"]
    assert str(EdgeM3Error("plain: one line")) == "plain: one line" and EdgeM3Error().args == ()


def _imports(path: Path, module: str) -> set[str]:
    """Every edge_m3 module `module` imports, at top level or inside functions."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("edge_m3")}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("edge_m3"):
            for a in node.names:  # `from pkg import submodule` is an edge to the submodule
                sub = f"{node.module}.{a.name}"
                sub_path = ROOT / (sub.replace(".", "/") + ".py")
                out.add(sub if sub_path.is_file() or (ROOT / sub.replace(".", "/")).is_dir()
                        else node.module)
    return out - {module}


def test_no_import_cycles() -> None:
    """Imports follow the data's path: no module reaches itself again, lazily or not (a
    package's __init__ re-exporting its own submodules is not a cycle)."""
    graph = {}
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(ROOT).with_suffix("")
        name = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        graph[name] = {m for m in _imports(path, name)
                       if not (path.name == "__init__.py" and m.startswith(name + "."))}
    for name in graph:  # an import of `pkg.mod` also runs `pkg`'s __init__
        graph[name] |= {".".join(m.split(".")[:i]) for m in set(graph[name])
                        for i in range(2, m.count(".") + 1)} - {name, "edge_m3"}

    def reach(start: str) -> list[str] | None:
        stack, seen = [(start, [start])], set()
        while stack:
            node, trail = stack.pop()
            for nxt in graph.get(node, ()):
                if nxt == start:
                    return [*trail, nxt]
                if nxt not in seen and not start.startswith(nxt + "."):
                    seen.add(nxt)
                    stack.append((nxt, [*trail, nxt]))
        return None

    cycles = [cycle for name in sorted(graph) if (cycle := reach(name))]
    assert not cycles, cycles[0]


def test_runtime_path_never_imports_tensorflow() -> None:
    """embed, bench, check, the device pipeline and the self-check child run without TensorFlow
    (or anything else outside `pip install edge-m3`; tests/test_check.py runs them so)."""
    code = ("import sys\n"
            "class Block:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name.split('.')[0] in ('tensorflow', 'keras', 'tf2onnx', 'torch', 'sentencepiece',\n"
            "                                  'matplotlib', 'huggingface_hub', 'onnx'):\n"
            "            raise ImportError('blocked: ' + name)\n"
            "sys.meta_path.insert(0, Block())\n"
            "import edge_m3.cli, edge_m3.device.embed, edge_m3.device.bench, edge_m3.lab.inputs\n"
            "import edge_m3.runtime.pipeline, edge_m3.bundle, edge_m3.builder.selfcheck\n"
            "import edge_m3.device.workers, edge_m3.tokenizer, edge_m3.device.check\n"
            "edge_m3.cli.build_parser()\n"
            "print('ok')\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.stdout.strip() == "ok", proc.stderr


def test_reference_cache_key_covers_the_moved_sources(tmp_path: Path, monkeypatch) -> None:
    """The Keras reference's key hashes the code it runs, found by module name: every source
    resolves, and a change to any of them changes the key."""
    from edge_m3.lab import references

    sources = references.reference_sources()
    names = {p.relative_to(PACKAGE).as_posix() for p in sources}
    assert {"modeling/keras_model.py", "checkpoint/loader.py", "checkpoint/safeload.py",
            "tokenizer/tokenizer.py", "tokenizer/normalizer.py", "tokenizer/graphemes.py",
            "tokenizer/unigram.py", "runtime/postprocess.py", "spec/names.py", "spec/recipes.py"} <= names
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "config.json").write_text("{}")
    copies = []
    for i, src in enumerate(sources):
        dst = tmp_path / f"{i}_{src.name}"
        dst.write_bytes(src.read_bytes())
        copies.append(dst)
    monkeypatch.setattr(references, "reference_sources", lambda: copies)
    before = references.reference_key("keras", ckpt, ["a"], 8)
    assert references.reference_key("keras", ckpt, ["a"], 8) == before
    copies[-1].write_bytes(copies[-1].read_bytes() + b"\n# changed\n")
    assert references.reference_key("keras", ckpt, ["a"], 8) != before
    monkeypatch.undo()  # the real lookup again: a name that no longer resolves is an error
    monkeypatch.setattr(references, "KERAS_REFERENCE_CODE", ("edge_m3.no_such_module",))
    with pytest.raises(RuntimeError, match="no_such_module"):
        references.reference_sources()


@pytest.mark.parametrize(("value", "needle"), [("", "empty list"), ("1,1", "repeated"),
                                               ("1,x", "x: not an integer"), ("0", "at least 1")])
def test_comma_lists(value: str, needle: str) -> None:
    from edge_m3.common.options import parse_ints

    with pytest.raises(EdgeM3Error, match=needle):
        parse_ints(value, "--threads")
    assert parse_ints("4,1,2", "--threads") == [4, 1, 2]


def test_atomic_writes_leave_nothing_behind(tmp_path: Path) -> None:
    from edge_m3.common.files import copy_atomic, write_atomic, write_json

    write_json(tmp_path / "a.json", {"k": "é"})
    assert json.loads((tmp_path / "a.json").read_text("utf-8")) == {"k": "é"}
    copy_atomic(tmp_path / "a.json", tmp_path / "b.json")
    with pytest.raises(EdgeM3Error, match="--report .*cannot write"):
        write_atomic(tmp_path / "a.json" / "x.md", "text", "--report")  # parent is a file
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json", "b.json"]
