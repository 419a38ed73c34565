"""Fuzz one target with atheris: `python -m tools.fuzz.run TARGET --seconds N | --runs N`.

The committed seeds and regression inputs start the run; new inputs go to `--corpus` (default
.fuzz/corpus/TARGET, not committed) and a contract violation is written to .fuzz/crashes/TARGET/
(copy it to tools/fuzz/regressions/TARGET/ once fixed: tests/test_fuzz.py replays it). Time and
memory are bounded by libFuzzer (-timeout, -rss_limit_mb) and by an address-space limit, so an
allocation sized by a length field fails as a MemoryError, which the contract reports. libFuzzer
prints executions and coverage ("cov:", "stat::number_of_executed_units") on stderr.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from pathlib import Path

import atheris

with atheris.instrument_imports(include=["edge_m3"]):
    import edge_m3.retrieval.scores  # noqa: F401
    import edge_m3.runtime.pipeline  # noqa: F401  (replay_exact's post-processing)
    import edge_m3.tokenizer.normalizer  # noqa: F401
    import edge_m3.tokenizer.unigram  # noqa: F401
    import edge_m3.tokenizer.vocab  # noqa: F401
    from tools.fuzz import harness
    from tools.fuzz.mend import mend_trace_cmp

    # Every reader a target can reach, instrumented here (imports inside functions come later).
    from tools.fuzz.targets import (  # noqa: F401
        bpe,
        bundle,
        corpus_jsonl,
        corpus_parquet,
        golden,
        index,
        manifest,
        model_config,
        safetensors,
        spmodel,
        st_layout,
        torch_pickle,
        vocab_map,
        vocab_txt,
        wordpiece,
        writable,
    )

ADDRESS_SPACE_EXTRA = 3 << 29  # beyond what the imports reserved
ROOT = Path(__file__).resolve().parents[2]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.fuzz.run", description=__doc__.splitlines()[0])
    ap.add_argument("target", choices=harness.TARGETS)
    ap.add_argument("--seconds", type=int, default=0, help="stop after this long (0: no limit)")
    ap.add_argument("--runs", type=int, default=-1, help="stop after this many inputs (-1: no limit)")
    ap.add_argument("--corpus", type=Path, default=None, help="where new inputs go")
    ap.add_argument("--crashes", type=Path, default=None, help="where violating inputs go")
    ap.add_argument("--max-len", type=int, default=0, help="longest input (0: twice the largest seed)")
    ap.add_argument("--replay", type=Path, nargs="+", default=(),
                    help="check these inputs once each (a found crash, with its whole traceback)")
    args, extra = ap.parse_known_args(argv)
    t = harness.target(args.target)
    if args.replay:
        return replay(t, args.replay)
    corpus = args.corpus or ROOT / ".fuzz" / "corpus" / t.name
    crashes = args.crashes or ROOT / ".fuzz" / "crashes" / t.name
    corpus.mkdir(parents=True, exist_ok=True)
    crashes.mkdir(parents=True, exist_ok=True)
    seeds = harness.inputs(t.name)
    max_len = args.max_len or max([4096, *(2 * p.stat().st_size for p in seeds)])
    dirs = [str(d) for d in (harness.SEEDS / t.name, harness.REGRESSIONS / t.name) if d.is_dir()]
    flags = [f"-timeout={int(harness.HANG_SECONDS)}", f"-rss_limit_mb={harness.rss_limit_mb()}",
             f"-max_len={max_len}", f"-artifact_prefix={crashes}/", "-print_final_stats=1",
             f"-runs={args.runs}", f"-max_total_time={args.seconds}"]

    def one(data: bytes) -> None:
        mend_trace_cmp()
        try:
            harness.check(t, data, bounded=False)
        except harness.ContractViolation as exc:  # atheris prints only the outer traceback
            traceback.print_exception(exc.__cause__)
            raise

    harness.limit_address_space(ADDRESS_SPACE_EXTRA)
    atheris.Setup([sys.argv[0], *flags, *extra, str(corpus), *dirs], one)
    atheris.Fuzz()
    return 0




def replay(t: harness.Target, paths: list[Path]) -> int:
    """Each input's verdict; 1 when any breaks the contract."""
    bad = 0
    for path in paths:
        try:
            print(f"{path}: {harness.check(t, path.read_bytes())}")
        except harness.ContractViolation as exc:
            bad += 1
            traceback.print_exception(exc.__cause__)
            print(f"{path}: {exc}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
