"""Each token's spread before each LayerNorm, in the float model (issue 36: the ColBERT maximum).

Every 8-bit file's largest ColBERT pair errors are the `</s>` vectors of 6- and 7-token
queries (`peer_int8 --worst 150`). This prints, for such queries, the standard deviation over the
hidden units of each LayerNorm's input (the residual sum after attention, `att`, and after the
FFN, `ffn`) per token, from the checkpoint's own float model (transformers' XLM-R, which
FlagEmbedding runs): where a `</s>` takes on `<s>`'s large activations in the middle layers,
the tokens whose vector quantization moves most.

    python -m tools.research.token_spread --checkpoint WORK/e5ckpt "paquete Stampede" ...
    python -m tools.research.token_spread --checkpoint WORK/e5ckpt --sample 12 --seed 1

`--sample N` prints instead one line for each of N corpus queries (random.sample, `--seed`):
its token count, and `</s>`'s and `<s>`'s spread after the FFN of layers 4 to 8.

Needs torch and transformers (the dev set's, for the reference): research only.
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Sequence
from pathlib import Path
from typing import Any


@functools.cache
def _model(checkpoint: Path) -> tuple[Any, Any]:
    from transformers import AutoModel, AutoTokenizer

    return AutoTokenizer.from_pretrained(checkpoint), AutoModel.from_pretrained(checkpoint).eval()


def spreads(checkpoint: Path, text: str) -> tuple[list[str], dict[str, list[float]]]:
    """The text's tokens and, per LayerNorm (`L{i}.att`, `L{i}.ffn`), each token's input std."""
    import torch

    tok, model = _model(checkpoint)
    seen: dict[str, list[float]] = {}

    def hook(name: str) -> Any:
        def record(_mod: Any, inputs: Any, _out: Any) -> None:
            seen[name] = [float(v) for v in inputs[0][0].std(-1)]
        return record

    handles = []
    for i, layer in enumerate(model.encoder.layer):
        handles.append(layer.attention.output.LayerNorm.register_forward_hook(hook(f"L{i}.att")))
        handles.append(layer.output.LayerNorm.register_forward_hook(hook(f"L{i}.ffn")))
    enc = tok(text, return_tensors="pt")
    with torch.no_grad():
        model(**enc)
    for h in handles:
        h.remove()
    order = [f"L{i}.{s}" for i in range(len(model.encoder.layer)) for s in ("att", "ffn")]
    return tok.convert_ids_to_tokens(enc["input_ids"][0]), {k: seen[k] for k in order}


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--checkpoint", type=Path, required=True)
    p.add_argument("texts", nargs="*")
    p.add_argument("--sample", type=int, default=0, metavar="N", help="N corpus queries, one line each")
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args(argv)
    if a.sample:
        import random

        from edge_m3.harness.fidelity import default_corpus, read_corpus

        random.seed(a.seed)
        queries = [r["text"] for r in read_corpus(default_corpus()).queries]
        print("| tokens | query | </s> / <s> after the FFN of layers 4 5 6 7 8 |\n| --- | --- | --- |")
        for q in random.sample(queries, a.sample):
            tokens, by_norm = spreads(a.checkpoint, q)
            ffn = [by_norm[f"L{i}.ffn"] for i in range(4, 9)]
            cells = " ".join(f"{x[-1]:.1f}/{x[0]:.1f}" for x in ffn)
            print(f"| {len(tokens)} | {q[:40]!r} | {cells} |")
    for text in a.texts:
        tokens, by_norm = spreads(a.checkpoint, text)
        print(f"\n{text!r}\n\n| LayerNorm input | {' | '.join(tokens)} |\n|" + " --- |" * (len(tokens) + 1))
        for name, stds in by_norm.items():
            print(f"| {name} | {' | '.join(f'{v:.3f}' for v in stds)} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
