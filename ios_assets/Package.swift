// swift-tools-version:5.9
// The iOS kit as a Swift package: no dependency outside Foundation.
import PackageDescription

let package = Package(
    name: "EdgeM3",
    products: [
        .library(name: "EdgeM3", targets: ["EdgeM3"]),
        .executable(name: "edge-m3-tokenize", targets: ["EdgeM3Tokenize"]),
    ],
    targets: [
        .target(name: "EdgeM3", path: "Sources/EdgeM3"),
        // The tokenizer on the command line (tools/kit_tokenize.sh swift, tests/test_kit_tokenizer.py).
        .executableTarget(name: "EdgeM3Tokenize", dependencies: ["EdgeM3"], path: "Sources/EdgeM3Tokenize"),
        .testTarget(name: "EdgeM3Tests", dependencies: ["EdgeM3"], path: "Tests/EdgeM3Tests"),
    ]
)
