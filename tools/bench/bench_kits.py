"""The kits' own numbers beside Python's, in one run: open-to-first-result, p50 per length, peak RSS.

    python -m tools.bench.bench_kits BUNDLE [--rounds 3] [--repeats 20] [--threads 1] [--lib LIBLITERT]

Three contenders on the same bundle and the same texts (one landing on the shortest signature,
one on the longest), each a child process that prints one JSON line (the `--bench` format of
tools/kit/kit_embed.sh): Python's LiteRT (DevicePipeline, as `edge-m3 embed`), the Swift kit
(kit_embed.sh swift --bench: LiteRtCRunner on LiteRT's C API) and the Kotlin kit (kit_embed.sh
kotlin --bench, when its KitEmbed class exists). All three run the same libLiteRt on the CPU
(XNNPACK, in-memory weight cache, `--threads` threads). Rounds interleave the contenders (the
order rotates each round), so a busy shared machine slows them alike; a cell is the median over
rounds. Peak RSS: each child's own `ru_maxrss` from `os.wait4`, the same for all three (the
kits are built beforehand, so no compiler is counted). Goal: a kit's p50 at the longest length
within 1.15x of Python's (the runtime is the same; the difference is our code).
`--results docs/results/kits.json` also writes the table for docs/benchmarks.md
(tools/bench/results.py).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tools.bench.results import Load, add_option, write_result

ROOT = Path(__file__).resolve().parents[2]
GOAL = 1.15
WARMUP = 3


def python_child(bundle: Path, texts: Path, repeats: int, threads: int) -> None:
    """The Python side of the `--bench` format (run in a child process by main)."""
    import ai_edge_litert.compiled_model  # noqa: F401  (the import is not the model's load time)

    from edge_m3.bundle import load_bundle
    from edge_m3.runtime import RUNTIMES
    from edge_m3.runtime.pipeline import DevicePipeline

    lines = texts.read_text(encoding="utf-8").split("\n")
    lines = lines[:-1] if lines and lines[-1] == "" else lines
    t0 = time.perf_counter()
    pipe = DevicePipeline(load_bundle(bundle), RUNTIMES["litert"], threads)
    pipe.embed(lines[0])
    open_ms = (time.perf_counter() - t0) * 1000
    times: dict[int, list[float]] = {}
    for text in lines:
        for _ in range(WARMUP):
            pipe.embed(text)
        for _ in range(repeats):
            t = time.perf_counter()
            out = pipe.embed(text)
            times.setdefault(out["seq_len"], []).append((time.perf_counter() - t) * 1000)
    print(json.dumps({"open_to_first_ms": open_ms,
                      "p50_ms": {str(k): statistics.median(v) for k, v in sorted(times.items())},
                      "runs": {str(k): len(v) for k, v in sorted(times.items())}, "threads": threads}))


def pick_texts(bundle: Path, out: Path) -> dict[int, str]:
    """One text per end of the bundle's lengths: of the built-in golden texts, the longest one
    landing on the shortest signature; and their words joined until one more would pass the longest."""
    from edge_m3.bundle import load_bundle
    from edge_m3.spec import choose_length

    b = load_bundle(bundle)
    entry = b.model_entry("tflite")
    lengths = sorted(s.seq_len for s in entry.signatures)
    tok = b.tokenizer()
    golden = (ROOT / "edge_m3/data/golden_texts.txt").read_text(encoding="utf-8").splitlines()
    short = max((t for t in golden if choose_length(len(tok.encode(t)), lengths) == lengths[0]),
                key=lambda t: len(tok.encode(t)))
    long = ""
    for word in " ".join(golden * 8).split(" "):  # stop just before passing the longest length
        longer = f"{long} {word}".strip()
        if len(tok.encode(longer)) > lengths[-1]:
            break
        long = longer
    texts = {lengths[0]: short, choose_length(len(tok.encode(long)), lengths): long}
    out.write_text("".join(t + "\n" for t in texts.values()), encoding="utf-8")
    return texts


def run_child(cmd: list[str], env: dict[str, str]) -> tuple[dict[str, Any], float]:
    """One contender's run: its JSON line and its own peak RSS in MiB (wait4's ru_maxrss)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env, cwd=ROOT)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        text, errors = out.read().decode(), err.read().decode(errors="replace")
    if proc.returncode != 0:
        head = " ".join(cmd[:3])
        raise SystemExit(f"bench_kits: {head} ... failed (exit {proc.returncode}):\n{errors[-2000:]}")
    rss_kib = usage.ru_maxrss if sys.platform != "darwin" else usage.ru_maxrss / 1024
    return json.loads(text.strip().splitlines()[-1]), rss_kib / 1024


