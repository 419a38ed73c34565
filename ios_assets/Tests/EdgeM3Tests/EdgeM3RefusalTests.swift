import Foundation
import XCTest
@testable import EdgeM3

/// What no bundle on the desktop reached before (issue 34, item 5: the lines that had never run),
/// each refusal by its exact typed kind (EdgeM3ErrorKind, generated from spec.KIT_ERROR_KINDS):
/// EdgeM3WritableIndex's (refused vectors and ids, another bundle; foreign and spoiled databases
/// and index folders are the conformance suite's, EdgeM3ConformanceTests), its text API through an
/// embedder (embedChunks), the ScoreMode overloads of both indexes' search, and the tokenizers'
/// corrupt files. No bundle: the embedder is
/// EdgeM3CoreTests' pipeline (hidden size 2) over a CountingRunner. Runs in `swift test`
/// (tests/test_kit_tokenizer.py::test_swift_unit_tests runs every XCTest class).
final class EdgeM3RefusalTests: FolderTestCase {
    private func vectors(_ seed: Int, dim: Int = 2) throws -> Retrieval.Vectors {
        let a = Float(seed % 7 + 1), b = Float(seed % 5 + 2)
        let n = (a * a + b * b).squareRoot()
        return Retrieval.Vectors(dense: [a / n, b / n].prefix(dim).map { $0 } + Array(repeating: 0, count: max(0, dim - 2)),
                                 lexical: try Retrieval.Lexical(ids: [Int32(seed % 3 + 1), 9], weights: [0.5, 0.25]),
                                 colbert: [[1, 0], [a / n, b / n]])
    }

    /// An embedder whose manifest lists its tokenizer's file too, so an index can record its identity.
    private func embedder() throws -> EdgeM3Embedder {
        var tree = try JSONSerialization.jsonObject(with: EdgeM3CoreTests.manifestJSON()) as! [String: Any]
        var files = tree["files"] as! [String: Any]
        files["sentencepiece.bpe.model"] = ["sha256": String(repeating: "1", count: 64), "size": 5]
        tree["files"] = files
        let manifest = try decodeJSON(Manifest.self, from: JSONSerialization.data(withJSONObject: tree), file: "manifest.json")
        let pipeline = try Pipeline(manifest: manifest)
        let tokenizer = try XlmrTokenizer(model: TokenizerTests.model(TokenizerTests.pieces), spec: manifest.tokenizer)
        return EdgeM3Embedder(pipeline: pipeline, tokenizer: tokenizer, runner: CountingRunner())
    }

    private func folder(_ name: String) -> URL { root.appendingPathComponent(name) }

    // ---- create and open

    func testCreateAndOpenRefusals() throws {
        refuses(.invalidInput, "dim: must be from 1 to \(EdgeM3Contract.indexMaxDim), got 0") {
            _ = try EdgeM3WritableIndex.create(folder: self.folder("a"), dim: 0)
        }
        refuses(.invalidInput, "dim: must be from 1 to \(EdgeM3Contract.indexMaxDim), got \(EdgeM3Contract.indexMaxDim + 1)") {
            _ = try EdgeM3WritableIndex.create(folder: self.folder("a"), dim: EdgeM3Contract.indexMaxDim + 1)
        }
        refuses(.invalidInput, "dense: f8 unknown") {
            _ = try EdgeM3WritableIndex.create(folder: self.folder("a"), dim: 2, dense: "f8")
        }
        refuses(.invalidInput, "colbert: f8 unknown") {
            _ = try EdgeM3WritableIndex.create(folder: self.folder("a"), dim: 2, colbert: "f8")
        }
        _ = try EdgeM3WritableIndex.create(folder: folder("twice"), dim: 2)
        refuses(.invalidInput, "already holds an index (\(EdgeM3Contract.indexDb))") {
            _ = try EdgeM3WritableIndex.create(folder: self.folder("twice"), dim: 2)
        }
        let aFile = folder("a-file")
        try Data("x".utf8).write(to: aFile)
        refuses(.writeFailed, "cannot create the folder") {
            _ = try EdgeM3WritableIndex.create(folder: aFile.appendingPathComponent("sub"), dim: 2)
        }
    }

    // ---- vectors, ids, batches

