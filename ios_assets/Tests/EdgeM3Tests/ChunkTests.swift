import Foundation
import XCTest
@testable import EdgeM3

/// Chunks of long passages (docs/index-format.md, "Passages and chunks") through the embedder and
/// the writable index, on EdgeM3CoreTests' manifest (signatures 4 and 8) and a model stub. The ids
/// against Python's Tokenizer.encode_chunks on real vocabularies and the hits against Python's are
/// tests/test_kit_tokenizer.py's, test_kit_retrieval.py's and test_kit_writable.py's.
final class ChunkTests: XCTestCase {
    /// EdgeM3CoreTests' pipeline with the tokenizer file listed (so an index can record the bundle).
    static func embedder() throws -> EdgeM3Embedder {
        let m = try EdgeM3CoreTests.manifest()
        var files = m.files
        files[m.tokenizer.file] = FileEntry(sha256: String(repeating: "1", count: 64), size: 1)
        let manifest = Manifest(schemaVersion: m.schemaVersion, quant: m.quant, hiddenSize: m.hiddenSize, maxLength: m.maxLength,
                                heads: m.heads, tokenizer: m.tokenizer, models: m.models, files: files)
        let pipeline = try Pipeline(manifest: manifest)
        let tokenizer = try XlmrTokenizer(model: TokenizerTests.model(TokenizerTests.pieces), spec: manifest.tokenizer)
        return EdgeM3Embedder(pipeline: pipeline, tokenizer: tokenizer, runner: CountingRunner())
    }

    static let long = Array(repeating: "a", count: 20).joined(separator: " ")  // 20 x "▁a" (id 4)

    func testEmbedChunks() throws {
        let embedder = try Self.embedder()
        // L 8: W 6, overlap 6 * 25 / 100 = 1, starts 0 5 10 15; the last window 5 ids (signature 8)
        let chunks = try embedder.embedChunks(Self.long)
        XCTAssertEqual(chunks.map(\.inputIds.count), [8, 8, 8, 7])
        XCTAssertEqual(chunks[0], try embedder.embed(Self.long))  // the first chunk is the truncated text
        XCTAssertEqual(try embedder.embedChunks(Self.long, overlap: 0).count, 4)  // starts 0 6 12 18
        XCTAssertEqual(try embedder.embedChunks(Self.long, overlap: 5).count, 15)
        XCTAssertEqual(try embedder.embedChunks("a b"), [try embedder.embed("a b")])
        XCTAssertEqual(try embedder.embedChunks("a")[0].signature, "embed_4")
        let asynchronous = try awaitResult { try await embedder.embedChunks(Self.long) }
        XCTAssertEqual(asynchronous, chunks)
        XCTAssertThrowsError(try embedder.embedChunks(Self.long, overlap: 6)) {
            XCTAssertEqual(($0 as? EdgeM3Error)?.kind, .invalidInput)
        }
    }

    func testWritableIndexStoresEveryChunkOfAText() throws {
        let embedder = try Self.embedder()
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("edge-m3-chunks-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let index = try EdgeM3WritableIndex.create(folder: folder, dim: 2, dense: "int8", colbert: "fp16",
                                                   bundle: EdgeM3WritableIndex.bundleIdentity(of: embedder), embedder: embedder)
        try index.add(.int(1), text: Self.long)
        try index.add(.string("b"), text: "a b")
        XCTAssertEqual(try index.count, 2)
        XCTAssertEqual(try index.rows, 5)
        // the stub scores every row alike: ties by row, so passage 1's best chunk is its chunk 0
        let passages = try index.search(text: "a", k: 5, mode: "dense")
        XCTAssertEqual(passages.map(\.row), [0, 4])
        XCTAssertEqual(passages.map(\.chunk), [0, 0])
        let rows = try index.search(text: "a", k: 5, mode: "dense", chunks: true)
        XCTAssertEqual(rows.map(\.chunk), [0, 1, 2, 3, 0])
        XCTAssertEqual(rows.map(\.id), [.int(1), .int(1), .int(1), .int(1), .string("b")])
        XCTAssertThrowsError(try index.add(.int(3), chunks: [])) { XCTAssertEqual(($0 as? EdgeM3Error)?.kind, .invalidInput) }
        XCTAssertThrowsError(try index.update(.int(1), chunks: [])) { XCTAssertEqual(($0 as? EdgeM3Error)?.kind, .invalidInput) }
        try index.update(.int(1), text: "a")  // one chunk now, the last row
        XCTAssertEqual(try index.rows, 2)
        XCTAssertEqual(try index.search(text: "a", k: 5, mode: "dense", chunks: true).map(\.id), [.string("b"), .int(1)])
        try index.compact()
        let reopened = try EdgeM3WritableIndex(folder: folder, embedder: embedder)
        try reopened.add(.int(2), text: Self.long)
        XCTAssertEqual(try reopened.count, 3)
        XCTAssertEqual(try reopened.rows, 6)
        try reopened.remove(.int(2))  // every chunk
        XCTAssertEqual(try reopened.rows, 2)
        XCTAssertFalse(try reopened.contains(.int(2)))
    }

    /// An async call's result from a synchronous test.
    private func awaitResult<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) throws -> T {
        let done = expectation(description: "async")
        nonisolated(unsafe) var result: Result<T, any Error>?
        Task {
            do { result = .success(try await body()) } catch { result = .failure(error) }
            done.fulfill()
        }
        wait(for: [done], timeout: 30)
        return try result!.get()
    }
}
