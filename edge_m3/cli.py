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
from typing import TYPE_CHECKING, Any, NoReturn

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


# What the user reads: `edge-m3 -h` (the module docstring above is for developers).
DESCRIPTION = """\
edge-m3 turns a BGE-M3-style text-embedding model into quantized TFLite/ONNX bundles with
Android and iOS kits, checks them against the original model, measures them on this machine,
and builds and searches retrieval indexes with them.

commands, by job:
  make a bundle      build
  check a bundle     verify (against the checkpoint), check (on the device), coverage
  measure            bench
  use a bundle       embed
  retrieval          index, search, add, remove, compact
"""
EPILOG = """\
`edge-m3 command -h` shows a command's options and examples; docs/cli.md has them all.
-q/--quiet and -v/--verbose go before or after the command."""

# name -> (one-line help, description, examples): what `-h` and docs/cli.md show.
COMMANDS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "build": (
        "checkpoint -> quantized TFLite/ONNX bundle (and the kits' copy)",
        "Convert a checkpoint (a hub id or a local BAAI/bge-m3-layout snapshot) into one bundle per\n"
        "quant: the model files, the tokenizer, golden vectors and a manifest. Each variant is\n"
        "converted in a child process and self-checked under every installed TFLite runtime; a\n"
        "bundle replaces the old one only once it is complete. Needs pip install 'edge-m3[build]'.",
        ("edge-m3 build --checkpoint BAAI/bge-m3 --quant int8 --out dist/bge-m3-int8",
         "edge-m3 build --checkpoint BAAI/bge-m3 --quant fp32,int8 --formats tflite,onnx "
         "--out 'dist/bge-m3-{quant}' --kits none")),
    "embed": (
        "embed texts with a bundle, as an app would (JSON lines, or a bulk job with --out)",
        "Run the device pipeline (tokenizer, model, post-processing) from the bundle alone. Without\n"
        "--out, one JSON line per text goes to stdout (input_ids, signature and the heads'\n"
        "outputs). With --out it is a bulk job: a corpus of any size to Parquet, .npy or JSON lines\n"
        "in committed parts, resumable, bad rows reported and skipped.",
        ('edge-m3 embed dist/bge-m3-int8 "hello world" "bonjour le monde"',
         "edge-m3 embed dist/bge-m3-int8 --texts corpus.jsonl --out embeddings.parquet")),
    "verify": (
        "gate a bundle on parity with its checkpoint, latency and memory",
        "Embed a retrieval set (or your corpus) with the bundle under each runtime and with the\n"
        "reference checkpoint, and compare: dense cosine, lexical and ColBERT errors, retrieval\n"
        "figures, latency and memory, gated on the variant's thresholds. Writes report.json,\n"
        "report.md and plots; exits 1 when a gate fails. Needs pip install 'edge-m3[build]'.",
        ("edge-m3 verify dist/bge-m3-int8 --reference BAAI/bge-m3",
         "edge-m3 verify dist/bge-m3-int8 --reference BAAI/bge-m3 --texts fidelity.jsonl --sample 500 "
         "--runtime litert")),
    "check": (
        "on the device: replay golden.json, time every signature, read peak memory",
        "What to run on a phone-class machine with only a runtime installed: replay the bundle's\n"
        "golden vectors, time every signature and read the peak RSS, under each installed runtime\n"
        "that runs the model. No reference checkpoint needed; exits 1 when a golden case fails.",
        ("edge-m3 check dist/bge-m3-int8",
         "edge-m3 check dist/bge-m3-int8 --runtime litert --threads 4 --report reports/phone")),
    "coverage": (
        "the share of a text file's tokens a trimmed-vocabulary bundle lacks",
        "For a bundle built with --vocab-corpus: how many of a text file's tokens fall outside the\n"
        "kept vocabulary (they become <unk>), to decide whether the trim suits your texts.",
        ("edge-m3 coverage dist/bge-m3-int8 corpus.txt",)),
    "bench": (
        "latency and memory across runtimes, thread counts and input lengths",
        "Time the bundle's model under each runtime and thread count (each cell in a fresh\n"
        "process), with LiteRT's weight-cache modes, optionally against the checkpoint in torch.\n"
        "Prints a table; --json keeps the figures.",
        ("edge-m3 bench dist/bge-m3-int8",
         "edge-m3 bench dist/bge-m3-int8 --runtimes litert,onnxruntime --threads 1,4 --lengths 16,128 "
         "--json bench.json")),
    "index": (
        "embed a corpus with a bundle's model into a search index folder",
        "Embed every passage of a corpus (text lines, JSON lines or Parquet) with the bundle's\n"
        "model and write an index folder: dense vectors, lexical postings and ColBERT vectors when\n"
        "the bundle has those heads. Long passages are split into overlapping chunks.",
        ("edge-m3 index dist/bge-m3-int8 corpus.jsonl --out indexes/docs",
         "edge-m3 index dist/bge-m3-int8 passages.txt --out indexes/docs-int8 --dense int8 --colbert none")),
    "search": (
        "search an index: one JSON line of hits per query",
        "Embed each query with the bundle the index records (or --bundle) and print one JSON line\n"
        "per query: its best passages and their scores, by the --mode you choose.",
        ("edge-m3 search indexes/docs --queries queries.txt",
         "edge-m3 search indexes/docs --queries queries.txt --mode sparse+dense --k 5")),
    "add": (
        "embed a corpus and add it to an index folder (an id already there is updated)",
        "Embed the corpus with the index's bundle and add its passages, one transaction per batch:\n"
        "a killed run keeps every batch before it, and running it again completes it.",
        ("edge-m3 add indexes/docs new-passages.jsonl",)),
    "remove": (
        "remove passages from an index folder by id",
        "Remove the passages whose ids a file lists (one a line) from an index folder.",
        ("edge-m3 remove indexes/docs stale-ids.txt",)),
    "compact": (
        "fold an index folder's additions and removals into a new memory-mapped base",
        "Rewrite an index folder's base with every add and remove folded in, so searches map one\n"
        "file again instead of replaying the writes.",
        ("edge-m3 compact indexes/docs",)),
}


