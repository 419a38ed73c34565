"""The contract every fuzz target is held to, its bounds, and the folder inputs some readers take.

A reader given any bytes must either accept them (and then what it returns must be usable: the
target's own asserts) or refuse them with one EdgeM3Error whose message is one line, as the CLI
prints it; a reader of an index's files (CORRUPT_INDEX_TARGETS) with a CorruptIndexError, the kits'
corrupt_index. Anything else is a ContractViolation: another exception (an IndexError, a
RecursionError, a MemoryError from an allocation sized by a length field), a run past
HANG_SECONDS, or a peak allocation past MEMORY_BYTES.

Readers of a folder (a bundle, an index, a checkpoint's tokenizer files) take one blob holding
several files (`pack`/`unpack`), so that libFuzzer mutates the files' contents in place.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import importlib
import json
import re
import resource
import shutil
import signal
import struct
import tempfile
import tracemalloc
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edge_m3.errors import EdgeM3Error, chain
from edge_m3.retrieval.index_folder import CorruptIndexError

ACCEPTED, REFUSED = "accepted", "refused"
# What targets tokenize once a tokenizer is accepted: specials, NFKC, accents, CJK, emoji, long words.
TEXTS = ("Hello wörld, ＡＢＣ ﬁ 123 <mask> [MASK] </s>", "日本語のテキスト 👍🏽 e\u0301", "x" * 120, "")
HANG_SECONDS = 20.0  # far above any seed's time: only a hang (or a runaway loop) reaches it
MEMORY_BYTES = 512 << 20  # peak traced allocation per input; the seeds need a few MB
FUZZ_DIR = Path(__file__).resolve().parent
SEEDS = FUZZ_DIR / "seeds"
REGRESSIONS = FUZZ_DIR / "regressions"

# One module per target in tools/fuzz/targets, each with `run(data: bytes) -> None`.
TARGETS = ("spmodel", "safetensors", "torch_pickle", "manifest", "bundle", "golden", "vocab_map",
           "index", "corpus_jsonl", "corpus_parquet", "wordpiece", "vocab_txt", "st_layout",
           "model_config", "bpe", "writable")
# Targets whose input is all an index's files: every refusal is corrupt_index (a CorruptIndexError).
CORRUPT_INDEX_TARGETS = ("index", "writable")
# Targets whose inputs the kits' targets of the same name take as they are (tools/fuzz/kits): each
# side's regression inputs are replayed by the other's (the `wordpiece` inputs differ: a
# checkpoint's tokenizer files here, a bundle's vocab.txt in the kits).
SHARED_WITH_KITS = ("spmodel", "manifest", "bundle", "golden", "vocab_map", "index", "bpe", "writable")
KIT_REGRESSIONS = Path(__file__).resolve().parent / "kits" / "regressions"


class ContractViolation(Exception):
    """A reader broke the contract on one input (the cause is chained)."""


@dataclass(frozen=True)
class Target:
    name: str
    run: Callable[[bytes], None]


def target(name: str) -> Target:
    """The target module `name` (tools/fuzz/targets/<name>.py)."""
    if name not in TARGETS:
        raise EdgeM3Error(f"fuzz target {name!r} unknown (known: {', '.join(TARGETS)})")
    return Target(name, importlib.import_module(f"tools.fuzz.targets.{name}").run)


def inputs(name: str) -> list[Path]:
    """The committed seeds and regression inputs of a target (with the kits' regression inputs of
    a target they share), in name order."""
    dirs = (SEEDS / name, REGRESSIONS / name, *([KIT_REGRESSIONS / name] if name in SHARED_WITH_KITS else []))
    return sorted(p for d in dirs if d.is_dir() for p in d.iterdir() if p.is_file())


def check(t: Target, data: bytes, bounded: bool = True) -> str:
    """ACCEPTED or REFUSED; ContractViolation otherwise. `bounded`: time and memory checked here
    (replays); a fuzzing child leaves them to libFuzzer's -timeout and its address-space limit."""
    try:
        with _bounds(bounded):
            t.run(data)
    except EdgeM3Error as exc:
        msg = str(exc)
        if _out_of_memory(exc):  # a fuzzing child's address-space limit, refused by a catch-all
            raise ContractViolation(f"{t.name}: a refusal after running out of memory: {msg[:300]}") from exc
        if not msg.strip() or len(msg.splitlines()) != 1:
            raise ContractViolation(f"{t.name}: the refusal is not one line: {msg[:300]!r}") from exc
        if t.name in CORRUPT_INDEX_TARGETS and not isinstance(exc, CorruptIndexError):
            raise ContractViolation(f"{t.name}: the refusal is not corrupt_index: {type(exc).__name__}: "
                                    f"{msg[:300]}") from exc
        return REFUSED
    except Exception as exc:  # the contract: nothing but EdgeM3Error may escape a reader
        raise ContractViolation(f"{t.name}: {type(exc).__name__}: {str(exc)[:300]}") from exc
    return ACCEPTED


