#!/usr/bin/env bash
# Compiles the Android kit's Kotlin into one JVM jar and prints its path.
# The jar holds the app sources (Android and TFLite calls against compile-only stubs), the
# instrumented test and its golden support, and the JVM tools in android_assets/jvm/ (GoldenCheck,
# KitTokenize, KitEmbed, and LiteRtCRunner: LiteRT's C API through JNA). JNA is compiled against,
# not bundled: run with `java -cp "$jar:$EDGE_M3_JNA_JAR"` ($EDGE_M3_JNA_JAR defaults to Debian's
# libjna-java, /usr/share/java/jna.jar). The writable index's JDBC adapter (jvm/JdbcIndexDb.kt)
# needs the xerial SQLite driver at run time only: add $EDGE_M3_SQLITE_JDBC_JAR (default: Debian's
# libxerial-sqlite-jdbc-java, /usr/share/java/sqlite-jdbc.jar) to the classpath the same way. kotlinc takes ~20 s, so the jar is cached by the
# sources' names and contents and the JNA jar's in $EDGE_M3_KIT_CACHE (default: $TMPDIR or /tmp,
# edge_m3_kit/).
# Used by tools/kit/kotlin_check.sh, tools/kit/kit_tokenize.sh and tests/conftest.py (CI: -Werror).
set -euo pipefail
cd "$(dirname "$0")/../.."
command -v kotlinc >/dev/null || { echo "kotlinc not found: apt-get install -y kotlin" >&2; exit 2; }
sources=(android_assets/src/main/java/dev/edgem3/*.kt android_assets/src/androidTest/java/dev/edgem3/*.kt
         android_assets/jvm/*.kt android_assets/jvm/stubs/*.kt)
jna=${EDGE_M3_JNA_JAR:-/usr/share/java/jna.jar}
[ -f "$jna" ] || { echo "JNA not found at $jna: apt-get install -y libjna-java (or set EDGE_M3_JNA_JAR)" >&2; exit 2; }
sqlite_jdbc=${EDGE_M3_SQLITE_JDBC_JAR:-/usr/share/java/sqlite-jdbc.jar}
[ -f "$sqlite_jdbc" ] || { echo "SQLite JDBC not found at $sqlite_jdbc: apt-get install -y libxerial-sqlite-jdbc-java (or set EDGE_M3_SQLITE_JDBC_JAR)" >&2; exit 2; }
work=${EDGE_M3_KIT_CACHE:-${TMPDIR:-/tmp}/edge_m3_kit}
mkdir -p "$work"
key=$( { printf '%s\n' "${sources[@]}"; cat "${sources[@]}" "$jna" "$sqlite_jdbc"; } | sha256sum | cut -c1-16)
jar=$work/kit-$key.jar
if [ ! -f "$jar" ]; then
  start=$(date +%s)
  partial=$work/partial-$key-$$.jar
  kotlinc -Werror -cp "$jna:$sqlite_jdbc" "${sources[@]}" -include-runtime -d "$partial" 2> >(grep -v 'OpenJDK 64-Bit Server VM warning' >&2)
  mv "$partial" "$jar"
  echo "compiled the kit in $(( $(date +%s) - start )) s: $jar" >&2
fi
echo "$jar"
