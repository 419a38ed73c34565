import Foundation

/// The writable index's logical rows, in memory: the base's surviving rows in base order, then
/// the database's chunks by seq (docs/index-format.md, "The writable index"). The base is read
/// through EdgeM3Index's public API only (its scores and ids); `search` follows EdgeM3Index.search's
/// rules over the logical rows. Changed only after a commit (`tombstone`, `drop`, `append`) or by
/// `install` of a committed state; not thread-safe (EdgeM3WritableIndex holds it under its lock).
nonisolated struct IndexSegments {
    typealias PassageID = EdgeM3Index.PassageID

    /// Where a passage's chunks are: its base rows (none removed: a removal tombstones them all)
    /// or its database seqs.
    enum Place { case base([Int]), db([Int64]) }

    let dim: Int
    let colbertStore: String
    private(set) var base: EdgeM3Index?
    private var baseRowOf: [PassageID: Int] = [:]  // base id -> its first row (chunk 0)
    private var baseMore: [PassageID: [Int]] = [:]  // a base id of several chunks -> its other rows
    private var baseAlive = 0  // base passages not removed
    private var removed = Set<Int>()
    /// Base rows not removed, ascending: the first logical rows.
    private(set) var survivors: [Int] = []
    /// The database's chunks, by seq: the logical rows after the survivors.
    private(set) var passages: [StoredPassage] = []
    private var seqsOf: [PassageID: [Int64]] = [:]  // an added passage's chunks' seqs, in chunk order

    init(dim: Int, colbertStore: String) {
        self.dim = dim
        self.colbertStore = colbertStore
    }

    /// A committed state (the base's id maps rebuilt only when the base changed).
    mutating func install(base newBase: EdgeM3Index?, removed: Set<Int>, passages: [StoredPassage]) {
        if base !== newBase {
            base = newBase
            baseRowOf = [:]
            baseMore = [:]
            if let b = newBase {
                baseRowOf.reserveCapacity(b.count)
                for (r, id) in b.ids.enumerated() {
                    if b.chunks[r] == 0 { baseRowOf[id] = r } else { baseMore[id, default: []].append(r) }
                }
            }
        }
        self.removed = removed
        survivors = (0..<(base?.count ?? 0)).filter { !removed.contains($0) }
        baseAlive = baseRowOf.values.reduce(0) { $0 + (removed.contains($1) ? 0 : 1) }
        self.passages = passages
        seqsOf = [:]
        for p in passages { seqsOf[p.id, default: []].append(p.seq) }
    }

    // ------------------------------------------------------------------ reading

    /// Passages (not rows: a passage of several chunks counts once).
    var count: Int { baseAlive + seqsOf.count }

    /// Logical rows: every surviving passage's chunks.
    var rows: Int { survivors.count + passages.count }

    func place(of id: PassageID) -> Place? {
        if let seqs = seqsOf[id] { return .db(seqs) }
        if let r = baseRowOf[id], !removed.contains(r) { return .base([r] + (baseMore[id] ?? [])) }
        return nil
    }

    /// Every passage's id once, in logical row order (its chunk 0's row).
    func ids() -> [PassageID] {
        var out: [PassageID] = []
        out.reserveCapacity(count)
        if let base { for r in survivors where base.chunks[r] == 0 { out.append(base.ids[r]) } }
        for p in passages where p.chunk == 0 { out.append(p.id) }
        return out
    }

    func idOf(_ row: Int) -> PassageID {
        row < survivors.count ? base!.ids[survivors[row]] : passages[row - survivors.count].id
    }

    func chunkOf(_ row: Int) -> Int {
        row < survivors.count ? base!.chunks[survivors[row]] : passages[row - survivors.count].chunk
    }

    // ------------------------------------------------------------------ changes after a commit

    /// A base passage's rows removed.
    mutating func tombstone(_ rows: [Int]) {
        for r in rows {
            removed.insert(r)
            survivors.remove(at: lowerBound(survivors, r))
        }
        baseAlive -= 1
    }

    /// An added passage's chunks deleted.
    mutating func drop(_ id: PassageID, _ seqs: [Int64]) {
        seqsOf[id] = nil
        for seq in seqs { passages.remove(at: lowerBound(passages.lazy.map { $0.seq }, seq)) }
    }

    /// A chunk inserted (the last logical row).
    mutating func append(_ p: StoredPassage) {
        passages.append(p)
        seqsOf[p.id, default: []].append(p.seq)
    }

    // ------------------------------------------------------------------ search

    /// The best `k` passages for `mode`, best first, each hit its passage's best chunk; `chunks`:
    /// the best `k` logical rows themselves. Exactly EdgeM3Index.search's rules
    /// (docs/index-format.md "Search", "Passages and chunks") over the logical rows, the largest
    /// number of chunks taken over the surviving passages.
    func search(_ query: Retrieval.Vectors, k: Int, mode: String, weights: [Double], chunks: Bool) throws
        -> [EdgeM3WritableIndex.Hit] {
        let rows = try rowSearch(query, k: chunks ? k : rowsFor(k, passagesOf: maxChunks()), mode: mode, weights: weights)
        return (chunks ? rows : firstOfEachPassage(rows, k) { idOf($0) }).map {
            EdgeM3WritableIndex.Hit(row: $0.0, id: idOf($0.0), chunk: chunkOf($0.0), score: $0.1)
        }
    }

    /// The largest number of chunks of one surviving passage (0: none). A passage is removed
    /// whole, so a surviving base passage's rows are its chunks 0..n-1: the largest surviving
    /// chunk number + 1.
    private func maxChunks() -> Int {
        var most = 0
        if let base, base.maxChunks > 1 {
            for r in survivors { most = max(most, base.chunks[r] + 1) }
        } else if !survivors.isEmpty {
            most = 1
        }
        for seqs in seqsOf.values { most = max(most, seqs.count) }
        return most
    }

    /// Every logical row's dense score: the base's (public denseAll) at the survivors, then the chunks'.
    private func denseAll(_ q: [Float]) -> [Double] {
        let s0 = survivors.count
        var out = [Double](repeating: 0, count: rows)
        if let base {
            let all = base.denseAll(q)
            for (i, r) in survivors.enumerated() { out[i] = all[r] }
        }
        for (j, p) in passages.enumerated() { out[s0 + j] = p.dense(q) }
        return out
    }

    private func colbert(_ cq: [[Float]], _ row: Int) -> Double {
        row < survivors.count ? base!.colbertScore(cq, survivors[row]) : passages[row - survivors.count].colbert(cq, dim)
    }

    /// Every logical row's sparse score and the rows sharing a token with the query, ascending.
    private func sparseAll(_ lex: Retrieval.Lexical) -> (acc: [Double], rows: [Int]) {
        let s0 = survivors.count
        var acc = [Double](repeating: 0, count: rows)
        var hit: [Int] = []
        if let base {
            let s = base.sparseScores(lex)
            for (i, r) in survivors.enumerated() where s.touched[r] {
                acc[i] = s.acc[r]
                hit.append(i)
            }
        }
        for (j, p) in passages.enumerated() {
            if let v = p.sparse(lex) {
                acc[s0 + j] = v
                hit.append(s0 + j)
            }
        }
        return (acc, hit)
    }

    private func rowSearch(_ query: Retrieval.Vectors, k: Int, mode: String, weights: [Double]) throws -> [(Int, Double)] {
        let used = try checkQuery(query, k: k, mode: mode, weights: weights, dim: dim, colbertStore: colbertStore)
        if rows == 0 { return [] }
        let cq = query.colbert ?? []
        return try rankByMode(k, rows, mode: mode, weights: weights, used: used,
                              dense: { denseAll(query.dense ?? []) }, sparse: { sparseAll(query.lexical!) },
                              colbert: { colbert(cq, $0) })
    }
}
