import Foundation
import XCTest
@testable import EdgeM3

/// A test case with its own empty temporary folder, `root`, made before each test and removed
/// after it: the refusal and API tests write their indexes there.
class FolderTestCase: XCTestCase {
    var root: URL!

    override func setUpWithError() throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("edge-m3-\(type(of: self))-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: root)
    }
}

extension XCTestCase {
    /// `body` throws an EdgeM3Error of exactly `kind` whose message holds `contains`.
    func refuses(_ kind: EdgeM3ErrorKind, _ contains: String, file: StaticString = #filePath, line: UInt = #line,
                 _ body: () throws -> Void) {
        XCTAssertThrowsError(try body(), file: file, line: line) { error in
            guard let e = error as? EdgeM3Error else { return XCTFail("not an EdgeM3Error: \(error)", file: file, line: line) }
            XCTAssertEqual(e.kind, kind, e.message, file: file, line: line)
            XCTAssertTrue(e.message.contains(contains), "\"\(e.message)\" lacks \"\(contains)\"", file: file, line: line)
        }
    }
}
