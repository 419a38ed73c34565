"""Which installed runtime can run which model file of a bundle: the one check that `embed`,
`bench`, `verify` and `check` make before any model is opened.

Why before: a runtime too old for a variant's kernels (the per-channel int8 on tflite-runtime
2.14: "Didn't find op for builtin opcode 'FULLY_CONNECTED' version '12'") fails deep inside its
interpreter with a traceback; asked here, it is one line naming the runtime and what to install.

Errors name the option by its name (`field`, default "runtime"); the CLI spells it as typed.
"""

from __future__ import annotations

from collections.abc import Sequence

from edge_m3.bundle import Bundle
from edge_m3.common.options import version_tuple
from edge_m3.errors import EdgeM3Error, OptionError
from edge_m3.runtime.registry import RUNTIMES, Runtime, of_format
from edge_m3.spec import ModelEntry, QuantRecipe


def _advice(fmt: str) -> str:
    """The package to install for `fmt` models: its preferred runtime's."""
    return of_format(fmt)[0].package


def cannot_run(runtime: Runtime, entry: ModelEntry, recipe: QuantRecipe) -> str | None:
    """Why `runtime`, as installed here, cannot run this model file (None: it can), naming
    what to install."""
    if runtime.format != entry.format:
        return f"runs {runtime.format} models, not {entry.file}"
    version = runtime.version()
    if version is None:
        return f"not installed (pip install {runtime.package})"
    if not runtime.refuse_older or runtime.oldest is None:
        return None
    oldest = runtime.oldest(recipe)
    if version_tuple(version) < version_tuple(oldest):
        return (f"{version} is older than TF Lite {oldest}, the oldest that runs "
                f"{entry.file} (pip install {_advice(entry.format)})")
    packages = {p for r in RUNTIMES.values() for p in r.packages}
    needs = [k for k in entry.oldest_runtime if k in packages]
    if needs and runtime.package not in needs:
        return (f"the build found that {entry.file} needs {', '.join(needs)} "
                f"(pip install {_advice(entry.format)})")
    return None


def require_runtime(bundle: Bundle, runtime: Runtime, field: str = "runtime",
                    entry: ModelEntry | None = None) -> ModelEntry:
    """The model entry `runtime` runs (default: the bundle's one of its format), or one line."""
    if entry is None:
        entry = bundle.manifest.model(runtime.format)
        if entry is None:
            raise OptionError(field, runtime.name, f"{bundle.path} has no {runtime.format} model")
    why = cannot_run(runtime, entry, bundle.manifest.recipe)
    if why:
        raise OptionError(field, runtime.name, why)
    return entry


def _failed_self_check(entry: ModelEntry, runtime: Runtime) -> bool:
    """The build saw this runtime fail on the file (recorded in the manifest)."""
    result = entry.self_check.get(runtime.name)
    return result is not None and result.is_failure


def select_runtimes(bundle: Bundle, wanted: Sequence[Runtime] | None, field: str = "runtime",
                    entries: Sequence[ModelEntry] | None = None,
                    skip: Sequence[Runtime] = ()) -> list[Runtime]:
    """The runtimes to run: those asked for (each refused in one line if it cannot run its model
    file), else every installed runtime that runs one of `entries` (default: every model file of
    the bundle), leaving out `skip` and what the build's self-check saw fail; none is one line
    naming the runtime and the package to install."""
    entries = list(entries if entries is not None else bundle.manifest.models)
    by_format = {e.format: e for e in entries}
    if wanted:
        for rt in wanted:
            if rt.format not in by_format and len(entries) == 1:
                raise OptionError(field, rt.name, f"runs {rt.format} models, not {entries[0].file}")
            require_runtime(bundle, rt, field, by_format.get(rt.format))
        return list(wanted)
    recipe = bundle.manifest.recipe
    fits = [(rt, by_format[rt.format]) for rt in RUNTIMES.values()
            if rt.format in by_format and rt not in skip]
    usable = [rt for rt, e in fits if cannot_run(rt, e, recipe) is None and not _failed_self_check(e, rt)]
    if not usable:
        why = "; ".join(f"{rt.name}: {cannot_run(rt, e, recipe) or 'the build self-check saw it fail'}"
                        for rt, e in fits)
        package = _advice("tflite" if "tflite" in by_format else "onnx")
        files = ", ".join(e.file for e in entries)
        raise EdgeM3Error(f"{bundle.path}: no runtime here runs {files} ({why}); "
                          f"install one: pip install {package}")
    return usable
