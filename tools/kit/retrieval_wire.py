"""The files the kits' retrieval tools read, and their answers (tests/test_kit_retrieval.py,
tools/bench/bench_kit_search.py).

The tools are android_assets/jvm/RetrievalCheck.kt (`java -cp KIT_JAR dev.edgem3.RetrievalCheckKt`)
and ios_assets/Sources/EdgeM3Retrieval (`edge-m3-retrieval`); their header comments define the
format: whitespace-separated tokens, every float as the hex of its bits, so nothing is lost on
the way and each answer compares bit for bit.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from edge_m3.spec import COLBERT_VECS, DENSE_VECS, LEXICAL_WEIGHTS

KOTLIN_MAIN = "dev.edgem3.RetrievalCheckKt"
SWIFT_PRODUCT = "edge-m3-retrieval"
# Set for a kit's `ops` when other processes write the folder at once: each search is run once
# (a second one, through the ScoreMode overloads, may see their commits).
CONCURRENT_ENV = "EDGE_M3_OPS_CONCURRENT"
# The SQLite JDBC driver the Kotlin runner's writable index uses on the desktop JVM (Debian's
# libxerial-sqlite-jdbc-java; tools/kit/kit_jar.sh reads the same variable).
SQLITE_JDBC_JAR = os.environ.get("EDGE_M3_SQLITE_JDBC_JAR") or "/usr/share/java/sqlite-jdbc.jar"


def h32(x: Any) -> str:
    """A float32's bits as 8 hex digits."""
    return f"{int(np.float32(x).view(np.uint32)):08x}"


def h64(x: float) -> str:
    """A float64's bits as 16 hex digits."""
    return f"{int(np.float64(x).view(np.uint64)):016x}"


def f64(bits: str) -> float:
    """The float64 of 16 hex digits."""
    return float(np.uint64(int(bits, 16)).view(np.float64))


def vectors(v: Mapping[str, Any]) -> str:
    """One text's pipeline outputs (FlagEmbedding's names; a missing head is left out)."""
    parts = []
    dense = v.get(DENSE_VECS)
    parts.append("D -" if dense is None
                 else f"D {len(dense)} " + " ".join(map(h32, np.asarray(dense, np.float32))))
    lex = v.get(LEXICAL_WEIGHTS)
    parts.append("L -" if lex is None
                 else f"L {len(lex)} " + " ".join(f"{k} {h32(w)}" for k, w in lex.items()))
    col = v.get(COLBERT_VECS)
    if col is None:
        parts.append("C -")
    else:
        col = np.asarray(col, np.float32)
        col = col.reshape(len(col), -1) if col.ndim != 2 else col
        parts.append(f"C {col.shape[0]} {col.shape[1]} " + " ".join(map(h32, col.ravel())))
    return "\n".join(parts)


def cases(pairs: Sequence[tuple[Mapping[str, Any], Mapping[str, Any]]],
          weights: Sequence[Sequence[float]]) -> str:
    """`score CASES`: every pair under every weight set."""
    out = [f"weights {len(weights)}", *(" ".join(map(h64, w)) for w in weights), f"pairs {len(pairs)}"]
    for q, p in pairs:
        out += [vectors(q), vectors(p)]
    return "\n".join(out) + "\n"


def queries(qs: Sequence[Mapping[str, Any]]) -> str:
    """`search`/`bench` QUERIES."""
    return f"queries {len(qs)}\n" + "".join(vectors(q) + "\n" for q in qs)


def plan(lines: Sequence[tuple[int, str, Sequence[float]]]) -> str:
    """`search` PLAN: (k, mode, weights) per line."""
    return f"plan {len(lines)}\n" + "".join(f"{k} {m} {' '.join(map(h64, w))}\n" for k, m, w in lines)


def scoped_answers(index: Any, queries: Sequence[Mapping[str, Any]],
                   lines: Sequence[tuple[int, str, Sequence[float]]], chunks: bool) -> list[str]:
    """What `search ... --scope passages|chunks` must print for a plan: per plan line and query,
    "J I" then ROW:CHUNK:HEX64 per hit (or "J I error"), as Python's Index.search answers."""
    from edge_m3.errors import EdgeM3Error

    out = []
    for j, (k, mode, w) in enumerate(lines):
        for i, q in enumerate(queries):
            try:
                hits = index.search(q, k, mode, w, chunks=chunks)
                out.append(f"{j} {i} " + " ".join(f"{h.row}:{h.chunk}:{h64(h.score)}" for h in hits))
            except EdgeM3Error:
                out.append(f"{j} {i} error")
    return [x.rstrip() for x in out]


def parse_scores(stdout: str) -> dict[tuple[int, int, str], str]:
    """`score`'s answer: (pair, weight set, mode) -> float64 bits, or "error"."""
    got = {}
    for line in stdout.splitlines():
        i, k, mode, bits = line.split()
        got[int(i), int(k), mode] = bits
    return got