def _out_of_memory(exc: BaseException) -> bool:
    """Was `exc` raised while handling a MemoryError? A reader that turns every exception into a
    refusal (`except Exception: raise EdgeM3Error(...) from None`) would hide the allocation the
    address-space limit stopped; `from None` hides the context from a traceback, not from here."""
    return any(isinstance(e, MemoryError) for e in chain(exc))


class _Hang(Exception):
    """Raised by the deadline's signal handler inside the reader."""


@contextlib.contextmanager
def _bounds(bounded: bool) -> Iterator[None]:
    if not bounded:
        yield
        return

    def hang(*_: Any) -> None:
        raise _Hang(f"still running after {HANG_SECONDS} s")

    old = signal.signal(signal.SIGALRM, hang)
    tracing = tracemalloc.is_tracing()
    if not tracing:
        tracemalloc.start()
    tracemalloc.reset_peak()
    signal.setitimer(signal.ITIMER_REAL, HANG_SECONDS)
    try:
        yield
    finally:  # a refusal after a huge allocation is still a violation: raised over the refusal
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        peak = tracemalloc.get_traced_memory()[1]
        if not tracing:
            tracemalloc.stop()
        if peak > MEMORY_BYTES:
            raise MemoryError(f"peak allocation {peak >> 20} MB, the bound is {MEMORY_BYTES >> 20} MB")


def limit_address_space(extra: int) -> None:
    """Cap this process's address space at its current size plus `extra` bytes, so an allocation
    sized by a length field fails (MemoryError, a violation) instead of swapping the machine."""
    size = int(Path("/proc/self/statm").read_text().split()[0]) * resource.getpagesize()
    resource.setrlimit(resource.RLIMIT_AS, (size + extra, resource.RLIM_INFINITY))


# --------------------------------------------------------------------------- scratch files

_base: Path | None = None


def scratch() -> Path:
    """An empty directory for this input's files (RAM-backed when /dev/shm is there)."""
    global _base
    if _base is None:
        shm = Path("/dev/shm")
        _base = Path(tempfile.mkdtemp(prefix="edge-m3-fuzz-", dir=shm if shm.is_dir() else None))
        atexit.register(shutil.rmtree, _base, True)
    d = _base / "in"
    if d.exists():
        shutil.rmtree(d)
    d.mkdir()
    return d


def base_folder(name: str, files: dict[str, bytes]) -> Path:
    """`files` written as scratch folder `name`, which `scratch` never clears: the intact bundle
    a one-file target opens once (the inputs go to `scratch`, never into it)."""
    scratch()
    assert _base is not None
    root = _base / f"base-{name}"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir()
    for file, data in files.items():
        (root / file).write_bytes(data)
    return root


def scratch_file(name: str, data: bytes) -> Path:
    """`data` written as `name` in a fresh scratch directory."""
    path = scratch() / name
    path.write_bytes(data)
    return path


# --------------------------------------------------------------------------- the differential's form

def score_bits(score: float) -> str:
    """A score as the differential compares it: float64 bits, or "nan" (as the kits write it)."""
    return "nan" if score != score else struct.pack(">d", score).hex()


def id_text(pid: object) -> str:
    """A passage id as the differential compares it: "s" + UTF-8 hex, or "i" + the integer."""
    return "s" + pid.encode().hex() if isinstance(pid, str) else f"i{pid}"



# --------------------------------------------------------------------------- folder blobs

_MARK = b"\n==> "
_END = b" <==\n"
_PART = re.compile(r"[A-Za-z0-9_.-]{1,100}")  # a file system's 255-byte name limit stays far


