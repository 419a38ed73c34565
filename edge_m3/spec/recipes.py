"""The quant variants: each one's recipe per format, oldest runtimes, ship gate and device
tolerance. Why each value is what it is: docs/decisions/ (README.md lists them)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from edge_m3.errors import OptionError

# What a TFLite runtime holds whatever the model, left out of model_rss_ratio; below
# RSS_GATE_MIN_BYTES the ratio is reported, not bounded (docs/decisions/memory-gate.md).
RSS_ALLOWANCE = 16 * 2**20
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
    return FormatRecipe(tool=TFLITE_CONVERTER, name=name)


def quantizer(name: str, calibrated: bool = False) -> FormatRecipe:
    return FormatRecipe(tool=AI_EDGE_QUANTIZER, name=name, calibrated=calibrated)


def onnx_recipe(name: str, calibrated: bool = False) -> FormatRecipe:
    return FormatRecipe(tool=ONNX_EXPORTER, name=name, calibrated=calibrated)


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
    # Oldest LiteRT (ai-edge-litert) seen to compute the file correctly (docs/decisions/oldest-litert.md).
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


@dataclass(frozen=True)
class Gate:
    """One variant's ship gate: each field is a figure of the verify report plus _min (the figure
    must be >= the value) or _max (<=), edge_m3.lab.metrics.GATE_PATHS; a figure past a limit
    fails the bundle (exit 1). `limits()` is the variant's `thresholds`, in this order."""

    dense_cosine_min: float  # the worst text's
    # mean over texts of the share of the reference's 10 heaviest tokens the bundle also ranks top 10
    lexical_top10_overlap_min: float
    # largest weight difference over tokens both sides keep (per text; the largest over texts)
    lexical_abs_err_max: float
    # largest late-interaction score difference over query x passage pairs
    colbert_score_abs_err_max: float
    # the two errors' 99th percentiles (None: the max's bound)
    lexical_abs_err_p99_max: float | None = None
    colbert_score_abs_err_p99_max: float | None = None
    # worst of dense/sparse/colbert, mean over queries of the overlap of the top-10 passages
    retrieval_top10_agreement_min: float = 0.9
    input_ids_match_min: float = 1.0  # share of texts tokenized exactly as the reference
    # the model's peak RSS over its file size (issue 17; docs/decisions/memory-gate.md)
    model_rss_ratio_max: float = 1.3

    def limits(self) -> dict[str, float]:
        """The gate as the verify report's {figure_min|figure_max: value} (p99 defaults filled)."""
        lex_p99, colbert_p99 = self.lexical_abs_err_p99_max, self.colbert_score_abs_err_p99_max
        return {"dense_cosine_min": self.dense_cosine_min,
                "lexical_top10_overlap_min": self.lexical_top10_overlap_min,
                "lexical_abs_err_max": self.lexical_abs_err_max,
                "colbert_score_abs_err_max": self.colbert_score_abs_err_max,
                "lexical_abs_err_p99_max": self.lexical_abs_err_max if lex_p99 is None else lex_p99,
                "colbert_score_abs_err_p99_max":
                    self.colbert_score_abs_err_max if colbert_p99 is None else colbert_p99,
                "retrieval_top10_agreement_min": self.retrieval_top10_agreement_min,
                "input_ids_match_min": self.input_ids_match_min,
                "model_rss_ratio_max": self.model_rss_ratio_max}


INT8_TOLERANCE = Tolerance(dense_cosine_min=0.999, max_abs=5e-2)
# The default gate (`int8`): docs/decisions/int8-gate.md.
INT8_LIMITS = Gate(dense_cosine_min=0.995, lexical_top10_overlap_min=0.8, lexical_abs_err_max=0.08,
                   colbert_score_abs_err_max=0.15, lexical_abs_err_p99_max=0.05,
                   colbert_score_abs_err_p99_max=0.03).limits()
# The full-integer gate (`int16x8`): docs/decisions/int16x8-gate.md.
INT16X8_LIMITS = Gate(dense_cosine_min=0.997, lexical_top10_overlap_min=0.8, lexical_abs_err_max=0.085,
                      colbert_score_abs_err_max=0.15, lexical_abs_err_p99_max=0.04,
                      colbert_score_abs_err_p99_max=0.015).limits()
