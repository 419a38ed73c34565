import XCTest
@testable import YourApp  // the target that holds EdgeM3/*.swift; rename to yours

/// XCTest template (mirror of android_assets/src/androidTest/.../EdgeM3GoldenTest.kt): checks
/// this app against the bundle's golden.json on a device or simulator.
///
/// Exact checks: token ids (needs your SentencePiece binding, see `encoder`), signature choice,
/// post-processing of the recorded raw outputs. Tolerant check: the live model outputs on this
/// device's CPU against the recorded ones.
final class EdgeM3GoldenTests: XCTestCase {
    /// Plug the app's SentencePiece binding in here (README: "SentencePiece"); nil skips the token test.
    let encoder: PieceEncoder? = nil

    private struct NoTokenizer: PieceEncoder {
        func encodeAsIds(_ text: String) throws -> [Int] { throw EdgeM3Error("not used") }
    }

    private func resources() throws -> URL {
        // Runs inside the app (host application), so the app bundle holds the resources.
        guard let dir = Bundle.main.url(forResource: EdgeM3Embedder.resourceFolder, withExtension: nil) else {
            throw EdgeM3Error("\(EdgeM3Embedder.resourceFolder) not in the app bundle")
        }
        return dir
    }

    private func load() throws -> (Manifest, ModelEntry, EdgeM3Core.Golden, VocabMap?) {
        let dir = try resources()
        let manifest = try Manifest.fromJson(MiniJson.parse(contentsOf: dir.appendingPathComponent("manifest.json")))
        let model = try manifest.model("tflite")
        // golden.json is test data: it sits in the test bundle, not the app.
        guard let testDir = Bundle(for: EdgeM3GoldenTests.self).url(forResource: "EdgeM3TestResources", withExtension: nil) else {
            throw EdgeM3Error("EdgeM3TestResources not in the test bundle")
        }
        let golden = try EdgeM3Core.parseGolden(MiniJson.parse(contentsOf: testDir.appendingPathComponent("golden.json")))
        var vocab: VocabMap? = nil
        if let f = manifest.tokenizer.vocabMapFile {
            vocab = try VocabMap.fromJson(MiniJson.parse(contentsOf: dir.appendingPathComponent(f)), manifest.tokenizer)
        }
        return (manifest, model, golden, vocab)
    }

    func testGoldenMatchesThisBundle() throws {
        let (_, model, golden, _) = try load()
        XCTAssertEqual(golden.modelFile, model.file, "golden.json model_file")
        XCTAssertFalse(golden.cases.isEmpty, "golden.json has no cases")
    }

    func testTokensAndSignatureMatchGolden() throws {
        guard let enc = encoder else {
            throw XCTSkip("no SentencePiece binding plugged into EdgeM3GoldenTests.encoder")
        }
        let (manifest, model, golden, _) = try load()
        for c in golden.cases {
            let e = try EdgeM3Core.encode(enc.encodeAsIds(c.text), manifest.tokenizer, model.signatures)
            XCTAssertEqual(e.inputIds, c.expected.inputIds, "input_ids of: \(c.text)")
            XCTAssertEqual(e.signature.name, c.expected.signature, "signature of: \(c.text)")
            XCTAssertEqual(e.signature.seqLen, c.expected.seqLen, "seq_len of: \(c.text)")
        }
    }

    func testPostprocessingOfRecordedOutputsIsExact() throws {
        let (manifest, model, golden, vocab) = try load()
        for c in golden.cases {
            let enc = Encoded(inputIds: c.expected.inputIds, signature: try model.signature(c.expected.signature))
            let got = EdgeM3Core.postprocess(c.raw, enc, manifest.tokenizer.special, vocab)
            let problems = EdgeM3Core.compareExact(got, c.expected)
            XCTAssertTrue(problems.isEmpty, "\(c.text): \(problems)")
        }
    }

    func testLiveOutputsWithinTolerance() throws {
        // The recorded ids go straight to the model, so this runs without a SentencePiece binding.
        let (manifest, _, golden, _) = try load()
        let embedder = try EdgeM3Embedder(directory: try resources(), encoder: NoTokenizer())
        let tol = EdgeM3Core.toleranceFor(manifest.quant)
        for c in golden.cases {
            let got = try embedder.embedIds(c.expected.inputIds)
            let problems = EdgeM3Core.compareWithin(got, c.expected, tol)
            XCTAssertTrue(problems.isEmpty, "\(c.text): \(problems)")
        }
    }
}
