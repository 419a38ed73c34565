import Dispatch
import Foundation
import XCTest
@testable import EdgeM3

#if os(macOS) || os(Linux)  // live on the desktop runner (LiteRtCRunner.swift)

/// The runner behind the embedder, every call counted; call `holdAt` (1-based) signals `entered`
/// and waits for `release`, as a long model call would.
private final class GateRunner: ModelRunner, @unchecked Sendable {  // counters under `lock`
    private let real: any ModelRunner
    private let holdAt: Int
    private let lock = NSLock()
    private var callCount = 0
    private var closeCount = 0
    let entered = DispatchSemaphore(value: 0)
    let release = DispatchSemaphore(value: 0)

    init(_ real: any ModelRunner, holdAt: Int = 0) {
        self.real = real
        self.holdAt = holdAt
    }

    var calls: Int { lock.lock(); defer { lock.unlock() }; return callCount }
    var closes: Int { lock.lock(); defer { lock.unlock() }; return closeCount }

    func run(_ signature: Signature, inputIds: [Int32], attentionMask: [Int32]) throws -> RawOutputs {
        lock.lock()
        callCount += 1
        let n = callCount
        let closed = closeCount > 0
        lock.unlock()
        if closed { throw EdgeM3Error("GateRunner: run after close") }
        if n == holdAt {
            entered.signal()
            release.wait()
        }
        return try real.run(signature, inputIds: inputIds, attentionMask: attentionMask)
    }

    func close() {
        lock.lock()
        closeCount += 1
        lock.unlock()
        real.close()
    }
}

/// One outcome handed from a Task to the test's thread.
private final class Outcome: @unchecked Sendable {  // fields under `lock`
    private let lock = NSLock()
    private var embeddings: [Embedding]?
    private var failure: (any Error)?
    let done = DispatchSemaphore(value: 0)

    func finish(_ value: [Embedding]?, _ error: (any Error)?) {
        lock.lock()
        embeddings = value
        failure = error
        lock.unlock()
        done.signal()
    }

    var result: ([Embedding]?, (any Error)?) { lock.lock(); defer { lock.unlock() }; return (embeddings, failure) }
}

/// The API of issue 34 on the desktop runner: options, the batch, cancellation before each model
/// call, close() during a running embed, each error kind by its cause, ScoreMode. Needs
/// EDGE_M3_BUNDLE and EDGE_M3_LITERT_LIB (tests/test_kit_api.py); without them, a skip.
final class EdgeM3ApiTests: XCTestCase {
    private static let texts = ["BGE-M3 on a phone.", "Le modèle tourne sur le téléphone.",
                                String(repeating: "x ", count: 300), "", "Ünïcödé 文字"]

    private func fixture() throws -> (URL, LiteRtLibrary) {
        let bundle = try EdgeM3GoldenTests.locate().bundle
        return (bundle, try LiteRtCRunnerTests.library())
    }

    private func gated(holdAt: Int = 0) throws -> (EdgeM3Embedder, GateRunner) {
        let (dir, lib) = try fixture()
        let opened = try EdgeM3Embedder.openBundle(directory: dir, checksumMemo: nil)
        let real = try LiteRtCRunner(library: lib, modelPath: opened.modelFile.path, model: opened.pipeline.model, threads: 1)
        let gate = GateRunner(real, holdAt: holdAt)
        return (EdgeM3Embedder(pipeline: opened.pipeline, tokenizer: opened.tokenizer, runner: gate), gate)
    }

    /// Every float of the embeddings as its bits (Float's == would call -0 and +0 equal).
    private func bits(_ es: [Embedding]) -> [[UInt32]] {
        es.map { e in
            (e.denseVecs ?? []).map(\.bitPattern) + (e.colbertVecs ?? []).flatMap { $0.map(\.bitPattern) }
                + (e.lexicalWeights ?? [:]).sorted { $0.key < $1.key }.map(\.value.bitPattern) + e.inputIds.map { UInt32($0) }
        }
    }

    /// The blocking batch (from an async test, which would pick the async overload).
    private func blocking(_ e: EdgeM3Embedder, _ texts: [String]) throws -> [Embedding] { try e.embed(texts) }

