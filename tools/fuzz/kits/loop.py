"""The Kotlin kit's fuzzing and the three-way differential (issue 38, items 2 and 3).

    python -m tools.fuzz.kits.loop kotlin TARGET --budget N [--seed S]
    python -m tools.fuzz.kits.loop diff {spmodel,index,writable} --budget N [--seed S]

No coverage-guided JVM fuzzer installs from the registries here (Jazzer is on Maven Central only;
neither PyPI nor Debian has it), so the Kotlin kit gets a seeded, structure-aware mutational loop
with a fixed budget: each input is a committed seed (or an accepted mutant with content not seen
before) mutated one to four times, aware of JSON (a value replaced by an interesting one, a key
dropped, a list cut, deep nesting), of protobuf (a field dropped, duplicated, its length varint
set to 2^31, a float score NaN, a piece's type), of folder blobs (one file of the folder mutated,
cut or grown) and of SQLite databases (a writable index's index.sqlite changed through SQLite
itself: a meta value, a passage's cell retyped, cut, grown or its bytes mutated, a row deleted,
copied or added to `removed`, a table dropped), else bytes. Inputs stream to
android_assets/jvm/KitFuzz.kt (one JVM, -Xmx512m), which runs the kit's reader and answers
accepted / refused KIND / violation (a refusal by the index and writable targets must be
corrupt_index); a hang past HANG_SECONDS is a violation too. Violations go to
.fuzz/kit-crashes/kotlin/TARGET/.

`diff` sends each mutant to the three readers (Python in this process; Kotlin; Swift through
tools/fuzz/kits/swift/DiffMain.swift): all three refuse with one kind (an index: corrupt_index),
or all three accept with the same content (the SentencePiece model's pieces, scores, types,
charsmap and the ids of the texts; an index's search answers in every mode, rows, ids and float64
score bits; a writable index's passage and row counts and the same answers per passage and per
chunk). Disagreements go to .fuzz/kit-diff/TARGET/.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import select
import sqlite3
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from edge_m3.retrieval.index_folder import CorruptIndexError
from tools.fuzz.harness import CORRUPT_INDEX_TARGETS, SEEDS, pack, rehash, unpack
from tools.fuzz.kits.fuzz_swift import REGRESSIONS, ROOT, SEED_DIRS, env, regressions
from tools.kit import retrieval_wire as wire

HANG_SECONDS = 20.0
KOTLIN_TARGETS = ("spmodel", "manifest", "bundle", "golden", "vocab_map", "wordpiece", "bpe", "index",
                  "writable")
DIFF_TARGETS = ("spmodel", "index", "writable")
TEXTS = ("Hello wörld, ＡＢＣ ﬁ 123 <mask> [MASK] </s>", "日本語のテキスト 👍🏽 e\u0301", "x" * 120, "")
INTERESTING = (0, -1, 1, 2, 255, 65535, 2**31 - 1, 2**31, 2**32, 2**63 - 1, 2**63, -(2**31), 1e308, 0.5, -0.0)


# --------------------------------------------------------------------------- seeds

def seeds(target: str) -> list[bytes]:
    """What the Kotlin loop and the differential start from (the kits' libFuzzer seeds)."""
    out = [p.read_bytes() for d in SEED_DIRS[target] for p in sorted(d.iterdir()) if p.is_file()]
    if target == "wordpiece":
        out.append(unpack((SEEDS / "bundle" / "tiny-wordpiece").read_bytes())["vocab.txt"])
    for d in (*regressions(target), REGRESSIONS / "kotlin" / target):
        if d.is_dir():
            out += [p.read_bytes() for p in sorted(d.iterdir()) if p.is_file()]
    return out


# --------------------------------------------------------------------------- mutation

def _varint(n: int) -> bytes:
    out = bytearray()
    n &= (1 << 64) - 1
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _read_varint(b: bytes, i: int) -> tuple[int, int]:
    n = shift = 0
    while i < len(b) and shift < 70:
        c = b[i]
        i += 1
        n |= (c & 0x7F) << shift
        shift += 7
        if not c & 0x80:
            return n, i
    raise ValueError


def proto_fields(b: bytes) -> list[tuple[int, int, bytes]] | None:
    """Top-level (field, wire, raw payload) of a protobuf message, or None when it does not parse."""
    out, i = [], 0
    try:
        while i < len(b):
            key, i = _read_varint(b, i)
            f, w = key >> 3, key & 7
            if w == 0:
                _, j = _read_varint(b, i)
            elif w == 1:
                j = i + 8
            elif w == 5:
                j = i + 4
            elif w == 2:
                n, i = _read_varint(b, i)
                j = i + n
            else:
                return None
            if j > len(b):
                return None
            out.append((f, w, b[i:j]))
            i = j
    except ValueError:
        return None
    return out


def proto_pack(fields: list[tuple[int, int, bytes]]) -> bytes:
    out = bytearray()
    for f, w, p in fields:
        out += _varint(f << 3 | w)
        if w == 2:
            out += _varint(len(p))
        out += p
    return bytes(out)


def mutate_proto(b: bytes, rng: random.Random, depth: int = 0) -> bytes:
    fields = proto_fields(b)
    if not fields:
        return mutate_bytes(b, rng)
    k = rng.randrange(len(fields))
    f, w, p = fields[k]
    op = rng.randrange(8)
    if op == 0:
        del fields[k]
    elif op == 1:
        fields.insert(rng.randrange(len(fields) + 1), fields[k])
    elif op == 2 and w == 2:  # a length that lies: raw bytes so the varint can say 2^31
        raw = _varint(f << 3 | 2) + _varint(rng.choice([2**31, 2**32 - 1, len(p) + 1, 2**63])) + p
        return proto_pack(fields[:k]) + raw + proto_pack(fields[k + 1:])
    elif op == 3 and w == 5:
        fields[k] = (f, w, struct.pack("<f", rng.choice([float("nan"), float("inf"), -1e38, 0.0, 1e-45])))
    elif op == 4 and w == 0:
        fields[k] = (f, w, _varint(rng.choice(INTERESTING[:12]) if rng.random() < 0.8 else rng.randrange(8)))
    elif op in (5, 6) and w == 2 and depth < 2:
        fields[k] = (f, w, mutate_proto(p, rng, depth + 1) if op == 5 else mutate_bytes(p, rng))
    elif op == 7:
        fields[k] = (f, rng.choice([0, 1, 2, 5, 3]), p)
    else:
        fields[k] = (f, w, mutate_bytes(p, rng)) if w == 2 else fields[k]
    return proto_pack(fields)


def _nodes(x: object, path: tuple = ()) -> list[tuple]:
    out = [path]
    if isinstance(x, dict):
        for key, v in x.items():
            out += _nodes(v, (*path, key))
    elif isinstance(x, list):
        for i, v in enumerate(x[:64]):
            out += _nodes(v, (*path, i))
    return out


def _value(rng: random.Random, old: object) -> object:
    r = rng.randrange(10)
    if r < 4:
        return rng.choice(INTERESTING)
    if r == 4:
        return rng.choice(["", "x" * 300, "\n", "../x", "int8", "fp16", "none", "float32", "é", "[MASK]"])
    if r == 5:
        return rng.choice([[], {}, None, True, [[1]], {"a": 1}])
    if r == 6 and isinstance(old, list) and old:
        return old[: rng.randrange(len(old))]
    if r == 7 and isinstance(old, list) and old:
        return old + old[-1:] * rng.randrange(1, 4)
    if r == 8 and isinstance(old, (int, float)) and not isinstance(old, bool):
        return old + rng.choice([-1, 1, 7, -(2**31)])
    if r == 9 and isinstance(old, dict) and old:
        d = dict(old)
        del d[rng.choice(list(d))]
        return d
    return [old]


def mutate_json(b: bytes, rng: random.Random) -> bytes:
    try:
        tree = json.loads(b)
    except (ValueError, RecursionError):
        return mutate_bytes(b, rng)
    if rng.random() < 0.02:
        return b"[" * rng.choice([5000, 100000])
    path = rng.choice(_nodes(tree))
    if not path:
        tree = _value(rng, tree)
    else:
        parent = tree
        for k in path[:-1]:
            parent = parent[k]
        parent[path[-1]] = _value(rng, parent[path[-1]])
    return json.dumps(tree, ensure_ascii=rng.random() < 0.5).encode()


def mutate_bytes(b: bytes, rng: random.Random) -> bytes:
    a = bytearray(b)
    op = rng.randrange(6)
    if op == 0 and a:
        a[rng.randrange(len(a))] ^= 1 << rng.randrange(8)
    elif op == 1 and a:
        a[rng.randrange(len(a))] = rng.choice([0, 0xFF, 0x7F, 0x80, 0x0A, 0x22])
    elif op == 2 and a:
        i = rng.randrange(len(a))
        del a[i:i + rng.randrange(1, 64)]
    elif op == 3:
        i = rng.randrange(len(a) + 1)
        a[i:i] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 16)))
    elif op == 4 and a:
        a = a[: rng.randrange(len(a) + 1)]
    elif a:
        i = rng.randrange(len(a))
        j = rng.randrange(i, min(len(a), i + 256) + 1)
        k = rng.randrange(len(a) + 1)
        a[k:k] = a[i:j]
    return bytes(a)