def _version() -> str:
    """The installed distribution's version (the package's own when run from a source tree)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("edge-m3")
    except PackageNotFoundError:
        from edge_m3 import __version__

        return __version__


def _verbosity(p: argparse.ArgumentParser, top: bool) -> None:
    """-q / -v, on the top parser and on every command: given before or after the command name
    (SUPPRESS on the commands: their absence does not undo the top parser's)."""
    default = False if top else argparse.SUPPRESS
    p.add_argument("-q", "--quiet", action="store_true", default=default,
                   help="no progress bars or phase lines on stderr (results and errors only)")
    p.add_argument("-v", "--verbose", action="store_true", default=default,
                   help="also the runtimes' own native log lines (LiteRT, onnxruntime) on stderr")


def _command(sub: argparse._SubParsersAction, name: str) -> argparse.ArgumentParser:
    """A command's parser: its help, description and examples from COMMANDS, and -q / -v."""
    help_, description, examples = COMMANDS[name]
    p = sub.add_parser(name, help=help_, description=description,
                       epilog="examples:\n" + "\n".join(f"  {e}" for e in examples),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    _verbosity(p, top=False)
    return p


def _alias(p: argparse.ArgumentParser, flag: str, dest: str, **kwargs: Any) -> None:
    """An old or other spelling of an option, accepted but not shown."""
    p.add_argument(flag, dest=dest, help=argparse.SUPPRESS, **kwargs)


# --------------------------------------------------------------------------- the shared options
# Each option several commands take is defined once here: one spelling, one help, one type.


def _runtime_option(p: argparse.ArgumentParser) -> None:
    """The one runtime a command embeds with (embed, index, search, add)."""
    from edge_m3.runtime.registry import RUNTIMES

    p.add_argument("--runtime", default="litert", choices=list(RUNTIMES), metavar="NAME",
                   help=f"the runtime that runs the model: {', '.join(RUNTIMES)} (default litert)")


def _runtimes_option(p: argparse.ArgumentParser, flag: str) -> None:
    """The runtimes a measuring command goes through, a comma list (verify, check: --runtime;
    bench: --runtimes), the other spelling accepted too."""
    from edge_m3.runtime.registry import RUNTIMES

    dest = flag.lstrip("-")
    p.add_argument(flag, dest=dest, default=None, metavar="LIST",
                   help=f"comma list of runtimes, of {', '.join(RUNTIMES)} (default: every installed "
                        "one that runs the model)")
    _alias(p, "--runtimes" if flag == "--runtime" else "--runtime", dest)


def _threads_option(p: argparse.ArgumentParser, default: int | None) -> None:
    """The runtime's thread count (bench takes a list: its own --threads)."""
    from edge_m3.spec import DEVICE_THREADS

    says = f"default {default}" if default else (
        f"default: the runtime's own; {DEVICE_THREADS} for a bulk job, an index or add")
    p.add_argument("--threads", type=int, default=default, metavar="N",
                   help=f"threads the runtime runs the model with ({says})")


def _timing_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--repeats", type=int, default=10, metavar="N",
                   help="timed runs of each signature (default 10)")
    p.add_argument("--warmup", type=int, default=2, metavar="N",
                   help="untimed runs of each signature before them (default 2)")


def _report_option(p: argparse.ArgumentParser, default: str) -> None:
    p.add_argument("--report", type=Path, default=None, metavar="DIR",
                   help=f"folder for report.json and report.md (default {default})")


def _reference_option(p: argparse.ArgumentParser, required: bool, use: str) -> None:
    p.add_argument("--reference", required=required, default=None, metavar="CHECKPOINT",
                   help=f"hub id (BAAI/bge-m3) or local checkpoint folder {use}")


def _column_options(p: argparse.ArgumentParser) -> None:
    """Which keys of a JSON-lines or Parquet corpus hold the id and the text (embed, index, add)."""
    p.add_argument("--id-column", default="id", metavar="NAME",
                   help="JSON lines / Parquet: the id column (default id; embed: '' numbers the rows)")
    p.add_argument("--text-column", default="text", metavar="NAME",
                   help="JSON lines / Parquet: the text column (default text)")


def _chunk_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--no-chunk", dest="chunk", action="store_false",
                   help="truncate a passage longer than the largest signature (default: split it into "
                        "overlapping chunks, each a row; search ranks a passage by its best chunk)")


