"""The fidelity corpus (issue 26): real text in 25 languages and 13 scripts, from Debian packages.

    python -m tools.inputs.make_fidelity_corpus            # ~/.cache/edge-m3/fidelity/corpus.jsonl
    python -m tools.inputs.make_fidelity_corpus --sample edge_m3/data/fidelity_sample.jsonl

Why Debian: the project's own texts (edge_m3/data) were written for it; recipes chosen on them
overfit. Translated manual pages and gettext catalogues are real text written by translators
for people, in many scripts, with code, option names, numbers, URLs and Latin inside other
scripts, and they install here by package name (`apt-get download`, unpacked with
`dpkg-deb -x`; no root install). The packages (Debian 12 "bookworm", section main, so
DFSG-free), with the versions the committed sample and docs/benchmarks.md were made from:

- manpages 6.03-2: GPL-2+, BSD-2/3/4-clause (per page); English manual pages.
- manpages-de, -fr, -es, -it, -pt-br, -nl, -vi, -ru, -uk, -el 4.18.1-1 and manpages-pl
  1:4.18.1-1 (manpages-l10n): GPL-3+ (the translations); translated manual pages.
- manpages-ja 0.5.0.0.20221215+dfsg-1: the original pages' licences (all DFSG-free, says its
  copyright file); Japanese manual pages.
- manpages-zh 1.6.4.0-1: GFDL-1.2+ (no invariant sections), GPL-2; zh_CN and zh_TW pages.
- manpages-tr 2.0.6-2: GPL; Turkish manual pages.
- gettext catalogues (`usr/share/locale/*/LC_MESSAGES/*.mo`): coreutils 9.1-1 (GPL-3+; usage
  texts with options), apt 2.6.2 (GPL-2+), dpkg 1.21.23 (GPL-2+), libglib2.0-data
  2.74.6-2+deb12u9 (LGPL-2.1+), libgtk2.0-common 2.24.33-2+deb12u1 (LGPL-2+), iso-codes
  4.15.0-1 (LGPL-2.1+; country, language and currency names), shared-mime-info 2.2-1 (GPL-2+;
  file type names).

Every text is a record: `text`, `lang` (the package's locale directory: zh_CN, pt_BR, ...),
`script` (ISO 15924), `kind` (query or passage), `group` (the queries and passages of one
group belong together: retrieval recall is measured on it; agreement is measured over every
query against every passage), `source` (package and file) and `features` (url, code, digits,
mixed: Latin letters inside another script). Groups:
- a manual page: the query is its NAME line's description ("list directory contents"), the
  passages one or two pieces of its body, cut at paragraph ends, of lengths drawn from a few
  words to ~5,000 characters (past 512 tokens);
- a gettext catalogue: a run of consecutive messages (sorted by English msgid, so neighbours
  share their subject); the query is one short message of the run, the passage the others.

Deterministic: files sorted, every choice from `random.Random(f"{seed}:{lang}:...")`; the
packages are the versions apt serves (printed; a new Debian point release may change a few
texts, the table above says which were used). Needs `apt-get` and `dpkg-deb`.
"""

from __future__ import annotations

import argparse
import gettext
import gzip
import json
import random
import re
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

MAN_PACKAGES = ("manpages", "manpages-de", "manpages-fr", "manpages-es", "manpages-it",
                "manpages-pl", "manpages-pt-br", "manpages-nl", "manpages-vi", "manpages-ru",
                "manpages-uk", "manpages-el", "manpages-ja", "manpages-zh", "manpages-tr")
MO_PACKAGES = ("coreutils", "apt", "dpkg", "libglib2.0-data", "libgtk2.0-common", "iso-codes",
               "shared-mime-info")
# language (locale directory) -> ISO 15924 script. 25 languages, 13 scripts.
SCRIPTS = {
    "en": "Latn", "de": "Latn", "fr": "Latn", "es": "Latn", "it": "Latn", "pl": "Latn",
    "pt_BR": "Latn", "nl": "Latn", "vi": "Latn", "tr": "Latn",
    "ru": "Cyrl", "uk": "Cyrl", "el": "Grek", "he": "Hebr", "ar": "Arab", "fa": "Arab",
    "hi": "Deva", "bn": "Beng", "ta": "Taml", "th": "Thai", "ko": "Kore", "ja": "Jpan",
    "zh_CN": "Hans", "zh_TW": "Hant",
}
GROUPS_PER_LANG = 40
MAN_SHARE = 0.5  # of a language's groups, from manual pages when it has them
# Passage lengths in characters, drawn log-uniformly: a few words to past 512 tokens.
PASSAGE_CHARS = (20, 5000)
SAMPLE_SIZE = 180  # the committed sample: every language with both kinds, verified in CI

