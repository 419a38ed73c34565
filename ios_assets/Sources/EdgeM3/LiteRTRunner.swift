// The LiteRT part of the kit: compiled only where the LiteRT module exists (an app target that
// links LiteRT's Swift package, product "LiteRT"). `swift build` of this package (no dependency)
// leaves it empty. Beside TFLiteRunner.swift (TensorFlowLiteSwift, CocoaPods): with only LiteRT
// linked, `EdgeM3Embedder(directory:)` and the rest of the phone API run here; with both linked
// they stay on TensorFlowLite and `EdgeM3Embedder(directory:runtime: LiteRTRunner.self)` picks LiteRT.
#if canImport(LiteRT)
import Foundation
import LiteRT
#if canImport(EdgeM3)
import EdgeM3  // this file added to an app target beside the EdgeM3 package (README)
#endif

/// LiteRT's `CompiledModel` (litert/swift/Sources/CompiledModel.swift) as a `ModelRunner`: int32
/// `[1, L]` in, float32 out. Not thread-safe (neither is the compiled model): `EdgeM3Embedder`
/// serialises calls. Tensors are bound by the signature's input and output names
/// (`inputName(inputIndex:signatureIndex:)`, the manifest's names), buffers in the model's order.
///
/// What maps from the kit's options: `threads` and the weight cache go to the CPU accelerator's
/// options (LiteRT's `OpaqueOptions` "xnnpack": `num_threads`, `weight_cache_file_path`, the TOML
/// keys of litert/c/options/litert_cpu_options.cc), so `.file`, `.memory` and `.off` mean what
/// they mean for TFLiteRunner; `.cpu` / `.gpu` are `Options.setHardwareAccelerators([.cpu])` /
/// `([.gpu])`. GPU alone, with no CPU fallback: a build without LiteRT's GPU accelerator fails
/// to compile the model (kLiteRtStatusErrorCompilation) instead of running on the CPU unasked.
nonisolated public final class LiteRTRunner: ModelRunner {
    public typealias WeightCache = EdgeM3WeightCache

    /// nil once closed.
    private var model: CompiledModel?
    /// One per signature, bound and given its buffers on first use.
    private var slots = [String: Slot]()
    /// A temporary weight cache file of ours (`.memory` on Apple platforms), deleted with the model.
    private var scratch: URL?
    private let modelFile: String
    /// The model file's signature keys, in its order.
    public let signatureKeys: [String]
    /// What LiteRT's cancellation function asks during a run (`run(...isCancelled:)`).
    private let cancelCheck = CancelCheck()

    /// Set for one run and cleared after it, on the thread that runs the model, which is the
    /// thread LiteRT calls the cancellation function on (inside its invoke).
    private final class CancelCheck: @unchecked Sendable {
        var isCancelled: (@Sendable () -> Bool)?
    }

    private struct Slot {
        var index: Int
        var binding: SignatureBinding
        var inputs: [TensorBuffer]
        var outputs: [TensorBuffer]
    }

    /// The CPU accelerator's opaque options identifier (LrtGetCpuOptionsIdentifier).
    static let cpuOptionsIdentifier = "xnnpack"

    /// Opens and compiles the model: `threads` XNNPACK threads, `weightCache` as for TFLiteRunner
    /// (`.file` needs `modelSha256`, the manifest's, to name the file; without it, `.memory`).
    public init(modelPath: String, threads: Int = EdgeM3Contract.deviceThreads, weightCache: WeightCache = .caches,
                accelerator: EdgeM3Accelerator = .cpu, modelSha256: String? = nil) throws {
        if threads < 1 { throw EdgeM3Error("threads: \(threads), expected 1 or more") }
        let file = URL(fileURLWithPath: modelPath).lastPathComponent
        modelFile = file
        let environment = try Self.runtime("cannot create the environment") { try Environment() }
        let opened = try weightCache.open(modelSha256: modelSha256) { cachePath, scratch in
            let options = try Self.runtime("options") { try Options() }
            try Self.runtime("accelerators") { try options.setHardwareAccelerators(accelerator == .gpu ? [.gpu] : [.cpu]) }
            try Self.addCpuOptions(options, threads: threads, cachePath: cachePath)
            let model = try Self.runtime(accelerator == .gpu ? "cannot compile \(file) for the GPU (is LiteRT's GPU "
                                         + "accelerator in the app, and can it run every op?)" : "cannot open \(file)") {
                try CompiledModel(filePath: modelPath, environment: environment, options: options)
            }
            return (model, scratch)
        }
        model = opened.0
        scratch = opened.1
        signatureKeys = try Self.runtime("signatures of \(file)") { try opened.0.signatureKeys() }
        // LiteRT asks this C function while it invokes the model; true stops it (kLiteRtStatusCancelled).
        try Self.runtime("cancellation function") {
            try opened.0.setCancellationFunction(userData: Unmanaged.passUnretained(cancelCheck).toOpaque()) { userData in
                guard let userData else { return false }
                return Unmanaged<CancelCheck>.fromOpaque(userData).takeUnretainedValue().isCancelled?() ?? false
            }
        }
    }

    deinit { removeScratch() }

    /// Releases the compiled model and its buffers now (a `.memory` cache file with them); a later
    /// `run` throws `.runnerClosed`.
    public func close() {
        slots = [:]
        model = nil
        removeScratch()
    }

    private func removeScratch() {
        if let scratch { try? FileManager.default.removeItem(at: scratch) }
        scratch = nil
    }

    /// XNNPACK's threads and weight cache, as the CPU accelerator reads them: a TOML payload the
    /// options own (freed by its destructor).
    private static func addCpuOptions(_ options: Options, threads: Int, cachePath: String?) throws {
        var toml = "num_threads = \(threads)\n"
        if let cachePath {
            let quoted = cachePath.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
            toml += "weight_cache_file_path = \"\(quoted)\"\n"
        }
        guard let payload = strdup(toml) else { throw EdgeM3Error("LiteRT: out of memory") }
        let cpu: OpaqueOptions
        do {
            cpu = try OpaqueOptions(identifier: cpuOptionsIdentifier, payload: UnsafeMutableRawPointer(payload),
                                    destructor: { free($0) })
        } catch {
            free(payload)
            throw EdgeM3Error("LiteRT: CPU options: \(error)", kind: .runtimeFailed)
        }
        try runtime("CPU options") { try options.addOpaqueOptions(cpu) }
    }

    /// A LiteRT error as the kit's: `LiteRtError` says what failed (one case per status of
    /// litert_common.h), not in which file. Cancelled (LiteRT's cancellation function): `.cancelled`.
    private static func runtime<T>(_ what: @autoclosure () -> String, _ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as EdgeM3Error {
            throw error
        } catch LiteRtError.cancelled {
            throw EdgeM3Error("LiteRT: \(what()): cancelled during the model call", kind: .cancelled)
        } catch {
            throw EdgeM3Error("LiteRT: \(what()): \(error)", kind: .runtimeFailed)
        }
    }

    /// `run`, stopped by LiteRT inside the model call once `isCancelled` answers true (`.cancelled`).
    public func run(_ signature: Signature, inputIds: [Int32], attentionMask: [Int32],
                    isCancelled: @escaping @Sendable () -> Bool) throws -> RawOutputs {
        cancelCheck.isCancelled = isCancelled
        defer { cancelCheck.isCancelled = nil }
        return try run(signature, inputIds: inputIds, attentionMask: attentionMask)
    }

    /// The phone binding proper: bytes in and out of the compiled model. Names, checks and shapes
    /// are SignatureBinding's (ModelRunner.swift), which the desktop's LiteRtCRunner runs in CI.
    public func run(_ signature: Signature, inputIds: [Int32], attentionMask: [Int32]) throws -> RawOutputs {
        let (model, slot) = try self.slot(signature)
        let values = try slot.binding.inputValues(inputIds: inputIds, attentionMask: attentionMask)
        for (buffer, (spec, v)) in zip(slot.inputs, zip(slot.binding.inputs, values)) {
            try Self.runtime("input \(spec.name) of \(signature.name)") { try buffer.write(v) }
        }
        try Self.runtime("run of \(signature.name)") {
            try model.run(inputs: slot.inputs, outputs: slot.outputs, signatureIndex: slot.index)
        }
        return try slot.binding.rawOutputs { i in
            try Self.runtime("output \(slot.binding.outputs[i].name) of \(signature.name)") { try slot.outputs[i].read() as [Float] }
        }
    }

    private func slot(_ signature: Signature) throws -> (CompiledModel, Slot) {
        guard let model else { throw EdgeM3Error("LiteRTRunner: closed", kind: .runnerClosed) }
        if let s = slots[signature.name] { return (model, s) }
        try SignatureBinding.requireSignatures([signature], file: modelFile, keys: signatureKeys)
        let index = signatureKeys.firstIndex(of: signature.name)!  // required just above
        let what = "signature \(signature.name) of \(modelFile)"
        // Each tensor under its signature name (the manifest's), with the tensor's shape and type.
        func specs(input: Bool) throws -> [TensorSpec] {
            let count = try Self.runtime(what) {
                try input ? model.inputCount(signatureIndex: index) : model.outputCount(signatureIndex: index)
            }
            return try (0..<count).map { i in
                let (name, type) = try Self.runtime(what) {
                    input ? (try model.inputName(inputIndex: i, signatureIndex: index),
                             try model.getInputTensorType(inputIndex: i, signatureIndex: index))
                          : (try model.outputName(outputIndex: i, signatureIndex: index),
                             try model.getOutputTensorType(outputIndex: i, signatureIndex: index))
                }
                if type.elementType == .none {
                    throw EdgeM3Error("\(modelFile): signature \(signature.name) differs from manifest.json: "
                                      + "\(input ? "input" : "output") \(name) has a type LiteRT's Swift API cannot read",
                                      kind: .signatureMismatch)
                }
                return TensorSpec(name: name, shape: type.layout.dimensions, dtype: Self.dtype(type.elementType))
            }
        }
        let binding = try SignatureBinding(signature, inputs: specs(input: true), outputs: specs(input: false),
                                           file: modelFile)
        let s = Slot(index: index, binding: binding,
                     inputs: try Self.runtime("buffers of \(what)") { try model.createInputBuffers(signatureIndex: index) },
                     outputs: try Self.runtime("buffers of \(what)") { try model.createOutputBuffers(signatureIndex: index) })
        slots[signature.name] = s
        return (model, s)
    }

    /// `ElementType` as the manifest spells dtypes (numpy's names). A function, not a table: the
    /// package's types are not `Sendable` (it is compiled in Swift 5 mode).
    private static func dtype(_ type: ElementType) -> String {
        switch type {
        case .bool: return "bool"
        case .int8: return "int8"
        case .int16: return "int16"
        case .int32: return "int32"
        case .int64: return "int64"
        case .uint8: return "uint8"
        case .uint16: return "uint16"
        case .uint32: return "uint32"
        case .uint64: return "uint64"
        case .float16: return "float16"
        case .float32: return "float32"
        case .float64: return "float64"
        case .complex64: return "complex64"
        case .complex128: return "complex128"
        default: return "\(type)"  // int2, int4, bfloat16, tfResource, tfString, tfVariant: no numpy name
        }
    }
}

