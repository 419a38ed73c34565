import Foundation
import XCTest
@testable import EdgeM3

/// The core's contract checks without a bundle: manifest and vocab map decoding, the pipeline's
/// edge cases, the exact comparison, SHA-256, and the embedder's serial queue.
final class EdgeM3CoreTests: XCTestCase {
    static let special: [String: Int] = ["bos": 0, "pad": 1, "eos": 2, "unk": 3, "mask": 9]

    /// A minimal manifest.json: signatures of lengths 4 and 8, hidden size 2.
    static func manifestJSON(special: [String: Int] = special, schema: Int = 1, vocabMap: Any = NSNull(),
                             specialTokens: Any? = nil) -> Data {
        func signature(_ n: Int) -> [String: Any] {
            ["name": "embed_\(n)", "seq_len": n,
             "outputs": [["name": "dense_vecs", "shape": [1, 2], "dtype": "float32"],
                         ["name": "sparse_weights", "shape": [1, n], "dtype": "float32"],
                         ["name": "colbert_vecs", "shape": [1, n - 1, 2], "dtype": "float32"]]]
        }
        var tree: [String: Any] = [
            "schema_version": schema, "quant": "fp32", "hidden_size": 2, "max_length": 8,
            "heads": ["dense", "sparse", "colbert"], "source": ["id": "ignored"],
            "tokenizer": ["file": "sentencepiece.bpe.model", "special_ids": special, "sp_unk_id": 0,
                          "id_offset": 1, "vocab_size": 10, "vocab_map": vocabMap],
            "models": [["format": "tflite", "file": "model_fp32.tflite", "quant": "fp32",
                        "signatures": [signature(8), signature(4)]]],
            "files": ["model_fp32.tflite": ["sha256": String(repeating: "0", count: 64), "size": 3]],
        ]
        if let specialTokens, var tokenizer = tree["tokenizer"] as? [String: Any] {
            tokenizer["special_tokens"] = specialTokens
            tree["tokenizer"] = tokenizer
        }
        return try! JSONSerialization.data(withJSONObject: tree)
    }

    static func manifest() throws -> Manifest { try decodeJSON(Manifest.self, from: manifestJSON(), file: "manifest.json") }

    /// The manifest's pipeline and TokenizerTests' hand-written model as its tokenizer.
    static func pipeline() throws -> (Pipeline, XlmrTokenizer) {
        let pipeline = try Pipeline(manifest: manifest())
        return (pipeline, try XlmrTokenizer(model: TokenizerTests.model(TokenizerTests.pieces), spec: pipeline.manifest.tokenizer))
    }

    func testManifestDecodesAndRoundTrips() throws {
        let m = try Self.manifest()
        XCTAssertEqual(m.tokenizer.special, SpecialIds(bos: 0, pad: 1, eos: 2, unk: 3, mask: 9))
        XCTAssertNil(m.tokenizer.vocabMapFile)
        XCTAssertEqual(try m.model(format: "tflite").signatures.map(\.seqLen), [4, 8])  // sorted
        XCTAssertEqual(m.files["model_fp32.tflite"]?.size, 3)
        XCTAssertEqual(try JSONDecoder().decode(Manifest.self, from: JSONEncoder().encode(m)), m)
        let trimmed = try decodeJSON(Manifest.self, from: Self.manifestJSON(vocabMap: ["file": "vocab_map.json", "kept": 7]),
                                     file: "manifest.json")
        XCTAssertEqual(trimmed.tokenizer.vocabMapFile, "vocab_map.json")
    }

