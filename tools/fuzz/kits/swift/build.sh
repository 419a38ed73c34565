#!/usr/bin/env bash
# Builds the iOS kit's fuzz targets (issue 38) and prints the executable's path:
#
#   tools/fuzz/kits/swift/build.sh   # libFuzzer (-sanitize=fuzzer,address): build/kit_fuzz/edge-m3-fuzz
#
# With EDGE_M3_FUZZ_DIFF=1 the same executable reads inputs on stdin for the differential
# (DiffMain.swift) instead of fuzzing.
# swiftc over the kit's sources (ios_assets/Sources/EdgeM3), the golden reader of its tests
# (GoldenFile.swift, StrictJSON.swift: their `@testable import` dropped, one module) and this
# folder's files, so the targets never enter Package.swift's products. Rebuilt when a source changes.
set -euo pipefail
root=$(cd "$(dirname "$0")/../../../.." && pwd)
swiftc=$(command -v swiftc || echo /opt/swift/usr/bin/swiftc)
[ -x "$swiftc" ] || { echo "swiftc not found (a Swift 6.1+ toolchain)" >&2; exit 2; }
out=$root/build/kit_fuzz
mkdir -p "$out/src"
here=$root/tools/fuzz/kits/swift
for f in GoldenFile.swift StrictJSON.swift; do
  sed '/^@testable import EdgeM3$/d; /^import EdgeM3$/d' "$root/ios_assets/Tests/EdgeM3Tests/$f" > "$out/src/$f.tmp"
  cmp -s "$out/src/$f.tmp" "$out/src/$f" && rm "$out/src/$f.tmp" || mv "$out/src/$f.tmp" "$out/src/$f"
done
sources=("$root"/ios_assets/Sources/EdgeM3/*.swift "$root"/ios_assets/Sources/EdgeM3/Tokenizer/*.swift
         "$root"/ios_assets/Sources/EdgeM3/Generated/*.swift
         "$out/src/GoldenFile.swift" "$out/src/StrictJSON.swift" "$here/FuzzTargets.swift" "$here/FuzzMain.swift"
         "$here/DiffMain.swift")
exe=$out/edge-m3-fuzz
flags=(-sanitize=fuzzer,address -O -g)
stamp=$( { printf '%s\n' "${sources[@]}" "${flags[@]}"; cat "${sources[@]}"; } | sha256sum | cut -c1-16)
if [ ! -x "$exe" ] || [ "$(cat "$exe.key" 2>/dev/null)" != "$stamp" ]; then
  "$swiftc" "${flags[@]}" -parse-as-library -swift-version 6 -module-name EdgeM3Fuzz \
    -I "$root/ios_assets/Sources/CSQLite" -lsqlite3 "${sources[@]}" -o "$exe.partial" >&2
  mv "$exe.partial" "$exe"
  echo "$stamp" > "$exe.key"
fi
echo "$exe"
