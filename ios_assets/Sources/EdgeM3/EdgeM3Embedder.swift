import Dispatch
import Foundation

/// Text embeddings for an app (BGE-M3, or a BERT such as all-MiniLM-L6-v2): `embed(_:)` gives
/// FlagEmbedding's dense_vecs, lexical_weights and colbert_vecs (whichever heads the bundle exports).
///
/// The model runner (TFLiteRunner.swift on a phone, LiteRtCRunner.swift on a desktop) is not thread-safe, so
/// every call runs on the embedder's own serial queue: share one instance freely, callers
/// queue; `await embed(_:)` waits without blocking a thread of Swift's cooperative pool.
/// For parallel throughput create one embedder per worker (they share the mapped model pages).
nonisolated public final class EdgeM3Embedder: @unchecked Sendable {  // mutable state only on `queue`
    /// Where `make build` (edge_m3.bundle.copy_to_kits) puts the bundle: ios_assets/EdgeM3Resources.
    /// Add that folder to the app target as a folder reference (blue folder) so its files keep their names.
    public static let resourceFolder = EdgeM3Contract.resourceFolder

    public let pipeline: Pipeline
    /// The bundle's own tokenizer, of its manifest's kind: the reference's ids (tests/test_kit_tokenizer.py), no binding.
    public let tokenizer: any EdgeM3Tokenizer
    private let runner: any ModelRunner
    private let queue = DispatchQueue(label: "dev.edgem3.embedder", qos: .userInitiated)

    /// `init(directory:)` (TFLiteRunner.swift) and `init(directory:liteRt:)` (LiteRtCRunner.swift)
    /// build all three from a bundle folder.
    public init(pipeline: Pipeline, tokenizer: any EdgeM3Tokenizer, runner: any ModelRunner) {
        self.pipeline = pipeline
        self.tokenizer = tokenizer
        self.runner = runner
    }

    public var manifest: Manifest { pipeline.manifest }

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
        try queue.sync { try pipeline.embed(text, tokenizer: tokenizer, runner: runner) }
    }

    /// Steps 1-5 for one text, suspending while the model runs on the embedder's queue.
    public func embed(_ text: String) async throws -> Embedding {
        try await onQueue { try $0.pipeline.embed(text, tokenizer: $0.tokenizer, runner: $0.runner) }
    }

    /// Steps 1-5 for UTF-16 code units as an NSString or a web view holds them, lone surrogates
    /// possible (a Swift String would have replaced them by U+FFFD): a lone surrogate throws the
    /// Python pipeline's error, "text is not valid Unicode (lone surrogate at index N)".
    public func embed(utf16 units: [UInt16]) throws -> Embedding {
        try queue.sync { try pipeline.run(pipeline.encode(utf16: units, tokenizer: tokenizer), on: runner) }
    }

    public func embed(utf16 units: [UInt16]) async throws -> Embedding {
        try await onQueue { try $0.pipeline.run($0.pipeline.encode(utf16: units, tokenizer: $0.tokenizer), on: $0.runner) }
    }

    /// Steps 3-5 for ids that are already tokenized and truncated (the golden test's entry point).
    public func embed(ids: [Int]) throws -> Embedding {
        try queue.sync { try pipeline.run(pipeline.encode(ids: ids), on: runner) }
    }

    public func embed(ids: [Int]) async throws -> Embedding {
        try await onQueue { try $0.pipeline.run($0.pipeline.encode(ids: ids), on: $0.runner) }
    }

    /// A bundle folder as every runner opens it: manifest.json, vocab_map.json (trimmed bundles),
    /// the tokenizer of its kind (sentencepiece.bpe.model, vocab.txt), and the model file checked against the
    /// manifest (size; SHA-256 on the first load, remembered in `checksumMemo` when given).
    public static func openBundle(directory: URL, checksumMemo: URL?) throws
        -> (pipeline: Pipeline, tokenizer: any EdgeM3Tokenizer, modelFile: URL, entry: FileEntry?) {
        let pipeline = try Pipeline(directory: directory, format: "tflite")
        let tokenizer = try openTokenizer(directory: directory, spec: pipeline.manifest.tokenizer)
        let file = directory.appendingPathComponent(pipeline.model.file)
        let entry = pipeline.manifest.files[pipeline.model.file]
        if let entry {
            try FileCheck.verify(file, against: entry, memo: checksumMemo)
        }
        return (pipeline, tokenizer, file, entry)
    }

    private func onQueue<T: Sendable>(_ work: @escaping @Sendable (EdgeM3Embedder) throws -> T) async throws -> T {
        try Task.checkCancellation()
        return try await withCheckedThrowingContinuation { continuation in
            queue.async { continuation.resume(with: Result { try work(self) }) }
        }
    }
}
