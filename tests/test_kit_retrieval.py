"""The kits' retrieval (Retrieval.kt/.swift, EdgeM3Index.kt/.swift) against Python's, bit for bit.

Both kits run as command-line tools (android_assets/jvm/RetrievalCheck.kt, ios_assets/Sources/
EdgeM3Retrieval) on files this test writes with every float as the hex of its bits, and answer
the same way, so each score and hit is compared exactly: golden scores, scores of real-weights
vectors (also against FlagEmbedding's own functions, to float rounding), Hypothesis-drawn
vectors and weights, and search over indexes the Python side builds.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edge_m3.contract import COLBERT_VECS, DENSE_VECS, LEXICAL_WEIGHTS

KIT_MODES = ("dense", "sparse", "colbert", "sparse+dense", "colbert+sparse+dense")
KITS = ("kotlin", "swift")

Vectors = Mapping[str, Any]


# ---- the wire: whitespace-separated tokens, floats as their bits --------------------------------

def _h32(x: Any) -> str:
    return f"{int(np.float32(x).view(np.uint32)):08x}"


def _h64(x: float) -> str:
    return f"{int(np.float64(x).view(np.uint64)):016x}"


def _vectors(v: Vectors) -> str:
    """One query's or passage's outputs (FlagEmbedding names) in the kits' wire format."""
    parts = []
    dense = v.get(DENSE_VECS)
    parts.append("D -" if dense is None else f"D {len(dense)} " + " ".join(map(_h32, np.asarray(dense, np.float32))))
    lex = v.get(LEXICAL_WEIGHTS)
    parts.append("L -" if lex is None else f"L {len(lex)} " + " ".join(f"{k} {_h32(w)}" for k, w in lex.items()))
    col = v.get(COLBERT_VECS)
    if col is None:
        parts.append("C -")
    else:
        col = np.asarray(col, np.float32).reshape(len(col), -1)
        parts.append(f"C {col.shape[0]} {col.shape[1]} " + " ".join(map(_h32, col.ravel())))
    return "\n".join(parts)


def _cases(pairs: Sequence[tuple[Vectors, Vectors]], weights: Sequence[Sequence[float]]) -> str:
    out = [f"weights {len(weights)}", *(" ".join(map(_h64, w)) for w in weights), f"pairs {len(pairs)}"]
    for q, p in pairs:
        out += [_vectors(q), _vectors(p)]
    return "\n".join(out) + "\n"


def _parse_scores(stdout: str) -> dict[tuple[int, int, str], str]:
    got = {}
    for line in stdout.splitlines():
        i, k, mode, bits = line.split()
        got[int(i), int(k), mode] = bits
    return got


@pytest.fixture(scope="session")
def kit_run(request: pytest.FixtureRequest) -> Callable[[str, Sequence[str]], subprocess.CompletedProcess[str]]:
    """run(kit, args): one kit's retrieval tool (builds it on first use: kit_jar / swift_build)."""
    tools: dict[str, list[str]] = {}

    def run(kit: str, args: Sequence[str]) -> subprocess.CompletedProcess[str]:
        if kit not in tools:
            if kit == "kotlin":
                jar = request.getfixturevalue("kit_jar")
                tools[kit] = ["java", "-cp", str(jar), "dev.edgem3.RetrievalCheckKt"]
            else:
                tools[kit] = [str(request.getfixturevalue("swift_build") / "release/edge-m3-retrieval")]
        return subprocess.run([*tools[kit], *args], capture_output=True, text=True, timeout=300)

    return run


def _kit_scores(kit_run: Callable[..., subprocess.CompletedProcess[str]], kit: str, tmp: Path,
                pairs: Sequence[tuple[Vectors, Vectors]], weights: Sequence[Sequence[float]]) -> dict:
    cases = tmp / f"cases-{kit}.txt"
    cases.write_text(_cases(pairs, weights), encoding="ascii")
    proc = kit_run(kit, ["score", str(cases)])
    assert proc.returncode == 0, proc.stderr
    return _parse_scores(proc.stdout)
