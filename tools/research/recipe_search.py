"""Recipes chosen on the fidelity corpus (issue 26): ONNX int8 and TFLite int4 candidates, each
verified against FlagEmbedding exactly as the gate does.

    python -m tools.research.recipe_search onnx-int8 --base e5-int8 --fp32 e5-fp32 --reference CKPT --sample 500
    python -m tools.research.recipe_search int4 --base e5-int4 --fp32 e5-fp32 --reference CKPT --sample 500

Each candidate model file is made from the fp32 bundle's own float file (ONNX: the fp32 ONNX
file rewritten by edge_m3.export.onnx's functions; int4: ai-edge-quantizer over the float
EMBEDDING_LOOKUP trace, edge_m3.export.aeq), put into a copy of the `--base` bundle (the other
files hard-linked, the manifest's hashes updated) and run through `edge-m3 verify --texts
CORPUS --sample N --seed S` under one runtime (onnxruntime, LiteRT), so every figure is the
gate's own on the same texts and cached references. Prints one table: file size, dense cosine
min / 1st percentile, lexical error, ColBERT error, top-10 agreement (dense / sparse / ColBERT)
and the worst language; `--only NAME,...` runs a subset, `--mix NAME=RULES` adds int4 recipes.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from edge_m3.harness.fidelity import default_corpus

# --------------------------------------------------------------------------- ONNX int8

def _onnx_per_row(last_float: int = 0, parts: Sequence[str] = (), tables: str = "row",
                  everywhere: Sequence[str] = (), levels: int = 255, weight_levels: int = 127,
                  unsigned: bool = False) -> Callable[[Any], None]:
    """Per-row activations (edge_m3.export.onnx.per_row_int8_matmuls, `levels` activation
    codes, weights in -`weight_levels`..`weight_levels`, stored as uint8 + 128 when `unsigned`);
    the last `last_float` encoder layers' MatMuls in float (only `parts` of them when given),
    the MatMuls named by `everywhere` in float in every layer; tables int8 one scale per row
    ("row") or float."""
    def rewrite(model: Any) -> None:
        from edge_m3.export.onnx import last_layers, per_row_int8_matmuls, per_row_int8_tables

        keep = [f"{layer}1/{p}" if parts else layer for layer in last_layers(model, last_float)
                for p in (parts or [""])]
        keep += [f"/{p}" for p in everywhere]
        per_row_int8_matmuls(model, keep, levels, weight_levels, unsigned)
        if tables == "row":
            per_row_int8_tables(model)
    return rewrite


ONNX_CANDIDATES: dict[str, Callable[[Any], None]] = {
    "per row + tables, last 2 layers float (int8 weights: the shipped int8 before issue 26)": _onnx_per_row(2),
    "per row 7-bit activations + tables, last 2 layers float": _onnx_per_row(2, levels=127),
    "per row 7-bit activations + tables, all int8": _onnx_per_row(0, levels=127),
    "per row, 7-bit weights -63..63 + tables, last 2 layers float": _onnx_per_row(2, weight_levels=63),
    "per row, 7-bit weights -64..64 (reduce_range) + tables, last 2 layers float":
        _onnx_per_row(2, weight_levels=64),
    "per row, uint8 weights (zero point 128) + tables, last 2 layers float (the shipped int8)":
        _onnx_per_row(2, unsigned=True),
    "per row + tables, all int8": _onnx_per_row(0),
    "per row + tables, last 4 layers float": _onnx_per_row(4),
    "per row + tables, last 6 layers float": _onnx_per_row(6),
    "per row, tables float, last 2 layers float": _onnx_per_row(2, tables="float"),
    "per row + tables, FFN out float everywhere": _onnx_per_row(0, everywhere=["ffn_out"]),
    "per row + tables, FFN out float everywhere, last 2 layers float":
        _onnx_per_row(2, everywhere=["ffn_out"]),
    "per row + tables, FFN in + out float everywhere": _onnx_per_row(0, everywhere=["ffn_in", "ffn_out"]),
    "per row + tables, attention v + FFN out float everywhere":
        _onnx_per_row(0, everywhere=["value", "ffn_out"]),
}


def onnx_file(fp32: Path, rewrite: Callable[[Any], None], dst: Path, quant: str) -> None:
    import onnx

    from edge_m3.bundle import load_bundle
    from edge_m3.export.onnx import EXTERNAL_DATA_THRESHOLD, finish, save

    bundle = load_bundle(fp32, verify=False)
    entry = bundle.model_entry("onnx")
    model = onnx.load(str(fp32 / entry.file))
    rewrite(model)
    finish(model, quant, entry.seq_lens, bundle.manifest.heads)
    extra = save(model, dst, EXTERNAL_DATA_THRESHOLD)
    if extra:
        raise SystemExit(f"{dst}: external data ({extra}) is not handled here")


# --------------------------------------------------------------------------- int4

def _int4(block: int, tables: int | str, last8: int, extra8: Sequence[str] = ()) -> list[tuple[Any, ...]]:
    """FULLY_CONNECTED 4-bit in blocks of `block`; tables 4-bit in blocks of `tables`, or by
    an AEQ rule tail such as "CHANNELWISE:MSE" (one scale a row, clipped to the least squared
    error) or "BLOCKWISE_64:OCTAV"; the heads, `extra8` and the last `last8` layers 8-bit."""
    from edge_m3.export.aeq import CHANNELWISE

    table = (f"BLOCKWISE_{tables}",) if isinstance(tables, int) else tuple(tables.split(":"))
    return [("all_fc", 4, f"BLOCKWISE_{block}"), ("embeddings", 4, *table),
            ("heads", 8, CHANNELWISE), *((g, 8, CHANNELWISE) for g in extra8),
            *((f"layer_-{i}", 8, CHANNELWISE) for i in range(1, last8 + 1))]


def int4_candidates() -> dict[str, list[tuple[Any, ...]]]:
    """8-bit tables are out: on e5-small they are 96M of 118M parameters (int8 table alone
    ~96 MB, past 0.6x the int8 file); each 8-bit encoder layer costs ~0.9 MB there."""
    from edge_m3.export.aeq import AEQ_RECIPES, CHANNELWISE

    return {
        "blocks 64, tables 128, last 5 layers 8-bit (the shipped int4)": AEQ_RECIPES["aeq-int4-mixed"],
        "blocks 32, tables 32, last 5 layers 8-bit": _int4(32, 32, 5),
        "blocks 64, tables 128, last 8 layers 8-bit": _int4(64, 128, 8),
        "blocks 32, tables 32, last 8 layers 8-bit": _int4(32, 32, 8),
        "blocks 32, tables 32, last 10 layers 8-bit": _int4(32, 32, 10),
        "every FULLY_CONNECTED 8-bit, tables 4-bit blocks 32": [("all_fc", 8, CHANNELWISE),
                                                               ("embeddings", 4, "BLOCKWISE_32")],
        "blocks 64, tables 64, last 5 layers 8-bit": _int4(64, 64, 5),
        "blocks 64, tables 64, last 7 layers 8-bit": _int4(64, 64, 7),
        "blocks 64, tables per row MSE, last 5 layers 8-bit": _int4(64, "CHANNELWISE:MSE", 5),
        "blocks 64, tables per row MSE, last 10 layers 8-bit": _int4(64, "CHANNELWISE:MSE", 10),
        "blocks 64, tables 64 OCTAV, last 7 layers 8-bit": _int4(64, "BLOCKWISE_64:OCTAV", 7),
        "blocks 64, tables 128 OCTAV, last 10 layers 8-bit": _int4(64, "BLOCKWISE_128:OCTAV", 10),
        "every FULLY_CONNECTED 8-bit, tables 4-bit per row MSE": [("all_fc", 8, CHANNELWISE),
                                                                 ("embeddings", 4, CHANNELWISE, "MSE")],
    }


# --------------------------------------------------------------------------- bundle copies


def bundle_with(base: Path, model_name: str, made: Path, out: Path) -> Path:
    """A copy of `base` whose `model_name` is the file `made` (others hard-linked), its
    manifest's hash and size of that file updated."""
    from edge_m3.common.files import sha256_file
    from edge_m3.contract import MANIFEST

    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    for f in base.iterdir():
        if f.name not in (model_name, MANIFEST):
            os.link(f, out / f.name)
    shutil.move(str(made), out / model_name)
    manifest = json.loads((base / MANIFEST).read_text("utf-8"))
    manifest["files"][model_name] = {"sha256": sha256_file(out / model_name),
                                     "size": (out / model_name).stat().st_size}
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1), "utf-8")
    return out


