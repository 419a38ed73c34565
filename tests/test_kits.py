"""The Android kit: the Kotlin core compiled and run on the JVM against a real bundle's golden.json.

A tiny bundle is built with the real builder (conftest `tiny_bundle`); the Kotlin golden check
(android_assets/jvm/GoldenCheck.kt) then replays every case: id mapping + truncation, signature
choice and post-processing, all bit for bit (ids from the kit's own tokenizer of the bundle's kind), after
checking every bundle file's size and SHA-256 as the app does on first load (ModelCheck.kt). One
Kotlin 2 compile per session (tools/kit/kotlin2.py: language 2.2, warnings as errors) also
type-checks the Android embedder (suspending API included) and the instrumented test against
compile-only stubs.
Live: GoldenCheck --live runs every golden case with the model on jvm/LiteRtCRunner.kt (LiteRT's
C API from the ai-edge-litert wheel, through JNA) on the tiny and the real-weights e5-small int8
and int4 bundles, all-MiniLM-L6-v2 int8 (WordPiece, dense head only) and a random ModernBERT
fp32 and int8 (byte-level BPE, dense head only, every signature up to one past its 128-token
window), within the device tolerance; KitEmbed (tools/kit/kit_embed.sh kotlin) is held against
`edge-m3 embed`; the runner's bad input gives one line each. CI fails without JNA or the library
(EDGE_M3_REQUIRE_KOTLIN).
Gradle cannot run here (no Android SDK), so the library module's build file is checked as text.
The Swift kit has its own tests (tests/test_swift_kit.py).
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from edge_m3.bundle import load_bundle
from edge_m3.spec import weight_cache_name
from tests.conftest import MODERNBERT_QUANTS
from tests.support import MINILM_TEXTS, assert_kit_embeddings, python_embed

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
    tok = b.tokenizer()
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


def _catalog() -> dict:
    """The version catalog entries the module reads (android_assets/gradle/libs.versions.toml)."""
    import tomllib

    return tomllib.loads((ANDROID / "gradle/libs.versions.toml").read_text(encoding="utf-8"))


def _catalog_accessor(alias: str) -> str:
    """Gradle's type-safe accessor of a catalog alias: `-` and `_` separate segments."""
    return re.sub(r"[-_]", ".", alias)


