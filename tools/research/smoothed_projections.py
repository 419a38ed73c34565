"""SMOOTHED_PROJECTIONS and SMOOTH_ALPHA (edge_m3/export/onnx.py): where ONNX int8 loses its worst
texts, and which change wins them back (issue 36, item 1).

Takes the fp32 ONNX file of a bundle built from the checkpoint, applies the int8 recipe's
rewrites (`edge_m3.export.onnx`) or a variant of them, and runs it with onnxruntime (one
thread, each text at its own length: the figures equal the harness's padded run to the last
digit for the shipped recipe) against FlagEmbedding. Needs `calibrated_onnx_recipes`'s work folder after

    python -m tools.research.calibrated_onnx_recipes ... --smooth 0.5 --variants fp32

(the fp32 bundle `ours-fp32`, the cached outputs of ours and the peer, and the calibration
slice's activation maxima `smooth-stats-200-36.npz`). Then

    python -m tools.research.smoothed_projections --work /work/peer-run --ablate SPEC [SPEC ...]
    python -m tools.research.smoothed_projections --work /work/peer-run --whole SPEC [SPEC ...]

`--ablate` runs the 25 worst texts (by dense cosine) of ours ONNX, ours TFLite and the peer
(67 texts) and prints each variant's worst; `--whole` prints calibrated_onnx_recipes's figures on the whole
corpus and on the gate part (the corpus minus the calibration slice). A SPEC is `;`-separated
`key=value`s, each defaulting to the shipped recipe:

- `tables=row|rowcol|rowcol-word|float`: the tables through `per_row_int8_tables` (`rowcol`:
  `column_scales="all"`, `rowcol-word`: `"vocabulary"`), or left float;
- `word=H`, `pos=H` (instead of `tables`): that table fake-quantized by scheme H (`row`,
  `rowcol`, `tensor`, `tensorcol`, `groupN`: N columns a scale), the rest float;
- `float=10,11`: the encoder layers whose MatMuls stay float (the recipe's: the last two);
  `only=FRAG`: only MatMuls whose node name holds FRAG are quantized; `mm=float`: none;
- `alpha=0.5` (`sites=qkv,ffn_in`): SmoothQuant-style scales from the slice's maxima, one Mul
  before each smoothed MatMul, its weight rows multiplied back (calibrated_onnx_recipes's `--smooth`, here
  on the ONNX graph).

`--results FILE` writes the `--whole`/`--bundle`/`--cached` table as a result file for
docs/benchmarks.md (fidelity_int8.json), through tools/bench/results.py.
"""

from __future__ import annotations

import argparse
import copy
import re
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

SITE_OF = {"query": "qkv", "key": "qkv", "value": "qkv", "attn_out": "attn_out",
           "ffn_in": "ffn_in", "ffn_out": "ffn_out"}
MATMUL = re.compile(r"/layer_(\d+)_1/(query|key|value|attn_out|ffn_in|ffn_out)_1/Tensordot/MatMul$")


def fake_table(model: Any, fragment: str, how: str) -> None:
    """The 2-D initializer whose name holds `fragment`, quantized and dequantized in place."""
    from onnx import numpy_helper

    for t in model.graph.initializer:
        if fragment not in t.name or len(t.dims) != 2:
            continue
        x = numpy_helper.to_array(t).astype(np.float32)
        cols = np.ones((1, x.shape[1]), np.float32)
        if how.endswith("col"):
            cols = np.abs(x).max(0, keepdims=True)
            cols = np.where(cols > 0, cols / cols[cols > 0].mean(), 1.0).astype(np.float32)
        u = x / cols
        if how.startswith("row"):
            s = np.abs(u).max(1, keepdims=True) / 127
        elif how.startswith("tensor"):
            s = np.full((1, 1), np.abs(u).max() / 127, np.float32)
        elif how.startswith("group"):
            g = int(how[5:])
            r = u.reshape(u.shape[0], -1, g)
            s = np.abs(r).max(2, keepdims=True) / 127
            u = (np.clip(np.round(r / np.maximum(s, 1e-30)), -127, 127) * s).reshape(x.shape)
            t.CopyFrom(numpy_helper.from_array(u.astype(np.float32), t.name))
            continue
        else:
            raise SystemExit(f"table scheme {how!r}: row, rowcol, tensor, tensorcol or groupN")
        s = np.maximum(s, 1e-30)
        q = np.clip(np.round(u / s), -127, 127) * s * cols
        t.CopyFrom(numpy_helper.from_array(q.astype(np.float32), t.name))


