import Foundation

// What both phone-runner check programs (TFLiteRunnerCheck.swift, LiteRTRunnerCheck.swift) share:
// the weight cache argument and the embedding as the tests read it (tests/test_swift_ios_binding.py's
// assert_embeds_like), compiled into each program beside it.

/// `off`, `memory` or `file:DIR` (no argument: `off`).
func weightCacheArgument(_ argument: String?) -> EdgeM3WeightCache {
    switch argument ?? "off" {
    case "memory": return .memory
    case let c where c.hasPrefix("file:"): return .file(directory: URL(fileURLWithPath: String(c.dropFirst(5))))
    default: return .off
    }
}

/// One JSON line on stdout: the embedding's ids, signature and heads, plus the runner's `extra` fields.
func printEmbedding(_ e: Embedding, _ extra: [String: Any]) throws {
    var object = extra.merging(["input_ids": e.inputIds, "signature": e.signature]) { $1 }
    object["dense_vecs"] = e.denseVecs.map { $0.map(Double.init) }
    object["lexical_weights"] = e.lexicalWeights.map { $0.mapValues(Double.init) }
    object["colbert_vecs"] = e.colbertVecs.map { $0.map { $0.map(Double.init) } }
    let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
    print(String(decoding: data, as: UTF8.self))
}