def test_android_library_module() -> None:
    """What Gradle would read (it cannot run here: no Android SDK, no Maven or Google repository):
    a library module AGP 9 accepts (built-in Kotlin), versions from the catalog the README shows."""
    gradle = (ANDROID / "build.gradle.kts").read_text(encoding="utf-8")
    code = "\n".join(line.split("//")[0] for line in gradle.splitlines())  # comments may name what is gone
    assert re.search(r"^\s*alias\(libs\.plugins\.android\.library\)$", code, re.M)
    assert "kotlin.android" not in code and "kotlin-android" not in code and "kotlin {" not in code  # AGP 9
    assert not re.search(r'"[\w.\-]+:[\w.\-]+:[\w.\-]+"', code), "coordinates belong in the catalog"
    assert re.search(r'^\s*namespace = "dev\.edgem3"$', code, re.M)
    assert re.search(r"^\s*minSdk = 24$", code, re.M) and re.search(r"^\s*compileSdk = 37$", code, re.M)
    assert 'noCompress += listOf("tflite", "model")' in code
    assert (ANDROID / "src/main/AndroidManifest.xml").is_file()
    # Default source sets hold the kit; nothing under jvm/ (CI only) is in them.
    assert (KT_PKG / "EdgeM3Embedder.kt").is_file() and "srcDir" not in code
    for source in KT_PKG.rglob("*.kt"):  # generated/ too: one package, dev.edgem3
        assert re.search(r"^package dev\.edgem3$", source.read_text(encoding="utf-8"), re.M), source.name
    catalog = _catalog()
    libraries, versions = catalog["libraries"], catalog["versions"]
    used = set(re.findall(r"\blibs\.([\w.]+)", code))
    # Every entry but LiteRT's GPU accelerator (the kit's GPU_ARTIFACT), which an app adds itself.
    runners = (KT_PKG / "ModelRunners.kt").read_text(encoding="utf-8")
    gpu = re.search(r'const val GPU_ARTIFACT = "([^"]+)"', runners)[1]
    optional = {a for a, lib in libraries.items() if lib["module"] == gpu}
    assert optional == {"litert-gpu"}, optional
    assert used == {"plugins.android.library"} | {_catalog_accessor(a) for a in set(libraries) - optional}, used
    assert catalog["plugins"]["android-library"] == {"id": "com.android.library", "version": {"ref": "agp"}}
    from edge_m3.common.options import version_tuple

    assert version_tuple(versions["agp"]) >= (9, 3)  # the first AGP whose highest API level is 37
    deps = {lib["module"]: versions[lib["version"]["ref"]] for lib in libraries.values()}
    assert re.search(r"^\s*api\(libs\.litert\)$", code, re.M) and "org.tensorflow:tensorflow-lite" not in deps
    assert {"org.jetbrains.kotlinx:kotlinx-coroutines-android", "androidx.test.ext:junit",
            "androidx.test:runner"} <= deps.keys()
    # One runtime, LiteRT with CompiledModel (the weight cache), new enough for every variant.
    from edge_m3.spec import RECIPES

    litert = deps["com.google.ai.edge.litert:litert"]
    assert version_tuple(litert) >= (2, 0) and all(
        version_tuple(litert) >= version_tuple(r.oldest_litert) for r in RECIPES.values())
    # The stand-ins the JVM check runs are declared from that LiteRT's source (jvm/stubs/).
    assert f"tag v{litert}" in (ANDROID / "jvm/stubs/LiteRtStubs.kt").read_text(encoding="utf-8")
    readme = (ANDROID / "README.md").read_text(encoding="utf-8")
    for artifact, version in deps.items():
        quoted = set(re.findall(rf"{re.escape(artifact)}:(\d[\w.\-]*)", readme))
        assert quoted <= {version}, f"README quotes another {artifact} version: {quoted}"
    assert f"com.google.ai.edge.litert:litert:{litert}" in readme
    # The README shows the catalog's entries as they are in the file.
    toml = (ANDROID / "gradle/libs.versions.toml").read_text(encoding="utf-8")
    entries = [line for line in toml.splitlines() if line and not line.startswith("#")]
    assert all(line in readme for line in entries), [line for line in entries if line not in readme]
    assert 'include(":edgem3")' in readme and "build.gradle.kts.snippet" not in readme


# ---- live: the model through LiteRtCRunner (LiteRT's C API via JNA, android_assets/jvm/) -------------

def _classpath(jar: Path) -> str:
    from tests.conftest import jna_jar_path

    return f"{jar}:{jna_jar_path()}"


def _live_check(jar: Path, bundle: Path, lib: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["java", "-cp", _classpath(jar), "dev.edgem3.GoldenCheckKt", str(bundle), "--live",
                           str(lib)], capture_output=True, text=True, timeout=300)


def _assert_live_golden(proc: subprocess.CompletedProcess[str], bundle: Path) -> None:
    manifest = json.loads((bundle / "manifest.json").read_text(encoding="utf-8"))
    n_cases = len(json.loads((bundle / "golden.json").read_text(encoding="utf-8"))["cases"])
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    m = re.search(r"^live: (\d+) passed, (\d+) failed \(quant (\S+), signatures \[(.*?)\]", proc.stdout, re.M)
    assert m, proc.stdout
    assert (int(m.group(1)), int(m.group(2)), m.group(3)) == (n_cases, 0, manifest["quant"])
    runs = dict(x.split(":") for x in m.group(4).split(", "))
    assert set(runs) == {s["name"] for s in manifest["models"][0]["signatures"]}  # every signature ran
    assert all(int(n) > 0 for n in runs.values())


