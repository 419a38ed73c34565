"""The README's quickstarts, run as a new user would run them (issue 55): every shell command in
order, in one working folder, the Python block, and the Kotlin and Swift snippets compiled
against the kits. The hub ids are the one thing replaced: by small local checkpoints of the same
layout (`HUB_IDS`), because tests have no network. `pip install` lines are not run (no network
either): each names a package and extras that pyproject.toml defines and the lock holds.

A quickstart that stops working, or a command the README shows that no test runs, fails here.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from tests.support.readme import README, kotlin_snippet, quickstarts, readme_blocks, shell_commands

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent

pytestmark = pytest.mark.models


# A hub id -> the fixture of a small local checkpoint of the same layout.
HUB_IDS = {"BAAI/bge-m3": "tiny_ckpt", "sentence-transformers/all-MiniLM-L6-v2": "readme_bert_ckpt"}


@pytest.fixture(scope="module")
def readme_bert_ckpt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small random BERT in sentence-transformers' layout (mean pooling, normalised), with
    all-MiniLM-L6-v2's tokenizer: the quickstart's family and quantization commands on it."""
    from tests.support.bert import make_bert_checkpoint

    return make_bert_checkpoint(tmp_path_factory.mktemp("readme_bert"), pooling="mean", max_seq_length=64)


