#!/usr/bin/env bash
# The kits' own tokenizer on any text, to check ids by hand against the Python pipeline:
#
#   tools/kit/kit_tokenize.sh {kotlin|swift} BUNDLE TEXTS_FILE [--max-length N]
#
# prints one JSON list of ids (<s> ... </s>, [CLS] ... [SEP]) per line of the UTF-8 file (lines split
# on "\n" only), from the Android kit's tokenizer of the bundle's kind (manifest tokenizer.kind:
# XlmrTokenizer, WordPieceTokenizer, BpeTokenizer) on the JVM or the iOS kit's in Swift. The build is
# cached (kotlin: tools/kit/kit_jar.sh; swift: tools/kit/kit_swift.sh; $EDGE_M3_KIT_JAR and
# $EDGE_M3_SWIFT_TOKENIZE name prebuilt ones, as the tests do). `--bench` before BUNDLE
# prints load time and single-threaded texts/s instead.
# Bad input (unknown port, missing file, not a bundle): one line on stderr, exit 2.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
usage="usage: tools/kit/kit_tokenize.sh {kotlin|swift} [--bench] BUNDLE TEXTS_FILE [--max-length N]"
[ $# -ge 3 ] || { echo "$usage" >&2; exit 2; }
port=$1
shift
case "$port" in
  kotlin)
    command -v java >/dev/null || { echo "kit_tokenize: java not found" >&2; exit 2; }
    jar=${EDGE_M3_KIT_JAR:-$("$root/tools/kit/kit_jar.sh")}
    exec java -cp "$jar" dev.edgem3.KitTokenizeKt "$@"
    ;;
  swift)
    [ -z "${EDGE_M3_SWIFT_TOKENIZE:-}" ] || exec "$EDGE_M3_SWIFT_TOKENIZE" "$@"  # a build of the tests'
    exe=$("$root/tools/kit/kit_swift.sh" edge-m3-tokenize)
    exec "$exe" "$@"
    ;;
  *)
    echo "$usage" >&2
    exit 2
    ;;
esac