def test_kotlin_live_golden_tiny(kit_jar: Path, tiny_bundle: Path, litert_c_library: Path) -> None:
    """golden.json replayed live: the tiny fp32 model run by the kit itself, every signature."""
    _assert_live_golden(_live_check(kit_jar, tiny_bundle, litert_c_library), tiny_bundle)


@pytest.mark.parametrize("quant", ["int8", "int4"])
def test_kotlin_live_golden_e5(kit_jar: Path, e5_bundles: dict[str, Path], litert_c_library: Path,
                               quant: str) -> None:
    """Real trained weights (e5-small, int8 as shipped and int4), live within the device tolerance."""
    _assert_live_golden(_live_check(kit_jar, e5_bundles[quant], litert_c_library), e5_bundles[quant])


def test_kotlin_golden_minilm(kit_jar: Path, minilm_bundles: dict[str, Path], minilm_input_cases: Path,
                              litert_c_library: Path) -> None:
    """all-MiniLM-L6-v2 int8 (BERT: kind `wordpiece`, heads ["dense"]): ids from the kit's
    WordPieceTokenizer, signature choice, post-processing and the replayed embed() exact, the Python
    pipeline's answers to lone surrogates and text past the longest signature; then live within the
    device tolerance (the longest signature, which golden.json's texts do not reach, for shape)."""
    bundle = minilm_bundles["int8"]
    manifest = json.loads((bundle / "manifest.json").read_text(encoding="utf-8"))
    assert (manifest["tokenizer"]["kind"], manifest["heads"]) == ("wordpiece", ["dense"])
    n_cases = len(json.loads((bundle / "golden.json").read_text(encoding="utf-8"))["cases"])
    n_inputs = len(json.loads(minilm_input_cases.read_text(encoding="utf-8")))
    proc = _run_check(kit_jar, bundle, minilm_input_cases)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _summary(proc) == (n_cases, 0)
    assert f"inputs: {n_inputs} passed, 0 failed" in proc.stdout
    _assert_live_golden(_live_check(kit_jar, bundle, litert_c_library), bundle)


@pytest.mark.parametrize("quant", MODERNBERT_QUANTS)
def test_kotlin_golden_modernbert(kit_jar: Path, modernbert_bundles: dict[str, Path],
                                  modernbert_input_cases: Path, litert_c_library: Path, quant: str) -> None:
    """A ModernBERT bundle (kind `byte-level-bpe`, heads ["dense"], a 128-token sliding window), fp32
    and int8, in one GoldenCheck run each: ids from the kit's BpeTokenizer, signature choice,
    post-processing and the replayed embed() exact, the Python pipeline's answers to bad input and
    text past the longest signature; then every golden case live within the device tolerance, at
    every signature (conftest `modernbert_bundles`: golden.json reaches 200, past the window)."""
    bundle = modernbert_bundles[quant]
    manifest = json.loads((bundle / "manifest.json").read_text(encoding="utf-8"))
    assert (manifest["tokenizer"]["kind"], manifest["heads"]) == ("byte-level-bpe", ["dense"])
    n_cases = len(json.loads((bundle / "golden.json").read_text(encoding="utf-8"))["cases"])
    n_inputs = len(json.loads(modernbert_input_cases.read_text(encoding="utf-8")))
    proc = subprocess.run(["java", "-cp", _classpath(kit_jar), "dev.edgem3.GoldenCheckKt", str(bundle),
                           str(modernbert_input_cases), "--live", str(litert_c_library)],
                          capture_output=True, text=True, timeout=300)
    assert _summary(proc) == (n_cases, 0), proc.stdout
    assert f"inputs: {n_inputs} passed, 0 failed" in proc.stdout
    assert "not reached by golden.json" not in proc.stdout  # every signature replayed, none shape-checked only
    _assert_live_golden(proc, bundle)


