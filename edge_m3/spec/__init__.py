"""The formats' one definition (issue 59): names, quant recipes, the manifest, the scoring rules,
the index folder and `index.sqlite`, one module each; every public name is re-exported here, so
`from edge_m3 import spec` then `spec.NAME`.

Everything that more than one step of the data's path (export, bundle, runtime, harness, the
Kotlin and Swift kits) must agree on lives here and is imported, never re-spelled. The kits'
copies (`EdgeM3Contract.kt`, `EdgeM3Contract.swift`, `Manifest.kt`, `Manifest.swift`) are generated
from this package by `tools/codegen/gen_kit_contract.py`, and a test fails when they are stale.

Only the standard library is imported: the runtime-only install, the builder and the kits'
generator all read it.
"""

from __future__ import annotations

from edge_m3.spec.index import (  # noqa: F401  (re-exported: spec.NAME)
    CHUNK_OVERLAP_PERCENT,
    COLBERT_STORES,
    DENSE_STORES,
    INDEX_ARRAYS,
    INDEX_BASE_PREFIX,
    INDEX_BUNDLE_KEYS,
    INDEX_DB,
    INDEX_DB_APPLICATION_ID,
    INDEX_DB_BUSY_MS,
    INDEX_DB_FORMAT,
    INDEX_DB_INT_MAX,
    INDEX_DB_META_KEYS,
    INDEX_DB_RELOADS,
    INDEX_DB_SCHEMA,
    INDEX_DB_VERSION,
    INDEX_DTYPES,
    INDEX_FORMAT,
    INDEX_FORMAT_VERSION,
    INDEX_IDS,
    INDEX_MANIFEST,
    INDEX_MAX_DIM,
    INDEX_POSTING_WEIGHTS,
)
from edge_m3.spec.manifest import (  # noqa: F401  (re-exported: spec.NAME)
    FILE_ENTRY_KEYS,
    FILE_NAME_SEPARATORS,
    NOT_FILE_NAMES,
    CheckResult,
    Manifest,
    ModelEntry,
    Signature,
    TensorSpec,
    TokenizerSpec,
    file_name,
    is_file_name,
)
from edge_m3.spec.names import (  # noqa: F401  (re-exported: spec.NAME)
    ATTENTION_MASK,
    BPE_FILE,
    BPE_NORMALIZERS,
    BPE_OPTIONS,
    BYTE_LEVEL_BPE,
    COLBERT_VECS,
    DENSE_VECS,
    DEVICE_THREADS,
    DYNAMIC_SIGNATURE,
    FORMATS,
    GOLDEN,
    HEAD_OUTPUTS,
    HEADS,
    IN_MEMORY_WEIGHT_CACHE,
    INPUT_IDS,
    INPUTS,
    KIT_ERROR_KINDS,
    KIT_EXCEPTION_CLASSES,
    LEXICAL_SKIP_KEYS,
    LEXICAL_WEIGHTS,
    LINE_BREAKS,
    MANIFEST,
    RESULT_OUTPUTS,
    SCHEMA_VERSION,
    SENTENCEPIECE,
    SPARSE_WEIGHTS,
    SPECIAL_KEYS,
    TOKENIZER_KINDS,
    TOKENIZER_OPTIONS,
    VOCAB_MAP,
    WEIGHT_CACHE_KEY_CHARS,
    WEIGHT_CACHE_SUFFIX,
    WORDPIECE,
    WORDPIECE_OPTIONS,
    WORDPIECE_VOCAB,
    XLMR_SENTENCEPIECE,
    XLMR_SPECIAL_TOKENS,
    choose_length,
    escape_line_breaks,
    model_file,
    signature_name,
    weight_cache_name,
)
from edge_m3.spec.recipes import (  # noqa: F401  (re-exported: spec.NAME)
    AI_EDGE_QUANTIZER,
    INT16X8_LIMITS,
    ONNX_EXPORTER,
    QUANTS,
    RECIPES,
    RENAMED,
    RSS_ALLOWANCE,
    RSS_GATE_MIN_BYTES,
    TFLITE_CONVERTER,
    FormatRecipe,
    QuantRecipe,
    Tolerance,
    converter,
    onnx_recipe,
    quantizer,
    recipe,
    recipes,
)
from edge_m3.spec.scoring import (  # noqa: F401  (re-exported: spec.NAME)
    DEFAULT_MODE_WEIGHTS,
    HYBRID_CANDIDATES,
    SCORE_MODES,
    SCORE_SIGNALS,
    hybrid_score,
    mode_signals,
    mode_weights,
)
