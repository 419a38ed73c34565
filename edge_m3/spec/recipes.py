"""The quant variants: each one's recipe per format, oldest runtimes, ship gate and device
tolerance (moved verbatim from contract.py's "quant variants" section)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from edge_m3.errors import OptionError

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