    private func kind(_ error: (any Error)?) -> EdgeM3ErrorKind? { (error as? EdgeM3Error)?.kind }

    private func assertKind(_ expected: EdgeM3ErrorKind, _ body: () throws -> Any, line: UInt = #line) {
        do {
            _ = try body()
            XCTFail("no error, expected \(expected)", line: line)
        } catch {
            XCTAssertEqual(kind(error), expected, "\(error)", line: line)
        }
    }

    func testOptionsOpenAsTheDirectoryInit() throws {
        let (dir, lib) = try fixture()
        let want = try EdgeM3Embedder(directory: dir, liteRt: lib, threads: 1).embed(Self.texts)
        var options = EdgeM3Options()
        options.source = .directory(dir)
        options.threads = 1
        options.checksumMemo = nil
        let chained = EdgeM3Options().source(.directory(dir)).threads(1).checksumMemo(nil)
        XCTAssertEqual(options, chained)
        XCTAssertEqual(try EdgeM3Embedder(options: options, liteRt: lib).embed(Self.texts), want)
        assertKind(.invalidInput) { try EdgeM3Embedder(options: options.threads(0), liteRt: lib) }
        assertKind(.invalidInput) { try EdgeM3Embedder(options: options.accelerator(.gpu), liteRt: lib) }
    }

    func testBatchEqualsOneByOne() async throws {
        let (e, gate) = try gated()
        let one = try Self.texts.map { try e.embed($0) }
        let syncBatch = try blocking(e, Self.texts)
        XCTAssertEqual(syncBatch, one)
        XCTAssertEqual(bits(syncBatch), bits(one))  // every float bit for bit
        let asyncBatch = try await e.embed(Self.texts)
        XCTAssertEqual(bits(asyncBatch), bits(one))
        let asyncOne = try await e.embed(Self.texts[1])
        XCTAssertEqual(asyncOne, one[1])
        XCTAssertEqual(gate.calls, 3 * Self.texts.count + 1)
        XCTAssertEqual(try blocking(e, []), [])
        XCTAssertEqual(gate.calls, 3 * Self.texts.count + 1)
    }

    func testTaskCancellationStopsBeforeTheNextModelCall() throws {
        let (e, gate) = try gated(holdAt: 2)
        let outcome = Outcome()
        let texts = Self.texts
        let task = Task.detached {
            do { outcome.finish(try await e.embed(texts), nil) } catch { outcome.finish(nil, error) }
        }
        XCTAssertEqual(gate.entered.wait(timeout: .now() + 60), .success, "the second model call never started")
        task.cancel()
        gate.release.signal()
        XCTAssertEqual(outcome.done.wait(timeout: .now() + 60), .success)
        let (value, error) = outcome.result
        XCTAssertNil(value)
        XCTAssertEqual(kind(error), .cancelled, "\(String(describing: error))")
        XCTAssertFalse(error is CancellationError)
        XCTAssertEqual(gate.calls, 2, "a model call after the cancellation")
        XCTAssertEqual(try e.embed(Array(texts.prefix(1))).count, 1)  // the embedder still works
    }

    func testCancelledBeforeTheFirstModelCall() async throws {
        let (e, gate) = try gated()
        let texts = Self.texts
        let task = Task.detached { () async throws -> [Embedding] in
            withUnsafeCurrentTask { $0?.cancel() }
            return try await e.embed(texts)
        }
        do {
            _ = try await task.value
            XCTFail("a cancelled Task's batch ran")
        } catch {
            XCTAssertEqual(kind(error), .cancelled, "\(error)")
        }
        XCTAssertEqual(gate.calls, 0)
    }

