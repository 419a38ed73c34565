import Foundation
@testable import EdgeM3

/// One golden.json case: the text, what the reference pipeline produced, and the model's raw outputs.
struct GoldenCase {
    var text: String
    var expected: Embedding
    var raw: RawOutputs
}

/// golden.json (docs/bundle-format.md), read with the strict reader so floats stay bit-exact.
struct Golden {
    var quant: String
    var modelFile: String
    var cases: [GoldenCase]

    init(contentsOf url: URL) throws {
        let t = try Tree(StrictJSON.parse(contentsOf: url), "golden.json")
        quant = try t.optional("quant")?.string() ?? ""
        modelFile = try t.optional("model_file")?.string() ?? ""
        cases = try t["cases"].array().map { c in
            let raw = try c["raw"]
            let expected = Embedding(
                inputIds: try c["input_ids"].ints(),
                signature: try c["signature"].string(),
                seqLen: try c["seq_len"].int(),
                denseVecs: try c.optional("dense_vecs")?.floats(),
                lexicalWeights: try c.optional("lexical_weights")?.object().mapValues { try $0.float() },
                colbertVecs: try c.optional("colbert_vecs")?.array().map { try $0.floats() })
            // Raw outputs keep the batch axis of one in golden.json; the kit's RawOutputs drop it.
            return GoldenCase(
                text: try c["text"].string(), expected: expected,
                raw: RawOutputs(denseVecs: try raw.optional("dense_vecs")?.batchOfOne().floats(),
                                sparseWeights: try raw.optional("sparse_weights")?.batchOfOne().floats(),
                                colbertVecs: try raw.optional("colbert_vecs")?.batchOfOne().array().map { try $0.floats() }))
        }
    }
}

/// Typed access to a strict-JSON tree; errors name the path.
struct Tree {
    let value: Any
    let path: String

    init(_ value: Any, _ path: String) {
        self.value = value
        self.path = path
    }

    private func fail(_ what: String) -> EdgeM3Error { EdgeM3Error("\(path): expected \(what)") }

    subscript(key: String) -> Tree {
        get throws {
            guard let v = try object()[key] else { throw EdgeM3Error("\(path): missing \"\(key)\"") }
            return v
        }
    }

    /// nil for a missing key and for JSON null.
    func optional(_ key: String) throws -> Tree? {
        guard let v = try object()[key], !(v.value is NSNull) else { return nil }
        return v
    }

    func object() throws -> [String: Tree] {
        guard let m = value as? [String: Any] else { throw fail("an object") }
        return Dictionary(uniqueKeysWithValues: m.map { ($0.key, Tree($0.value, "\(path).\($0.key)")) })
    }

    func array() throws -> [Tree] {
        guard let l = value as? [Any] else { throw fail("an array") }
        return l.enumerated().map { Tree($0.element, "\(path)[\($0.offset)]") }
    }

    /// The single row of a `[1, ...]` batch.
    func batchOfOne() throws -> Tree {
        let rows = try array()
        guard rows.count == 1 else { throw fail("a batch of one, got \(rows.count) rows") }
        return rows[0]
    }

    func string() throws -> String {
        guard let s = value as? String else { throw fail("a string") }
        return s
    }

    func int() throws -> Int {
        guard let i = value as? Int else { throw fail("an integer") }
        return i
    }

    func float() throws -> Float {
        if let i = value as? Int { return Float(i) }
        guard let d = value as? Double else { throw fail("a number") }
        return Float(d)  // the double nearest the text, then float32: bit exact
    }

    func ints() throws -> [Int] { try array().map { try $0.int() } }

    func floats() throws -> [Float] { try array().map { try $0.float() } }
}
