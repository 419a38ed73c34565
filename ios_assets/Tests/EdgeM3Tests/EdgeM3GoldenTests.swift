import Foundation
import XCTest
@testable import EdgeM3

/// The kit against a real bundle's golden.json (the Swift twin of android_assets/jvm/GoldenCheck.kt).
///
/// Exact: token ids from SentencePiece pieces (pieces.json, or `encoder` below), signature
/// choice, post-processing of the recorded raw outputs, the embedder's whole path with the
/// model replaced by the recording, the bundle files' SHA-256. Tolerant: live TFLite outputs
/// (only where TensorFlowLite is linked).
///
/// Where the bundle comes from, first found wins:
/// 1. `EDGE_M3_BUNDLE` (manifest.json, model, vocab_map.json; golden.json there or in
///    `EDGE_M3_TEST_RESOURCES`), `EDGE_M3_PIECES` (pieces.json): what CI sets (tests/test_swift_kit.py);
/// 2. the app hosting the tests (`EdgeM3Resources` in the app, `EdgeM3TestResources` in the test bundle);
/// 3. `make build`'s copies beside this package: ios_assets/EdgeM3Resources and
///    ios_assets/EdgeM3TestResources (`swift test` on a Mac, Xcode on the simulator).
/// None of them: the tests skip.
final class EdgeM3GoldenTests: XCTestCase {
    /// Plug the app's tokenizer in here; nil: the token test uses pieces.json, or skips without it.
    let encoder: (any PieceEncoder)? = nil

    struct Fixture {
        var bundle: URL
        var golden: URL
        var pieces: URL?
    }

    static func locate() throws -> Fixture {
        let env = ProcessInfo.processInfo.environment
        if let dir = env["EDGE_M3_BUNDLE"], !dir.isEmpty {
            let bundle = URL(fileURLWithPath: dir, isDirectory: true)
            let tests = env["EDGE_M3_TEST_RESOURCES"].map { URL(fileURLWithPath: $0, isDirectory: true) } ?? bundle
            return Fixture(bundle: bundle, golden: tests.appendingPathComponent("golden.json"),
                           pieces: env["EDGE_M3_PIECES"].map { URL(fileURLWithPath: $0) })
        }
        if let app = try? EdgeM3Embedder.bundledDirectory(),
           let tests = Bundle(for: EdgeM3GoldenTests.self).url(forResource: EdgeM3Contract.testResourceFolder, withExtension: nil) {
            return Fixture(bundle: app, golden: tests.appendingPathComponent("golden.json"), pieces: nil)
        }
        let kit = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent()  // ios_assets/
        let golden = kit.appendingPathComponent(EdgeM3Contract.testResourceFolder).appendingPathComponent(EdgeM3Contract.golden)
        if FileManager.default.fileExists(atPath: golden.path) {
            return Fixture(bundle: kit.appendingPathComponent(EdgeM3Embedder.resourceFolder), golden: golden, pieces: nil)
        }
        throw XCTSkip("no bundle: set EDGE_M3_BUNDLE, or run `make build` to fill ios_assets/EdgeM3Resources")
    }

    private func load() throws -> (Fixture, Pipeline, Golden) {
        let fixture = try Self.locate()
        let pipeline = try Pipeline(directory: fixture.bundle)
        let golden = try Golden(contentsOf: fixture.golden)
        XCTAssertEqual(golden.modelFile, pipeline.model.file, "golden.json model_file")
        XCTAssertFalse(golden.cases.isEmpty, "golden.json has no cases")
        return (fixture, pipeline, golden)
    }

    func testBundleFilesMatchManifest() throws {
        let (fixture, pipeline, _) = try load()
        var checked = 0
        for (name, entry) in pipeline.manifest.files.sorted(by: { $0.key < $1.key }) {
            let url = name == "golden.json" ? fixture.golden : fixture.bundle.appendingPathComponent(name)
            XCTAssertTrue(try FileCheck.verify(url, against: entry), name)
            checked += 1
        }
        XCTAssertGreaterThanOrEqual(checked, 2, "manifest.json files")
    }

    /// Each golden text's SentencePiece ids: from `encoder`, else pieces.json, else nil.
    private func pieces(_ fixture: Fixture, _ golden: Golden) throws -> [[Int]]? {
        if let encoder { return try golden.cases.map { try encoder.encodeAsIds($0.text) } }
        guard let file = fixture.pieces else { return nil }
        let side = try GoldenPieces(contentsOf: file)
        XCTAssertEqual(side.texts, golden.cases.map(\.text), "pieces.json texts")
        XCTAssertEqual(side.pieces.count, golden.cases.count, "pieces.json cases")
        return side.pieces
    }