def smooth(model: Any, alpha: float, sites: Sequence[str], stats: Mapping[str, np.ndarray]) -> None:
    """s = max|X|^alpha / max|W|^(1-alpha) per input channel (clipped to [0.01, 100]) of each
    smoothed MatMul: a Mul by 1/s before it, its weight's rows times s (exact in fp32)."""
    from onnx import helper, numpy_helper

    inits = {t.name: t for t in model.graph.initializer}
    groups: dict[str, list[Any]] = {}
    for n in model.graph.node:
        m = MATMUL.search(n.name)
        if n.op_type == "MatMul" and m and SITE_OF[m.group(2)] in sites:
            groups.setdefault(f"layer_{m.group(1)}/{SITE_OF[m.group(2)]}", []).append(n)
    muls = {}
    for key, nodes in groups.items():
        ws = [numpy_helper.to_array(inits[n.input[1]]) for n in nodes]
        w_max = np.max([np.abs(w).max(axis=1) for w in ws], axis=0)
        x_max = np.maximum(stats[key], 1e-5)
        s = np.clip(x_max ** alpha / np.maximum(w_max, 1e-5) ** (1 - alpha), 1e-2, 1e2).astype(np.float32)
        for n, w in zip(nodes, ws, strict=True):
            inits[n.input[1]].CopyFrom(numpy_helper.from_array((w * s[:, None]).astype(np.float32),
                                                               n.input[1]))
            inv, out = n.name + "/smooth_inv", n.name + "/smoothed"
            model.graph.initializer.append(numpy_helper.from_array((1 / s).astype(np.float32), inv))
            muls[n.name] = helper.make_node("Mul", [n.input[0], inv], [out], name=out)
            n.input[0] = out
    nodes = []
    for n in model.graph.node:
        if n.name in muls:
            nodes.append(muls[n.name])
        nodes.append(n)
    del model.graph.node[:]
    model.graph.node.extend(nodes)


def variant(base: Any, spec: str, stats: Mapping[str, np.ndarray]) -> Any:
    from edge_m3.export.onnx import (
        ROW_INT8_FLOAT_LAST_LAYERS,
        last_layers,
        per_row_int8_matmuls,
        per_row_int8_tables,
    )

    parts = dict(p.split("=", 1) for p in spec.split(";") if p)
    model = copy.deepcopy(base)
    if "word" in parts or "pos" in parts:
        for frag, key in (("word_embeddings", "word"), ("position_embeddings", "pos")):
            if key in parts:
                fake_table(model, frag, parts[key])
    elif parts.get("tables", "row") != "float":
        cols = {"rowcol": "all", "rowcol-word": "vocabulary"}.get(parts.get("tables", "row"), "none")
        per_row_int8_tables(model, column_scales=cols)
    if "alpha" in parts:
        smooth(model, float(parts["alpha"]), parts.get("sites", "qkv,ffn_in").split(","), stats)
    if parts.get("mm", "int8") != "float":
        if "only" in parts:
            keep = [n.name for n in model.graph.node if n.op_type == "MatMul" and parts["only"] not in n.name]
        elif "float" in parts:
            keep = [f"/layer_{k}_" for k in parts["float"].split(",") if k]
        else:
            keep = last_layers(model, ROW_INT8_FLOAT_LAST_LAYERS)
        per_row_int8_matmuls(model, keep, unsigned_weights=True)
    return model