URL = re.compile(r"https?://|www\.\w|\w@\w+\.\w")
CODE = re.compile(r"(^|\s)--?[A-Za-z][\w-]*|[{};]|\$\{?\w|%[-0-9.]*[sdluxf]|/(usr|etc|var|dev|tmp)/"
                  r"|\w\(\)|==|<[A-Za-z]+>")
LATIN = re.compile(r"[A-Za-z\u00C0-\u024F]")


# --------------------------------------------------------------------------- packages


def fetch_packages(names: Sequence[str], into: Path) -> dict[str, str]:
    """`apt-get download` each package, unpack it under `into`; {package: version}."""
    debs = into / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    subprocess.run(["apt-get", "download", "-q", *names], cwd=debs, check=True,
                   stdout=subprocess.DEVNULL)
    versions = {}
    for deb in sorted(debs.glob("*.deb")):
        info = subprocess.run(["dpkg-deb", "-f", str(deb), "Package", "Version"], check=True,
                              capture_output=True, text=True).stdout
        fields = dict(line.split(": ", 1) for line in info.splitlines() if ": " in line)
        versions[fields["Package"]] = fields["Version"]
        subprocess.run(["dpkg-deb", "-x", str(deb), str(into / "root")], check=True)
    return versions


# --------------------------------------------------------------------------- manual pages

_ESCAPES = [(r"\(em", "—"), (r"\(en", "–"), (r"\(aq", "'"), (r"\(dq", '"'), (r"\(lq", "“"),
            (r"\(rq", "”"), (r"\(bu", "•"), (r"\(co", "©"), (r"\(rg", "®"), (r"\(oq", "‘"),
            (r"\(cq", "’"), (r"\(ga", "`"), (r"\(ti", "~"), (r"\(ha", "^"), (r"\(mi", "-"),
            (r"\(hy", "-"), (r"\(at", "@"), (r"\(sh", "#"), (r"\(Do", "$"), (r"\(sl", "/"),
            (r"\[em]", "—"), (r"\[en]", "–"), (r"\[aq]", "'"), (r"\[dq]", '"'), (r"\[bu]", "•"),
            (r"\-", "-"), (r"\e", "\\"), (r"\ ", " "), (r"\~", " "), (r"\0", " "),
            (r"\&", ""), (r"\c", ""), (r"\%", ""), (r"\|", ""), (r"\^", ""), (r"\:", ""),
            (r"\/", ""), (r"\,", "")]
_FONT = re.compile(r"\\f(\[[^\]]*\]|\(..|.)|\\s[-+]?\d+|\\\*(\[[^\]]*\]|\(..|.)|\\\(..|\\\[[^\]]*\]"
                   r"|\\[hvwokxyz]'[^']*'|\\[nmM](\[[^\]]*\]|\(..|.)")
_ALTERNATING = {"BR", "BI", "IB", "IR", "RB", "RI"}
_TEXT_MACROS = {"B", "I", "SM", "SB", "R"}
_BREAKS = {"PP", "LP", "P", "TP", "HP", "RS", "RE", "sp", "br", "SS", "SH", "IP", "TQ", "EX", "EE",
           "nf", "fi", "Sh", "Pp", "Bl", "El", "It"}


def _unescape(s: str) -> str:
    for a, b in _ESCAPES:
        s = s.replace(a, b)
    s = _FONT.sub("", s)
    return s.replace("\\", "")


def _args(rest: str) -> list[str]:
    out, cur, quoted = [], "", False
    for ch in rest.strip():
        if ch == '"':
            quoted = not quoted
        elif ch in " \t" and not quoted:
            if cur:
                out.append(cur)
            cur = ""
        else:
            cur += ch
    return [*out, cur] if cur else out


