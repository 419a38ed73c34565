"""AEQ_RECIPES (edge_m3/export/aeq.py): quantization sensitivity, one group of layers quantized at a
time, the rest left in float.

    python -m tools.research.aeq_recipes demo/e5-small-fp32 --checkpoint demo/e5-small-bge-m3-layout

For every layer group of edge_m3.export.aeq (embeddings; attention q, k, v, o; FFN in; FFN
out; the sparse/ColBERT heads; each encoder layer) and every `--bits`, ai-edge-quantizer
quantizes only that group's weights (symmetric, one scale per output channel, dynamic-range
activations) in the float .tflite traced from the checkpoint; LiteRT then runs the built-in
retrieval set (plus `--texts`) through the fp32 bundle's device pipeline, and each group's
dense cosine, lexical weight error, ColBERT score error and retrieval top-10 agreement are
measured against the fp32 bundle's own outputs (edge_m3.lab.metrics, as `verify` does).
Full recipes come last: everything at each bit width, and each AEQ recipe a variant ships.
Prints a markdown table; `--json` keeps the figures. Needs ai-edge-quantizer.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

LATENCY_RUNS = 9
GROUPS = ["embeddings", "attn_q", "attn_k", "attn_v", "attn_o", "ffn_in", "ffn_out", "heads"]


def _texts(extra: Path | None) -> tuple[list[str], dict[str, list[int]]]:
    from edge_m3.common.files import read_texts
    from edge_m3.lab.inputs import retrieval_set

    user = read_texts(extra) if extra else []
    rs = retrieval_set()
    queries, passages = [q["text"] for q in rs["queries"]], list(rs["passages"])
    n_u, n_q = len(user), len(queries)
    sets = {"user": list(range(n_u)), "queries": list(range(n_u, n_u + n_q)),
            "passages": list(range(n_u + n_q, n_u + n_q + len(passages)))}
    return [*user, *queries, *passages], sets


def child(model: str, bundle_dir: str, texts_json: str, threads: str, out: str) -> None:
    """LiteRT over `model` with the fp32 bundle's tokenizer and signatures (its own process:
    the parent never loads a runtime, so each model's memory goes when its child ends)."""
    from edge_m3.bundle import load_bundle
    from edge_m3.device.workers import save_outputs, synthetic_inputs
    from edge_m3.runtime import RUNTIMES
    from edge_m3.runtime.pipeline import DevicePipeline
    from edge_m3.runtime.runners import TFLiteRunner

    bundle = load_bundle(Path(bundle_dir), verify=False)
    sigs = bundle.model_entry("tflite").signatures
    runner = TFLiteRunner(Path(model), sigs, RUNTIMES["litert"], int(threads))
    pipe = DevicePipeline(bundle, RUNTIMES["litert"], runner=runner)
    texts = json.loads(Path(texts_json).read_text())
    outs = [pipe.embed(t) for t in texts]
    n = 128 if 128 in pipe.lengths else max(pipe.lengths)  # p50, all real tokens, warmed up
    ids, mask = synthetic_inputs(n, bundle.manifest.tokenizer.model_rows, pipe.tokenizer.bos,
                                 pipe.tokenizer.eos)
    times = []
    for _ in range(2 + LATENCY_RUNS):
        t0 = time.perf_counter()
        runner.run(ids, mask)
        times.append(time.perf_counter() - t0)
    save_outputs(Path(out), outs, {"p50_ms": 1e3 * sorted(times[2:])[LATENCY_RUNS // 2],
                                   "length": n})


def _run(model: Path, bundle: Path, texts_json: Path, threads: int, out: Path) -> Any:
    from edge_m3.common.proc import run_children
    from edge_m3.device.workers import load_outputs

    done = run_children([([str(Path(__file__).resolve()), "--child", str(model), str(bundle),
                           str(texts_json), str(threads), str(out)], f"LiteRT on {model.name}")])[0]
    if done.error:
        raise SystemExit(done.error)
    return load_outputs(out)


def _row(name: str, bits: str, size: int, f: dict[str, Any], meta: dict[str, Any]) -> dict[str, Any]:
    cos = f.get("dense_cosine", {}).get("all", {})
    return {"group": name, "bits": bits, "size_mb": size / 1e6, "dense_cos_min": cos.get("min"),
            "dense_cos_mean": cos.get("mean"), "lexical_abs_err": f.get("lexical_abs_err"),
            "lexical_top10_overlap": f.get("lexical_top10_overlap", {}).get("mean"),
            "p50_ms": meta.get("p50_ms"), "p50_length": meta.get("length"),
            "colbert_score_abs_err": f.get("colbert_score_abs_err"),
            "retrieval_top10_agreement": f.get("retrieval_top10_agreement", {}).get("min"),
            "retrieval_by_method": {m: v for m, v in f.get("retrieval_top10_agreement", {}).items()
                                    if m != "min"}}


def table(rows: list[dict[str, Any]]) -> str:
    n = rows[0]["p50_length"] if rows else ""
    head = ("| quantized | bits | file | dense cos min / mean | lexical err | lexical top-10 "
            "overlap | ColBERT score err | retrieval top-10 agreement (dense / sparse / ColBERT) "
            f"| p50 @{n} |\n" + "|" + " --- |" * 9)
    lines = [head]
    for r in rows:
        by = r["retrieval_by_method"]
        lines.append(f"| {r['group']} | {r['bits']} | {r['size_mb']:.1f} MB | "
                     f"{r['dense_cos_min']:.5f} / {r['dense_cos_mean']:.5f} | "
                     f"{r['lexical_abs_err']:.4f} | {r['lexical_top10_overlap']:.3f} | "
                     f"{r['colbert_score_abs_err']:.4f} | {r['retrieval_top10_agreement']:.3f} ("
                     + " / ".join(f"{by[m]:.3f}" for m in ("dense", "sparse", "colbert") if m in by)
                     + f") | {r['p50_ms']:.1f} ms |")
    return "\n".join(lines)


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(*sys.argv[2:])
        return 0
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("bundle", type=Path, help="the fp32 bundle (reference outputs, tokenizer)")
    p.add_argument("--checkpoint", type=Path, required=True, help="what the bundle was built from")
    p.add_argument("--bits", default="4,8", help="weight widths to try per group (comma list)")
    p.add_argument("--groups", default=None, help="comma list (default: every group and layer)")
    p.add_argument("--granularity", default="CHANNELWISE",
                   help="CHANNELWISE, or BLOCKWISE_32/64/128/256")
    p.add_argument("--mix", action="append", default=[], metavar="NAME=RULES",
                   help="also measure a whole recipe, RULES = group:bits[:granularity"
                        "[:algorithm]],... (later rules win; repeatable)")
    p.add_argument("--no-sweep", action="store_true", help="only the --mix recipes")
    p.add_argument("--compare", default="", help="also run these bundles' files (e.g. int8: "
                   "the bundle path with fp32 replaced by int8), same texts and timing")
    p.add_argument("--texts", type=Path, default=None, help="extra texts, one per line")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--json", type=Path, default=None)
    a = p.parse_args()

    from edge_m3.bundle import load_bundle
    from edge_m3.common.options import parse_ints, split_list
    from edge_m3.export import worker
    from edge_m3.export.aeq import AEQ_RECIPES, parse_rules
    from edge_m3.lab.metrics import compare

    bundle = load_bundle(a.bundle)
    entry = bundle.model_entry("tflite")
    if bundle.manifest.quant != "fp32":
        raise SystemExit(f"{a.bundle}: an fp32 bundle is the reference (this one is "
                         f"{bundle.manifest.quant})")
    layers = int(json.loads((a.checkpoint / "config.json").read_text())["num_hidden_layers"])
    groups = split_list(a.groups, "--groups") if a.groups else \
        [*GROUPS, *(f"layer_{i}" for i in range(layers))]
    bits = parse_ints(a.bits, "--bits", minimum=2)
    mixes = {m.partition("=")[0]: parse_rules(m.partition("=")[2]) for m in a.mix}
    a.compare = split_list(a.compare, "--compare") if a.compare else []
    texts, sets = _texts(a.texts)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="edge-m3-sens-") as tmp_s:
        tmp = Path(tmp_s)
        (tmp / "texts.json").write_text(json.dumps(texts))
        t0 = time.perf_counter()
        worker.trace(a.checkpoint, None, entry.seq_lens, bundle.manifest.heads, False, None,
                     tmp / "lookup")
        worker.convert_float(tmp / "lookup", tmp / "float.tflite", entry.seq_lens)
        print(f"traced + converted float in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
        ref, ref_meta = _run(a.bundle / entry.file, a.bundle, tmp / "texts.json", a.threads,
                             tmp / "ref")
        q, ps = sets["queries"], sets["passages"]

        def measure(name: str, label: str, rules: list[tuple[str, int, str]]) -> None:
            t1 = time.perf_counter()
            model = tmp / "q.tflite"
            info = worker.quantize_aeq(tmp / "float.tflite", model, rules, name)
            outs, meta = _run(model, a.bundle, tmp / "texts.json", a.threads, tmp / "q")
            row = _row(name, label, info["size"], compare(outs, ref, sets, q, ps), meta)
            rows.append(row)
            print(table([row]).splitlines()[-1] + f"  ({time.perf_counter() - t1:.0f} s)",
                  file=sys.stderr, flush=True)

        outs, meta = _run(tmp / "float.tflite", a.bundle, tmp / "texts.json", a.threads, tmp / "f")
        rows.append(_row("nothing (float, EMBEDDING_LOOKUP trace)", "32",
                         (tmp / "float.tflite").stat().st_size, compare(outs, ref, sets, q, ps),
                         meta))
        for quant in a.compare:  # the converter's own variants, built beside the fp32 bundle
            other = load_bundle(Path(str(a.bundle).replace("fp32", quant)))
            outs, meta = _run(other.path / other.model_entry("tflite").file, a.bundle,
                              tmp / "texts.json", a.threads, tmp / "c")
            rows.append(_row(f"bundle {quant} (TFLite converter)", quant,
                             other.manifest.model_bytes(other.model_entry("tflite")),
                             compare(outs, ref, sets, q, ps), meta))
        if not a.no_sweep:
            for b in bits:
                for g in groups:
                    measure(g, str(b), [(g, b, a.granularity)])
            for b in bits:
                measure("everything", str(b), [("all_fc", b, a.granularity),
                                               ("embeddings", b, a.granularity)])
            for name, rules in AEQ_RECIPES.items():
                measure(f"recipe {name}", "mixed", [tuple(r) for r in rules])
        for name, rules in mixes.items():
            measure(name, "mixed", rules)
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1) + "\n")
    print(table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
