"""Tokenization throughput: the device tokenizer vs transformers' (Rust) XLMRobertaTokenizer.

    python tools/bench_tokenizer.py [SNAPSHOT_DIR]

Without a snapshot it trains a 6,000-piece SentencePiece model on the project corpus.
"""

from __future__ import annotations

import sys
import tempfile
import time
from importlib import resources
from pathlib import Path


def _rate(fn, texts: list[str], repeat: int) -> tuple[float, int]:
    fn(texts[:5])
    t0 = time.perf_counter()
    tokens = 0
    for _ in range(repeat):
        tokens += sum(len(ids) for ids in fn(texts))
    dt = time.perf_counter() - t0
    return repeat * len(texts) / dt, int(tokens / dt)


def main() -> None:
    from transformers import XLMRobertaTokenizer

    from edge_m3.synthetic import train_sentencepiece
    from edge_m3.tokenizer import Tokenizer

    corpus = resources.files("edge_m3").joinpath("data/corpus_multilingual.txt").read_text("utf-8")
    lines = [line for line in corpus.split("\n") if line.strip() and len(line) < 2000]
    if len(sys.argv) > 1:
        d = Path(sys.argv[1])
    else:
        d = Path(tempfile.mkdtemp())
        train_sentencepiece(d / "sentencepiece.bpe.model", 6000, lines)
    ours = Tokenizer(d / "sentencepiece.bpe.model")
    ref = XLMRobertaTokenizer.from_pretrained(str(d))
    short = [" ".join(line.split()[:10]) for line in lines][:500]
    long_text = " ".join(lines)
    longs = [long_text[i * 6000:(i + 1) * 6000] for i in range(8)]
    print(f"{'texts':<26}{'tokenizer':<22}{'texts/s':>10}{'tokens/s':>12}")
    for label, texts, repeat in (("short (~10 words)", short, 3), ("long (~6,000 chars)", longs, 2)):
        for name, fn in (("edge-m3 (Python)", lambda ts: [ours.encode(t) for t in ts]),
                         ("transformers (Rust)", lambda ts: ref(ts)["input_ids"])):
            rate, tps = _rate(fn, texts, repeat)
            print(f"{label:<26}{name:<22}{rate:>10,.0f}{tps:>12,}")


if __name__ == "__main__":
    main()