def _index_bundle_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--bundle", type=Path, default=None, metavar="BUNDLE",
                   help="the bundle that embeds (default: the one the index records); it must hold "
                        "the index's model")


def _corpus_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("corpus", type=Path, help="UTF-8 text (one passage per line, id = row number), "
                   ".jsonl or Parquet (id and text columns)")


def _bundle_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("bundle", type=Path, help="a bundle folder (edge-m3 build's --out)")


def _index_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("index", type=Path, help="an index folder (edge-m3 index's --out)")


# --------------------------------------------------------------------------- the parser


def _build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="edge-m3", description=DESCRIPTION, epilog=EPILOG,
                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"edge-m3 {_version()}",
                   help="print edge-m3's version and exit")
    _verbosity(p, top=True)
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser, title="commands",
                           metavar="command")
    _build_command(sub)
    _embed_command(sub)
    _verify_command(sub)
    _check_command(sub)
    _coverage_command(sub)
    _bench_command(sub)
    _retrieval_commands(sub)
    return p


def _build_command(sub: argparse._SubParsersAction) -> None:
    from edge_m3.builder.options import DEFAULT_CHECKPOINT, DEFAULT_OUT, DEFAULT_QUANT, DEFAULT_SEQ_LENS
    from edge_m3.spec import FORMATS, HEADS, QUANTS

    b = _command(sub, "build")
    b.add_argument("--checkpoint", default=DEFAULT_CHECKPOINT,
                   help=f"hub id or local BAAI/bge-m3-layout snapshot folder (default {DEFAULT_CHECKPOINT})")
    b.add_argument("--revision", default=None, help="hub revision (branch, tag or commit)")
    b.add_argument("--quant", default=DEFAULT_QUANT, metavar="LIST",
                   help=f"variants, a comma list of {', '.join(QUANTS)}: one bundle each "
                        f"(default {DEFAULT_QUANT})")
    b.add_argument("--seq-lens", default=None, metavar="LIST",
                   help=f"fixed signature lengths (default {','.join(map(str, DEFAULT_SEQ_LENS))}, "
                        "ending at the checkpoint's own maximum when shorter)")
    b.add_argument("--heads", default=None, metavar="LIST",
                   help=f"outputs to export, a comma list of {', '.join(HEADS)} (default: every head the "
                        "checkpoint has: BGE-M3's three, a sentence-transformers model's dense)")
    b.add_argument("--formats", default="tflite", metavar="LIST",
                   help=f"model formats, a comma list of {', '.join(FORMATS)} (default tflite)")
    b.add_argument("--out", default=DEFAULT_OUT, metavar="DIR",
                   help=f"bundle folder, {{quant}} replaced by the variant (default {DEFAULT_OUT})")
    b.add_argument("--kits", default=None, metavar="DIR",
                   help="folder holding android_assets/ and ios_assets/ to copy the first bundle into "
                        "(default: . when it has them; 'none' to skip)")
    b.add_argument("--vocab-corpus", action="append", default=[], type=Path, metavar="FILE",
                   help="trim the vocabulary to the tokens of this UTF-8 corpus (repeatable)")
    b.add_argument("--vocab-min-count", type=int, default=1, metavar="N",
                   help="with --vocab-corpus: keep a token seen at least N times (default 1)")
    b.add_argument("--calibration", type=Path, default=None, metavar="FILE",
                   help="texts the calibrated files calibrate on (int16x8; int8's ONNX smoothing): a "
                        "corpus file (JSON lines: text, kind, lang, group; default: the committed "
                        "fidelity sample)")
    b.add_argument("--ort", action="store_true",
                   help="with --formats onnx: also an ORT-format copy for onnxruntime mobile")
    b.add_argument("--no-self-check", action="store_true",
                   help="skip loading each variant under tflite-runtime and LiteRT")


