"""The Kotlin compiler every check of the Android kit uses: K2 at the language version apps build with.

Android Gradle plugin 9.4 compiles an app's Kotlin with Kotlin 2.2; Debian's kotlinc is 1.3.31
(2019), and the two disagree on real code (`Iterable.max()` is nullable under 1.3 and throws on an
empty collection under 2.x). The K2 compiler comes from PyPI, inside the `kotlin-jupyter-kernel`
wheel of the dev lock (its `-all` jar holds `org.jetbrains.kotlin.cli.jvm.K2JVMCompiler`, beside a
2.3 stdlib); nothing is downloaded at run time. Used by tools/kit/kit_jar.sh:

    python -m tools.kit.kotlin2 compile --classpath A:B --out kit.jar SOURCES...

compiles at LANGUAGE_VERSION with warnings as errors and writes one runnable jar (the stdlib
merged in, as kotlinc's -include-runtime does). `python -m tools.kit.kotlin2 version` prints the
compiler's version; a missing compiler is one line on stderr and exit 2.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

# The Kotlin language and API version the kit is held to: AGP 9.4's built-in Kotlin (2.2).
LANGUAGE_VERSION = "2.2"
# The JVM bytecode target of the CI jar: Java 8 class files. The target changes no rule of the
# language (LANGUAGE_VERSION does), and Debian's JaCoCo 0.8.6 (tools/kit/never_run.py's line
# coverage) silently skips class files newer than Java 16: at 17 (the app's, build.gradle.kts)
# every kit line would read as never run.
JVM_TARGET = "1.8"
COMPILER_MAIN = "org.jetbrains.kotlin.cli.jvm.K2JVMCompiler"
WHEEL = "kotlin-jupyter-kernel"


class CompilerMissing(Exception):
    """The dev lock's Kotlin compiler is not installed in this Python."""


def jars() -> tuple[Path, Path]:
    """(the compiler's -all jar, the stdlib jar) from the installed wheel's jars/ folder."""
    spec = importlib.util.find_spec("run_kotlin_kernel")
    folder = Path(next(iter(spec.submodule_search_locations or []), "")) / "jars" if spec else None
    compiler = sorted(folder.glob("kotlin-jupyter-kernel-*-all.jar")) if folder and folder.is_dir() else []
    stdlib = sorted(folder.glob("kotlin-stdlib-[0-9]*.jar")) if folder and folder.is_dir() else []
    if len(compiler) != 1 or len(stdlib) != 1:
        raise CompilerMissing(f"the Kotlin 2 compiler is not installed in {sys.executable}: "
                              f"pip install {WHEEL} (it is in the dev lock: make test installs it)")
    return compiler[0], stdlib[0]


def version() -> str:
    """The compiler's own version line (e.g. `info: kotlinc-jvm 2.4.0-dev-6891 (JRE 17...)`)."""
    compiler, _ = jars()
    proc = subprocess.run(["java", "-cp", str(compiler), COMPILER_MAIN, "-version"], capture_output=True,
                          text=True, timeout=300)
    return next((line for line in proc.stderr.splitlines() if "kotlinc" in line), proc.stderr.strip())


def compile_jar(sources: list[str], classpath: str, out: Path) -> int:
    """Compiles `sources` with warnings as errors into a runnable jar at `out` (written whole, then
    renamed); returns the compiler's exit code, its messages on stderr."""
    compiler, stdlib = jars()
    with tempfile.TemporaryDirectory(prefix="kotlin2-", dir=out.parent) as tmp:
        classes = Path(tmp) / "classes"
        flags = ["-no-stdlib", "-no-reflect", "-Werror", "-language-version", LANGUAGE_VERSION,
                 "-api-version", LANGUAGE_VERSION, "-jvm-target", JVM_TARGET]
        path = os.pathsep.join([str(stdlib), *filter(None, classpath.split(os.pathsep))])
        cmd = ["java", "-Xss8m", "-cp", str(compiler), COMPILER_MAIN, *flags, "-cp", path, *sources,
               "-d", str(classes)]
        proc = subprocess.run(cmd, stderr=subprocess.PIPE, text=True)
        sys.stderr.write("".join(line for line in proc.stderr.splitlines(keepends=True)
                                 if "OpenJDK 64-Bit Server VM warning" not in line))
        if proc.returncode != 0:
            return proc.returncode
        partial = Path(tmp) / "kit.jar"
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as jar:
            jar.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\r\n\r\n")
            for path in sorted(classes.rglob("*")):
                if path.is_file():
                    jar.write(path, path.relative_to(classes).as_posix())
            with zipfile.ZipFile(stdlib) as lib:  # the runtime, as -include-runtime merges it
                for info in lib.infolist():
                    if not info.filename.startswith("META-INF/") and not info.is_dir():
                        jar.writestr(info, lib.read(info))
        os.replace(partial, out)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.kit.kotlin2", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    build = sub.add_parser("compile", help="compile Kotlin sources into one runnable jar")
    build.add_argument("--classpath", default="", help="jars the sources compile against (':'-separated)")
    build.add_argument("--out", type=Path, required=True, help="the jar to write")
    build.add_argument("sources", nargs="+")
    sub.add_parser("version", help="print the compiler's version")
    args = parser.parse_args(argv)
    try:
        if args.command == "version":
            print(version())
            return 0
        return compile_jar(args.sources, args.classpath, args.out.resolve())
    except CompilerMissing as exc:
        print(exc, file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
