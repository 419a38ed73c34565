import Foundation

// The embedder's options, the way MediaPipe's TextEmbedderOptions reads (README, "The API beside
// MediaPipe's"): a value with defaults, set field by field or with the chaining setters, then
// `EdgeM3Embedder(options:)` (TFLiteRunner.swift or LiteRTRunner.swift, the phone) or `EdgeM3Embedder(options:liteRt:)`
// (LiteRtCRunner.swift, a desktop). Also the ScoreMode overloads of the String-taking mode calls
// (ScoreMode is generated from spec.SCORE_MODES into EdgeM3Contract.swift).

/// Which hardware runs the model.
nonisolated public enum EdgeM3Accelerator: String, CaseIterable, Hashable, Sendable {
    /// XNNPACK on the CPU, with the weight cache: what every figure in the README measured.
    case cpu
    /// Not wired for TensorFlowLiteSwift (its `MetalDelegate` is a separate pod subspec): `validate()`
    /// refuses it, so `init(options:)` throws `.invalidInput` on every runner. LiteRT's GPU accelerator
    /// alone: `EdgeM3Embedder(directory:runtime:accelerator:)` / `LiteRTRunner(accelerator:)`.
    case gpu
}

/// Where XNNPACK keeps the weights it packs for its kernels. The model's signatures
/// (embed_16 ... embed_512) share one set of weights; without a cache each packs its own copy.
nonisolated public enum EdgeM3WeightCache: Hashable, Sendable {
    /// A file named by the model's SHA-256 and the app build: the first start packs into it,
    /// later starts map it instead of packing again.
    case file(directory: URL)
    /// Packed once, kept for this runner only (on Apple platforms in a temporary file:
    /// XNNPACK's in-memory cache needs Linux's memfd_create).
    case memory
    /// The pod's own XNNPACK (`isXNNPackEnabled`): one packed copy per signature.
    case off

    /// `.file` in Caches/edge_m3 (the OS may purge it: the next start packs again).
    public static var caches: EdgeM3WeightCache {
        EdgeM3Embedder.cachesDirectory.map { .file(directory: $0) } ?? .memory
    }
}

/// Where the bundle is.
nonisolated public enum EdgeM3BundleSource: Hashable, Sendable {
    /// `EdgeM3Resources/` in the app's main bundle (a folder reference), as `make build` lays it out.
    case appResources
    /// A folder on disk: On-Demand Resources, Background Assets, a download.
    case directory(URL)

    /// The folder this source names.
    public func resolve() throws -> URL {
        switch self {
        case .appResources: return try EdgeM3Embedder.bundledDirectory()
        case .directory(let url): return url
        }
    }
}

/// Everything `EdgeM3Embedder(options:)` takes. Unset, each is what `init(directory:)` defaults
/// to: the app's EdgeM3Resources, 2 threads (`EdgeM3Contract.deviceThreads`), the weight cache in
/// Caches, the CPU, the checksum memo in Caches.
/// ```swift
/// var options = EdgeM3Options()
/// options.source = .directory(url)
/// options.threads = 2
/// // or: EdgeM3Options().source(.directory(url)).threads(2)
/// ```
nonisolated public struct EdgeM3Options: Hashable, Sendable {
    public var source: EdgeM3BundleSource
    /// XNNPACK threads inside one model call (1 or more).
    public var threads: Int
    /// The phone's runners (TFLiteRunner, LiteRTRunner); the desktop runner always packs once in memory.
    public var weightCache: EdgeM3WeightCache
    public var accelerator: EdgeM3Accelerator
    /// Where the first load's checksum success is remembered; nil: hash every load.
    public var checksumMemo: URL?

    public init(source: EdgeM3BundleSource = .appResources, threads: Int = EdgeM3Contract.deviceThreads,
                weightCache: EdgeM3WeightCache = .caches, accelerator: EdgeM3Accelerator = .cpu,
                checksumMemo: URL? = EdgeM3Embedder.defaultChecksumMemo) {
        self.source = source
        self.threads = threads
        self.weightCache = weightCache
        self.accelerator = accelerator
        self.checksumMemo = checksumMemo
    }

    public func source(_ value: EdgeM3BundleSource) -> Self { var o = self; o.source = value; return o }
    public func threads(_ value: Int) -> Self { var o = self; o.threads = value; return o }
    public func weightCache(_ value: EdgeM3WeightCache) -> Self { var o = self; o.weightCache = value; return o }
    public func accelerator(_ value: EdgeM3Accelerator) -> Self { var o = self; o.accelerator = value; return o }
    public func checksumMemo(_ value: URL?) -> Self { var o = self; o.checksumMemo = value; return o }

    /// Throws `.invalidInput` naming the option a runner cannot take.
    public func validate() throws {
        if threads < 1 { throw EdgeM3Error("threads: \(threads), expected 1 or more") }
        if accelerator == .gpu {
            throw EdgeM3Error("accelerator gpu: not in this kit yet (TensorFlowLiteSwift's MetalDelegate is not wired); use .cpu")
        }
    }
}

nonisolated extension Retrieval {
    /// `score(_:_:mode:weights:)` with the mode as an enum.
    public static func score(_ q: Vectors, _ p: Vectors, mode: ScoreMode, weights: [Double] = defaultWeights) throws -> Double {
        try score(q, p, mode: mode.rawValue, weights: weights)
    }
}

nonisolated extension EdgeM3Index {
    /// `search(_:k:mode:weights:chunks:)` with the mode as an enum.
    public func search(_ query: Embedding, k: Int, mode: ScoreMode, weights: [Double] = Retrieval.defaultWeights,
                       chunks: Bool = false) throws -> [Hit] {
        try search(query, k: k, mode: mode.rawValue, weights: weights, chunks: chunks)
    }

    /// `search(_:k:mode:weights:chunks:)` with the mode as an enum.
    public func search(_ query: Retrieval.Vectors, k: Int, mode: ScoreMode,
                       weights: [Double] = Retrieval.defaultWeights, chunks: Bool = false) throws -> [Hit] {
        try search(query, k: k, mode: mode.rawValue, weights: weights, chunks: chunks)
    }
}

nonisolated extension EdgeM3WritableIndex {
    /// `search(_:k:mode:weights:chunks:)` with the mode as an enum.
    public func search(_ query: Embedding, k: Int, mode: ScoreMode, weights: [Double] = Retrieval.defaultWeights,
                       chunks: Bool = false) throws -> [Hit] {
        try search(query, k: k, mode: mode.rawValue, weights: weights, chunks: chunks)
    }

    /// `search(_:k:mode:weights:chunks:)` with the mode as an enum.
    public func search(_ query: Retrieval.Vectors, k: Int, mode: ScoreMode,
                       weights: [Double] = Retrieval.defaultWeights, chunks: Bool = false) throws -> [Hit] {
        try search(query, k: k, mode: mode.rawValue, weights: weights, chunks: chunks)
    }
}