def mutate_file(name: str, b: bytes, rng: random.Random) -> bytes:
    if name.endswith(".model"):
        return mutate_proto(b, rng)
    if name.endswith(".json"):
        return mutate_json(b, rng)
    if name.endswith(".bin") and rng.random() < 0.3:  # an array cut short or grown
        n = rng.choice([0, 1, 4, 8, len(b) // 2, len(b) + 4, len(b) * 2])
        return (b * 3)[:n]
    return mutate_bytes(b, rng)


# Values a cell of a writable index's database may be set to, of every SQLite storage class.
SQL_VALUES = (None, 0, -1, 1, 7, 2**31 - 1, 2**31, 2**63 - 1, -(2**63), 0.5, -0.0, 1e308, float("inf"),
              float("nan"), "", "x", "0", "1e999", "float32", "fp16", "int8", "none", "null", "[]", "{}",
              '"a"', "\n", "+2", " 2", "-0", "\u0662", "\u00b2", "\uff19", "65536", "65537",
              "9223372036854775807", "9223372036854775808", b"", b"\x00" * 4,
              b"\xff" * 8, b"\x00\x00\xc0\x7f" * 8)
SQL_SCHEMA_EDITS = ("DROP TABLE removed", "DROP TABLE meta", "ALTER TABLE passages ADD COLUMN extra",
                    "DELETE FROM sqlite_sequence", "UPDATE sqlite_sequence SET seq = 9223372036854775807",
                    "DROP INDEX IF EXISTS sqlite_autoindex_passages_1", "VACUUM")


class RawText(bytes):
    """Bytes stored as a TEXT cell (`CAST(? AS TEXT)`): text that need not be UTF-8."""


def _mark(v: object) -> str:
    return "CAST(? AS TEXT)" if isinstance(v, RawText) else "?"


def _bind(v: object) -> object:
    return bytes(v) if isinstance(v, RawText) else v


def _sql_value(rng: random.Random, old: object) -> object:
    """A new value for a cell: `old` mutated in its own class (a blob's bytes, a JSON text, an
    integer made interesting), text that is not UTF-8, or any class's interesting value."""
    if rng.random() < 0.3:
        return rng.choice(SQL_VALUES)
    if rng.random() < 0.05:  # a text cell of bytes SQLite does not check (a truncated or stray UTF-8 byte)
        text = old.encode("utf-8", "surrogateescape") if isinstance(old, str) else b"x"
        bad = rng.choice([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x00"])
        return RawText(text[:rng.randrange(len(text) + 1)] + bad)
    if isinstance(old, bytes):
        if rng.random() < 0.4:  # an array cut short or grown, as an index's .bin files are
            n = len(old)
            return (old * 3)[:rng.choice([0, 1, 2, 4, 8, n // 2, n - 1, n + 4, n * 2])]
        return mutate_bytes(old, rng)
    if isinstance(old, str):
        return mutate_json(old.encode("utf-8", "surrogateescape"), rng).decode("utf-8", "replace")
    if isinstance(old, int):
        return rng.choice([v for v in INTERESTING if isinstance(v, int)] + [old + 1, old - 1])
    return rng.choice(SQL_VALUES)


def mutate_sqlite(b: bytes, rng: random.Random) -> bytes:
    """A writable index's database changed through SQLite itself, so that most mutants are
    well-formed databases whose content lies (a retyped cell, a blob cut short, a meta value
    past its range, a row copied or deleted) and reach the readers past quick_check; bytes
    mutated when `b` is no database SQLite can change."""
    shm = "/dev/shm" if Path("/dev/shm").is_dir() else None
    with tempfile.NamedTemporaryFile(dir=shm, suffix=".sqlite") as f:
        f.write(b)
        f.flush()
        try:
            con = sqlite3.connect(f.name, isolation_level=None)
            try:
                con.execute("PRAGMA journal_mode=DELETE")
                tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
                op = rng.random()
                if op < 0.05 or not tables:
                    con.execute(rng.choice(SQL_SCHEMA_EDITS))
                else:
                    table = rng.choice(tables)  # text that may not be UTF-8 read as it is:
                    con.text_factory = lambda b: b.decode("utf-8", "surrogateescape")
                    cur = con.execute(f'SELECT rowid, * FROM "{table}" LIMIT 200')
                    cols = [d[0] for d in cur.description][1:]
                    rows = cur.fetchall()
                    if op < 0.12 and rows:
                        con.execute(f'DELETE FROM "{table}" WHERE rowid = ?', (rng.choice(rows)[0],))
                    elif op < 0.25 and rows:  # a copy with one cell changed, in place of any it collides with
                        row = list(rng.choice(rows)[1:])
                        i = rng.randrange(len(row))
                        row[i] = _sql_value(rng, row[i])
                        names = ", ".join(f'"{c}"' for c in cols if c != "seq")
                        vals = [v for c, v in zip(cols, row, strict=True) if c != "seq"]
                        marks = ", ".join(map(_mark, vals))
                        con.execute(f'INSERT OR REPLACE INTO "{table}" ({names}) VALUES ({marks})',
                                    [_bind(v) for v in vals])
                    elif rows:
                        row = rng.choice(rows)
                        i = rng.randrange(len(cols))
                        v = _sql_value(rng, row[i + 1])
                        con.execute(f'UPDATE "{table}" SET "{cols[i]}" = {_mark(v)} WHERE rowid = ?',
                                    (_bind(v), row[0]))
                    else:
                        con.execute(rng.choice(SQL_SCHEMA_EDITS))
            finally:
                con.close()
        except (sqlite3.Error, ValueError, OverflowError):
            return mutate_bytes(b, rng)
        return Path(f.name).read_bytes()


def mutate(target: str, b: bytes, rng: random.Random) -> bytes:
    for _ in range(rng.randint(1, 4)):
        if target in ("bundle", "index", "bpe"):
            files = unpack(b)
            if files and rng.random() < 0.9:
                name = rng.choice(sorted(files))
                files[name] = mutate_file(name, files[name], rng)
                if rng.random() < 0.03:
                    del files[name]
                try:
                    b = pack(files)
                    continue
                except ValueError:
                    pass
            b = mutate_bytes(b, rng)
        elif target == "spmodel":
            b = mutate_proto(b, rng) if rng.random() < 0.85 else mutate_bytes(b, rng)
        elif target in ("manifest", "golden", "vocab_map"):
            b = mutate_json(b, rng) if rng.random() < 0.85 else mutate_bytes(b, rng)
        elif target == "writable":
            b = mutate_sqlite(b, rng) if rng.random() < 0.85 else mutate_bytes(b, rng)
        else:
            b = mutate_bytes(b, rng)
    return b


# --------------------------------------------------------------------------- the kits' processes

class Kit:
    """One reader process speaking KitFuzz.kt's protocol; restarted after a crash or a hang."""

    def __init__(self, name: str, cmd: list[str], extra_env: dict[str, str] | None = None) -> None:
        self.name, self.cmd, self.proc = name, cmd, None
        self.env = {**env(""), **(extra_env or {})}

    def _start(self) -> subprocess.Popen:
        if self.proc is None or self.proc.poll() is not None:
            self.proc = subprocess.Popen(self.cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.DEVNULL, env=self.env, cwd=ROOT)
        return self.proc

    def ask(self, target: str, data: bytes) -> str:
        p = self._start()
        try:
            p.stdin.write(f"{target} {len(data)}\n".encode() + data)
            p.stdin.flush()
        except BrokenPipeError:
            return self._died()
        ready, _, _ = select.select([p.stdout], [], [], HANG_SECONDS)
        if not ready:
            self.close()
            return f"violation hang past {HANG_SECONDS:.0f} s"
        line = p.stdout.readline()
        if not line:
            return self._died()
        return line.decode("utf-8", "replace").rstrip("\n")

    def _died(self) -> str:
        rc = self.proc.wait()
        self.proc = None
        return f"violation the process died (exit {rc}: a trap or a crash)"

    def close(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None


def kotlin() -> Kit:
    jar = subprocess.run([str(ROOT / "tools/kit/kit_jar.sh")], check=True, capture_output=True,
                         text=True).stdout.strip()
    jdbc = wire.SQLITE_JDBC_JAR
    return Kit("kotlin", ["java", "-Xmx512m", "-Xss4m", "-XX:+UseSerialGC", "-cp", f"{jar}:{jdbc}",
                          "dev.edgem3.KitFuzzKt", str(ROOT / "tools" / "fuzz")])


def swift() -> Kit:
    from tools.fuzz.kits.fuzz_swift import build

    return Kit("swift", [str(build())], {"EDGE_M3_FUZZ_DIFF": "1"})


# --------------------------------------------------------------------------- Python's content

def python_answer(target: str, data: bytes) -> str:
    from edge_m3.errors import EdgeM3Error

    try:
        answer = {"spmodel": _py_spmodel, "index": _py_index, "writable": _py_writable}[target]
        return "accepted " + answer(data)
    except EdgeM3Error as exc:  # with the kits' kind (EdgeM3Error.kind)
        return f"refused {exc.kind} {str(exc)[:200]}"
    except Exception as exc:  # noqa: BLE001  (the contract: reported, not raised)
        return f"violation {type(exc).__name__}: {str(exc)[:300]}"


def _spec():
    from edge_m3.tokenizer.tokenizer import TokenizerSpec

    m = json.loads(unpack((SEEDS / "bundle" / "tiny").read_bytes())["manifest.json"])
    return TokenizerSpec.from_manifest(m["tokenizer"])


def _py_spmodel(data: bytes) -> str:
    from edge_m3.tokenizer.spmodel import ModelFileError, read_model
    from edge_m3.tokenizer.tokenizer import Tokenizer
    from tools.fuzz.harness import scratch_file

    try:
        m = read_model(data)
    except ModelFileError as exc:  # what Tokenizer turns into an EdgeM3Error
        from edge_m3.errors import EdgeM3Error
        raise EdgeM3Error(str(exc)) from None
    lines = []
    for piece, score, kind in zip(m.pieces, m.scores, m.types, strict=True):
        bits = "nan" if score != score else struct.pack(">f", score).hex()
        lines.append(f"{','.join(format(ord(c), 'x') for c in piece)} {bits} {kind}\n")
    lines.append(f"charsmap {m.precompiled_charsmap.hex()}\n")
    digest = hashlib.sha256("".join(lines).encode()).hexdigest()[:16]
    from edge_m3.errors import EdgeM3Error
    try:
        tok = Tokenizer(scratch_file("sentencepiece.bpe.model", data), _spec())
    except EdgeM3Error:
        return f"{digest} tokenizer-refused"
    return digest + " " + ";".join(",".join(map(str, tok.encode(t))) for t in TEXTS)


def _py_index(data: bytes) -> str:
    import numpy as np

    from edge_m3.retrieval.index import Index
    from edge_m3.spec import (
        COLBERT_VECS,
        DENSE_VECS,
        LEXICAL_WEIGHTS,
        SCORE_MODES,
        mode_signals,
    )
    from tools.fuzz.harness import id_text, score_bits, write_folder

    idx = Index.load(write_folder(unpack(data)))  # rehashed by run_diff
    n, d = len(idx), idx.dim
    tokens = [int(t) for t in np.asarray(idx.arrays["sparse_tokens"][:3])]
    query = {DENSE_VECS: np.full(d, 0.25, np.float32),
             LEXICAL_WEIGHTS: {str(t): 0.5 for t in tokens} | {"7": 0.25},
             COLBERT_VECS: np.full((2, d), 0.25, np.float32)}
    parts = []
    for mode in SCORE_MODES:
        if "colbert" in mode_signals(mode) and not idx.has_colbert:
            continue
        hits = idx.search(query, 3, mode)
        hs = [f"{h.row}:{id_text(idx.ids[h.row])}:{score_bits(h.score)}" for h in hits]
        parts.append(" ".join([mode, *hs]))
    return f"{n} {d} " + ";".join(parts)


def _py_writable(data: bytes) -> str:
    from tools.fuzz.targets.writable import answers

    return answers(data, lambda _: 0.25, every=True)


# --------------------------------------------------------------------------- the loops

def verdict(line: str) -> str:
    return line.split(" ", 1)[0]


def content(line: str) -> str:
    return line.split(" ", 1)[1] if verdict(line) == "accepted" and " " in line else ""


def refusal_kind(line: str) -> str:
    """A "refused KIND MESSAGE" answer's KIND (spec.KIT_ERROR_KINDS)."""
    return line.split(" ", 2)[1] if verdict(line) == "refused" and " " in line else ""


# What every reader must refuse a target's mutant with (a target not here: one kind, any, in all three).
REFUSAL_KINDS = {t: CorruptIndexError.kind for t in CORRUPT_INDEX_TARGETS}


def run_kotlin(target: str, budget: int, seed: int, out: Path, seconds: float = 0) -> dict:
    rng = random.Random(seed)
    corpus = seeds(target)
    kit = kotlin()
    seen: set[str] = set()
    stats = {"executions": 0, "accepted": 0, "refused": 0, "violations": 0, "corpus": len(corpus)}
    t0 = time.monotonic()
    try:
        for base in corpus:  # every seed and regression input first, unmutated
            _judge(kit, target, base, stats, out, seen, corpus, grow=False)
        while stats["executions"] < budget and not (seconds and time.monotonic() - t0 > seconds):
            data = mutate(target, rng.choice(corpus), rng)
            _judge(kit, target, data, stats, out, seen, corpus, grow=True)
    finally:
        kit.close()
    stats["corpus"] = len(corpus)
    stats["seconds"] = round(time.monotonic() - t0, 1)
    return stats


def _judge(kit: Kit, target: str, data: bytes, stats: dict, out: Path, seen: set, corpus: list,
           grow: bool) -> None:
    line = kit.ask(target, data)
    stats["executions"] += 1
    v = verdict(line)
    if v == "violation":
        stats["violations"] += 1
        out.mkdir(parents=True, exist_ok=True)
        name = hashlib.sha1(data).hexdigest()[:16]
        (out / name).write_bytes(data)
        (out / f"{name}.txt").write_text(line + "\n")
        print(f"{target}: {line[:400]} -> {out / name}", file=sys.stderr)
    else:
        stats[v] = stats.get(v, 0) + 1
        key = line if v == "accepted" else " ".join(line.split(" ")[:2]) + line[-40:]
        if grow and v == "accepted" and key not in seen and len(corpus) < 500:  # refusals would crowd it
            corpus.append(data)
        seen.add(key)


def diff_ask(kit: Kit, target: str, data: bytes) -> str:
    """A kit's answer in the differential's form: Kotlin's `index-diff` (the files as given, not
    rehashed again) and `writable-diff` (every passage), Swift's DiffMain (always that form)."""
    wire = {"index": "index-diff", "writable": "writable-diff"} if kit.name == "kotlin" else {}
    return kit.ask(wire.get(target, target), data)


def run_diff(target: str, budget: int, seed: int, out: Path, seconds: float = 0) -> dict:
    rng = random.Random(seed)
    corpus = seeds(target)
    kits = [kotlin(), swift()]
    stats = {"executions": 0, "all_accepted": 0, "all_refused": 0, "disagreements": 0}
    t0 = time.monotonic()
    try:
        i = 0
        while stats["executions"] < budget and not (seconds and time.monotonic() - t0 > seconds):
            data = corpus[i] if i < len(corpus) else mutate(target, rng.choice(corpus), rng)
            i += 1
            if target == "index":  # one rehash for all three: the same files reach each reader
                files = unpack(data)
                rehash(files, "index.json")
                data = pack(files)
            answers = {"python": python_answer(target, data)}
            answers |= {k.name: diff_ask(k, target, data) for k in kits}
            stats["executions"] += 1
            verdicts = {verdict(a) for a in answers.values()}
            contents = {content(a) for a in answers.values()}
            kinds = {refusal_kind(a) for a in answers.values()}
            want = REFUSAL_KINDS.get(target)
            if verdicts == {"refused"} and len(kinds) == 1 and (want is None or kinds == {want}):
                stats["all_refused"] += 1
            elif verdicts == {"accepted"} and len(contents) == 1:
                stats["all_accepted"] += 1
                if len(corpus) < 300 and rng.random() < 0.2:
                    corpus.append(data)
            else:
                stats["disagreements"] += 1
                out.mkdir(parents=True, exist_ok=True)
                name = hashlib.sha1(data).hexdigest()[:16]
                (out / name).write_bytes(data)
                report = "\n".join(f"{k}: {a[:600]}" for k, a in answers.items())
                (out / f"{name}.txt").write_text(report + "\n")
                print(f"{target}: disagreement -> {out / name}: " +
                      " | ".join(f"{k}: {a[:160]}" for k, a in answers.items()), file=sys.stderr)
    finally:
        for k in kits:
            k.close()
    stats["seconds"] = round(time.monotonic() - t0, 1)
    return stats


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.fuzz.kits.loop", description=__doc__.splitlines()[0])
    ap.add_argument("mode", choices=("kotlin", "diff"))
    ap.add_argument("target")
    ap.add_argument("--budget", type=int, default=2000, help="inputs to try")
    ap.add_argument("--seconds", type=float, default=0, help="stop after this long too (0: no limit)")
    ap.add_argument("--seed", type=int, default=38)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    if args.mode == "kotlin":
        if args.target not in KOTLIN_TARGETS:
            ap.error(f"target: one of {', '.join(KOTLIN_TARGETS)}")
        out = args.out or ROOT / ".fuzz" / "kit-crashes" / "kotlin" / args.target
        stats = run_kotlin(args.target, args.budget, args.seed, out, args.seconds)
        bad = stats["violations"]
    else:
        if args.target not in DIFF_TARGETS:
            ap.error(f"target: one of {', '.join(DIFF_TARGETS)}")
        out = args.out or ROOT / ".fuzz" / "kit-diff" / args.target
        stats = run_diff(args.target, args.budget, args.seed, out, args.seconds)
        bad = stats["disagreements"]
    print(json.dumps({"mode": args.mode, "target": args.target, **stats}))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
