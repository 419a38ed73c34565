"""The bundle contract, defined once: tensor and output names, the quant variants, the manifest.

Everything that more than one step of the data's path (export, bundle, runtime, harness, the
Kotlin and Swift kits) must agree on lives here and is imported, never re-spelled. The kits'
copies (`EdgeM3Contract.kt`, `EdgeM3Contract.swift`) are generated from this module by
`tools/codegen/gen_kit_contract.py`, and a test fails when they are stale.

Only the standard library is imported: the runtime-only install, the builder and the kits'
generator all read it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar

from edge_m3.errors import LINE_BREAKS, EdgeM3Error, OptionError
from edge_m3.errors import escape_line_breaks as escape_line_breaks  # the kits' rule, read here

# --------------------------------------------------------------------------- names

SCHEMA_VERSION = 1
MANIFEST = "manifest.json"
GOLDEN = "golden.json"
VOCAB_MAP = "vocab_map.json"
SENTENCEPIECE = "sentencepiece.bpe.model"
WORDPIECE_VOCAB = "vocab.txt"  # a WordPiece bundle's vocabulary: one token a line, id = line number
# A byte-level BPE bundle's tokenizer data: the model's vocabulary (a list, id = index), its merges
# (a list of [left, right] pairs, rank = index) and the added tokens (docs/bundle-format.md).
BPE_FILE = "bpe.json"

# How a bundle tokenizes (the manifest's `tokenizer.kind`): each kind is one tokenizer class in
# Python (edge_m3.tokenizer.open_tokenizer) and in each kit, chosen by this name alone.
XLMR_SENTENCEPIECE, WORDPIECE, BYTE_LEVEL_BPE = "xlmr-sentencepiece", "wordpiece", "byte-level-bpe"
TOKENIZER_KINDS = (XLMR_SENTENCEPIECE, WORDPIECE, BYTE_LEVEL_BPE)
# A WordPiece tokenizer's settings (manifest `tokenizer.options`), as `tokenizers`' BertNormalizer,
# BertPreTokenizer and WordPiece model name them; every key is required, with this type.
WORDPIECE_OPTIONS: dict[str, type] = {
    "clean_text": bool, "handle_chinese_chars": bool, "strip_accents": bool, "lowercase": bool,
    "continuing_subword_prefix": str, "max_input_chars_per_word": int,
}
# A byte-level BPE tokenizer's settings (GPT-2 / GPT-NeoX / ModernBERT tokenizer.json), as
# `tokenizers` names them: the normalizer (one of BPE_NORMALIZERS, "" for none), the ByteLevel
# pre-tokenizer's add_prefix_space and use_regex, the BPE model's ignore_merges, fuse_unk and
# unk_token ("" when the model has none: a character outside the vocabulary is then dropped).
BPE_OPTIONS: dict[str, type] = {
    "normalizer": str, "add_prefix_space": bool, "use_regex": bool, "ignore_merges": bool,
    "fuse_unk": bool, "unk_token": str,
}
BPE_NORMALIZERS = ("", "NFC")
# Each kind's options schema (the SentencePiece kind has none).
TOKENIZER_OPTIONS: dict[str, dict[str, type]] = {WORDPIECE: WORDPIECE_OPTIONS, BYTE_LEVEL_BPE: BPE_OPTIONS}

# The model's inputs, in signature order: int32 `[1, L]`.
INPUT_IDS, ATTENTION_MASK = "input_ids", "attention_mask"
INPUTS = (INPUT_IDS, ATTENTION_MASK)
# The heads a bundle may export, and each head's raw signature output.
HEADS = ("dense", "sparse", "colbert")
DENSE_VECS, SPARSE_WEIGHTS, COLBERT_VECS = "dense_vecs", "sparse_weights", "colbert_vecs"
HEAD_OUTPUTS = {"dense": DENSE_VECS, "sparse": SPARSE_WEIGHTS, "colbert": COLBERT_VECS}
# The post-processed outputs, named as FlagEmbedding's BGEM3FlagModel names them.
LEXICAL_WEIGHTS = "lexical_weights"
RESULT_OUTPUTS = {"dense": DENSE_VECS, "sparse": LEXICAL_WEIGHTS, "colbert": COLBERT_VECS}

# fairseq's specials as XLM-R writes them; every bundle has all five.
SPECIAL_KEYS = ("bos", "pad", "eos", "unk", "mask")
XLMR_SPECIAL_TOKENS = {"bos": "<s>", "pad": "<pad>", "eos": "</s>", "unk": "<unk>", "mask": "<mask>"}
# FlagEmbedding leaves these out of lexical_weights (it keeps `<mask>`).
LEXICAL_SKIP_KEYS = ("bos", "eos", "pad", "unk")

DYNAMIC_SIGNATURE = "embed_dynamic"
FORMATS = ("tflite", "onnx")

# How a device runs the model on the CPU (the harness and both kits). XNNPACK packs the weights
# for its kernels; a weight cache keeps one packed copy per model instead of one per signature,
# in memory or in a file that a later start maps instead of packing again (issue 17).
DEVICE_THREADS = 2  # intra-op threads: 2 suits big.LITTLE phones and a Raspberry Pi alike
IN_MEMORY_WEIGHT_CACHE = ":memory"  # XNNPACK's kInMemoryCachePath (delegates/xnnpack/weight_cache.h)
WEIGHT_CACHE_SUFFIX = ".xnnpack_cache"
# A cache file is named by the model's SHA-256 (its first WEIGHT_CACHE_KEY_CHARS hex digits) and
# the runtime build: XNNPACK finds packed weights by buffer index, not by content, and would
# reuse a stale file for a changed model or a runtime that packs differently.
WEIGHT_CACHE_KEY_CHARS = 16

# The kits' typed errors (Swift: `EdgeM3Error.kind`; Kotlin: `EdgeM3Failure.kind` and one
# exception class per kind, KIT_EXCEPTION_CLASSES; both generated): one kind per way a bundle, a
# runner, a runtime or a caller ends a call, each with one line of message besides.
KIT_ERROR_KINDS = {
    "invalid_input": "Bad input: a manifest, a text, an option, a call the kit cannot make.",
    "corrupt_bundle": "A bundle file is missing, or its size or SHA-256 is not manifest.json's: copy it again.",
    "corrupt_index": "An index file is missing, malformed, or not what index.json says: build or download "
                     "it again.",
    "signature_mismatch": "The model file's signatures differ from manifest.json (a name, shape or dtype).",
    "runner_closed": "The embedder (or its runner) was closed: every later call fails so.",
    "cancelled": "The caller cancelled (a coroutine's Job, a Swift Task) before the next model call.",
    "runtime_missing": "No model runtime: the library is missing, not a library, or lacks the API.",
    "runtime_failed": "The runtime refused: it could not read, compile or run the model.",
    # a writable index (issue 35): nothing was written when one of these is raised
    "duplicate_id": "add: the id is already in the index (update it, or remove it first).",
    "unknown_id": "update or remove: the id is not in the index.",
    "index_busy": "Another writer holds the index longer than INDEX_DB_BUSY_MS.",
    "write_failed": "The index could not be written: a read-only file or folder, a full disk.",
}
# Kotlin's exception class per kind where it is not "EdgeM3<Kind>Exception" (the names apps
# already catch); `invalid_input` is the base class every other kind extends, except
# `cancelled`, which is a CancellationException so that coroutines see a cancellation.
KIT_EXCEPTION_CLASSES = {
    "invalid_input": "EdgeM3Exception",
    "signature_mismatch": "EdgeM3ModelMismatchException",
    "runner_closed": "EdgeM3ClosedException",
}
# LINE_BREAKS and escape_line_breaks (issue 38: the harnesses' "one line") are defined in
# edge_m3.errors, beside EdgeM3Error, which applies the rule to every message; imported above so
# that the kits' generator reads them here with every other rule of the contract.


def weight_cache_name(model_sha256: str, runtime_key: str) -> str:
    """`<sha256[:16]>-<runtime key>.xnnpack_cache`: one file per model content and runtime build."""
    key = "".join(c if (c.isascii() and c.isalnum()) or c in "._" else "_" for c in runtime_key)
    return f"{model_sha256[:WEIGHT_CACHE_KEY_CHARS]}-{key}{WEIGHT_CACHE_SUFFIX}"


def model_file(quant: str, fmt: str) -> str:
    """`model_<quant>.tflite` / `model_<quant>.onnx`: one file per variant and format."""
    return f"model_{quant}.{fmt}"


def signature_name(seq_len: int) -> str:
    """Distinct names per length: same-named concrete functions collapse into one signature."""
    return f"embed_{int(seq_len)}"


def choose_length(n_tokens: int, lengths: Sequence[int]) -> int:
    """The smallest fixed length that holds the tokens, else the largest (and truncate)."""
    if not lengths:
        raise EdgeM3Error("no sequence lengths to choose from")
    fitting = [n for n in sorted(lengths) if n >= n_tokens]
    return fitting[0] if fitting else max(lengths)


# --------------------------------------------------------------------------- quant variants

# Ship thresholds, meant to hold on the real trained BGE-M3: each key is a figure of the verify
# report plus _min (the figure must be >= the value) or _max (<=); see
# edge_m3.harness.metrics.GATE_PATHS. dense_cosine: worst text; lexical_top10_overlap: mean over
# texts of the share of the reference's 10 heaviest tokens the bundle also ranks top 10;
# lexical_abs_err: largest weight difference over tokens both sides keep (per text; the figure is
# the largest over texts, lexical_abs_err_p99 their 99th percentile); colbert_score_abs_err:
# largest late-interaction score difference over query x passage pairs (_p99: the percentile);
# retrieval_top10_agreement: worst of dense/sparse/colbert, mean over queries of the overlap of the
# top-10 passages; input_ids_match: share of texts tokenized exactly as the reference;
# model_rss_ratio: the model's peak RSS (every signature run; the process's RSS just before the
# model is opened subtracted, and the runtime's own fixed RSS_ALLOWANCE) over the model file's
# size, on the TFLite runtimes apps ship (LiteRT, tflite-runtime). A figure past a limit fails
# the bundle (exit 1).
# What a TFLite runtime holds whatever the model (environment, XNNPACK, thread pool, 3 to 18
# MiB measured): left out of model_rss_ratio, so that the ratio of a small model means something.
RSS_ALLOWANCE = 16 * 2**20
# Below this model file size the gate reports model_rss_ratio but does not bound it: the
# runtime's own memory (3 to 18 MiB measured from run to run) would decide a tiny model's ratio.
RSS_GATE_MIN_BYTES = 64 * 2**20


@dataclass(frozen=True)
class Tolerance:
    """Live outputs on a device vs golden.json: the same file on another CPU differs only by
    kernel rounding (token ids, signature and post-processing are always exact)."""

    dense_cosine_min: float
    max_abs: float


# Who quantizes a format's file: each tool keeps a registry of the recipes it implements, by name.
TFLITE_CONVERTER = "tflite-converter"  # TF Lite's converter (edge_m3.export.tflite.CONVERTER_RECIPES)
AI_EDGE_QUANTIZER = "ai-edge-quantizer"  # over a float file (edge_m3.export.aeq.AEQ_RECIPES)
ONNX_EXPORTER = "onnx"  # tf2onnx, then edge_m3's rewrites (edge_m3.export.onnx.ONNX_RECIPES)


@dataclass(frozen=True)
class FormatRecipe:
    """How one format of a variant is made: the tool, and the recipe of its registry it runs."""

    tool: str  # TFLITE_CONVERTER, AI_EDGE_QUANTIZER or ONNX_EXPORTER
    name: str  # a key of that tool's registry
    # The recipe measures activations on texts: the build calibrates on `build --calibration`
    # (default the committed fidelity sample), so its gate is run on other texts.
    calibrated: bool = False

    def __str__(self) -> str:
        return self.name


def converter(name: str) -> FormatRecipe:
    return FormatRecipe(TFLITE_CONVERTER, name)


def quantizer(name: str, calibrated: bool = False) -> FormatRecipe:
    return FormatRecipe(AI_EDGE_QUANTIZER, name, calibrated)


def onnx_recipe(name: str, calibrated: bool = False) -> FormatRecipe:
    return FormatRecipe(ONNX_EXPORTER, name, calibrated)


@dataclass(frozen=True)
class QuantRecipe:
    """One quant variant: how each format quantizes it, what runs it, when it may ship.

    Adding a variant is one entry in RECIPES, plus its recipe in the tools' registries when it
    needs a new one."""

    name: str
    about: str
    bytes_per_param: float
    tflite: FormatRecipe
    onnx: FormatRecipe | None  # None: the variant has no ONNX file
    oldest_tflite: str  # oldest TF Lite runtime whose kernels run the file correctly
    thresholds: Mapping[str, float]
    device_tolerance: Tolerance
    note: str = ""  # one line every build of the variant prints (what it is not for)
    ram_note: str = ""  # what its TFLite file costs in RAM beyond the gate's bound (the summary's)
    # Oldest LiteRT (ai-edge-litert) seen to compute the file correctly: older ones may load a
    # file and still compute it wrongly (int8 on 1.0.1: dense 0.99953 to fp32's outputs; int4 on
    # 1.0.1-2.0.3: 0.73-0.82; docs/benchmarks.md, "Fidelity by variant and family").
    oldest_litert: str = "1.0.1"

    @property
    def calibrated(self) -> bool:
        """One of its files is calibrated on texts (FormatRecipe.calibrated)."""
        return self.tflite.calibrated or (self.onnx is not None and self.onnx.calibrated)

    @property
    def uses_aeq(self) -> bool:
        """Its TFLite file comes from ai-edge-quantizer over a float file (which starts from a
        trace with EMBEDDING_LOOKUP tables), not from the converter's own quantization."""
        return self.tflite.tool == AI_EDGE_QUANTIZER

    def recipe_for(self, fmt: str) -> FormatRecipe | None:
        """How the variant's `fmt` file is made (None: the variant has no such file)."""
        return {"tflite": self.tflite, "onnx": self.onnx}[fmt]

    def estimated_size(self, param_count: int) -> int:
        """What the variant's file will roughly weigh (for the 2 GB checks before converting)."""
        return int(param_count * self.bytes_per_param)

    def min_size(self, param_count: int) -> int:
        """A floor on the file size: catches a converter silently dropping Keras 3 weights.

        Dynamic int8 keeps tensors under 1,024 elements in float, hence the margin.
        """
        return int(param_count * self.bytes_per_param * 0.9)


