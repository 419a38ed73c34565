import Foundation  // mmap, open, fstat

// EdgeM3Index's helpers: its layout checks, the row arithmetic both indexes search with
// (EdgeM3Index and EdgeM3WritableIndex's segments), and the memory-mapped file.

nonisolated extension EdgeM3Index {
    /// Every one of `n` values finite and > 0 (none: true).
    static func allPositive(_ x: UnsafePointer<Float>?, _ n: Int) -> Bool {
        guard let x else { return true }
        for i in 0..<n where !(x[i] > 0 && x[i] < .infinity) { return false }  // NaN fails both
        return true
    }

    /// Every one of `n` float32 values finite (none: true): an exponent of all ones is inf or NaN.
    static func allFinite(_ x: UnsafeRawPointer?, float32 n: Int) -> Bool {
        guard let x else { return true }
        let u = x.assumingMemoryBound(to: UInt32.self)
        for i in 0..<n where UInt32(littleEndian: u[i]) & 0x7f80_0000 == 0x7f80_0000 { return false }
        return true
    }

    /// Every one of `n` float16 values finite (none: true): an exponent of all ones is inf or NaN.
    static func allFinite(_ x: UnsafeRawPointer?, float16 n: Int) -> Bool {
        guard let x else { return true }
        let u = x.assumingMemoryBound(to: UInt16.self)
        for i in 0..<n where UInt16(littleEndian: u[i]) & 0x7c00 == 0x7c00 { return false }
        return true
    }

    static func checkOffsets(_ o: UnsafePointer<Int64>, _ n: Int, total: Int, _ at: String) throws {
        guard o[0] == 0 else { throw EdgeM3Error("\(at): must start at 0; the index is corrupt", kind: .corruptIndex) }
        var prev: Int64 = 0
        for i in 0..<n {
            guard o[i] >= prev, o[i] <= Int64(total) else { throw EdgeM3Error("\(at): not ascending within 0..\(total); the index is corrupt", kind: .corruptIndex) }
            prev = o[i]
        }
        guard prev == Int64(total) else { throw EdgeM3Error("\(at): must end at \(total); the index is corrupt", kind: .corruptIndex) }
    }
}

/// Chunk number per row (how many earlier rows share its id) and the largest number of chunks of one id.
nonisolated func chunkNumbers(_ ids: [EdgeM3Index.PassageID]) -> ([Int], Int) {
    var seen: [EdgeM3Index.PassageID: Int] = [:]
    seen.reserveCapacity(ids.count)
    var out = [Int](repeating: 0, count: ids.count)
    var most = 0
    for (r, id) in ids.enumerated() {
        let c = seen[id, default: 0]
        seen[id] = c + 1
        out[r] = c
        most = max(most, c + 1)
    }
    return (out, most)
}

/// The rows a passage search needs: `k` passages of at most `most` chunks each, `k * most` rows
/// (at least `k`; Int.max when the product overflows; a `k` below 1 as it is, for its error).
nonisolated func rowsFor(_ k: Int, passagesOf most: Int) -> Int {
    if k < 1 { return k }
    let (p, overflow) = k.multipliedReportingOverflow(by: max(most, 1))
    return overflow ? Int.max : p
}

/// The first hit of each passage among row hits `rows` (best first), at most `k` of them.
nonisolated func firstOfEachPassage(_ rows: [(Int, Double)], _ k: Int,
                                    _ id: (Int) -> EdgeM3Index.PassageID) -> [(Int, Double)] {
    var seen = Set<EdgeM3Index.PassageID>()
    var out: [(Int, Double)] = []
    for h in rows where out.count < k && seen.insert(id(h.0)).inserted { out.append(h) }
    return out
}

