// The TensorFlow Lite part of the kit: compiled only where the TensorFlowLite module exists
// (an app target with the TensorFlowLiteSwift pod). `swift build` on Linux and a package without
// that dependency leave this file empty. LiteRT's Swift package instead: LiteRTRunner.swift.
// An iOS / tvOS / visionOS app target with neither runtime gets one compile-time error, from here
// (the desktop has LiteRtCRunner.swift; a package build, SWIFT_PACKAGE, is never an app).
#if canImport(TensorFlowLite)
import Foundation
import TensorFlowLite
import TensorFlowLiteC  // the pod's C API: the XNNPACK delegate with a weight cache
#if canImport(EdgeM3)
import EdgeM3  // this file added to an app target beside the EdgeM3 package (README)
#endif

/// A TensorFlowLiteSwift `Interpreter` as a `ModelRunner`: int32 `[1, L]` in, float32 out.
/// Not thread-safe (neither is the interpreter): `EdgeM3Embedder` serialises calls.
/// Tensors are bound by the signature's keys (`SignatureRunner.inputs` / `.outputs`, the
/// manifest's names), never by `Tensor.name`: that is the tensor's name in the graph
/// (`embed_128_input_ids:0`, `StatefulPartitionedCall:0`; SignatureRunner.swift,
/// `tensor(named:withType:)` reads `TfLiteTensorName`).
nonisolated public final class TFLiteRunner: ModelRunner {
    /// Where XNNPACK keeps the packed weights (EdgeM3Options.swift): `.file(directory:)`, `.memory`, `.off`, `.caches`.
    public typealias WeightCache = EdgeM3WeightCache

    /// nil once closed.
    private var interpreter: Interpreter?
    /// The delegate holding the cache; the interpreter holds it too, so it goes after the interpreter.
    private var delegate: XNNPackDelegate?
    /// One per signature, created and checked against the manifest on first use.
    private var runners = [String: (SignatureRunner, SignatureBinding)]()
    private let modelFile: String
    /// The model file's signature keys, in its order.
    public let signatureKeys: [String]

    /// Opens the model (TFLite memory-maps it) on the CPU: XNNPACK, `threads` intra-op threads.
    /// `.file` needs `modelSha256` (the manifest's) to name the file; without it, `.memory`.
    public init(modelPath: String, threads: Int = EdgeM3Contract.deviceThreads,
                weightCache: WeightCache = .caches, modelSha256: String? = nil) throws {
        let opened = try TFLiteRunner.open(modelPath, threads: threads, weightCache: weightCache,
                                           modelSha256: modelSha256)
        interpreter = opened.interpreter
        delegate = opened.delegate
        modelFile = URL(fileURLWithPath: modelPath).lastPathComponent
        signatureKeys = opened.interpreter.signatureKeys
    }

    /// Releases the interpreter, its signature runners and the XNNPACK delegate now (a `.memory`
    /// cache file with it); a later `run` throws `.runnerClosed`.
    public func close() {
        runners = [:]
        interpreter = nil  // deletes the C interpreter, which uses the delegate ...
        delegate = nil  // ... so the delegate goes last
    }

    /// A TensorFlowLiteSwift error as the kit's: `InterpreterError` / `SignatureRunnerError` say
    /// what failed, not in which file.
    private static func runtime<T>(_ what: @autoclosure () -> String, _ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as EdgeM3Error {
            throw error
        } catch {
            throw EdgeM3Error("TensorFlow Lite: \(what()): \(error)", kind: .runtimeFailed)
        }
    }

    private static func open(_ modelPath: String, threads: Int, weightCache: WeightCache,
                             modelSha256: String?) throws -> (interpreter: Interpreter, delegate: XNNPackDelegate?) {
        var options = Interpreter.Options()
        options.threadCount = threads
        options.isXNNPackEnabled = weightCache == .off  // otherwise our own delegate, with the cache
        let file = URL(fileURLWithPath: modelPath).lastPathComponent
        // The cache path and its temporary file (XNNPackWeightCache.swift), shared with LiteRTRunner.
        return try weightCache.open(modelSha256: modelSha256) { cachePath, scratch in
            guard let cachePath else {  // .off
                return (try runtime("cannot open \(file)") { try Interpreter(modelPath: modelPath, options: options) }, nil)
            }
            let delegate = try XNNPackDelegate(threads: threads, cachePath: cachePath, scratch: scratch)
            return (try runtime("cannot open \(file)") {
                try Interpreter(modelPath: modelPath, options: options, delegates: [delegate])
            }, delegate)
        }
    }

    /// The phone binding proper: bytes in and out of the interpreter. Names, checks and shapes
    /// are SignatureBinding's (ModelRunner.swift), which the desktop's LiteRtCRunner runs in CI.
    public func run(_ signature: Signature, inputIds: [Int32], attentionMask: [Int32]) throws -> RawOutputs {
        let (runner, binding) = try signatureRunner(signature)
        let values = try binding.inputValues(inputIds: inputIds, attentionMask: attentionMask)
        try Self.runtime("run of \(signature.name)") {
            try runner.invoke(with: Dictionary(uniqueKeysWithValues: zip(binding.inputs.map(\.name), values.map {
                $0.withUnsafeBufferPointer { Data(buffer: $0) }
            })))
        }
        return try binding.rawOutputs { i in  // copied out: Data's bytes need not be Float-aligned
            let key = binding.outputs[i].name  // the signature's key
            let data = try Self.runtime("output \(key) of \(signature.name)") { try runner.output(named: key).data }
            var out = [Float](repeating: 0, count: data.count / MemoryLayout<Float>.stride)
            _ = out.withUnsafeMutableBytes { data.copyBytes(to: $0) }
            return out
        }
    }

    private func signatureRunner(_ signature: Signature) throws -> (SignatureRunner, SignatureBinding) {
        if let r = runners[signature.name] { return r }
        guard let interpreter else { throw EdgeM3Error("TFLiteRunner: closed", kind: .runnerClosed) }
        try SignatureBinding.requireSignatures([signature], file: modelFile, keys: signatureKeys)
        let r = try Self.runtime("signature \(signature.name) of \(modelFile)") {
            try interpreter.signatureRunner(with: signature.name)
        }
        // Each tensor under its signature key (the manifest's name), with the tensor's shape and type.
        func spec(_ key: String, input: Bool) throws -> TensorSpec {
            let t: Tensor
            do {
                t = try input ? r.input(named: key) : r.output(named: key)
            } catch SignatureRunnerError.invalidTensorDataType {
                throw EdgeM3Error("\(modelFile): signature \(signature.name) differs from manifest.json: "
                                  + "\(input ? "input" : "output") \(key) has a type TensorFlowLiteSwift cannot read",
                                  kind: .signatureMismatch)
            } catch {
                throw EdgeM3Error("TensorFlow Lite: \(key) of \(signature.name): \(error)", kind: .runtimeFailed)
            }
            return TensorSpec(name: key, shape: t.shape.dimensions, dtype: Self.dtype(t.dataType))
        }
        let binding = try SignatureBinding(signature, inputs: r.inputs.map { try spec($0, input: true) },
                                           outputs: r.outputs.map { try spec($0, input: false) }, file: modelFile)
        runners[signature.name] = (r, binding)
        return (r, binding)
    }

    /// `Tensor.DataType` as the manifest spells dtypes (numpy's names). A function, not a table:
    /// the pod's types are not `Sendable` (it is compiled in Swift 5 mode).
    private static func dtype(_ type: Tensor.DataType) -> String {
        switch type {
        case .bool: return "bool"
        case .uInt8: return "uint8"
        case .int16: return "int16"
        case .int32: return "int32"
        case .int64: return "int64"
        case .float16: return "float16"
        case .float32: return "float32"
        case .float64: return "float64"
        @unknown default: return "\(type)"
        }
    }
}

