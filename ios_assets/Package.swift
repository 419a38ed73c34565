// swift-tools-version:6.1
// The iOS kit as a Swift package: the platform-independent core (Foundation only) and its tests.
// Swift 6 language mode (complete concurrency checking); every type is `nonisolated`, so the
// sources also compile inside an app target whose default isolation is MainActor (Xcode 26's
// default for new apps). Swift 6.1 or later: `nonisolated` on a type needs it (Xcode 16.3+).
// No dependency: the phone runners compile only where the app target provides their runtime's
// module, TFLiteRunner.swift the TensorFlowLite pod's, LiteRTRunner.swift LiteRT's Swift package's
// (README: "Adding the kit to an app"); the desktop runner (LiteRtCRunner.swift, macOS and Linux
// only) opens LiteRT's C library at run time (dlopen).
// The writable index (EdgeM3WritableIndex.swift) uses the platform's SQLite: Apple's SQLite3 module,
// and on Linux the system library libsqlite3 (Debian libsqlite3-dev) through the CSQLite module map.
import PackageDescription

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
        // The privacy manifest (required-reason APIs the kit calls) ships inside the library's bundle.
        .target(name: "EdgeM3", dependencies: [.target(name: "CSQLite", condition: .when(platforms: [.linux]))],
                path: "Sources/EdgeM3", resources: [.copy("PrivacyInfo.xcprivacy")]),
        // libsqlite3 where the SDK has no SQLite3 module (Linux); never built on Apple platforms.
        .systemLibrary(name: "CSQLite", path: "Sources/CSQLite", pkgConfig: "sqlite3",
                       providers: [.apt(["libsqlite3-dev"])]),
        // The tokenizer on the command line (tools/kit/kit_tokenize.sh swift, tests/test_kit_tokenizer.py).
        .executableTarget(name: "EdgeM3Tokenize", dependencies: ["EdgeM3"], path: "Sources/EdgeM3Tokenize"),
        // Scores and index search on the command line (tests/test_kit_retrieval.py, tools/bench).
        .executableTarget(name: "EdgeM3Retrieval", dependencies: ["EdgeM3"], path: "Sources/EdgeM3Retrieval"),
        // The whole pipeline live on LiteRT's C API (tools/kit/kit_embed.sh swift, tools/bench/bench_kits.py).
        .executableTarget(name: "EdgeM3Embed", dependencies: ["EdgeM3"], path: "Sources/EdgeM3Embed"),
        .testTarget(name: "EdgeM3Tests", dependencies: ["EdgeM3"], path: "Tests/EdgeM3Tests"),
    ],
    swiftLanguageModes: [.v6]
)
