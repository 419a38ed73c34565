"""`edge-m3 build`: checkpoint -> Keras -> quantized TFLite (and ONNX) bundle, atomically.

Options are validated before any heavy work (builder.options). The Keras model is traced once
into a SavedModel whose endpoints are the fixed-length signatures; each variant is converted in
a child process (edge_m3.export.worker: its memory goes back to the OS), self-checked under
every installed TFLite runtime (builder.selfcheck), and the bundle is written to a temp dir
that replaces the old bundle only once it is complete, its manifest and golden vectors last.
"""

from __future__ import annotations

import contextlib
import dataclasses
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from edge_m3 import __version__
from edge_m3.builder.golden import make_golden
from edge_m3.builder.options import (
    BuildOptions,
    check_variants,
    for_checkpoint,
    param_count_from_config,
    validate_against_config,
)
from edge_m3.builder.selfcheck import oldest_runtime, refuse_unloadable, self_check
from edge_m3.bundle import copy_to_kits, load_bundle
from edge_m3.common.files import atomic_dir, check_writable, file_entries, write_json
from edge_m3.errors import OptionError
from edge_m3.export import worker
from edge_m3.runtime.registry import device_runtimes
from edge_m3.spec import (
    GOLDEN,
    MANIFEST,
    VOCAB_MAP,
    XLMR_SENTENCEPIECE,
    CheckResult,
    Manifest,
    ModelEntry,
    QuantRecipe,
    Signature,
    model_file,
    signature_name,
)
from edge_m3.tokenizer import bundle_tokenizer


class Reporter:
    """Phase-by-phase progress on stderr (rich), silent when asked."""

    def __init__(self, quiet: bool = False) -> None:
        from edge_m3.common.progress import console

        self.quiet = quiet
        self.console = console(silent=quiet)
        self._held: list[str] | None = None

    def phase(self, title: str) -> Any:
        """A spinner and the time elapsed while the phase runs (a terminal only; not with -q)."""
        from edge_m3.common.progress import working

        return working(title, silent=self.quiet)

    def done(self, title: str, seconds: float, extra: str = "") -> None:
        line = f"[green]✓[/green] {title} ({seconds:.1f} s){' ' + extra if extra else ''}"
        if self._held is not None:
            self._held.append(line)
        else:
            self.console.print(line)

    @contextlib.contextmanager
    def checks(self) -> Iterator[None]:
        """Phases that still check the user's input: their lines are shown only once all pass,
        so bad input stays the CLI's one error line (the spinner is transient)."""
        self._held = []
        try:
            yield
        finally:
            held, self._held = self._held, None
        for line in held:
            self.console.print(line)


def _timed(rep: Reporter, title: str, fn: Callable[[], Any], extra: Callable[[Any], str] | None = None) -> Any:
    t0 = time.perf_counter()
    with rep.phase(title):
        value = fn()
    rep.done(title, time.perf_counter() - t0, extra(value) if extra else "")
    return value


def build(opts: BuildOptions, quiet: bool = False) -> list[Path]:
    """Build one bundle per requested quant; return their directories."""
    rep = Reporter(quiet)
    check_variants(opts.quants, opts.formats)
    for r in opts.quants:
        check_writable(opts.out_dir(r), "out")
    for kit in (opts.android_dir, opts.ios_dir):
        if kit is not None:
            check_writable(kit, "out")
    if opts.vocab_corpus:  # read once now too: a bad corpus is one line before any download
        from edge_m3.tokenizer.vocab import read_corpus

        for path in opts.vocab_corpus:
            read_corpus(path)
    calibration_texts = _calibration_texts(opts)  # likewise

    from edge_m3.checkpoint import load_checkpoint, resolve_checkpoint

    with rep.checks():  # the checkpoint, the corpus and the options that need config.json
        ckpt_dir, source = _timed(rep, f"resolve checkpoint {opts.checkpoint}",
                                  lambda: resolve_checkpoint(opts.checkpoint, opts.revision))
        ckpt = _timed(rep, "load + validate checkpoint", lambda: load_checkpoint(ckpt_dir, source),
                      lambda c: f"{c.family.name}, {c.outputs.name} outputs")
        opts = for_checkpoint(opts, ckpt)
        plan = None
        if opts.vocab_corpus:
            from edge_m3.tokenizer import checkpoint_tokenizer
            from edge_m3.tokenizer.vocab import plan_trim

            if ckpt.family.tokenizer_kind != XLMR_SENTENCEPIECE:
                raise OptionError("vocab_corpus", opts.vocab_corpus[0], "vocabulary trimming is for "
                                  f"SentencePiece bundles; a {ckpt.family.name} vocabulary is kept whole")
            plan = _timed(rep, "plan vocabulary trim",
                          lambda: plan_trim(checkpoint_tokenizer(ckpt), opts.vocab_corpus,
                                            opts.vocab_min_count),
                          lambda p: f"{len(p.kept_ids):,} of {ckpt.config.vocab_size:,} ids kept, "
                                    f"corpus coverage {p.coverage:.2%}")
        rows = len(plan.kept_ids) if plan else ckpt.config.vocab_size
        params = param_count_from_config(dataclasses.replace(ckpt.config, vocab_size=rows),
                                         ckpt.colbert_dim)
        validate_against_config(opts, ckpt.config, params)

    with tempfile.TemporaryDirectory(prefix="edge-m3-work-") as work_str:
        work = Path(work_str)
        saved = work / "saved_model"
        # ai-edge-quantizer's weight recipes start from a trace with EMBEDDING_LOOKUP tables.
        lookup = work / "saved_model_lookup" if "tflite" in opts.formats and any(
            r.uses_aeq and not r.tflite.calibrated for r in opts.quants) else None

        traced = _timed(rep, "build Keras model + trace signatures (child process)",
                        lambda: worker.trace(ckpt_dir, saved, opts.seq_lens, opts.heads,
                                             "onnx" in opts.formats,
                                             plan.kept_ids if plan is not None else None,
                                             lookup),
                        lambda t: f"{t['params']:,} parameters")
        params = traced["params"]
        if plan is not None:  # the trace may keep one more row (see keep_extreme_row)
            plan.kept_ids = traced["kept_ids"]
        calibration = None if calibration_texts is None else _timed(
            rep, f"tokenize {len(calibration_texts)} calibration texts",
            lambda: calibration_ids(ckpt, plan, calibration_texts, opts.seq_lens))
        outs = [_build_variant(opts, r, ckpt, plan, saved, params, rep, lookup, calibration)
                for r in opts.quants]
    if opts.android_dir is not None and opts.ios_dir is not None:
        placed = _timed(rep, "copy bundle into platform kits",
                        lambda: copy_to_kits(outs[0], opts.android_dir, opts.ios_dir))
        rep.console.print("kits: " + ", ".join(str(p) for p in placed))
    return outs


