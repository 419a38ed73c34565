// swift-tools-version:5.9
// The iOS kit as a Swift package: the platform-independent core (Foundation only) and its tests.
// No dependency: the TensorFlow Lite runner (TFLiteRunner.swift) compiles only where the app
// target provides the TensorFlowLite module (README: "Adding the kit to an app"); the desktop
// runner (LiteRtCRunner.swift) opens LiteRT's C library at run time (dlopen), so nothing links it.
import PackageDescription

let strict: [SwiftSetting] = [.enableUpcomingFeature("StrictConcurrency")]

let package = Package(
    name: "EdgeM3",
    platforms: [.iOS(.v15), .macOS(.v12)],  // async/await without back-deployment
    products: [
        .library(name: "EdgeM3", targets: ["EdgeM3"]),
        .executable(name: "edge-m3-tokenize", targets: ["EdgeM3Tokenize"]),
        .executable(name: "edge-m3-retrieval", targets: ["EdgeM3Retrieval"]),
        .executable(name: "edge-m3-embed", targets: ["EdgeM3Embed"]),
    ],
    targets: [
        .target(name: "EdgeM3", path: "Sources/EdgeM3", swiftSettings: strict),
        // The tokenizer on the command line (tools/kit/kit_tokenize.sh swift, tests/test_kit_tokenizer.py).
        .executableTarget(name: "EdgeM3Tokenize", dependencies: ["EdgeM3"], path: "Sources/EdgeM3Tokenize",
                          swiftSettings: strict),
        // Scores and index search on the command line (tests/test_kit_retrieval.py, tools/bench).
        .executableTarget(name: "EdgeM3Retrieval", dependencies: ["EdgeM3"], path: "Sources/EdgeM3Retrieval",
                          swiftSettings: strict),
        // The whole pipeline live on LiteRT's C API (tools/kit/kit_embed.sh swift, tools/bench/bench_kits.py).
        .executableTarget(name: "EdgeM3Embed", dependencies: ["EdgeM3"], path: "Sources/EdgeM3Embed",
                          swiftSettings: strict),
        .testTarget(name: "EdgeM3Tests", dependencies: ["EdgeM3"], path: "Tests/EdgeM3Tests",
                    swiftSettings: strict),
    ]
)
