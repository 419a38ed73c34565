"""The torch references (FlagEmbedding's `BGEM3FlagModel` for BGE-M3 checkpoints,
sentence-transformers' `SentenceTransformer` for theirs), imported or refused in one line.

Why a module of its own: FlagEmbedding imports private modules of transformers (1.4.2 needs
`transformers.modeling_attn_mask_utils`, gone in transformers 5), so a new upstream release can
break it without any change here. `verify`, its workers and the tests all import it through
`import_flag_model`, which turns that failure into one line naming the package and version that
broke it, instead of a traceback from deep inside FlagEmbedding.
"""

from __future__ import annotations

from importlib import metadata
from typing import Any

from edge_m3.errors import EdgeM3Error

# The distributions whose version decides whether FlagEmbedding imports (named in the line).
SUSPECTS = ("transformers", "torch", "tokenizers", "datasets", "huggingface-hub", "peft",
            "sentence-transformers", "accelerate")
# Known to work: the versions in requirements/dev.txt (the lock); the range in pyproject.toml.
KNOWN_FIX = "FlagEmbedding 1.4 needs transformers<5; `make test` installs the locked versions " \
            "(requirements/dev.txt)"


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _culprit(exc: BaseException) -> str | None:
    """The distribution the failing import belongs to: the missing module's top package, else
    the package whose file raised it (from the traceback's innermost frame)."""
    name = getattr(exc, "name", None) or ""
    top = name.split(".")[0].replace("_", "-").lower()
    if top and top != "flagembedding" and _version(top):
        return top
    tb = exc.__traceback__
    files = []
    while tb is not None:
        files.append(tb.tb_frame.f_code.co_filename)
        tb = tb.tb_next
    for path in reversed(files):
        parts = path.replace("\\", "/").split("/")
        if "site-packages" in parts:
            pkg = parts[parts.index("site-packages") + 1].replace("_", "-").lower()
            if pkg != "flagembedding" and _version(pkg):
                return pkg
    return None


def flagembedding_broken(exc: BaseException) -> str:
    """One line: FlagEmbedding's version, the package (and version) that broke its import, why."""
    flag = _version("FlagEmbedding")
    if flag is None:
        return "the FlagEmbedding reference is not installed: pip install 'edge-m3[dev]'"
    culprit = _culprit(exc)
    by = f" under {culprit} {_version(culprit)}" if culprit else ""
    reason = " ".join(f"{type(exc).__name__}: {exc}".split())[:200]
    return f"FlagEmbedding {flag} cannot be imported{by} ({reason}); {KNOWN_FIX}"


def import_sentence_transformer() -> Any:
    """`sentence_transformers.SentenceTransformer` (the reference of sentence-transformers
    checkpoints), or EdgeM3Error in one line naming what broke its import."""
    try:
        from sentence_transformers import SentenceTransformer
    except Exception as exc:
        version = _version("sentence-transformers")
        if version is None:
            raise EdgeM3Error("the sentence-transformers reference is not installed: "
                              "pip install 'edge-m3[dev]'") from None
        culprit = _culprit(exc)
        by = f" under {culprit} {_version(culprit)}" if culprit and culprit != "sentence-transformers" else ""
        reason = " ".join(f"{type(exc).__name__}: {exc}".split())[:200]
        raise EdgeM3Error(f"sentence-transformers {version} cannot be imported{by} ({reason}); "
                          "`make test` installs the locked versions (requirements/dev.txt)") from None
    return SentenceTransformer


def import_flag_model() -> Any:
    """`FlagEmbedding.BGEM3FlagModel`, or EdgeM3Error with the one line above."""
    try:
        from FlagEmbedding import BGEM3FlagModel
    except Exception as exc:  # an ImportError, or a dependency that fails as it loads
        raise EdgeM3Error(flagembedding_broken(exc)) from None
    return BGEM3FlagModel