def _calibration_texts(opts: BuildOptions) -> list[str] | None:
    """The texts the calibrated files calibrate on (`calibration`, else the committed fidelity
    sample), or None when no such file is built. A bad file is one line."""
    from edge_m3.harness.fidelity import bundled_sample, read_corpus

    needed = any((f := r.recipe_for(fmt)) is not None and f.calibrated
                 for r in opts.quants for fmt in opts.formats)
    if opts.calibration is not None:  # read even when no variant needs it: a typo is one line
        corpus = read_corpus(opts.calibration, "calibration")
    elif needed:
        corpus = bundled_sample()
    return [r["text"] for r in corpus.records] if needed else None


# A signature that fewer calibration texts fit (by the device's choice of length) is topped up
# to this many with the longest other texts, truncated or padded to it: every signature's
# activations need ranges, and a handful of texts gives noisy ones.
CALIBRATION_MIN_PER_SIGNATURE = 16


def calibration_ids(ckpt: Any, plan: Any, texts: Sequence[str],
                    seq_lens: Sequence[int]) -> worker.Calibration:
    """Each text's ids at the signature the device would run it at (choose_length; the longest
    truncates), each signature topped up to CALIBRATION_MIN_PER_SIGNATURE texts; as rows of the
    bundled (possibly trimmed) table."""
    from edge_m3.spec import choose_length
    from edge_m3.tokenizer import checkpoint_tokenizer
    from edge_m3.tokenizer.vocab import row_map

    tok = checkpoint_tokenizer(ckpt)
    special = tok.spec.special_ids
    rows = None if plan is None else row_map(plan.kept_ids, special, tok.spec.vocab_size)

    def model_ids(ids: Sequence[int]) -> list[int]:
        return [int(i) for i in ids] if rows is None else [int(rows[i]) for i in ids]

    full = [tok.encode(t) for t in texts]
    longest_first = sorted(range(len(full)), key=lambda i: -len(full[i]))
    chosen: dict[int, list[int]] = {n: [] for n in seq_lens}
    for i, ids in enumerate(full):
        chosen[choose_length(len(ids), seq_lens)].append(i)
    out = {}
    for n, picked in chosen.items():
        extra = [i for i in longest_first if i not in set(picked)]
        picked = picked + extra[:max(0, CALIBRATION_MIN_PER_SIGNATURE - len(picked))]
        out[signature_name(n)] = [model_ids(tok.encode(texts[i], n)) for i in picked]
    return worker.Calibration(out, model_ids([special["pad"]])[0], len(texts))


