import Foundation

/// One passage in its stored form: the bytes a base (and `passages`' blobs) hold for it.
nonisolated struct StoredPassage: Sendable {
    var seq: Int64 = 0
    let id: EdgeM3Index.PassageID
    /// The chunk number in its passage (0, 1, ... in seq order).
    let chunk: Int
    /// float32 store: the values; int8 store: empty (see `denseCodes`).
    var denseValues: [Float] = []
    var denseCodes: [Int8] = []
    var denseScale: Float = 1
    var tokens: [Int32] = []
    var weights: [Float] = []
    /// fp16 store: the bits, row-major [colbertRows, dim]; int8 store: `colbertCodes` and `colbertScales`.
    var colbertHalf: [UInt16] = []
    var colbertCodes: [Int8] = []
    var colbertScales: [Float] = []
    var colbertRows = 0
    let int8Dense: Bool
    let colbertStore: String

    /// From pipeline outputs, as Python's Index.add checks and stores them (quantized once, here).
    init(id: EdgeM3Index.PassageID, chunk: Int, _ v: Retrieval.Vectors, dim: Int, dense: String, colbert: String) throws {
        self.id = id
        self.chunk = chunk
        int8Dense = dense == "int8"
        colbertStore = colbert
        guard let d = v.dense, d.count == dim, d.allSatisfy({ $0.isFinite }) else {
            throw EdgeM3Error("dense vector: \(v.dense.map { "\($0.count) values" } ?? "missing") (want \(dim), finite)")
        }
        if int8Dense {
            (denseCodes, denseScale) = quantize(d[...])
        } else {
            denseValues = d
        }
        if let lex = v.lexical {
            guard lex.weights.allSatisfy({ $0 > 0 && $0.isFinite }) else {
                throw EdgeM3Error("lexical weights must be finite and > 0 (non-positive ones are dropped by post-processing)")
            }
            (tokens, weights) = (lex.ids, lex.weights)
        }
        if colbert != "none" {
            guard let c = v.colbert else { throw EdgeM3Error("colbert_vecs missing: the index stores ColBERT vectors (\(colbert))") }
            guard c.allSatisfy({ $0.count == dim && $0.allSatisfy { $0.isFinite } }) else {
                throw EdgeM3Error("ColBERT vectors must have \(dim) finite values each")
            }
            colbertRows = c.count
            if colbert == "int8" {
                for row in c {
                    let (codes, scale) = quantize(row[...])
                    colbertCodes += codes
                    colbertScales.append(scale)
                }
            } else {
                colbertHalf = c.flatMap { $0.map(halfBits) }
            }
        }
    }

    /// From a database row's blobs; nil when their lengths or lexical weights are wrong.
    init?(seq: Int64, id: EdgeM3Index.PassageID, chunk: Int, dense: [UInt8]?, denseScale: [UInt8]?, tokens: [UInt8]?,
          weights: [UInt8]?, colbert: [UInt8]?, colbertScale: [UInt8]?, dim: Int, denseStore: String, colbertStore: String) {
        self.seq = seq
        self.id = id
        self.chunk = chunk
        int8Dense = denseStore == "int8"
        self.colbertStore = colbertStore
        guard let dense, let tokens, let weights, tokens.count % 4 == 0, tokens.count == weights.count else { return nil }
        // Every scale finite and > 0, every float32 and float16 value finite (format 1's rule, docs/index-format.md).
        if int8Dense {
            guard dense.count == dim, let denseScale, denseScale.count == 4 else { return nil }
            denseCodes = values(dense)
            self.denseScale = (values(denseScale) as [Float])[0]
            guard self.denseScale > 0, self.denseScale.isFinite else { return nil }
        } else {
            guard dense.count == dim * 4, denseScale == nil else { return nil }
            denseValues = values(dense)
            guard denseValues.allSatisfy({ $0.isFinite }) else { return nil }
        }
        self.tokens = values(tokens)
        self.weights = values(weights)
        guard zip(self.tokens, self.tokens.dropFirst()).allSatisfy({ $0 < $1 }),
              self.weights.allSatisfy({ $0 > 0 && $0.isFinite }) else { return nil }
        switch colbertStore {
        case "none":
            guard colbert == nil, colbertScale == nil else { return nil }
        case "int8":
            guard let colbert, let colbertScale, colbert.count % dim == 0, colbertScale.count == colbert.count / dim * 4 else { return nil }
            colbertRows = colbert.count / dim
            colbertCodes = values(colbert)
            colbertScales = values(colbertScale)
            guard colbertScales.allSatisfy({ $0 > 0 && $0.isFinite }) else { return nil }
        default:
            guard let colbert, colbertScale == nil, colbert.count % (2 * dim) == 0 else { return nil }
            colbertRows = colbert.count / (2 * dim)
            colbertHalf = values(colbert)
            guard colbertHalf.allSatisfy({ $0 & 0x7c00 != 0x7c00 }) else { return nil }  // a half's all-ones exponent: inf or NaN
        }
    }

    var denseBlob: [UInt8] { int8Dense ? bytes(denseCodes) : bytes(denseValues) }
    var denseScaleBlob: [UInt8]? { int8Dense ? bytes([denseScale]) : nil }
    var colbertBlob: [UInt8]? {
        switch colbertStore {
        case "none": return nil
        case "int8": return bytes(colbertCodes)
        default: return bytes(colbertHalf)
        }
    }
    var colbertScaleBlob: [UInt8]? { colbertStore == "int8" ? bytes(colbertScales) : nil }

    /// dense(q, p) by Score arithmetic: one sequential float64 sum (int8: then times the scale).
    func dense(_ q: [Float]) -> Double {
        var acc = 0.0
        if int8Dense {
            for k in 0..<q.count { acc += Double(q[k]) * Double(denseCodes[k]) }
            return acc * Double(denseScale)
        }
        for k in 0..<q.count { acc += Double(q[k]) * Double(denseValues[k]) }
        return acc
    }

    /// sparse(q, p), or nil when they share no token (the row is no sparse hit).
    func sparse(_ q: Retrieval.Lexical) -> Double? {
        var acc = 0.0, shared = false
        var i = 0, j = 0
        while i < q.ids.count && j < tokens.count {
            let a = q.ids[i], b = tokens[j]
            if a < b {
                i += 1
            } else if a > b {
                j += 1
            } else {
                acc += Double(q.weights[i]) * Double(weights[j])
                shared = true
                i += 1
                j += 1
            }
        }
        return shared ? acc : nil
    }

    /// colbert(Q, p): the mean over query vectors of the best dot; no vectors on either side: 0.
    func colbert(_ qs: [[Float]], _ dim: Int) -> Double {
        if qs.isEmpty || colbertRows == 0 { return 0 }
        var total = 0.0
        for q in qs {
            var best = -Double.infinity
            for v in 0..<colbertRows {
                var acc = 0.0
                let at = v * dim
                if colbertStore == "int8" {
                    for k in 0..<dim { acc += Double(q[k]) * Double(colbertCodes[at + k]) }
                    acc = acc * Double(colbertScales[v])
                } else {
                    for k in 0..<dim { acc += Double(q[k]) * Double(halfTable[Int(colbertHalf[at + k])]) }
                }
                if acc > best { best = acc }
            }
            total += best
        }
        return total / Double(qs.count)
    }
}