def test_kit_embed_minilm_matches_edge_m3_embed(kit_jar: Path, minilm_bundles: dict[str, Path],
                                                litert_c_library: Path, tmp_path: Path) -> None:
    """KitEmbed (Kotlin, live) against `edge-m3 embed` on MiniLM int8, every signature (the longest
    through truncation): ids and signature exact, dense_vecs within the device tolerance, no other head."""
    bundle = minilm_bundles["int8"]
    texts = tmp_path / "texts.txt"
    texts.write_text("\n".join(MINILM_TEXTS) + "\n", encoding="utf-8")
    want = python_embed(bundle, texts, "--runtime", "litert", "--threads", "1")
    assert {w["signature"] for w in want} == {s.name for s in load_bundle(bundle).manifest.models[0].signatures}
    assert all(set(w) == {"input_ids", "signature", "dense_vecs"} for w in want)
    proc = _kit_embed(kit_jar, "--lib", litert_c_library, bundle, texts)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert_kit_embeddings([json.loads(line) for line in proc.stdout.splitlines()], want, "int8")


def _kit_embed(jar: Path, *args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["java", "-cp", _classpath(jar), "dev.edgem3.KitEmbedKt", *map(str, args)],
                          capture_output=True, text=True, timeout=300, cwd=cwd)


DIFF_TEXTS = ("BGE-M3 on a phone.", "Le modèle tourne sur le téléphone, sans serveur, même hors ligne.",
              "検索は端末の中で。", "x " * 200)  # the last one past the longest signature: truncated


def test_kit_embed_matches_edge_m3_embed(kit_jar: Path, e5_bundles: dict[str, Path], litert_c_library: Path,
                                         tmp_path: Path) -> None:
    """KitEmbed (Kotlin kit, live) against `edge-m3 embed` (Python's DevicePipeline) on the e5 int8
    bundle: ids and signature exact, vectors within the variant's device tolerance."""
    import numpy as np

    from edge_m3.spec import RECIPES

    bundle = e5_bundles["int8"]
    texts = tmp_path / "texts.txt"
    texts.write_text("\n".join(DIFF_TEXTS) + "\n", encoding="utf-8")
    want = python_embed(bundle, texts)
    proc = _kit_embed(kit_jar, "--lib", litert_c_library, bundle, texts)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(got) == len(want) == len(DIFF_TEXTS)
    tol = RECIPES["int8"].device_tolerance
    for g, w in zip(got, want, strict=True):
        assert set(g) == set(w) == {"input_ids", "signature", "dense_vecs", "lexical_weights", "colbert_vecs"}
        assert (g["input_ids"], g["signature"]) == (w["input_ids"], w["signature"])
        a, b = np.asarray(g["dense_vecs"]), np.asarray(w["dense_vecs"])
        assert a @ b / np.linalg.norm(a) / np.linalg.norm(b) >= tol.dense_cosine_min
        assert np.abs(a - b).max() <= tol.max_abs
        for k in set(g["lexical_weights"]) | set(w["lexical_weights"]):
            assert abs(g["lexical_weights"].get(k, 0.0) - w["lexical_weights"].get(k, 0.0)) <= tol.max_abs
        assert np.abs(np.asarray(g["colbert_vecs"]) - np.asarray(w["colbert_vecs"])).max() <= tol.max_abs
    assert {w["signature"] for w in want} == {s.name for s in load_bundle(bundle).manifest.models[0].signatures}
    # --bench: one JSON line, runs grouped by the signature length each text lands on.
    proc = _kit_embed(kit_jar, "--bench", "--repeats", "2", "--lib", litert_c_library, bundle, texts)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (line,) = proc.stdout.splitlines()
    bench = json.loads(line)
    lengths = [int(w["signature"].rsplit("_", 1)[1]) for w in want]
    assert bench["runs"] == {str(n): 2 * lengths.count(n) for n in set(lengths)}
    assert set(bench["p50_ms"]) == set(bench["runs"]) and bench["open_to_first_ms"] > 0


def _with_manifest(bundle: Path, dest: Path, edit: Callable[[dict], None]) -> Path:
    out = _copy(bundle, dest)
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    edit(manifest)
    (out / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    return out


def _garbage_model(manifest: dict, model: Path, data: bytes) -> None:
    """`data` as the model file, with a manifest entry that matches it (the checksum passes)."""
    model.write_bytes(data)
    manifest["files"][model.name] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}