def _build_variant(opts: BuildOptions, recipe: QuantRecipe, ckpt: Any, plan: Any, saved: Path,
                   params: int, rep: Reporter, lookup: Path | None = None,
                   calibration: worker.Calibration | None = None) -> Path:
    out_dir, quant = opts.out_dir(recipe), recipe.name
    if recipe.note:
        rep.console.print(f"[yellow]! {recipe.note}", soft_wrap=True)  # one line, however wide
    with atomic_dir(out_dir) as tmp:
        models: list[ModelEntry] = []
        if "tflite" in opts.formats:
            name = model_file(quant, "tflite")
            info = _timed(rep, f"convert + quantize TFLite {quant}",
                          lambda: worker.convert_tflite(saved, tmp / name, recipe, opts.seq_lens,
                                                        params, lookup,
                                                        calibration if recipe.tflite.calibrated else None),
                          lambda i: f"{i['size'] / 1e6:.1f} MB" + _weights(i) + _float_ops(i))
            checks: dict[str, CheckResult] = {}
            if opts.self_check:
                checks = _timed(rep, f"self-check {quant} under tflite-runtime and LiteRT",
                                lambda: self_check(tmp / name, info["signatures"],
                                                   device_runtimes("tflite")))
                refuse_unloadable(name, recipe, checks)  # nothing ships that cannot run
                for rt, result in checks.items():
                    if result.is_failure:
                        rep.console.print(f"[yellow]! {name} does not run on {rt} (needs TF Lite "
                                          f">= {recipe.oldest_tflite}): {result}")
            models.append(ModelEntry(
                format="tflite", file=name, quant=quant,
                signatures=[Signature.from_json(s, "signatures") for s in info["signatures"]],
                ops=info["ops"], oldest_runtime=oldest_runtime(info, checks, recipe),
                self_check=checks))
        if "onnx" in opts.formats:
            entry = _timed(rep, f"export ONNX {quant}",
                           lambda: worker.export_onnx(
                               saved, tmp, recipe, opts.seq_lens, opts.heads, params, ort=opts.ort,
                               calibration=calibration if recipe.onnx and recipe.onnx.calibrated else None))
            models.append(ModelEntry.from_json(entry, "models"))
        spec = bundle_tokenizer(ckpt, tmp)
        if plan is not None:
            write_json(tmp / VOCAB_MAP, plan.to_json())
            spec = dataclasses.replace(spec, vocab_map=plan.manifest_entry())
        manifest = Manifest(
            edge_m3_version=__version__,
            created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            source=ckpt.source, quant=quant, hidden_size=ckpt.config.hidden_size,
            max_length=max(opts.seq_lens), heads=list(opts.heads), tokenizer=spec, models=models)
        manifest.files = file_entries(tmp, manifest.shipped_files())
        write_json(tmp / MANIFEST, manifest.to_json())
        golden = _timed(rep, f"golden vectors {quant}",
                        lambda: make_golden(load_bundle(tmp, verify=False), quant))
        write_json(tmp / GOLDEN, golden)
        manifest.files.update(file_entries(tmp, [GOLDEN]))
        write_json(tmp / MANIFEST, manifest.to_json())
    _summary(rep, out_dir, manifest)
    return out_dir


def _weights(info: dict[str, Any]) -> str:
    """`, weights FULLY_CONNECTED INT4 x72 INT8 x2, ...` for ai-edge-quantizer files."""
    kinds = info.get("weights")
    if not kinds:
        return ""
    return ", weights " + "; ".join(
        f"{op} " + " ".join(f"{k} x{n}" for k, n in sorted(c.items())) for op, c in sorted(kinds.items()))


def _float_ops(info: dict[str, Any]) -> str:
    """`, float ops NEG x50 ...` for statically quantized files: what still computes in float."""
    ops = info.get("float_ops")
    if ops is None:
        return ""
    return ", float ops " + (" ".join(f"{k} x{n}" for k, n in ops.items()) or "none")


def _summary(rep: Reporter, out_dir: Path, manifest: Manifest) -> None:
    from rich.table import Table

    table = Table(title=f"bundle {out_dir}")
    for col in ("variant", "file", "size", "signatures", "oldest runtime"):
        table.add_column(col)
    for m in manifest.models:
        size = manifest.model_bytes(m)
        old = ", ".join(f"{k} {v}" for k, v in m.oldest_runtime.items()
                        if k != "converter_min_runtime_version")
        table.add_row(f"{m.format} {m.quant}", m.file, f"{size / 1e6:.1f} MB",
                      ", ".join(s.name for s in m.signatures), old)
    rep.console.print(table)
    for m in manifest.models:
        if m.format == "tflite":
            rep.console.print(_ram_note(m, manifest.recipe, manifest.model_bytes(m)))


def _ram_note(m: ModelEntry, recipe: QuantRecipe, size: int) -> str:
    """What the file costs in RAM on a device, per API (docs/benchmarks.md, "Memory on the
    device"): the gate's bound holds only where XNNPACK's weight cache is set."""
    limit = recipe.thresholds["model_rss_ratio_max"]
    note = (f"RAM: {m.file} stays within {limit:g}x its size ({limit * size / 1e6:,.0f} MB) on "
            "LiteRT's CompiledModel with an XNNPACK weight cache; LiteRT's Interpreter API packs "
            f"the weights again for each of its {len(m.signatures)} signatures.")
    return note + (f" {recipe.ram_note}" if recipe.ram_note else "")
