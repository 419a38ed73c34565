"""`edge-m3 index` and `edge-m3 search`: a corpus embedded by a bundle's own model into an index
folder, and queries searched from the command line (docs/index-format.md).

The corpus is read by edge_m3.common.corpus (text lines, JSON lines, Parquet; bad rows are
skipped and counted); passages are embedded by `embed_passages` through the bulk engine
(edge_m3.bulk.engine), as `embed --out` embeds a corpus.
"""

from __future__ import annotations

import functools
import itertools
import json
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edge_m3.common.files import check_writable, write_lines_atomic
from edge_m3.errors import EdgeM3Error, OptionError
from edge_m3.runtime.registry import Runtime
from edge_m3.spec import (
    COLBERT_STORES,
    COLBERT_VECS,
    DENSE_STORES,
    DENSE_VECS,
    DEVICE_THREADS,
    LEXICAL_WEIGHTS,
    SCORE_MODES,
    mode_signals,
)

# What one embedded passage keeps: the index stores no more (raw outputs are dropped).
_KEEP = (DENSE_VECS, LEXICAL_WEIGHTS, COLBERT_VECS)


@dataclass(frozen=True)
class IndexOptions:
    """What `edge-m3 index` was asked for, parsed (edge_m3.cli)."""

    bundle: Path
    corpus: Path
    out: Path
    runtime: Runtime
    dense: str = "float32"  # DENSE_STORES
    colbert: str | None = None  # COLBERT_STORES; None: fp16 when the bundle has a ColBERT head, else none
    threads: int | None = None
    id_column: str = "id"  # JSON lines / Parquet
    text_column: str = "text"
    chunk: bool = True  # a passage past the largest signature: its chunks (False: truncated)


@dataclass(frozen=True)
class SearchOptions:
    """What `edge-m3 search` was asked for, parsed (edge_m3.cli)."""

    index: Path
    queries: Path
    runtime: Runtime
    mode: str = "dense"  # SCORE_MODES
    k: int = 10
    out: Path | None = None  # JSON lines here instead of stdout
    bundle: Path | None = None  # None: the bundle path the index records
    weights: tuple[float, float, float] | None = None  # dense, sparse, colbert; None: compute_score's
    threads: int | None = None
    chunks: bool = False  # the best chunks (rows), not the best passages


def embed_passages(embedder: Any, rows: Iterable[Any], rejected: list[Any], batch: int = 256,
                   split: bool = True, truncated: list[Any] | None = None,
                   ) -> Iterator[tuple[Any, list[dict[str, Any]]]]:
    """(id, the outputs an index stores for each of its chunks) per passage, through the bulk
    engine (edge_m3.bulk.engine: the same DevicePipeline steps, one single-threaded model per
    thread over length-sorted batches), so an index is built as fast as `embed --out`. A text
    the tokenizer refuses joins `rejected` with its row. `split=False`: the first chunk only (the
    text truncated), its row added to `truncated` when it had more."""
    it = iter(rows)
    while part := list(itertools.islice(it, batch)):
        kept, chunked, bad = embedder.encode_chunks(part)
        rejected.extend(bad)
        if not split:
            if truncated is not None:
                truncated.extend(r for r, c in zip(kept, chunked, strict=True) if len(c) > 1)
            chunked = [c[:1] for c in chunked]
        outs = iter(embedder.run([e for c in chunked for e in c]))
        for row, c in zip(kept, chunked, strict=True):
            yield row.id, [{k: out[k] for k in _KEEP if k in out} for out in itertools.islice(outs, len(c))]


def _unique_rows(corpus: Any, rejected: list[Any]) -> Iterator[Any]:
    """A corpus's rows with a text, each id once: bad rows and repeated ids join `rejected`."""
    from edge_m3.common.corpus import Rejected

    seen: set[Any] = set()
    for item in corpus.rows():
        if isinstance(item, Rejected):
            rejected.append(item)
        elif item.id in seen:
            rejected.append(Rejected(item.row, item.id, "duplicate id"))
        else:
            seen.add(item.id)
            yield item


