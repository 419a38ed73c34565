"""`embed --engine ray` on a local Ray cluster of two actors: the same Parquet as one machine's
job, rejected rows included; EmbedBatches and rejected_rows as teams' map_batches callables."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from edge_m3.bulk.sinks import JOB_FILE
from edge_m3.cli import main
from tests.conftest import _tool_missing
from tests.test_bulk import _corpus


@pytest.fixture(scope="module")
def ray_installed() -> None:
    if importlib.util.find_spec("ray") is None:
        _tool_missing("ray not installed (pip install 'edge-m3[ray]')", "CI")


def test_ray_engine_equals_one_machine(ray_installed: None, tiny_bundles: dict[str, Path],
                                       tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    import pyarrow.parquet as pq

    from edge_m3.bulk import ray as bulk_ray

    monkeypatch.setattr(bulk_ray, "BATCH_ROWS", 8)  # several files from 58 rows, to resume among
    monkeypatch.setattr(bulk_ray, "FILE_ROWS", 16)

    bundle = tiny_bundles["int8"]
    f = tmp_path / "corpus.txt"
    bad = _corpus(f, 61)
    local, on_ray = tmp_path / "local.parquet", tmp_path / "ray-out"
    common = ["embed", str(bundle), "--texts", str(f), "--outputs", "dense,sparse,colbert", "--threads", "1"]
    assert main([*common, "--out", str(local)]) == 0
    assert main([*common, "--out", str(on_ray), "--engine", "ray", "--ray-workers", "2"]) == 0
    err = capsys.readouterr().err
    assert "58 text(s) embedded" in err and "Ray Data, 2 worker(s)" in err
    a = pq.read_table(local).sort_by("row")
    b = pq.read_table(on_ray).sort_by("row")
    assert b.column_names == a.column_names and b.num_rows == 61 - len(bad)
    assert b.equals(a), "Ray's output differs from the single-process job's"
    rejected = tmp_path / "ray-out.rejected.jsonl"
    assert rejected.read_text() == (tmp_path / "local.parquet.rejected.jsonl").read_text()
    # An existing output is refused in one line; --resume of a finished job has nothing to do.
    assert main([*common, "--out", str(on_ray), "--engine", "ray"]) == 2
    line = capsys.readouterr().err.strip()
    assert line.count("\n") == 0 and "exists (add --resume" in line
    assert main([*common, "--out", str(on_ray), "--engine", "ray", "--resume"]) == 0
    assert "complete already" in capsys.readouterr().err
    # A job killed mid-way: its record not complete, one file never written, one cut short (no
    # footer). --resume keeps the whole files' rows, embeds the rest, and loses nothing.
    record = json.loads((on_ray / JOB_FILE).read_text())
    (on_ray / JOB_FILE).write_text(json.dumps({**record, "complete": False}))
    files = sorted(on_ray.glob("*.parquet"))
    assert len(files) >= 3
    files[0].unlink()
    files[1].write_bytes(files[1].read_bytes()[:200])
    kept = sum(pq.ParquetFile(p).metadata.num_rows for p in files[2:])
    # Another job's output is not resumed into (and nothing is changed).
    assert main([*common[:-3], "dense", *common[-2:], "--out", str(on_ray), "--engine", "ray",
                 "--resume"]) == 2
    assert "not written by this job (differs in: outputs)" in capsys.readouterr().err
    assert main([*common, "--out", str(on_ray), "--engine", "ray", "--ray-workers", "2", "--resume"]) == 0
    err = capsys.readouterr().err
    assert f"{b.num_rows - kept} text(s) embedded" in err and f"resumed: {kept} row(s)" in err
    assert pq.read_table(on_ray).sort_by("row").equals(a)
    assert json.loads((on_ray / JOB_FILE).read_text())["complete"] is True


def test_embed_batches_in_a_teams_pipeline(ray_installed: None, tiny_bundles: dict[str, Path]) -> None:
    """The documented callables on an Arrow batch, as Ray hands them (no cluster needed)."""
    import pyarrow as pa

    from edge_m3.bulk.ray import EmbedBatches, rejected_rows

    batch = pa.table({"doc": ["a", "b", None, "d"], "body": ["hello world", "  ", "x", "bonjour"]})
    fn = EmbedBatches(tiny_bundles["int8"], outputs=("dense",), id_column="doc", text_column="body")
    out = fn(batch)
    assert out.column_names == ["id", "input_ids", "dense_vecs"] and out.column("id").to_pylist() == ["a", "d"]
    assert rejected_rows(batch, "doc", "body").to_pylist() == [
        {"row": 1, "id": "b", "reason": "empty text"}, {"row": 2, "id": None, "reason": "null 'doc'"}]