def pack(files: dict[str, bytes]) -> bytes:
    """Several files as one input: `\\n==> NAME <==\\n` then the bytes, for each file."""
    out = b""
    for name, data in files.items():
        if _MARK in data:
            raise ValueError(f"{name} holds the file separator")
        out += _MARK + name.encode() + _END + data
    return out


def unpack(data: bytes) -> dict[str, bytes]:
    """`pack`'s files back; records with a name that is not a plain relative path (at most one
    folder deep) are dropped, so nothing is written outside the scratch directory."""
    files = {}
    for chunk in (b"\n" + data).split(_MARK)[1:]:
        raw, sep, body = chunk.partition(_END)
        try:
            name = raw.decode()
        except UnicodeDecodeError:
            continue
        parts = name.split("/")
        if sep and len(parts) <= 2 and all(_PART.fullmatch(p) and p not in (".", "..") for p in parts):
            files[name] = body
    return files


def write_folder(files: dict[str, bytes]) -> Path:
    """The files in a fresh scratch directory (a file and a folder of one name: the file is dropped)."""
    root = scratch()
    for name in sorted(files, key=lambda n: n.count("/"), reverse=True):
        path = root / name
        if path.exists():
            continue
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(files[name])
    return root


def rehash(files: dict[str, bytes], manifest: str) -> None:
    """Rewrite the manifest's `files` entries (sha256, size) to match the files given: issue 38's
    attacker, who edits a folder's files and its manifest together, so that the fuzzer's edits
    reach the reader past the hash check. An entry that already matches is left as it is, and a
    changed one is edited in the input's own text where its old values are found (`_splice_entry`),
    so the manifest's own mutations reach the reader as they were made; the whole manifest is
    written again only when that fails. The kits' harnesses do the same (FuzzTargets.swift, KitFuzz.kt)."""
    try:
        m = json.loads(files[manifest])
    except (KeyError, ValueError, RecursionError):
        return
    if not isinstance(m, dict) or not isinstance(m.get("files"), dict):
        return
    text: bytes | None = files[manifest]
    changed = False
    for name, entry in m["files"].items():
        if isinstance(entry, dict) and name in files:
            sha, size = hashlib.sha256(files[name]).hexdigest(), len(files[name])
            old_sha, old_size = entry.get("sha256"), entry.get("size")
            if old_sha == sha and type(old_size) is int and old_size == size:
                continue
            if text is not None and isinstance(old_sha, str) and type(old_size) is int:
                text = _splice_entry(text, old_sha, old_size, sha, size)
            else:
                text = None
            entry["sha256"], entry["size"] = sha, size
            changed = True
    if text is not None:
        files[manifest] = text
    elif changed:
        files[manifest] = json.dumps(m).encode()


def _splice_entry(raw: bytes, old_sha: str, old_size: int, sha: str, size: int) -> bytes | None:
    """`raw` with one entry's digest and size replaced in place: the old digest's one occurrence
    (quoted), then the first `"size": N` after it before a `}` (N the old size, a whole number);
    None when either is not found so."""
    quoted = f'"{old_sha}"'.encode()
    i = raw.find(quoted)
    if i < 0 or raw.find(quoted, i + 1) >= 0:
        return None
    out = raw[:i] + f'"{sha}"'.encode() + raw[i + len(quoted):]
    key = f'"size": {old_size}'.encode()
    close = out.find(b"}", i)
    close = len(out) if close < 0 else close
    j = out.find(key, i)
    while 0 <= j < close:
        end = j + len(key)
        if end == len(out) or out[end:end + 1] not in b"0123456789.eE":
            return out[:j] + f'"size": {size}'.encode() + out[end:]
        j = out.find(key, j + 1)
    return None


RSS_LIMIT_MB = 2048  # libFuzzer's bound past the process's peak when it starts (rss_limit_mb)


def rss_limit_mb() -> int:
    """libFuzzer's RSS bound: RSS_LIMIT_MB past the peak this process starts with. libFuzzer
    reads the peak (ru_maxrss), which Linux carries over from the parent across fork and
    execve: started by a test run that had built bundles (2.5 GB), a fixed 2,048 MB bound
    reported every first input as out of memory."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024 + RSS_LIMIT_MB