def prepare_kits(env: dict[str, str]) -> list[str]:
    """Builds the Swift tool and the Kotlin jar before anything is timed; the ports present."""
    ports = []
    swift = subprocess.run([str(ROOT / "tools/kit/kit_swift.sh"), "edge-m3-embed"], capture_output=True,
                           text=True)
    if swift.returncode == 0:
        env["EDGE_M3_SWIFT_EMBED"] = swift.stdout.strip().splitlines()[-1]
        ports.append("swift")
    else:
        print(f"note: no Swift kit row (swift build failed):\n{swift.stderr[-1500:]}", file=sys.stderr)
    if not (ROOT / "android_assets/jvm/KitEmbed.kt").is_file():
        print("note: no Kotlin kit row: android_assets/jvm/KitEmbed.kt (dev.edgem3.KitEmbedKt) does not "
              "exist yet", file=sys.stderr)
        return ports
    jar = subprocess.run([str(ROOT / "tools/kit/kit_jar.sh")], capture_output=True, text=True)
    if jar.returncode == 0:
        env["EDGE_M3_KIT_JAR"] = jar.stdout.strip().splitlines()[-1]
        ports.append("kotlin")
    else:
        print(f"note: no Kotlin kit row (kit_jar.sh failed):\n{jar.stderr[-1500:]}", file=sys.stderr)
    return ports


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("bundle", type=Path, nargs="?")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    p.add_argument("--repeats", type=int, default=20, help="timed embeds per text per round (default 20)")
    p.add_argument("--threads", type=int, default=1, help="XNNPACK threads, all contenders (default 1)")
    p.add_argument("--lib", type=Path, help="libLiteRt (default: the ai-edge-litert wheel's)")
    p.add_argument("--json", type=Path, help="also write the results here")
    add_option(p, "kits.json")
    p.add_argument("--python-child", nargs=2, metavar=("BUNDLE", "TEXTS"), help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.python_child:
        python_child(Path(a.python_child[0]), Path(a.python_child[1]), a.repeats, a.threads)
        return 0
    if a.bundle is None or not (a.bundle / "manifest.json").is_file():
        p.error(f"{a.bundle}: not a bundle (no manifest.json)")
    if min(a.rounds, a.repeats, a.threads) < 1:
        p.error("--rounds, --repeats and --threads must be >= 1")
    import ai_edge_litert

    load = Load()
    lib = a.lib or Path(ai_edge_litert.__file__).with_name("libLiteRt.dylib" if sys.platform == "darwin"
                                                           else "libLiteRt.so")
    env = dict(os.environ) | {"PYTHONPATH": str(ROOT)}
    ports = prepare_kits(env)
    work = Path(tempfile.mkdtemp(prefix="bench_kits_"))
    texts = pick_texts(a.bundle, work / "texts.txt")
    common = ["--repeats", str(a.repeats), "--threads", str(a.threads)]
    cmds = {"python (LiteRT)": [sys.executable, "-m", "tools.bench.bench_kits", "--python-child", str(a.bundle),
                                str(work / "texts.txt"), *common]}
    for port in ports:
        cmds[f"{port} kit"] = [str(ROOT / "tools/kit/kit_embed.sh"), port, "--bench", *common,
                               "--lib", str(lib), str(a.bundle), str(work / "texts.txt")]
    results: dict[str, list[tuple[dict[str, Any], float]]] = {name: [] for name in cmds}
    names = list(cmds)
    for r in range(a.rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:  # the order rotates
            print(f"round {r + 1}/{a.rounds}: {name}", file=sys.stderr)
            results[name].append(run_child(cmds[name], env))
    lengths = sorted(texts)
    rows = []
    for name, runs in results.items():
        row: dict[str, Any] = {"contender": name,
                               "open_to_first_ms": statistics.median(r["open_to_first_ms"] for r, _ in runs),
                               "peak_rss_mib": max(rss for _, rss in runs)}
        for n in lengths:
            row[f"p50_{n}_ms"] = statistics.median(r["p50_ms"][str(n)] for r, _ in runs)
        rows.append(row)
    base = rows[0]
    top = lengths[-1]
    base_runs = results[names[0]]
    for row, runs in zip(rows, results.values(), strict=True):
        for n in lengths:
            row[f"ratio_{n}"] = row[f"p50_{n}_ms"] / base[f"p50_{n}_ms"]
        # Round by round (a round runs every contender back to back): how far the noise moves it.
        per_round = [r["p50_ms"][str(top)] / b["p50_ms"][str(top)] for (r, _), (b, _) in zip(runs, base_runs,
                                                                                                strict=True)]
        row[f"ratio_{top}_rounds"] = per_round
    header = ["contender", "open to first (ms)", *[f"p50 {n} tok (ms)" for n in lengths],
              f"x python at {top} (rounds: min-max)", "peak RSS (MiB)"]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    table = []
    for row in rows:
        p50s = [f"{row[f'p50_{n}_ms']:.2f}" for n in lengths]
        table.append([row["contender"], f"{row['open_to_first_ms']:.0f}", *p50s,
                      f"{row[f'ratio_{top}']:.3f} ({min(row[f'ratio_{top}_rounds']):.2f}-"
                      f"{max(row[f'ratio_{top}_rounds']):.2f})", f"{row['peak_rss_mib']:.0f}"])
        print("| " + " | ".join(table[-1]) + " |")
    how = (f"{a.rounds} interleaved rounds x {a.repeats} timed embeds per text after {WARMUP} warm-ups, "
           f"{a.threads} thread(s); texts of {', '.join(str(n) for n in lengths)}-token signatures; "
           f"goal: kits within {GOAL}x of python at {lengths[-1]} tokens")
    print(f"\n{how}")
    worst = max((row[f"ratio_{lengths[-1]}"] for row in rows[1:]), default=float("nan"))
    print(f"{'met' if worst <= GOAL else 'NOT met'}: worst kit ratio {worst:.3f}")
    if a.results:
        write_result(a.results, title=f"The kits beside Python, {a.bundle.name}, {a.threads} thread(s)",
                     module="tools.bench.bench_kits", argv=argv, columns=header, rows=table, load=load,
                     notes=[how + "; every contender runs the same libLiteRt (XNNPACK, in-memory "
                            "weight cache).",
                            f"{'met' if worst <= GOAL else 'NOT met'}: worst kit ratio {worst:.3f}."])
    if a.json:
        a.json.write_text(json.dumps({"rows": rows, "texts": texts, "rounds": a.rounds, "repeats": a.repeats,
                                      "threads": a.threads, "lib": str(lib)}, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