    func testSpecialTokenStringsAreOptionalAsInPython() throws {
        let xlmr = ["bos": "<s>", "pad": "<pad>", "eos": "</s>", "unk": "<unk>", "mask": "<mask>"]
        XCTAssertEqual(try Self.manifest().tokenizer.specialTokens, xlmr)  // absent
        let null = try decodeJSON(Manifest.self, from: Self.manifestJSON(specialTokens: NSNull()), file: "manifest.json")
        XCTAssertEqual(null.tokenizer.specialTokens, xlmr)
        let own = xlmr.merging(["mask": "[MASK]"]) { $1 }
        let custom = try decodeJSON(Manifest.self, from: Self.manifestJSON(specialTokens: own), file: "manifest.json")
        XCTAssertEqual(custom.tokenizer.specialTokens, own)
        XCTAssertThrowsError(try decodeJSON(Manifest.self, from: Self.manifestJSON(specialTokens: ["bos": "<s>"]),
                                            file: "manifest.json")) {
            XCTAssertEqual("\($0)", "manifest.json: missing \"pad\" in .tokenizer.special_tokens")
        }
    }

    func testManifestRequiresAllFiveSpecialTokens() {
        var special = Self.special
        special["mask"] = nil
        XCTAssertThrowsError(try decodeJSON(Manifest.self, from: Self.manifestJSON(special: special), file: "manifest.json")) {
            XCTAssertEqual("\($0)", "manifest.json: missing \"mask\" in .tokenizer.special_ids")
        }
    }

    func testManifestRefusesUnknownSchema() {
        XCTAssertThrowsError(try decodeJSON(Manifest.self, from: Self.manifestJSON(schema: 2), file: "manifest.json")) {
            XCTAssertEqual("\($0)", "manifest.json: schema_version 2, this kit reads 1")
        }
    }

    func testVocabMapMustKeepEverySpecialToken() throws {
        let tok = try Self.manifest().tokenizer
        XCTAssertEqual(try VocabMap(keptIds: [0, 1, 2, 3, 5, 9], tokenizer: tok).index(of: 5), 4)
        XCTAssertThrowsError(try VocabMap(keptIds: [0, 1, 2, 3, 5], tokenizer: tok)) {  // no <mask> (9)
            XCTAssertEqual("\($0)", "vocab_map.json: kept ids lack the special ids [9]")
        }
        XCTAssertThrowsError(try VocabMap(keptIds: [0, 1, 3, 2, 9], tokenizer: tok))  // unsorted
        XCTAssertThrowsError(try VocabMap(keptIds: [0, 1, 2, 3, 9, 10], tokenizer: tok))  // >= vocab_size
    }

    func testTrimmedRowsPadAndUnknownIds() throws {
        let m = try decodeJSON(Manifest.self, from: Self.manifestJSON(vocabMap: ["file": "vocab_map.json"]), file: "m")
        let pipeline = try Pipeline(manifest: m, vocab: VocabMap(keptIds: [0, 1, 2, 3, 6, 9], tokenizer: m.tokenizer))
        XCTAssertEqual(pipeline.rows(for: [0, 6, 7, 9, 2]), [0, 4, 3, 5, 2])  // 7 was dropped: <unk>'s row
        let inputs = try pipeline.modelInputs(for: pipeline.encode(ids: [0, 6, 7, 2]))
        XCTAssertEqual(inputs.inputIds, [0, 4, 3, 2])
        XCTAssertEqual(inputs.attentionMask, [1, 1, 1, 1])
        XCTAssertThrowsError(try Pipeline(manifest: m))  // a trimmed manifest without its map
        // Lexical weights skip by row: the dropped id 7 shares <unk>'s row and is left out; keys stay ids.
        let raw = RawOutputs(denseVecs: nil, sparseWeights: [1, 0.5, 0.5, 1], colbertVecs: nil)
        let e = try pipeline.postprocess(raw, for: pipeline.encode(ids: [0, 6, 7, 2]))
        XCTAssertEqual(e.lexicalWeights, ["6": 0.5])
    }

    func testEncodeTruncatesToTheLongestSignatureKeepingEos() throws {
        let (pipeline, tokenizer) = try Self.pipeline()
        let short = try pipeline.encode("a zz", tokenizer: tokenizer)
        XCTAssertEqual(short.inputIds, [0, 4, 7, 3, 2])  // ▁a ▁ <unk>
        XCTAssertEqual(short.signature.name, "embed_8")
        XCTAssertEqual(try pipeline.encode("abb", tokenizer: tokenizer).signature.name, "embed_4")
        let long = try pipeline.encode(Array(repeating: "a", count: 20).joined(separator: " "), tokenizer: tokenizer)
        XCTAssertEqual(long.inputIds, [0, 4, 4, 4, 4, 4, 4, 2])
        XCTAssertEqual(long.signature.seqLen, 8)
        XCTAssertEqual(try pipeline.encode(utf16: Array("a a".utf16), tokenizer: tokenizer).inputIds, [0, 4, 4, 2])
        XCTAssertThrowsError(try pipeline.encode(ids: Array(repeating: 4, count: 9)))
    }

