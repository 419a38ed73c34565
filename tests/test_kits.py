"""The Android kit: the Kotlin core compiled and run on the JVM against a real bundle's golden.json.

A tiny bundle is built with the real builder (conftest `tiny_bundle`); the Kotlin golden check
(android_assets/jvm/GoldenCheck.kt) then replays every case: id mapping + truncation, signature
choice and post-processing, all bit for bit (ids from the kit's own XlmrTokenizer), after
checking every bundle file's size and SHA-256 as the app does on first load (ModelCheck.kt). One
kotlinc run per session also type-checks the Android embedder (suspending API included) and the
instrumented test against compile-only stubs.
Gradle cannot run here (no Android SDK), so the library module's build file is checked as text.
The Swift kit has its own tests (tests/test_swift_kit.py).
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from edge_m3.bundle import load_bundle
from edge_m3.contract import weight_cache_name
from edge_m3.tokenizer import Tokenizer

pytestmark = pytest.mark.models  # builds Keras models, bundles or references

ROOT = Path(__file__).resolve().parents[1]
ANDROID = ROOT / "android_assets"
IOS = ROOT / "ios_assets"
KT_PKG = ANDROID / "src/main/java/dev/edgem3"


def test_build_places_the_bundle_in_both_kits(tiny_bundle: Path) -> None:
    """The app folders get everything but golden.json, which only the test targets get."""
    from edge_m3.bundle import ANDROID_ASSETS, ANDROID_TEST_ASSETS, IOS_RESOURCES, IOS_TEST_RESOURCES

    kits = tiny_bundle.parent / "kits"
    app_files = sorted(p.name for p in tiny_bundle.iterdir() if p.name != "golden.json")
    for dest, test_dest in ((kits / "android_assets" / ANDROID_ASSETS,
                             kits / "android_assets" / ANDROID_TEST_ASSETS),
                            (kits / "ios_assets" / IOS_RESOURCES,
                             kits / "ios_assets" / IOS_TEST_RESOURCES)):
        assert sorted(p.name for p in dest.iterdir()) == app_files
        assert [p.name for p in test_dest.iterdir()] == ["golden.json"]
        assert (test_dest / "golden.json").read_bytes() == (tiny_bundle / "golden.json").read_bytes()


def _run_check(jar: Path, bundle: Path, *inputs: Path) -> subprocess.CompletedProcess[str]:
    # The jar holds two mains (GoldenCheck, Sha256Bench): name the class.
    return subprocess.run(["java", "-cp", str(jar), "dev.edgem3.GoldenCheckKt", str(bundle), *map(str, inputs)],
                          capture_output=True, text=True, timeout=300)


def _summary(proc: subprocess.CompletedProcess[str]) -> tuple[int, int]:
    m = re.search(r"^golden: (\d+) passed, (\d+) failed$", proc.stdout, re.M)
    assert m, f"no summary line:\n{proc.stdout}\n{proc.stderr}"
    return int(m.group(1)), int(m.group(2))


def _copy(bundle: Path, dest: Path) -> Path:
    shutil.copytree(bundle, dest)
    return dest


def test_kotlin_core_reproduces_golden(kit_jar: Path, tiny_bundle: Path) -> None:
    golden = json.loads((tiny_bundle / "golden.json").read_text(encoding="utf-8"))
    n_cases = len(golden["cases"])
    proc = _run_check(kit_jar, tiny_bundle)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _summary(proc) == (n_cases, 0)
    assert n_cases >= 10
    n_files = len(json.loads((tiny_bundle / "manifest.json").read_text(encoding="utf-8"))["files"])
    assert f"golden: {n_files} files match manifest.json (size, sha256)" in proc.stdout
    # The kit names its XNNPACK weight cache file as the contract does (Kotlin is generated).
    manifest = json.loads((tiny_bundle / "manifest.json").read_text(encoding="utf-8"))
    sha = manifest["files"][manifest["models"][0]["file"]]["sha256"]
    probe = re.search(r'WEIGHT_CACHE_KEY_PROBE = "(.*)"', (ROOT / "android_assets/jvm/GoldenCheck.kt")
                      .read_text(encoding="utf-8")).group(1)
    assert f"golden: weight cache file {weight_cache_name(sha, probe)}\n" in proc.stdout
    # The golden set must reach every signature and the truncation path.
    model = json.loads((tiny_bundle / "manifest.json").read_text(encoding="utf-8"))["models"][0]
    lengths = [s["seq_len"] for s in model["signatures"]]
    assert {c["signature"] for c in golden["cases"]} == {f"embed_{n}" for n in lengths}
    b = load_bundle(tiny_bundle)
    tok = Tokenizer(b.sentencepiece_path, b.manifest.tokenizer)
    assert any(len(tok.encode(c["text"])) > max(lengths) for c in golden["cases"])


def test_kotlin_bad_input_as_python(kit_jar: Path, tiny_bundle: Path) -> None:
    """Lone surrogates (a Kotlin String holds them) and text past the longest signature through
    EdgeM3Core.embed: the Python pipeline's error text, or its truncated ids and signature
    (conftest `_write_input_cases`; the Swift kit reads the same file)."""
    inputs = tiny_bundle.parent / "input_cases.json"
    cases = json.loads(inputs.read_text(encoding="utf-8"))
    manifest = json.loads((tiny_bundle / "manifest.json").read_text(encoding="utf-8"))
    longest = max(s["seq_len"] for s in manifest["models"][0]["signatures"])
    errors = [c["error"] for c in cases if "error" in c]
    lone = "text is not valid Unicode (lone surrogate at index "
    assert len(errors) >= 4 and all(e.startswith(lone) for e in errors)
    eos = manifest["tokenizer"]["special_ids"]["eos"]
    fits = [c for c in cases if "input_ids" in c]
    lengths = {c["length"] for c in fits}
    assert {longest, longest + 1} <= lengths and min(lengths) < longest < max(lengths)  # around the cut
    assert all(c["input_ids"][-1] == eos and len(c["input_ids"]) == min(c["length"], longest) for c in fits)
    proc = _run_check(kit_jar, tiny_bundle, inputs)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"inputs: {len(cases)} passed, 0 failed" in proc.stdout


def test_kotlin_check_catches_one_ulp_and_id_drift(kit_jar: Path, drifted_bundle: tuple[Path, str],
                                                   tiny_bundle: Path) -> None:
    bundle, key = drifted_bundle
    n_cases = len(json.loads((bundle / "golden.json").read_text(encoding="utf-8"))["cases"])
    proc = _run_check(kit_jar, bundle)
    assert proc.returncode == 1
    assert _summary(proc) == (n_cases - 3, 3)
    assert f"lexical_weights[{key}]" in proc.stdout
    assert "input_ids" in proc.stdout and "colbert_vecs rows" in proc.stdout


def test_kotlin_check_refuses_unknown_schema(kit_jar: Path, tiny_bundle: Path, tmp_path: Path) -> None:
    bundle = _copy(tiny_bundle, tmp_path / "bundle")
    manifest = json.loads((bundle / "manifest.json").read_text(encoding="utf-8"))
    manifest["schema_version"] = 2
    (bundle / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    proc = _run_check(kit_jar, bundle)
    assert proc.returncode == 2
    assert "manifest.json: schema_version 2" in proc.stderr


def test_kotlin_model_check_refuses_a_changed_model(kit_jar: Path, tiny_bundle: Path, tmp_path: Path) -> None:
    """Same size, one byte changed: the first-load SHA-256 check (ModelCheck) must refuse it."""
    bundle = _copy(tiny_bundle, tmp_path / "bundle")
    model = bundle / json.loads((bundle / "manifest.json").read_text(encoding="utf-8"))["models"][0]["file"]
    data = bytearray(model.read_bytes())
    data[len(data) // 2] ^= 1
    model.write_bytes(bytes(data))
    proc = _run_check(kit_jar, bundle)
    assert proc.returncode == 2
    assert f"{model.name}: sha256 " in proc.stderr and "manifest.json says" in proc.stderr
    bench = subprocess.run(["java", "-cp", str(kit_jar), "dev.edgem3.Sha256BenchKt", str(model)],
                           capture_output=True, text=True, timeout=120)
    assert bench.returncode == 0 and f"sha256 {hashlib.sha256(bytes(data)).hexdigest()} " in bench.stdout


@pytest.mark.slow
def test_kotlin_core_trimmed_vocabulary(kit_jar: Path, trimmed_bundle: Path) -> None:
    """A trimmed bundle: rows for the model, original ids as lexical keys, dropped ids -> <unk> row."""
    kept = set(json.loads((trimmed_bundle / "vocab_map.json").read_text(encoding="utf-8"))["kept_ids"])
    cases = json.loads((trimmed_bundle / "golden.json").read_text(encoding="utf-8"))["cases"]
    assert any(t not in kept for c in cases for t in c["input_ids"])  # the <unk>-row path is exercised
    proc = _run_check(kit_jar, trimmed_bundle)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _summary(proc) == (len(cases), 0)
    assert "vocab trimmed" in proc.stdout


def test_kits_read_where_the_build_copies() -> None:
    """copy_to_kits' destinations, the Kotlin/Swift asset folder names and the gitignore agree."""
    from edge_m3.bundle import ANDROID_ASSETS, ANDROID_TEST_ASSETS, IOS_RESOURCES, IOS_TEST_RESOURCES

    assert ANDROID_ASSETS.parts[:3] == ("src", "main", "assets")
    assert ANDROID_TEST_ASSETS.parts[:3] == ("src", "androidTest", "assets")
    assert ANDROID_TEST_ASSETS.name == ANDROID_ASSETS.name
    # The kits take the folder names from the generated contract (tests/test_contract.py checks it).
    kt = (KT_PKG / "EdgeM3Embedder.kt").read_text(encoding="utf-8")
    assert "const val ASSET_DIR = EdgeM3Contract.ASSET_DIR" in kt
    swift = (IOS / "Sources/EdgeM3/EdgeM3Embedder.swift").read_text(encoding="utf-8")
    assert "static let resourceFolder = EdgeM3Contract.resourceFolder" in swift
    ignored = (ROOT / ".gitignore").read_text(encoding="utf-8").split()
    assert f"android_assets/{ANDROID_ASSETS.as_posix()}/" in ignored
    assert f"ios_assets/{IOS_RESOURCES.as_posix()}/" in ignored
    assert f"android_assets/{ANDROID_TEST_ASSETS.as_posix()}/" in ignored
    assert f"ios_assets/{IOS_TEST_RESOURCES.as_posix()}/" in ignored
    test_swift = (IOS / "Tests/EdgeM3Tests/EdgeM3GoldenTests.swift").read_text(encoding="utf-8")
    assert "EdgeM3Contract.testResourceFolder" in test_swift


