// The TensorFlow Lite part of the kit: compiled only where the TensorFlowLite module exists
// (an app target with the TensorFlowLiteSwift pod, or LiteRT's Swift API). `swift build` on
// Linux and a package without that dependency leave this file empty.
#if canImport(TensorFlowLite)
import Foundation
import TensorFlowLite
import TensorFlowLiteC  // the C API under TensorFlowLiteSwift (same pod): the XNNPACK delegate's options
#if canImport(EdgeM3)
import EdgeM3  // this file added to an app target beside the EdgeM3 package (README)
#endif

/// Where XNNPACK keeps the weights it packs for its kernels. Without a cache every signature
/// packs its own copy (full-size int8, six signatures: 3.8x the file in RAM on desktop LiteRT;
/// with one 1.07x, docs/benchmarks.md "Memory on the device").
public enum WeightCache: Sendable {
    /// A file in `directory`, named by the model's SHA-256 and the app build: the first start
    /// packs and writes it, later starts map it (desktop: 78 ms instead of 427 ms to the first result).
    case file(directory: URL)
    /// Packed once per model, in memory, at every start.
    case memory
    /// TensorFlowLiteSwift's own XNNPACK (`isXNNPackEnabled`): one packed copy per signature.
    case off

    /// Caches/edge_m3: the OS may purge it, then the next start packs again.
    public static var inCaches: WeightCache {
        let caches = FileManager.default.urls(for: .cachesDirectory, in: .userDomainMask).first
            ?? FileManager.default.temporaryDirectory
        return .file(directory: caches.appendingPathComponent(EdgeM3Contract.assetDir))
    }

    /// Changes whenever the linked TF Lite runtime may (an app update): version, build, binary date.
    public static var appBuildKey: String {
        let info = Bundle.main.infoDictionary ?? [:]
        let version = "\(info["CFBundleShortVersionString"] ?? "0")-\(info["CFBundleVersion"] ?? "0")"
        let binary = Bundle.main.executableURL.flatMap {
            try? FileManager.default.attributesOfItem(atPath: $0.path)[.modificationDate] as? Date
        }
        return "\(version)-\(Int(binary?.timeIntervalSince1970 ?? 0))"
    }

    /// This model's cache file in `directory`; other app builds' files there are stale and go.
    static func file(in directory: URL, modelSha256: String) throws -> URL {
        let name = EdgeM3Contract.weightCacheName(modelSha256: modelSha256, runtimeKey: appBuildKey)
        let current = String(name.dropFirst(EdgeM3Contract.weightCacheKeyChars))  // "-<key>.xnnpack_cache"
        let fm = FileManager.default
        try fm.createDirectory(at: directory, withIntermediateDirectories: true)
        for old in (try? fm.contentsOfDirectory(atPath: directory.path)) ?? []
        where old.hasSuffix(EdgeM3Contract.weightCacheSuffix) && !old.hasSuffix(current) {
            try? fm.removeItem(at: directory.appendingPathComponent(old))
        }
        return directory.appendingPathComponent(name)
    }
}

/// XNNPACK as an explicit delegate: TensorFlowLiteSwift's built-in one takes a thread count only,
/// this one also the weight cache path. Must outlive the interpreter (the interpreter holds it).
final class XNNPackDelegate: Delegate {
    let cDelegate: CDelegate
    private let path: UnsafeMutablePointer<CChar>

    init(threads: Int, weightCachePath: String) throws {
        guard let path = strdup(weightCachePath) else { throw EdgeM3Error("out of memory") }
        var options = TfLiteXNNPackDelegateOptionsDefault()
        options.num_threads = Int32(threads)
        options.weight_cache_file_path = UnsafePointer(path)
        guard let delegate = TfLiteXNNPackDelegateCreate(&options) else {
            free(path)
            throw EdgeM3Error("the XNNPACK delegate could not be created")
        }
        self.path = path
        cDelegate = delegate
    }

    deinit {
        TfLiteXNNPackDelegateDelete(cDelegate)
        free(path)
    }
}

/// A TensorFlowLiteSwift `Interpreter` as a `ModelRunner`: int32 `[1, L]` in, float32 out.
/// Not thread-safe (neither is the interpreter): `EdgeM3Embedder` serialises calls.
public final class TFLiteRunner: ModelRunner {
    public let interpreter: Interpreter
    private var runners = [String: SignatureRunner]()  // one per signature, created on first use

    /// Opens the model (TFLite memory-maps it) on the CPU with XNNPACK, `threads` intra-op threads
    /// and `weightCache`; `modelSha256` (the manifest's) names the cache file. A cache file that
    /// fails to open (a crash mid-write) is deleted and packed again.
    public init(modelPath: String, modelSha256: String, threads: Int = EdgeM3Contract.deviceThreads,
                weightCache: WeightCache = .inCaches) throws {
        var options = Interpreter.Options()
        options.threadCount = threads
        switch weightCache {
        case .off:
            options.isXNNPackEnabled = true
            interpreter = try Interpreter(modelPath: modelPath, options: options)
        case .memory:
            let xnnpack = try XNNPackDelegate(threads: threads, weightCachePath: EdgeM3Contract.inMemoryWeightCache)
            interpreter = try Interpreter(modelPath: modelPath, options: options, delegates: [xnnpack])
        case .file(let directory):
            let file = try WeightCache.file(in: directory, modelSha256: modelSha256)
            func open() throws -> Interpreter {
                let xnnpack = try XNNPackDelegate(threads: threads, weightCachePath: file.path)
                return try Interpreter(modelPath: modelPath, options: options, delegates: [xnnpack])
            }
            do {
                interpreter = try open()
            } catch where FileManager.default.fileExists(atPath: file.path) {
                try? FileManager.default.removeItem(at: file)
                interpreter = try open()
            }
        }
    }

