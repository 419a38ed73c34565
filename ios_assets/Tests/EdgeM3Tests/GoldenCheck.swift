import Foundation
@testable import EdgeM3

// Test support, out of the library (the Swift twin of the Android kit's GoldenCheck): golden.json's
// comparison, exact for the recorded outputs' post-processing and within the variant's device
// tolerance (EdgeM3Contract, generated from edge_m3/spec/recipes.py) for live outputs.

extension Tolerance {
    /// The variant's device tolerance (EdgeM3Contract, generated from edge_m3/spec/recipes.py); an
    /// unknown variant compares exactly, the strictest choice.
    init(quant: String) {
        self = EdgeM3Contract.tolerances[quant] ?? .exact
    }

    /// Bit for bit: what the recorded outputs' post-processing must meet.
    static let exact = Tolerance(denseCosineMin: 1, maxAbs: 0)
}

extension Embedding {
    /// What differs from `expected` beyond `tolerance` (empty: they agree). Ids and signature
    /// always compare exactly; with `.exact`, floats compare by bit pattern.
    func differences(from expected: Embedding, within tolerance: Tolerance = .exact) -> [String] {
        let exact = tolerance == .exact
        var out = [String]()
        if inputIds != expected.inputIds { out.append("input_ids \(inputIds) != \(expected.inputIds)") }
        if signature != expected.signature || seqLen != expected.seqLen {
            out.append("signature \(signature)/\(seqLen) != \(expected.signature)/\(expected.seqLen)")
        }
        if !exact, let a = denseVecs, let e = expected.denseVecs, a.count == e.count {
            let cos = Embedding.cosine(a, e)
            if cos < tolerance.denseCosineMin { out.append("dense_vecs cosine \(cos) < \(tolerance.denseCosineMin)") }
        }
        Embedding.compare(EdgeM3Contract.denseVecs, denseVecs, expected.denseVecs, tolerance.maxAbs, &out)
        switch (lexicalWeights, expected.lexicalWeights) {
        case let (a?, e?) where exact:
            if Set(a.keys) != Set(e.keys) { out.append("lexical_weights keys \(a.keys.sorted()) != \(e.keys.sorted())") }
            for (k, v) in e.sorted(by: { $0.key < $1.key }) {
                if let got = a[k], got.bitPattern != v.bitPattern { out.append("lexical_weights[\(k)] \(got) != \(v)") }
            }
        case let (a?, e?):
            // A weight near 0 may fall on either side of relu: compare over both key sets, missing = 0.
            for k in Set(a.keys).union(e.keys).sorted() {
                let d = abs((a[k] ?? 0) - (e[k] ?? 0))
                if d > tolerance.maxAbs { out.append("lexical_weights[\(k)] differs by \(d) > \(tolerance.maxAbs)") }
            }
        case (nil, nil):
            break
        default:
            out.append("lexical_weights present \(lexicalWeights != nil) != \(expected.lexicalWeights != nil)")
        }
        switch (colbertVecs, expected.colbertVecs) {
        case let (a?, e?) where a.count == e.count:
            for r in a.indices { Embedding.compare("colbert_vecs[\(r)]", a[r], e[r], tolerance.maxAbs, &out) }
        case (nil, nil):
            break
        default:
            out.append("colbert_vecs rows \(colbertVecs?.count as Any) != \(expected.colbertVecs?.count as Any)")
        }
        return out
    }

    static func cosine(_ a: [Float], _ b: [Float]) -> Double {
        var (ab, aa, bb) = (0.0, 0.0, 0.0)
        for (x, y) in zip(a, b) {
            ab += Double(x) * Double(y)
            aa += Double(x) * Double(x)
            bb += Double(y) * Double(y)
        }
        return aa == 0 || bb == 0 ? 0 : ab / (aa * bb).squareRoot()
    }

    /// The first element of `a` off `e` by more than `atol` (0: a different bit pattern).
    private static func compare(_ name: String, _ a: [Float]?, _ e: [Float]?, _ atol: Float, _ out: inout [String]) {
        if a == nil && e == nil { return }
        guard let a, let e, a.count == e.count else {
            out.append("\(name) shape \(a?.count as Any) != \(e?.count as Any)")
            return
        }
        for i in a.indices where atol == 0 ? a[i].bitPattern != e[i].bitPattern : !(abs(a[i] - e[i]) <= atol) {
            out.append("\(name)[\(i)] \(a[i]) != \(e[i])")
            return
        }
    }
}
