"""The platform kits: the Kotlin core compiled and run on the JVM against a real bundle's golden.json.

A tiny bundle is built with the real builder; the Kotlin golden check (android_assets/jvm/
GoldenCheck.kt) then replays every case: the kit's own tokenizer + truncation, signature choice
and post-processing, all bit for bit. One kotlinc run per session (the `kit_jar` fixture) also
type-checks the Android embedder and the instrumented test against compile-only stubs. The Swift core cannot be
compiled here (no Swift toolchain), so it is checked to mirror the Kotlin core's names.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from edge_m3.bundle import load_bundle
from edge_m3.tokenizer import Tokenizer, TokenizerSpec

ROOT = Path(__file__).resolve().parents[1]
ANDROID = ROOT / "android_assets"
IOS = ROOT / "ios_assets"
KT_PKG = ANDROID / "src/main/java/dev/edgem3"
SEQ_LENS = "8,16,32"


def _build(ckpt: Path, out: Path, *extra: str, kits: Path | None = None) -> Path:
    from edge_m3.cli import main

    assert main(["build", "--checkpoint", str(ckpt), "--quant", "fp32", "--seq-lens", SEQ_LENS,
                 "--out", str(out), "--kits", str(kits) if kits else "none", "-q", *extra]) == 0
    return out


@pytest.fixture(scope="session")
def tiny_bundle(tiny_ckpt: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A built bundle, also copied by `--kits` into a scratch android_assets/ + ios_assets/ pair."""
    root = tmp_path_factory.mktemp("kit_bundle")
    for kit in ("android_assets", "ios_assets"):
        (root / "kits" / kit).mkdir(parents=True)
    return _build(tiny_ckpt, root / "bundle", kits=root / "kits")


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


def _run_check(jar: Path, bundle: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["java", "-cp", str(jar), "dev.edgem3.GoldenCheckKt", str(bundle)],
                          capture_output=True, text=True, timeout=300)


def _summary(proc: subprocess.CompletedProcess[str]) -> tuple[int, int]:
    m = re.search(r"^golden: (\d+) passed, (\d+) failed$", proc.stdout, re.M)
    assert m, f"no summary line:\n{proc.stdout}\n{proc.stderr}"
    return int(m.group(1)), int(m.group(2))


def test_kotlin_core_reproduces_golden(kit_jar: Path, tiny_bundle: Path) -> None:
    n_cases = len(json.loads((tiny_bundle / "golden.json").read_text(encoding="utf-8"))["cases"])
    proc = _run_check(kit_jar, tiny_bundle)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _summary(proc) == (n_cases, 0)
    assert n_cases >= 10
    # The golden set must reach every signature and the truncation path.
    cases = json.loads((tiny_bundle / "golden.json").read_text(encoding="utf-8"))["cases"]
    assert {c["signature"] for c in cases} == {f"embed_{n}" for n in SEQ_LENS.split(",")}
    b = load_bundle(tiny_bundle)
    tok = Tokenizer(b.sentencepiece_path, TokenizerSpec.from_manifest(b.manifest["tokenizer"]))
    assert any(len(tok.encode(c["text"])) > max(map(int, SEQ_LENS.split(","))) for c in cases)


