"""Model lanes as processes: each runs the device pipeline's model step on its share of a chunk.

Why processes: LiteRT's Python binding holds the GIL while a model runs, so two lanes as threads
of one process ran one after the other (27.8 s against 17.0 s for one lane; docs/benchmarks.md,
"Bulk embedding"). Each lane here is a child
`python -m edge_m3.bulk.lanes` with its own model instance of `threads` threads; the parent
tokenizes and hands it token ids, the child runs, post-processes and sends back columns.

The pipe carries arrays only, framed by a JSON header (`write_frame` / `read_frame`): no pickle
crosses it, and the child's own stdout (where native libraries may print) is moved to stderr
before the model loads, so nothing but frames reaches the parent.
"""

from __future__ import annotations

import json
import os
import queue
import struct
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import IO

import numpy as np

from edge_m3.errors import EdgeM3Error
from edge_m3.runtime.pipeline import DevicePipeline, Encoded
from edge_m3.runtime.registry import WeightCache

_DTYPES = frozenset({"<i4", "<i8", "<f4", "|u1"})  # all a frame may hold
_LEN = struct.Struct("<Q")
ERROR = "error"  # a frame key: a UTF-8 message in place of a result
MAX_HEADER = 1 << 20
REPLIES_AHEAD = 2  # a child's replies waiting for the parent to read them (memory: two chunks' columns)


def write_frame(out: IO[bytes], arrays: dict[str, np.ndarray]) -> None:
    """Arrays as one frame: header length, JSON header (name, dtype, shape), raw bytes."""
    parts = [(k, np.ascontiguousarray(v)) for k, v in arrays.items()]
    header = json.dumps([[k, v.dtype.str, list(v.shape)] for k, v in parts]).encode()
    out.write(_LEN.pack(len(header)) + header)
    for _, v in parts:
        if v.nbytes:  # a memoryview with a 0 in its shape cannot be cast to bytes
            out.write(memoryview(v).cast("B"))
    out.flush()


def _read_exactly(inp: IO[bytes], n: int) -> bytes | None:
    buf = inp.read(n)
    if buf is None or len(buf) < n:
        return None
    return buf


def read_frame(inp: IO[bytes]) -> dict[str, np.ndarray] | None:
    """The next frame's arrays, or None at the end of the stream; refuses dtypes outside the
    few a frame may hold (nothing in it is ever turned into an object)."""
    head = _read_exactly(inp, _LEN.size)
    if head is None:
        return None
    (n,) = _LEN.unpack(head)
    if n > MAX_HEADER:
        raise EdgeM3Error(f"lane frame header of {n} bytes: not a lane stream")
    raw = _read_exactly(inp, n)
    if raw is None:
        return None
    out: dict[str, np.ndarray] = {}
    for name, dtype, shape in json.loads(raw):
        if dtype not in _DTYPES:
            raise EdgeM3Error(f"lane frame: dtype {dtype!r} refused")
        size = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
        data = _read_exactly(inp, size) if size else b""
        if data is None:
            return None
        out[str(name)] = np.frombuffer(data, dtype=dtype).reshape(shape)
    return out


def error_frame(message: str) -> dict[str, np.ndarray]:
    return {ERROR: text_frame(message)["text"]}


def ids_frame(pipe: DevicePipeline, encs: Sequence[Encoded]) -> dict[str, np.ndarray]:
    """A lane's request: each text's padded model inputs (the pipeline's own `model_inputs`)
    and its original-vocabulary ids (what the outputs report)."""
    offsets = np.zeros(len(encs) + 1, np.int64)
    np.cumsum([len(e.input_ids) for e in encs], out=offsets[1:])
    inputs = [pipe.model_inputs(e) for e in encs] or [(np.zeros((1, 0), np.int32),) * 2]
    return {"ids": np.fromiter((t for e in encs for t in e.input_ids), np.int32, int(offsets[-1])),
            "offsets": offsets, "seq_lens": np.asarray([e.seq_len for e in encs], np.int32),
            "model_ids": np.concatenate([i[0] for i, _ in inputs]).astype(np.int32),
            "masks": np.concatenate([m[0] for _, m in inputs]).astype(np.int32)}


def text_frame(text: str) -> dict[str, np.ndarray]:
    """A short text (a message, the setup's JSON) as a frame's one array."""
    return {"text": np.frombuffer(text.encode("utf-8", "replace"), np.uint8)}


def frame_text(frame: dict[str, np.ndarray], key: str = "text") -> str:
    return bytes(frame[key]).decode("utf-8", "replace")


class LaneProcess:
    """The parent's handle on one lane child: send a request, later read its columns."""

    def __init__(self, bundle: Path, runtime: str, threads: int, outputs: Sequence[str],
                 weight_cache: WeightCache | None) -> None:
        """Starts the child, which opens its model at once (`wait_ready` waits for it)."""
        cache = json.dumps(weight_cache.to_json()) if weight_cache is not None else ""
        cmd = [sys.executable, "-m", "edge_m3.bulk.lanes", str(bundle), runtime, str(threads),
               ",".join(outputs), cache]
        env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2")}
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=env)
        self._stderr: deque[str] = deque(maxlen=20)
        self._drain = threading.Thread(target=self._read_stderr, daemon=True)
        self._drain.start()

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self._stderr.append(line.decode("utf-8", "replace").rstrip())

    def send(self, frame: dict[str, np.ndarray]) -> None:
        try:
            write_frame(self.proc.stdin, frame)  # type: ignore[arg-type]
        except (BrokenPipeError, OSError):
            self.receive()  # raises with the child's reason
            raise EdgeM3Error("a model lane stopped") from None

    def receive(self) -> dict[str, np.ndarray]:
        """The child's next frame; its error (or its death) as one EdgeM3Error line."""
        frame = read_frame(self.proc.stdout)  # type: ignore[arg-type]
        if frame is None:
            self.proc.wait()
            self._drain.join(timeout=2)
            said = [s for s in self._stderr if s and not s.startswith(("INFO:", "WARNING:"))]
            why = said[-1] if said else f"exit status {self.proc.returncode}"
            raise EdgeM3Error(f"a model lane stopped: {why}")
        if ERROR in frame:
            raise EdgeM3Error(frame_text(frame, ERROR))
        return frame

    def close(self) -> None:
        """Stop the child: at the end of its input it exits; a result nobody will read (a job
        that stopped on an error) breaks its pipe rather than keeping it waiting."""
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()  # type: ignore[union-attr]
                self.proc.stdout.close()  # type: ignore[union-attr]
                self.proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()