def _pip_install(cmd: str) -> None:
    """`pip install edge-m3[extras]`: the distribution and each extra exist, each with its lock file."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    for req in shlex.split(cmd)[2:]:
        name, _, extras = req.partition("[")
        assert name == project["name"], f"README installs {name!r}, the project is {project['name']!r}"
        for extra in filter(None, extras.rstrip("]").split(",")):
            assert extra in project["optional-dependencies"], f"README: no extra {extra!r} in pyproject.toml"
            assert (ROOT / "requirements" / f"{extra}.txt").is_file(), f"no lock file for [{extra}]"


@dataclass
class Shell:
    """Runs the README's commands one by one in one working folder, as a user at the repository
    root would (the venv's bin first on PATH; `tools/` reached through a link)."""

    cwd: Path
    hub: dict[str, str]
    env: dict[str, str]

    def run(self, cmd: str) -> subprocess.CompletedProcess[str]:
        for hub_id, local in self.hub.items():
            cmd = cmd.replace(hub_id, local)
        proc = subprocess.run(["bash", "-euo", "pipefail", "-c", cmd], cwd=self.cwd, env=self.env,
                              capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, (f"README command failed ({proc.returncode}): {cmd}\n"
                                      f"{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}")
        return proc


@pytest.fixture(scope="module")
def shell(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Shell:
    """The working folder, with `make build`'s bundle in it (the Set up block, run as the Makefile
    runs it, with the hub id replaced)."""
    cwd = tmp_path_factory.mktemp("readme")
    (cwd / "tools").symlink_to(ROOT / "tools")
    hub = {hub_id: str(request.getfixturevalue(fixture)) for hub_id, fixture in HUB_IDS.items()}
    path = f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"
    env = os.environ | {"PATH": path, "EDGE_M3_PYTHON": sys.executable}
    sh = Shell(cwd, hub, env)
    setup = [c for b in readme_blocks() if b.section == "Set up" and b.lang == "sh"
             for c in shell_commands(b.text)]
    assert setup == ["make build", "make test"], setup
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    for target in ("build", "test", "demo"):  # the targets the README names
        assert re.search(rf"^{target}:", makefile, re.M), f"Makefile has no {target} target"
    # `make build`'s own recipe (make -n: what it would run), its checkpoint a local one; `make test`
    # is the suite this test is part of.
    recipe = subprocess.run(["make", "-n", "-s", "-C", str(ROOT), "build", f"CHECKPOINT={hub['BAAI/bge-m3']}",
                             "VENV=.venv"], capture_output=True, text=True, timeout=60, env=env)
    build = [line for line in recipe.stdout.splitlines() if "edge-m3 build" in line]
    assert recipe.returncode == 0 and len(build) == 1, recipe.stdout + recipe.stderr
    sh.run(re.sub(r"^\S*/edge-m3 ", "edge-m3 ", build[0]))
    assert (cwd / "dist/bge-m3-int8/manifest.json").is_file()
    return sh


def test_every_quickstart_is_tested() -> None:
    """Each quickstart the README has is one this module runs, and the other way round."""
    assert list(quickstarts()) == list(QUICKSTART_CHECKS), "README quickstarts and tests/test_readme.py differ"


def _run_shell_blocks(shell: Shell, title: str) -> dict[str, subprocess.CompletedProcess[str]]:
    """Every command of a quickstart's shell blocks, in order: the first word's and the command's results."""
    results = {}
    for block in quickstarts()[title]:
        if block.lang != "sh":
            continue
        for cmd in shell_commands(block.text):
            if cmd.startswith("pip install "):
                _pip_install(cmd)
                continue
            results[cmd] = shell.run(cmd)
    return results


def _json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def check_android(shell: Shell, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """The Gradle lines are the kit README's own; the app snippet compiles against the kit (Kotlin 2,
    warnings as errors); the kit's pipeline on the JVM prints what `edge-m3 embed` prints."""
    blocks = quickstarts()["An Android app"]
    gradle = [b for b in blocks if b.lang == "kotlin" and b.info == "settings.gradle.kts"]
    kit_readme = (ROOT / "android_assets/README.md").read_text(encoding="utf-8")
    assert len(gradle) == 1
    for line in gradle[0].text.splitlines():
        assert line.split("//")[0].strip() in kit_readme, f"not in android_assets/README.md: {line}"
    jar = request.getfixturevalue("kit_jar")
    src = tmp_path / "Quickstart.kt"
    src.write_text(kotlin_snippet(), encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "tools.kit.kotlin2", "compile", "--classpath", str(jar),
                           "--out", str(tmp_path / "quickstart.jar"), str(src)], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, f"the README's Kotlin does not compile against the kit:\n{proc.stderr[-4000:]}"
    shell.env["EDGE_M3_KIT_JAR"] = str(jar)
    results = _run_shell_blocks(shell, "An Android app")
    kit = next(r for c, r in results.items() if "kit_embed.sh kotlin" in c)
    py = next(r for c, r in results.items() if c.startswith("edge-m3 embed"))
    _same_embeddings(_json_lines(kit.stdout), _json_lines(py.stdout))


def _same_embeddings(kit: list[dict], python: list[dict]) -> None:
    """What the README says the two print: the same token ids and (to float rounding) the same vectors."""
    assert len(kit) == len(python) == 1
    assert kit[0]["input_ids"] == python[0]["input_ids"]
    np.testing.assert_allclose(kit[0]["dense_vecs"], python[0]["dense_vecs"], atol=1e-5)


def check_ios(shell: Shell, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """The Swift kit's pipeline prints what `edge-m3 embed` prints. (The app snippet is type-checked
    in an app target linking LiteRT beside the kit's sources, Swift 6, by
    tests/test_swift_litert_runner.py's test_kit_typechecks_with_either_runtime, which compiles that
    target anyway: tests.support.readme.swift_snippet.)"""
    build = request.getfixturevalue("swift_build")
    shell.env["EDGE_M3_SWIFT_EMBED"] = str(build / "release/edge-m3-embed")
    results = _run_shell_blocks(shell, "An iOS app")
    kit = next(r for c, r in results.items() if "kit_embed.sh swift" in c)
    py = subprocess.run([str(BIN / "edge-m3"), "embed", "dist/bge-m3-int8", "--texts", "texts.txt"],
                        cwd=shell.cwd, capture_output=True, text=True, timeout=300, env=shell.env)
    _same_embeddings(_json_lines(kit.stdout), _json_lines(py.stdout))


def check_rig(shell: Shell, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """`check` passes, `bench` reports and draws, `embed` prints one JSON line."""
    results = _run_shell_blocks(shell, "A Raspberry Pi or a desktop rig")
    embed = next(r for c, r in results.items() if c.startswith("edge-m3 embed"))
    (line,) = _json_lines(embed.stdout)
    assert line["dense_vecs"] and line["input_ids"][0] == 0
    report = shell.cwd / "bench-report"
    assert "latency.svg" in (report / "report.md").read_text(encoding="utf-8")
    runs = json.loads((report / "report.json").read_text(encoding="utf-8"))["rows"]
    assert (report / "latency.svg").read_text(encoding="utf-8").count('id="latency-line-') == len(runs)


def check_search(shell: Shell, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """`index`, `search` (hits among the passages), `add`, then the Python block on the same folder."""
    results = _run_shell_blocks(shell, "Search in Python")
    search = next(r for c, r in results.items() if c.startswith("edge-m3 search"))
    (hits,) = _json_lines(search.stdout)
    assert hits["query"] == 0 and len(hits["hits"]) == 2 and {h[0] for h in hits["hits"]} <= {1, 2, 3}
    (code,) = [b for b in quickstarts()["Search in Python"] if b.lang == "python"]
    proc = subprocess.run([sys.executable, "-c", code.text], cwd=shell.cwd, capture_output=True, text=True,
                          timeout=300, env=shell.env)
    assert proc.returncode == 0, proc.stderr[-4000:]
    printed = [line.split() for line in proc.stdout.splitlines()]
    assert len(printed) == 2 and all(int(pid) in {1, 2, 3, 4, 5} for pid, _ in printed), proc.stdout


def check_corpus(shell: Shell, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """The local and the Ray job write the same rows; the README's one-liner reads them."""
    import pyarrow.parquet as pq

    results = _run_shell_blocks(shell, "A corpus, on one machine or on Ray")
    assert any("dense_vecs" in r.stdout for c, r in results.items() if c.startswith("python -c"))
    local = pq.read_table(shell.cwd / "embeddings.parquet").sort_by("row")
    ray = pq.read_table(shell.cwd / "embeddings-ray.parquet").sort_by("row")
    assert local.num_rows == 3 and local["id"].to_pylist() == ray["id"].to_pylist() == [1, 2, 3]
    assert local["dense_vecs"].to_pylist() == ray["dense_vecs"].to_pylist()


def check_families(shell: Shell, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """Two variants built, the int8 one verified against sentence-transformers, its report written;
    the README's table names every variant the contract defines."""
    from edge_m3.spec import QUANTS

    _run_shell_blocks(shell, "Choosing a model family and a quantization")
    for quant in ("int8", "fp16"):
        assert (shell.cwd / f"dist/minilm-{quant}/manifest.json").is_file()
    assert (shell.cwd / "minilm-report/report.md").is_file()
    readme = README.read_text(encoding="utf-8")
    table = set(re.findall(r"^\| `([\w-]+)`", readme, re.M))
    assert set(QUANTS) <= table, f"README's quant table lacks {sorted(set(QUANTS) - table)}"


QUICKSTART_CHECKS: dict[str, Callable[[Shell, pytest.FixtureRequest, Path], None]] = {
    "An Android app": check_android,
    "An iOS app": check_ios,
    "A Raspberry Pi or a desktop rig": check_rig,
    "Search in Python": check_search,
    "A corpus, on one machine or on Ray": check_corpus,
    "Choosing a model family and a quantization": check_families,
}


@pytest.mark.parametrize("title", list(QUICKSTART_CHECKS))
def test_quickstart(title: str, shell: Shell, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """One quickstart, its commands in the README's order (the iOS one reuses the Android one's
    texts.txt, the corpus one the search one's passages: the order is the README's)."""
    QUICKSTART_CHECKS[title](shell, request, tmp_path)
