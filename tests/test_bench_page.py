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


# Every result file names the command that rewrites it ------------------------------------------

def _writers(command: str) -> list[tuple[str, str]]:
    """(module, option) of each `python -m MODULE ... --x-results FILE` step of a result's command."""
    out = []
    for step in command.split(" && "):
        words = step.split()
        if words[:2] == ["python", "-m"]:
            out += [(words[2], w) for w, nxt in zip(words, words[1:], strict=False) if w.endswith("results")
                    and nxt.startswith("docs/results/")]
    return out


def test_every_result_file_names_a_writer_that_takes_its_option(monkeypatch: pytest.MonkeyPatch,
                                                                capsys) -> None:
    """A rerun updates the page only if the command names a tool writing this very file: each
    file's command has a `python -m MODULE ... --results docs/results/NAME.json` step, and that
    module exists and offers the option."""
    import importlib

    helps: dict[str, str] = {}
    for path in sorted(results.RESULTS_DIR.glob("*.json")):
        command = results.read_result(path)["command"]
        steps = [s for s in command.split(" && ") if f"docs/results/{path.name}" in s]
        writers = [(m, o) for s in steps for m, o in _writers(s)]
        assert writers, f"{path.name}: no step of its command writes it: {command}"
        for module, option in writers:
            if module not in helps:
                monkeypatch.setattr(sys, "argv", [module, "--help"])
                with pytest.raises(SystemExit) as done:
                    importlib.import_module(module).main()
                assert done.value.code == 0, module
                helps[module] = capsys.readouterr().out
            assert option in helps[module], f"{path.name}: {module} has no {option}"
    for old in ("bench_buckets", "peer_int8", "int8_worst", "quant_sensitivity", "int4_techniques",
                "int16_norm", "onnx_int8_recipes", "tolerance_spread"):
        assert f"tools.research.{old}" not in render_page.PAGE.read_text(encoding="utf-8"), old


def test_markdown_table_is_what_a_tool_printed() -> None:
    cols, rows = results.markdown_table(["# a title", "| a | b (x / y) |", "| --- | --- |", "| 1 | 2 / 3 |",
                                         "  a line under a row", "| 4 | |"])
    assert cols == ["a", "b (x / y)"] and rows == [["1", "2 / 3"], ["4", ""]]
    with pytest.raises(ValueError):
        results.markdown_table(["no table"])


# from_report: bench, verify and check reports as result files ----------------------------------

def _bench_row(runtime: str, threads: int, mode: str | None, p50: dict[int, float], p95: dict[int, float],
               first: dict[int, float], peak: float, model: float = 100.0, opened: float = 50.0) -> dict:
    row = {"runtime": runtime, "version": "2.3.0", "threads": threads, "load_s": 0.01, "peak_rss_mb": peak,
           "rss_before_load_mb": 50.0, "first_call_ms": {str(n): v for n, v in first.items()},
           "lengths": {str(n): {"p50_ms": p50[n], "p95_ms": p95[n]} for n in p50},
           "model_peak_rss_mb": model, "model_mb": 120.0, "model_rss_ratio": model / 120.0,
           "weight_cache_mb": 22.0 if mode == "cold" else None, "open_to_first_result_ms": opened}
    return row | ({"cache_mode": mode} if mode else {"cache_mode": "none"})


def _by(lengths: list[int], values: list[float]) -> dict[int, float]:
    return dict(zip(lengths, values, strict=True))


def _bench(quant: str, lengths: list[int], rows: list[dict], reference: str | None = None) -> dict:
    return {"bundle": f"/b/{quant}", "quant": quant, "warmup": 1, "repeats": 5, "lengths": lengths,
            "signatures": lengths, "reference": reference, "rows": rows}


def _write(tmp: Path, name: str, report: dict) -> Path:
    folder = tmp / name
    folder.mkdir()
    (folder / "report.json").write_text(json.dumps(report))
    return folder