/// int8 codes and a Float scale as Python's `quantize_rows`: scale = max|x| / 127 in Float
/// (1.0 for an all-zero row), code = round-half-even(x / scale in Float) clipped to [-127, 127].
nonisolated func quantize(_ x: ArraySlice<Float>) -> ([Int8], Float) {
    let peak = x.reduce(Float(0)) { max($0, abs($1)) }
    let scale: Float = peak > 0 ? peak / 127 : 1
    return (x.map { Int8(min(max(($0 / scale).rounded(.toNearestOrEven), -127), 127)) }, scale)
}

/// Float -> IEEE binary16 bits, rounded to nearest even (numpy's `astype(float16)`), by hand:
/// Swift's Float16 is missing on macOS on Intel.
nonisolated func halfBits(_ f: Float) -> UInt16 {
    let x = f.bitPattern
    let sign = UInt16((x >> 16) & 0x8000)
    let exp = Int((x >> 23) & 0xff)
    let mant = x & 0x7f_ffff
    if exp == 0xff { return sign | 0x7c00 | (mant != 0 ? 0x200 : 0) }  // inf, NaN
    let e = exp - 127 + 15
    if e >= 31 { return sign | 0x7c00 }  // too large: inf
    if e <= 0 {  // a half subnormal (or zero): full significand >> (14 - e), rounded
        let shift = 14 - e
        if shift > 24 { return sign }
        let full = mant | 0x80_0000
        var h = full >> UInt32(shift)
        let rem = full & ((1 << UInt32(shift)) - 1), halfway = UInt32(1) << UInt32(shift - 1)
        if rem > halfway || (rem == halfway && h & 1 == 1) { h += 1 }
        return sign | UInt16(h)
    }
    var h = UInt32(e) << 10 | mant >> 13
    let rem = mant & 0x1fff
    if rem > 0x1000 || (rem == 0x1000 && h & 1 == 1) { h += 1 }  // a carry rounds into the exponent (to inf at the top)
    return sign | UInt16(h)
}

/// The little-endian bytes of an array (every platform the kit runs on is little-endian).
nonisolated func bytes<T>(_ a: [T]) -> [UInt8] {
    a.withUnsafeBytes { Array($0) }
}

nonisolated func values<T>(_ b: [UInt8]) -> [T] {
    let n = b.count / MemoryLayout<T>.stride
    return [T](unsafeUninitializedCapacity: n) { buf, count in
        b.withUnsafeBytes { src in
            if n > 0 { UnsafeMutableRawPointer(buf.baseAddress!).copyMemory(from: src.baseAddress!, byteCount: n * MemoryLayout<T>.stride) }
        }
        count = n
    }
}