def _embed_command(sub: argparse._SubParsersAction) -> None:
    from edge_m3.spec import HEADS

    e = _command(sub, "embed")
    _bundle_argument(e)
    e.add_argument("text", nargs="*", help="texts to embed, each one argument")
    e.add_argument("--texts", type=Path, metavar="FILE",
                   help="UTF-8 file, one text per line; or, with --out, a corpus: .txt (one text per "
                        "line), .jsonl, .parquet or a Parquet dataset folder")
    e.add_argument("--out", type=Path, metavar="FILE",
                   help="bulk job: X.parquet (dataset folder), X.npy (folder of arrays) or X.jsonl, "
                        "written in committed parts (default: JSON lines on stdout)")
    _runtime_option(e)
    _threads_option(e, None)
    e.add_argument("--outputs", default=None, metavar="LIST",
                   help=f"with --out: heads to write, a comma list of {', '.join(HEADS)} (default: all "
                        "the bundle has)")
    e.add_argument("--resume", action="store_true", help="with --out: continue the job that wrote it")
    _column_options(e)
    e.add_argument("--part-rows", type=int, default=4096, metavar="N",
                   help="with --out: rows per committed part (what a killed job redoes at most; "
                        "default 4096)")
    e.add_argument("--lanes", type=int, default=None, metavar="N",
                   help="with --out: model processes sharing --threads (default: one a thread; 1: in "
                        "process)")
    engines = ("local", "ray")
    e.add_argument("--engine", default="local", choices=engines, metavar="NAME",
                   help=f"with --out: {', '.join(engines)} (default local; ray: Ray Data, pip install "
                        "'edge-m3[ray]', --out a Parquet dataset folder)")
    e.add_argument("--ray-address", default=None, metavar="ADDRESS",
                   help="with --engine ray: a running cluster (ray start --head prints it; default: a "
                        "local one)")
    e.add_argument("--ray-workers", type=int, default=2, metavar="N",
                   help="with --engine ray: model actors (default 2)")


