// iOS side of the edge-m3 pipeline over TensorFlowLiteSwift; mirrors EdgeM3Embedder.kt.
import Foundation
import TensorFlowLite

/// Anything that turns text into the reference's piece ids (SentencePiece ids, step 1).
protocol PieceEncoder { func encodeAsIds(_ text: String) -> [Int] }

struct Embedding {
    let inputIds: [Int]
    let signature: String
    let denseVecs: [Float]
    let lexicalWeights: [String: Float]
    let colbertVecs: [[Float]]
}

/// One interpreter per instance; Interpreter is not thread-safe: one embedder per queue.
final class EdgeM3Embedder {
    let manifest: Manifest
    private let interpreter: Interpreter
    private let encoder: PieceEncoder

    init(resources dir: URL, encoder: PieceEncoder, threads: Int = 2) throws {
        let root = try JSONSerialization.jsonObject(with: Data(contentsOf: dir.appendingPathComponent("manifest.json"))) as! [String: Any]
        let tok = root["tokenizer"] as! [String: Any]
        var kept: [Int]? = nil
        if let vm = tok["vocab_map"] as? [String: Any] {
            let m = try JSONSerialization.jsonObject(with: Data(contentsOf: dir.appendingPathComponent(vm["file"] as! String))) as! [String: Any]
            kept = (m["kept_ids"] as! [NSNumber]).map { $0.intValue }
        }
        manifest = Manifest.fromJson(root, format: "tflite", keptIds: kept)
        let file = (root["models"] as! [[String: Any]]).first { ($0["format"] as! String) == "tflite" }!["file"] as! String
        var options = Interpreter.Options()
        options.threadCount = threads
        interpreter = try Interpreter(modelPath: dir.appendingPathComponent(file).path, options: options)
        self.encoder = encoder
    }

    func embed(_ text: String) throws -> Embedding {
        let spec = manifest.tokenizer
        let ids = EdgeM3Core.truncate(spec, EdgeM3Core.mapPieces(spec, encoder.encodeAsIds(text)), manifest.signatures.last!.seqLen)
        let sig = EdgeM3Core.chooseSignature(manifest, ids.count)
        let (padded, mask) = EdgeM3Core.pad(spec, EdgeM3Core.toModelIds(spec, ids), sig.seqLen)
        let runner = try interpreter.signatureRunner(with: sig.name)
        try runner.invoke(with: ["input_ids": padded.withUnsafeBufferPointer { Data(buffer: $0) },
                                 "attention_mask": mask.withUnsafeBufferPointer { Data(buffer: $0) }])
        func floats(_ name: String) throws -> [Float] {
            let data = try runner.output(named: name).data
            return data.withUnsafeBytes { Array($0.bindMemory(to: Float.self)) }
        }
        let h = manifest.hiddenSize
        let flat = try floats("colbert_vecs")
        let colbert = (0..<(sig.seqLen - 1)).map { Array(flat[($0 * h)..<(($0 + 1) * h)]) }
        return Embedding(inputIds: ids, signature: sig.name, denseVecs: try floats("dense_vecs"),
                         lexicalWeights: EdgeM3Core.lexicalWeights(spec, ids, try floats("sparse_weights")),
                         colbertVecs: EdgeM3Core.colbertVectors(colbert, ids.count))
    }
}