def roff_text(src: str) -> dict[str, list[str]]:
    """A manual page's sections as paragraphs of plain text (a small roff reader: text macros
    kept, layout macros as paragraph breaks, escapes resolved; tables and macros it does not
    know are dropped)."""
    sections: dict[str, list[str]] = {}
    name, para = "", []
    in_table = False

    def flush() -> None:
        if para:
            text = " ".join(" ".join(para).split())
            if text:
                sections.setdefault(name, []).append(text)
            para.clear()

    for line in src.splitlines():
        if line.startswith((".\\\"", "'\\\"", ".\\}", "'.")) or line.strip() in (".", "'"):
            continue
        if line.startswith(".TS"):
            in_table = True
        if in_table:
            in_table = not line.startswith(".TE")
            continue
        if line.startswith((".", "'")):
            macro, _, rest = line[1:].strip().partition(" ")
            if macro in ("SH", "Sh"):
                flush()
                name = _unescape(" ".join(_args(rest))).upper()
            elif macro in _BREAKS:
                flush()
                args = _args(rest)
                if macro in ("IP", "SS", "It") and args:
                    para.append(_unescape(args[0] if macro == "IP" else " ".join(args)))
                    flush()
            elif macro in _TEXT_MACROS:
                para.append(_unescape(" ".join(_args(rest))))
            elif macro in _ALTERNATING:
                para.append(_unescape("".join(_args(rest))))
            elif macro in ("UR", "MT"):
                para.append(_unescape(rest.strip()))
            continue
        para.append(_unescape(line))
    flush()
    return sections


def man_pages(root: Path, lang: str) -> Iterator[tuple[str, str, list[str]]]:
    """(file, NAME description, body paragraphs) of every page of a language, sorted."""
    base = root / "usr/share/man" / ("" if lang == "en" else lang)
    for path in sorted(base.glob("man[1-8]/*.gz")):
        try:
            src = gzip.decompress(path.read_bytes()).decode("utf-8")
        except (OSError, UnicodeDecodeError, EOFError):
            continue
        if src.lstrip().startswith(".so "):  # a link to another page
            continue
        sections = roff_text(src)
        names = next((v for k, v in sections.items() if k and k.split()[0] in _NAME_HEADINGS), [])
        body = [p for k, v in sections.items() if k and k.split()[0] not in _NAME_HEADINGS
                for p in v]
        line = " ".join(names)
        desc = re.split(r"\s[-–—]+\s", line, maxsplit=1)
        if len(desc) != 2 or not desc[1].strip() or not body:
            continue
        yield str(path.relative_to(root)), desc[1].strip(), body


# NAME as the translations spell it (the first word of the first section).
_NAME_HEADINGS = {"NAME", "NOM", "NOMBRE", "NOME", "NAAM", "НАЗВАНИЕ", "ИМЯ", "ІМ'Я", "НАЗВА", "ΟΝΟΜΑ",
                  "名前", "名称", "名稱", "名字", "İSİM", "AD", "TÊN", "NAZWA", "BEZEICHNUNG", "NAMN"}


def _cut(paras: Sequence[str], start: int, chars: int) -> tuple[str, int]:
    """Paragraphs from `start` until about `chars` characters (cut at a word when one
    paragraph alone is longer); the text and the next paragraph's index."""
    out, n, i = [], 0, start
    while i < len(paras) and n < chars:
        p = paras[i]
        if n + len(p) > chars * 1.5 and out:
            break
        if len(p) > chars * 1.5:
            p = p[:chars].rsplit(" ", 1)[0] if " " in p[:chars] else p[:chars]
        out.append(p)
        n += len(p)
        i += 1
    return "\n".join(out), i


def _passage_chars(rng: random.Random) -> int:
    lo, hi = PASSAGE_CHARS
    return int(lo * (hi / lo) ** rng.random())


def man_groups(root: Path, lang: str, rng: random.Random) -> list[dict[str, Any]]:
    groups = []
    for file, desc, body in man_pages(root, lang):
        passages, i = [], 0
        for _ in range(rng.choice((1, 2, 2, 3))):
            text, i = _cut(body, i, _passage_chars(rng))
            if text.strip():
                passages.append(text)
        if passages:
            groups.append({"source": file, "queries": [desc], "passages": passages})
    return groups


# --------------------------------------------------------------------------- gettext


def catalogue(path: Path) -> list[tuple[str, str]]:
    """(msgid, msgstr) of a .mo file in msgid order, header and untranslated left out."""
    with path.open("rb") as fh:
        cat = gettext.GNUTranslations(fh)._catalog  # type: ignore[attr-defined]
    out = []
    for key, value in cat.items():
        if isinstance(key, tuple):  # plural forms: the first
            if key[1] != 0:
                continue
            key = key[0]
        if key and value and value.strip():
            out.append((key, value.strip()))
    return sorted(out)