def _verify_command(sub: argparse._SubParsersAction) -> None:
    v = _command(sub, "verify")
    _bundle_argument(v)
    _reference_option(v, True, "the bundle was built from (required)")
    v.add_argument("--texts", type=Path, metavar="FILE",
                   help="UTF-8 file, one text per line, checked with the built-in retrieval set; "
                        "or a corpus FILE.jsonl of queries and passages (tools/inputs/"
                        "make_fidelity_corpus.py) checked instead of it, with figures per language")
    v.add_argument("--sample", type=int, default=None, metavar="N",
                   help="with a corpus: verify on a stratified sample of at most N texts")
    v.add_argument("--seed", type=int, default=0, help="the --sample's seed (default 0)")
    _report_option(v, "reports/<bundle name>; plots too")
    _runtimes_option(v, "--runtime")
    v.add_argument("--thresholds", type=Path, default=None, metavar="FILE",
                   help="JSON {variant: {figure_min|figure_max: value}} to gate on instead of the "
                        "variant's own thresholds (edge_m3/spec/recipes.py)")
    _threads_option(v, 1)
    v.add_argument("--cache", type=Path, default=None, metavar="DIR",
                   help="reference-output cache (default $EDGE_M3_CACHE or ~/.cache/edge-m3)")
    v.add_argument("--no-cache", action="store_true", help="always recompute the references")


def _check_command(sub: argparse._SubParsersAction) -> None:
    from edge_m3.runtime.registry import WeightCache

    k = _command(sub, "check")
    _bundle_argument(k)
    _runtimes_option(k, "--runtime")
    _threads_option(k, 1)
    _timing_options(k)
    _report_option(k, "reports/<bundle name>-check")
    modes = (WeightCache.MEMORY.kind, WeightCache.OFF.kind)
    k.add_argument("--weight-cache", choices=modes, default=WeightCache.MEMORY.kind, metavar="MODE",
                   help=f"LiteRT's XNNPACK weight cache, one of {', '.join(modes)}: the weights packed "
                        "once per model (CompiledModel; the default) or once per signature "
                        "(Interpreter: off)")


def _coverage_command(sub: argparse._SubParsersAction) -> None:
    c = _command(sub, "coverage")
    _bundle_argument(c)
    c.add_argument("texts", type=Path, help="UTF-8 text file to tokenize")


def _bench_command(sub: argparse._SubParsersAction) -> None:
    from edge_m3.harness.bench import CACHE_MODES

    bn = _command(sub, "bench")
    _bundle_argument(bn)
    _runtimes_option(bn, "--runtimes")
    bn.add_argument("--threads", default="1,2", metavar="LIST",
                    help="thread counts, a comma list: one cell each (default 1,2)")
    bn.add_argument("--lengths", default=None, metavar="LIST",
                    help="tokens per input, a comma list, padded to the smallest signature that holds "
                         "them (default: each signature length)")
    _reference_option(bn, False, "for a torch fp32 baseline row")
    _timing_options(bn)
    bn.add_argument("--weight-cache", default="cold,warm", metavar="LIST",
                    help=f"LiteRT's XNNPACK weight cache, a comma list of {', '.join(CACHE_MODES)}, each "
                         "a run of its own: off (one packed copy per signature), memory, cold (a new "
                         "cache file), warm (a second start mapping it); default cold,warm")
    bn.add_argument("--json", type=Path, default=None, metavar="FILE",
                    help="also write the figures here, and a latency-by-length SVG beside them (FILE's stem "
                         "+ -latency.svg)")
    bn.add_argument("--report", type=Path, default=None, metavar="DIR",
                    help="folder for report.json, report.md and latency.svg, the p50 by length of each "
                         "runtime and variant (default: none, the table only)")