def test_kotlin_check_catches_one_ulp_and_id_drift(kit_jar: Path, tiny_bundle: Path, tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    shutil.copytree(tiny_bundle, bundle)
    golden = json.loads((bundle / "golden.json").read_text(encoding="utf-8"))
    cases = golden["cases"]
    lex = next(c for c in cases if c["lexical_weights"])
    key = next(iter(lex["lexical_weights"]))
    w = np.float32(lex["lexical_weights"][key])
    lex["lexical_weights"][key] = float(np.nextafter(w, np.float32(np.inf)))  # one float32 ulp
    other = [c for c in cases if c is not lex]
    other[0]["input_ids"][1] += 1  # a token id
    other[1]["colbert_vecs"] = other[1]["colbert_vecs"][:-1]  # one colbert vector short
    (bundle / "golden.json").write_text(json.dumps(golden), encoding="utf-8")
    proc = _run_check(kit_jar, bundle)
    assert proc.returncode == 1
    assert _summary(proc) == (len(cases) - 3, 3)
    assert f"lexical_weights[{key}]" in proc.stdout
    assert "input_ids" in proc.stdout and "colbert_vecs rows" in proc.stdout


def test_kotlin_check_refuses_unknown_schema(kit_jar: Path, tiny_bundle: Path, tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    shutil.copytree(tiny_bundle, bundle)
    manifest = json.loads((bundle / "manifest.json").read_text(encoding="utf-8"))
    manifest["schema_version"] = 2
    (bundle / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    proc = _run_check(kit_jar, bundle)
    assert proc.returncode == 2
    assert "manifest.json: schema_version 2" in proc.stderr


@pytest.mark.slow
def test_kotlin_core_trimmed_vocabulary(kit_jar: Path, tiny_ckpt: Path, tmp_path: Path) -> None:
    """A trimmed bundle: rows for the model, original ids as lexical keys, dropped ids -> <unk> row."""
    golden_texts = (ROOT / "edge_m3/data/golden_texts.txt").read_text(encoding="utf-8").splitlines()
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(golden_texts[:3]) + "\n", encoding="utf-8")
    bundle = _build(tiny_ckpt, tmp_path / "bundle", "--vocab-corpus", str(corpus), "--no-self-check")
    kept = set(json.loads((bundle / "vocab_map.json").read_text(encoding="utf-8"))["kept_ids"])
    cases = json.loads((bundle / "golden.json").read_text(encoding="utf-8"))["cases"]
    assert any(t not in kept for c in cases for t in c["input_ids"])  # the <unk>-row path is exercised
    proc = _run_check(kit_jar, bundle)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _summary(proc) == (len(cases), 0)
    assert "vocab trimmed" in proc.stdout


def _declared(path: Path) -> tuple[set[str], set[str]]:
    """(type names, function names) declared in a Kotlin or Swift file."""
    text = path.read_text(encoding="utf-8")
    types = set(re.findall(r"\b(?:class|interface|object|struct|enum|protocol)\s+([A-Z]\w*)", text))
    funcs = set(re.findall(r"\b(?:fun|func)\s+(?:<[^>]*>\s*)?(\w+)\s*\(", text))
    return types, funcs


@pytest.mark.parametrize(("kt", "swift"), [("EdgeM3Core.kt", "EdgeM3Core.swift"),
                                           ("MiniJson.kt", "MiniJson.swift")])
def test_swift_mirrors_kotlin(kt: str, swift: str) -> None:
    """No Swift toolchain here: the Swift files must at least declare what the tested Kotlin declares."""
    kt_types, kt_funcs = _declared(KT_PKG / kt)
    sw_types, sw_funcs = _declared(IOS / "EdgeM3" / swift)
    # Kotlin's exception class is Swift's Error struct; Kotlin's inner Parser is Swift's MiniJsonParser.
    renames = {"EdgeM3Exception": "EdgeM3Error", "Parser": "MiniJsonParser"}
    assert {renames.get(t, t) for t in kt_types} <= sw_types
    assert kt_funcs <= sw_funcs, f"missing in {swift}: {sorted(kt_funcs - sw_funcs)}"


def test_kits_read_where_the_build_copies() -> None:
    """copy_to_kits' destinations, the Kotlin/Swift asset folder names and the gitignore agree."""
    from edge_m3.bundle import ANDROID_ASSETS, ANDROID_TEST_ASSETS, IOS_RESOURCES, IOS_TEST_RESOURCES

    assert ANDROID_ASSETS.parts[:3] == ("src", "main", "assets")
    assert ANDROID_TEST_ASSETS.parts[:3] == ("src", "androidTest", "assets")
    assert ANDROID_TEST_ASSETS.name == ANDROID_ASSETS.name
    kt = (KT_PKG / "EdgeM3Embedder.kt").read_text(encoding="utf-8")
    assert f'const val ASSET_DIR = "{ANDROID_ASSETS.name}"' in kt
    swift = (IOS / "EdgeM3/EdgeM3Embedder.swift").read_text(encoding="utf-8")
    assert f'static let resourceFolder = "{IOS_RESOURCES}"' in swift
    ignored = (ROOT / ".gitignore").read_text(encoding="utf-8").split()
    assert f"android_assets/{ANDROID_ASSETS.as_posix()}/" in ignored
    assert f"ios_assets/{IOS_RESOURCES.as_posix()}/" in ignored
    assert f"android_assets/{ANDROID_TEST_ASSETS.as_posix()}/" in ignored
    assert f"ios_assets/{IOS_TEST_RESOURCES.as_posix()}/" in ignored
    test_swift = (IOS / "EdgeM3Tests/EdgeM3GoldenTests.swift").read_text(encoding="utf-8")
    assert f'"{IOS_TEST_RESOURCES}"' in test_swift
    gradle = (ANDROID / "build.gradle.kts.snippet").read_text(encoding="utf-8")
    assert 'noCompress += listOf("tflite", "model")' in gradle