def mo_groups(root: Path, lang: str, rng: random.Random) -> list[dict[str, Any]]:
    """Runs of consecutive messages of every catalogue of `lang` (English: the msgids)."""
    groups = []
    locale = "ko" if lang == "en" else lang  # English: the msgids of a complete catalogue
    for path in sorted((root / "usr/share/locale" / locale / "LC_MESSAGES").glob("*.mo")):
        msgs = [k if lang == "en" else v for k, v in catalogue(path)]
        msgs = [m for m in dict.fromkeys(msgs) if len(m) < 3000]
        i = 0
        while i + 2 <= len(msgs):
            want, run = _passage_chars(rng), []
            while i < len(msgs) and (sum(map(len, run)) < want or len(run) < 2):
                run.append(msgs[i])
                i += 1
            short = [m for m in run if 2 <= len(m) <= 120] or run
            query = short[rng.randrange(len(short))]
            rest = [m for m in run if m is not query]
            if rest:
                groups.append({"source": f"{path.relative_to(root)}", "queries": [query],
                               "passages": ["\n".join(rest)]})
    return groups


# --------------------------------------------------------------------------- corpus


def features(text: str, script: str) -> list[str]:
    out = []
    if URL.search(text):
        out.append("url")
    if CODE.search(text):
        out.append("code")
    if re.search(r"\d", text):
        out.append("digits")
    if script != "Latn" and LATIN.search(text):
        out.append("mixed")
    return out


def build(root: Path, seed: int, per_lang: int) -> list[dict[str, Any]]:
    records = []
    for lang in sorted(SCRIPTS):
        man = man_groups(root, lang, random.Random(f"{seed}:{lang}:man"))
        mo = mo_groups(root, lang, random.Random(f"{seed}:{lang}:mo"))
        if not man and not mo:
            continue
        rng = random.Random(f"{seed}:{lang}:pick")
        n_man = min(len(man), round(per_lang * MAN_SHARE) if mo else per_lang)
        picked = rng.sample(man, n_man) + rng.sample(mo, min(len(mo), per_lang - n_man))
        for g_i, g in enumerate(picked):
            gid = f"{lang}/{g_i:03d}"
            for kind, texts in (("query", g["queries"]), ("passage", g["passages"])):
                for text in texts:
                    records.append({"text": text, "lang": lang, "script": SCRIPTS[lang],
                                    "kind": kind, "group": gid, "source": g["source"],
                                    "features": features(text, SCRIPTS[lang])})
    seen, out = set(), []
    for r in records:  # a text once (catalogues repeat messages across languages)
        key = (r["text"], r["kind"])
        if key not in seen and "\x00" not in r["text"]:
            seen.add(key)
            out.append(r)
    return out


def summary(records: Sequence[dict[str, Any]]) -> str:
    kinds = Counter(r["kind"] for r in records)
    feats = Counter(f for r in records for f in r["features"])
    chars = sorted(len(r["text"]) for r in records)
    langs = Counter(r["lang"] for r in records)
    return (f"{len(records)} texts ({kinds['query']} queries, {kinds['passage']} passages), "
            f"{len(langs)} languages, {len({r['script'] for r in records})} scripts, "
            f"{len({r['group'] for r in records})} groups; characters {chars[0]} to {chars[-1]} "
            f"(median {chars[len(chars) // 2]}); with url {feats['url']}, code {feats['code']}, "
            f"digits {feats['digits']}, mixed scripts {feats['mixed']}")


def write_jsonl(path: Path, records: Sequence[dict[str, Any]]) -> None:
    from edge_m3.common.files import write_atomic

    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n"
                                    for r in records))


def main(argv: Sequence[str] | None = None) -> int:
    from edge_m3.lab.fidelity import default_corpus

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=default_corpus(), help="the corpus (JSON lines)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--groups-per-lang", type=int, default=GROUPS_PER_LANG)
    p.add_argument("--sample", type=Path, help="also write the stratified sample here "
                   "(edge_m3.lab.fidelity.sample: what `verify --sample N --seed S` takes)")
    p.add_argument("--sample-size", type=int, default=SAMPLE_SIZE, help="texts in --sample")
    p.add_argument("--work", type=Path, help="where the packages are unpacked (default: a temp dir)")
    a = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="edge-m3-fidelity-") as tmp:
        work = a.work or Path(tmp)
        versions = fetch_packages([*MAN_PACKAGES, *MO_PACKAGES], work)
        for name, version in sorted(versions.items()):
            print(f"  {name} {version}", file=sys.stderr)
        records = build(work / "root", a.seed, a.groups_per_lang)
    write_jsonl(a.out, records)
    print(f"{a.out}: {summary(records)}")
    if a.sample:
        from edge_m3.lab.fidelity import Corpus, sample

        small = list(sample(Corpus(tuple(records)), a.sample_size, a.seed).records)
        write_jsonl(a.sample, small)
        print(f"{a.sample}: {summary(small)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