def _progress(label: str, total: int | None, quiet: bool) -> Any:
    """The one progress bar (edge_m3.common.progress), with the passages' rate."""
    from edge_m3.common.progress import progress

    return progress(label, total, rate=True, show=not quiet)


def _open_pipeline(bundle: Any, runtime: Runtime, threads: int | None, model_file: str | None = None) -> Any:
    """The device pipeline of the bundle's model `model_file` (default: the runtime's format's)."""
    from edge_m3.runtime.choice import require_runtime
    from edge_m3.runtime.pipeline import DevicePipeline

    entry = next((m for m in bundle.manifest.models if m.file == model_file), None) if model_file else None
    if entry is not None and entry.format != runtime.format:
        raise OptionError("runtime", runtime.name, f"runs {runtime.format} models; the index was embedded "
                          f"by {entry.file}")
    entry = require_runtime(bundle, runtime, entry=entry)
    return DevicePipeline(bundle, runtime, threads, fmt=entry.format)


def cmd_index(opts: IndexOptions, quiet: bool = False) -> int:
    """Embed the corpus with the bundle's model and write the index folder atomically."""
    from edge_m3.common.corpus import Rejected, open_corpus
    from edge_m3.retrieval.index import Index
    from edge_m3.retrieval.index_folder import BundleIdentity

    _check_index_options(opts)
    corpus = open_corpus(opts.corpus, id_column=opts.id_column, text_column=opts.text_column,
                         field="corpus")
    total = corpus.count()
    if total == 0:
        raise OptionError("corpus", opts.corpus, "no passage in the file")
    from edge_m3.bundle import load_bundle

    bundle = load_bundle(opts.bundle)  # refuses any file whose sha256 is not the manifest's
    heads = bundle.manifest.heads
    colbert = _colbert_store(opts, heads)
    rejected: list[Rejected] = []
    passages = functools.partial(_unique_rows, corpus, rejected)

    stream = passages()
    first = next(stream, None)  # the model is opened only for a corpus with a passage in it
    if first is None:
        why = f"; first: row {rejected[0].row}: {rejected[0].reason}" if rejected else ""
        raise OptionError("corpus", opts.corpus, f"no passage to index ({len(rejected)} row(s) "
                          f"rejected{why})")
    from edge_m3.bulk.engine import BulkEmbedder
    from edge_m3.runtime.choice import require_runtime

    require_runtime(bundle, opts.runtime)
    # A dense-only bundle (a sentence-transformers model) indexes no lexical weights: no postings.
    outputs = ("dense",) + (("sparse",) if "sparse" in heads else ()) + (
        ("colbert",) if colbert != "none" else ())
    embedder = BulkEmbedder(bundle, opts.runtime, opts.threads or DEVICE_THREADS, outputs)
    index = Index(bundle.manifest.hidden_size, opts.dense, colbert,
                  BundleIdentity.of(bundle, embedder.pipe.entry.format))
    t0 = time.perf_counter()
    truncated: list[Any] = []
    with embedder, _progress("index", total, quiet or total < 2) as progress:
        done = _fill(index, embed_passages(embedder, itertools.chain([first], stream), rejected,
                                           split=opts.chunk, truncated=truncated),
                     progress, total, rejected, t0)
    seconds = time.perf_counter() - t0
    index.save(opts.out)
    if rejected:
        first = rejected[0]
        sys.stderr.write(f"{len(rejected)} row(s) of {opts.corpus} skipped (first: row {first.row}: "
                         f"{first.reason})\n")
    _say_chunks(index.passages, len(index), truncated, embedder.pipe.lengths[-1])
    sys.stderr.write(f"{done} passage(s) in {seconds:.2f} s: {done / max(seconds, 1e-9):.1f} "
                     f"texts/s ({opts.runtime.name}); index written to {opts.out}\n")
    return 0