# ------------------------------------------------------------------ the writable index's op log
# `ops DIR OPS` (issue 35; docs/index-format.md, "The writable index"): the kit runs each
# operation on the writable index in folder DIR and prints one answer line per operation:
#   OPS  = "ops" N OP*N
#   OP   = "create" DIM DENSE COLBERT          a new index with no base and no bundle (DIR empty)
#        | "open"                               DIR's index (a format-1 base and/or index.sqlite)
#        | "add" ID N VECTORS*N | "update" ID N VECTORS*N   (a passage of N chunks; N = 0 refused)
#        | "remove" ID | "compact" | "reopen" | "count" | "contains" ID
#        | "ids" | "remove_many" N ID*N        (every passage's id in logical row order; N ids
#          removed in one transaction, all or none)
#        | "search" K MODE HEX64 HEX64 HEX64 SCOPE VECTORS   (k, mode, weights dense sparse
#          colbert; SCOPE "passages" (best chunk per passage, the default search) or "chunks")
#   ID   = "i" DECIMAL (an integer id) | "s" HEX (a string id: its UTF-8 bytes in hex, "s" alone
#          for the empty string)
# Answers: "ok", "error KIND" (KIND one of spec.KIT_ERROR_KINDS; nothing was changed),
# "count N" (passages), "contains true|false", "ids N" ID*N, "hits N" (ROW ID CHUNK HEX64)*N
# (logical rows, best first; CHUNK the row's chunk number in its passage).


def id_token(pid: int | str) -> str:
    """An id as one whitespace-free token: its type kept (1 and "1" are two ids)."""
    return f"i{pid}" if isinstance(pid, int) else "s" + pid.encode("utf-8").hex()


def parse_id(token: str) -> int | str:
    """The id of id_token's token."""
    return int(token[1:]) if token[0] == "i" else bytes.fromhex(token[1:]).decode("utf-8")


def ops(log: Sequence[tuple[Any, ...]]) -> str:
    """An op log as `ops` reads it: tuples ("create", dim, dense, colbert), ("open",),
    ("add"|"update", id, outputs or a list of chunks' outputs), ("remove"|"contains", id),
    ("remove_many", [id, ...]), ("compact",), ("reopen",), ("count",), ("ids",),
    ("search", k, mode, weights, query[, chunks])."""
    out = [f"ops {len(log)}"]
    for op in log:
        name = op[0]
        if name == "create":
            out.append(f"create {op[1]} {op[2]} {op[3]}")
        elif name in ("add", "update"):
            chunks = chunk_list(op[2])
            out += [f"{name} {id_token(op[1])} {len(chunks)}", *map(vectors, chunks)]
        elif name in ("remove", "contains"):
            out.append(f"{name} {id_token(op[1])}")
        elif name == "remove_many":
            out.append(" ".join([name, str(len(op[1])), *map(id_token, op[1])]))
        elif name == "search":
            scope = "chunks" if len(op) > 5 and op[5] else "passages"
            out += [f"search {op[1]} {op[2]} {' '.join(map(h64, op[3]))} {scope}", vectors(op[4])]
        else:
            out.append(name)
    return "\n".join(out) + "\n"


def answers(stdout: str) -> list[str]:
    """`ops`'s answer lines, one per operation."""
    return [line.strip() for line in stdout.splitlines() if line.strip()]


def hits_line(hits: Sequence[Any]) -> str:
    """A search's answer: "hits N" then ROW ID CHUNK HEX64 per hit."""
    return " ".join([f"hits {len(hits)}",
                     *(f"{h.row} {id_token(h.id)} {h.chunk} {h64(h.score)}" for h in hits)])


def ids_line(ids: Sequence[int | str]) -> str:
    """An `ids` answer: "ids N" then each id's token, in logical row order."""
    return " ".join([f"ids {len(ids)}", *map(id_token, ids)])


def chunk_list(passage: Any) -> list[Mapping[str, Any]]:
    """An add's passage as its list of chunks' outputs (one mapping is one chunk)."""
    return [passage] if isinstance(passage, Mapping) else list(passage)


def python_answers(folder: Any, log: Sequence[tuple[Any, ...]]) -> list[str]:
    """The answers Python's WritableIndex gives to an op log: what each kit's `ops` must print."""
    from edge_m3.errors import EdgeM3Error
    from edge_m3.retrieval.writable import WritableIndex

    idx: Any = None
    out = []
    for op in log:
        name = op[0]
        try:
            if name == "create":
                idx = WritableIndex.create(folder, op[1], op[2], op[3])
            elif name == "open":
                idx = WritableIndex.open(folder)
            elif name == "reopen":
                idx.close()
                idx = WritableIndex.open(folder)
            elif name in ("add", "update"):
                getattr(idx, name)(op[1], op[2])
            elif name == "remove":
                idx.remove(op[1])
            elif name == "remove_many":
                idx.remove_many(op[1])
            elif name == "compact":
                idx.compact()
            elif name == "count":
                out.append(f"count {len(idx)}")
                continue
            elif name == "contains":
                out.append(f"contains {'true' if idx.contains(op[1]) else 'false'}")
                continue
            elif name == "ids":
                out.append(ids_line(idx.ids()))
                continue
            elif name == "search":
                out.append(hits_line(idx.search(op[4], op[1], op[2], op[3],
                                                chunks=bool(op[5]) if len(op) > 5 else False)))
                continue
            out.append("ok")
        except EdgeM3Error as exc:  # WriteRefused and CorruptIndexError carry their kit kind
            out.append(f"error {exc.kind}")
    if idx is not None:
        idx.close()
    return out
