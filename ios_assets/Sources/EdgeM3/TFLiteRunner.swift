// The TensorFlow Lite part of the kit: compiled only where the TensorFlowLite module exists
// (an app target with the TensorFlowLiteSwift pod, or LiteRT's Swift API). `swift build` on
// Linux and a package without that dependency leave this file empty.
#if canImport(TensorFlowLite)
import Foundation
import TensorFlowLite
#if canImport(EdgeM3)
import EdgeM3  // this file added to an app target beside the EdgeM3 package (README)
#endif

/// A TensorFlowLiteSwift `Interpreter` as a `ModelRunner`: int32 `[1, L]` in, float32 out.
/// Not thread-safe (neither is the interpreter): `EdgeM3Embedder` serialises calls.
public final class TFLiteRunner: ModelRunner {
    public let interpreter: Interpreter
    private var runners = [String: SignatureRunner]()  // one per signature, created on first use

    /// Opens the model (TFLite memory-maps it) on the CPU: XNNPACK on, `threads` intra-op threads.
    public init(modelPath: String, threads: Int = 2) throws {
        var options = Interpreter.Options()
        options.threadCount = threads
        options.isXNNPackEnabled = true
        interpreter = try Interpreter(modelPath: modelPath, options: options)
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
    public convenience init(directory: URL, threads: Int = 2,
                            checksumMemo: URL? = EdgeM3Embedder.defaultChecksumMemo) throws {
        let pipeline = try Pipeline(directory: directory, format: "tflite")
        let tokenizer = try XlmrTokenizer(directory: directory, spec: pipeline.manifest.tokenizer)
        let file = directory.appendingPathComponent(pipeline.model.file)
        if let entry = pipeline.manifest.files[pipeline.model.file] {
            try FileCheck.verify(file, against: entry, memo: checksumMemo)
        }
        let runner = try TFLiteRunner(modelPath: file.path, threads: threads)
        let keys = runner.interpreter.signatureKeys
        for s in pipeline.model.signatures where !keys.contains(s.name) {
            throw EdgeM3Error("\(pipeline.model.file): no signature \(s.name) (has \(keys))")
        }
        self.init(pipeline: pipeline, tokenizer: tokenizer, runner: runner)
    }

    /// The bundle copied into the app: `<bundle>/EdgeM3Resources/`.
    public convenience init(bundle: Bundle = .main, threads: Int = 2) throws {
        try self.init(directory: EdgeM3Embedder.bundledDirectory(in: bundle), threads: threads)
    }

    /// `init(directory:)` off the caller's thread (hashing and mapping a large model take time).
    public static func load(directory: URL, threads: Int = 2) async throws -> EdgeM3Embedder {
        try await Task.detached(priority: .userInitiated) {
            try EdgeM3Embedder(directory: directory, threads: threads)
        }.value
    }

    /// Where the first load's checksum success is remembered: Caches/edge_m3 (the OS may purge it:
    /// then the next load hashes again).
    public static var defaultChecksumMemo: URL? {
        FileManager.default.urls(for: .cachesDirectory, in: .userDomainMask).first?.appendingPathComponent(EdgeM3Contract.assetDir)
    }
}
#endif
