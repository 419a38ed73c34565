"""The platform kits: the Kotlin core reproduces a built bundle's golden.json exactly (JVM)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from edge_m3.build import BuildOptions, build
from edge_m3.tokenizer import Tokenizer

ROOT = Path(__file__).resolve().parents[1]
# The platform-independent files only: EdgeM3Embedder.kt needs the Android SDK.
KOTLIN = [ROOT / "android_assets/src/main/kotlin/edge_m3/EdgeM3Core.kt",
          ROOT / "android_assets/src/main/kotlin/edge_m3/MiniJson.kt",
          ROOT / "android_assets/src/jvmTest/kotlin/GoldenCheck.kt"]


@pytest.fixture(scope="module")
def jar(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("kotlinc") is None:
        pytest.skip("kotlinc not installed (CI installs Debian's kotlin package)")
    out = tmp_path_factory.mktemp("kotlin") / "check.jar"
    subprocess.run(["kotlinc", *map(str, KOTLIN), "-include-runtime", "-d", str(out)],
                   check=True, capture_output=True, timeout=600)
    return out


@pytest.mark.parametrize("trim", [False, True])
def test_kotlin_core_reproduces_golden(jar: Path, tiny_ckpt: Path, tmp_path: Path,
                                       trim: bool) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("Hello world\n안녕하세요\nThe quick brown fox\n", encoding="utf-8")
    (bundle,) = build(BuildOptions(checkpoint=str(tiny_ckpt), quants=["fp32"], seq_lens=[8, 16, 32],
                                   out=str(tmp_path / "b"), self_check=False,
                                   vocab_corpus=[corpus] if trim else []), quiet=True)
    golden = json.loads((bundle / "golden.json").read_text())
    tok = Tokenizer(bundle / "sentencepiece.bpe.model")
    pieces = [tok.unigram.encode_words(tok.words(c["text"])) for c in golden["cases"]]
    (tmp_path / "pieces.json").write_text(json.dumps(pieces))
    args = [str(bundle / "manifest.json"), str(bundle / "golden.json"), str(tmp_path / "pieces.json")]
    if trim:
        args.append(str(bundle / "vocab_map.json"))
    run = subprocess.run(["java", "-jar", str(jar), *args], capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"golden: {len(golden['cases'])} passed, 0 failed" in run.stdout


def test_build_places_the_bundle_in_both_kits(tiny_ckpt: Path, tmp_path: Path) -> None:
    kits = tmp_path / "kits"
    (kits / "android_assets").mkdir(parents=True)
    (kits / "ios_assets").mkdir()
    from edge_m3.cli import main

    assert main(["build", "--checkpoint", str(tiny_ckpt), "--quant", "int8", "--seq-lens", "16",
                 "--out", str(tmp_path / "b"), "--kits", str(kits), "--no-self-check", "-q"]) == 0
    for d in (kits / "android_assets/src/main/assets/edge_m3", kits / "ios_assets/EdgeM3Resources"):
        assert sorted(p.name for p in d.iterdir()) == sorted(p.name for p in (tmp_path / "b").iterdir())