    func testWritesRefusedNothingChanged() throws {
        let x = try EdgeM3WritableIndex.create(folder: folder("w"), dim: 2, dense: "int8", colbert: "int8")
        try x.add(.int(1), try vectors(1))
        try x.add(.string("s"), chunks: [try vectors(2), try vectors(3)])
        let v = try vectors(4)
        refuses(.invalidInput, "no chunks") { _ = try x.add(.int(2), chunks: []) }
        refuses(.invalidInput, "no chunks") { _ = try x.update(.int(1), chunks: []) }
        refuses(.invalidInput, "dense vector: missing (want 2, finite)") {
            _ = try x.add(.int(2), Retrieval.Vectors(dense: nil, lexical: v.lexical, colbert: v.colbert))
        }
        refuses(.invalidInput, "dense vector: 1 values (want 2, finite)") {
            _ = try x.add(.int(2), Retrieval.Vectors(dense: [1], lexical: v.lexical, colbert: v.colbert))
        }
        refuses(.invalidInput, "dense vector: 2 values (want 2, finite)") {
            _ = try x.add(.int(2), Retrieval.Vectors(dense: [.nan, 0], lexical: v.lexical, colbert: v.colbert))
        }
        refuses(.invalidInput, "lexical weights must be finite and > 0") {
            _ = try x.add(.int(2), Retrieval.Vectors(dense: v.dense, lexical: try Retrieval.Lexical(ids: [1], weights: [0]), colbert: v.colbert))
        }
        refuses(.invalidInput, "colbert_vecs missing: the index stores ColBERT vectors (int8)") {
            _ = try x.add(.int(2), Retrieval.Vectors(dense: v.dense, lexical: v.lexical, colbert: nil))
        }
        refuses(.invalidInput, "ColBERT vectors must have 2 finite values each") {
            _ = try x.add(.int(2), Retrieval.Vectors(dense: v.dense, lexical: v.lexical, colbert: [[1]]))
        }
        refuses(.duplicateId, "given twice in one batch") { _ = try x.addAll([(.int(5), v), (.int(5), v)]) }
        refuses(.duplicateId, "already in the index") { _ = try x.addAll([(.int(6), v), (.string("s"), v)]) }
        refuses(.duplicateId, "already in the index") { _ = try x.add(.int(1), v) }
        refuses(.unknownId, "id 9: not in the index") { _ = try x.update(.int(9), v) }
        refuses(.unknownId, "id \"t\": not in the index") { _ = try x.remove(.string("t")) }
        refuses(.invalidInput, "no embedder") { _ = try x.add(.int(7), text: "a b") }
        refuses(.invalidInput, "no embedder") { _ = try x.update(.int(1), text: "a b") }
        refuses(.invalidInput, "no embedder") { _ = try x.search(text: "a", k: 1, mode: "dense") }
        XCTAssertEqual(try x.count, 2)
        XCTAssertEqual(try x.rows, 3)
        try x.addAll([(.int(8), v)])
        try x.update(.int(1), try vectors(5))
        XCTAssertEqual(try x.count, 3)
        XCTAssertEqual(try x.rows, 4)
    }

    // ---- the text API and the bundle check

    func testTextThroughTheEmbedder() throws {
        let e = try embedder()
        let identity = EdgeM3WritableIndex.bundleIdentity(of: e)
        XCTAssertEqual(identity["tokenizer_sha256"], String(repeating: "1", count: 64))
        let x = try EdgeM3WritableIndex.create(folder: folder("t"), dim: 2, bundle: identity, embedder: e)
        let long = Array(repeating: "a b", count: 6).joined(separator: " ")
        let chunks = try e.embedChunks(long)
        XCTAssertGreaterThan(chunks.count, 1)
        try x.add(.string("long"), text: long)
        try x.add(.int(1), text: "b")
        try x.update(.int(1), text: long)
        XCTAssertEqual(try x.rows, 2 * chunks.count)
        let hits = try x.search(text: "a b", k: 3, mode: "dense", chunks: true)
        XCTAssertEqual(hits.count, min(3, 2 * chunks.count))
        XCTAssertEqual(Set(try x.search(text: "a b", k: 2, mode: "dense").map(\.id)), [.int(1), .string("long")])
        // reopened with the embedder: the identity is checked, and kept
        let again = try EdgeM3WritableIndex(folder: folder("t"), embedder: e)
        XCTAssertEqual(again.bundle?["model_sha256"], identity["model_sha256"])
        // another bundle's index, or one that records none, is refused with the embedder
        var other = identity
        other["model_sha256"] = String(repeating: "2", count: 64)
        _ = try EdgeM3WritableIndex.create(folder: folder("other"), dim: 2, bundle: other)
        refuses(.invalidInput, "index built by another bundle") {
            _ = try EdgeM3WritableIndex(folder: self.folder("other"), embedder: e)
        }
        refuses(.invalidInput, "index built by another bundle") {
            _ = try EdgeM3WritableIndex.create(folder: self.folder("other2"), dim: 2, bundle: other, embedder: e)
        }
        _ = try EdgeM3WritableIndex.create(folder: folder("none"), dim: 2)
        refuses(.invalidInput, "records no bundle") {
            _ = try EdgeM3WritableIndex(folder: self.folder("none"), embedder: e)
        }
    }

    // ---- ScoreMode: the enum overloads answer as the strings, on both indexes