    func testTokensAndSignatureMatchGolden() throws {
        let (fixture, pipeline, golden) = try load()
        guard let pieces = try pieces(fixture, golden) else {
            throw XCTSkip("no tokenizer plugged into EdgeM3GoldenTests.encoder and no EDGE_M3_PIECES")
        }
        for (c, p) in zip(golden.cases, pieces) {
            let e = pipeline.encode(pieces: p)
            XCTAssertEqual(e.inputIds, c.expected.inputIds, "input_ids of: \(c.text)")
            XCTAssertEqual(e.signature.name, c.expected.signature, "signature of: \(c.text)")
            XCTAssertEqual(e.signature.seqLen, c.expected.seqLen, "seq_len of: \(c.text)")
        }
    }

    func testPostprocessingOfRecordedOutputsIsExact() throws {
        let (_, pipeline, golden) = try load()
        for c in golden.cases {
            let signature = try pipeline.model.signature(named: c.expected.signature)
            XCTAssertEqual(Self.shapes(c.raw), Self.shapes(signature), "raw output shapes of: \(c.text)")
            let got = pipeline.postprocess(c.raw, for: Encoded(inputIds: c.expected.inputIds, signature: signature))
            let problems = got.differences(from: c.expected)
            XCTAssertTrue(problems.isEmpty, "\(c.text): \(problems.prefix(5))")
        }
    }

    func testEmbedderReplaysGolden() async throws {
        let (fixture, pipeline, golden) = try load()
        let pieces = try pieces(fixture, golden)
        for (i, c) in golden.cases.enumerated() {
            // The recorded outputs as the "model" (and the pieces, when known, as the tokenizer):
            // the app's whole path (async API, serial queue, padding, trimmed-vocabulary rows)
            // must give golden.json's values bit for bit.
            let replay = ReplayRunner(raw: c.raw, expectedRows: pipeline.rows(for: c.expected.inputIds),
                                      padRow: pipeline.rows(for: [pipeline.special.pad])[0])
            let embedder = EdgeM3Embedder(pipeline: pipeline, encoder: FixedIds(ids: pieces?[i] ?? []), runner: replay)
            let got = pieces == nil ? try await embedder.embed(ids: c.expected.inputIds) : try await embedder.embed(c.text)
            XCTAssertTrue(replay.problems.isEmpty, "\(c.text): \(replay.problems)")
            XCTAssertEqual(got.differences(from: c.expected), [], c.text)
            XCTAssertEqual(got.differences(from: c.expected, within: Tolerance(quant: pipeline.manifest.quant)), [], c.text)
        }
    }

    func testLiveOutputsWithinTolerance() throws {
        #if canImport(TensorFlowLite)
        let (fixture, pipeline, golden) = try load()
        let embedder = try EdgeM3Embedder(directory: fixture.bundle, encoder: FixedIds(ids: []), checksumMemo: nil)
        let tolerance = Tolerance(quant: pipeline.manifest.quant)
        for c in golden.cases {
            let problems = try embedder.embed(ids: c.expected.inputIds).differences(from: c.expected, within: tolerance)
            XCTAssertTrue(problems.isEmpty, "\(c.text): \(problems.prefix(5))")
        }
        #else
        throw XCTSkip("TensorFlowLite is not linked into this build: live outputs run in an app (README)")
        #endif
    }

    static func shapes(_ raw: RawOutputs) -> [String: [Int]] {
        var out = [String: [Int]]()
        out[EdgeM3Contract.denseVecs] = raw.denseVecs.map { [1, $0.count] }
        out[EdgeM3Contract.sparseWeights] = raw.sparseWeights.map { [1, $0.count] }
        out[EdgeM3Contract.colbertVecs] = raw.colbertVecs.map { [1, $0.count, $0.first?.count ?? 0] }
        return out
    }

    static func shapes(_ signature: Signature) -> [String: [Int]] {
        Dictionary(uniqueKeysWithValues: signature.outputs.map { ($0.name, $0.shape) })
    }
}

/// A "tokenizer" that returns ids already known (the replay needs none).
struct FixedIds: PieceEncoder, Sendable {
    var ids: [Int]
    func encodeAsIds(_ text: String) throws -> [Int] { ids }
}

/// Replays one case's recorded outputs after checking what the pipeline feeds the model.
final class ReplayRunner: ModelRunner, @unchecked Sendable {  // used on the embedder's queue only
    let raw: RawOutputs
    let expectedRows: [Int]
    let padRow: Int
    private(set) var problems = [String]()

    init(raw: RawOutputs, expectedRows: [Int], padRow: Int) {
        self.raw = raw
        self.expectedRows = expectedRows
        self.padRow = padRow
    }

    func run(_ signature: Signature, inputIds: [Int32], attentionMask: [Int32]) throws -> RawOutputs {
        let n = expectedRows.count
        let wantIds = expectedRows.map { Int32($0) } + Array(repeating: Int32(padRow), count: signature.seqLen - n)
        let wantMask = Array(repeating: Int32(1), count: n) + Array(repeating: 0, count: signature.seqLen - n)
        if inputIds != wantIds { problems.append("padded input_ids \(inputIds) != \(wantIds)") }
        if attentionMask != wantMask { problems.append("attention_mask \(attentionMask) != \(wantMask)") }
        return raw
    }
}