/// XNNPACK as an explicit delegate: TensorFlowLiteSwift's own (`isXNNPackEnabled`) takes no
/// weight cache. Deleted when the last holder (the runner, the interpreter) lets go, which is
/// after the interpreter: `Interpreter` deletes its C interpreter before releasing `delegates`.
nonisolated final class XNNPackDelegate: Delegate {
    let cDelegate: CDelegate
    private let cachePath: UnsafeMutablePointer<CChar>  // XNNPACK keeps the pointer, not a copy
    private let scratch: URL?  // a temporary cache file of ours, deleted with the delegate

    init(threads: Int, cachePath: String, scratch: URL? = nil) throws {
        guard let path = strdup(cachePath) else { throw EdgeM3Error("XNNPACK: out of memory") }
        var options = TfLiteXNNPackDelegateOptionsDefault()
        options.num_threads = Int32(threads)
        options.weight_cache_file_path = UnsafePointer(path)
        guard let delegate = TfLiteXNNPackDelegateCreate(&options) else {
            free(path)
            throw EdgeM3Error("XNNPACK: could not create the delegate")
        }
        cDelegate = delegate
        self.cachePath = path
        self.scratch = scratch
    }

    deinit {
        TfLiteXNNPackDelegateDelete(cDelegate)
        free(cachePath)
        if let scratch { try? FileManager.default.removeItem(at: scratch) }
    }
}