def _check_index_options(opts: IndexOptions) -> None:
    """The stores and the output folder, before the corpus or the bundle is read."""
    if opts.dense not in DENSE_STORES:
        raise OptionError("dense", opts.dense, f"unknown (choose from {', '.join(DENSE_STORES)})")
    if opts.colbert is not None and opts.colbert not in COLBERT_STORES:
        raise OptionError("colbert", opts.colbert, f"unknown (choose from {', '.join(COLBERT_STORES)})")
    if opts.out.exists():
        raise OptionError("out", opts.out, "exists; remove it or choose another folder "
                          "(an index is never overwritten)")
    check_writable(opts.out, "out")


def _colbert_store(opts: IndexOptions, heads: Sequence[str]) -> str:
    """The ColBERT store (--colbert, or fp16 when the bundle has the head); the bundle's heads checked."""
    colbert = opts.colbert or ("fp16" if "colbert" in heads else "none")
    if colbert != "none" and "colbert" not in heads:
        raise OptionError("colbert", colbert, f"{opts.bundle} exports no ColBERT head; use none")
    if "dense" not in heads:
        raise EdgeM3Error(f"{opts.bundle}: exports no dense head, which an index needs")
    return colbert


def _fill(index: Any, passages: Iterable[tuple[Any, list[Any]]], progress: Any, total: int,
          rejected: Sequence[Any], t0: float) -> int:
    """Add embedded passages (a chunk per row) in batches of 256 rows, with progress (`rejected`
    grows as the stream skips rows); the count added."""
    task = progress.add_task("index", total=total, rate="")
    done, batch, ids = 0, [], []
    for pid, chunks in passages:
        batch.extend(chunks)
        ids.extend([pid] * len(chunks))
        done += 1
        if len(batch) >= 256:
            index.add(batch, ids)
            batch, ids = [], []
        elapsed = time.perf_counter() - t0
        progress.update(task, completed=done + len(rejected), rate=f"{done / max(elapsed, 1e-9):.1f} texts/s")
    if batch:
        index.add(batch, ids)
    return done


def _say_chunks(passages: int, rows: int, truncated: Sequence[Any], longest: int) -> None:
    """One line on how long passages were taken: split into chunks, or truncated (--no-chunk)."""
    if rows > passages:
        sys.stderr.write(f"{rows - passages} more row(s) than passages: passages longer than {longest} "
                         "tokens were split into chunks (search ranks each passage by its best)\n")
    if truncated:
        sys.stderr.write(f"{len(truncated)} passage(s) longer than {longest} tokens were truncated "
                         f"(--no-chunk; first: row {truncated[0].row})\n")


