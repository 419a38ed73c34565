import Foundation
import XCTest
@testable import EdgeM3

#if os(macOS) || os(Linux)  // the desktop runner exists there only (LiteRtCRunner.swift)

/// The desktop runner's bad input: each a one-line EdgeM3Error, never a crash.
/// `EDGE_M3_LITERT_LIB`: the ai-edge-litert wheel's libLiteRt (tests/test_swift_kit.py sets it, and
/// `EDGE_M3_BUNDLE`); without it the tests that need it skip, or fail where CI requires Swift.
final class LiteRtCRunnerTests: XCTestCase {
    /// The library under test; missing: a skip on a developer machine, a failure in CI.
    static func library() throws -> LiteRtLibrary {
        let env = ProcessInfo.processInfo.environment
        guard let path = env["EDGE_M3_LITERT_LIB"], !path.isEmpty else {
            if env["CI"] != nil || env["EDGE_M3_REQUIRE_SWIFT"] != nil {
                throw EdgeM3Error("EDGE_M3_LITERT_LIB is not set: CI must run the kit live (the ai-edge-litert wheel's libLiteRt)")
            }
            throw XCTSkip("no EDGE_M3_LITERT_LIB: the live runner is not tested")
        }
        return try LiteRtLibrary(path: path)
    }

    private func assertError(_ expected: String, kind: EdgeM3ErrorKind = .invalidInput, _ body: () throws -> Any,
                             line: UInt = #line) {
        do {
            _ = try body()
            XCTFail("no error, expected one with \"\(expected)\"", line: line)
        } catch let error as EdgeM3Error {
            XCTAssertTrue(error.message.contains(expected), "\(error.message) lacks \"\(expected)\"", line: line)
            XCTAssertFalse(error.message.contains("\n"), "one line: \(error.message)", line: line)
            XCTAssertEqual(error.kind, kind, error.message, line: line)
        } catch {
            XCTFail("\(error) is not an EdgeM3Error", line: line)
        }
    }

