import Foundation
import XCTest
@testable import EdgeM3

/// The writable index's operations shared with Python's `WritableIndex` and the Kotlin kit
/// (issue 59 item 3) that the op logs of tests/test_kit_writable.py do not reach alone: `ids()`
/// (every passage's id once, in logical row order), `removeAll(_:)` (one transaction: all or
/// nothing) and `close()` (every call after it refused). No bundle, no model: dim 2 vectors.
final class WritableIndexApiTests: FolderTestCase {
    private func vectors(_ seed: Int) throws -> Retrieval.Vectors {
        let a = Float(seed % 7 + 1), b = Float(seed % 5 + 2)
        let n = (a * a + b * b).squareRoot()
        return Retrieval.Vectors(dense: [a / n, b / n], lexical: try Retrieval.Lexical(ids: [Int32(seed % 3 + 1), 9], weights: [0.5, 0.25]),
                                 colbert: [[1, 0], [a / n, b / n]])
    }

    /// An index whose base (after one compaction) holds 1, "two" (2 chunks) and 3, with 4 and "five" added since.
    private func mixed(_ name: String) throws -> EdgeM3WritableIndex {
        let x = try EdgeM3WritableIndex.create(folder: root.appendingPathComponent(name), dim: 2, dense: "int8", colbert: "fp16")
        try x.add(.int(1), try vectors(1))
        try x.add(.string("two"), chunks: [try vectors(2), try vectors(3)])
        try x.add(.int(3), try vectors(4))
        try x.compact()
        try x.add(.int(4), try vectors(5))
        try x.add(.string("five"), chunks: [try vectors(6), try vectors(7)])
        return x
    }

    func testIdsInLogicalRowOrder() throws {
        let x = try mixed("ids")
        XCTAssertEqual(try x.ids(), [.int(1), .string("two"), .int(3), .int(4), .string("five")])
        XCTAssertEqual(try x.ids().count, try x.count)
        try x.update(.int(1), chunks: [try vectors(8), try vectors(9)])  // an update appends: the last rows
        try x.remove(.int(4))
        XCTAssertEqual(try x.ids(), [.string("two"), .int(3), .string("five"), .int(1)])
        try x.compact()
        XCTAssertEqual(try x.ids(), [.string("two"), .int(3), .string("five"), .int(1)])
        // Another connection sees the same ids, and the logical rows a chunk search numbers.
        let other = try EdgeM3WritableIndex(folder: x.folder)
        XCTAssertEqual(try other.ids(), try x.ids())
        let hits = try other.search(try vectors(1), k: 100, mode: "dense", chunks: true)
        XCTAssertEqual(hits.count, try other.rows)
        let firstRows = hits.filter { $0.chunk == 0 }.sorted { $0.row < $1.row }.map(\.id)
        XCTAssertEqual(firstRows, try other.ids())
        XCTAssertEqual(try EdgeM3WritableIndex.create(folder: root.appendingPathComponent("empty"), dim: 2).ids(), [])
    }

    func testRemoveAllIsOneTransaction() throws {
        let x = try mixed("many")
        let before = try x.search(try vectors(1), k: 10, mode: "colbert+sparse+dense", chunks: true)
        refuses(.unknownId, "id 9: not in the index") { try x.removeAll([.int(1), .int(9)]) }
        refuses(.unknownId, "an id is removed twice in one batch") { try x.removeAll([.int(1), .string("five"), .int(1)]) }
        XCTAssertEqual(try x.count, 5)  // nothing changed
        XCTAssertEqual(try x.search(try vectors(1), k: 10, mode: "colbert+sparse+dense", chunks: true), before)
        // A base passage (its two rows tombstoned) and an added one (two chunks deleted) at once.
        try x.removeAll([.string("two"), .string("five"), .int(3)])
        XCTAssertEqual(try x.ids(), [.int(1), .int(4)])
        XCTAssertEqual(try x.rows, 2)
        XCTAssertFalse(try x.contains(.string("two")))
        XCTAssertEqual(try EdgeM3WritableIndex(folder: x.folder).ids(), [.int(1), .int(4)])
        try x.removeAll([])
        XCTAssertEqual(try x.count, 2)
        try x.compact()
        XCTAssertEqual(try x.ids(), [.int(1), .int(4)])
    }

    /// removeAll leaves the index what the same removes one by one leave: same ids, same hits.
    func testRemoveAllEqualsRemovesOneByOne() throws {
        let a = try mixed("a"), b = try mixed("b")
        try a.removeAll([.int(1), .int(4)])
        try b.remove(.int(1))
        try b.remove(.int(4))
        XCTAssertEqual(try a.ids(), try b.ids())
        for mode in EdgeM3Contract.scoreModes {
            let q = try vectors(3)
            XCTAssertEqual(try a.search(q, k: 5, mode: mode).map { "\($0.row) \($0.id) \($0.chunk) \($0.score.bitPattern)" },
                           try b.search(q, k: 5, mode: mode).map { "\($0.row) \($0.id) \($0.chunk) \($0.score.bitPattern)" }, mode)
        }
    }

    func testCloseRefusesEveryCall() throws {
        let x = try mixed("closed")
        x.close()
        x.close()  // twice: harmless
        refuses(.invalidInput, "the index was closed") { _ = try x.count }
        refuses(.invalidInput, "the index was closed") { _ = try x.ids() }
        refuses(.invalidInput, "the index was closed") { _ = try x.contains(.int(1)) }
        refuses(.invalidInput, "the index was closed") { _ = try x.search(try self.vectors(1), k: 1, mode: "dense") }
        refuses(.invalidInput, "the index was closed") { try x.add(.int(7), try self.vectors(7)) }
        refuses(.invalidInput, "the index was closed") { try x.removeAll([.int(1)]) }
        refuses(.invalidInput, "the index was closed") { try x.compact() }
        XCTAssertEqual(try EdgeM3WritableIndex(folder: x.folder).count, 5)  // the folder as it was
    }
}