def test_from_report_gives_the_committed_tables_back(tmp_path: Path) -> None:
    """Fed the figures behind speed_modernbert and speed_fullsize_int4, from_report writes their
    tables cell for cell: a rerun changes the figures, not the page's shape."""
    from tools.bench import from_report

    ls = [128, 512, 1024, 2048]
    mb = _bench("int8", ls, [
        _bench_row("litert", 2, "cold", _by(ls, [119, 365, 848, 2146]),
                   _by(ls, [123, 460, 862, 2209]), _by(ls, [135, 481, 1015, 2349]), 600),
        _bench_row("litert", 2, "warm", _by(ls, [83, 368, 870, 2164]),
                   _by(ls, [86, 371, 891, 2193]), _by(ls, [1, 1, 1, 1]), 600)])
    out = from_report.convert("bench", [_write(tmp_path, "mb", mb)], tmp_path / "mb.json", "by-length",
                              argv=["bench", "mb"])
    want = results.read_result(results.RESULTS_DIR / "speed_modernbert.json")
    got = results.read_result(out)
    assert (got["columns"], got["rows"]) == (want["columns"], want["rows"])
    assert got["command"].startswith("edge-m3 bench /b/int8 --runtimes litert --threads 2 --lengths "
                                     "128,512,1024,2048 --repeats 5 --warmup 1 --report ")
    assert got["command"].endswith(" && python -m tools.bench.from_report bench mb")

    want = results.read_result(results.RESULTS_DIR / "speed_fullsize_int4.json")
    ls = [16, 128, 512]
    figs = {("int8", 1): ([33.7, 113.1, 567.0], 1229, 1365), ("int4", 1): ([36.3, 129.3, 689.8], 1337, 897),
            ("int8", 2): ([20.3, 62.0, 321.6], 1242, 1365), ("int4", 2): ([19.9, 70.5, 375.4], 1280, 897)}
    reports = [_write(tmp_path, q, _bench(q, ls, [
        _bench_row("litert", th, "off", _by(ls, figs[q, th][0]), _by(ls, figs[q, th][0]),
                   {16: figs[q, th][1]}, figs[q, th][2]) for th in (1, 2)])) for q in ("int8", "int4")]
    got = results.read_result(from_report.convert("bench", reports, tmp_path / "f.json", "lengths",
                                                  argv=["bench"]))
    assert (got["columns"], got["rows"]) == (want["columns"], want["rows"])


@pytest.mark.parametrize("layout", ["table", "lengths", "torch", "by-length", "runs", "memory", "memory-modes"])
def test_from_report_bench_layouts_write_valid_results(tmp_path: Path, layout: str) -> None:
    from tools.bench import from_report

    ls = [16, 128]
    torch = _bench_row("torch fp32 (FlagEmbedding)", 2, None, {16: 9.0, 128: 30.0}, {16: 10.0, 128: 31.0},
                       {16: 5.0}, 900)
    for k in ("model_peak_rss_mb", "model_mb", "model_rss_ratio", "weight_cache_mb", "open_to_first_result_ms"):
        torch.pop(k)
    rows = [torch, *[_bench_row("litert", 2, m, {16: 1.0, 128: 6.0}, {16: 1.2, 128: 6.5}, {16: 40.0, 128: 80.0},
                                70) | {"lengths": {"16": {"p50_ms": 1.0, "p95_ms": 1.2, "p50_speedup": 9.0},
                                                   "128": {"p50_ms": 6.0, "p95_ms": 6.5, "p50_speedup": 5.0}}}
                     for m in ("off", "memory", "cold", "warm")],
            _bench_row("tflite-runtime", 2, None, {16: 2.0, 128: 9.0}, {16: 2.1, 128: 9.5}, {16: 30.0}, 60)]
    a = _write(tmp_path, "a", _bench("int8", ls, rows, reference="ckpt"))
    b = tmp_path / "b.json"  # bench --json FILE: the same figures in a file
    b.write_text(json.dumps(_bench("int4", ls, rows[1:])))
    r = results.read_result(from_report.convert("bench", [a, b], tmp_path / "out.json", layout,
                                                labels=["e5 int8", "e5 int4"], argv=["x"]))
    assert r["rows"] and r["command"].count("edge-m3 bench") == 2 and "--json " + str(b) in r["command"]
    assert "--weight-cache off,memory,cold,warm" in r["command"] and "--reference ckpt" in r["command"]