/// `emit(r, dot(q, row r))` for the stored rows `from..<to` (row r at `x + r * d`), in row order.
/// Four rows at a time: each dot is still one sequential float64 sum (Score arithmetic), the
/// same bits, but four independent chains keep the CPU's adders busy.
@inline(__always)
nonisolated func rowDots<T>(_ q: UnsafePointer<Float>, _ x: UnsafePointer<T>, _ d: Int, _ from: Int, _ to: Int,
                        _ widen: (T) -> Double, _ emit: (Int, Double) -> Void) {
    var r = from
    while r + 4 <= to {
        let p0 = x + r * d, p1 = p0 + d, p2 = p1 + d, p3 = p2 + d
        var a0 = 0.0, a1 = 0.0, a2 = 0.0, a3 = 0.0
        for k in 0..<d {
            let v = Double(q[k])
            a0 += v * widen(p0[k])
            a1 += v * widen(p1[k])
            a2 += v * widen(p2[k])
            a3 += v * widen(p3[k])
        }
        emit(r, a0)
        emit(r + 1, a1)
        emit(r + 2, a2)
        emit(r + 3, a3)
        r += 4
    }
    while r < to {
        let p = x + r * d
        var acc = 0.0
        for k in 0..<d { acc += Double(q[k]) * widen(p[k]) }
        emit(r, acc)
        r += 1
    }
}

/// float16 bits -> Float (exact), a table so the ColBERT loop stays one load per value (and works
/// where Swift has no `Float16`, e.g. macOS on Intel).
nonisolated let halfTable: [Float] = (0..<65536).map { h in
    let sign: Float = h & 0x8000 != 0 ? -1 : 1
    let exp = (h >> 10) & 0x1f, mant = h & 0x3ff
    switch exp {
    case 0: return sign * Float(mant) * Float(sign: .plus, exponent: -24, significand: 1)
    case 31: return mant == 0 ? sign * .infinity : .nan
    default: return sign * Float(sign: .plus, exponent: exp - 15, significand: 1 + Float(mant) / 1024)
    }
}

/// A file memory-mapped read-only for the life of the object (an empty file maps to nothing).
nonisolated final class MappedFile: @unchecked Sendable {
    let url: URL
    let size: Int
    let base: UnsafeRawPointer?

    init(_ url: URL) throws {
        self.url = url
        let fd = open(url.path, O_RDONLY)
        guard fd >= 0 else { throw EdgeM3Error("\(url.path): missing; the index is corrupt", kind: .corruptIndex) }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw EdgeM3Error("\(url.path): cannot read its size", kind: .corruptIndex) }
        size = Int(st.st_size)
        if size == 0 {
            base = nil
            return
        }
        let p = mmap(nil, size, PROT_READ, MAP_PRIVATE, fd, 0)
        guard let p, p != MAP_FAILED else { throw EdgeM3Error("\(url.path): cannot be memory-mapped", kind: .corruptIndex) }
        base = UnsafeRawPointer(p)
    }

    deinit {
        if let base { munmap(UnsafeMutableRawPointer(mutating: base), size) }
    }
}

/// The first index of a sorted collection whose element is >= `x`.
nonisolated func lowerBound<C: RandomAccessCollection>(_ c: C, _ x: C.Element) -> C.Index where C.Element: Comparable {
    var lo = c.startIndex, hi = c.endIndex
    while lo < hi {
        let mid = c.index(lo, offsetBy: c.distance(from: lo, to: hi) / 2)
        if c[mid] < x { lo = c.index(after: mid) } else { hi = mid }
    }
    return lo
}

/// The best `k` of items 0..<n by `score`: score descending, then item ascending (EdgeM3Index's order).
nonisolated func bestOf(_ k: Int, _ n: Int, _ score: (Int) throws -> Double) rethrows -> [(Int, Double)] {
    let m = min(k, n)
    if m <= 0 { return [] }
    var rows = [Int](repeating: 0, count: m)
    var scores = [Double](repeating: 0, count: m)
    var size = 0
    for i in 0..<n {
        let s = try score(i)
        if size == m && !(s > scores[m - 1]) { continue }
        var at = size == m ? m - 1 : size
        while at > 0 && s > scores[at - 1] {
            scores[at] = scores[at - 1]
            rows[at] = rows[at - 1]
            at -= 1
        }
        scores[at] = s
        rows[at] = i
        if size < m { size += 1 }
    }
    return (0..<size).map { (rows[$0], scores[$0]) }
}