def _limits(cos: float, overlap: float, lex: float, colbert: float, rss: float = 1.3,
            lex_p99: float | None = None, colbert_p99: float | None = None) -> dict[str, float]:
    """One variant's ship gate; `rss`: the model's peak RSS over its file size (issue 17);
    `lex_p99`, `colbert_p99`: bounds of the errors' 99th percentile (default: the max's)."""
    return {"dense_cosine_min": cos, "lexical_top10_overlap_min": overlap,
            "lexical_abs_err_max": lex, "colbert_score_abs_err_max": colbert,
            "lexical_abs_err_p99_max": lex if lex_p99 is None else lex_p99,
            "colbert_score_abs_err_p99_max": colbert if colbert_p99 is None else colbert_p99,
            "retrieval_top10_agreement_min": 0.9, "input_ids_match_min": 1.0,
            "model_rss_ratio_max": rss}


_INT8_TOLERANCE = Tolerance(0.999, 5e-2)
# The default gate (`int8`), from the spread on real text (e5-small, 2,146 texts in 24 languages,
# TFLite and ONNX int8 against FlagEmbedding: `edge-m3 verify --texts` on the corpus of
# tools/inputs/make_fidelity_corpus.py reproduces it). The largest errors
# sit on two- and three-word queries and grow with the number of texts (0.043 -> 0.12 ColBERT,
# 500 -> 2,146 texts), so the maxima get ~1.25x the whole corpus's (lexical 0.060, ColBERT
# 0.122) and the 99th percentiles, which do not grow, the tight bounds (0.040 and 0.015 there).
_INT8_LIMITS = _limits(0.995, 0.8, 0.08, 0.15, lex_p99=0.05, colbert_p99=0.03)
# The full-integer gate (`int16x8`), by int8's rule above, from its spread on the whole gate part
# of the corpus (`edge-m3 verify --texts`; tools/research/calibrated_onnx_recipes.py --worst for
# the largest errors): e5-small calibrated on sample(corpus, 200, seed 36), gated on the other
# 1,946 texts, LiteRT, LayerNorm's statistics float (aeq.STATIC_FLOAT_NORM): dense min 0.99823,
# lexical err 0.066 (p99 0.031), ColBERT err 0.121 (p99 0.008), agreement 0.935 / 0.973 / 0.970.
# The maxima get ~1.25x those, the 99th percentiles ~1.3x (lexical) and ~2x (ColBERT) as int8's; the dense bound
# stays 0.997. The ColBERT maximum is not int16x8's own: in every 8-bit file (ours in both formats,
# bge-m3-lite's) the largest errors are the </s> vectors of 6- and 7-token queries (cosine
# 0.40-0.73 to FlagEmbedding's; in FlagEmbedding's own model such a </s> takes on <s>'s large
# activations late and part-way, a shorter query's never, a longer one's fully). Without the
# two queries behind each file's 150 largest errors the maxima are int16x8 0.035, bge-m3-lite
# 0.050, TFLite int8 0.075, ONNX int8 0.087. The bounds before came from a 299-text sample
# (ColBERT max 0.06), which had none of those queries.
INT16X8_LIMITS = _limits(0.997, 0.8, 0.085, 0.15, lex_p99=0.04, colbert_p99=0.015)
RECIPES: dict[str, QuantRecipe] = {r.name: r for r in (
    QuantRecipe("fp32", "float32 weights and compute", 4.0, converter("float32"),
                onnx_recipe("float32"), "2.14.0", _limits(0.99999, 0.99, 0.001, 0.001),
                Tolerance(0.99999, 1e-3)),
    # XNNPACK unpacks fp16 weights to fp32 for its kernels: up to 2x the file in memory.
    QuantRecipe("fp16", "float16 weights, float32 compute", 2.0, converter("float16-weights"),
                onnx_recipe("float16-weights"), "2.14.0", _limits(0.9995, 0.95, 0.01, 0.005, rss=2.3),
                Tolerance(0.9999, 5e-3),
                ram_note="fp16 on tflite-runtime 2.14 (no XNNPACK) keeps an fp32 copy of every dense "
                         "weight per signature: full-size BGE-M3 with 6 signatures took 7x the file."),
    # Per-channel scales give FULLY_CONNECTED v12: LiteRT / TF Lite >= 2.17. Passes the gate
    # on real weights where per-tensor does not (e5-small: lexical err 0.038 against 0.228, gate
    # 0.05). The ONNX file is smoothed (SmoothQuant, calibrated on text) before its per-row int8:
    # as faithful as bge-m3-lite's int8 calibrated on the same texts
    # (tools/research/calibrated_onnx_recipes.py); the TFLite file needs no texts (smoothing gains
    # nothing under TF Lite's hybrid kernels).
    QuantRecipe("int8", "dynamic-range int8 weights, one scale per output channel", 1.0,
                converter("dynamic-int8-per-channel"),
                onnx_recipe("smoothed-int8-per-row", calibrated=True), "2.17.0",
                _INT8_LIMITS, _INT8_TOLERANCE),
    # Per-tensor scales keep FULLY_CONNECTED at v9, which tflite-runtime 2.14 loads. Judged by
    # the default gate, which it misses on real weights: for 2.14 rigs only.
    QuantRecipe("int8-tflite214", "dynamic-range int8 weights, one scale per tensor, for "
                "tflite-runtime 2.14", 1.0, converter("dynamic-int8-per-tensor"), None, "2.14.0",
                _INT8_LIMITS, _INT8_TOLERANCE,
                note="int8-tflite214 misses the default int8 gate on real weights (e5-small: "
                     "lexical err 0.23, retrieval agreement 0.86); build it only for "
                     "tflite-runtime 2.14, use int8 on LiteRT"),
    # ai-edge-quantizer: 4-bit blockwise weights where tools/research/aeq_recipes.py allows, 8-bit
    # elsewhere (edge_m3.export.aeq.AEQ_RECIPES). Blockwise int4 kernels: TF Lite 2.17 refuses
    # the file, TF Lite 2.18 and LiteRT <= 2.0.3 run it with wrong results (dense cosine
    # 0.73-0.82 to fp32); TF 2.21 and LiteRT 2.1.6 compute it right.
    # Gate: int8's dense cosine and retrieval bounds; 4-bit weights move single lexical
    # weights by up to ~0.13 and ColBERT scores by ~0.07 on real weights (int8: 0.04 / 0.015),
    # so those two bounds are wider: apps that rank by sparse weights alone should ship int8.
    # On real text not written for the project (24 languages, 13 scripts) it misses the gate by
    # far, and no recipe within 0.6x of int8's file reached it
    # (tools/research/aeq_recipes_techniques.py): the build says so.
    QuantRecipe("int4", "mixed 4/8-bit weights (int4 in blocks, int8 where 4 bits lose "
                "accuracy), dynamic-range activations", 0.5, quantizer("aeq-int4-mixed"), None, "2.21.0",
                _limits(0.99, 0.8, 0.15, 0.08), _INT8_TOLERANCE, oldest_litert="2.1.6",
                note="int4 misses its gate on real text in many languages (e5-small on the "
                     "issue-26 corpus, 2,146 texts: dense cosine 0.989, lexical err 0.30, ColBERT "
                     "err 0.25, retrieval agreement 0.80); verify it on your own texts (verify "
                     "--texts CORPUS.jsonl) or ship int8"),
    # Full integer for accelerators (issue 36): int16 activations, calibrated statically, and
    # int8 weights (LiteRT's 16x8 kernels), by ai-edge-quantizer over the float file
    # (edge_m3.export.aeq.STATIC_RECIPES). Who takes it, read from their sources (nothing
    # run): LiteRT's Qualcomm (QNN) and MediaTek
    # (Neuron) compiler plugins map int16 tensors to 16-bit fixed point; TF Lite's NNAPI delegate
    # refuses an int16 FULLY_CONNECTED output and SOFTMAX, its GPU delegate any int16 activation,
    # and the Edge TPU compiler anything not 8-bit. Those two delegates refuse int8's
    # FULLY_CONNECTED too: it is op version 12 (per-channel hybrid), they stop at 5 and 9.
    # No ONNX file (not attempted): onnxruntime's CPU provider would run a
    # 16-bit QDQ file as float between Quantize/Dequantize pairs, so nothing here could check
    # what a QNN-class provider makes of one. On LiteRT's CPU kernels (no XNNPACK: it has no
    # int16 kernels) the file costs 5x to 16x int8's time, its biases stored int32 so that
    # LiteRT's optimized 16x8 kernel runs it (aeq.int32_biases; with AEQ's int64 ones, 50x).
    # Gate: INT16X8_LIMITS (its lexical weights a little further from FlagEmbedding's than int8's).
    # bytes_per_param 1.25: int8 weights, but the tables are int16 (AEQ quantizes GATHER's table
    # like an activation): e5-small, table-heavy, weighs 1.89 bytes a parameter, full-size BGE-M3
    # about 1.45, a model with a small table (ModernBERT-base) about 1.25.
    QuantRecipe("int16x8", "full integer: int8 weights (int16 tables), int16 activations "
                "calibrated on text, for NPU and GPU delegates", 1.25,
                quantizer("aeq-static-a16w8", calibrated=True),
                None, "2.21.0",
                # LiteRT 2.2.0 (the Android kit's pin) computes it bit for bit as 2.3.0 does: 36 of
                # 36 golden outputs of e5-small's and of the tiny checkpoint's files, and with
                # int32 biases 78 of 78 outputs of e5-small's (`edge-m3 check` under each).
                INT16X8_LIMITS, _INT8_TOLERANCE, oldest_litert="2.2.0",
                note="int16x8 is for NPUs that take 16-bit activations (LiteRT's Qualcomm and "
                     "MediaTek compiler plugins); TF Lite's NNAPI and GPU delegates refuse int16 "
                     "activations (and int8's per-channel projections) and the Edge TPU takes "
                     "8-bit files only: no delegate or NPU was run "
                     "here, only LiteRT's CPU kernels, where it costs 5-16x int8's time; "
                     "on 1,946 real texts it was not calibrated on it meets its gate (dense cosine "
                     "0.9982, retrieval agreement 0.935): verify it on your own texts (verify "
                     "--texts CORPUS.jsonl) with your own calibration; on a CPU ship int8"),
)}
QUANTS = tuple(RECIPES)
# Names that were variants once: a one-line pointer instead of "unknown".
RENAMED = {"int8pc": "int8"}


