#!/usr/bin/env bash
# Compiles the Android kit's Kotlin into one JVM jar and prints its path.
# The jar holds the app sources (Android and TFLite calls against compile-only stubs), the
# instrumented test and its golden support, and the JVM tools in android_assets/jvm/ (GoldenCheck,
# KitTokenize, KitEmbed, and LiteRtCRunner: LiteRT's C API through JNA). JNA is compiled against,
# not bundled: run with `java -cp "$jar:$EDGE_M3_JNA_JAR"` ($EDGE_M3_JNA_JAR defaults to Debian's
# libjna-java, /usr/share/java/jna.jar). The writable index's JDBC adapter (jvm/JdbcIndexDb.kt)
# needs the xerial SQLite driver at run time only: add $EDGE_M3_SQLITE_JDBC_JAR (default: Debian's
# libxerial-sqlite-jdbc-java, /usr/share/java/sqlite-jdbc.jar) to the classpath the same way.
# The compiler is Kotlin 2 at the language version apps build with, warnings as errors
# (tools/kit/kotlin2.py: from the dev lock's kotlin-jupyter-kernel wheel, in the Python of
# $EDGE_M3_PYTHON, else .venv/bin/python, else python3). It takes ~40 s, so the jar is cached by the
# sources' names and contents, the compiler's and the JNA jar's in $EDGE_M3_KIT_CACHE (default:
# $TMPDIR or /tmp, edge_m3_kit/).
# Used by tools/kit/kotlin_check.sh, tools/kit/kit_tokenize.sh and tests/conftest.py.
set -euo pipefail
cd "$(dirname "$0")/../.."
py=${EDGE_M3_PYTHON:-}
[ -n "$py" ] || { [ -x .venv/bin/python ] && py=.venv/bin/python; } || py=python3
# The generated files (tools/codegen) sit in dev/edgem3/generated/, in the same package dev.edgem3.
sources=(android_assets/src/main/java/dev/edgem3/*.kt android_assets/src/main/java/dev/edgem3/generated/*.kt
         android_assets/src/androidTest/java/dev/edgem3/*.kt
         android_assets/jvm/*.kt android_assets/jvm/stubs/*.kt)
jna=${EDGE_M3_JNA_JAR:-/usr/share/java/jna.jar}
[ -f "$jna" ] || { echo "JNA not found at $jna: apt-get install -y libjna-java (or set EDGE_M3_JNA_JAR)" >&2; exit 2; }
sqlite_jdbc=${EDGE_M3_SQLITE_JDBC_JAR:-/usr/share/java/sqlite-jdbc.jar}
[ -f "$sqlite_jdbc" ] || { echo "SQLite JDBC not found at $sqlite_jdbc: apt-get install -y libxerial-sqlite-jdbc-java (or set EDGE_M3_SQLITE_JDBC_JAR)" >&2; exit 2; }
work=${EDGE_M3_KIT_CACHE:-${TMPDIR:-/tmp}/edge_m3_kit}
mkdir -p "$work"
compiler=$("$py" -c 'import tools.kit.kotlin2 as k; print(*k.jars(), k.LANGUAGE_VERSION, k.JVM_TARGET)' 2>/dev/null) ||
  { "$py" -m tools.kit.kotlin2 version >/dev/null; exit 2; }  # says in one line what is missing
key=$( { printf '%s\n' "${sources[@]}" "$compiler"; cat "${sources[@]}" "$jna" "$sqlite_jdbc"; } | sha256sum | cut -c1-16)
jar=$work/kit-$key.jar
if [ ! -f "$jar" ]; then
  start=$(date +%s)
  "$py" -m tools.kit.kotlin2 compile --classpath "$jna:$sqlite_jdbc" --out "$jar" "${sources[@]}"
  echo "compiled the kit in $(( $(date +%s) - start )) s: $jar" >&2
fi
echo "$jar"