def cmd_search(opts: SearchOptions) -> int:
    """One JSON line per query: {"query": i, "hits": [[passage_id, score], ...]}, best first."""
    from edge_m3.common.files import read_texts
    from edge_m3.retrieval.writable import WritableIndex, open_index

    if opts.mode not in SCORE_MODES:
        raise OptionError("mode", opts.mode, f"unknown (choose from {', '.join(SCORE_MODES)})")
    if opts.k < 1:
        raise OptionError("k", opts.k, "must be at least 1")
    if opts.out is not None:
        if opts.out.exists():
            raise OptionError("out", opts.out, "exists; remove it or choose another file")
        check_writable(opts.out, "out", is_file=True)
    queries = read_texts(opts.queries, "queries")
    index = open_index(opts.index)  # refuses a corrupt index
    try:  # a writable index's database is released here, not whenever the GC finds it: SQLite
        # removes its -wal and -shm files only when the last connection closes
        bundle = _index_bundle(opts.index, index, opts.bundle)
        if "sparse" in mode_signals(opts.mode) and "sparse" not in bundle.manifest.heads:
            raise OptionError("mode", opts.mode, f"needs lexical weights; {bundle.path} exports no sparse head "
                              "(its model gives dense vectors only): use dense")
        if "colbert" in mode_signals(opts.mode) and not index.has_colbert:
            raise OptionError("mode", opts.mode, f"needs ColBERT vectors; {opts.index} was built with "
                              "colbert none")
        model_file = index.bundle.model_file if index.bundle else None
        pipe = _open_pipeline(bundle, opts.runtime, opts.threads, model_file)
        if len(index) == 0:
            sys.stderr.write(f"{opts.index}: empty index; every query gets no hits\n")
        no_token = []

        def lines() -> Iterator[str]:
            for i, text in enumerate(queries):
                q = pipe.embed(text)
                hits = index.search(q, opts.k, opts.mode, opts.weights, chunks=opts.chunks)
                if opts.mode == "sparse" and not hits:
                    no_token.append(i)
                got = [[h.id, h.chunk, h.score] if opts.chunks else [h.id, h.score] for h in hits]
                yield json.dumps({"query": i, "hits": got}, ensure_ascii=False)

        emit: Callable[[Iterator[str]], None]
        if opts.out is not None:
            def emit(ls: Iterator[str]) -> None:
                write_lines_atomic(opts.out, ls, "out")
        else:
            def emit(ls: Iterator[str]) -> None:
                for line in ls:
                    sys.stdout.write(line + "\n")
        emit(lines())
        if no_token:
            sys.stderr.write(f"{len(no_token)} query(ies) share no token with the index (no sparse hits), "
                             f"first: query {no_token[0]}\n")
        n = (len(index) if isinstance(index, WritableIndex) else index.passages) if not opts.chunks else (
            index.rows if isinstance(index, WritableIndex) else len(index))
        if opts.k > n and n:
            sys.stderr.write(f"k {opts.k} > {n} {'rows' if opts.chunks else 'passages'} in the index: at most "
                             f"{n} hits\n")
    finally:
        if isinstance(index, WritableIndex):
            index.close()
    return 0


def _index_bundle(where: Path, index: Any, given: Path | None) -> Any:
    """The bundle whose model embeds queries for `index`: `given`, else the one the index records;
    refused unless it holds the index's model and tokenizer."""
    from edge_m3.bundle import load_bundle

    ident = index.bundle
    bundle_path = given
    if bundle_path is None:
        if ident is None or not ident.path:
            raise OptionError("bundle", None, f"{where} records no bundle path; give {{}} BUNDLE",
                              mentions=("bundle",))
        bundle_path = Path(ident.path)
        if not bundle_path.is_dir():
            raise OptionError("index", where, f"was built with the bundle {ident.path}, which is gone; "
                              "give {} BUNDLE (the same model)", mentions=("bundle",))
    bundle = load_bundle(bundle_path)
    if ident is None:
        raise EdgeM3Error(f"{where}: records no bundle, so queries cannot be checked against it")
    ident.check(bundle, str(where))
    return bundle


@dataclass(frozen=True)
class WriteOptions:
    """What `edge-m3 add`, `remove` and `compact` were asked for, parsed (edge_m3.cli)."""

    index: Path
    source: Path | None = None  # add: the corpus; remove: the ids file
    runtime: Runtime | None = None
    bundle: Path | None = None
    threads: int | None = None
    id_column: str = "id"
    text_column: str = "text"
    chunk: bool = True  # add: a passage past the largest signature as its chunks (False: truncated)


def _writable(path: Path) -> Any:
    from edge_m3.retrieval.writable import WritableIndex

    return WritableIndex.open(path)


