#!/usr/bin/env bash
# The kits' whole pipeline, live on LiteRT's C API, on any text (to hold a kit's output against
# `edge-m3 embed` and FlagEmbedding by hand):
#
#   tools/kit/kit_embed.sh {kotlin|swift} [--bench] [--repeats N] [--threads N] [--lib LIBLITERT] BUNDLE TEXTS_FILE
#
# prints for each line of the UTF-8 file (lines split on "\n" only) one JSON object with the keys of
# `edge-m3 embed BUNDLE --texts FILE` (its JSON lines on stdout) (input_ids, signature, dense_vecs, lexical_weights,
# colbert_vecs), from the Android kit on the JVM (JNA) or the iOS kit in Swift (dlopen). `--bench`
# prints one JSON line instead: open_to_first_ms, p50_ms and runs per signature length (each line
# embedded N times, default 20, after 3 warm-ups; --threads: XNNPACK threads, default 1 as `edge-m3 embed`).
# The library: --lib, else $EDGE_M3_LITERT_LIB, else the ai-edge-litert wheel of the repo's .venv.
# Builds are cached (kotlin: tools/kit/kit_jar.sh; swift: tools/kit/kit_swift.sh; $EDGE_M3_KIT_JAR
# and $EDGE_M3_SWIFT_EMBED name prebuilt ones, as the tests do).
# Bad input (unknown port, missing file or library, not a bundle): one line on stderr, exit 2.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
usage="usage: tools/kit/kit_embed.sh {kotlin|swift} [--bench] [--repeats N] [--threads N] [--lib LIBLITERT] BUNDLE TEXTS_FILE"
[ $# -ge 3 ] || { echo "$usage" >&2; exit 2; }
port=$1
shift
case "$port" in kotlin|swift) ;; *) echo "$usage" >&2; exit 2 ;; esac
args=()
lib=${EDGE_M3_LITERT_LIB:-}
while [ $# -gt 0 ]; do
  case "$1" in
    --lib)
      [ $# -ge 2 ] || { echo "kit_embed: --lib needs a path" >&2; exit 2; }
      lib=$2
      shift 2
      ;;
    *)
      args+=("$1")
      shift
      ;;
  esac
done
if [ -z "$lib" ]; then
  python=$root/.venv/bin/python
  [ -x "$python" ] || python=$(command -v python3 || true)
  lib=$("$python" -c 'import ai_edge_litert, pathlib; print(pathlib.Path(ai_edge_litert.__file__).with_name("libLiteRt.so" if __import__("sys").platform != "darwin" else "libLiteRt.dylib"))' 2>/dev/null) || {
    echo "kit_embed: no LiteRT library: pass --lib LIBLITERT, set EDGE_M3_LITERT_LIB, or pip install ai-edge-litert into .venv" >&2
    exit 2
  }
fi
[ -f "$lib" ] || { echo "kit_embed: $lib: no such LiteRT library" >&2; exit 2; }
case "$port" in
  kotlin)
    command -v java >/dev/null || { echo "kit_embed: java not found" >&2; exit 2; }
    jar=${EDGE_M3_KIT_JAR:-$("$root/tools/kit/kit_jar.sh")}
    exec java -cp "$jar:${EDGE_M3_JNA_JAR:-/usr/share/java/jna.jar}" dev.edgem3.KitEmbedKt --lib "$lib" "${args[@]}"
    ;;
  swift)
    [ -z "${EDGE_M3_SWIFT_EMBED:-}" ] || exec "$EDGE_M3_SWIFT_EMBED" --lib "$lib" "${args[@]}"  # a build of the tests'
    exe=$("$root/tools/kit/kit_swift.sh" edge-m3-embed)
    exec "$exe" --lib "$lib" "${args[@]}"
    ;;
  *)
    echo "$usage" >&2
    exit 2
    ;;
esac