RECIPES: dict[str, QuantRecipe] = {r.name: r for r in (
    QuantRecipe(
        name="fp32", about="float32 weights and compute", bytes_per_param=4.0,
        tflite=converter("float32"), onnx=onnx_recipe("float32"), oldest_tflite="2.14.0",
        thresholds=Gate(dense_cosine_min=0.99999, lexical_top10_overlap_min=0.99, lexical_abs_err_max=0.001,
                        colbert_score_abs_err_max=0.001).limits(),
        device_tolerance=Tolerance(dense_cosine_min=0.99999, max_abs=1e-3)),
    # fp16's memory bound: docs/decisions/memory-gate.md.
    QuantRecipe(
        name="fp16", about="float16 weights, float32 compute", bytes_per_param=2.0,
        tflite=converter("float16-weights"), onnx=onnx_recipe("float16-weights"), oldest_tflite="2.14.0",
        thresholds=Gate(dense_cosine_min=0.9995, lexical_top10_overlap_min=0.95, lexical_abs_err_max=0.01,
                        colbert_score_abs_err_max=0.005, model_rss_ratio_max=2.3).limits(),
        device_tolerance=Tolerance(dense_cosine_min=0.9999, max_abs=5e-3),
        ram_note="fp16 on tflite-runtime 2.14 (no XNNPACK) keeps an fp32 copy of every dense "
                 "weight per signature: full-size BGE-M3 with 6 signatures took 7x the file."),
    # docs/decisions/int8-per-channel.md.
    QuantRecipe(
        name="int8", about="dynamic-range int8 weights, one scale per output channel", bytes_per_param=1.0,
        tflite=converter("dynamic-int8-per-channel"),
        onnx=onnx_recipe("smoothed-int8-per-row", calibrated=True), oldest_tflite="2.17.0",
        thresholds=INT8_LIMITS, device_tolerance=INT8_TOLERANCE),
    # Per-tensor, for tflite-runtime 2.14 rigs only: docs/decisions/int8-per-channel.md.
    QuantRecipe(
        name="int8-tflite214", about="dynamic-range int8 weights, one scale per tensor, for "
                                     "tflite-runtime 2.14", bytes_per_param=1.0,
        tflite=converter("dynamic-int8-per-tensor"), onnx=None, oldest_tflite="2.14.0",
        thresholds=INT8_LIMITS, device_tolerance=INT8_TOLERANCE,
        note="int8-tflite214 misses the default int8 gate on real weights (e5-small: "
             "lexical err 0.23, retrieval agreement 0.86); build it only for "
             "tflite-runtime 2.14, use int8 on LiteRT"),
    # Mixed 4/8-bit weights, its runtimes and its wider lexical and ColBERT bounds:
    # docs/decisions/int4-mixed.md.
    QuantRecipe(
        name="int4", about="mixed 4/8-bit weights (int4 in blocks, int8 where 4 bits lose "
                           "accuracy), dynamic-range activations", bytes_per_param=0.5,
        tflite=quantizer("aeq-int4-mixed"), onnx=None, oldest_tflite="2.21.0",
        thresholds=Gate(dense_cosine_min=0.99, lexical_top10_overlap_min=0.8, lexical_abs_err_max=0.15,
                        colbert_score_abs_err_max=0.08).limits(),
        device_tolerance=INT8_TOLERANCE, oldest_litert="2.1.6",
        note="int4 misses its gate on real text in many languages (e5-small on the "
             "issue-26 corpus, 2,146 texts: dense cosine 0.989, lexical err 0.30, ColBERT "
             "err 0.25, retrieval agreement 0.80); verify it on your own texts (verify "
             "--texts CORPUS.jsonl) or ship int8"),
    # Full integer for accelerators (issue 36), who takes it, bytes_per_param, oldest LiteRT:
    # docs/decisions/int16x8-variant.md.
    QuantRecipe(
        name="int16x8", about="full integer: int8 weights (int16 tables), int16 activations "
                              "calibrated on text, for NPU and GPU delegates", bytes_per_param=1.25,
        tflite=quantizer("aeq-static-a16w8", calibrated=True), onnx=None, oldest_tflite="2.21.0",
        thresholds=INT16X8_LIMITS, device_tolerance=INT8_TOLERANCE, oldest_litert="2.2.0",
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
