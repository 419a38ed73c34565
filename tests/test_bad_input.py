"""The house rule, walked over every command: bad input gets one clear line and loses nothing.

Each case runs the real CLI in a child process (cwd: the test's tmp dir, so a default
`reports/` would show up there; HF_HUB_OFFLINE=1, so nothing reaches the network) and must end
with exit 2, exactly one stderr line `edge-m3: error: ...` naming the file or option, no
traceback, nothing on stdout, and the tmp dir, the shared bundles and the checkpoint exactly as
they were (no output file, report, cache or `.part` left; no input touched). It must also be
refused before any runtime, TensorFlow or torch is imported (see _NO_HEAVY_IMPORTS): a check
that comes after the model ran has already cost the user the run.

Placeholders in a case's arguments: <tmp> the test's dir (holding good.txt, bad-utf8.txt,
empty.txt, blank.txt, not.json, deep.json(l), other.json, a-file, a-dir), <ckpt> the tiny checkpoint, <fp32>
and <int8> the shared read-only bundles (TFLite only; int8 is per-channel, which tflite-runtime
2.14 cannot run), <bad> a private copy of the fp32 bundle after the case's corruption, <index> a
shared read-only index of the fp32 bundle (no ColBERT), <badindex> a private copy of it with a
flipped byte in its dense matrix.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from edge_m3.common.files import file_entries
from edge_m3.spec import GOLDEN, MANIFEST

pytestmark = pytest.mark.models  # builds bundles
ROOT = Path(__file__).resolve().parents[1]
MODEL = "model_fp32.tflite"  # the model file of <bad>

# --------------------------------------------------------------------------- corruptions of <bad>


def _manifest_not_json(b: Path) -> None:
    (b / MANIFEST).write_text('{"schema_version": 1, "files": ', encoding="utf-8")


def _manifest_not_an_object(b: Path) -> None:
    (b / MANIFEST).write_text("[1, 2, 3]\n", encoding="utf-8")


def _model_bytes_changed(b: Path) -> None:
    data = bytearray((b / MODEL).read_bytes())
    data[len(data) // 2] ^= 0x01  # same size: only the sha256 tells
    (b / MODEL).write_bytes(bytes(data))


def _model_deleted(b: Path) -> None:
    (b / MODEL).unlink()


def _relist(b: Path, drop: str | None = None, add: str | None = None) -> None:
    """The manifest's file list as a (wrong) build would have written it."""
    manifest = json.loads((b / MANIFEST).read_text(encoding="utf-8"))
    if drop:
        manifest["files"].pop(drop)
    if add:
        manifest["files"].update(file_entries(b, [add]))
    (b / MANIFEST).write_text(json.dumps(manifest), encoding="utf-8")


def _golden_missing(b: Path) -> None:
    (b / GOLDEN).unlink()
    _relist(b, drop=GOLDEN)


def _golden_not_json(b: Path) -> None:
    (b / GOLDEN).write_text('{"cases": [', encoding="utf-8")
    _relist(b, add=GOLDEN)


def _golden_no_cases(b: Path) -> None:
    (b / GOLDEN).write_text(json.dumps({"model_file": MODEL, "cases": []}), encoding="utf-8")
    _relist(b, add=GOLDEN)


def _tokenizer_file_a_path(b: Path) -> None:
    """A manifest naming a tokenizer outside the bundle (issue 38: read before, unverified)."""
    m = json.loads((b / MANIFEST).read_text(encoding="utf-8"))
    m["tokenizer"]["file"] = "../" + m["tokenizer"]["file"]
    (b / MANIFEST).write_text(json.dumps(m), encoding="utf-8")


def _tokenizer_unlisted(b: Path) -> None:
    """The tokenizer file present but not in `files`: no sha256 to check it against."""
    m = json.loads((b / MANIFEST).read_text(encoding="utf-8"))
    _relist(b, drop=m["tokenizer"]["file"])