    func testCloseDuringARunningEmbedReturnsAtOnce() throws {
        let (e, gate) = try gated(holdAt: 1)
        let outcome = Outcome()
        let texts = Self.texts
        Thread.detachNewThread {
            do { outcome.finish(try e.embed(texts), nil) } catch { outcome.finish(nil, error) }
        }
        XCTAssertEqual(gate.entered.wait(timeout: .now() + 60), .success)
        let start = DispatchTime.now()
        e.close()
        e.close()
        let ms = Double(DispatchTime.now().uptimeNanoseconds - start.uptimeNanoseconds) / 1e6
        print("close() during a running embed returned in \(String(format: "%.3f", ms)) ms")
        XCTAssertLessThan(ms, 50)
        XCTAssertTrue(e.isClosed)
        XCTAssertEqual(gate.closes, 0, "the runner was closed under the running call")
        gate.release.signal()
        XCTAssertEqual(outcome.done.wait(timeout: .now() + 60), .success)
        let (value, error) = outcome.result
        XCTAssertNil(value)
        XCTAssertEqual(kind(error), .runnerClosed, "\(String(describing: error))")
        XCTAssertEqual(gate.calls, 1)
        XCTAssertEqual(gate.closes, 1)
        assertKind(.runnerClosed) { try e.embed("later") }
    }

    func testCloseDuringASingleAsyncEmbedLetsItFinish() throws {
        let (e, gate) = try gated(holdAt: 1)
        let want = try gated().0.embed(Self.texts[0])
        let outcome = Outcome()
        let text = Self.texts[0]
        Task.detached {
            do { outcome.finish([try await e.embed(text)], nil) } catch { outcome.finish(nil, error) }
        }
        XCTAssertEqual(gate.entered.wait(timeout: .now() + 60), .success)
        let start = DispatchTime.now()
        e.close()
        XCTAssertLessThan(Double(DispatchTime.now().uptimeNanoseconds - start.uptimeNanoseconds) / 1e6, 50)
        gate.release.signal()
        XCTAssertEqual(outcome.done.wait(timeout: .now() + 60), .success)
        let (value, error) = outcome.result
        XCTAssertNil(error)
        XCTAssertEqual(value, [want])
        XCTAssertEqual(gate.closes, 1)
    }

    func testClosedIdleEmbedderReleasesAtOnce() async throws {
        let (e, gate) = try gated()
        e.close()
        XCTAssertEqual(gate.closes, 1)
        do {
            _ = try await e.embed(Self.texts)
            XCTFail("a closed embedder ran")
        } catch {
            XCTAssertEqual(kind(error), .runnerClosed)
        }
        assertKind(.runnerClosed) { try e.embed(ids: [0, 2]) }
    }

    /// corruptBundle by a changed byte and by a missing model file (mismatch, runtime: LiteRtCRunnerTests).
    func testCorruptBundle() throws {
        let (dir, lib) = try fixture()
        let pipeline = try Pipeline(directory: dir)
        let fm = FileManager.default
        let copy = fm.temporaryDirectory.appendingPathComponent("edge_m3_api_\(UUID().uuidString)")
        try fm.createDirectory(at: copy, withIntermediateDirectories: true)
        addTeardownBlock { try? FileManager.default.removeItem(at: copy) }
        for name in try fm.contentsOfDirectory(atPath: dir.path) {
            try fm.copyItem(at: dir.appendingPathComponent(name), to: copy.appendingPathComponent(name))
        }
        let model = copy.appendingPathComponent(pipeline.model.file)
        var bytes = try Data(contentsOf: model)
        bytes[bytes.count / 2] ^= 1
        try bytes.write(to: model)
        let options = EdgeM3Options().source(.directory(copy)).threads(1).checksumMemo(nil)
        assertKind(.corruptBundle) { try EdgeM3Embedder(options: options, liteRt: lib) }
        try fm.removeItem(at: model)
        assertKind(.corruptBundle) { try EdgeM3Embedder(options: options, liteRt: lib) }
    }

    func testScoreModeEnum() throws {
        let (e, _) = try gated()
        let q = try Retrieval.Vectors(try e.embed(Self.texts[0]))
        let p = try Retrieval.Vectors(try e.embed(Self.texts[1]))
        XCTAssertEqual(ScoreMode.allCases.map(\.rawValue), EdgeM3Contract.scoreModes)
        for mode in ScoreMode.allCases {
            let a = try? Retrieval.score(q, p, mode: mode, weights: [0.4, 0.2, 0.4])
            let b = try? Retrieval.score(q, p, mode: mode.rawValue, weights: [0.4, 0.2, 0.4])
            XCTAssertEqual(a?.bitPattern, b?.bitPattern, mode.rawValue)
        }
    }
}
#endif