def recipe(name: str, field: str) -> QuantRecipe:
    """The registered variant `name`, or a one-line error naming where the name came from
    (`field`: an option, or a manifest's field): what the CLI and a bundle's reader ask."""
    try:
        return RECIPES[name]
    except KeyError:
        if name in RENAMED:
            raise OptionError(field, name, f"renamed to {RENAMED[name]} "
                              f"({RECIPES[RENAMED[name]].about})") from None
        raise OptionError(field, name, f"unknown (choose from {', '.join(QUANTS)})") from None


def recipes(*names: str) -> tuple[QuantRecipe, ...]:
    """The registered variants `names`, for library callers (KeyError for another name)."""
    return tuple(RECIPES[n] for n in names)


# --------------------------------------------------------------------------- manifest


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


# --------------------------------------------------------------------------- retrieval scores
# BGE-M3's three scores and BGEM3FlagModel.compute_score's weighted hybrid, defined once for
# Python and both kits (issue 25). The arithmetic is part of the definition, so that Python,
# Kotlin and Swift return the same bits (docs/index-format.md, "Score arithmetic"):
#   - inputs are float32 (model outputs, stored vectors); every value is widened to float64
#     exactly, and a product of two float32 values is exact in float64;
#   - a dot product is the float64 sum of those products, one at a time in index order,
#     starting from +0.0 (never a reordered, pairwise or fused sum; an FMA gives the same
#     bits because the products are exact); an int8-stored vector's dot is that sum over its
#     int8 codes, then times its float32 scale widened to float64;
#   - dense(q, p) = dot(q, p) (the vectors are already unit length, as FlagEmbedding's);
#   - sparse(q, p) = compute_lexical_matching_score: over the token ids both lexical_weights
#     hold, in ascending id order, the float64 sum from +0.0 of w_q * w_p. lexical_weights
#     keep `<mask>` and drop LEXICAL_SKIP_KEYS and weights <= 0 (runtime/postprocess.py);
#   - colbert(Q, P) = colbert_score: for each query vector in order, the largest dot with any
#     passage vector, summed in float64 from +0.0, divided by the number of query vectors.
#     Both sides keep `</s>`'s vector (postprocess.colbert_vectors). No vector on either side:
#     0.0 (FlagEmbedding divides by zero there);
#   - a mode combines them with hybrid_score below; the result is the float64 value, no
#     further rounding. Scores never come out as -0.0 (sums start from +0.0).
# edge_m3/retrieval/scores.py is the numpy implementation of this text.
SCORE_SIGNALS = ("dense", "sparse", "colbert")  # the order of weights_for_different_modes
SCORE_MODES = ("dense", "sparse", "colbert", "sparse+dense", "colbert+sparse+dense")
# compute_score's default when weights_for_different_modes is None: dense, sparse, colbert.
DEFAULT_MODE_WEIGHTS = (1.0, 1.0, 1.0)
# Hybrid search re-scores the union of the top max(k, HYBRID_CANDIDATES) passages by dense and
# by sparse (docs/index-format.md, "Search"): an index of at most this many passages is
# ranked exactly as scoring every passage.
HYBRID_CANDIDATES = 100