CORRUPT: dict[str, tuple[Callable[[Path], None], str]] = {  # name: (corruption, what the line names)
    "manifest-not-json": (_manifest_not_json, f"<bad>/{MANIFEST}"),
    "manifest-not-an-object": (_manifest_not_an_object, f"<bad>/{MANIFEST}"),
    "model-bytes-changed": (_model_bytes_changed, f"<bad>/{MODEL}"),
    "listed-file-deleted": (_model_deleted, f"<bad>/{MODEL}"),
    "tokenizer-file-a-path": (_tokenizer_file_a_path, f"<bad>/{MANIFEST}"),
    "tokenizer-unlisted": (_tokenizer_unlisted, f"<bad>/{MANIFEST}"),
}

# Each bundle command with otherwise valid arguments; <B> is the bundle.
BUNDLE_COMMANDS = {
    "embed": ["embed", "<B>", "hello"],
    "verify": ["verify", "<B>", "--reference", "<ckpt>"],
    "check": ["check", "<B>"],
    "bench": ["bench", "<B>"],
    "coverage": ["coverage", "<B>", "<tmp>/good.txt"],
}
BUILD = ["build", "--checkpoint", "<ckpt>", "--out", "<tmp>/out-{quant}", "--kits", "none",
         "--seq-lens", "8,16", "--no-self-check"]
VERIFY = ["verify", "<fp32>", "--reference", "<ckpt>"]
INDEX = ["index", "<fp32>", "<tmp>/good.txt", "--out", "<tmp>/ix"]  # issue 25
SEARCH = ["search", "<index>", "--queries", "<tmp>/good.txt"]


def _on(cmd: str, bundle: str, *extra: str) -> list[str]:
    return [a.replace("<B>", bundle) for a in BUNDLE_COMMANDS[cmd]] + list(extra)


