#!/usr/bin/env bash
# Runs the Android kit's Kotlin core against a bundle's golden.json on the JVM (as tests/test_kits.py does).
# E.g. on a full-size bundle:  tools/kit/kotlin_check.sh dist/bge-m3-int8
# and live, the model run by the kit on LiteRT's C API (jvm/LiteRtCRunner.kt, through JNA):
#   tools/kit/kotlin_check.sh dist/bge-m3-int8 --live .venv/lib/python3.11/site-packages/ai_edge_litert/libLiteRt.so
# Needs the dev venv's Kotlin 2 compiler (tools/kit/kotlin2.py) + java + JNA (Debian: apt-get install -y libjna-java); the kit tokenizes the golden texts itself.
set -euo pipefail
cd "$(dirname "$0")/../.."
bundle=${1:?usage: tools/kit/kotlin_check.sh BUNDLE_DIR [--live LIBLITERT]}
shift
[ -f "$bundle/golden.json" ] || { echo "$bundle/golden.json: not found (is it an edge-m3 bundle?)" >&2; exit 2; }
jar=$(tools/kit/kit_jar.sh)
exec java -cp "$jar:${EDGE_M3_JNA_JAR:-/usr/share/java/jna.jar}" dev.edgem3.GoldenCheckKt "$bundle" "$@"