nonisolated extension EdgeM3Embedder {
    /// A bundle folder on LiteRT (`runtime: LiteRTRunner.self`), also where TensorFlowLite is
    /// linked too: the checks of `openBundle` (the model file's size, SHA-256 on the first load,
    /// remembered in `checksumMemo`), then the model on `LiteRTRunner` with `threads`,
    /// `weightCache` and `accelerator`. Blocking: call it off the main thread.
    public convenience init(directory: URL, runtime: LiteRTRunner.Type, threads: Int = EdgeM3Contract.deviceThreads,
                            weightCache: EdgeM3WeightCache = .caches, accelerator: EdgeM3Accelerator = .cpu,
                            checksumMemo: URL? = EdgeM3Embedder.defaultChecksumMemo) throws {
        let opened = try EdgeM3Embedder.openBundle(directory: directory, checksumMemo: checksumMemo)
        let runner = try LiteRTRunner(modelPath: opened.modelFile.path, threads: threads, weightCache: weightCache,
                                      accelerator: accelerator, modelSha256: opened.entry?.sha256)
        try SignatureBinding.requireSignatures(opened.pipeline.model.signatures, file: opened.pipeline.model.file,
                                               keys: runner.signatureKeys)
        self.init(pipeline: opened.pipeline, tokenizer: opened.tokenizer, runner: runner)
    }

    /// `init(options:)` on LiteRT (`options.validate()` first).
    public convenience init(options: EdgeM3Options, runtime: LiteRTRunner.Type) throws {
        try options.validate()
        try self.init(directory: options.source.resolve(), runtime: runtime, threads: options.threads,
                      weightCache: options.weightCache, accelerator: options.accelerator, checksumMemo: options.checksumMemo)
    }
}

