import Foundation
import XCTest
@testable import EdgeM3

/// What no bundle on the desktop reached before (issue 34, item 5: the lines that had never run),
/// each refusal by its exact typed kind (EdgeM3ErrorKind, generated from spec.KIT_ERROR_KINDS):
/// EdgeM3WritableIndex's (refused vectors and ids, another bundle, a foreign or spoiled database,
/// a passage removed in part), its text API through an embedder (embedChunks), the ScoreMode
/// overloads of both indexes' search, and the tokenizers' corrupt files. No bundle: the embedder is
/// EdgeM3CoreTests' pipeline (hidden size 2) over a CountingRunner. Runs in `swift test`
/// (tests/test_kit_tokenizer.py::test_swift_unit_tests runs every XCTest class).
final class EdgeM3RefusalTests: XCTestCase {
    private var root: URL!

    override func setUpWithError() throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("edge-m3-refusals-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: root)
    }

    /// `body` throws an EdgeM3Error of exactly `kind` whose message holds `contains`.
    private func refuses(_ kind: EdgeM3ErrorKind, _ contains: String, file: StaticString = #filePath, line: UInt = #line,
                         _ body: () throws -> Void) {
        XCTAssertThrowsError(try body(), file: file, line: line) { error in
            guard let e = error as? EdgeM3Error else { return XCTFail("not an EdgeM3Error: \(error)", file: file, line: line) }
            XCTAssertEqual(e.kind, kind, e.message, file: file, line: line)
            XCTAssertTrue(e.message.contains(contains), "\"\(e.message)\" lacks \"\(contains)\"", file: file, line: line)
        }
    }

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
        try FileManager.default.createDirectory(at: folder("empty"), withIntermediateDirectories: true)
        refuses(.corruptIndex, "not an index (no \(EdgeM3Contract.indexDb), no \(EdgeM3Contract.indexManifest))") {
            _ = try EdgeM3WritableIndex(folder: self.folder("empty"))
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

    // ---- databases spoiled after the fact: each refused when opened, corrupt_index, one line

    func testSpoiledDatabasesRefused() throws {
        let good = folder("good")
        do {
            let x = try EdgeM3WritableIndex.create(folder: good, dim: 2, bundle: ["model_file": "m", "model_sha256": "a",
                                                                                  "tokenizer_file": "t", "tokenizer_sha256": "b"])
            try x.add(.int(1), try vectors(1))
            try x.add(.string("two"), chunks: [try vectors(2), try vectors(3)])
            try x.compact()
            try x.add(.int(3), try vectors(4))
        }
        func spoiled(_ name: String, _ contains: String, _ sql: String, line: UInt = #line) throws {
            let f = folder("spoiled-\(name)")
            try FileManager.default.copyItem(at: good, to: f)
            let db = try SQLiteDB(path: f.appendingPathComponent(EdgeM3Contract.indexDb).path)
            try db.exec(sql)
            refuses(.corruptIndex, contains, line: line) { _ = try EdgeM3WritableIndex(folder: f).count }
        }
        func meta(_ key: String, _ value: String) -> String { "UPDATE meta SET value = \(value) WHERE key = '\(key)'" }
        let v = EdgeM3Contract.indexDbVersion
        try spoiled("application-id", "(application_id 7)", "PRAGMA application_id = 7")
        try spoiled("user-version-newer", "written by a newer edge-m3 (user_version \(v + 1)", "PRAGMA user_version = \(v + 1)")
        try spoiled("user-version-older", "written by an older edge-m3 (user_version 1", "PRAGMA user_version = 1")
        try spoiled("format", "meta format other", meta("format", "'other'"))
        try spoiled("format-version", "meta format_version missing or malformed", meta("format_version", "'x'"))
        try spoiled("format-version-newer", "(format_version \(v + 1),", meta("format_version", "'\(v + 1)'"))
        try spoiled("format-version-older", "(format_version 1,", meta("format_version", "'1'"))
        try spoiled("meta-missing", "meta dim missing", "DELETE FROM meta WHERE key = 'dim'")
        try spoiled("dim", "meta dim malformed", meta("dim", "'0'"))
        try spoiled("dense", "meta dense or colbert store unknown", meta("dense", "'f8'"))
        try spoiled("bundle", "meta bundle is not a JSON object or null", meta("bundle", "'{'"))
        try spoiled("generation", "meta generation malformed", meta("generation", "'-1'"))
        try spoiled("base-name", "meta base \"elsewhere\" malformed", meta("base", "'elsewhere'"))
        try spoiled("base-sha", "meta base_sha256 set without a base", meta("base", "''"))
        try spoiled("base-other", "written for another base", meta("base_sha256", "'\(String(repeating: "0", count: 64))'"))
        try spoiled("base-bundle", "its bundle differs from its base's", meta("bundle", "'null'"))
        try spoiled("base-stores", "dim, dense or colbert differs from its base's", meta("dense", "'int8'"))
        try spoiled("removed-range", "a removed row is out of range", "INSERT INTO removed (row) VALUES (99)")
        try spoiled("removed-in-part", "a base passage is removed in part", "INSERT INTO removed (row) VALUES (2)")
        try spoiled("passage-id", "a passage id is neither an integer nor a string", "UPDATE passages SET id = X'00'")
        try spoiled("passage-chunk", "out of order", "UPDATE passages SET chunk = 1")
        try spoiled("passage-blob", "has blobs of the wrong length", "UPDATE passages SET dense = X'00'")
        try spoiled("passage-in-base", "is both in the base and added", "UPDATE passages SET id = 1")
        XCTAssertEqual(try EdgeM3WritableIndex(folder: good).count, 3)  // the good one untouched
    }

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

    // ---- a format-1 folder spoiled after the fact: EdgeM3Index refuses it, corrupt_index, one line

    func testSpoiledIndexFoldersRefused() throws {
        let made = folder("made")
        do {
            let x = try EdgeM3WritableIndex.create(folder: made, dim: 2, bundle: ["model_file": "m", "model_sha256": "a",
                                                                                  "tokenizer_file": "t", "tokenizer_sha256": "b"])
            for i in 0..<3 { try x.add(.int(Int64(i)), try vectors(i)) }
            try x.compact()
        }
        let good = made.appendingPathComponent(EdgeM3Contract.indexBasePrefix + "1")
        XCTAssertEqual(try EdgeM3Index(folder: good, bundleFiles: ["m": "a", "t": "b"]).count, 3)
        // corrupt_index, but for the caller's bundle (`bundleFiles`): invalid input
        func spoiled(_ name: String, _ contains: String, bundleFiles: [String: String]? = nil,
                     kind: EdgeM3ErrorKind = .corruptIndex, line: UInt = #line,
                     _ edit: (inout [String: Any]) -> Void) throws {
            let f = folder("index-\(name)")
            try FileManager.default.copyItem(at: good, to: f)
            let m = f.appendingPathComponent(EdgeM3Contract.indexManifest)
            var tree = try JSONSerialization.jsonObject(with: Data(contentsOf: m)) as! [String: Any]
            edit(&tree)
            try JSONSerialization.data(withJSONObject: tree).write(to: m)
            refuses(kind, contains, line: line) { _ = try EdgeM3Index(folder: f, bundleFiles: bundleFiles) }
        }
        func set(_ tree: inout [String: Any], _ key: String, _ sub: String, _ value: Any?) {
            var o = tree[key] as! [String: Any]
            o[sub] = value
            tree[key] = o
        }
        func setArray(_ tree: inout [String: Any], _ name: String, _ key: String, _ value: Any?) {
            var arrays = tree["arrays"] as! [String: Any]
            var a = arrays[name] as! [String: Any]
            a[key] = value
            arrays[name] = a
            tree["arrays"] = arrays
        }
        try spoiled("format", "format other, not") { $0["format"] = "other" }
        try spoiled("format-missing", "format missing or of the wrong type") { $0["format"] = nil }
        try spoiled("version", "format_version 99, this kit reads") { $0["format_version"] = 99 }
        try spoiled("version-type", "format_version must be an integer") { $0["format_version"] = "1" }
        try spoiled("dim", "count 3, dim 0") { $0["dim"] = 0 }
        try spoiled("dense", "dense store f8 unknown") { $0["dense"] = "f8" }
        try spoiled("colbert", "colbert store f8 unknown") { $0["colbert"] = "f8" }
        try spoiled("bundle", "bundle: needs model_file") { set(&$0, "bundle", "model_file", 1) }
        try spoiled("no-bundle", "records no bundle", bundleFiles: ["m": "a"], kind: .invalidInput) { $0["bundle"] = NSNull() }
        try spoiled("other-bundle", "index built by another bundle", bundleFiles: ["m": "z", "t": "b"], kind: .invalidInput) { _ in }
        try spoiled("file-name", "bad file name") { set(&$0, "files", "a/b", ["size": 1, "sha256": "x"]) }
        try spoiled("file-entry", "files.x.bin must be an object") { set(&$0, "files", "x.bin", 5) }
        try spoiled("file-size", "size must be an integer") { t in
            var files = t["files"] as! [String: Any]
            var entry = files[EdgeM3Contract.indexIds] as! [String: Any]
            entry["size"] = "5"
            files[EdgeM3Contract.indexIds] = entry
            t["files"] = files
        }
        try spoiled("array-fields", "arrays.dense needs file, dtype and shape") { setArray(&$0, "dense", "dtype", nil) }
        try spoiled("array-dtype", "arrays.dense: int8") { setArray(&$0, "dense", "dtype", "int8") }
        try spoiled("array-file", "is not among the files with a sha256") { setArray(&$0, "dense", "file", "none.bin") }
        try spoiled("array-missing", "arrays.dense missing") { t in
            var arrays = t["arrays"] as! [String: Any]
            arrays["dense"] = nil
            t["arrays"] = arrays
        }
        try spoiled("array-stray", "is not used by the float32/") { t in
            var arrays = t["arrays"] as! [String: Any]
            arrays["dense_scale"] = arrays["dense"]
            t["arrays"] = arrays
        }
        try spoiled("length", "arrays.sparse_tokens missing") { setArray(&$0, "sparse_tokens", "shape", "x") }
        try spoiled("length-range", "arrays.sparse_tokens.shape -1 out of range") { setArray(&$0, "sparse_tokens", "shape", [-1]) }
    }
}
