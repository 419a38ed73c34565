#!/usr/bin/env bash
# Run the Android kit's Kotlin core against a bundle's golden.json on the JVM (what CI does in
# tests/test_kits.py), e.g. on a full-size bundle:  tools/kotlin_check.sh dist/bge-m3-int8
# Needs kotlinc + java (Debian: apt-get install -y kotlin) and the project's .venv (sentencepiece).
set -euo pipefail
cd "$(dirname "$0")/.."
bundle=${1:?usage: tools/kotlin_check.sh BUNDLE_DIR}
[ -f "$bundle/golden.json" ] || { echo "$bundle/golden.json: not found (is it an edge-m3 bundle?)" >&2; exit 2; }
command -v kotlinc >/dev/null || { echo "kotlinc not found: apt-get install -y kotlin" >&2; exit 2; }
py=${PYTHON:-.venv/bin/python}
sources=(android_assets/src/main/java/dev/edgem3/*.kt android_assets/src/androidTest/java/dev/edgem3/*.kt
         android_assets/jvm/GoldenCheck.kt android_assets/jvm/stubs/*.kt)
work=${TMPDIR:-/tmp}/edge_m3_kotlin_check
mkdir -p "$work"
# Recompile only when a source changed (kotlinc takes ~15 s).
key=$(cat "${sources[@]}" | sha256sum | cut -c1-16)
jar=$work/kit-$key.jar
if [ ! -f "$jar" ]; then
  start=$(date +%s)
  kotlinc -Werror "${sources[@]}" -include-runtime -d "$work/partial-$key.jar" 2> >(grep -v 'OpenJDK 64-Bit Server VM warning' >&2)
  mv "$work/partial-$key.jar" "$jar"
  echo "compiled the kit in $(( $(date +%s) - start )) s: $jar"
fi
"$py" - "$bundle" "$work/pieces.json" <<'EOF'
import json, sys
from pathlib import Path
import sentencepiece as spm
bundle, out = Path(sys.argv[1]), Path(sys.argv[2])
golden = json.loads((bundle / "golden.json").read_text(encoding="utf-8"))
manifest = json.loads((bundle / "manifest.json").read_text(encoding="utf-8"))
sp = spm.SentencePieceProcessor(model_file=str(bundle / manifest["tokenizer"]["file"]))
texts = [c["text"] for c in golden["cases"]]
out.write_text(json.dumps({"texts": texts, "pieces": [sp.encode(t) for t in texts]}), encoding="utf-8")
EOF
exec java -jar "$jar" "$bundle" "$work/pieces.json"