# --------------------------------------------------------------------------- index, search (issue 25)


def _retrieval_commands(sub: argparse._SubParsersAction) -> None:
    from edge_m3.spec import COLBERT_STORES, DENSE_STORES, SCORE_MODES

    ix = _command(sub, "index")
    _bundle_argument(ix)
    _corpus_argument(ix)
    ix.add_argument("--out", type=Path, required=True, metavar="DIR",
                    help="the index folder to create (must not exist)")
    ix.add_argument("--dense", default="float32", choices=DENSE_STORES, metavar="STORE",
                    help=f"dense store, one of {', '.join(DENSE_STORES)}: float32, or int8 with a scale "
                         "per row (default float32)")
    ix.add_argument("--colbert", default=None, choices=COLBERT_STORES, metavar="STORE",
                    help=f"ColBERT vectors, one of {', '.join(COLBERT_STORES)}: fp16 (the default when "
                         "the bundle has a ColBERT head), int8 (scale per vector) or none (the default "
                         "without one)")
    _chunk_option(ix)
    _column_options(ix)
    _runtime_option(ix)
    _threads_option(ix, None)

    se = _command(sub, "search")
    _index_argument(se)
    se.add_argument("--queries", type=Path, required=True, metavar="FILE",
                    help="UTF-8 file, one query per line")
    se.add_argument("--mode", default="dense", choices=SCORE_MODES, metavar="MODE",
                    help=f"how passages are scored, one of {', '.join(SCORE_MODES)} (default dense)")
    se.add_argument("--k", type=int, default=10, metavar="N", help="hits per query (default 10)")
    se.add_argument("--weights", default=None, metavar="D,S,C",
                    help="dense,sparse,colbert weights of the hybrid modes (default 1,1,1 as "
                         "compute_score)")
    _index_bundle_option(se)
    se.add_argument("--chunks", action="store_true",
                    help="the best chunks, as [id, chunk, score], not the best passages ([id, score], "
                         "each passage by its best chunk)")
    se.add_argument("--out", type=Path, default=None, metavar="FILE",
                    help="write the JSON lines here instead of stdout")
    _runtime_option(se)
    _threads_option(se, None)

    ad = _command(sub, "add")
    _index_argument(ad)
    _corpus_argument(ad)
    _index_bundle_option(ad)
    _chunk_option(ad)
    _column_options(ad)
    _runtime_option(ad)
    _threads_option(ad, None)

    rm = _command(sub, "remove")
    _index_argument(rm)
    rm.add_argument("ids", type=Path, help='file of ids, one a line, as JSON (12, "12") or plain text')

    cp = _command(sub, "compact")
    _index_argument(cp)


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
    from edge_m3.errors import OptionError
    from edge_m3.retrieval.build import SearchOptions
    from edge_m3.runtime.registry import RUNTIMES
    from edge_m3.spec import mode_weights

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
    from edge_m3.spec import FORMATS, HEADS, recipe

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
    from edge_m3.harness.embed import EmbedOptions
    from edge_m3.runtime.registry import RUNTIMES
    from edge_m3.spec import HEADS

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
                        cache_modes=modes, json=a.json, report=a.report)


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
        if action.help == argparse.SUPPRESS:  # another spelling (_alias): errors name the shown one
            continue
        if action.option_strings:
            flags[action.dest] = max(action.option_strings, key=len)
        else:
            flags[action.dest] = f"{command} {action.dest.upper()}"
    return flags


def main(argv: Sequence[str] | None = None) -> int:
    """Console entry point."""
    from edge_m3.common.progress import switched

    parser = _build_parser()
    args = parser.parse_args(argv)
    if not args.verbose:  # TensorFlow's own INFO/WARNING lines (build, verify)
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    try:
        with switched(quiet=args.quiet, verbose=args.verbose):
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
