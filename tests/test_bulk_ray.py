"""`embed --engine ray` on a local Ray cluster of two actors: the same Parquet as one machine's
job, rejected rows included; EmbedBatches and rejected_rows as teams' map_batches callables."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from edge_m3.cli import main
from tests.conftest import _tool_missing
from tests.test_bulk import _corpus


@pytest.fixture(scope="module")
def ray_installed() -> None:
    if importlib.util.find_spec("ray") is None:
        _tool_missing("ray not installed (pip install 'edge-m3[ray]')", "CI")


def test_ray_engine_equals_one_machine(ray_installed: None, tiny_bundles: dict[str, Path],
                                       tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import pyarrow.parquet as pq

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
    # An existing output is refused in one line.
    assert main([*common, "--out", str(on_ray), "--engine", "ray"]) == 2
    assert capsys.readouterr().err.strip().endswith("exists (choose another path)")


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