def mode_signals(mode: str) -> tuple[str, ...]:
    """The signals a mode adds, in the order compute_score adds them (colbert, sparse, dense)."""
    if mode not in SCORE_MODES:
        raise OptionError("mode", mode, f"unknown (choose from {', '.join(SCORE_MODES)})")
    return tuple(s for s in ("colbert", "sparse", "dense") if s in mode.split("+"))


def mode_weights(weights: Sequence[float] | None) -> tuple[float, float, float]:
    """weights_for_different_modes checked: three finite numbers >= 0 (dense, sparse, colbert)."""
    if weights is None:
        return DEFAULT_MODE_WEIGHTS
    try:
        out = tuple(float(w) for w in weights)
    except (TypeError, ValueError):
        raise OptionError("weights", weights, "must be three numbers (dense, sparse, colbert)") from None
    if len(out) != 3 or not all(w >= 0 and w != float("inf") for w in out):
        raise OptionError("weights", list(weights), "must be three finite numbers >= 0 "
                          "(dense, sparse, colbert)")
    return out  # type: ignore[return-value]


def hybrid_score(mode: str, dense: float, sparse: float, colbert: float,
                 weights: Sequence[float] | None = None) -> float:
    """compute_score's value for `mode` from the three float64 scores, in float64.

    A single mode is its score as is. `sparse+dense` is (sparse*w_s + dense*w_d) /
    (w_s + w_d); `colbert+sparse+dense` is ((colbert*w_c + sparse*w_s) + dense*w_d) /
    ((w_d + w_s) + w_c): FlagEmbedding's order of operations, each one rounded (no FMA).
    The weights a mode uses must not sum to 0.
    """
    signals = mode_signals(mode)
    if len(signals) == 1:
        return {"dense": dense, "sparse": sparse, "colbert": colbert}[signals[0]]
    w_d, w_s, w_c = mode_weights(weights)
    value = {"dense": dense, "sparse": sparse, "colbert": colbert}
    weight = {"dense": w_d, "sparse": w_s, "colbert": w_c}
    num = value[signals[0]] * weight[signals[0]]
    for s in signals[1:]:
        num = num + value[s] * weight[s]
    den = w_s + w_d if mode == "sparse+dense" else (w_d + w_s) + w_c
    if den == 0.0:
        raise OptionError("weights", [w_d, w_s, w_c], f"the weights {mode} uses sum to 0")
    return num / den


