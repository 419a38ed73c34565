import Dispatch
import Foundation

/// BGE-M3 embeddings for an app: `embed(_:)` gives FlagEmbedding's dense_vecs, lexical_weights
/// and colbert_vecs (whichever heads the bundle exports).
///
/// The model runner (a TFLite `Interpreter`: see TFLiteRunner.swift) is not thread-safe, so
/// every call runs on the embedder's own serial queue: share one instance freely, callers
/// queue; `await embed(_:)` waits without blocking a thread of Swift's cooperative pool.
/// For parallel throughput create one embedder per worker (they share the mapped model pages).
public final class EdgeM3Embedder: @unchecked Sendable {  // mutable state only on `queue`
    /// Where `make build` (edge_m3.bundle.copy_to_kits) puts the bundle: ios_assets/EdgeM3Resources.
    /// Add that folder to the app target as a folder reference (blue folder) so its files keep their names.
    public static let resourceFolder = EdgeM3Contract.resourceFolder

    public let pipeline: Pipeline
    private let encoder: any PieceEncoder
    private let runner: any ModelRunner
    private let queue = DispatchQueue(label: "dev.edgem3.embedder", qos: .userInitiated)

    public init(pipeline: Pipeline, encoder: any PieceEncoder, runner: any ModelRunner) {
        self.pipeline = pipeline
        self.encoder = encoder
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
    public func embed(_ text: String) throws -> Embedding {
        try queue.sync { try pipeline.embed(text, encoder: encoder, runner: runner) }
    }

    /// Steps 1-5 for one text, suspending while the model runs on the embedder's queue.
    public func embed(_ text: String) async throws -> Embedding {
        try await onQueue { try $0.pipeline.embed(text, encoder: $0.encoder, runner: $0.runner) }
    }

    /// Steps 3-5 for ids that are already tokenized and truncated (the golden test's entry point).
    public func embed(ids: [Int]) throws -> Embedding {
        try queue.sync { try pipeline.run(pipeline.encode(ids: ids), on: runner) }
    }

    public func embed(ids: [Int]) async throws -> Embedding {
        try await onQueue { try $0.pipeline.run($0.pipeline.encode(ids: ids), on: $0.runner) }
    }

    private func onQueue<T: Sendable>(_ work: @escaping @Sendable (EdgeM3Embedder) throws -> T) async throws -> T {
        try Task.checkCancellation()
        return try await withCheckedThrowingContinuation { continuation in
            queue.async { continuation.resume(with: Result { try work(self) }) }
        }
    }
}
