/// BGE-M3's three scores and `BGEM3FlagModel.compute_score`'s weighted hybrid, as FlagEmbedding
/// defines them, computed by docs/index-format.md's "Score arithmetic" so that Python
/// (`edge_m3.retrieval`), this kit and the Kotlin kit return the same float64 bits: float32 inputs
/// widened exactly, exact products, float64 sums one term at a time in a fixed order. That is why
/// nothing here uses vDSP or SIMD: a faster sum would rank ties differently on a device.
nonisolated public enum Retrieval {
    /// A text's lexical weights as parallel arrays in ascending token id: the order every sum uses.
    public struct Lexical: Hashable, Sendable {
        public let ids: [Int32]
        public let weights: [Float]

        public init(ids: [Int32], weights: [Float]) throws {
            guard ids.count == weights.count else { throw EdgeM3Error("lexical ids and weights differ in length") }
            guard zip(ids, ids.dropFirst()).allSatisfy({ $0 < $1 }) else { throw EdgeM3Error("lexical ids must be strictly ascending") }
            self.ids = ids
            self.weights = weights
        }

        /// From FlagEmbedding's dict (token id as a string -> weight), as `Embedding.lexicalWeights`.
        public init(_ weights: [String: Float]) throws {
            var pairs: [(Int32, Float)] = []
            pairs.reserveCapacity(weights.count)
            for (k, w) in weights {
                guard let id = Int32(k) else { throw EdgeM3Error("lexical weight key \"\(k)\" is not a token id") }
                pairs.append((id, w))
            }
            pairs.sort { $0.0 < $1.0 }
            ids = pairs.map { $0.0 }
            self.weights = pairs.map { $0.1 }
        }
    }

    /// A query's or passage's outputs as the scores use them; a head left out is `nil`.
    public struct Vectors: Sendable {
        public var dense: [Float]?
        public var lexical: Lexical?
        public var colbert: [[Float]]?

        public init(dense: [Float]?, lexical: Lexical?, colbert: [[Float]]?) {
            self.dense = dense
            self.lexical = lexical
            self.colbert = colbert
        }

        public init(_ e: Embedding) throws {
            self.init(dense: e.denseVecs, lexical: try e.lexicalWeights.map { try Lexical($0) }, colbert: e.colbertVecs)
        }
    }

    /// `compute_score`'s modes.
    public static let modes: [String] = EdgeM3Contract.scoreModes
    /// The signals, in `weights_for_different_modes` order (dense, sparse, colbert).
    public static let signals: [String] = EdgeM3Contract.scoreSignals
    /// `compute_score`'s default weights (dense, sparse, colbert).
    public static let defaultWeights: [Double] = EdgeM3Contract.defaultModeWeights

    /// float64 sum from +0.0 of exact float32 products, one at a time in index order.
    public static func dot(_ a: [Float], _ b: [Float]) throws -> Double {
        guard a.count == b.count else { throw EdgeM3Error("vectors differ in length: \(a.count) != \(b.count)") }
        return a.withUnsafeBufferPointer { x in b.withUnsafeBufferPointer { y in dot(x.baseAddress!, y.baseAddress!, a.count) } }
    }

    @inline(__always)
    static func dot(_ a: UnsafePointer<Float>, _ b: UnsafePointer<Float>, _ n: Int) -> Double {
        var acc = 0.0
        for k in 0..<n { acc += Double(a[k]) * Double(b[k]) }
        return acc
    }

    /// Dense score: the inner product of the unit `dense_vecs` (FlagEmbedding: `q @ p.T`).
    public static func dense(_ q: [Float], _ p: [Float]) throws -> Double { try dot(q, p) }

    /// `compute_lexical_matching_score`: over the tokens both keep, in ascending id, the sum of products.
    public static func sparse(_ q: Lexical, _ p: Lexical) -> Double {
        var acc = 0.0
        var i = 0
        var j = 0
        while i < q.ids.count && j < p.ids.count {
            let a = q.ids[i], b = p.ids[j]
            if a < b {
                i += 1
            } else if a > b {
                j += 1
            } else {
                acc += Double(q.weights[i]) * Double(p.weights[j])
                i += 1
                j += 1
            }
        }
        return acc
    }

    public static func sparse(_ q: [String: Float], _ p: [String: Float]) throws -> Double {
        sparse(try Lexical(q), try Lexical(p))
    }

    /// `colbert_score`: the mean over query vectors of the best dot with a passage vector; none: 0.0.
    public static func colbert(_ q: [[Float]], _ p: [[Float]]) throws -> Double {
        if q.isEmpty || p.isEmpty { return 0 }
        var total = 0.0
        for qv in q {
            var best = -Double.infinity
            for pv in p {
                let d = try dot(qv, pv)
                if d > best { best = d }
            }
            total += best
        }
        return total / Double(q.count)
    }

    /// The signals a mode adds, in the order `compute_score` adds them (colbert, sparse, dense).
    public static func signals(of mode: String) throws -> [String] {
        guard modes.contains(mode) else {
            throw EdgeM3Error("mode \"\(mode)\": choose from \(modes.joined(separator: ", "))")
        }
        let parts = mode.split(separator: "+").map(String.init)
        return signals.reversed().filter { parts.contains($0) }
    }

    /// `weights_for_different_modes` checked: three finite numbers >= 0 (dense, sparse, colbert).
    @discardableResult
    public static func checkWeights(_ weights: [Double]) throws -> [Double] {
        guard weights.count == signals.count, weights.allSatisfy({ $0 >= 0 && $0 != .infinity }) else {
            throw EdgeM3Error("weights: must be three finite numbers >= 0 (dense, sparse, colbert), got \(weights)")
        }
        return weights
    }

    /// `compute_score`'s value for `mode` from the three scores: one signal is its score as is;
    /// `sparse+dense` = (sparse*w_s + dense*w_d) / (w_s + w_d); `colbert+sparse+dense` =
    /// ((colbert*w_c + sparse*w_s) + dense*w_d) / ((w_d + w_s) + w_c), each operation rounded.
    public static func hybrid(_ mode: String, dense: Double, sparse: Double, colbert: Double,
                              weights: [Double] = defaultWeights) throws -> Double {
        let used = try signals(of: mode)
        let value = [dense, sparse, colbert]
        if used.count == 1 { return value[signals.firstIndex(of: used[0])!] }
        let w = try checkWeights(weights)
        var num = 0.0
        for (i, s) in used.enumerated() {
            let h = signals.firstIndex(of: s)!
            num = i == 0 ? value[h] * w[h] : num + value[h] * w[h]
        }
        var den = 0.0
        var first = true
        for (h, s) in signals.enumerated() where used.contains(s) {
            den = first ? w[h] : den + w[h]
            first = false
        }
        guard den != 0 else { throw EdgeM3Error("weights: the weights \(mode) uses sum to 0") }
        return num / den
    }

    /// `compute_score(...)[mode]` for one query and passage, the same float64 in Python, Kotlin and Swift.
    public static func score(_ q: Vectors, _ p: Vectors, mode: String, weights: [Double] = defaultWeights) throws -> Double {
        let used = try signals(of: mode)
        let (nd, ns, nc) = (signals[0], signals[1], signals[2])
        let d = used.contains(nd) ? try dense(try need(q.dense, nd), try need(p.dense, nd)) : 0
        let s = used.contains(ns) ? sparse(try need(q.lexical, ns), try need(p.lexical, ns)) : 0
        let c = used.contains(nc) ? try colbert(try need(q.colbert, nc), try need(p.colbert, nc)) : 0
        return try hybrid(mode, dense: d, sparse: s, colbert: c, weights: weights)
    }

    private static func need<T>(_ x: T?, _ signal: String) throws -> T {
        guard let x else { throw EdgeM3Error("no \(signal) output: the bundle leaves that head out") }
        return x
    }
}