    public func run(_ signature: Signature, inputIds: [Int32], attentionMask: [Int32]) throws -> RawOutputs {
        let runner = try signatureRunner(signature.name)
        try runner.invoke(with: [EdgeM3Contract.inputIds: inputIds.withUnsafeBufferPointer { Data(buffer: $0) },
                                 EdgeM3Contract.attentionMask: attentionMask.withUnsafeBufferPointer { Data(buffer: $0) }])
        // Flat float32, copied out (Data's bytes need not be Float-aligned); absent heads stay nil.
        func floats(_ name: String) throws -> [Float]? {
            guard signature.output(named: name) != nil else { return nil }
            let data = try runner.output(named: name).data
            var out = [Float](repeating: 0, count: data.count / MemoryLayout<Float>.stride)
            _ = out.withUnsafeMutableBytes { data.copyBytes(to: $0) }
            return out
        }
        var colbert: [[Float]]? = nil
        if let flat = try floats(EdgeM3Contract.colbertVecs), let spec = signature.output(named: EdgeM3Contract.colbertVecs) {
            let (rows, width) = (spec.shape[1], spec.shape[2])  // [1, L-1, H]
            colbert = (0..<rows).map { Array(flat[($0 * width)..<(($0 + 1) * width)]) }
        }
        return RawOutputs(denseVecs: try floats(EdgeM3Contract.denseVecs),
                          sparseWeights: try floats(EdgeM3Contract.sparseWeights), colbertVecs: colbert)
    }

    private func signatureRunner(_ name: String) throws -> SignatureRunner {
        if let r = runners[name] { return r }
        let r = try interpreter.signatureRunner(with: name)
        runners[name] = r
        return r
    }
}

extension EdgeM3Embedder {
    /// Loads a bundle folder: manifest.json, vocab_map.json (trimmed bundles), the tokenizer from
    /// sentencepiece.bpe.model, the .tflite checked against the manifest (size; SHA-256 on the
    /// first load, remembered in `checksumMemo`).
    /// Blocking: call it off the main thread, or use `load(directory:)`.
    public convenience init(directory: URL, threads: Int = EdgeM3Contract.deviceThreads,
                            weightCache: WeightCache = .inCaches,
                            checksumMemo: URL? = EdgeM3Embedder.defaultChecksumMemo) throws {
        let pipeline = try Pipeline(directory: directory, format: "tflite")
        let tokenizer = try XlmrTokenizer(directory: directory, spec: pipeline.manifest.tokenizer)
        let file = directory.appendingPathComponent(pipeline.model.file)
        guard let entry = pipeline.manifest.files[pipeline.model.file] else {
            throw EdgeM3Error("\(EdgeM3Contract.manifest): no files entry for \(pipeline.model.file)")
        }
        try FileCheck.verify(file, against: entry, memo: checksumMemo)
        let runner = try TFLiteRunner(modelPath: file.path, modelSha256: entry.sha256, threads: threads,
                                      weightCache: weightCache)
        let keys = runner.interpreter.signatureKeys
        for s in pipeline.model.signatures where !keys.contains(s.name) {
            throw EdgeM3Error("\(pipeline.model.file): no signature \(s.name) (has \(keys))")
        }
        self.init(pipeline: pipeline, tokenizer: tokenizer, runner: runner)
    }

    /// The bundle copied into the app: `<bundle>/EdgeM3Resources/`.
    public convenience init(bundle: Bundle = .main, threads: Int = EdgeM3Contract.deviceThreads,
                            weightCache: WeightCache = .inCaches) throws {
        try self.init(directory: EdgeM3Embedder.bundledDirectory(in: bundle), threads: threads,
                      weightCache: weightCache)
    }

    /// `init(directory:)` off the caller's thread (hashing and mapping a large model take time).
    public static func load(directory: URL, threads: Int = EdgeM3Contract.deviceThreads,
                            weightCache: WeightCache = .inCaches) async throws -> EdgeM3Embedder {
        try await Task.detached(priority: .userInitiated) {
            try EdgeM3Embedder(directory: directory, threads: threads, weightCache: weightCache)
        }.value
    }

    /// Where the first load's checksum success is remembered: Caches/edge_m3 (the OS may purge it:
    /// then the next load hashes again).
    public static var defaultChecksumMemo: URL? {
        FileManager.default.urls(for: .cachesDirectory, in: .userDomainMask).first?.appendingPathComponent(EdgeM3Contract.assetDir)
    }
}
#endif