def cmd_add(opts: WriteOptions, quiet: bool = False) -> int:
    """Embed a corpus with the index's bundle and add it (an id already there is updated), one
    transaction per batch: a kill keeps every batch before it, and running again completes it."""
    from edge_m3.bulk.engine import BulkEmbedder
    from edge_m3.common.corpus import Rejected, open_corpus
    from edge_m3.runtime.choice import require_runtime

    assert opts.source is not None and opts.runtime is not None
    with _writable(opts.index) as index:  # released on every way out, a refusal included
        corpus = open_corpus(opts.source, id_column=opts.id_column, text_column=opts.text_column,
                             field="corpus")
        total = corpus.count()
        if total == 0:
            raise OptionError("corpus", opts.source, "no passage in the file")
        bundle = _index_bundle(opts.index, index, opts.bundle)
        heads = bundle.manifest.heads
        require_runtime(bundle, opts.runtime)
        outputs = ("dense",) + (("sparse",) if "sparse" in heads else ()) + (
            ("colbert",) if index.has_colbert else ())
        rejected: list[Rejected] = []
        passages = functools.partial(_unique_rows, corpus, rejected)

        before, rows_before = len(index), index.rows
        t0 = time.perf_counter()
        done, batch, truncated = 0, [], []
        embedder = BulkEmbedder(bundle, opts.runtime, opts.threads or DEVICE_THREADS, outputs)
        with embedder, _progress("add", total, quiet or total < 2) as progress:
            task = progress.add_task("add", total=total, rate="")
            for pid, chunks in embed_passages(embedder, passages(), rejected, split=opts.chunk,
                                              truncated=truncated):
                batch.append((pid, chunks))
                done += 1
                if len(batch) == 256:
                    index.add_many(batch, replace=True)
                    batch = []
                elapsed = time.perf_counter() - t0
                progress.update(task, completed=done + len(rejected),
                                rate=f"{done / max(elapsed, 1e-9):.1f} texts/s")
            if batch:
                index.add_many(batch, replace=True)
        if rejected:
            first = rejected[0]
            sys.stderr.write(f"{len(rejected)} row(s) of {opts.source} skipped (first: row {first.row}: "
                             f"{first.reason})\n")
        after = len(index)
        if index.rows - rows_before > after - before or truncated:
            _say_chunks(after, index.rows, truncated, embedder.pipe.lengths[-1])
        sys.stderr.write(f"{done} passage(s) added or updated in {time.perf_counter() - t0:.2f} s "
                         f"({after - before} new); {after} in {opts.index}\n")
    return 0


def read_ids(path: Path) -> list[Any]:
    """An ids file: one id per line, as JSON (`12` an integer, `"12"` a string) or, when a line
    is not JSON, the line itself as a string id."""
    from edge_m3.common.files import read_texts

    out = []
    for line in read_texts(path, "ids"):
        try:
            v = json.loads(line)
        except (ValueError, RecursionError):  # not JSON (or nested past Python's stack): the line itself
            v = line
        out.append(v if isinstance(v, int | str) and not isinstance(v, bool) else line)
    return out


def cmd_remove(opts: WriteOptions) -> int:
    """Remove the ids of a file in one transaction; an id not in the index refuses them all."""
    from edge_m3.retrieval.writable import WriteRefused

    assert opts.source is not None
    ids = read_ids(opts.source)
    with _writable(opts.index) as index:  # released on every way out, a refusal included
        try:
            index.remove_many(ids)
        except WriteRefused as exc:
            if exc.kind == "unknown_id":
                raise OptionError("ids", opts.source, f"{exc}; nothing was removed") from None
            raise
        sys.stderr.write(f"{len(ids)} passage(s) removed; {len(index)} in {opts.index}\n")
    return 0


def cmd_compact(opts: WriteOptions) -> int:
    """Fold the writes into a new memory-mapped base."""
    with _writable(opts.index) as index:  # released on every way out, a refusal included
        t0 = time.perf_counter()
        index.compact()
        sys.stderr.write(f"compacted {len(index)} passage(s) into {opts.index / index.base_name} in "
                         f"{time.perf_counter() - t0:.2f} s\n")
    return 0
