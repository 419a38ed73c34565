"""What `edge-m3 build` was asked for, and the checks that run before any heavy work.

Options are checked in two rounds, both before tracing: the CLI's own (lists, choices, paths),
then those that need config.json (lengths vs positions, the 2 GB FlatBuffer and ORT limits).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edge_m3.common.options import parse_ints
from edge_m3.contract import FORMATS, HEADS, recipe
from edge_m3.errors import EdgeM3Error
from edge_m3.export.aeq import AEQ_RECIPES, check_blocks
from edge_m3.export.tflite import uses_aeq

DEFAULT_CHECKPOINT = "BAAI/bge-m3"
DEFAULT_OUT = "dist/bge-m3-{quant}"
DEFAULT_QUANT = "int8"
# Chosen by tools/research/bench_buckets.py (docs/benchmarks.md, "Length buckets"): with the weight cache
# an extra signature costs no RAM, and these halve the padded tokens of the 32,128,512 set.
DEFAULT_SEQ_LENS = (16, 32, 64, 128, 256, 512)
# FlatBuffers (TFLite, and the ORT format) address with 32-bit offsets: a file must stay under 2 GiB.
FLATBUFFER_LIMIT = 2**31 - 1


@dataclass
class BuildOptions:
    """Everything `edge-m3 build` was asked for, parsed and checked."""

    checkpoint: str = DEFAULT_CHECKPOINT
    revision: str | None = None
    quants: list[str] = field(default_factory=lambda: [DEFAULT_QUANT])
    seq_lens: list[int] = field(default_factory=lambda: list(DEFAULT_SEQ_LENS))
    heads: list[str] = field(default_factory=lambda: list(HEADS))
    formats: list[str] = field(default_factory=lambda: ["tflite"])
    out: str = DEFAULT_OUT
    android_dir: Path | None = None
    ios_dir: Path | None = None
    self_check: bool = True
    vocab_corpus: list[Path] = field(default_factory=list)
    vocab_min_count: int = 1
    ort: bool = False

    def out_dir(self, quant: str) -> Path:
        return Path(self.out.format(quant=quant))


def parse_seq_lens(value: str) -> list[int]:
    """Comma list of lengths of at least 2 (`<s>` and `</s>`), sorted."""
    return sorted(parse_ints(value, "--seq-lens", minimum=2))


def validate_against_config(opts: BuildOptions, config: Any, param_count: int) -> None:
    """Checks that need config.json: lengths vs positions, the 2 GB FlatBuffer limit."""
    longest = config.max_position_embeddings - config.pad_token_id - 1
    for n in opts.seq_lens:
        if n > longest:
            raise EdgeM3Error(f"--seq-lens {n}: above this model's maximum of {longest} "
                              f"(max_position_embeddings {config.max_position_embeddings} - 2)")
    if opts.ort:
        if "onnx" not in opts.formats:
            raise EdgeM3Error("--ort: needs --formats with onnx (the .ort is a copy of the ONNX file)")
        for q in opts.quants:
            size = recipe(q).estimated_size(param_count)
            if size > FLATBUFFER_LIMIT:
                raise EdgeM3Error(
                    f"--ort: a {q} ORT-format copy of this model would be {size / 1e9:.2f} GB, "
                    "over the format's 2 GB limit; use --quant fp16 or int8 with --ort")
    if "tflite" in opts.formats:
        for q in opts.quants:
            rules = AEQ_RECIPES.get(recipe(q).tflite)
            why = rules and check_blocks(rules, config.hidden_size, config.intermediate_size)
            if why:
                raise EdgeM3Error(f"--quant {q}: not for this model: {why}")
            size = recipe(q).estimated_size(param_count)
            if size > FLATBUFFER_LIMIT:
                raise EdgeM3Error(
                    f"--quant {q}: a {q} TFLite file of this model would be {size / 1e9:.2f} GB, "
                    "over the 2 GB FlatBuffer limit; use --quant fp16 or int8, or --formats onnx "
                    "(external data)")


def check_variants(quants: list[str], formats: list[str]) -> None:
    """Each variant has a recipe for each asked format, and its tools are installed."""
    for q in quants:
        r = recipe(q)
        if "onnx" in formats and not r.onnx:
            raise EdgeM3Error(f"--quant {q}: TFLite only (no ONNX recipe); leave onnx out of "
                              "--formats or build it separately")
        if "tflite" in formats and uses_aeq(q):
            import importlib.util

            if importlib.util.find_spec("ai_edge_quantizer") is None:
                raise EdgeM3Error(f"--quant {q}: needs ai-edge-quantizer (pip install "
                                  "'ai-edge-quantizer==0.10.*'), which is not installed")


def param_count_from_config(config: Any, colbert_dim: int) -> int:
    """Parameters of the exported graph (type embedding folded, pooler dropped)."""
    h, f, n = config.hidden_size, config.intermediate_size, config.num_hidden_layers
    layer = 4 * (h * h + h) + 2 * 2 * h + (h * f + f) + (f * h + h)
    emb = (config.vocab_size + config.max_position_embeddings) * h + 2 * h
    heads = colbert_dim * h + colbert_dim + h + 1
    return emb + n * layer + heads


__all__ = ["FORMATS", "BuildOptions", "check_variants", "parse_seq_lens",
           "param_count_from_config", "validate_against_config"]