def verify(bundle: Path, runtime: str, a: argparse.Namespace, report: Path) -> dict[str, Any]:
    from edge_m3.cli import main

    args = ["verify", str(bundle), "--reference", str(a.reference), "--texts", str(a.texts),
            "--runtime", runtime, "--report", str(report), "--cache", str(a.cache)]
    if a.sample:
        args += ["--sample", str(a.sample), "--seed", str(a.seed)]
    if main(args) == 2:
        raise SystemExit(f"verify {bundle}: bad input (above)")
    return json.loads((report / "report.json").read_text("utf-8"))


def row(name: str, report: dict[str, Any], runtime: str, bar: tuple[float, float]) -> str:
    from tools.research.fidelity_table import _worst

    f = report["runtimes"][runtime]
    if "error" in f:
        return f"| {name} | {f['error']} |"
    d, ag = f["dense_cosine"]["all"], f["retrieval_top10_agreement"]
    wc = _worst(f.get("per_language", {}), ("dense_cosine", "min"))
    meets = d["min"] >= bar[0] and ag["min"] >= bar[1]
    return (f"| {name} | {f['memory']['model_mb']:.1f} | {d['min']:.5f} | {d['p1']:.5f} "
            f"| {f['lexical_abs_err']:.3f} | {f['colbert_score_abs_err']:.3f} "
            f"| {ag['dense']:.3f} / {ag['sparse']:.3f} / {ag['colbert']:.3f} "
            f"| {wc[0]} {wc[1]:.4f} | {'yes' if meets else 'no'} |")