def run(model: Any, ref: Sequence[Mapping[str, Any]], idx: Sequence[int],
        special: Mapping[str, int]) -> list[dict[str, Any]]:
    import onnxruntime as ort

    from edge_m3.runtime.postprocess import postprocess
    from edge_m3.spec import COLBERT_VECS, DENSE_VECS, SPARSE_WEIGHTS

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    s = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    names = [DENSE_VECS, SPARSE_WEIGHTS, COLBERT_VECS]
    outs = []
    for i in idx:
        ids = np.asarray(ref[i]["input_ids"], np.int32)[None]
        raw = dict(zip(names, s.run(names, {"input_ids": ids, "attention_mask": np.ones_like(ids)}),
                       strict=True))
        outs.append({"input_ids": list(ref[i]["input_ids"]),
                     **postprocess(raw, list(ref[i]["input_ids"]), special)})
    return outs


def dense_cos(outs: Sequence[Mapping[str, Any]], ref: Sequence[Mapping[str, Any]]) -> np.ndarray:
    a = np.stack([np.asarray(o["dense_vecs"], np.float64).ravel() for o in outs])
    b = np.stack([np.asarray(r["dense_vecs"], np.float64).ravel() for r in ref])
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


def main(argv: Sequence[str] | None = None) -> int:
    import onnx

    from edge_m3.bundle import load_bundle
    from edge_m3.harness.fidelity import default_corpus, read_corpus, sample
    from edge_m3.harness.verify import formula_pairs
    from edge_m3.harness.workers import load_outputs
    from tools.research.calibrated_onnx_recipes import HEAD, figures, flag_reference, our_outputs, peer_outputs

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--work", type=Path, required=True, help="calibrated_onnx_recipes's work folder")
    p.add_argument("--texts", type=Path, default=default_corpus())
    p.add_argument("--ablate", nargs="*", default=[], metavar="SPEC")
    p.add_argument("--whole", nargs="*", default=[], metavar="SPEC")
    p.add_argument("--bundle", type=Path, action="append", default=[],
                   help="also a built int8 bundle's ONNX file, run by the harness's bundle worker "
                        "(as `verify` runs it: padded to its signatures), on both sets")
    p.add_argument("--cached", action="append", default=[], metavar="TAG",
                   help="also calibrated_onnx_recipes's cached outputs of that tag (`ours` is the shipped int8 "
                        "bundle's; `peer` the peer's int8), on both sets")
    p.add_argument("--calibration", type=int, default=200)
    p.add_argument("--calibration-seed", type=int, default=36)
    p.add_argument("--calibration-file", type=Path, default=None,
                   help="the gate part is the corpus minus this file's groups (e.g. the committed "
                        "sample a default build calibrates on) instead of minus the slice")
    from tools.bench import results

    results.add_option(p, "the whole and gate-part table: fidelity_int8.json")
    a = p.parse_args(argv)
    if a.results and not (a.whole or a.bundle or a.cached):
        p.error("--results needs --whole, --bundle or --cached (the table it writes)")
    load = results.Load()
    fp32 = a.work / "ours-fp32"
    stats_file = a.work / f"smooth-stats-{a.calibration}-{a.calibration_seed}.npz"
    for need in (fp32 / "manifest.json", stats_file, a.work / "outs-ours-onnxruntime.json"):
        if not need.is_file():
            p.error(f"{need}: run tools.research.calibrated_onnx_recipes --smooth 0.5 --variants fp32 first")
    corpus = read_corpus(a.texts)
    records = [*corpus.queries, *corpus.passages]
    texts = [r["text"] for r in records]
    nq = len(corpus.queries)
    sets = {"user": [], "queries": list(range(nq)), "passages": list(range(nq, len(texts)))}
    ref = flag_reference((a.work / "e5ckpt").resolve(), texts, 512, formula_pairs(sets))
    special = load_bundle(fp32, verify=False).manifest.tokenizer.special_ids
    with np.load(stats_file) as z:
        stats = {k: z[k] for k in z.files}
    base = onnx.load(str(fp32 / "model_fp32.onnx"))

    if a.ablate:
        worst: set[int] = set()
        for tag in ("outs-ours-onnxruntime", "outs-ours-litert"):
            if (a.work / f"{tag}.json").is_file():
                worst |= set(np.argsort(dense_cos(load_outputs(a.work / tag)[0], ref))[:25].tolist())
        with np.load(a.work / "peer-hidden.npz") as z:
            peer = [{"dense_vecs": z[f"h{i}"][0]} for i in range(len(texts))]
        worst |= set(np.argsort(dense_cos(peer, ref))[:25].tolist())
        idx = sorted(worst)
        print(f"# the {len(idx)} worst texts of ours ONNX, ours TFLite and the peer")
        for spec in a.ablate:
            c = dense_cos(run(variant(base, spec, stats), ref, idx, special), [ref[i] for i in idx])
            o = np.argsort(c)[:3]
            print(f"{spec or 'recipe':50s} min {c.min():.5f} mean {c.mean():.6f} worst "
                  + " ".join(f"#{idx[j]} {c[j]:.5f}" for j in o), flush=True)
    if a.whole or a.bundle or a.cached:
        calib = {r["group"] for r in (read_corpus(a.calibration_file).records if a.calibration_file
                                      else sample(corpus, a.calibration, a.calibration_seed).records)}
        gate = [i for i, r in enumerate(records) if r["group"] not in calib]
        gate_corpus = type(corpus)(tuple(records[i] for i in gate))
        gq = sum(1 for i in gate if i < nq)
        lines = HEAD.replace("file MB", "set").splitlines()
        print(*lines, sep="\n")
        todo: list[tuple[str, Any]] = [(b.name, b) for b in a.bundle] + [
            (spec, None) for spec in a.whole] + [(f"cached {t}", t) for t in a.cached]
        for spec, what in todo:
            t0 = time.time()
            if isinstance(what, Path):
                outs = our_outputs(what, "onnxruntime", texts, a.work, what.name)
            elif what == "peer":
                ns = argparse.Namespace(work=a.work, checkpoint=(a.work / "e5ckpt").resolve(),
                                        max_length=512)
                outs = peer_outputs(ns, a.work / "peer-cache", texts, ref, special)[0]
            elif what is not None:
                outs = load_outputs(a.work / f"outs-{what}")[0]
            else:
                outs = run(variant(base, spec, stats), ref, range(len(ref)), special)
            for label, f in (("whole", figures(outs, ref, nq, corpus.relevant())),
                             ("gate part", figures([outs[i] for i in gate], [ref[i] for i in gate],
                                                   gq, gate_corpus.relevant()))):
                d = f["dense_cosine"]["all"]
                ag = f["retrieval_top10_agreement"]
                lines.append(f"| {spec or 'recipe'} | {label} | {d['min']:.5f} | {d['p1']:.5f} "
                             f"| {d['mean']:.5f} | {f['lexical_abs_err']:.3f} ({f['lexical_abs_err_p99']:.3f}) "
                             f"| {f['colbert_score_abs_err']:.3f} ({f['colbert_score_abs_err_p99']:.3f}) "
                             f"| {ag['dense']:.3f} / {ag['sparse']:.3f} / {ag['colbert']:.3f} "
                             f"| {'pass' if not f['failed'] else 'FAIL'} |")
                print(lines[-1], flush=True)
            print(f"# {spec or 'recipe'}: {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
        if a.results:
            columns, table = results.markdown_table(lines)
            gate_of = (f"minus the groups of {a.calibration_file}" if a.calibration_file
                       else f"minus sample({a.calibration}, seed {a.calibration_seed})")
            results.write_result(a.results, title="ONNX int8 recipes against FlagEmbedding: whole corpus "
                                 "and gate part", module="tools.research.smoothed_projections",
                                 columns=columns, rows=table, load=load,
                                 notes=[f"{len(texts):,} texts ({nq:,} queries); the gate part is the "
                                        f"corpus {gate_of}: {len(gate):,} texts."])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