# --------------------------------------------------------------------------- retrieval index
# An index folder (docs/index-format.md): INDEX_MANIFEST, and raw little-endian arrays that the
# kits memory-map. Read, written and validated by edge_m3/retrieval/store.py only.
INDEX_FORMAT = "edge-m3-index"
INDEX_FORMAT_VERSION = 1
INDEX_MANIFEST = "index.json"
INDEX_IDS = "ids.json"  # the passage ids, a JSON array (strings or integers), row order
DENSE_STORES = ("float32", "int8")
COLBERT_STORES = ("fp16", "int8", "none")
# The postings' weights array: named like the model output SPARSE_WEIGHTS, another thing.
INDEX_POSTING_WEIGHTS = "sparse_weights"
# Array name -> file; the manifest gives each one's dtype and shape.
INDEX_ARRAYS = {
    "dense": "dense.bin",  # [N, D] float32, or int8 codes with dense_scale
    "dense_scale": "dense_scale.bin",  # [N] float32 (int8 store only)
    "sparse_tokens": "sparse_tokens.bin",  # [T] int32, ascending token ids
    "sparse_offsets": "sparse_offsets.bin",  # [T + 1] int64 into the postings
    "sparse_rows": "sparse_rows.bin",  # [P] int32 passage rows, ascending within a token
    INDEX_POSTING_WEIGHTS: "sparse_weights.bin",  # [P] float32, > 0
    "colbert_offsets": "colbert_offsets.bin",  # [N + 1] int64 into the vectors
    "colbert": "colbert.bin",  # [V, D] float16, or int8 codes with colbert_scale
    "colbert_scale": "colbert_scale.bin",  # [V] float32 (int8 store only)
}
# dtype names in the manifest -> numpy's little-endian spelling (the kits read the same bytes).
INDEX_DTYPES = {"float32": "<f4", "float16": "<f2", "int8": "i1", "int32": "<i4", "int64": "<i8"}
# An index's width (index.json's `dim`, a writable index's meta `dim`): 1 to INDEX_MAX_DIM. No
# text-embedding model's hidden size comes near it (BGE-M3's is 1024); a larger one is a corrupt
# file, refused as corrupt_index before a reader sizes anything by it (a query of 2^31 floats, or
# `dim * 4` past an integer's range, as Swift's writable reader trapped on before issue 38).
INDEX_MAX_DIM = 65536
# The integers a writable index's meta holds as text (format_version, dim, generation): ASCII
# decimal digits only, no sign, space or other script's digits (each language's own integer parser
# accepts a different superset), and at most 2^63 - 1.
INDEX_DB_INT_MAX = 2**63 - 1
# What an index's `bundle` (index.json's entry, a writable index's meta `bundle`) must hold as
# strings when it is not null: the model and tokenizer that embedded the passages (Python's
# retrieval.index.BundleIdentity; `quant` and `path` are informational). Anything else is refused
# as corrupt_index by all three readers.
INDEX_BUNDLE_KEYS = ("model_file", "model_sha256", "tokenizer_file", "tokenizer_sha256")
# A passage longer than the largest signature is split into windows of W = L - 2 tokens that
# overlap by W * CHUNK_OVERLAP_PERCENT // 100 tokens (docs/index-format.md, "Passages and
# chunks"); rows sharing an id are one passage's chunks, and search ranks passages by their best.
CHUNK_OVERLAP_PERCENT = 25

