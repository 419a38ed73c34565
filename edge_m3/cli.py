"""`edge-m3` command line: build, embed, verify, check, bench, index, search.

The one place that knows the flags: each command's arguments become one typed options object
(names resolved: a QuantRecipe, a Runtime, a WeightCache), and the layers below never see a
flag. Every user error ends the same way: one line on stderr naming the file or option, exit 2;
an error raised below about an option (OptionError) is given the flag here.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from edge_m3.errors import EdgeM3Error, OptionError, disk_full

if TYPE_CHECKING:  # the options types; their modules are imported only when a command runs
    from edge_m3.builder import BuildOptions
    from edge_m3.harness.bench import BenchOptions
    from edge_m3.harness.check import CheckOptions
    from edge_m3.harness.embed import EmbedOptions
    from edge_m3.harness.verify import VerifyOptions
    from edge_m3.retrieval.build import IndexOptions, SearchOptions, WriteOptions
    from edge_m3.runtime.registry import Runtime

EXIT_USAGE = 2


class _Parser(argparse.ArgumentParser):
    """argparse that reports a bad option in one line (no usage dump) and exits 2."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"edge-m3: error: {message}\n")
        raise SystemExit(EXIT_USAGE)


def _build_parser() -> argparse.ArgumentParser:
    from edge_m3.builder.options import DEFAULT_CHECKPOINT, DEFAULT_OUT, DEFAULT_QUANT, DEFAULT_SEQ_LENS
    from edge_m3.contract import FORMATS, HEADS, QUANTS
    from edge_m3.runtime.registry import RUNTIMES

    p = _Parser(prog="edge-m3", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    b = sub.add_parser("build", help="checkpoint -> quantized TFLite/ONNX bundle")
    b.add_argument("--checkpoint", default=DEFAULT_CHECKPOINT,
                   help="hub id or local BAAI/bge-m3-layout snapshot directory")
    b.add_argument("--revision", default=None, help="hub revision (branch, tag or commit)")
    b.add_argument("--quant", default=DEFAULT_QUANT,
                   help=f"{', '.join(QUANTS)} (comma list: one bundle each)")
    b.add_argument("--seq-lens", default=None,
                   help=f"fixed signature lengths (default {','.join(map(str, DEFAULT_SEQ_LENS))}, "
                        "ending at the checkpoint's own maximum when shorter)")
    b.add_argument("--heads", default=None, help=f"outputs to export, of {', '.join(HEADS)} (default: "
                   "every head the checkpoint has: BGE-M3's three, a sentence-transformers model's dense)")
    b.add_argument("--formats", default="tflite", help=f"{', '.join(FORMATS)} (comma list)")
    b.add_argument("--out", default=DEFAULT_OUT, help="bundle dir ({quant} is substituted)")
    b.add_argument("--kits", default=None, help="dir holding android_assets/ and ios_assets/ "
                   "to copy the first bundle into (default: . when it has them; 'none' to skip)")
    b.add_argument("--vocab-corpus", action="append", default=[], type=Path,
                   help="trim the vocabulary to the tokens of this UTF-8 corpus (repeatable)")
    b.add_argument("--vocab-min-count", type=int, default=1)
    b.add_argument("--calibration", type=Path, default=None,
                   help="texts the calibrated files calibrate on (int16x8; int8's ONNX smoothing): a "
                        "corpus file (JSON lines: text, kind, lang, group; default: the committed "
                        "fidelity sample)")
    b.add_argument("--ort", action="store_true",
                   help="with --formats onnx: also an ORT-format copy for onnxruntime mobile")
    b.add_argument("--no-self-check", action="store_true",
                   help="skip loading each variant under tflite-runtime and LiteRT")
    b.add_argument("-q", "--quiet", action="store_true")

    e = sub.add_parser("embed", help="run the device pipeline from a bundle")
    e.add_argument("bundle", type=Path)
    e.add_argument("text", nargs="*")
    e.add_argument("--texts", type=Path, help="UTF-8 file, one text per line; or, with --out, a corpus: "
                   ".txt (one text per line), .jsonl, .parquet or a Parquet dataset directory")
    e.add_argument("--out", type=Path, help="bulk job: X.parquet (dataset dir), X.npy (dir of arrays) or "
                   "X.jsonl, written in committed parts (default: JSON lines on stdout)")
    e.add_argument("--runtime", default="litert", choices=list(RUNTIMES))
    e.add_argument("--threads", type=int, default=None)
    e.add_argument("--outputs", default=None,
                   help=f"with --out: heads to write, comma list of {', '.join(HEADS)} (default: all the "
                        "bundle has)")
    e.add_argument("--resume", action="store_true", help="with --out: continue the job that wrote it")
    e.add_argument("--id-column", default="id", help="JSON-lines / Parquet id key ('' for the row number)")
    e.add_argument("--text-column", default="text", help="JSON-lines / Parquet text key")
    e.add_argument("--part-rows", type=int, default=4096,
                   help="with --out: rows per committed part (what a killed job redoes at most)")
    e.add_argument("--lanes", type=int, default=None,
                   help="with --out: model processes sharing --threads (default: one a thread; 1: in process)")
    e.add_argument("--engine", default="local", choices=("local", "ray"),
                   help="ray: Ray Data (pip install 'edge-m3[ray]'); --out is a Parquet dataset dir")
    e.add_argument("--ray-address", default=None,
                   help="a running cluster (ray start --head prints it; default: a local one)")
    e.add_argument("--ray-workers", type=int, default=2, help="with --engine ray: model actors")

    v = sub.add_parser("verify", help="gate a bundle on parity, latency and memory")
    v.add_argument("bundle", type=Path)
    v.add_argument("--reference", required=True, help="hub id or checkpoint directory")
    v.add_argument("--texts", type=Path,
                   help="UTF-8 file, one text per line, checked with the built-in retrieval set; "
                        "or a corpus FILE.jsonl of queries and passages (tools/inputs/"
                        "make_fidelity_corpus.py) checked instead of it, with figures per language")
    v.add_argument("--sample", type=int, default=None,
                   help="with a corpus: verify on a stratified sample of at most N texts")
    v.add_argument("--seed", type=int, default=0, help="the --sample's seed (default 0)")
    v.add_argument("--report", type=Path, default=None,
                   help="dir for report.json, report.md and plots (default reports/<bundle name>)")
    v.add_argument("--runtime", default=None,
                   help="comma list of runtimes to verify (default: every installed one)")
    v.add_argument("--thresholds", type=Path, default=None,
                   help="JSON {variant: {figure_min|figure_max: value}} to gate on instead of the "
                        "variant's own thresholds (edge_m3/contract.py)")
    v.add_argument("--threads", type=int, default=1, help="runtime threads (default 1)")
    v.add_argument("--cache", type=Path, default=None,
                   help="reference-output cache (default $EDGE_M3_CACHE or ~/.cache/edge-m3)")
    v.add_argument("--no-cache", action="store_true", help="always recompute the references")

    k = sub.add_parser("check", help="on the device: replay golden.json, time every signature, "
                       "read peak RSS (runtime install only, no reference)")
    k.add_argument("bundle", type=Path)
    k.add_argument("--runtime", default=None,
                   help="comma list of runtimes (default: every installed one that runs the model)")
    k.add_argument("--threads", type=int, default=1, help="runtime threads (default 1)")
    k.add_argument("--repeats", type=int, default=10, help="timed runs per signature")
    k.add_argument("--warmup", type=int, default=2, help="untimed runs per signature first")
    k.add_argument("--report", type=Path, default=None,
                   help="dir for report.json and report.md (default reports/<bundle name>-check)")
    k.add_argument("--weight-cache", choices=("memory", "off"), default="memory",
                   help="LiteRT: pack the weights once per model (CompiledModel, XNNPACK weight cache; "
                        "the default) or once per signature (Interpreter: 'off')")

    c = sub.add_parser("coverage", help="share of a text file's tokens a trimmed bundle lacks")
    c.add_argument("bundle", type=Path)
    c.add_argument("texts", type=Path)

    bn = sub.add_parser("bench", help="latency and memory across runtimes and threads")
    bn.add_argument("bundle", type=Path)
    bn.add_argument("--runtimes", default=None, help="comma list (default: every installed one)")
    bn.add_argument("--threads", default="1,2", help="comma list of thread counts")
    bn.add_argument("--lengths", default=None,
                    help="tokens per input, padded to the smallest signature that holds them "
                         "(default: each signature length)")
    bn.add_argument("--reference", default=None, help="checkpoint for the torch fp32 baseline")
    bn.add_argument("--repeats", type=int, default=10, help="timed runs per cell")
    bn.add_argument("--warmup", type=int, default=2, help="untimed runs per cell first")
    bn.add_argument("--weight-cache", default="cold,warm",
                    help="LiteRT's XNNPACK weight cache, each a run of its own: off (one packed "
                         "copy per signature), memory, cold (a new cache file), warm (a second "
                         "start mapping it); default cold,warm")
    bn.add_argument("--json", type=Path, default=None, help="also write the figures here")
    _retrieval_parsers(sub, RUNTIMES)
    return p


# --------------------------------------------------------------------------- index, search (issue 25)


def _retrieval_parsers(sub: argparse._SubParsersAction, runtimes: dict) -> None:
    from edge_m3.contract import COLBERT_STORES, DENSE_STORES, SCORE_MODES

    ix = sub.add_parser("index", help="embed a corpus with a bundle's model into a search index folder")
    ix.add_argument("bundle", type=Path)
    ix.add_argument("corpus", type=Path, help="UTF-8 text (one passage per line, id = row), "
                    ".jsonl or Parquet (id and text columns)")
    ix.add_argument("--out", type=Path, required=True, help="the index folder to create (must not exist)")
    ix.add_argument("--dense", default="float32", choices=DENSE_STORES,
                    help="dense store: float32, or int8 with a scale per row")
    ix.add_argument("--colbert", default=None, choices=COLBERT_STORES,
                    help="ColBERT vectors: fp16 (the default when the bundle has a ColBERT head), int8 "
                         "(scale per vector) or none (the default without one)")
    ix.add_argument("--no-chunk", dest="chunk", action="store_false",
                    help="truncate a passage longer than the largest signature (default: split it into "
                         "overlapping chunks, each a row; search ranks a passage by its best chunk)")
    ix.add_argument("--id-column", default="id", help="JSON lines / Parquet: the id column")
    ix.add_argument("--text-column", default="text", help="JSON lines / Parquet: the text column")
    ix.add_argument("--runtime", default="litert", choices=list(runtimes))
    ix.add_argument("--threads", type=int, default=None)
    ix.add_argument("-q", "--quiet", action="store_true", help="no progress bar")

    se = sub.add_parser("search", help="search an index: one JSON line of hits per query")
    se.add_argument("index", type=Path)
    se.add_argument("--queries", type=Path, required=True, help="UTF-8 file, one query per line")
    se.add_argument("--mode", default="dense", choices=SCORE_MODES)
    se.add_argument("--k", type=int, default=10, help="hits per query (default 10)")
    se.add_argument("--weights", default=None,
                    help="dense,sparse,colbert weights of the hybrid modes (default 1,1,1 as compute_score)")
    se.add_argument("--bundle", type=Path, default=None,
                    help="the bundle that embeds the queries (default: the one the index records); "
                         "it must hold the index's model")
    se.add_argument("--chunks", action="store_true",
                    help="the best chunks, as [id, chunk, score], not the best passages ([id, score], "
                         "each passage by its best chunk)")
    se.add_argument("--out", type=Path, default=None, help="write JSON lines here instead of stdout")
    se.add_argument("--runtime", default="litert", choices=list(runtimes))
    se.add_argument("--threads", type=int, default=None)

    ad = sub.add_parser("add", help="embed a corpus and add it to an index folder (an id already there "
                        "is updated)")
    ad.add_argument("index", type=Path)
    ad.add_argument("corpus", type=Path, help="as `index` reads it: text lines, .jsonl or Parquet")
    ad.add_argument("--bundle", type=Path, default=None,
                    help="the bundle that embeds (default: the one the index records)")
    ad.add_argument("--no-chunk", dest="chunk", action="store_false",
                    help="truncate a passage longer than the largest signature (default: its chunks)")
    ad.add_argument("--id-column", default="id", help="JSON lines / Parquet: the id column")
    ad.add_argument("--text-column", default="text", help="JSON lines / Parquet: the text column")
    ad.add_argument("--runtime", default="litert", choices=list(runtimes))
    ad.add_argument("--threads", type=int, default=None)
    ad.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    rm = sub.add_parser("remove", help="remove passages from an index folder")
    rm.add_argument("index", type=Path)
    rm.add_argument("ids", type=Path, help='one id per line, as JSON (12, "12") or plain text')
    cp = sub.add_parser("compact", help="fold an index folder's writes into a new memory-mapped base")
    cp.add_argument("index", type=Path)


def _write_opts(a: argparse.Namespace) -> WriteOptions:
    from edge_m3.retrieval.build import WriteOptions
    from edge_m3.runtime.registry import RUNTIMES

    if a.command == "add":
        return WriteOptions(index=a.index, source=a.corpus, runtime=RUNTIMES[a.runtime], bundle=a.bundle,
                            threads=_threads(a.threads), id_column=a.id_column, text_column=a.text_column,
                            chunk=a.chunk)
    return WriteOptions(index=a.index, source=getattr(a, "ids", None))


def _index(a: argparse.Namespace) -> IndexOptions:
    from edge_m3.retrieval.build import IndexOptions
    from edge_m3.runtime.registry import RUNTIMES

    return IndexOptions(bundle=a.bundle, corpus=a.corpus, out=a.out, runtime=RUNTIMES[a.runtime],
                        dense=a.dense, colbert=a.colbert, threads=_threads(a.threads),
                        id_column=a.id_column, text_column=a.text_column, chunk=a.chunk)


def _search(a: argparse.Namespace) -> SearchOptions:
    from edge_m3.contract import mode_weights
    from edge_m3.errors import OptionError
    from edge_m3.retrieval.build import SearchOptions
    from edge_m3.runtime.registry import RUNTIMES

    if a.k < 1:
        raise OptionError("k", a.k, "must be at least 1")
    weights = None
    if a.weights is not None:
        try:
            weights = mode_weights([float(w) for w in a.weights.split(",")])
        except ValueError:
            raise OptionError("weights", a.weights, "must be three numbers: dense,sparse,colbert") from None
    return SearchOptions(index=a.index, queries=a.queries, runtime=RUNTIMES[a.runtime], mode=a.mode, k=a.k,
                         out=a.out, bundle=a.bundle, weights=weights, threads=_threads(a.threads),
                         chunks=a.chunks)


# --------------------------------------------------------------------------- the other commands


def _build(a: argparse.Namespace) -> BuildOptions:
    from edge_m3.builder import BuildOptions
    from edge_m3.common.options import parse_choices, parse_ints, split_list
    from edge_m3.contract import FORMATS, HEADS, recipe

    kits = None if a.kits == "none" else Path(a.kits or ".")
    if kits is not None and a.kits and not all((kits / k).is_dir() for k in ("android_assets", "ios_assets")):
        # named on purpose: a mistyped --kits must not silently leave the apps' bundles stale
        raise EdgeM3Error(f"--kits {a.kits}: has no android_assets/ and ios_assets/ to copy the bundle "
                          "into ('none' to skip the copy)")
    quants = tuple(recipe(q, "quant") for q in split_list(a.quant, "--quant"))
    if len(quants) > 1 and "{quant}" not in a.out:
        raise EdgeM3Error(f"--out {a.out}: needs {{quant}} when building several quants")
    if a.vocab_min_count < 1:
        raise EdgeM3Error(f"--vocab-min-count {a.vocab_min_count}: must be at least 1")
    return BuildOptions(
        checkpoint=a.checkpoint,
        revision=a.revision,
        quants=quants,
        seq_lens=None if a.seq_lens is None else tuple(sorted(parse_ints(a.seq_lens, "--seq-lens",
                                                                         minimum=2))),  # <s> and </s>
        heads=None if a.heads is None else tuple(parse_choices(a.heads, "--heads", HEADS)),
        formats=tuple(parse_choices(a.formats, "--formats", FORMATS)),
        out=a.out,
        android_dir=(kits / "android_assets") if kits and (kits / "android_assets").is_dir() else None,
        ios_dir=(kits / "ios_assets") if kits and (kits / "ios_assets").is_dir() else None,
        self_check=not a.no_self_check,
        vocab_corpus=tuple(a.vocab_corpus),
        vocab_min_count=a.vocab_min_count,
        ort=a.ort,
        calibration=a.calibration,
    )


def _cmd_coverage(a: argparse.Namespace) -> int:
    import json

    from edge_m3.bundle import load_bundle
    from edge_m3.tokenizer.vocab import oov_share, read_corpus

    bundle = load_bundle(a.bundle)
    spec = bundle.manifest.tokenizer
    tok = bundle.tokenizer()
    if spec.vocab_map:
        kept = json.loads((bundle.path / spec.vocab_map["file"]).read_text())["kept_ids"]
    else:
        kept = range(spec.vocab_size)
    outside, total = oov_share(tok, kept, read_corpus(a.texts, "texts"))
    print(f"{a.texts}: {total:,} tokens, {outside:,} outside the kept set "
          f"({outside / max(total, 1):.2%}); kept ids: {len(kept):,} of {spec.vocab_size:,}")
    return 0


def _threads(value: int | None) -> int | None:
    from edge_m3.common.options import check_threads

    check_threads(value, "--threads")
    return value


def _runtimes(value: str | None, flag: str) -> tuple[Runtime, ...]:
    """A comma list of registered runtimes (none given: the command picks)."""
    from edge_m3.common.options import split_list
    from edge_m3.runtime.registry import RUNTIMES

    if not value:
        return ()
    names = split_list(value, flag)
    for name in names:
        if name not in RUNTIMES:
            raise EdgeM3Error(f"{flag} {name}: unknown (choose from {', '.join(RUNTIMES)})")
    return tuple(RUNTIMES[n] for n in names)


def _embed(a: argparse.Namespace) -> EmbedOptions:
    from edge_m3.common.options import parse_choices
    from edge_m3.contract import HEADS
    from edge_m3.harness.embed import EmbedOptions
    from edge_m3.runtime.registry import RUNTIMES

    bulk_only = [f for f, on in (("--outputs", a.outputs), ("--resume", a.resume),
                                 ("--engine ray", a.engine == "ray")) if on]
    if bulk_only and not a.out:
        raise EdgeM3Error(f"{bulk_only[0]}: needs --out (a bulk job's X.parquet, X.npy or X.jsonl)")
    for flag, value in (("--part-rows", a.part_rows), ("--lanes", a.lanes), ("--ray-workers", a.ray_workers)):
        if value is not None and value < 1:
            raise EdgeM3Error(f"{flag} {value}: must be at least 1")
    return EmbedOptions(bundle=a.bundle, runtime=RUNTIMES[a.runtime], texts=tuple(a.text),
                        texts_file=a.texts, out=a.out, threads=_threads(a.threads),
                        outputs=tuple(parse_choices(a.outputs, "--outputs", HEADS)) if a.outputs else (),
                        resume=a.resume, id_column=a.id_column or None, text_column=a.text_column,
                        part_rows=a.part_rows, lanes=a.lanes, engine=a.engine,
                        ray_address=a.ray_address, ray_workers=a.ray_workers)


def _verify(a: argparse.Namespace) -> VerifyOptions:
    from edge_m3.harness.references import default_cache_dir
    from edge_m3.harness.verify import VerifyOptions

    if a.sample is not None and a.sample < 2:
        raise OptionError("sample", a.sample, "must be at least 2 (a query and a passage)")
    return VerifyOptions(bundle=a.bundle, reference=a.reference, texts_file=a.texts,
                         sample=a.sample, seed=a.seed, report=a.report,
                         runtimes=_runtimes(a.runtime, "--runtime"), thresholds=a.thresholds,
                         threads=_threads(a.threads) or 1,
                         cache=None if a.no_cache else Path(a.cache or default_cache_dir()))


def _check(a: argparse.Namespace) -> CheckOptions:
    from edge_m3.harness.bench import Repeats
    from edge_m3.harness.check import CheckOptions
    from edge_m3.runtime.registry import WeightCache

    threads = _threads(a.threads)
    return CheckOptions(bundle=a.bundle, runtimes=_runtimes(a.runtime, "--runtime"),
                        threads=threads or 1, timing=Repeats(a.repeats, a.warmup), report=a.report,
                        weight_cache=WeightCache.OFF if a.weight_cache == "off" else WeightCache.MEMORY)


def _bench(a: argparse.Namespace) -> BenchOptions:
    from edge_m3.common.options import parse_choices, parse_ints
    from edge_m3.harness.bench import CACHE_MODES, BenchOptions, Repeats

    threads = tuple(parse_ints(a.threads, "--threads"))
    modes = tuple(parse_choices(a.weight_cache, "--weight-cache", CACHE_MODES))
    return BenchOptions(bundle=a.bundle, runtimes=_runtimes(a.runtimes, "--runtimes"), threads=threads,
                        lengths=tuple(parse_ints(a.lengths, "--lengths")) if a.lengths else (),
                        reference=a.reference, timing=Repeats(a.repeats, a.warmup),
                        cache_modes=modes, json=a.json)


def _needs_builder(command: str) -> None:
    """`pip install edge-m3` is the device side; build and verify need the [build] extra."""
    import importlib.util

    def absent(module: str) -> bool:
        try:
            return importlib.util.find_spec(module) is None
        except ImportError:  # a broken or blocked install counts as absent
            return True

    missing = [m for m in ("tensorflow", "keras") if absent(m)]
    if missing:
        raise EdgeM3Error(f"edge-m3 {command} needs {' and '.join(missing)}, which the runtime "
                          "install leaves out: pip install 'edge-m3[build]'")


def _dispatch(a: argparse.Namespace) -> int:
    if a.command in ("build", "verify"):
        _needs_builder(a.command)
    if a.command == "build":
        from edge_m3.builder import build

        build(_build(a), quiet=a.quiet)
        return 0
    if a.command == "coverage":
        return _cmd_coverage(a)
    if a.command == "embed":
        from edge_m3.harness.embed import cmd_embed

        return cmd_embed(_embed(a))
    if a.command == "bench":
        from edge_m3.harness.bench import cmd_bench

        return cmd_bench(_bench(a))
    if a.command == "check":
        from edge_m3.harness.check import cmd_check

        return cmd_check(_check(a))
    if a.command in ("index", "search"):  # issue 25
        from edge_m3.retrieval.build import cmd_index, cmd_search

        return cmd_index(_index(a), quiet=a.quiet) if a.command == "index" else cmd_search(_search(a))
    if a.command in ("add", "remove", "compact"):  # issue 35
        from edge_m3.retrieval.build import cmd_add, cmd_compact, cmd_remove

        opts = _write_opts(a)
        return (cmd_add(opts, quiet=a.quiet) if a.command == "add"
                else cmd_remove(opts) if a.command == "remove" else cmd_compact(opts))
    from edge_m3.harness.verify import cmd_verify

    return cmd_verify(_verify(a))


def option_flags(command: str, parser: argparse.ArgumentParser | None = None) -> dict[str, str]:
    """How `command`'s options are spelled, by name (argparse dest): `--runtimes` for bench's
    runtimes, `coverage TEXTS` for a positional. OptionErrors raised below are rendered with it."""
    parser = parser or _build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    flags = {}
    for action in sub.choices[command]._actions:
        if action.option_strings:
            flags[action.dest] = max(action.option_strings, key=len)
        else:
            flags[action.dest] = f"{command} {action.dest.upper()}"
    return flags


def main(argv: Sequence[str] | None = None) -> int:
    """Console entry point."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    parser = _build_parser()
    args = parser.parse_args(argv)
    try:
        return _dispatch(args)
    except EdgeM3Error as exc:
        text = exc.render(option_flags(args.command, parser)) if isinstance(exc, OptionError) else str(exc)
        msg = " ".join(text.split())
        sys.stderr.write(f"edge-m3: error: {msg}\n")
        return EXIT_USAGE
    except KeyboardInterrupt:
        sys.stderr.write("edge-m3: interrupted; nothing was replaced\n")
        return 130
    except Exception as exc:  # a full disk is the user's to fix: one line (errors.disk_full)
        full = disk_full(exc)
        if full is None:
            raise
        sys.stderr.write(f"edge-m3: error: {full}\n")
        return EXIT_USAGE


if __name__ == "__main__":
    raise SystemExit(main())
