"""Fuzz one of the iOS kit's readers with libFuzzer: `python -m tools.fuzz.kits.fuzz_swift TARGET
--seconds N | --runs N` (TARGET: spmodel, manifest, bundle, golden, vocab_map, wordpiece, bpe,
index, writable; tools/fuzz/kits/swift/FuzzTargets.swift).

tools/fuzz/kits/swift/build.sh compiles the kit's sources and the targets with
-sanitize=fuzzer,address (never into Package.swift's products). The run starts from the Python
targets' committed seeds (tools/fuzz/seeds, read in place; the WordPiece vocab.txt cut from the
tiny WordPiece bundle seed) and the regression inputs (tools/fuzz/kits/regressions/TARGET, and
the Python ones, tools/fuzz/regressions/TARGET, of the targets whose inputs are alike:
harness.SHARED_WITH_KITS; replayed in CI by tests/test_fuzz_kits.py).
New inputs go to .fuzz/kit-corpus/TARGET, a violation to .fuzz/kit-crashes/TARGET/. Bounds: 20 s
per input (-timeout), 2 GB RSS (-rss_limit_mb) and 1 GB per allocation (-malloc_limit_mb).
`--replay FILE...` runs inputs once each.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from tools.fuzz.harness import REGRESSIONS as PY_REGRESSIONS
from tools.fuzz.harness import SEEDS, SHARED_WITH_KITS, rss_limit_mb, unpack

ROOT = Path(__file__).resolve().parents[3]
KITS = Path(__file__).resolve().parent
REGRESSIONS = KITS / "regressions"
HANG_SECONDS = 20
MALLOC_LIMIT_MB = 1024
# Target -> the committed seed folders it starts from.
SEED_DIRS = {
    "spmodel": [SEEDS / "spmodel"], "manifest": [SEEDS / "manifest"], "bundle": [SEEDS / "bundle"],
    "golden": [SEEDS / "golden"], "vocab_map": [SEEDS / "vocab_map"], "wordpiece": [],
    "bpe": [SEEDS / "bpe"], "index": [SEEDS / "index"], "writable": [SEEDS / "writable"],
}
TARGETS = tuple(SEED_DIRS)


def build() -> Path:
    out = subprocess.run([str(KITS / "swift" / "build.sh")], check=True, capture_output=True, text=True)
    return Path(out.stdout.strip().splitlines()[-1])


def env(target: str, *, fuzzing: bool = False) -> dict[str, str]:
    """The executable's environment. `fuzzing`: no allocation stacks in ASan's reports (ASan
    records one for every allocation, about 15% of a run's time); `--replay` of what a run saved
    gives the report with them."""
    # Swift's own crash handler reads the stack in a way ASan reports: libFuzzer's report is enough.
    asan = "detect_leaks=0:allocator_may_return_null=1" + (":malloc_context_size=0" if fuzzing else "")
    return {**os.environ, "EDGE_M3_FUZZ_TARGET": target, "EDGE_M3_FUZZ_DIR": str(ROOT / "tools" / "fuzz"),
            "SWIFT_BACKTRACE": "enable=no", "ASAN_OPTIONS": asan}


def seed_dirs(target: str) -> list[Path]:
    """Where a run starts: the real files (`real_seed_dirs`), then the regression inputs."""
    return [*real_seed_dirs(target), *(d for d in regressions(target) if d.is_dir())]


def real_seed_dirs(target: str) -> list[Path]:
    """The folders of real, valid files `target` starts from: each one is accepted."""
    dirs = [d for d in SEED_DIRS[target] if d.is_dir()]
    if target == "wordpiece":  # the tiny WordPiece bundle's vocab.txt, cut from its seed blob
        d = ROOT / ".fuzz" / "kit-seeds" / "wordpiece"
        d.mkdir(parents=True, exist_ok=True)
        vocab = unpack((SEEDS / "bundle" / "tiny-wordpiece").read_bytes())["vocab.txt"]
        (d / "tiny-wordpiece-vocab.txt").write_bytes(vocab)
        dirs.append(d)
    return dirs


def regressions(target: str) -> list[Path]:
    """The regression folders the kits replay for `target`: theirs, and Python's when shared."""
    return [REGRESSIONS / target, *([PY_REGRESSIONS / target] if target in SHARED_WITH_KITS else [])]


def flags(target: str, crashes: Path, max_len: int) -> list[str]:
    # RSS_LIMIT_MB past the peak the fuzzer inherits: Linux carries ru_maxrss over fork and execve,
    # so started by a test run that built bundles, a fixed bound reports every first input as
    # out of memory (tools/fuzz/harness.py's rss_limit_mb)
    # -detect_leaks=0: ASan's leak checker is off (detect_leaks=0 above), so libFuzzer's rerun of
    # each new input to look for leaks (about 10% of `index`) could never report one.
    return [f"-timeout={HANG_SECONDS}", f"-rss_limit_mb={rss_limit_mb()}", "-detect_leaks=0",
            f"-malloc_limit_mb={MALLOC_LIMIT_MB}", f"-max_len={max_len}", f"-artifact_prefix={crashes}/",
            "-print_final_stats=1"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.fuzz.kits.fuzz_swift",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("target", choices=TARGETS)
    ap.add_argument("--seconds", type=int, default=0)
    ap.add_argument("--runs", type=int, default=-1)
    ap.add_argument("--corpus", type=Path, default=None)
    ap.add_argument("--crashes", type=Path, default=None)
    ap.add_argument("--replay", type=Path, nargs="+", default=())
    args, extra = ap.parse_known_args(argv)
    exe = build()
    crashes = args.crashes or ROOT / ".fuzz" / "kit-crashes" / args.target
    crashes.mkdir(parents=True, exist_ok=True)
    if args.replay:
        cmd = [str(exe), *flags(args.target, crashes, 1 << 24), *extra, *map(str, args.replay)]
        return subprocess.run(cmd, env=env(args.target)).returncode
    corpus = args.corpus or ROOT / ".fuzz" / "kit-corpus" / args.target
    corpus.mkdir(parents=True, exist_ok=True)
    dirs = seed_dirs(args.target)
    sizes = [p.stat().st_size for d in dirs for p in d.iterdir() if p.is_file()]
    cmd = [str(exe), *flags(args.target, crashes, max([4096, *(2 * s for s in sizes)])),
           f"-runs={args.runs}", f"-max_total_time={args.seconds}", *extra, str(corpus), *map(str, dirs)]
    return subprocess.run(cmd, env=env(args.target, fuzzing=True)).returncode


if __name__ == "__main__":
    sys.exit(main())