# One table: (id, corruption of <bad> or None, arguments, what the one line must name).
CASES: list[tuple[str, Callable[[Path], None] | None, list[str], tuple[str, ...]]] = [
    # ---- the command line itself
    ("no-subcommand", None, [], ("command",)),
    ("unknown-subcommand", None, ["frobnicate", "x"], ("frobnicate",)),
    *[(f"{cmd}-unknown-option", None, [*(BUILD if cmd == "build" else _on(cmd, "<fp32>")),
                                       "--frobnicate"], ("--frobnicate",))
      for cmd in ("build", *BUNDLE_COMMANDS)],
    ("embed-no-bundle-argument", None, ["embed"], ("bundle",)),
    ("verify-no-reference", None, ["verify", "<fp32>"], ("--reference",)),
    ("coverage-no-texts-argument", None, ["coverage", "<fp32>"], ("texts",)),
    # ---- a bundle that is not there, or not a bundle
    *[(f"{cmd}-missing-bundle", None, _on(cmd, "<tmp>/no-bundle"), ("<tmp>/no-bundle",))
      for cmd in BUNDLE_COMMANDS],
    ("embed-bundle-is-a-file", None, _on("embed", "<tmp>/a-file"), ("<tmp>/a-file",)),
    ("check-bundle-is-a-file", None, _on("check", "<tmp>/a-file"), ("<tmp>/a-file",)),
    # ---- a corrupt bundle, under every command that reads one
    *[(f"{cmd}-{name}", corrupt, _on(cmd, "<bad>"), (names,))
      for name, (corrupt, names) in CORRUPT.items() for cmd in BUNDLE_COMMANDS],
    ("check-golden-missing", _golden_missing, ["check", "<bad>"], (f"<bad>/{GOLDEN}",)),
    ("check-golden-not-json", _golden_not_json, ["check", "<bad>"], (f"<bad>/{GOLDEN}",)),
    ("check-golden-no-cases", _golden_no_cases, ["check", "<bad>"], (f"<bad>/{GOLDEN}",)),
    # ---- a runtime that cannot run the bundle (int8 is per-channel: not tflite-runtime 2.14)
    ("embed-int8-on-tflite-runtime", None, _on("embed", "<int8>", "--runtime", "tflite-runtime"),
     ("--runtime tflite-runtime", "model_int8.tflite")),
    ("verify-int8-on-tflite-runtime", None,
     _on("verify", "<int8>", "--runtime", "tflite-runtime"),
     ("--runtime tflite-runtime", "model_int8.tflite")),
    ("check-int8-on-tflite-runtime", None, _on("check", "<int8>", "--runtime", "tflite-runtime"),
     ("--runtime tflite-runtime", "model_int8.tflite")),
    ("bench-int8-on-tflite-runtime", None,
     _on("bench", "<int8>", "--runtimes", "tflite-runtime"),
     ("--runtimes tflite-runtime", "model_int8.tflite")),
    *[(f"{cmd}-onnxruntime-on-tflite-bundle", None,
       _on(cmd, "<fp32>", "--runtimes" if cmd == "bench" else "--runtime", "onnxruntime"),
       ("onnxruntime",)) for cmd in ("embed", "verify", "check", "bench")],
    *[(f"{cmd}-unknown-runtime", None,
       _on(cmd, "<fp32>", "--runtimes" if cmd == "bench" else "--runtime", "tpu-magic"),
       ("--runtime", "tpu-magic")) for cmd in ("embed", "verify", "check", "bench")],
    ("bench-runtime-repeated", None, _on("bench", "<fp32>", "--runtimes", "litert,litert"),
     ("--runtimes",)),
    # ---- bad numbers and choices
    *[(f"{cmd}-threads-0", None, _on(cmd, "<fp32>", "--threads", "0"), ("--threads",))
      for cmd in ("embed", "verify", "check", "bench")],
    *[(f"{cmd}-threads-abc", None, _on(cmd, "<fp32>", "--threads", "abc"), ("--threads", "abc"))
      for cmd in ("embed", "verify", "check", "bench")],
    *[(f"{cmd}-repeats-0", None, _on(cmd, "<fp32>", "--repeats", "0"), ("--repeats",))
      for cmd in ("check", "bench")],
    *[(f"{cmd}-warmup-minus-1", None, _on(cmd, "<fp32>", "--warmup", "-1"), ("--warmup",))
      for cmd in ("check", "bench")],
    ("bench-lengths-1", None, _on("bench", "<fp32>", "--lengths", "1"), ("--lengths 1",)),
    ("bench-lengths-99999", None, _on("bench", "<fp32>", "--lengths", "99999"),
     ("--lengths 99999",)),
    ("bench-lengths-abc", None, _on("bench", "<fp32>", "--lengths", "8,abc"), ("--lengths",)),
    ("bench-weight-cache-bogus", None, _on("bench", "<fp32>", "--weight-cache", "bogus"),
     ("--weight-cache", "bogus")),
    ("check-weight-cache-bogus", None, _on("check", "<fp32>", "--weight-cache", "bogus"),
     ("--weight-cache", "bogus")),
    ("build-seq-lens-0-abc", None, [*BUILD, "--seq-lens", "0,abc"], ("--seq-lens",)),
    ("build-seq-lens-above-the-model", None, [*BUILD, "--seq-lens", "8,99999"],
     ("--seq-lens 99999",)),
    ("build-vocab-min-count-0", None, [*BUILD, "--vocab-min-count", "0"], ("--vocab-min-count",)),
    ("build-unknown-quant", None, [*BUILD, "--quant", "int3"], ("--quant int3",)),
    ("build-unknown-heads", None, [*BUILD, "--heads", "dense,bogus"], ("--heads bogus",)),
    ("build-unknown-formats", None, [*BUILD, "--formats", "tflite,coreml"], ("--formats coreml",)),
    # ---- texts: missing, not UTF-8, empty, none at all
    ("embed-texts-missing", None, _on("embed", "<fp32>", "--texts", "<tmp>/no.txt"),
     ("--texts", "<tmp>/no.txt")),
    ("verify-texts-missing", None, [*VERIFY, "--texts", "<tmp>/no.txt"],
     ("--texts", "<tmp>/no.txt")),
    ("coverage-texts-missing", None, ["coverage", "<fp32>", "<tmp>/no.txt"], ("<tmp>/no.txt",)),
    ("build-vocab-corpus-missing", None, [*BUILD, "--vocab-corpus", "<tmp>/no.txt"],
     ("--vocab-corpus", "<tmp>/no.txt")),
    ("embed-texts-not-utf8", None, _on("embed", "<fp32>", "--texts", "<tmp>/bad-utf8.txt"),
     ("<tmp>/bad-utf8.txt", "line 2")),
    ("verify-texts-not-utf8", None, [*VERIFY, "--texts", "<tmp>/bad-utf8.txt"],
     ("<tmp>/bad-utf8.txt", "line 2")),
    ("coverage-texts-not-utf8", None, ["coverage", "<fp32>", "<tmp>/bad-utf8.txt"],
     ("<tmp>/bad-utf8.txt", "line 2")),
    ("build-vocab-corpus-not-utf8", None, [*BUILD, "--vocab-corpus", "<tmp>/bad-utf8.txt"],
     ("<tmp>/bad-utf8.txt", "line 2")),
    ("embed-texts-empty", None, ["embed", "<fp32>", "--texts", "<tmp>/empty.txt"],
     ("<tmp>/empty.txt",)),
    ("verify-texts-empty", None, [*VERIFY, "--texts", "<tmp>/empty.txt"], ("<tmp>/empty.txt",)),
    # ---- verify on a corpus (issue 26): a bad line, no passage, --sample without a corpus
    ("verify-corpus-bad-line", None, [*VERIFY, "--texts", "<tmp>/bad.jsonl"],
     ("--texts", "<tmp>/bad.jsonl", "line 2")),
    ("verify-corpus-deep-json", None, [*VERIFY, "--texts", "<tmp>/deep.jsonl"],
     ("--texts", "<tmp>/deep.jsonl", "line 1")),
    ("verify-corpus-no-passage", None, [*VERIFY, "--texts", "<tmp>/queries.jsonl"],
     ("--texts", "<tmp>/queries.jsonl")),
    ("verify-sample-without-corpus", None, [*VERIFY, "--texts", "<tmp>/good.txt", "--sample", "9"],
     ("--sample", "--texts")),
    ("verify-sample-below-2", None, [*VERIFY, "--texts", "<tmp>/queries.jsonl", "--sample", "1"],
     ("--sample 1",)),
    ("coverage-texts-empty", None, ["coverage", "<fp32>", "<tmp>/empty.txt"], ("<tmp>/empty.txt",)),
    ("coverage-texts-blank", None, ["coverage", "<fp32>", "<tmp>/blank.txt"], ("<tmp>/blank.txt",)),
    ("build-vocab-corpus-empty", None, [*BUILD, "--vocab-corpus", "<tmp>/empty.txt"],
     ("<tmp>/empty.txt",)),
    ("embed-no-text", None, ["embed", "<fp32>"], ("--texts",)),
    # ---- checkpoints: missing, not a directory, an unreachable hub
    ("build-checkpoint-missing", None, [*BUILD, "--checkpoint", "<tmp>/no-ckpt"],
     ("--checkpoint", "<tmp>/no-ckpt")),
    ("build-checkpoint-is-a-file", None, [*BUILD, "--checkpoint", "<tmp>/a-file"],
     ("--checkpoint", "<tmp>/a-file")),
    ("build-checkpoint-unreachable-hub", None, [*BUILD, "--checkpoint", "some-org/some-model"],
     ("some-org/some-model",)),
    ("verify-reference-missing", None, ["verify", "<fp32>", "--reference", "<tmp>/no-ckpt"],
     ("--reference", "<tmp>/no-ckpt")),
    ("verify-reference-unreachable-hub", None,
     ["verify", "<fp32>", "--reference", "some-org/some-model"],
     ("--reference", "some-org/some-model")),
    ("bench-reference-missing", None, _on("bench", "<fp32>", "--reference", "<tmp>/no-ckpt"),
     ("--reference", "<tmp>/no-ckpt")),
    # ---- verify --thresholds
    ("verify-thresholds-missing", None, [*VERIFY, "--thresholds", "<tmp>/no.json"],
     ("--thresholds", "<tmp>/no.json")),
    ("verify-thresholds-not-json", None, [*VERIFY, "--thresholds", "<tmp>/not.json"],
     ("--thresholds", "<tmp>/not.json")),
    ("verify-thresholds-deep-json", None, [*VERIFY, "--thresholds", "<tmp>/deep.json"],
     ("--thresholds", "<tmp>/deep.json")),
    ("verify-thresholds-no-variant", None, [*VERIFY, "--thresholds", "<tmp>/other.json"],
     ("--thresholds", "<tmp>/other.json")),
    # ---- outputs that cannot be written: refused before any model is loaded
    ("build-out-under-a-file", None, [*BUILD, "--out", "<tmp>/a-file/bundle-{quant}"],
     ("--out", "<tmp>/a-file")),
    ("build-kits-missing", None, [*BUILD, "--kits", "<tmp>/no-kits"],
     ("--kits", "<tmp>/no-kits")),
    ("embed-out-under-a-file", None, _on("embed", "<fp32>", "--out", "<tmp>/a-file/out.jsonl"),
     ("--out", "<tmp>/a-file")),
    ("embed-out-is-a-dir", None, _on("embed", "<fp32>", "--out", "<tmp>/a-dir"),
     ("--out", "<tmp>/a-dir")),
    ("verify-report-under-a-file", None, [*VERIFY, "--report", "<tmp>/a-file/report"],
     ("--report", "<tmp>/a-file")),
    ("check-report-under-a-file", None, _on("check", "<fp32>", "--report", "<tmp>/a-file/r"),
     ("--report", "<tmp>/a-file")),
    ("bench-json-under-a-file", None, _on("bench", "<fp32>", "--json", "<tmp>/a-file/b.json"),
     ("--json", "<tmp>/a-file")),
    # ---- index and search (issue 25)
    ("index-out-exists", None, [*INDEX[:-1], "<tmp>/a-dir"], ("--out", "<tmp>/a-dir")),
    ("index-out-under-a-file", None, [*INDEX[:-1], "<tmp>/a-file/ix"], ("--out", "<tmp>/a-file")),
    ("index-corpus-missing", None, ["index", "<fp32>", "<tmp>/no.txt", "--out", "<tmp>/ix"],
     ("<tmp>/no.txt",)),
    ("index-corpus-empty", None, ["index", "<fp32>", "<tmp>/empty.txt", "--out", "<tmp>/ix"],
     ("<tmp>/empty.txt",)),
    ("index-corpus-only-blank-rows", None, ["index", "<fp32>", "<tmp>/blank.txt", "--out", "<tmp>/ix"],
     ("<tmp>/blank.txt", "empty text")),
    ("index-missing-bundle", None, ["index", "<tmp>/no-bundle", "<tmp>/good.txt", "--out", "<tmp>/ix"],
     ("<tmp>/no-bundle",)),
    ("index-corrupt-bundle", _model_bytes_changed, ["index", "<bad>", "<tmp>/good.txt", "--out", "<tmp>/ix"],
     (f"<bad>/{MODEL}",)),
    ("index-dense-bogus", None, [*INDEX, "--dense", "float16"], ("--dense", "float16")),
    ("index-colbert-bogus", None, [*INDEX, "--colbert", "fp8"], ("--colbert", "fp8")),
    ("index-int8-on-tflite-runtime", None,
     ["index", "<int8>", "<tmp>/good.txt", "--out", "<tmp>/ix", "--runtime", "tflite-runtime"],
     ("--runtime tflite-runtime", "model_int8.tflite")),
    ("search-index-missing", None, ["search", "<tmp>/no-index", "--queries", "<tmp>/good.txt"],
     ("<tmp>/no-index",)),
    ("search-index-is-a-bundle", None, ["search", "<fp32>", "--queries", "<tmp>/good.txt"], ("<fp32>",)),
    ("search-corrupt-index", None, ["search", "<badindex>", "--queries", "<tmp>/good.txt"],
     ("<badindex>/dense.bin", "corrupt")),
    ("search-index-of-another-bundle", None, [*SEARCH, "--bundle", "<int8>"],
     ("<index>", "another bundle")),
    ("search-bundle-missing", None, [*SEARCH, "--bundle", "<tmp>/no-bundle"], ("<tmp>/no-bundle",)),
    ("search-queries-missing", None, ["search", "<index>", "--queries", "<tmp>/no.txt"],
     ("--queries", "<tmp>/no.txt")),
    ("search-queries-empty", None, ["search", "<index>", "--queries", "<tmp>/empty.txt"],
     ("--queries", "<tmp>/empty.txt")),
    ("search-k-0", None, [*SEARCH, "--k", "0"], ("--k",)),
    ("search-k-abc", None, [*SEARCH, "--k", "abc"], ("--k", "abc")),
    ("search-mode-bogus", None, [*SEARCH, "--mode", "hybrid"], ("--mode", "hybrid")),
    ("search-weights-two", None, [*SEARCH, "--weights", "1,2"], ("--weights",)),
    ("search-weights-not-numbers", None, [*SEARCH, "--weights", "a,b,c"], ("--weights", "a,b,c")),
    ("search-colbert-on-an-index-without", None, [*SEARCH, "--mode", "colbert"],
     ("--mode colbert", "colbert none")),
    ("search-out-exists", None, [*SEARCH, "--out", "<tmp>/a-file"], ("--out", "<tmp>/a-file")),
]