def wait_ready(lanes: Sequence[LaneProcess], special_rows: dict[str, int]) -> None:
    """Wait until every child has its model open, then tell it the special tokens' rows (which
    the parent knows once its tokenizer is loaded, while the children were loading): a bundle a
    child cannot open fails here, in one line, and the others are stopped."""
    try:
        for lane in lanes:
            lane.receive()  # the ready frame
            lane.send(text_frame(json.dumps(special_rows)))
    except BaseException:
        for lane in lanes:
            lane.close()
        raise


def _serve(argv: Sequence[str]) -> int:
    """The child: open the model, then answer requests until stdin closes."""
    proto = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # native libraries' prints go to stderr, never into a frame
    bundle_path, runtime_name, threads, outputs, cache = argv
    try:
        from edge_m3.bulk.columns import result_columns
        from edge_m3.bundle import load_bundle
        from edge_m3.runtime.postprocess import postprocess
        from edge_m3.runtime.registry import RUNTIMES
        from edge_m3.runtime.runners import open_runner

        # The parent checked every hash a moment ago; the child checks the model's size only
        # (hashing it again in every lane cost each a third of a second of its start).
        bundle = load_bundle(Path(bundle_path), verify=False)
        runtime = RUNTIMES[runtime_name]
        entry = bundle.model_entry(runtime.format)
        model = bundle.path / entry.file
        if model.stat().st_size != bundle.manifest.files[entry.file]["size"]:
            raise EdgeM3Error(f"{model}: changed since the job checked it; refusing it")
        runner = open_runner(model, entry.signatures, runtime, int(threads),
                             WeightCache.from_json(json.loads(cache)) if cache else None)
        heads = tuple(h for h in outputs.split(",") if h)
        hidden = int(bundle.manifest.hidden_size)
    except Exception as exc:  # noqa: BLE001 - reported to the parent as its one line
        write_frame(proto, error_frame(str(exc) or type(exc).__name__))
        return 2
    write_frame(proto, {})
    stdin = sys.stdin.buffer
    setup = read_frame(stdin)
    if setup is None:
        return 0
    special = {str(k): int(v) for k, v in json.loads(frame_text(setup)).items()}
    # Requests are read by a thread as they come: the parent sends the next chunk while this
    # one runs, and must never block on a full pipe while this process writes its result.
    requests: queue.Queue[dict[str, np.ndarray] | None] = queue.Queue()

    def read_requests() -> None:
        try:
            while (frame := read_frame(stdin)) is not None:
                requests.put(frame)
        finally:
            requests.put(None)

    # Replies are written by another thread: the model goes on with the next request while the
    # parent drains this one through the pipe (which holds 64 KiB; a reply is megabytes).
    replies: queue.Queue[dict[str, np.ndarray] | None] = queue.Queue(maxsize=REPLIES_AHEAD)

    def write_replies() -> None:
        try:
            while (reply := replies.get()) is not None:
                write_frame(proto, reply)
        except BaseException as exc:  # noqa: BLE001 - the parent reads EOF and this line
            # (a closed pipe: the parent is gone). Exit at once: a thread that died quietly
            # would leave the parent waiting for a reply forever, and this process blocked on
            # the full reply queue for ever once the parent is gone. The line itself may fail
            # (a killed parent closed stderr too): exit whatever it does.
            try:
                sys.stderr.write(f"lane reply writer: {exc or type(exc).__name__}\n")
                sys.stderr.flush()
            finally:
                os._exit(1)

    threading.Thread(target=read_requests, daemon=True).start()
    writer = threading.Thread(target=write_replies, daemon=True)
    writer.start()
    while True:
        req = requests.get()
        if req is None:
            replies.put(None)
            writer.join()
            return 0
        try:
            offsets, ids, model_ids, masks = req["offsets"], req["ids"], req["model_ids"], req["masks"]
            results, at = [], 0
            for i, length in enumerate(req["seq_lens"].tolist()):
                n = int(offsets[i + 1] - offsets[i])
                rows = model_ids[at:at + length]
                raw = runner.run(rows[None, :], masks[None, at:at + length])
                results.append(postprocess(raw, rows[:n].tolist(), special,
                                           original_ids=ids[offsets[i]:offsets[i + 1]].tolist()))
                at += length
            reply = result_columns(results, heads, hidden)
        except Exception as exc:  # noqa: BLE001 - one line to the parent, which raises it
            reply = error_frame(str(exc) or type(exc).__name__)
        replies.put(reply)


if __name__ == "__main__":
    raise SystemExit(_serve(sys.argv[1:]))