    func testScoreModeOverloads() throws {
        let e = try embedder()
        let x = try EdgeM3WritableIndex.create(folder: folder("m"), dim: 2, bundle: EdgeM3WritableIndex.bundleIdentity(of: e))
        for i in 0..<4 { try x.add(.int(Int64(i)), try vectors(i)) }
        try x.compact()
        try x.add(.string("after"), try vectors(9))
        let query = try e.embed("a b")
        let q = try Retrieval.Vectors(query)
        let base = try EdgeM3Index(folder: folder("m").appendingPathComponent(EdgeM3Contract.indexBasePrefix + "1"))
        let w = [0.4, 0.2, 0.4]
        for mode in ScoreMode.allCases {
            XCTAssertEqual(try x.search(query, k: 3, mode: mode), try x.search(query, k: 3, mode: mode.rawValue))
            XCTAssertEqual(try x.search(q, k: 3, mode: mode, weights: w, chunks: true),
                           try x.search(q, k: 3, mode: mode.rawValue, weights: w, chunks: true))
            XCTAssertEqual(try base.search(query, k: 3, mode: mode), try base.search(query, k: 3, mode: mode.rawValue))
            XCTAssertEqual(try base.search(q, k: 3, mode: mode, weights: w), try base.search(q, k: 3, mode: mode.rawValue, weights: w))
            XCTAssertEqual(try Retrieval.score(q, q, mode: mode, weights: w), try Retrieval.score(q, q, mode: mode.rawValue, weights: w))
        }
    }

    // ---- spoiled databases and index folders: EdgeM3ConformanceTests (tests/conformance/index/)

    // ---- the embedder's other entry points and the options builder

    func testEmbedderEntryPointsAndOptions() async throws {
        let e = try embedder()
        XCTAssertEqual(e.manifest.quant, "fp32")
        let byIds = try await e.embed(ids: [0, 4, 2])
        let blocking = { () throws -> Embedding in try e.embed(ids: [0, 4, 2]) }
        XCTAssertEqual(try blocking(), byIds)
        let byUnits = try await e.embed(utf16: Array("a b".utf16))
        XCTAssertEqual(byUnits.inputIds, [0, 4, 7, 6, 2])
        let unitsBlocking = { () throws -> Embedding in try e.embed(utf16: Array("a b".utf16)) }
        XCTAssertEqual(try unitsBlocking(), byUnits)
        XCTAssertEqual(EdgeM3Error("a\nb\rc").message, "a\\nb\\rc")  // one line, whatever the message holds
        refuses(.invalidInput, "\(EdgeM3Embedder.resourceFolder): not in the app bundle") {
            _ = try EdgeM3Embedder.bundledDirectory(in: .main)
        }
        refuses(.invalidInput, "\(EdgeM3Embedder.resourceFolder): not in the app bundle") {
            _ = try EdgeM3BundleSource.appResources.resolve()
        }
        let dir = folder("bundle")
        let o = EdgeM3Options().source(.directory(dir)).threads(3).weightCache(.memory).accelerator(.cpu).checksumMemo(nil)
        XCTAssertEqual(o, EdgeM3Options(source: .directory(dir), threads: 3, weightCache: .memory, checksumMemo: nil))
        XCTAssertEqual(try o.source.resolve(), dir)
        refuses(.invalidInput, "threads: 0, expected 1 or more") { try o.threads(0).validate() }
        refuses(.invalidInput, "accelerator gpu") { try o.accelerator(.gpu).validate() }
        // closed: the runner's default close() (a runner that holds no model), then every call refused as closed
        e.close()
        e.close()
        XCTAssertTrue(e.isClosed)
        refuses(.runnerClosed, "EdgeM3Embedder: closed") { _ = try e.embed(ids: [0, 4, 2]) }
    }

    // ---- tokenizers: corrupt SentencePiece files, each naming the file

    func testCorruptSentencePieceModels() throws {
        let ids = TokenizerTests.ids
        func refusedModel(_ bytes: [UInt8], _ contains: String, line: UInt = #line) {
            refuses(.invalidInput, "sentencepiece.bpe.model: not a SentencePiece model", line: line) {
                _ = try XlmrTokenizer(model: bytes, specialIds: ids, spUnkId: 3, idOffset: 1, vocabSize: 10,
                                  file: "sentencepiece.bpe.model")
            }
            refuses(.invalidInput, contains, line: line) {
                _ = try XlmrTokenizer(model: bytes, specialIds: ids, spUnkId: 3, idOffset: 1, vocabSize: 10,
                                  file: "sentencepiece.bpe.model")
            }
        }
        refusedModel([], "no pieces")
        refusedModel([0x00, 0x00], "field number 0")
        refusedModel([0x28, 0x80], "truncated varint")
        refusedModel([0x2b], "wire type 3")
        refusedModel([0x08, 0x01], "wire type 0, expected 2")
        refusedModel([0x0a, 0x05, 0x00], "past the end")
        refusedModel([0x21, 0x00], "past the end")
        refusedModel([0x20, 0x01, 0x2d, 0, 0, 0, 0, 0x31, 0, 0, 0, 0, 0, 0, 0, 0, 0x3a, 0x00], "no pieces")
        refuses(.invalidInput, "occurs twice in the model") {
            _ = try XlmrTokenizer(model: TokenizerTests.model([("a", -1), ("a", -2)]), specialIds: ids, spUnkId: 0,
                                  idOffset: 1, vocabSize: 10)
        }
    }
}
