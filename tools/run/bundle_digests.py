"""Build a fixed set of bundles and print every shipped file's SHA-256: a refactor's proof.

    python -m tools.run.bundle_digests CHECKPOINT --out DIR [--quants fp32,int8] \
        [--seq-lens 8,16] [--formats tflite,onnx] [--vocab-corpus FILE] > digests.txt

Run it on the commit before a change and on the commit after, with the same arguments, and
`diff` the two outputs: a behaviour-neutral change leaves every model file, golden.json and
tokenizer file byte-identical. manifest.json is left out (it records the build's time and
edge-m3's version), and so are its self-check lines, which name runtime versions; its other
fields are printed as one canonical JSON line, so a changed manifest field shows in the diff.

An ONNX file is not byte-identical from one export to the next even from the same code
(tf2onnx numbers and orders some nodes differently run to run, measured here): it is printed as
`onnx-canonical` over what the file computes with: every weight's bytes, dtype and shape, and
the count of each op type (names left out), so that a changed weight or graph still shows.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

from edge_m3.common.files import sha256_file

VOLATILE = ("created", "edge_m3_version")


def onnx_canonical(path: Path) -> str:
    """SHA-256 of the sorted weight digests (bytes, dtype, shape) and the sorted op types."""
    import hashlib

    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(path))
    weights = sorted(hashlib.sha256(numpy_helper.to_array(t).tobytes()
                                    + f"{t.data_type}{list(t.dims)}".encode()).hexdigest()
                     for t in model.graph.initializer)
    ops = sorted(n.op_type for n in model.graph.node)
    return hashlib.sha256(json.dumps([weights, ops]).encode()).hexdigest()


def digests(bundle: Path) -> list[str]:
    """`name sha256` per file (manifest.json as its canonical fields), sorted by name."""
    lines = []
    for f in sorted(p for p in bundle.iterdir() if p.is_file()):
        if f.name == "manifest.json":
            data = json.loads(f.read_text(encoding="utf-8"))
            for key in VOLATILE:
                data.pop(key, None)
            for model in data.get("models", []):
                model.pop("self_check", None)
                model.pop("oldest_runtime", None)
            for name, entry in data.get("files", {}).items():
                if name.endswith(".onnx"):
                    entry.clear()  # its bytes vary (above); the file's own line compares it
            lines.append(f"manifest.json {json.dumps(data, sort_keys=True)}")
        elif f.suffix == ".onnx":
            lines.append(f"{f.name} onnx-canonical {onnx_canonical(f)}")
        else:
            lines.append(f"{f.name} {sha256_file(f)}")
    return lines


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("checkpoint", type=Path)
    p.add_argument("--out", type=Path, required=True, help="where the bundles are built (emptied)")
    p.add_argument("--quants", default="fp32,fp16,int8,int8-tflite214,int4")
    p.add_argument("--seq-lens", default="8,16")
    p.add_argument("--formats", default="tflite,onnx", help="ONNX for the variants that have it")
    p.add_argument("--vocab-corpus", type=Path, default=None,
                   help="also build a trimmed int8 bundle from this text")
    p.add_argument("--no-build", action="store_true", help="digest the bundles already in --out")
    a = p.parse_args()
    from edge_m3.cli import main as cli
    from edge_m3.spec import RECIPES

    if a.out.exists() and not a.no_build:
        shutil.rmtree(a.out)
    common = ["--checkpoint", str(a.checkpoint), "--seq-lens", a.seq_lens, "--kits", "none",
              "--no-self-check", "-q"]
    quants = a.quants.split(",")
    builds = {f"{fmt}-{{quant}}": ["--quant", ",".join(q for q in quants if RECIPES[q].recipe_for(fmt)),
                                   "--formats", fmt] for fmt in a.formats.split(",")}
    if a.no_build:
        builds = {}
    if a.vocab_corpus and not a.no_build:
        builds["trimmed-{quant}"] = ["--quant", "int8", "--vocab-corpus", str(a.vocab_corpus)]
    for name, args in builds.items():
        code = cli(["build", *common, *args, "--out", str(a.out / name)])
        if code != 0:
            raise SystemExit(f"build {name} failed ({code})")
    for bundle in sorted(d for d in a.out.iterdir() if d.is_dir()):
        for line in digests(bundle):
            print(f"{bundle.name}/{line}")


if __name__ == "__main__":
    main()