    func testBadInputThroughTheEmbedderAsInPython() async throws {
        // Python: "text is not valid Unicode (lone surrogate at index N)", N counted in code points;
        // nothing runs. tests/test_swift_kit.py compares real bundles against the Python pipeline.
        let (pipeline, tokenizer) = try Self.pipeline()
        let runner = CountingRunner()
        let embedder = EdgeM3Embedder(pipeline: pipeline, tokenizer: tokenizer, runner: runner)
        let lone: [UInt16] = [0xD83D, 0xDE00, 0x61, 0xDC00, 0x61]  // 😀 a <lone low> a
        let message = "text is not valid Unicode (lone surrogate at index 2)"
        let blocking = { () throws -> Embedding in try embedder.embed(utf16: lone) }  // the blocking API
        XCTAssertThrowsError(try blocking()) { XCTAssertEqual($0 as? EdgeM3Error, EdgeM3Error(message)) }
        do {
            _ = try await embedder.embed(utf16: lone)
            XCTFail("a lone surrogate was embedded")
        } catch {
            XCTAssertEqual(error as? EdgeM3Error, EdgeM3Error(message))
        }
        XCTAssertEqual(runner.maxInFlight, 0)
        let long = try await embedder.embed(utf16: Array(Array(repeating: "a", count: 20).joined(separator: " ").utf16))
        XCTAssertEqual(long.inputIds, [0, 4, 4, 4, 4, 4, 4, 2])
        XCTAssertEqual(long.seqLen, 8)
    }

    func testPostprocessFollowsFlagEmbedding() throws {
        let pipeline = try Pipeline(manifest: Self.manifest())
        let encoded = try pipeline.encode(ids: [0, 5, 9, 5, 3, 2])  // <s> a <mask> a <unk> </s>
        let raw = RawOutputs(denseVecs: [0.6, 0.8], sparseWeights: [1, 0.25, 0.5, 0.75, 1, 1, 0, 0],
                             colbertVecs: (0..<7).map { [Float($0), 0] })
        let e = pipeline.postprocess(raw, for: encoded)
        XCTAssertEqual(e.lexicalWeights, ["5": 0.75, "9": 0.5])  // max per id; <s>, </s>, <unk> skipped
        XCTAssertEqual(e.colbertVecs?.count, 5)  // one per real token after <s>
        XCTAssertEqual(e.signature, "embed_8")
    }

    func testExactComparisonCatchesOneUlpAndIdDrift() {
        let e = Embedding(inputIds: [0, 5, 2], signature: "embed_4", seqLen: 4, denseVecs: [0.6, 0.8],
                          lexicalWeights: ["5": 0.3], colbertVecs: [[1, 0], [0, 1]])
        XCTAssertEqual(e.differences(from: e), [])
        var ulp = e
        ulp.lexicalWeights = ["5": Float(0.3).nextUp]
        XCTAssertEqual(ulp.differences(from: e).count, 1)
        XCTAssertEqual(ulp.differences(from: e, within: Tolerance(quant: "fp32")), [])
        var zero = e
        zero.denseVecs = [0, 0.8]
        var negativeZero = e
        negativeZero.denseVecs = [-0.0, 0.8]
        XCTAssertEqual(negativeZero.differences(from: zero), ["dense_vecs[0] -0.0 != 0.0"])  // bit patterns
        var ids = e
        ids.inputIds[1] = 6
        XCTAssertTrue(ids.differences(from: e)[0].hasPrefix("input_ids"))
        var rows = e
        rows.colbertVecs = [[1, 0]]
        XCTAssertEqual(rows.differences(from: e), ["colbert_vecs rows Optional(1) != Optional(2)"])
    }

