#!/usr/bin/env bash
# Builds one executable of the iOS kit's Swift package (release) and prints its path:
#
#   tools/kit/kit_swift.sh {edge-m3-tokenize|edge-m3-embed}
#
# The build is cached in build/kit_swift/ (incremental). Used by tools/kit/kit_tokenize.sh and
# tools/kit/kit_embed.sh. No Swift toolchain or a failed build: the log, then one line, exit 2.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
product=${1:?usage: tools/kit/kit_swift.sh PRODUCT}
swift=$(command -v swift || echo /opt/swift/usr/bin/swift)
[ -x "$swift" ] || { echo "$product: swift not found (a Swift 6.1+ toolchain)" >&2; exit 2; }
scratch=$root/build/kit_swift
if ! log=$("$swift" build -c release --package-path "$root/ios_assets" --scratch-path "$scratch" \
             --product "$product" 2>&1); then
  echo "$log" >&2
  echo "$product: swift build failed" >&2
  exit 2
fi
echo "$scratch/release/$product"
