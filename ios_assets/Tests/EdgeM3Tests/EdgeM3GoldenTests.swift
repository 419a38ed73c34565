import Foundation
import XCTest
@testable import EdgeM3

/// The kit against a real bundle's golden.json (the Swift twin of android_assets/jvm/GoldenCheck.kt).
///
/// Exact: token ids from the kit's own tokenizer (of the manifest's kind), signature choice, post-processing of the
/// recorded raw outputs, the embedder's whole path with the model replaced by the recording, the
/// bundle files' SHA-256, and bad input (lone surrogates, text past the longest signature) as the
/// Python pipeline treats it. Tolerant: live outputs (TensorFlowLite in an app, LiteRT's C API elsewhere).
///
/// Where the bundle comes from, first found wins:
/// 1. `EDGE_M3_BUNDLE` (manifest.json, model, vocab_map.json; golden.json there or in
///    `EDGE_M3_TEST_RESOURCES`), `EDGE_M3_INPUT_CASES` (the Python pipeline's answers to bad
///    input, input_cases.json): what CI sets (tests/test_swift_kit.py);
/// 2. the app hosting the tests (`EdgeM3Resources` in the app, `EdgeM3TestResources` in the test bundle);
/// 3. `make build`'s copies beside this package: ios_assets/EdgeM3Resources and
///    ios_assets/EdgeM3TestResources (`swift test` on a Mac, Xcode on the simulator).
/// None of them: the tests skip.
final class EdgeM3GoldenTests: XCTestCase {
    struct Fixture {
        var bundle: URL
        var golden: URL
        var inputCases: URL?
    }

    static func locate() throws -> Fixture {
        let env = ProcessInfo.processInfo.environment
        if let dir = env["EDGE_M3_BUNDLE"], !dir.isEmpty {
            let bundle = URL(fileURLWithPath: dir, isDirectory: true)
            let tests = env["EDGE_M3_TEST_RESOURCES"].map { URL(fileURLWithPath: $0, isDirectory: true) } ?? bundle
            return Fixture(bundle: bundle, golden: tests.appendingPathComponent(EdgeM3Contract.golden),
                           inputCases: env["EDGE_M3_INPUT_CASES"].map { URL(fileURLWithPath: $0) })
        }
        if let app = try? EdgeM3Embedder.bundledDirectory(),
           let tests = Bundle(for: EdgeM3GoldenTests.self).url(forResource: EdgeM3Contract.testResourceFolder, withExtension: nil) {
            return Fixture(bundle: app, golden: tests.appendingPathComponent(EdgeM3Contract.golden), inputCases: nil)
        }
        let kit = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent()  // ios_assets/
        let golden = kit.appendingPathComponent(EdgeM3Contract.testResourceFolder).appendingPathComponent(EdgeM3Contract.golden)
        if FileManager.default.fileExists(atPath: golden.path) {
            return Fixture(bundle: kit.appendingPathComponent(EdgeM3Embedder.resourceFolder), golden: golden, inputCases: nil)
        }
        throw XCTSkip("no bundle: set EDGE_M3_BUNDLE, or run `make build` to fill ios_assets/EdgeM3Resources")
    }

    private func load() throws -> (Fixture, Pipeline, any EdgeM3Tokenizer, Golden) {
        let fixture = try Self.locate()
        let pipeline = try Pipeline(directory: fixture.bundle)
        let tokenizer = try openTokenizer(directory: fixture.bundle, spec: pipeline.manifest.tokenizer)
        let golden = try Golden(contentsOf: fixture.golden)
        XCTAssertEqual(golden.modelFile, pipeline.model.file, "golden.json model_file")
        XCTAssertFalse(golden.cases.isEmpty, "golden.json has no cases")
        return (fixture, pipeline, tokenizer, golden)
    }

    func testBundleFilesMatchManifest() throws {
        let (fixture, pipeline, _, _) = try load()
        var checked = 0
        for (name, entry) in pipeline.manifest.files.sorted(by: { $0.key < $1.key }) {
            let url = name == "golden.json" ? fixture.golden : fixture.bundle.appendingPathComponent(name)
            XCTAssertTrue(try FileCheck.verify(url, against: entry), name)
            checked += 1
        }
        XCTAssertGreaterThanOrEqual(checked, 2, "manifest.json files")
    }

    func testTokensAndSignatureMatchGolden() throws {
        let (_, pipeline, tokenizer, golden) = try load()
        for c in golden.cases {
            let e = try pipeline.encode(c.text, tokenizer: tokenizer)
            XCTAssertEqual(e.inputIds, c.expected.inputIds, "input_ids of: \(c.text)")
            XCTAssertEqual(e.signature.name, c.expected.signature, "signature of: \(c.text)")
            XCTAssertEqual(e.signature.seqLen, c.expected.seqLen, "seq_len of: \(c.text)")
        }
    }

    func testPostprocessingOfRecordedOutputsIsExact() throws {
        let (_, pipeline, _, golden) = try load()
        for c in golden.cases {
            let signature = try pipeline.model.signature(named: c.expected.signature)
            XCTAssertEqual(Self.shapes(c.raw), Self.shapes(signature), "raw output shapes of: \(c.text)")
            let got = pipeline.postprocess(c.raw, for: Encoded(inputIds: c.expected.inputIds, signature: signature))
            let problems = got.differences(from: c.expected)
            XCTAssertTrue(problems.isEmpty, "\(c.text): \(problems.prefix(5))")
        }
    }

