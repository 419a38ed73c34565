"""The API both kits give a mobile developer (issue 34, item 4), run on the desktop, the model live
on LiteRT's C API: the options builder, `embed(texts)` equal bit for bit to the texts one by one,
cancellation before each model call (Kotlin: a cancelled coroutine Job and an interrupted thread;
Swift: a cancelled Task) with a runner stand-in that counts calls and holds one, `close()` during a
running embed returning at once (the runner released when the running call returns, later calls
refused as closed), each error kind raised by its cause (corrupt bundle, model mismatch, closed,
cancelled, missing runtime, runtime failure), modes as an enum (ScoreMode, from
spec.SCORE_MODES), MiniJson's and JsonTree's refusals with their exact messages (Kotlin), and the
error kinds generated from spec.KIT_ERROR_KINDS into both kits.

Kotlin: android_assets/jvm/ApiCheck.kt through `AndroidCheck api`; Swift: the XCTest class
EdgeM3ApiTests (ios_assets/Tests/EdgeM3Tests/EdgeM3ApiTests.swift).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from edge_m3 import spec

pytestmark = pytest.mark.models  # builds a bundle and compiles the kits

ROOT = Path(__file__).resolve().parents[1]
KT = ROOT / "android_assets/src/main/java/dev/edgem3"
SWIFT = ROOT / "ios_assets/Sources/EdgeM3"


def test_error_kinds_are_generated_into_both_kits() -> None:
    """One definition (spec.KIT_ERROR_KINDS): Swift's EdgeM3ErrorKind cases, Kotlin's
    EdgeM3ErrorKind and one exception class per kind, `cancelled` a CancellationException."""
    kt = (KT / "generated/EdgeM3Errors.kt").read_text(encoding="utf-8")
    sw = (SWIFT / "Generated/EdgeM3Contract.swift").read_text(encoding="utf-8")
    for kind in spec.KIT_ERROR_KINDS:
        assert f'{kind.upper()}("{kind}")' in kt
        assert f'= "{kind}"' in sw
    assert "class EdgeM3CancelledException(message: String, cause: Throwable? = null) : " \
           "java.util.concurrent.CancellationException(EdgeM3Contract.escapeLineBreaks(message)), " \
           "EdgeM3Failure" in kt
    # Every message one line by construction (issue 38): the base class and Swift's init escape it.
    assert "RuntimeException(EdgeM3Contract.escapeLineBreaks(message), cause)" in kt
    assert "self.message = EdgeM3Contract.escapeLineBreaks(message)" in \
        (SWIFT / "ManifestRules.swift").read_text(encoding="utf-8")
    for kind, name in spec.KIT_EXCEPTION_CLASSES.items():
        assert f"EdgeM3ErrorKind.{kind.upper()} -> {name}(" in kt
    for mode in spec.SCORE_MODES:
        assert f'("{mode}")' in (KT / "generated/EdgeM3Contract.kt").read_text(encoding="utf-8")
        assert f'= "{mode}"' in sw
    # No hand-written exception class besides the generated ones (KT's own files: generated/ aside).
    hand = [p for p in KT.glob("*.kt")
            if re.search(r"^(open )?class EdgeM3\w*Exception\b", p.read_text(encoding="utf-8"), re.M)]
    assert not hand, hand


# ApiCheck.kt's jsonChecks: MiniJson's refusals (exact message and offset), what it reads, JsonTree's
# and Retrieval's typed refusals (issue 34 item 5: branches no bundle on the desktop reached).
JSON_CASES = {
    "json-unexpected-end", "json-unexpected-end-in-array", "json-unexpected-character", "json-expected-key",
    "json-expected-colon", "json-unterminated-object", "json-object-separator", "json-unterminated-array",
    "json-array-separator", "json-unterminated-string", "json-control-character", "json-unterminated-escape",
    "json-short-u-escape", "json-bad-u-escape", "json-bad-escape", "json-leading-zero", "json-bad-fraction",
    "json-bad-sign", "json-trailing", "json-too-deep", "json-escapes", "json-values", "json-tree-object",
    "json-tree-array", "json-tree-field", "json-tree-string", "json-tree-bool", "json-tree-int-type",
    "json-tree-int-fraction", "json-tree-int-range", "json-tree-long-type", "json-tree-long-double",
    "json-tree-float", "json-tree-ints-element", "json-tree-reads", "lexical-lengths", "lexical-descending",
    "lexical-repeated", "lexical-key", "mode-unknown", "weights-two", "weights-negative", "weights-infinite",
    "weights-nan", "weights-four", "sparse-dictionaries",
    *(f"manifest-part-{p}" for p in ("SpecialIds", "WordPieceOptions", "BpeOptions", "TensorSpec", "Signature",
                                     "ModelEntry", "FileEntry"))}

# jvm/RefusalCheck.kt (issue 34 item 5: lines that had never run): EdgeM3WritableIndex's refusals, each by its
# exact kind (create, ids and rows, refused vectors, batches, no embedder, a closed index, another bundle,
# spoiled databases, a passage removed in part), its text API through a live embedder (embedChunks), the
# ScoreMode overloads of both indexes' search, IndexDb's shared bindArgs, extractAsset's size and hash
# checks, and the tokenizers' corrupt files (SentencePiece, WordPiece, byte-level BPE).
REFUSAL_CASES = {
    "writable-update-one-vector", "writable-write-sql-error", "index-not-utf8", "index-bundle-not-strings",
    "index-bad-file-name", "index-array-dtype", "index-array-stray", "index-not-finite", "index-ids-corrupt",
    "manifest-special-key", "manifest-signature-too-short", "options-gpu-off", "line-breaks-escaped",
    "tokenizer-xlmr-no-unk", "tokenizer-xlmr-duplicate-piece", "tokenizer-xlmr-past-vocab",
    "tokenizer-xlmr-special-outside", "tokenizer-xlmr-control-past-eos",
    "writable-create-dim", "writable-create-dim-past-max", "writable-create-dense", "writable-create-colbert",
    "writable-create-bundle-key",
    "writable-create-twice", "writable-create-unwritable", "index-db-bind-refused", "writable-open-no-index",
    "writable-id-type", "writable-id-widths", "writable-row-range", "writable-chunk-range",
    "writable-no-chunks", "writable-no-dense", "writable-dense-dim", "writable-dense-nan",
    "writable-lexical-zero", "writable-no-colbert", "writable-colbert-dim", "writable-batch-twice",
    "writable-batch-present", "writable-update-unknown", "writable-remove-unknown",
    "writable-text-no-embedder", "writable-update-text-no-embedder", "writable-nothing-changed",
    "writable-text-embedded", "writable-closed-count", "writable-closed-add", "writable-closed-search",
    "writable-score-mode-overloads", "index-score-mode-overloads", "writable-open-another-bundle",
    "writable-hit-id-survives-another-writer",
    "writable-db-application-id", "writable-db-user-version-newer", "writable-db-user-version-older",
    "writable-db-meta-key-not-text", "writable-db-meta-value-not-text", "writable-db-meta-missing",
    "writable-db-meta-format", "writable-db-meta-format-version", "writable-db-meta-format-version-newer",
    "writable-db-meta-dim", "writable-db-meta-dense", "writable-db-meta-colbert", "writable-db-meta-bundle",
    "writable-db-meta-base", "writable-db-meta-base-sha", "writable-db-meta-generation",
    "writable-db-base-missing", "writable-db-base-stores", "writable-db-base-bundle",
    "writable-db-removed-outside", "writable-db-passage-id", "writable-db-passage-chunk",
    "writable-db-passage-dense", "writable-db-passage-in-base", "writable-db-removed-in-part",
    "extract-asset-size", "extract-asset-sha256", "extract-asset-nothing-left", "tokenizer-sp-empty",
    "tokenizer-sp-field-zero", "tokenizer-sp-truncated-varint", "tokenizer-sp-wire-type",
    "tokenizer-sp-pieces-wire", "tokenizer-sp-length-past-end", "tokenizer-sp-fixed-past-end",
    "tokenizer-sp-skips-unknown", "tokenizer-xlmr-garbage", "tokenizer-wordpiece-kind",
    "tokenizer-wordpiece-no-options", "tokenizer-wordpiece-vocab-map", "tokenizer-wordpiece-not-utf8",
    "tokenizer-wordpiece-empty-line", "tokenizer-wordpiece-repeat", "tokenizer-wordpiece-size",
    "tokenizer-bpe-kind", "tokenizer-bpe-no-options", "tokenizer-bpe-normalizer", "tokenizer-bpe-id-offset",
    "tokenizer-bpe-not-utf8", "tokenizer-bpe-not-json", "tokenizer-bpe-no-vocab",
    "tokenizer-open-unknown-kind", "tokenizer-open-each-kind"}


def test_kotlin_api(kit_jar: Path, tiny_bundle: Path, litert_c_library: Path, tmp_path: Path) -> None:
    from tests.conftest import jna_jar_path
    from tests.test_kit_writable import SQLITE_JDBC_JAR  # RefusalCheck.kt's writable index: jvm/JdbcIndexDb.kt

    classpath = f"{kit_jar}:{jna_jar_path()}:{SQLITE_JDBC_JAR}"
    proc = subprocess.run(["java", "-cp", classpath, "dev.edgem3.AndroidCheckKt", "api",
                           str(tiny_bundle), str(tmp_path / "work"), str(litert_c_library)],
                          capture_output=True, text=True, timeout=600)
    cases = dict(re.findall(r"^case (\S+): (.*)$", proc.stdout, re.M))
    failed = {k: v for k, v in cases.items() if v != "ok"}
    summary = rf"^android: {len(cases) - len(failed)} passed, {len(failed)} failed$"
    assert re.search(summary, proc.stdout, re.M), proc.stdout + proc.stderr[-3000:]
    assert not failed and proc.returncode == 0, (failed, proc.stderr[-3000:])
    assert set(cases) == {
        "options-directory", "options-directory-weight-cache-file", "options-assets",
        "options-assets-interpreter",
        "options-bad-threads", "options-gpu-interpreter", "options-assets-need-context",
        "batch-equals-one-by-one", "batch-suspending", "batch-empty",
        "cancel-coroutine-mid-batch", "cancel-thread-mid-batch",
        "close-during-batch", "close-during-single-embed", "close-idle-releases-now", "closed-batch",
        "closed-suspending", "kinds-generated", "corrupt-bundle-sha256", "corrupt-bundle-size",
        "corrupt-bundle-missing-file", "runtime-missing-library", "score-mode-enum",
        # The stand-ins' failures on demand (jvm/stubs/StandInRuntime.kt's StandInFault), in both runtimes.
        *(f"runtime-{r}-{f}" for r in ("compiled", "interpreter")
          for f in ("tensor-allocation", "invoke", "unsupported-type")),
        "runtime-buffer-allocation", "runtime-gpu-without-accelerator", "runtime-gpu-with-accelerator",
        "entry-points-and-defaults", *JSON_CASES,
        *REFUSAL_CASES}


def test_swift_api(swift_test, tiny_bundle: Path) -> None:  # noqa: ANN001 (conftest's SwiftTest)
    import importlib.util

    from tests.test_swift_kit import _swift_test, _test_count

    found = importlib.util.find_spec("ai_edge_litert")
    lib = Path(found.origin).with_name("libLiteRt.so") if found and found.origin else None
    assert lib is not None and lib.is_file()
    proc, summary = _swift_test(swift_test, "EdgeM3ApiTests", EDGE_M3_BUNDLE=str(tiny_bundle),
                                EDGE_M3_LITERT_LIB=str(lib))
    assert summary == (_test_count("EdgeM3ApiTests"), 0, 0), (proc.stdout + proc.stderr)[-6000:]
    assert "close() during a running embed returned in" in proc.stdout + proc.stderr
