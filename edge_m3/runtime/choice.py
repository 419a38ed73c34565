"""Which installed runtime can run which model file of a bundle: the one check that `embed`,
`bench`, `verify` and `check` make before any model is opened.

Why before: a runtime too old for a variant's kernels (the per-channel int8 on tflite-runtime
2.14: "Didn't find op for builtin opcode 'FULLY_CONNECTED' version '12'") fails deep inside its
interpreter with a traceback; asked here, it is one line naming the runtime and what to install.
"""

from __future__ import annotations

from collections.abc import Sequence

from edge_m3.bundle import Bundle
from edge_m3.common.options import split_list, version_tuple
from edge_m3.contract import ModelEntry
from edge_m3.errors import EdgeM3Error
from edge_m3.runtime import runners
from edge_m3.runtime.runners import RUNTIME_PACKAGES, RUNTIMES, format_of

# TensorFlow's interpreter is the builder's, not a device runtime: `check` takes it only on request.
NOT_ON_DEVICE = ("tf",)


def cannot_run(runtime: str, entry: ModelEntry, oldest_tflite: str) -> str | None:
    """Why `runtime`, as installed here, cannot run this model file (None: it can), naming
    what to install."""
    if format_of(runtime) != entry.format:
        return f"runs {format_of(runtime)} models, not {entry.file}"
    version = runners.runtime_version(runtime)  # looked up here: one place to stub it
    if version is None:
        return f"not installed (pip install {RUNTIME_PACKAGES[runtime]})"
    if runtime == "tflite-runtime" and version_tuple(version) < version_tuple(oldest_tflite):
        return (f"{version} is older than TF Lite {oldest_tflite}, the oldest that runs "
                f"{entry.file} (pip install {RUNTIME_PACKAGES['litert']})")
    needs = [k for k in entry.oldest_runtime if k in RUNTIME_PACKAGES.values()]
    if runtime == "tflite-runtime" and needs and "tflite-runtime" not in needs:
        return (f"the build found that {entry.file} needs {', '.join(needs)} "
                f"(pip install {RUNTIME_PACKAGES['litert']})")
    return None


def require_runtime(bundle: Bundle, runtime: str, option: str = "--runtime",
                    entry: ModelEntry | None = None) -> ModelEntry:
    """The model entry `runtime` runs (default: the bundle's one of its format), or one line."""
    if runtime not in RUNTIMES:
        raise EdgeM3Error(f"{option} {runtime}: unknown (choose from {', '.join(RUNTIMES)})")
    if entry is None:
        entry = bundle.manifest.model(format_of(runtime))
        if entry is None:
            raise EdgeM3Error(f"{option} {runtime}: {bundle.path} has no {format_of(runtime)} model")
    why = cannot_run(runtime, entry, bundle.manifest.recipe.oldest_tflite)
    if why:
        raise EdgeM3Error(f"{option} {runtime}: {why}")
    return entry


def _failed_self_check(entry: ModelEntry, runtime: str) -> bool:
    """The build saw this runtime fail on the file (recorded in the manifest)."""
    return str(entry.self_check.get(runtime, "")).startswith("FAILED")


def select_runtimes(bundle: Bundle, wanted: str | None, option: str = "--runtime",
                    entries: Sequence[ModelEntry] | None = None,
                    skip: Sequence[str] = ()) -> list[str]:
    """The runtimes to run: those asked for (each refused in one line if it cannot run its model
    file), else every installed runtime that runs one of `entries` (default: every model file of
    the bundle), leaving out `skip` and what the build's self-check saw fail; none is one line
    naming the runtime and the package to install."""
    entries = list(entries if entries is not None else bundle.manifest.models)
    by_format = {e.format: e for e in entries}
    if wanted:
        chosen = split_list(wanted, option)
        for rt in chosen:
            if rt in RUNTIMES and format_of(rt) not in by_format and len(entries) == 1:
                raise EdgeM3Error(f"{option} {rt}: runs {format_of(rt)} models, not {entries[0].file}")
            require_runtime(bundle, rt, option, by_format.get(format_of(rt)))
        return chosen
    oldest = bundle.manifest.recipe.oldest_tflite
    fits = [(rt, by_format[format_of(rt)]) for rt in RUNTIMES
            if format_of(rt) in by_format and rt not in skip]
    usable = [rt for rt, e in fits if cannot_run(rt, e, oldest) is None and not _failed_self_check(e, rt)]
    if not usable:
        why = "; ".join(f"{rt}: {cannot_run(rt, e, oldest) or 'the build self-check saw it fail'}"
                        for rt, e in fits)
        package = RUNTIME_PACKAGES["litert" if "tflite" in by_format else "onnxruntime"]
        files = ", ".join(e.file for e in entries)
        raise EdgeM3Error(f"{bundle.path}: no runtime here runs {files} ({why}); "
                          f"install one: pip install {package}")
    return usable