nonisolated extension EdgeM3Embedder {
    /// Loads a bundle folder: manifest.json, vocab_map.json (trimmed bundles), the tokenizer of its
    /// kind (sentencepiece.bpe.model, vocab.txt), the .tflite checked against the manifest (size; SHA-256 on the
    /// first load, remembered in `checksumMemo`), run with `threads` and `weightCache` (README "Memory").
    /// Blocking: call it off the main thread, or use `load(directory:)`.
    public convenience init(directory: URL, threads: Int = EdgeM3Contract.deviceThreads,
                            weightCache: TFLiteRunner.WeightCache = .caches,
                            checksumMemo: URL? = EdgeM3Embedder.defaultChecksumMemo) throws {
        let opened = try EdgeM3Embedder.openBundle(directory: directory, checksumMemo: checksumMemo)
        let pipeline = opened.pipeline
        let runner = try TFLiteRunner(modelPath: opened.modelFile.path, threads: threads, weightCache: weightCache,
                                      modelSha256: opened.entry?.sha256)
        try SignatureBinding.requireSignatures(pipeline.model.signatures, file: pipeline.model.file, keys: runner.signatureKeys)
        self.init(pipeline: pipeline, tokenizer: opened.tokenizer, runner: runner)
    }

    /// The bundle copied into the app: `<bundle>/EdgeM3Resources/`.
    public convenience init(bundle: Bundle = .main, threads: Int = EdgeM3Contract.deviceThreads,
                            weightCache: TFLiteRunner.WeightCache = .caches) throws {
        try self.init(directory: EdgeM3Embedder.bundledDirectory(in: bundle), threads: threads,
                      weightCache: weightCache)
    }

    /// `init(directory:)` off the caller's thread (hashing, mapping and packing a large model take time).
    public static func load(directory: URL, threads: Int = EdgeM3Contract.deviceThreads,
                            weightCache: TFLiteRunner.WeightCache = .caches) async throws -> EdgeM3Embedder {
        try await Task.detached(priority: .userInitiated) {
            try EdgeM3Embedder(directory: directory, threads: threads, weightCache: weightCache)
        }.value
    }

    /// MediaPipe's `TextEmbedder(options:)`: the bundle, threads, weight cache and checksum memo
    /// as `options` say (`options.validate()` first). Blocking: off the main thread, or `load(options:)`.
    public convenience init(options: EdgeM3Options) throws {
        try options.validate()
        try self.init(directory: options.source.resolve(), threads: options.threads, weightCache: options.weightCache,
                      checksumMemo: options.checksumMemo)
    }

    /// `init(options:)` off the caller's thread.
    public static func load(options: EdgeM3Options) async throws -> EdgeM3Embedder {
        try await Task.detached(priority: .userInitiated) {
            try EdgeM3Embedder(options: options)
        }.value
    }
}
#elseif !canImport(LiteRT) && !SWIFT_PACKAGE && !os(macOS) && !os(Linux)
#error("EdgeM3: no model runtime. Link LiteRT's Swift package (product LiteRT) or the CocoaPods pod TensorFlowLiteSwift to the app target (ios_assets/README.md, \"Adding the kit to an app\").")
#endif