# --------------------------------------------------------------------------- writable index
# A writable index (issue 35; docs/index-format.md, "The writable index"): INDEX_DB in the index
# folder holds what was written since its base (a format-1 folder, memory-mapped, read-only):
# the passages added since, in their stored form, and the base rows removed. Read and written by
# edge_m3/retrieval/writable.py and the kits' EdgeM3WritableIndex, with this schema only.
INDEX_DB = "index.sqlite"
INDEX_DB_FORMAT = "edge-m3-index-db"
# 2: passages have a `chunk` column (issue 35, "Passages and chunks"); 1 (a pre-release of
# 2026-11-25, never in a release) is refused as older.
INDEX_DB_VERSION = 2
# PRAGMA application_id of every INDEX_DB ("EM3I"): another program's SQLite file is refused.
INDEX_DB_APPLICATION_ID = 0x454D3349
# A compaction writes the new base into INDEX_BASE_PREFIX + generation (a format-1 folder).
INDEX_BASE_PREFIX = "base-"
# A second writer waits this long for the first one's transaction, then is refused ("busy").
INDEX_DB_BUSY_MS = 5000
# A reload is one committed state: when another connection commits while one reads the database
# and the base it names (a compaction deletes the base it replaced right after its commit), the
# reader reads again (PRAGMA data_version before and after); after this many tries in a row it
# reads under the writer lock (BEGIN IMMEDIATE: no commit, no compaction meanwhile).
INDEX_DB_RELOADS = 3
# meta keys (values are text): format, format_version, dim, dense, colbert, bundle (JSON, or
# "null"), base ("" none, "." the folder itself, or INDEX_BASE_PREFIX + n, n an integer as the
# others: ASCII digits, at most INDEX_DB_INT_MAX), base_sha256 (sha256 of
# the base's INDEX_MANIFEST, "" without a base), generation (decimal, +1 per compaction).
INDEX_DB_META_KEYS = ("format", "format_version", "dim", "dense", "colbert", "bundle", "base",
                      "base_sha256", "generation")
# The tables, created in this order in one transaction. One passages row per chunk: a passage's
# chunks are 0, 1, ... in consecutive seqs (docs/index-format.md, "Passages and chunks"). `id`
# has no declared type (SQLite's BLOB affinity): an integer id and a text id stay what they
# are, 1 and "1" are two ids. A passage's
# vectors are stored as the index stores them (little-endian): dense float32 [D] or int8 [D]
# codes with dense_scale float32 [1]; lex_tokens int32 [n] ascending and lex_weights float32 [n];
# colbert float16 [m, D] or int8 [m, D] codes with colbert_scale float32 [m]; NULL without ColBERT.
INDEX_DB_SCHEMA = (
    "CREATE TABLE meta (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL)",
    "CREATE TABLE passages (seq INTEGER PRIMARY KEY AUTOINCREMENT, id NOT NULL, "
    "chunk INTEGER NOT NULL, dense BLOB NOT NULL, dense_scale BLOB, lex_tokens BLOB NOT NULL, "
    "lex_weights BLOB NOT NULL, colbert BLOB, colbert_scale BLOB, UNIQUE (id, chunk))",
    "CREATE TABLE removed (row INTEGER PRIMARY KEY NOT NULL)",
)