def _gradle_deps(text: str) -> dict[str, str]:
    """group:artifact -> version of every dependency line, commented-out alternatives included."""
    return dict(re.findall(r'"([\w.\-]+:[\w.\-]+):([\w.\-]+)"', text))


def test_android_library_module() -> None:
    """What Gradle would read (it cannot run here: no Android SDK): a library module an app includes."""
    gradle = (ANDROID / "build.gradle.kts").read_text(encoding="utf-8")
    assert 'id("com.android.library")' in gradle and 'id("org.jetbrains.kotlin.android")' in gradle
    assert re.search(r'^\s*namespace = "dev\.edgem3"$', gradle, re.M)
    assert re.search(r"^\s*minSdk = 24$", gradle, re.M) and re.search(r"^\s*compileSdk = 34$", gradle, re.M)
    assert 'noCompress += listOf("tflite", "model")' in gradle
    assert (ANDROID / "src/main/AndroidManifest.xml").is_file()
    # Default source sets hold the kit; nothing under jvm/ (CI only) is in them.
    assert (KT_PKG / "EdgeM3Embedder.kt").is_file() and "srcDir" not in gradle
    for source in KT_PKG.glob("*.kt"):
        assert re.search(r"^package dev\.edgem3$", source.read_text(encoding="utf-8"), re.M), source.name
    deps = _gradle_deps(gradle)
    assert re.search(r'^\s*api\("com\.google\.ai\.edge\.litert:litert:', gradle, re.M)
    assert "org.jetbrains.kotlinx:kotlinx-coroutines-android" in deps
    assert {"androidx.test.ext:junit", "androidx.test:runner"} <= deps.keys()
    # One runtime, LiteRT with CompiledModel (the weight cache), new enough for every variant.
    from edge_m3.common.options import version_tuple
    from edge_m3.contract import RECIPES

    litert = deps["com.google.ai.edge.litert:litert"]
    assert "org.tensorflow:tensorflow-lite" not in deps
    assert version_tuple(litert) >= (2, 0) and all(
        version_tuple(litert) >= version_tuple(r.oldest_litert) for r in RECIPES.values())
    readme = (ANDROID / "README.md").read_text(encoding="utf-8")
    for artifact, version in deps.items():
        if artifact in readme:
            assert f"{artifact}:{version}" in readme, f"README quotes another {artifact} version"
    assert f"com.google.ai.edge.litert:litert:{litert}" in readme
    assert 'include(":edgem3")' in readme and "build.gradle.kts.snippet" not in readme