/// A query checked for a search of `k` in `mode` over an index of `dim` and `colbertStore`: one rule
/// for EdgeM3Index and EdgeM3WritableIndex. The signals the mode uses.
nonisolated func checkQuery(_ query: Retrieval.Vectors, k: Int, mode: String, weights: [Double], dim: Int,
                            colbertStore: String) throws -> [String] {
        guard k >= 1 else { throw EdgeM3Error("k: must be at least 1, got \(k)") }
        let used = try Retrieval.signals(of: mode)
        try Retrieval.checkWeights(weights)
        let (nd, ns, nc) = (Retrieval.signals[0], Retrieval.signals[1], Retrieval.signals[2])
        if let q = query.dense, q.count != dim { throw EdgeM3Error("query dense_vecs: \(q.count) values, the index has \(dim)") }
        if let c = query.colbert, c.contains(where: { $0.count != dim }) {
            throw EdgeM3Error("query colbert_vecs: rows must have \(dim) values, the index has \(dim)")
        }
        if used.contains(nd) && query.dense == nil { throw EdgeM3Error("mode \(mode): the query has no dense_vecs") }
        if used.contains(ns) && query.lexical == nil { throw EdgeM3Error("mode \(mode): the query has no lexical_weights") }
        if used.contains(nc) {
            if query.colbert == nil { throw EdgeM3Error("mode \(mode): the query has no colbert_vecs") }
            if colbertStore == "none" { throw EdgeM3Error("mode \(mode): the index has no ColBERT vectors (built with --colbert none)") }
        }
        return used
}

/// The best `k` of rows 0..<n under `mode`, best first (docs/index-format.md, "Search"), as both
/// indexes rank: one signal ranks every row by it (`sparse` only the rows sharing a token with the
/// query); a hybrid mode re-scores the union of the best `max(k, HYBRID_CANDIDATES)` rows by dense
/// and by sparse with Retrieval.hybrid. `dense` and `sparse` score every row at once (sparse: each
/// row's sum, 0 where no token is shared, and the rows sharing one, ascending); `colbert` one row.
nonisolated func rankByMode(_ k: Int, _ n: Int, mode: String, weights: [Double], used: [String],
                            dense: () -> [Double], sparse: () -> (acc: [Double], rows: [Int]),
                            colbert: (Int) -> Double) throws -> [(Int, Double)] {
    let (nd, nc) = (Retrieval.signals[0], Retrieval.signals[2])
    if used.count == 1 {
        switch used[0] {
        case nd:
            let d = dense()
            return bestOf(k, n) { d[$0] }
        case nc: return bestOf(k, n) { colbert($0) }
        default:
            let s = sparse()
            return bestOf(k, s.rows.count) { s.acc[s.rows[$0]] }.map { (s.rows[$0.0], $0.1) }
        }
    }
    let c = max(k, EdgeM3Contract.hybridCandidates)
    let s = sparse()
    let dAll = dense()
    var candidates = Set<Int>()
    for h in bestOf(c, n, { dAll[$0] }) { candidates.insert(h.0) }
    for h in bestOf(c, s.rows.count, { s.acc[s.rows[$0]] }) { candidates.insert(s.rows[h.0]) }
    let picked = candidates.sorted()
    let withColbert = used.contains(nc)
    var scores = [Double](repeating: 0, count: picked.count)
    for (i, r) in picked.enumerated() {
        scores[i] = try Retrieval.hybrid(mode, dense: dAll[r], sparse: s.acc[r], colbert: withColbert ? colbert(r) : 0,
                                         weights: weights)
    }
    return bestOf(k, picked.count) { scores[$0] }.map { (picked[$0.0], $0.1) }
}