    func testEmbedderReplaysGolden() async throws {
        let (_, pipeline, tokenizer, golden) = try load()
        for c in golden.cases {
            // The recorded outputs as the "model": the app's whole path (tokenizer, async API,
            // serial queue, padding, trimmed-vocabulary rows) must give golden.json's values bit for bit.
            let replay = ReplayRunner(raw: c.raw, expectedRows: pipeline.rows(for: c.expected.inputIds),
                                      padRow: pipeline.rows(for: [pipeline.special.pad])[0])
            let embedder = EdgeM3Embedder(pipeline: pipeline, tokenizer: tokenizer, runner: replay)
            let got = try await embedder.embed(c.text)
            XCTAssertTrue(replay.problems.isEmpty, "\(c.text): \(replay.problems)")
            XCTAssertEqual(got.differences(from: c.expected), [], c.text)
            XCTAssertEqual(got.differences(from: c.expected, within: Tolerance(quant: pipeline.manifest.quant)), [], c.text)
        }
    }

    /// Lone surrogates and text past the longest signature, as the Python pipeline answered them
    /// (tests/conftest.py `input_cases`): the same error text, or the same truncated ids and signature.
    func testBadInputAsThePythonPipeline() async throws {
        let (fixture, pipeline, tokenizer, _) = try load()
        guard let file = fixture.inputCases else { throw XCTSkip("no EDGE_M3_INPUT_CASES (written by tests/conftest.py)") }
        let cases = try JSONDecoder().decode([InputCase].self, from: Data(contentsOf: file))
        XCTAssertTrue(cases.contains { $0.error != nil } && cases.contains { $0.inputIds != nil }, "input cases")
        let embedder = EdgeM3Embedder(pipeline: pipeline, tokenizer: tokenizer, runner: ZeroRunner())
        for c in cases {
            do {
                let got = try await embedder.embed(utf16: c.utf16)
                XCTAssertNil(c.error, "no error for \(c.utf16.prefix(8))...")
                XCTAssertEqual(got.inputIds, c.inputIds, "input_ids")
                XCTAssertEqual(got.signature, c.signature, "signature")
            } catch let error as EdgeM3Error {
                XCTAssertEqual(error.message, c.error, "error for \(c.utf16.prefix(8))...")
            }
        }
    }

    /// golden.json's cases run live, within the variant's device tolerance (EdgeM3Contract), every
    /// signature of the model at least once: in an app on TensorFlowLite, elsewhere on LiteRT's C
    /// API (`EDGE_M3_LITERT_LIB`; missing: a skip, a failure in CI).
    func testLiveOutputsWithinTolerance() throws {
        let (fixture, pipeline, _, golden) = try load()
        #if canImport(TensorFlowLite)
        let embedder = try EdgeM3Embedder(directory: fixture.bundle, checksumMemo: nil)
        #else
        let embedder = try EdgeM3Embedder(directory: fixture.bundle, liteRt: LiteRtCRunnerTests.library())
        #endif
        let tolerance = Tolerance(quant: pipeline.manifest.quant)
        XCTAssertNotEqual(tolerance, .exact, "no device tolerance for \(pipeline.manifest.quant)")
        var signatures = Set<String>()
        for c in golden.cases {
            let got = try embedder.embed(ids: c.expected.inputIds)
            signatures.insert(got.signature)
            let problems = got.differences(from: c.expected, within: tolerance)
            XCTAssertTrue(problems.isEmpty, "\(c.text): \(problems.prefix(5))")
        }
        // Lengths golden.json does not reach: a text of that many ids, checked for shape only.
        for s in pipeline.model.signatures where !signatures.contains(s.name) {
            let special = pipeline.special
            let ids = [special.bos] + Array(repeating: special.mask, count: s.seqLen - 2) + [special.eos]
            let got = try embedder.embed(ids: ids)
            XCTAssertEqual(got.signature, s.name)
            XCTAssertEqual(got.colbertVecs?.count ?? s.seqLen - 1, s.seqLen - 1, s.name)
            signatures.insert(got.signature)
        }
        XCTAssertEqual(signatures, Set(pipeline.model.signatures.map(\.name)))
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

/// One text of input_cases.json (UTF-16 code units, lone surrogates possible) and the Python
/// pipeline's answer: its ids and signature, or its error message.
struct InputCase: Decodable {
    var utf16: [UInt16]
    var inputIds: [Int]?
    var signature: String?
    var error: String?

    enum CodingKeys: String, CodingKey { case utf16, inputIds = "input_ids", signature, error }
}

/// Zeros of the signature's output shapes: for checks of the steps around the model.
struct ZeroRunner: ModelRunner, Sendable {
    func run(_ signature: Signature, inputIds: [Int32], attentionMask: [Int32]) throws -> RawOutputs {
        func shape(_ name: String) -> [Int]? { signature.output(named: name)?.shape }
        return RawOutputs(denseVecs: shape(EdgeM3Contract.denseVecs).map { [Float](repeating: 0, count: $0[1]) },
                          sparseWeights: shape(EdgeM3Contract.sparseWeights).map { [Float](repeating: 0, count: $0[1]) },
                          colbertVecs: shape(EdgeM3Contract.colbertVecs).map {
                              [[Float]](repeating: [Float](repeating: 0, count: $0[2]), count: $0[1])
                          })
    }
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
