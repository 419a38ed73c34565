import Dispatch
import Foundation

/// Text embeddings for an app (BGE-M3, or a BERT such as all-MiniLM-L6-v2): `embed(_:)` gives
/// FlagEmbedding's dense_vecs, lexical_weights and colbert_vecs (whichever heads the bundle exports);
/// `embed(_ texts:)` a batch, equal bit for bit to the texts embedded one by one.
///
/// The model runner (TFLiteRunner.swift or LiteRTRunner.swift on a phone, LiteRtCRunner.swift on a desktop) is not thread-safe, so
/// every call runs on the embedder's own serial queue: share one instance freely, callers
/// queue; `await embed(_:)` waits without blocking a thread of Swift's cooperative pool.
/// For parallel throughput create one embedder per worker (they share the mapped model pages).
///
/// Cancellation: the `async` calls check their `Task` before each model call (and, on a runtime that
/// can stop one, LiteRT's, during it); cancelled, a batch stops there and throws `EdgeM3Error` of kind `.cancelled` (never `CancellationError`: every
/// error of the kit is one type). `close()` returns at once, also while an embed runs: the runner is
/// released when the running model call returns, and every later call throws `.runnerClosed`.
nonisolated public final class EdgeM3Embedder: @unchecked Sendable {  // mutable state only on `queue` or under `state`
    /// Where `make build` (edge_m3.bundle.copy_to_kits) puts the bundle: ios_assets/EdgeM3Resources.
    /// Add that folder to the app target as a folder reference (blue folder) so its files keep their names.
    public static let resourceFolder = EdgeM3Contract.resourceFolder

    public let pipeline: Pipeline
    /// The bundle's own tokenizer, of its manifest's kind: the reference's ids (tests/test_kit_tokenizer.py), no binding.
    public let tokenizer: any EdgeM3Tokenizer
    private let runner: any ModelRunner
    private let queue = DispatchQueue(label: "dev.edgem3.embedder", qos: .userInitiated)
    private let state = RunState()

    /// `init(directory:)` (TFLiteRunner.swift or LiteRTRunner.swift) and `init(directory:liteRt:)` (LiteRtCRunner.swift)
    /// build all three from a bundle folder.
    public init(pipeline: Pipeline, tokenizer: any EdgeM3Tokenizer, runner: any ModelRunner) {
        self.pipeline = pipeline
        self.tokenizer = tokenizer
        self.runner = runner
    }

    public var manifest: Manifest { pipeline.manifest }

    /// True once `close()` was called (the model may still be finishing the call under way).
    public var isClosed: Bool { state.isClosed }

    /// The bundle folder copied into the app: `<bundle>/EdgeM3Resources/`.
    public static func bundledDirectory(in bundle: Bundle = .main) throws -> URL {
        guard let directory = bundle.url(forResource: resourceFolder, withExtension: nil) else {
            throw EdgeM3Error("\(resourceFolder): not in the app bundle (add ios_assets/\(resourceFolder) as a folder reference)")
        }
        return directory
    }

    /// Steps 1-5 of docs/bundle-format.md for one text; blocks the calling thread (not the main one).
    /// Text longer than the longest signature is truncated, keeping `</s>`, as in Python.
    public func embed(_ text: String) throws -> Embedding {
        try queue.sync { try pipeline.embed(text, tokenizer: tokenizer, runner: guarded(nil)) }
    }

    /// Steps 1-5 for each chunk of `text` (`Pipeline.encodeChunks`: windows of the longest
    /// signature that overlap by `overlap` tokens, nil the default), in chunk order, in one turn on
    /// the queue; blocks the calling thread. A text that fits is one chunk, equal to `embed(text)`.
    public func embedChunks(_ text: String, overlap: Int? = nil) throws -> [Embedding] {
        try queue.sync { try chunks(text, overlap, nil) }
    }

    /// The same, suspending while the model runs; the calling `Task` is checked before each chunk.
    public func embedChunks(_ text: String, overlap: Int? = nil) async throws -> [Embedding] {
        try await onQueue { e, cancel in try e.chunks(text, overlap, cancel) }
    }

    /// Steps 1-5 for each text, in order, in one turn on the queue; blocks the calling thread.
    public func embed(_ texts: [String]) throws -> [Embedding] {
        try queue.sync { try batch(texts, nil) }
    }

    /// Steps 1-5 for one text, suspending while the model runs on the embedder's queue.
    public func embed(_ text: String) async throws -> Embedding {
        try await embed([text])[0]
    }

    /// Steps 1-5 for each text, in order, in one turn on the queue. The calling `Task` is checked
    /// before each model call: cancelled, the batch stops there with `EdgeM3Error` `.cancelled`.
    public func embed(_ texts: [String]) async throws -> [Embedding] {
        try await onQueue { e, cancel in try e.batch(texts, cancel) }
    }

    /// Steps 1-5 for UTF-16 code units as an NSString or a web view holds them, lone surrogates
    /// possible (a Swift String would have replaced them by U+FFFD): a lone surrogate throws the
    /// Python pipeline's error, "text is not valid Unicode (lone surrogate at index N)".
    public func embed(utf16 units: [UInt16]) throws -> Embedding {
        try queue.sync { try pipeline.run(pipeline.encode(utf16: units, tokenizer: tokenizer), on: guarded(nil)) }
    }

    public func embed(utf16 units: [UInt16]) async throws -> Embedding {
        try await onQueue { e, cancel in
            try e.pipeline.run(e.pipeline.encode(utf16: units, tokenizer: e.tokenizer), on: e.guarded(cancel))
        }
    }

    /// Steps 3-5 for ids that are already tokenized and truncated (the golden test's entry point).
    public func embed(ids: [Int]) throws -> Embedding {
        try queue.sync { try pipeline.run(pipeline.encode(ids: ids), on: guarded(nil)) }
    }

    public func embed(ids: [Int]) async throws -> Embedding {
        try await onQueue { e, cancel in try e.pipeline.run(e.pipeline.encode(ids: ids), on: e.guarded(cancel)) }
    }

    /// Returns at once, even while an embed runs on the queue: the runner is released now if idle,
    /// else when the running model call returns (that call's text completes; the rest of its batch,
    /// queued calls and every later call throw `.runnerClosed`). Idempotent.
    public func close() {
        if state.close() { runner.close() }
    }

    /// A bundle folder as every runner opens it: manifest.json, vocab_map.json (trimmed bundles),
    /// the tokenizer of its kind (sentencepiece.bpe.model, vocab.txt), and the model file checked against the
    /// manifest (size; SHA-256 on the first load, remembered in `checksumMemo` when given).
    public static func openBundle(directory: URL, checksumMemo: URL?) throws
        -> (pipeline: Pipeline, tokenizer: any EdgeM3Tokenizer, modelFile: URL, entry: FileEntry?) {
        let pipeline = try Pipeline(directory: directory, format: "tflite")
        let tokenizer = try openTokenizer(directory: directory, spec: pipeline.manifest.tokenizer)
        let file = directory.appendingPathComponent(pipeline.model.file)
        // No entry, no check: refused as the Android kit and Python refuse it.
        guard let entry = pipeline.manifest.files[pipeline.model.file] else {
            throw EdgeM3Error("\(EdgeM3Contract.manifest): no files entry for \(pipeline.model.file)")
        }
        try FileCheck.verify(file, against: entry, memo: checksumMemo)
        return (pipeline, tokenizer, file, entry)
    }

    /// Caches/edge_m3: the weight cache files and the checksum memo (the OS may purge it).
    public static var cachesDirectory: URL? {
        FileManager.default.urls(for: .cachesDirectory, in: .userDomainMask).first?.appendingPathComponent(EdgeM3Contract.assetDir)
    }

    /// Where the first load's checksum success is remembered: Caches/edge_m3 (purged: the next
    /// load hashes again).
    public static var defaultChecksumMemo: URL? { cachesDirectory }

    // MARK: - turns on the model

    private func batch(_ texts: [String], _ cancel: CancelFlag?) throws -> [Embedding] {
        var out = [Embedding]()
        out.reserveCapacity(texts.count)
        for (i, text) in texts.enumerated() {
            out.append(try pipeline.embed(text, tokenizer: tokenizer, runner: guarded(cancel, text: i, of: texts.count)))
        }
        return out
    }

    private func chunks(_ text: String, _ overlap: Int?, _ cancel: CancelFlag?) throws -> [Embedding] {
        let encoded = try pipeline.encodeChunks(text, tokenizer: tokenizer, overlap: overlap)
        return try encoded.enumerated().map { i, e in
            try pipeline.run(e, on: guarded(cancel, text: i, of: encoded.count))
        }
    }

    private func guarded(_ cancel: CancelFlag?, text i: Int = 0, of n: Int = 1) -> Guarded {
        Guarded(runner: runner, state: state, cancel: cancel, what: "text \(i + 1) of \(n)")
    }

    /// `work` on the queue; the calling Task's cancellation sets the flag `work` checks before each model call.
    private func onQueue<T: Sendable>(_ work: @escaping @Sendable (EdgeM3Embedder, CancelFlag) throws -> T) async throws -> T {
        let cancel = CancelFlag()
        if Task.isCancelled { cancel.set() }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
                queue.async { continuation.resume(with: Result { try work(self, cancel) }) }
            }
        } onCancel: {
            cancel.set()
        }
    }
}