def _verify(quant: str, dense_min: float, failed: list[str]) -> dict:
    fig = {"dense_cosine": {"all": {"min": dense_min, "p1": dense_min + 1e-4, "mean": 0.9999}},
           "lexical_abs_err": 0.06, "lexical_abs_err_p99": 0.04, "colbert_score_abs_err": 0.119,
           "colbert_score_abs_err_p99": 0.015, "version": "2.3.0", "failed": failed,
           "retrieval_top10_agreement": {"dense": 0.92, "sparse": 0.948, "colbert": 0.946, "min": 0.92},
           "memory": {"model_mb": 119.7}}
    return {"bundle": f"/b/{quant}", "quant": quant, "threads": 1, "reference_checkpoint": "ckpt",
            "primary_reference": "flagembedding", "runtimes_checked": ["litert", "onnxruntime"],
            "runtimes": {"litert": fig, "onnxruntime": fig | {"version": "1.32.0"}},
            "texts": {"total": 2146, "user": 0, "queries": 952, "passages": 1194,
                      "corpus": {"file": "corpus.jsonl", "sample": 0, "seed": 0}},
            "thresholds": {"file": "edge_m3.spec", "variant": quant, "limits": {}}, "passed": not failed}


def test_from_report_verify_layouts(tmp_path: Path) -> None:
    from tools.bench import from_report

    reps = [_write(tmp_path, "a", _verify("int8", 0.99725, [])),
            _write(tmp_path, "b", _verify("int4", 0.98944, ["dense_cosine_min: 0.98944 < 0.99"]))]
    r = results.read_result(from_report.convert("verify", reps, tmp_path / "v.json", argv=["verify"]))
    assert r["rows"][0][:3] == ["TFLite int8 (LiteRT 2.3.0)", "119.7", "0.99725"]
    assert r["rows"][1][0] == "ONNX int8 (onnxruntime 1.32.0)" and r["rows"][-1][-1] == "FAIL: dense_cosine_min"
    assert r["command"].startswith("edge-m3 verify /b/int8 --reference ckpt --texts corpus.jsonl --runtime "
                                   "litert,onnxruntime --threads 1 --report ")
    r = results.read_result(from_report.convert("verify", reps, tmp_path / "r.json", "runtimes", argv=["v"]))
    assert r["columns"] == ["check", "texts", "LiteRT 2.3.0", "onnxruntime 1.32.0", "gate"]
    assert r["rows"][0][1:3] == ["2,146", "0.99725 / 0.99735; 0.920"]
    r = results.read_result(from_report.convert("verify", reps, tmp_path / "g.json", "grid",
                                                labels=["v|std 0.02", "v|N(0, 0.2)"], argv=["v"]))
    assert r["columns"][2:] == ["std 0.02: dense cos min, agreement, gate",
                                "N(0, 0.2): dense cos min, agreement, gate"]
    assert r["rows"] == [["v", "119.7", "0.997250 / 0.997250, 0.92, pass",
                          "0.989440 / 0.989440, 0.92, fail (dense_cosine_min)"]]


def _check(machine: str, python: str, version: str, cos: float) -> dict:
    return {"command": "check", "bundle": "/b/int8", "quant": "int8", "threads": 2, "warmup": 1, "repeats": 3,
            "device": {"machine": machine, "python": python},
            "tolerance": {"dense_cosine_min": 0.999, "max_abs": 0.05},
            "golden": {"cases": 12, "recorded_with": "litert"}, "runtimes_checked": ["litert"],
            "runtimes": {"litert": {"version": version, "passed": True, "golden": {
                "dense_cosine_min": cos, "dense_max_abs": 0.0059, "lexical_max_abs": 0.0,
                "colbert_max_abs": 0.014, "problems": []}}}}