    private func scratch() throws -> URL {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("edge_m3_litert_\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        addTeardownBlock { try? FileManager.default.removeItem(at: dir) }
        return dir
    }

    func testMissingLibrary() {
        assertError("no such LiteRT library", kind: .runtimeMissing) { try LiteRtLibrary(path: "/nonexistent/libLiteRt.so") }
    }

    func testFileThatIsNotALibrary() throws {
        let file = try scratch().appendingPathComponent("libLiteRt.so")
        try Data("not a library".utf8).write(to: file)
        assertError("cannot load it as a library", kind: .runtimeMissing) { try LiteRtLibrary(path: file.path) }
    }

    /// A real shared library without LiteRT's symbols: the C library this process runs on
    /// (on Apple platforms, this test bundle's own binary).
    func testLibraryThatIsNotLiteRt() throws {
        #if os(Linux)
        let maps = try String(contentsOfFile: "/proc/self/maps", encoding: .utf8)
        let libc = maps.split(separator: "\n").compactMap { $0.split(separator: " ").last.map(String.init) }
            .first { $0.hasPrefix("/") && ($0.contains("/libc.so") || $0.contains("/libc-")) }
        #else
        let libc = Bundle(for: Self.self).executablePath
        #endif
        guard let libc else { throw XCTSkip("no C library found to load") }
        assertError("not LiteRT's C API", kind: .runtimeMissing) { try LiteRtLibrary(path: libc) }
    }

    private func bundle() throws -> (URL, Pipeline) {
        let fixture = try EdgeM3GoldenTests.locate()
        return (fixture.bundle, try Pipeline(directory: fixture.bundle))
    }

    /// Model files LiteRT cannot read: not a model at all, and a model cut short.
    func testModelTheLibraryCannotRun() throws {
        let (dir, pipeline) = try bundle()  // first: no bundle, nothing to run (a skip)
        let lib = try Self.library()
        let garbage = try scratch().appendingPathComponent("model.tflite")
        try Data(repeating: 7, count: 4096).write(to: garbage)
        assertError("LiteRT could not read", kind: .runtimeFailed) { try LiteRtCRunner(library: lib, modelPath: garbage.path, model: pipeline.model) }
        let model = try Data(contentsOf: dir.appendingPathComponent(pipeline.model.file))
        let cut = try scratch().appendingPathComponent("cut.tflite")
        try model.prefix(model.count / 2).write(to: cut)
        // LiteRT does not verify the flatbuffer (a cut file crashes it): the manifest's entry is checked first.
        let entry = try XCTUnwrap(pipeline.manifest.files[pipeline.model.file])
        assertError("manifest.json says \(entry.size)", kind: .corruptBundle) {
            try LiteRtCRunner(library: lib, modelPath: cut.path, model: pipeline.model, file: entry)
        }
        // The whole bundle, as the embedder opens it: the same refusal, never LiteRT's crash.
        let copy = try scratch()
        for name in try FileManager.default.contentsOfDirectory(atPath: dir.path) {
            try FileManager.default.copyItem(at: dir.appendingPathComponent(name), to: copy.appendingPathComponent(name))
        }
        try FileManager.default.removeItem(at: copy.appendingPathComponent(pipeline.model.file))
        try FileManager.default.copyItem(at: cut, to: copy.appendingPathComponent(pipeline.model.file))
        assertError("manifest.json says \(entry.size)", kind: .corruptBundle) { try EdgeM3Embedder(directory: copy, liteRt: lib) }
        assertError("not found", kind: .corruptBundle) { try LiteRtCRunner(library: lib, modelPath: "/nonexistent.tflite", model: pipeline.model) }
        assertError("threads: 0") { try LiteRtCRunner(library: lib, modelPath: garbage.path, model: pipeline.model, threads: 0) }
    }

    /// A manifest whose signatures are not the model's: a name it lacks, another length, another
    /// output shape or dtype, an output the model does not have.
    func testSignaturesThatDifferFromTheManifest() throws {
        let (dir, pipeline) = try bundle()  // first: no bundle, nothing to run (a skip)
        let lib = try Self.library()
        let path = dir.appendingPathComponent(pipeline.model.file).path
        let model = pipeline.model
        func entry(_ change: (inout Signature) -> Void) throws -> ModelEntry {
            var signatures = model.signatures
            change(&signatures[0])
            return try ModelEntry(format: model.format, file: model.file, quant: model.quant, signatures: signatures)
        }
        let first = model.signatures[0]
        assertError("no signature embed_999 as manifest.json says", kind: .signatureMismatch) {
            try LiteRtCRunner(library: lib, modelPath: path, model: entry { $0.name = "embed_999" })
        }
        assertError("differs from manifest.json: input", kind: .signatureMismatch) {
            try LiteRtCRunner(library: lib, modelPath: path, model: entry { $0.seqLen += 1 })
        }
        let out = first.outputs[0]
        assertError("differs from manifest.json: output \(out.name)", kind: .signatureMismatch) {
            try LiteRtCRunner(library: lib, modelPath: path, model: entry { $0.outputs[0].shape[1] += 1 })
        }
        assertError("differs from manifest.json: output \(out.name)", kind: .signatureMismatch) {
            try LiteRtCRunner(library: lib, modelPath: path, model: entry { $0.outputs[0].dtype = "float16" })
        }
        assertError("differs from manifest.json: no output \(EdgeM3Contract.sparseWeights)x", kind: .signatureMismatch) {
            try LiteRtCRunner(library: lib, modelPath: path, model: entry {
                $0.outputs.append(TensorSpec(name: EdgeM3Contract.sparseWeights + "x", shape: [1], dtype: "float32"))
            })
        }
        // The unchanged entry opens, runs every signature, and refuses inputs of the wrong length.
        let runner = try LiteRtCRunner(library: lib, modelPath: path, model: model)
        XCTAssertEqual(Set(runner.signatureKeys), Set(model.signatures.map(\.name)))
        for s in model.signatures {
            let raw = try runner.run(s, inputIds: [Int32](repeating: 1, count: s.seqLen), attentionMask: [Int32](repeating: 1, count: s.seqLen))
            XCTAssertEqual(EdgeM3GoldenTests.shapes(raw), EdgeM3GoldenTests.shapes(s), s.name)
        }
        assertError("expected \(first.seqLen)") { try runner.run(first, inputIds: [0], attentionMask: [1]) }
        // Closed: its own error, never a use of freed memory.
        runner.close()
        let ids = [Int32](repeating: 1, count: first.seqLen)
        assertError("closed", kind: .runnerClosed) { try runner.run(first, inputIds: ids, attentionMask: ids) }
    }
}
#endif