#if !canImport(TensorFlowLite)
// Only LiteRT linked: the phone API TFLiteRunner.swift gives with TensorFlowLite, on LiteRT.
nonisolated extension EdgeM3Embedder {
    /// Loads a bundle folder (see `init(directory:runtime:...)`) on LiteRT.
    public convenience init(directory: URL, threads: Int = EdgeM3Contract.deviceThreads,
                            weightCache: EdgeM3WeightCache = .caches,
                            checksumMemo: URL? = EdgeM3Embedder.defaultChecksumMemo) throws {
        try self.init(directory: directory, runtime: LiteRTRunner.self, threads: threads, weightCache: weightCache,
                      checksumMemo: checksumMemo)
    }

    /// The bundle copied into the app: `<bundle>/EdgeM3Resources/`.
    public convenience init(bundle: Bundle = .main, threads: Int = EdgeM3Contract.deviceThreads,
                            weightCache: EdgeM3WeightCache = .caches) throws {
        try self.init(directory: EdgeM3Embedder.bundledDirectory(in: bundle), threads: threads, weightCache: weightCache)
    }

    /// `init(directory:)` off the caller's thread.
    public static func load(directory: URL, threads: Int = EdgeM3Contract.deviceThreads,
                            weightCache: EdgeM3WeightCache = .caches) async throws -> EdgeM3Embedder {
        try await Task.detached(priority: .userInitiated) {
            try EdgeM3Embedder(directory: directory, threads: threads, weightCache: weightCache)
        }.value
    }

    /// MediaPipe's `TextEmbedder(options:)` on LiteRT. Blocking: off the main thread, or `load(options:)`.
    public convenience init(options: EdgeM3Options) throws {
        try self.init(options: options, runtime: LiteRTRunner.self)
    }

    /// `init(options:)` off the caller's thread.
    public static func load(options: EdgeM3Options) async throws -> EdgeM3Embedder {
        try await Task.detached(priority: .userInitiated) {
            try EdgeM3Embedder(options: options)
        }.value
    }
}
#endif
#elseif !canImport(TensorFlowLite) && !SWIFT_PACKAGE && !os(macOS) && !os(Linux) && canImport(EdgeM3)
// This file beside the EdgeM3 package in an app target that links no runtime (the kit's sources
// in the app target: TFLiteRunner.swift says it, once).
#error("EdgeM3: no model runtime. Link LiteRT's Swift package (product LiteRT) or the CocoaPods pod TensorFlowLiteSwift to the app target (ios_assets/README.md, \"Adding the kit to an app\").")
#endif
