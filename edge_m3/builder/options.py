"""What `edge-m3 build` was asked for, and the checks that run before any heavy work.

Options are checked in two rounds, both before tracing: the CLI's own (lists, choices, paths:
edge_m3.cli), then those here, which need the recipes' tools or config.json (lengths vs
positions, the 2 GB FlatBuffer and ORT limits). Errors name options by name (OptionError); the
CLI spells the flags.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from edge_m3.errors import OptionError
from edge_m3.export.aeq import AEQ_RECIPES, check_blocks
from edge_m3.spec import RECIPES, QuantRecipe

DEFAULT_CHECKPOINT = "BAAI/bge-m3"
DEFAULT_OUT = "dist/bge-m3-{quant}"
DEFAULT_QUANT = "int8"
# Chosen by tools/research/default_seq_lens.py: against 32,128,512 these halve the padded tokens
# (61%/48% -> 30%/27%), run queries 1.5-1.8x and passages 1.3-1.8x faster (e5-small and full
# size) for +36% build time, +1.5% file and no extra RAM with the weight cache.
DEFAULT_SEQ_LENS = (16, 32, 64, 128, 256, 512)
# FlatBuffers (TFLite, and the ORT format) address with 32-bit offsets: a file must stay under 2 GiB.
FLATBUFFER_LIMIT = 2**31 - 1


@dataclass(frozen=True)
class BuildOptions:
    """Everything `edge-m3 build` was asked for, parsed and checked (edge_m3.cli)."""

    checkpoint: str = DEFAULT_CHECKPOINT
    revision: str | None = None
    quants: Sequence[QuantRecipe] = (RECIPES[DEFAULT_QUANT],)
    seq_lens: Sequence[int] | None = None  # sorted; None: DEFAULT_SEQ_LENS up to the checkpoint's bound
    heads: Sequence[str] | None = None  # None: every head the checkpoint's output layout has
    formats: Sequence[str] = ("tflite",)
    out: str = DEFAULT_OUT  # {quant} is substituted
    android_dir: Path | None = None
    ios_dir: Path | None = None
    self_check: bool = True
    vocab_corpus: Sequence[Path] = field(default_factory=tuple)
    vocab_min_count: int = 1
    ort: bool = False
    # Calibration texts of the variants whose activations are quantized statically
    # (QuantRecipe.calibrated): a fidelity corpus file (JSON lines); None: the committed sample.
    calibration: Path | None = None

    def out_dir(self, recipe: QuantRecipe) -> Path:
        return Path(self.out.format(quant=recipe.name))


def default_seq_lens(max_length: int) -> tuple[int, ...]:
    """DEFAULT_SEQ_LENS, ending at `max_length` when the checkpoint's bound is shorter (MiniLM's
    sentence-transformers bound: 16..256)."""
    shorter = tuple(n for n in DEFAULT_SEQ_LENS if n < max_length)
    return DEFAULT_SEQ_LENS if len(shorter) == len(DEFAULT_SEQ_LENS) else (*shorter, max_length)


def for_checkpoint(opts: BuildOptions, checkpoint: Any) -> BuildOptions:
    """The options with the checkpoint's defaults filled in (lengths, heads), and the heads
    asked for checked against those its output layout has."""
    layout = checkpoint.outputs
    heads = tuple(opts.heads) if opts.heads is not None else layout.heads
    for h in heads:
        if h not in layout.heads:
            raise OptionError("heads", h, f"this checkpoint has no {h} head (its {layout.name} layout "
                              f"has {', '.join(layout.heads)})")
    seq_lens = opts.seq_lens if opts.seq_lens is not None else default_seq_lens(checkpoint.default_max_length)
    return replace(opts, heads=heads, seq_lens=tuple(seq_lens))


def validate_against_config(opts: BuildOptions, config: Any, param_count: int) -> None:
    """Checks that need config.json: lengths vs positions, the 2 GB FlatBuffer limit."""
    longest = config.max_seq_len
    for n in opts.seq_lens or ():
        if n > longest:
            raise OptionError("seq_lens", n, f"above this model's maximum of {longest} "
                              f"(max_position_embeddings {config.max_position_embeddings}, "
                              f"{config.family.name} positions)")
    if opts.ort:
        if "onnx" not in opts.formats:
            raise OptionError("ort", None, "needs {} with onnx (the .ort is a copy of the ONNX file)",
                              mentions=("formats",))
        for r in opts.quants:
            size = r.estimated_size(param_count)
            if size > FLATBUFFER_LIMIT:
                raise OptionError("ort", None, f"a {r.name} ORT-format copy of this model would be "
                                  f"{size / 1e9:.2f} GB, over the format's 2 GB limit; use {{}} fp16 "
                                  "or int8 with {}", mentions=("quant", "ort"))
    if "tflite" in opts.formats:
        for r in opts.quants:
            why = r.tflite.name in AEQ_RECIPES and check_blocks(
                AEQ_RECIPES[r.tflite.name], config.hidden_size, config.intermediate_size)
            if why:
                raise OptionError("quant", r.name, f"not for this model: {why}")
            size = r.estimated_size(param_count)
            if size > FLATBUFFER_LIMIT:
                raise OptionError("quant", r.name, f"a {r.name} TFLite file of this model would be "
                                  f"{size / 1e9:.2f} GB, over the 2 GB FlatBuffer limit; use {{}} fp16 "
                                  "or int8, or {} onnx (external data)", mentions=("quant", "formats"))


def check_variants(recipes: Sequence[QuantRecipe], formats: Sequence[str]) -> None:
    """Each variant has a recipe for each asked format, and its tools are installed."""
    for r in recipes:
        if "onnx" in formats and r.onnx is None:
            raise OptionError("quant", r.name, "TFLite only (no ONNX recipe); leave onnx out of "
                              "{} or build it separately", mentions=("formats",))
        if "tflite" in formats and r.uses_aeq:
            import importlib.util

            if importlib.util.find_spec("ai_edge_quantizer") is None:
                raise OptionError("quant", r.name, "needs ai-edge-quantizer (pip install "
                                  "'ai-edge-quantizer==0.10.*'), which is not installed")


def param_count_from_config(config: Any, colbert_dim: int) -> int:
    """Parameters of the exported graph (type embedding folded, pooler dropped); `colbert_dim`
    0: no BGE-M3 heads (dense only)."""
    h, f, n = config.hidden_size, config.intermediate_size, config.num_hidden_layers
    layer = 4 * (h * h + h) + 2 * 2 * h + (h * f + f) + (f * h + h)
    emb = (config.vocab_size + config.max_position_embeddings) * h + 2 * h
    heads = colbert_dim * h + colbert_dim + h + 1 if colbert_dim else 0
    return emb + n * layer + heads


__all__ = ["BuildOptions", "check_variants", "default_seq_lens", "for_checkpoint", "param_count_from_config",
           "validate_against_config"]