    // ---- SHA-256 (CryptoKit on Apple platforms, the kit's own elsewhere)

    static func sha256(_ bytes: [UInt8], chunk: Int = 1 << 20) -> String {
        var h = StreamingSHA256()
        var start = 0
        repeat {
            let end = min(start + chunk, bytes.count)
            bytes[start..<end].withUnsafeBytes { h.update($0) }
            start = end
        } while start < bytes.count
        return h.hexDigest()
    }

    func testSHA256KnownVectors() {
        // FIPS 180-4 examples (NIST CSRC) plus the 1,000,000 x "a" vector.
        let vectors: [(String, String)] = [
            ("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
            ("abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
            ("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
             "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"),
            ("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
             "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"),
        ]
        for (text, digest) in vectors {
            XCTAssertEqual(Self.sha256(Array(text.utf8)), digest, text)
            XCTAssertEqual(Self.sha256(Array(text.utf8), chunk: 7), digest, "\(text) in 7-byte chunks")
        }
        let million = [UInt8](repeating: UInt8(ascii: "a"), count: 1_000_000)
        let want = "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"
        XCTAssertEqual(Self.sha256(million), want)
        XCTAssertEqual(Self.sha256(million, chunk: 65_537), want)
    }

    func testFileCheckHashesOnceThenRemembers() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("edgem3-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("model.tflite")
        try Data("abc".utf8).write(to: file)
        let good = FileEntry(sha256: "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", size: 3)
        let memo = dir.appendingPathComponent("memo")
        XCTAssertEqual(try FileCheck.sha256(of: file), good.sha256)
        XCTAssertTrue(try FileCheck.verify(file, against: good, memo: memo))
        XCTAssertFalse(try FileCheck.verify(file, against: good, memo: memo))  // remembered: size only
        XCTAssertThrowsError(try FileCheck.verify(file, against: FileEntry(sha256: good.sha256, size: 4))) {
            XCTAssertTrue("\($0)".contains("3 bytes, manifest.json says 4"), "\($0)")
        }
        let bad = FileEntry(sha256: String(repeating: "0", count: 64), size: 3)
        XCTAssertThrowsError(try FileCheck.verify(file, against: bad, memo: memo)) {
            XCTAssertTrue("\($0)".contains("sha256 ba7816bf"), "\($0)")
        }
    }

    // ---- the embedder: one model run at a time, whatever the callers do

    func testConcurrentAsyncCallsRunOneAtATime() async throws {
        let (pipeline, tokenizer) = try Self.pipeline()
        let runner = CountingRunner()
        let embedder = EdgeM3Embedder(pipeline: pipeline, tokenizer: tokenizer, runner: runner)
        let results = try await withThrowingTaskGroup(of: Embedding.self) { group in
            for _ in 0..<8 { group.addTask { try await embedder.embed("a b") } }
            return try await group.reduce(into: [Embedding]()) { $0.append($1) }
        }
        XCTAssertEqual(results.count, 8)
        XCTAssertEqual(results[0].inputIds, [0, 4, 7, 6, 2])
        XCTAssertEqual(runner.maxInFlight, 1)
        let blocking = { () throws -> Embedding in try embedder.embed("a b") }  // a sync context picks the blocking API
        XCTAssertEqual(try blocking(), results[0])
    }

    /// The tokenizer options encode to the manifest's snake_case keys and decode back equal.
    func testTokenizerOptionsEncodeToTheManifestKeys() throws {
        let wp = WordPieceOptions(cleanText: true, handleChineseChars: false, stripAccents: true, lowercase: false,
                                  continuingSubwordPrefix: "##", maxInputCharsPerWord: 100)
        let bpe = BpeOptions(normalizer: "NFC", addPrefixSpace: false, useRegex: true, ignoreMerges: false,
                             fuseUnk: true, unkToken: "<unk>")
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        XCTAssertEqual(String(decoding: try encoder.encode(wp), as: UTF8.self),
                       ###"{"clean_text":true,"continuing_subword_prefix":"##","handle_chinese_chars":false,"###
                       + #""lowercase":false,"max_input_chars_per_word":100,"strip_accents":true}"#)
        XCTAssertEqual(String(decoding: try encoder.encode(bpe), as: UTF8.self),
                       #"{"add_prefix_space":false,"fuse_unk":true,"ignore_merges":false,"normalizer":"NFC","#
                       + #""unk_token":"<unk>","use_regex":true}"#)
        XCTAssertEqual(try JSONDecoder().decode(WordPieceOptions.self, from: encoder.encode(wp)), wp)
        XCTAssertEqual(try JSONDecoder().decode(BpeOptions.self, from: encoder.encode(bpe)), bpe)
    }

    /// Lexical's parallel arrays: refused when their lengths differ or the ids do not strictly
    /// ascend (the order every sparse sum uses); the dictionary form sums the shared ids.
    func testLexicalArraysRefusedAndSparseFromDictionaries() throws {
        XCTAssertThrowsError(try Retrieval.Lexical(ids: [1, 2], weights: [0.5])) {
            XCTAssertEqual($0 as? EdgeM3Error, EdgeM3Error("lexical ids and weights differ in length"))
        }
        for ids: [Int32] in [[2, 1], [1, 1]] {
            XCTAssertThrowsError(try Retrieval.Lexical(ids: ids, weights: [0.5, 0.5])) {
                XCTAssertEqual($0 as? EdgeM3Error, EdgeM3Error("lexical ids must be strictly ascending"))
            }
        }
        let lex = try Retrieval.Lexical(ids: [3, 7], weights: [0.25, 1])
        XCTAssertEqual(lex.ids, [3, 7])
        XCTAssertEqual(lex.weights, [0.25, 1])
        XCTAssertEqual(try Retrieval.sparse(["1": 0.5, "3": 2], ["3": 0.25, "7": 1]), 0.5)  // 2 * 0.25
        XCTAssertEqual(try Retrieval.sparse(["1": 0.5], ["7": 1]), 0)
    }

    /// An unknown mode and bad weights: refused as invalid input with the message naming them.
    func testModeAndWeightsRefused() throws {
        XCTAssertEqual(try Retrieval.signals(of: "colbert+sparse+dense"), ["colbert", "sparse", "dense"])
        XCTAssertThrowsError(try Retrieval.signals(of: "bm25")) {
            XCTAssertEqual($0 as? EdgeM3Error,
                           EdgeM3Error("mode \"bm25\": choose from \(Retrieval.modes.joined(separator: ", "))"))
        }
        for weights: [Double] in [[1, 1], [1, -1, 1], [1, .infinity, 1], [.nan, 1, 1], [1, 1, 1, 1]] {
            XCTAssertThrowsError(try Retrieval.checkWeights(weights)) {
                XCTAssertEqual("\($0)", "weights: must be three finite numbers >= 0 (dense, sparse, colbert), got \(weights)")
                XCTAssertEqual(($0 as? EdgeM3Error)?.kind, .invalidInput)
            }
        }
        XCTAssertEqual(try Retrieval.checkWeights([0, 0.5, 2]), [0, 0.5, 2])
    }

}

/// Records how many runs overlap (must stay 1: the embedder serialises).
final class CountingRunner: ModelRunner, @unchecked Sendable {  // guarded by `lock`
    private let lock = NSLock()
    private var inFlight = 0
    private(set) var maxInFlight = 0

    func run(_ signature: Signature, inputIds: [Int32], attentionMask: [Int32]) throws -> RawOutputs {
        lock.lock()
        inFlight += 1
        maxInFlight = max(maxInFlight, inFlight)
        lock.unlock()
        Thread.sleep(forTimeInterval: 0.002)
        lock.lock()
        inFlight -= 1
        lock.unlock()
        return RawOutputs(denseVecs: [1, 0], sparseWeights: Array(repeating: 0, count: signature.seqLen),
                          colbertVecs: Array(repeating: [0, 1], count: signature.seqLen - 1))
    }
}
