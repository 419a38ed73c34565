"""Bulk `embed --out` (edge_m3.bulk): Parquet, .npy and JSON-lines outputs equal the one-text-
per-call pipeline; bad rows are reported and skipped; a killed job resumes and loses nothing;
the one-line refusals."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from edge_m3.cli import main
from edge_m3.spec import recipe
from tests.support import blocked_imports_env

ROOT = Path(__file__).resolve().parents[1]
TEXTS = ["Hello world", "Ein kurzer deutscher Satz.", "这是一个中文句子。", "a " * 40,
         "Short", "Une phrase française un peu plus longue que les autres, pour changer de taille."]


def _corpus(path: Path, n: int, bad: bool = True) -> list[int]:
    """n text lines (with an empty line, a blank one and invalid UTF-8 when `bad`); returns the
    rows that must be rejected."""
    lines = [f"{TEXTS[i % len(TEXTS)]} {i}".encode() for i in range(n)]
    rejected = []
    if bad:
        for row, raw in ((3, b""), (7, b"   "), (11, b"caf\xe9 latin-1")):
            if row < n:
                lines[row] = raw
                rejected.append(row)
    path.write_bytes(b"\n".join(lines) + b"\n")
    return rejected


def read_output(out: Path) -> list[dict[str, Any]]:
    """Any bulk output as JSON-like records (FlagEmbedding's names, plus row and id)."""
    if out.suffix == ".jsonl":
        return [json.loads(line) for line in out.read_text("utf-8").splitlines()]
    if out.suffix == ".parquet":
        import pyarrow.parquet as pq

        recs = pq.read_table(out).to_pylist()
        for r in recs:
            lex = r.pop("lexical_weights", None)
            if lex is not None:
                r["lexical_weights"] = {str(k): w for k, w in zip(lex["ids"], lex["weights"], strict=True)}
        return recs
    a = {p.stem: np.load(p, allow_pickle=False) for p in out.glob("*.npy")}
    recs = []
    for i in range(len(a["row"])):
        def rag(name: str, values: str | None = None, i: int = i) -> np.ndarray:
            off = a[f"{name}.offsets"]
            return a[values or name][off[i]:off[i + 1]]
        r: dict[str, Any] = {"row": int(a["row"][i]), "id": a["id"][i].item(),
                             "input_ids": rag("input_ids").tolist()}
        if "dense_vecs" in a:
            r["dense_vecs"] = a["dense_vecs"][i].tolist()
        if "lexical_weights.ids" in a:
            r["lexical_weights"] = {str(k): float(w) for k, w in zip(
                rag("lexical_weights", "lexical_weights.ids").tolist(),
                rag("lexical_weights", "lexical_weights.weights").tolist(), strict=True)}
        if "colbert_vecs" in a:
            r["colbert_vecs"] = rag("colbert_vecs").tolist()
        recs.append(r)
    return recs


def assert_like_single(bundle: Path, texts: dict[int, str], got: list[dict[str, Any]],
                       outputs: tuple[str, ...] = ("dense_vecs", "lexical_weights", "colbert_vecs")) -> None:
    """Each record equals DevicePipeline.embed of its text: ids exact, values within the
    variant's device tolerance (edge_m3.spec)."""
    from edge_m3.bundle import load_bundle
    from edge_m3.runtime import RUNTIMES
    from edge_m3.runtime.pipeline import DevicePipeline

    b = load_bundle(bundle)
    tol = recipe(b.manifest.quant, "quant").device_tolerance
    pipe = DevicePipeline(b, RUNTIMES["litert"], 1)
    assert [r["id"] for r in got] == sorted(texts)  # input order, the row number as id
    for r in got:
        ref = pipe.embed(texts[r["id"]])
        assert r["input_ids"] == ref["input_ids"]
        assert set(outputs) <= set(r) and not {"dense_vecs", "lexical_weights", "colbert_vecs"} - set(
            outputs) & set(r)
        if "dense_vecs" in outputs:
            d, rd = np.asarray(r["dense_vecs"]), ref["dense_vecs"]
            assert d @ rd / np.linalg.norm(d) / np.linalg.norm(rd) >= tol.dense_cosine_min
            np.testing.assert_allclose(d, rd, atol=tol.max_abs)
        if "lexical_weights" in outputs:
            assert list(r["lexical_weights"]) == list(ref["lexical_weights"])
            np.testing.assert_allclose(list(r["lexical_weights"].values()),
                                       list(ref["lexical_weights"].values()), atol=tol.max_abs)
        if "colbert_vecs" in outputs:
            np.testing.assert_allclose(r["colbert_vecs"], ref["colbert_vecs"], atol=tol.max_abs)


@pytest.mark.parametrize("suffix", [".parquet", ".npy", ".jsonl"])
def test_outputs_equal_the_one_text_pipeline(tiny_bundles: dict[str, Path], tmp_path: Path,
                                             suffix: str, capsys: pytest.CaptureFixture[str]) -> None:
    bundle = tiny_bundles["int8"]
    f = tmp_path / "corpus.txt"
    bad = _corpus(f, 23)
    out = tmp_path / f"emb{suffix}"
    outputs = "dense,sparse,colbert" if suffix != ".npy" else "dense,sparse"
    assert main(["embed", str(bundle), "--texts", str(f), "--out", str(out), "--part-rows", "5",
                 "--outputs", outputs]) == 0
    err = capsys.readouterr().err
    assert "20 text(s) embedded" in err and "3 row(s) rejected" in err
    lines = f.read_bytes().split(b"\n")
    texts = {i: lines[i].decode() for i in range(23) if i not in bad}
    got = read_output(out)
    assert [r["row"] for r in got if "row" in r] in ([], sorted(texts))
    cols = ("dense_vecs", "lexical_weights", "colbert_vecs")[: len(outputs.split(","))]
    assert_like_single(bundle, texts, got, cols)
    rejected = [json.loads(x) for x in (tmp_path / f"emb{suffix}.rejected.jsonl").read_text().splitlines()]
    assert [(r["row"], r["id"]) for r in rejected] == [(3, 3), (7, 7), (11, 11)]
    assert [r["reason"] for r in rejected] == ["empty text", "empty text", "not UTF-8 (byte 4 of the line)"]
    # Nothing half-written is left: no temp names, no parts of the JSON lines.
    assert not [p for p in tmp_path.rglob("*") if p.name.startswith(".") or p.suffix == ".part"]
    # Done is done: --resume has nothing to do; without it the output is refused.
    assert main(["embed", str(bundle), "--texts", str(f), "--out", str(out), "--part-rows", "5",
                 "--outputs", outputs, "--resume"]) == 0
    assert "complete already" in capsys.readouterr().err
    assert main(["embed", str(bundle), "--texts", str(f), "--out", str(out)]) == 2
    line = capsys.readouterr().err.strip()
    assert line.count("\n") == 0 and f"--out {out}: exists" in line and "--resume" in line


def test_jsonl_and_parquet_corpora(tiny_bundles: dict[str, Path], tmp_path: Path) -> None:
    """ids from the corpus; a bad JSON line or a null text is rejected with its row and id."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    bundle = tiny_bundles["int8"]
    src = tmp_path / "c.jsonl"
    src.write_text(json.dumps({"doc": "a", "body": TEXTS[0]}) + "\n{oops\n" +
                   json.dumps({"doc": "c", "body": TEXTS[2]}) + "\n", "utf-8")
    out = tmp_path / "j.parquet"
    assert main(["embed", str(bundle), "--texts", str(src), "--out", str(out), "--id-column", "doc",
                 "--text-column", "body", "--outputs", "dense"]) == 0
    got = pq.read_table(out).to_pylist()
    assert [(r["row"], r["id"]) for r in got] == [(0, "a"), (2, "c")] and set(got[0]) == {
        "row", "id", "input_ids", "dense_vecs"}
    src2 = tmp_path / "c.parquet"
    pq.write_table(pa.table({"id": [5, 6, 7], "text": [TEXTS[1], None, TEXTS[3]]}), src2)
    out2 = tmp_path / "p.npy"
    assert main(["embed", str(bundle), "--texts", str(src2), "--out", str(out2), "--outputs", "sparse"]) == 0
    assert np.load(out2 / "id.npy").tolist() == [5, 7]
    rej = json.loads((tmp_path / "p.npy.rejected.jsonl").read_text())
    assert rej == {"row": 1, "id": 6, "reason": "null 'text'"}


def _job(bundle: Path, texts: Path, out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "edge_m3.cli", "embed", str(bundle), "--texts", str(texts), "--out",
            str(out), "--part-rows", "40", "--outputs", "dense,sparse", *extra]


@pytest.mark.parametrize("suffix", [".parquet", ".jsonl"])
def test_killed_job_resumes_and_loses_nothing(tiny_bundles: dict[str, Path], tmp_path: Path,
                                              suffix: str) -> None:
    bundle = tiny_bundles["int8"]
    f = tmp_path / "corpus.txt"
    _corpus(f, 1200)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    whole = tmp_path / f"whole{suffix}"
    assert subprocess.run(_job(bundle, f, whole), env=env, capture_output=True).returncode == 0
    out = tmp_path / f"killed{suffix}"
    work = out if suffix == ".parquet" else tmp_path / f".{out.name}.parts"
    proc = subprocess.Popen(_job(bundle, f, out), env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    def committed() -> int:  # parts the job record counts (written atomically after each part)
        try:
            return int(json.loads((work / "_edge_m3_job.json").read_text())["parts"])
        except (OSError, ValueError, KeyError):
            return 0

    while committed() < 1:
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:]  # type: ignore[union-attr]
        assert time.monotonic() < deadline
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    record = json.loads((work / "_edge_m3_job.json").read_text())
    assert not record["complete"] and record["parts"] < 30  # killed mid-way
    # The same command refuses to overwrite; with --resume it goes on from the record.
    again = subprocess.run(_job(bundle, f, out), env=env, capture_output=True, text=True)
    assert again.returncode == 2 and "exists" in again.stderr
    done = subprocess.run(_job(bundle, f, out, "--resume"), env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"resumed at row {record['parts'] * 40}" in done.stderr
    assert read_output(out) == read_output(whole)
    assert (tmp_path / f"killed{suffix}.rejected.jsonl").read_text() == \
        (tmp_path / f"whole{suffix}.rejected.jsonl").read_text()
    if suffix == ".jsonl":  # a finished X.jsonl keeps no record (its parts dir is gone)
        return
    # A different job's output is not resumed into.
    other = subprocess.run(_job(bundle, f, out)[:-1] + ["dense", "--resume"], env=env,
                           capture_output=True, text=True)
    assert other.returncode == 2 and "not written by this job" in other.stderr and \
        len(other.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(("args", "names"), [
    (["--texts", "<tmp>/missing.txt", "--out", "<tmp>/o.parquet"], ("--texts", "missing.txt")),
    (["--texts", "<tmp>/c.txt", "--out", "<tmp>/o.csv"], ("--out", "o.csv", ".parquet")),
    (["--texts", "<tmp>/c.txt", "--out", "<tmp>/o.parquet", "--outputs", "dense,bogus"], ("--outputs",)),
    (["--texts", "<tmp>/c.txt", "--resume"], ("--resume", "--out")),
    (["--texts", "<tmp>/c.txt", "--out", "<tmp>/o.parquet", "--part-rows", "0"], ("--part-rows",)),
    (["--texts", "<tmp>/c.parquet", "--out", "<tmp>/o.parquet", "--text-column", "body"],
     ("--texts", "c.parquet", "no column 'body'")),
])
def test_bad_options_are_one_line(tiny_bundles: dict[str, Path], tmp_path: Path, args: list[str],
                                  names: tuple[str, ...], capsys: pytest.CaptureFixture[str]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    (tmp_path / "c.txt").write_text("hello\n")
    pq.write_table(pa.table({"id": [1], "text": ["x"]}), tmp_path / "c.parquet")
    argv = ["embed", str(tiny_bundles["int8"]), *[a.replace("<tmp>", str(tmp_path)) for a in args]]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("edge-m3: error: ")
    for name in names:
        assert name in err
    assert not (tmp_path / "o.parquet").exists()


def test_runtime_install_writes_npy_and_jsonl(tiny_bundles: dict[str, Path], tmp_path: Path) -> None:
    """`pip install edge-m3` (no pyarrow, no Ray) runs bulk jobs to .npy and JSON lines, and names
    the extra to install for Parquet and Ray in one line."""
    env = blocked_imports_env(tmp_path, ("pyarrow", "ray", "pandas", "torch", "tensorflow"))
    f = tmp_path / "c.txt"
    _corpus(f, 9)
    for suffix in (".npy", ".jsonl"):
        done = subprocess.run(_job(tiny_bundles["int8"], f, tmp_path / f"o{suffix}"), env=env,
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-2000:]
        assert "7 text(s) embedded" in done.stderr
    for extra, want in (([], "pip install 'edge-m3[parquet]'"), (["--engine", "ray"], "edge-m3[ray]")):
        done = subprocess.run(_job(tiny_bundles["int8"], f, tmp_path / "p.parquet", *extra), env=env,
                              capture_output=True, text=True)
        assert done.returncode == 2 and want in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_lanes_in_processes_equal_one_lane_and_stop_in_one_line(tiny_bundles: dict[str, Path],
                                                                tmp_path: Path) -> None:
    """Two lane processes write exactly what one in-process lane writes (same floats, same order,
    ids and rejects), and the index build's per-text path through them equals the in-process one;
    a child that cannot open its model stops the job in one line."""
    import pyarrow.parquet as pq

    from edge_m3.bulk.engine import BulkEmbedder
    from edge_m3.bulk.lanes import LaneProcess, wait_ready
    from edge_m3.bundle import load_bundle
    from edge_m3.common.corpus import Row
    from edge_m3.errors import EdgeM3Error
    from edge_m3.runtime import RUNTIMES

    bundle = tiny_bundles["int8"]
    f = tmp_path / "corpus.txt"
    _corpus(f, 61)
    outs = {}
    for lanes in ("1", "2"):
        outs[lanes] = tmp_path / f"l{lanes}.parquet"
        assert main(["embed", str(bundle), "--texts", str(f), "--out", str(outs[lanes]), "--threads", "2",
                     "--lanes", lanes, "--part-rows", "16"]) == 0
    assert pq.read_table(outs["1"]).equals(pq.read_table(outs["2"]))
    rejected = [(tmp_path / f"l{n}.parquet.rejected.jsonl").read_bytes() for n in (1, 2)]
    assert rejected[0] == rejected[1]

    b = load_bundle(bundle)
    heads = ("dense", "sparse", "colbert")
    rows = [Row(i, i, t) for i, t in enumerate(TEXTS * 3)]
    with BulkEmbedder(b, RUNTIMES["litert"], 2, heads, lanes=1) as one, \
            BulkEmbedder(b, RUNTIMES["litert"], 2, heads, lanes=2) as two:
        assert len(two.children) == 2 and not one.children
        procs = [child.proc for child in two.children]
        _, encs, _ = one.encode(rows)
        for a, c in zip(one.run(encs), two.run(encs), strict=True):
            assert a.keys() == c.keys() and a["lexical_weights"] == c["lexical_weights"]
            np.testing.assert_array_equal(a["dense_vecs"], c["dense_vecs"])
            np.testing.assert_array_equal(a["colbert_vecs"], c["colbert_vecs"])
    assert all(p.poll() is not None for p in procs)  # closed with the embedder

    broken = LaneProcess(tmp_path / "no-bundle", "litert", 1, heads, None)
    with pytest.raises(EdgeM3Error) as err:
        wait_ready([broken], {})
    assert "no-bundle" in str(err.value) and "\n" not in str(err.value)
    assert broken.proc.poll() is not None


def test_lane_exits_when_its_job_is_killed(tiny_bundles: dict[str, Path]) -> None:
    """A job killed mid-chunk (SIGKILL: the resume test does it) closes every pipe of its lanes
    at once. The lane's reply writer then fails on its result pipe and again on stderr; the lane
    must still exit, not wait for ever on its full reply queue (it did: an orphan holding its
    model, found after a CI run). stderr is closed first so the second failure is certain."""
    from edge_m3.bulk.engine import BulkEmbedder
    from edge_m3.bulk.lanes import REPLIES_AHEAD, ids_frame, read_frame, text_frame, write_frame
    from edge_m3.bundle import load_bundle
    from edge_m3.common.corpus import Row
    from edge_m3.runtime import RUNTIMES
    from edge_m3.runtime.pipeline import special_rows

    bundle = tiny_bundles["int8"]
    heads = ("dense", "sparse", "colbert")
    with BulkEmbedder(load_bundle(bundle), RUNTIMES["litert"], 1, heads, lanes=1) as job:
        _, encs, _ = job.encode([Row(i, i, t) for i, t in enumerate(TEXTS * 40)])
        request, special = ids_frame(job.pipe, encs), special_rows(job.pipe.tokenizer)
    lane = subprocess.Popen([sys.executable, "-m", "edge_m3.bulk.lanes", str(bundle), "litert", "1",
                             ",".join(heads), ""],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert read_frame(lane.stdout) == {}  # type: ignore[arg-type]  # its model is open
        write_frame(lane.stdin, text_frame(json.dumps(special)))  # type: ignore[arg-type]
        for _ in range(REPLIES_AHEAD + 3):  # a reply is larger than the pipe: the writer blocks
            write_frame(lane.stdin, request)  # type: ignore[arg-type]
        lane.stdin.flush()  # type: ignore[union-attr]
        time.sleep(2)  # the replies queue up behind the blocked writer
        for end in (lane.stderr, lane.stdout, lane.stdin):  # the job is gone
            end.close()  # type: ignore[union-attr]
        assert lane.wait(timeout=60) == 1
    finally:
        if lane.poll() is None:
            lane.kill()
            lane.wait()


def test_lane_frames_carry_plain_arrays_only() -> None:
    """The pipe between the job and its lanes holds numbers, never objects: a frame round-trips,
    an object dtype or an oversized header is refused, a cut stream ends cleanly."""
    import io

    from edge_m3.bulk.lanes import read_frame, write_frame
    from edge_m3.errors import EdgeM3Error

    buf = io.BytesIO()
    arrays = {"a": np.arange(6, dtype=np.int32).reshape(2, 3), "b": np.ones(0, np.float32),
              "z": np.zeros((0, 4), np.float32),  # a chunk with no ColBERT rows
              "c": np.array([1.5, -2.0], np.float32)}
    write_frame(buf, arrays)
    write_frame(buf, {})
    buf.seek(0)
    got = read_frame(buf)
    assert got is not None and got.keys() == arrays.keys()
    for k, v in arrays.items():
        np.testing.assert_array_equal(got[k], v)
        assert got[k].dtype == v.dtype
    assert read_frame(buf) == {} and read_frame(buf) is None
    header = json.dumps([["x", "|O", [1]]]).encode()
    with pytest.raises(EdgeM3Error, match="refused"):
        read_frame(io.BytesIO(len(header).to_bytes(8, "little") + header + b"\0" * 8))
    with pytest.raises(EdgeM3Error, match="not a lane stream"):
        read_frame(io.BytesIO((1 << 40).to_bytes(8, "little")))
    whole = io.BytesIO()
    write_frame(whole, arrays)
    assert read_frame(io.BytesIO(whole.getvalue()[:-3])) is None


def test_parquet_parts_take_chunks_as_row_groups_and_leave_no_temp(tiny_bundles: dict[str, Path],
                                                                  tmp_path: Path) -> None:
    """Each chunk is written to its part's temp file when it comes (so writing overlaps the
    model); a part begun and not committed leaves nothing, and a killed job's temp is dropped."""
    import pyarrow.parquet as pq

    from edge_m3.bulk.columns import Ragged
    from edge_m3.bulk.engine import Embedded
    from edge_m3.bulk.job import CHUNK_ROWS
    from edge_m3.bulk.sinks import ParquetSink

    f = tmp_path / "corpus.txt"
    f.write_text("".join(f"{TEXTS[i % len(TEXTS)]} {i}\n" for i in range(CHUNK_ROWS * 2 + 150)), "utf-8")
    out = tmp_path / "s.parquet"
    assert main(["embed", str(tiny_bundles["int8"]), "--texts", str(f), "--out", str(out),
                 "--part-rows", str(CHUNK_ROWS * 2 + 50), "--outputs", "dense"]) == 0
    parts = sorted(out.glob("part-*.parquet"))
    assert [pq.ParquetFile(p).metadata.num_rows for p in parts] == [CHUNK_ROWS * 2 + 50, 100]
    assert [pq.ParquetFile(p).num_row_groups for p in parts] == [3, 1]  # 256 + 256 + 50; 100
    assert pq.read_table(out).column("row").to_pylist() == list(range(CHUNK_ROWS * 2 + 150))

    # A part whose rows are all rejected writes no file, in every format.
    g = tmp_path / "bad.txt"
    g.write_bytes(b"\n\n\n" + "".join(f"{t}\n" for t in TEXTS[:3]).encode())
    for suffix in (".parquet", ".npy", ".jsonl"):
        o = tmp_path / f"rej{suffix}"
        assert main(["embed", str(tiny_bundles["int8"]), "--texts", str(g), "--out", str(o),
                     "--part-rows", "3", "--outputs", "dense"]) == 0
        assert [r["id"] for r in read_output(o)] == [3, 4, 5]
        assert len((tmp_path / f"rej{suffix}.rejected.jsonl").read_text().splitlines()) == 3

    sink = ParquetSink(tmp_path / "t.parquet", ("dense",), 4)
    stale = sink.work / ".part-00003.parquet.part"
    stale.parent.mkdir()
    stale.write_bytes(b"half a file")
    sink.begin()
    assert not stale.exists()
    emb = Embedded(rows=np.arange(2), ids=[0, 1], input_ids=Ragged.of([np.array([0, 2])] * 2, np.int32),
                   dense=np.ones((2, 4), np.float32), lexical_ids=None, lexical_weights=None, colbert=None)
    sink.add(0, emb)
    assert [p.name for p in sink.work.glob(".part-*")] == [".part-00000.parquet.part"]
    sink.abort()
    assert not list(sink.work.glob("*part-*"))
    sink.add(0, emb)
    sink.commit(0, [])
    assert pq.read_table(sink.work / "part-00000.parquet").column("row").to_pylist() == [0, 1]
    assert not list(sink.work.glob(".part-*"))
