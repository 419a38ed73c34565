import Foundation
import TensorFlowLite

// iOS side of the kit (mirror of android_assets/.../EdgeM3Embedder.kt): the bundle from the
// EdgeM3Resources folder, the .tflite opened by path (TFLite memory-maps it), one Interpreter,
// SentencePiece through any PieceEncoder. The pipeline itself is EdgeM3Core.

/// BGE-M3 embeddings on iOS: `embed(_:)` gives FlagEmbedding's dense_vecs, lexical_weights and
/// colbert_vecs (whichever heads the bundle exports).
///
/// One instance holds one Interpreter (the mapped weights plus per-signature arenas).
/// Interpreters are not thread-safe, so calls are serialised with a lock; for parallel
/// throughput create one embedder per worker (they share the mapped model pages).
public final class EdgeM3Embedder {
    /// Where `make build` (edge_m3.bundle.copy_to_kits) puts the bundle: ios_assets/EdgeM3Resources.
    /// Add that folder to the app target as a folder reference (blue folder) so its files keep their names.
    public static let resourceFolder = "EdgeM3Resources"

    public let manifest: Manifest
    public let model: ModelEntry
    private let runner: TfliteRunner
    private let encoder: PieceEncoder
    private let vocab: VocabMap?
    private let lock = NSLock()

    /// Loads manifest.json, opens the .tflite, reads vocab_map.json for trimmed bundles.
    /// Call off the main thread: the first run of each signature allocates its tensors.
    public init(directory: URL, encoder: PieceEncoder, threads: Int = 2) throws {
        let manifest = try Manifest.fromJson(MiniJson.parse(contentsOf: directory.appendingPathComponent("manifest.json")))
        let model = try manifest.model("tflite")
        let modelURL = directory.appendingPathComponent(model.file)
        let attributes = try? FileManager.default.attributesOfItem(atPath: modelURL.path)
        let size = (attributes?[.size] as? NSNumber)?.int64Value
        if let expected = manifest.files[model.file], let size = size, size != expected.size {
            throw EdgeM3Error("\(model.file): \(size) bytes, manifest says \(expected.size); copy the bundle again (make build)")
        }
        var options = Interpreter.Options()
        options.threadCount = threads
        options.isXNNPackEnabled = true
        let interpreter = try Interpreter(modelPath: modelURL.path, options: options)
        for s in model.signatures where !interpreter.signatureKeys.contains(s.name) {
            throw EdgeM3Error("\(model.file): no signature \(s.name) (has \(interpreter.signatureKeys))")
        }
        var vocab: VocabMap? = nil
        if let vocabFile = manifest.tokenizer.vocabMapFile {
            vocab = try VocabMap.fromJson(MiniJson.parse(contentsOf: directory.appendingPathComponent(vocabFile)),
                                          manifest.tokenizer)
        }
        self.manifest = manifest
        self.model = model
        self.runner = TfliteRunner(interpreter: interpreter)
        self.encoder = encoder
        self.vocab = vocab
    }

    /// The bundle copied into the app: `<bundle>/EdgeM3Resources/`.
    public static func fromBundle(_ bundle: Bundle = .main, encoder: PieceEncoder, threads: Int = 2) throws -> EdgeM3Embedder {
        guard let dir = bundle.url(forResource: resourceFolder, withExtension: nil) else {
            throw EdgeM3Error("\(resourceFolder): not in the app bundle (add ios_assets/\(resourceFolder) as a folder reference)")
        }
        return try EdgeM3Embedder(directory: dir, encoder: encoder, threads: threads)
    }

    /// Steps 1-5 of docs/bundle-format.md for one text.
    public func embed(_ text: String) throws -> Embedding {
        lock.lock()
        defer { lock.unlock() }
        return try EdgeM3Core.embed(text, manifest, model, encoder, runner, vocab)
    }

    /// Steps 3-5 for ids that are already tokenized and truncated (the golden test's entry point).
    public func embedIds(_ inputIds: [Int]) throws -> Embedding {
        lock.lock()
        defer { lock.unlock() }
        let enc = Encoded(inputIds: inputIds, signature: try EdgeM3Core.chooseSignature(inputIds.count, model.signatures))
        return try EdgeM3Core.run(enc, manifest, runner, vocab)
    }
}

/// A TensorFlowLiteSwift Interpreter as a ModelRunner: int32 `[1, L]` in, float32 arrays out.
final class TfliteRunner: ModelRunner {
    private let interpreter: Interpreter
    private var runners = [String: TensorFlowLite.SignatureRunner]()  // one per signature, kept

    init(interpreter: Interpreter) { self.interpreter = interpreter }

    private func signatureRunner(_ name: String) throws -> TensorFlowLite.SignatureRunner {
        if let r = runners[name] { return r }
        let r = try interpreter.signatureRunner(with: name)
        runners[name] = r
        return r
    }

    private static func int32Data(_ values: [Int]) -> Data {
        let v = values.map { Int32($0) }
        return v.withUnsafeBufferPointer { Data(buffer: $0) }
    }

    func run(_ signature: Signature, _ inputIds: [Int], _ attentionMask: [Int]) throws -> RawOutputs {
        let r = try signatureRunner(signature.name)
        try r.invoke(with: ["input_ids": TfliteRunner.int32Data(inputIds),
                            "attention_mask": TfliteRunner.int32Data(attentionMask)])
        // Flat float32 output, copied out (Data's bytes need not be Float-aligned).
        func floats(_ name: String) throws -> [Float]? {
            if signature.output(name) == nil { return nil }
            let data = try r.output(named: name).data
            var out = [Float](repeating: 0, count: data.count / MemoryLayout<Float>.stride)
            _ = out.withUnsafeMutableBufferPointer { data.copyBytes(to: $0) }
            return out
        }
        // Shapes come from the manifest: [1, H], [1, L], [1, L-1, H]; absent heads stay nil.
        let dense = try floats("dense_vecs").map { [$0] }
        let sparse = try floats("sparse_weights").map { [$0] }
        var colbert: [[[Float]]]? = nil
        if let flat = try floats("colbert_vecs"), let spec = signature.output("colbert_vecs") {
            let rows = spec.shape[1]
            let h = spec.shape[2]
            colbert = [(0..<rows).map { Array(flat[($0 * h)..<(($0 + 1) * h)]) }]
        }
        return RawOutputs(denseVecs: dense, sparseWeights: sparse, colbertVecs: colbert)
    }
}
