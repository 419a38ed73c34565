import Foundation
import XCTest
@testable import EdgeM3

/// The conformance suite of the index format (docs/conformance.md) for the Swift kit: every case
/// folder tests/conformance/generate.py wrote under $EDGE_M3_CONFORMANCE (index/NAME/case.json and
/// its input/), opened by the kit's reader the case names; the outcome (count and passage ids, or
/// an error kind and message) must be the case's. tests/test_conformance.py runs it with
/// `swift test --filter EdgeM3ConformanceTests` and reads its lines: "conformance checked NAME"
/// per case, "conformance case NAME: why" per divergence. Without the variable it skips.
final class EdgeM3ConformanceTests: XCTestCase {
    private typealias PassageID = EdgeM3Index.PassageID

    /// A passage id as every runner renders it (tests/test_conformance.py render_id): the one
    /// place to change with the id type.
    private static func render(_ id: PassageID) -> String {
        switch id {
        case .int(let v): return String(v)
        case .string(let s): return "\"" + s.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
        }
    }

    private static func render(_ json: Any) -> String {
        if let s = json as? String { return render(.string(s)) }
        return render(.int((json as! NSNumber).int64Value))
    }

    private struct Outcome {
        var error: String?
        var message = ""
        var count = -1
        var ids: [String] = []
    }

    private func outcome(_ c: [String: Any], _ input: URL) throws -> Outcome {
        let open = c["open"] as? [String: Any] ?? [:]
        let bundleFiles = open["bundle_files"] as? [String: String]
        let verify = open["verify"] as? Bool ?? true
        do {
            if c["reader"] as? String == "writable" {
                if bundleFiles != nil { return Outcome(error: "unsupported", message: "bundle_files on a writable index") }
                let x = try EdgeM3WritableIndex(folder: input, verifySHA256: verify)
                let ids = try x.ids().map(Self.render)
                return Outcome(count: try x.count, ids: ids)
            }
            let index = try EdgeM3Index(folder: input, bundleFiles: bundleFiles, verifySHA256: verify)
            var seen = Set<PassageID>()
            let ids = index.ids.filter { seen.insert($0).inserted }.map(Self.render)
            return Outcome(count: ids.count, ids: ids)
        } catch let e as EdgeM3Error {
            return Outcome(error: e.kind.rawValue, message: e.message)
        }
    }

    /// Why the outcome is not the case's (nil: it is).
    private func mismatch(_ c: [String: Any], _ got: Outcome) -> String? {
        let expect = c["expect"] as! [String: Any]
        let gotText = got.error.map { "\($0) \(got.message)" } ?? "count \(got.count) ids \(got.ids)"
        if let error = expect["error"] as? String {
            if got.error != error { return "expected error \(error), got \(gotText)" }
            if got.message.contains("\n") { return "a message of several lines: \(got.message)" }
            if let part = (expect["messages"] as? [String: Any])?["swift"] as? String, !got.message.contains(part) {
                return "message \"\(got.message)\" lacks \"\(part)\""
            }
            return nil
        }
        let ids = (expect["ids"] as! [Any]).map(Self.render)
        let count = expect["count"] as! Int
        return got.error == nil && got.ids == ids && got.count == count ? nil : "expected count \(count) ids \(ids), got \(gotText)"
    }

    func testIndexCases() throws {
        guard let dir = ProcessInfo.processInfo.environment["EDGE_M3_CONFORMANCE"] else {
            throw XCTSkip("EDGE_M3_CONFORMANCE unset: tests/test_conformance.py generates the cases and sets it")
        }
        let root = URL(fileURLWithPath: dir).appendingPathComponent("index")
        let names = try FileManager.default.contentsOfDirectory(atPath: root.path).sorted()
        XCTAssertFalse(names.isEmpty, "no cases in \(root.path)")
        for name in names {
            let folder = root.appendingPathComponent(name)
            let c = try JSONSerialization.jsonObject(with: Data(contentsOf: folder.appendingPathComponent("case.json"))) as! [String: Any]
            if let why = mismatch(c, try outcome(c, folder.appendingPathComponent("input"))) {
                print("conformance case \(name): \(why)")
                XCTFail("conformance case \(name): \(why)")
            }
            print("conformance checked \(name)")
        }
    }
}