# Loaded into the CLI and its children (sitecustomize): bad input is refused before any runtime,
# TensorFlow or torch is imported, so before any model is loaded or reference computed. Such an
# import is logged to $BAD_INPUT_HEAVY_LOG (a child's failure may not reach the CLI's stderr) and
# ends the process (an ImportError could pass for "not installed" and become another error line).
_NO_HEAVY_IMPORTS = """
import importlib.abc, importlib.machinery, os, sys
HEAVY = {"tensorflow", "keras", "torch", "transformers", "FlagEmbedding", "ai_edge_litert",
         "ai_edge_quantizer", "tflite_runtime", "onnxruntime", "tf2onnx"}
class _Refuse(importlib.abc.Loader):
    def create_module(self, spec):
        with open(os.environ["BAD_INPUT_HEAVY_LOG"], "a") as log:
            log.write(spec.name + "\\n")
        raise SystemExit(f"test_bad_input: {spec.name} imported before the bad input was refused")
    def exec_module(self, module):
        pass
class _Heavy(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in HEAVY:  # found (the CLI's find_spec checks pass), never loaded
            return importlib.machinery.ModuleSpec(name, _Refuse())
sys.meta_path.insert(0, _Heavy())
"""


@pytest.fixture(scope="module")
def no_heavy_imports(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A PYTHONPATH entry whose sitecustomize blocks the heavy imports (see _NO_HEAVY_IMPORTS)."""
    site = tmp_path_factory.mktemp("no_heavy_imports")
    (site / "sitecustomize.py").write_text(_NO_HEAVY_IMPORTS, encoding="utf-8")
    return site


@pytest.fixture(scope="module")
def tiny_index(tiny_bundles: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An index of three passages by the fp32 bundle, without ColBERT vectors. Read-only."""
    from edge_m3.cli import main

    root = tmp_path_factory.mktemp("tiny_index")
    (root / "corpus.txt").write_text("one passage\nanother one\na third\n", encoding="utf-8")
    assert main(["index", str(tiny_bundles["fp32"]), str(root / "corpus.txt"), "--out", str(root / "ix"),
                 "--colbert", "none", "-q"]) == 0
    return root / "ix"


def _snapshot(roots: list[Path]) -> dict[str, object]:
    """Every path under `roots`: a dir, or a file's size and mtime (content changes show)."""
    seen: dict[str, object] = {}
    for root in roots:
        for p in [root, *sorted(root.rglob("*"))]:
            st = p.lstat()
            seen[str(p)] = "dir" if p.is_dir() else (st.st_size, st.st_mtime_ns)
    return seen


@pytest.mark.parametrize(("corrupt", "args", "names"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_and_writes_nothing(
        corrupt: Callable[[Path], None] | None, args: list[str], names: tuple[str, ...],
        tiny_bundles: dict[str, Path], tiny_ckpt: Path, tiny_index: Path, no_heavy_imports: Path,
        tmp_path: Path) -> None:
    tmp = tmp_path / "cwd"
    tmp.mkdir()
    (tmp / "good.txt").write_text("hello\n", encoding="utf-8")
    (tmp / "bad-utf8.txt").write_bytes(b"fine\n\xc3\x28 broken\n")
    (tmp / "empty.txt").write_bytes(b"")
    (tmp / "blank.txt").write_bytes(b"\n  \n")
    (tmp / "not.json").write_text("{not json", encoding="utf-8")
    for deep in ("deep.json", "deep.jsonl"):  # nested past Python's recursion limit
        (tmp / deep).write_text("[" * 100_000, encoding="utf-8")
    query = {"text": "q", "lang": "en", "group": "g", "kind": "query"}
    (tmp / "queries.jsonl").write_text(json.dumps(query) + "\n", encoding="utf-8")
    (tmp / "bad.jsonl").write_text(json.dumps(query) + "\n" + json.dumps({**query, "kind": "doc"})
                                   + "\n", encoding="utf-8")
    (tmp / "other.json").write_text(json.dumps({"int3": {"dense_cosine_min": 0.9}}), encoding="utf-8")
    (tmp / "a-file").write_text("a regular file\n", encoding="utf-8")
    (tmp / "a-dir").mkdir()
    places = {"<tmp>": tmp, "<ckpt>": tiny_ckpt, "<fp32>": tiny_bundles["fp32"],
              "<int8>": tiny_bundles["int8"], "<badindex>": tmp / "badindex", "<index>": tiny_index,
              "<bad>": tmp / "bad"}
    if corrupt is not None:
        shutil.copytree(tiny_bundles["fp32"], tmp / "bad")
        corrupt(tmp / "bad")
    if any("<badindex>" in a for a in args):
        shutil.copytree(tiny_index, tmp / "badindex")
        data = bytearray((tmp / "badindex/dense.bin").read_bytes())
        data[0] ^= 0x01  # same size: only the sha256 tells
        (tmp / "badindex/dense.bin").write_bytes(bytes(data))

    def fill(s: str) -> str:
        for key, path in places.items():
            s = s.replace(key, str(path))
        return s

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "HF_HOME": str(tmp_path / "hf"), "EDGE_M3_CACHE": str(tmp / "cache"),
           "PYTHONPATH": os.pathsep.join([str(no_heavy_imports), str(ROOT)]),
           "BAD_INPUT_HEAVY_LOG": str(tmp_path / "heavy-imports.log")}
    watched = [tmp, tiny_ckpt, tiny_index, *tiny_bundles.values()]
    before = _snapshot(watched)
    proc = subprocess.run([sys.executable, "-m", "edge_m3.cli", *map(fill, args)], cwd=tmp, env=env,
                          capture_output=True, text=True, errors="replace", timeout=300)
    shown = f"exit {proc.returncode}\nstdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2, shown
    assert "Traceback" not in proc.stdout + proc.stderr, shown
    assert len(lines) == 1 and lines[0].startswith("edge-m3: error: "), shown
    assert not proc.stdout.strip(), shown
    for name in map(fill, names):
        assert name in lines[0], f"{name!r} not named in: {lines[0]}"
    assert _snapshot(watched) == before, "a file was written, changed or left behind"
    heavy = tmp_path / "heavy-imports.log"
    assert not heavy.exists(), f"refused only after importing {heavy.read_text().split()}"