def test_check_rows_merge_by_machine(tmp_path: Path) -> None:
    """A machine's check replaces its own rows and keeps the others' (the host's, the emulated
    aarch64 rig's through arm64_rig --results)."""
    from tools.bench import from_report
    from tools.run import arm64_rig

    out = tmp_path / "devices.json"
    from_report.convert("check", [_write(tmp_path, "x86", _check("x86_64", "3.11.7", "2.3.0", 1.0))], out,
                        merge=True, argv=["check"])
    arm64_rig.write_results(_write(tmp_path, "arm", _check("aarch64", "3.11.2", "2.3.0", 0.9994196)), out,
                            ["--results", str(out), "--", "check", "/b/int8"])
    arm64_rig.write_results(_write(tmp_path, "arm2", _check("aarch64", "3.11.2", "2.3.1", 0.99)), out, ["x"])
    r = results.read_result(out)
    assert [row[1:4] for row in r["rows"]] == [["x86-64", "3.11", "LiteRT 2.3"],
                                               ["aarch64", "3.11", "LiteRT 2.3"]]
    assert r["rows"][0][0] == "int8 (tolerance 0.999 / 0.05)" and r["rows"][1][4:] == [
        "0.9900000", "5.9e-03", "0", "1.4e-02", "pass"]
    assert r["command"] == "python -m tools.run.arm64_rig x"


# the other writers: their parsing, without running them (each takes minutes) -----------------

def test_ci_run_row_reads_pytest_summary() -> None:
    from tools.bench import ci_run

    out = "collected\n..\n====== 1406 passed, 2 skipped in 1956.21s (0:32:36) ======\n"
    row = ci_run.next_row([["5", "x"]], "65cc2ba", "2026-11-29", 95.0, out, 2100.0, 0, "idle")
    assert row == ["6", "`65cc2ba` (2026-11-29)", "about 1 min 35 s", "1956.21 s (32 min 36 s)", "35 min 0 s",
                   "1,406 passed, 2 skipped", "idle"]
    assert len(row) == len(ci_run.COLUMNS) == len(results.read_result(
        results.RESULTS_DIR / "ci_runs.json")["columns"])
    # `make test` runs pytest -q: its last line has no rules around it (the fresh-clone run of this stop)
    quiet = ("..F..\n1 failed, 1504 passed, 2 skipped in 2323.01s (0:38:43)\n"
             "make: *** [Makefile:57: test] Error 1\n")
    assert ci_run.pytest_summary(quiet) == ("1 failed, 1,504 passed, 2 skipped", 2323.01)
    failed = ci_run.next_row([], "a", "d", None, "boom", 5.0, 2, "s")
    assert failed[2:6] == ["kept", "", "5 s", "FAILED (exit 2): no pytest summary"]


def test_kit_tokenizer_figures_are_parsed(monkeypatch: pytest.MonkeyPatch) -> None:
    from tools.bench import bench_kit_tokenizers as kt

    out = ("load: 140 ms first, 83 ms on the third reload\ntexts: 6000, tokens per text: 24.9\n"
           "best of 5 rounds after a warm-up: 93412 texts/s (2325958 tokens/s), 1 thread\n")
    run = kt.parse(out)
    assert run["texts_s"] == 93412 and run["reload_ms"] == 83
    monkeypatch.setattr(kt, "port_name", lambda port: "Kotlin")
    faster = run | {"texts_s": 110200.0, "tokens_s": 2.7e6, "load_ms": 217.0, "reload_ms": 121.0}
    assert kt.row("kotlin", [run, faster]) == ["Kotlin", "93,000-110,000", "2.3-2.7 M",
                                               "140-217 ms (fresh JVM) / 83-121 ms"]
    committed = results.read_result(results.RESULTS_DIR / "kit_tokenizers.json")
    assert kt.columns(5.6)[1:] == committed["columns"][1:]
    with pytest.raises(ValueError):
        kt.parse("kit_tokenize: java not found")
