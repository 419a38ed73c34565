"""docs/benchmarks.md is generated from docs/results/ (tools/bench/render_page.py), and bench draws
its latency-by-length plot as SVG. Correctness only: no timing is asserted."""

from __future__ import annotations

import builtins
import json
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tools.bench import render_page, results

HEADINGS = ["Speed by length and runtime", "Fidelity by variant and family", "Memory on the device",
            "Bulk embedding", "Index size and search latency", "The kits", "Build cost",
            "Install size and CI"]
SVG = "{http://www.w3.org/2000/svg}"


def test_committed_page_is_the_rendered_one() -> None:
    """A result file changed without rerunning the renderer fails here (and `--check` exits 1)."""
    text, _ = render_page.render()
    assert render_page.PAGE.read_text(encoding="utf-8") == text, \
        "docs/benchmarks.md is stale: run python -m tools.bench.render_page"
    assert render_page.main(["--check"]) == 0


def test_page_has_the_subjects_in_order_and_every_result_once() -> None:
    text = render_page.PAGE.read_text(encoding="utf-8")
    assert re.findall(r"^## (.+)$", text, re.M) == HEADINGS
    assert text.count("\n") <= 600
    tables = re.findall(r"^<!-- table ([a-z0-9_]+) -->$", render_page.TEMPLATE.read_text(encoding="utf-8"),
                        re.M)
    files = sorted(p.stem for p in results.RESULTS_DIR.glob("*.json"))
    assert sorted(set(tables)) == files and len(tables) == len(set(tables)), "a result file used once"
    for plot in re.findall(r"\]\(results/([a-z0-9_]+\.svg)\)", text):
        assert (results.RESULTS_DIR / plot).is_file()


def test_every_result_file_meets_the_schema() -> None:
    for path in results.RESULTS_DIR.glob("*.json"):
        r = results.read_result(path)
        assert r["machine"]["cpu"] and r["machine"]["flags"], path


def test_write_result_records_machine_date_command_and_load(tmp_path: Path) -> None:
    load = results.Load()
    out = results.write_result(tmp_path / "r.json", title="t", module="tools.bench.x",
                               columns=["a", "b"], rows=[["1", 2]], notes=["n"], load=load,
                               series={"s": {16: 1.5}}, argv=["B", "--x", "a b"])
    r = results.read_result(out)
    assert r["command"] == "python -m tools.bench.x B --x 'a b'"
    assert r["notes"][0] == "n" and r["notes"][1].startswith("load average")
    assert r["series"] == {"s": {"16": 1.5}} and r["machine"]["cores"] >= 1
    for bad in ({**r, "rows": [["1"]]}, {**r, "date": "today"}, {**r, "extra": 1},
                {**r, "machine": {"cpu": "x"}}):
        with pytest.raises(ValueError):
            results.validate(bad)


def test_check_says_stale(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    page = tmp_path / "benchmarks.md"
    page.write_text(render_page.render()[0] + "edited by hand\n", encoding="utf-8")
    monkeypatch.setattr(render_page, "PAGE", page)
    monkeypatch.setattr(render_page, "ROOT", tmp_path)
    assert render_page.main(["--check"]) == 1
    assert "stale" in capsys.readouterr().err


def _line_groups(svg: Path) -> list[ET.Element]:
    root = ET.parse(svg).getroot()
    assert root.tag == f"{SVG}svg"
    return [g for g in root.iter(f"{SVG}g") if g.get("id", "").startswith("latency-line-")]


def test_bench_writes_a_latency_svg_per_runtime(tiny_bundles: dict[str, Path], tmp_path: Path) -> None:
    from edge_m3.harness.bench import BenchOptions, Repeats, cmd_bench, plot_path
    from edge_m3.runtime.registry import RUNTIMES, installed_version

    runtimes = tuple(RUNTIMES[n] for n in ("litert", "tflite-runtime") if installed_version(RUNTIMES[n]))
    out = tmp_path / "bench.json"
    assert cmd_bench(BenchOptions(bundle=tiny_bundles["fp32"], runtimes=runtimes, threads=(1,),
                                  lengths=(8, 16), timing=Repeats(1, 0), cache_modes=("memory",),
                                  json=out)) == 0
    rows = json.loads(out.read_text())["rows"]
    svg = plot_path(out)
    assert svg == tmp_path / "bench-latency.svg"
    lines = _line_groups(svg)
    assert len(lines) == len(rows) == len(runtimes)  # one line per runtime x variant (x threads x cache)
    text = svg.read_text(encoding="utf-8")
    for row in rows:
        assert f"fp32 {row['runtime']}, 1 thread" in text
        # two points a line: lengths 8 and 16
        path = next(lines[rows.index(row)].iter(f"{SVG}path")).get("d", "")
        assert len(re.findall(r"[ML]", path)) == 2


def test_bench_without_matplotlib_says_so_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys) -> None:
    from edge_m3.harness.bench import write_latency_plot

    real_import = builtins.__import__

    def no_matplotlib(name: str, *args, **kwargs):
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ImportError("No module named 'matplotlib'")
        return real_import(name, *args, **kwargs)

    monkeypatch.delitem(sys.modules, "matplotlib", raising=False)
    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    result = {"bundle": "b", "quant": "int8", "repeats": 1,
              "rows": [{"runtime": "litert", "threads": 1, "cache_mode": "memory",
                        "lengths": {"16": {"p50_ms": 1.0}}}]}
    assert write_latency_plot(tmp_path / "x.svg", result) is None
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "plot skipped" in err[0] and "matplotlib" in err[0]
    assert not (tmp_path / "x.svg").exists()


def test_page_plot_is_drawn_from_the_result(tmp_path: Path) -> None:
    r = results.read_result(results.RESULTS_DIR / "speed_lengths.json")
    render_page.draw({"speed_lengths": r}, tmp_path)
    assert len(_line_groups(tmp_path / "speed_lengths.svg")) == len(r["series"])