def main(argv: Sequence[str] | None = None) -> int:
    from edge_m3.harness.references import default_cache_dir

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("kind", choices=["onnx-int8", "int4"])
    p.add_argument("--base", type=Path, required=True, help="the built bundle of the variant")
    p.add_argument("--fp32", type=Path, required=True, help="an fp32 bundle (ONNX: --formats onnx)")
    p.add_argument("--reference", type=Path, required=True, help="the checkpoint")
    p.add_argument("--texts", type=Path, default=default_corpus())
    p.add_argument("--sample", type=int, default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cache", type=Path, default=default_cache_dir())
    p.add_argument("--out", type=Path, default=Path("reports/recipes"))
    p.add_argument("--only", default="", help="comma list of candidate names (substrings)")
    p.add_argument("--float-tflite", type=Path, default=None,
                   help="int4: the float EMBEDDING_LOOKUP .tflite to quantize (made, and kept "
                        "here, when missing)")
    p.add_argument("--mix", action="append", default=[], metavar="NAME=RULES",
                   help="int4: also this AEQ recipe (edge_m3.export.aeq.parse_rules syntax)")
    a = p.parse_args(argv)
    from edge_m3.bundle import load_bundle
    from edge_m3.contract import model_file

    base = load_bundle(a.base, verify=False)
    quant = base.manifest.quant
    only = [s for s in a.only.split(",") if s]
    if a.kind == "onnx-int8":
        runtime, bar, fmt = "onnxruntime", (0.995, 0.9), "onnx"
        candidates: dict[str, Any] = ONNX_CANDIDATES
    else:
        from edge_m3.export.aeq import parse_rules

        runtime, bar, fmt = "litert", (0.997, 0.9), "tflite"
        candidates = {**int4_candidates(),
                      **{m.partition("=")[0]: parse_rules(m.partition("=")[2]) for m in a.mix}}
    candidates = {k: v for k, v in candidates.items() if not only or any(o in k for o in only)}
    print("| recipe | file MB | dense cos min | p1 | lexical err | ColBERT err "
          "| top-10 agreement d / s / c | worst language (dense min) "
          f"| meets dense >= {bar[0]}, agreement >= {bar[1]} |\n" + "|" + " --- |" * 9, flush=True)
    with tempfile.TemporaryDirectory(prefix="edge-m3-recipes-", dir=a.out.parent
                                     if a.out.parent.exists() else None) as tmp_s:
        tmp = Path(tmp_s)
        float_tflite = a.float_tflite or tmp / "float.tflite"
        if a.kind == "int4" and not float_tflite.is_file():
            from edge_m3.export import worker

            fp32 = load_bundle(a.fp32, verify=False)
            entry = fp32.model_entry("tflite")
            worker.trace(a.reference, None, entry.seq_lens, fp32.manifest.heads, False, None,
                         tmp / "lookup")
            worker.convert_float(tmp / "lookup", float_tflite, entry.seq_lens)
        for i, (name, recipe) in enumerate(candidates.items()):
            made = tmp / f"cand{i}.{fmt}"
            if a.kind == "onnx-int8":
                onnx_file(a.fp32, recipe, made, quant)
            else:
                from edge_m3.export import worker

                worker.quantize_aeq(float_tflite, made, [tuple(r) for r in recipe], name)
            bundle = bundle_with(a.base, model_file(quant, fmt), made, tmp / f"bundle{i}")
            report = verify(bundle, runtime, a, a.out / f"{a.kind}-{i}")
            print(row(name, report, runtime, bar), flush=True)
            shutil.rmtree(bundle)
    print(f"\n{a.kind}: candidates against FlagEmbedding on {a.texts}"
          f"{f', sample {a.sample} seed {a.seed}' if a.sample else ''}, under {runtime}.",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