def test_kotlin_runner_bad_input(kit_jar: Path, tiny_bundle: Path, litert_c_library: Path,
                                 tmp_path: Path) -> None:
    """A missing or wrong library, a file LiteRT cannot run, a model whose signatures are not the
    manifest's, bad options: each one line on stderr naming the file, exit 2, never a JVM crash."""
    texts = tmp_path / "texts.txt"
    texts.write_text("hello\n", encoding="utf-8")
    model_name = json.loads((tiny_bundle / "manifest.json").read_text(encoding="utf-8"))["models"][0]["file"]

    def renamed(m: dict) -> None:
        m["models"][0]["signatures"][0]["name"] = "embed_9"

    def reshaped(m: dict) -> None:
        out = next(o for o in m["models"][0]["signatures"][-1]["outputs"] if o["name"] == "dense_vecs")
        out["shape"] = [1, out["shape"][1] + 1]

    java_home = Path(shutil.which("java") or "/bin/sh").resolve().parent.parent  # libjava.so: not LiteRT
    unreadable = []
    model_bytes = (tiny_bundle / model_name).read_bytes()
    bad = _copy(tiny_bundle, tmp_path / "garbage")
    manifest = json.loads((bad / "manifest.json").read_text(encoding="utf-8"))
    _garbage_model(manifest, bad / model_name, b"not a flatbuffer " * 64)
    (bad / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    unreadable.append((("--lib", litert_c_library, bad), f"{model_name}: not a model LiteRT can read: "
                                                         "LiteRT LiteRtCreateModelFromFile failed"))
    # A cut download: refused by its size before LiteRT reads it (LiteRT 2.3.0 does not verify
    # the flatbuffer: a cut model whose manifest was rewritten to match can crash its loader).
    cut = _copy(tiny_bundle, tmp_path / "cut")
    (cut / model_name).write_bytes(model_bytes[:len(model_bytes) // 2])
    unreadable.append((("--lib", litert_c_library, cut),
                       f"{model_name}: {len(model_bytes) // 2} bytes, manifest.json says {len(model_bytes)}"))
    cases = [
        (("--lib", tmp_path / "nope.so", tiny_bundle),
         f"{tmp_path / 'nope.so'}: cannot load the LiteRT library (not found)"),
        (("--lib", texts, tiny_bundle), f"{texts}: cannot load the LiteRT library ("),
        (("--lib", java_home / "lib/libjava.so", tiny_bundle),
         ": not LiteRT's C API (no LiteRtCreateEnvironment)"),
        *unreadable,
        (("--lib", litert_c_library, _with_manifest(tiny_bundle, tmp_path / "renamed", renamed)),
         f"{model_name}: no signature embed_9 (the model has ["),
        (("--lib", litert_c_library, _with_manifest(tiny_bundle, tmp_path / "reshaped", reshaped)),
         "outputs: dense_vecs is float32["),
        ((tiny_bundle,), "usage: KitEmbed"),
        (("--repeats", "0", "--lib", litert_c_library, tiny_bundle),
         "--repeats 0: must be a whole number >= 1"),
        (("--threads", "x", "--lib", litert_c_library, tiny_bundle),
         "--threads x: must be a whole number >= 1"),
    ]
    for args, message in cases:
        proc = _kit_embed(kit_jar, *args, texts, cwd=tmp_path)  # where a JVM would write hs_err_pid*.log
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr[-2000:])
        err = [line for line in proc.stderr.splitlines() if line.startswith("kit_embed: ")]
        assert len(err) == 1 and message in err[0], (args, proc.stderr[-2000:])
        assert "Exception" not in proc.stderr and "\tat " not in proc.stderr, proc.stderr[-2000:]
    assert not list(tmp_path.glob("hs_err_pid*.log"))


# ---- the Android runners on the JVM: jvm/AndroidCheck.kt against the stand-ins in jvm/stubs/ -------------

def _android_check(jar: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["java", "-cp", _classpath(jar), "dev.edgem3.AndroidCheckKt", *map(str, args)],
                          capture_output=True, text=True, timeout=600)


def _android_cases(proc: subprocess.CompletedProcess[str]) -> dict[str, str]:
    """case name -> "ok" or the failure, after checking the summary line and the exit code."""
    cases = dict(re.findall(r"^case (\S+): (.*)$", proc.stdout, re.M))
    failed = {k: v for k, v in cases.items() if v != "ok"}
    summary = f"android: {len(cases) - len(failed)} passed, {len(failed)} failed"
    assert re.search(rf"^{summary}$", proc.stdout, re.M), proc.stdout + proc.stderr[-3000:]
    assert not failed and proc.returncode == 0, (failed, proc.stderr[-3000:])
    return cases


def test_android_runners_without_the_runtime(kit_jar: Path, tiny_bundle: Path, tmp_path: Path) -> None:
    """An app without LiteRT's native library (or not for the device's ABI): the runtime's class
    initializers fail as LiteRT 2.2.0's do (UnsatisfiedLinkError, then NoClassDefFoundError); every
    way of opening the model gives one EdgeM3RuntimeMissingException, not a JVM Error."""
    cases = _android_cases(_android_check(kit_jar, "missing", tiny_bundle, tmp_path))
    kinds = ("compiled", "interpreter")
    want = {f"missing-runtime-{k}-{n}" for k in kinds for n in (1, 2)}
    assert set(cases) == want | {"missing-runtime-assets-memory"}


def test_android_runners_live(kit_jar: Path, tiny_bundle: Path, litert_c_library: Path, tmp_path: Path) -> None:
    """EdgeM3Embedder and both runners (CompiledModel, Interpreter) on the JVM through the stand-ins,
    the model on LiteRT's C API: every way of opening the model embeds exactly as the desktop runner;
    a manifest whose signature or tensor names, shapes or dtypes are not the model's is refused with
    EdgeM3ModelMismatchException by both runners; a closed embedder with EdgeM3ClosedException."""

    def first(m: dict) -> dict:
        return m["models"][0]["signatures"][0]

    def renamed_signature(m: dict) -> None:
        first(m)["name"] = "embed_9"

    def renamed_input(m: dict) -> None:
        next(t for t in first(m)["inputs"] if t["name"] == "attention_mask")["name"] = "mask"

    def reshaped_output(m: dict) -> None:
        out = next(o for o in m["models"][0]["signatures"][-1]["outputs"] if o["name"] == "dense_vecs")
        out["shape"] = [1, out["shape"][1] + 1]

    def retyped_input(m: dict) -> None:
        next(t for t in first(m)["inputs"] if t["name"] == "input_ids")["dtype"] = "int64"

    edits = {"signature-name": renamed_signature, "input-name": renamed_input, "output-shape": reshaped_output,
             "input-dtype": retyped_input}
    args: list[str | Path] = []
    for name, edit in edits.items():
        args += ["--mismatch", name, _with_manifest(tiny_bundle, tmp_path / name, edit)]
    garbage = _copy(tiny_bundle, tmp_path / "garbage")
    manifest = json.loads((garbage / "manifest.json").read_text(encoding="utf-8"))
    _garbage_model(manifest, garbage / manifest["models"][0]["file"], b"not a flatbuffer " * 64)
    (garbage / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    cases = _android_cases(_android_check(kit_jar, "live", tiny_bundle, tmp_path / "work", litert_c_library,
                                          *args, "--garbage", garbage))
    assert set(cases) == {
        "directory-in-memory-cache", "directory-cache-file", "directory-interpreter", "assets-copy-to-file",
        "assets-copy-to-memory", "assets-mapped-interpreter", "assets-compressed-mapped",
        "assets-compressed-memory",
        "closed-embed", "closed-embed-ids", "garbage-compiled", "garbage-interpreter",
        *(f"mismatch-{n}-{r}" for n in edits for r in ("compiled", "interpreter"))}