/// Set from any thread when the calling Task is cancelled; read on the queue before each model call.
nonisolated final class CancelFlag: @unchecked Sendable {  // `value` only under `lock`
    private let lock = NSLock()
    private var value = false

    func set() {
        lock.lock()
        value = true
        lock.unlock()
    }

    var isSet: Bool {
        lock.lock()
        defer { lock.unlock() }
        return value
    }
}

/// The embedder's closed / running / released flags, each flip under one short lock (never held
/// across a model call, so `close()` never waits for one).
nonisolated final class RunState: @unchecked Sendable {  // every field only under `lock`
    private let lock = NSLock()
    private var closed = false
    private var running = false
    private var released = false

    var isClosed: Bool {
        lock.lock()
        defer { lock.unlock() }
        return closed
    }

    /// Marks closed; true when the caller must release the runner now (no model call under way).
    func close() -> Bool {
        lock.lock()
        defer { lock.unlock() }
        if closed { return false }
        closed = true
        if running { return false }
        released = true
        return true
    }

    /// Before a model call: throws `.runnerClosed` once closed, else marks the call under way.
    func begin() throws {
        lock.lock()
        defer { lock.unlock() }
        if closed { throw EdgeM3Error("EdgeM3Embedder: closed", kind: .runnerClosed) }
        running = true
    }

    /// After a model call: true when `close()` came during it and the caller must release the runner.
    func end() -> Bool {
        lock.lock()
        defer { lock.unlock() }
        running = false
        if closed && !released {
            released = true
            return true
        }
        return false
    }
}

/// The runner behind the checks each model call makes: cancelled, closed, then the call.
nonisolated struct Guarded: ModelRunner {
    let runner: any ModelRunner
    let state: RunState
    let cancel: CancelFlag?
    let what: String

    func run(_ signature: Signature, inputIds: [Int32], attentionMask: [Int32]) throws -> RawOutputs {
        if let cancel, cancel.isSet {
            throw EdgeM3Error("EdgeM3Embedder: cancelled before the model call of \(what)", kind: .cancelled)
        }
        try state.begin()
        defer { if state.end() { runner.close() } }
        guard let cancel else { return try runner.run(signature, inputIds: inputIds, attentionMask: attentionMask) }
        // A runtime that can stop inside the call (LiteRT) asks the same flag while the model runs.
        return try runner.run(signature, inputIds: inputIds, attentionMask: attentionMask, isCancelled: { cancel.isSet })
    }
}
