import Foundation

/// An index an app writes on the device (docs/index-format.md, "The writable index"): a format-1
/// base folder, memory-mapped and never written in place (read by `EdgeM3Index`), and
/// `index.sqlite` (the platform's SQLite) holding every write since: the passages added, in
/// their stored form, and the base rows removed. `search` returns the same logical rows and
/// float64 score bits as Python's `WritableIndex`, the Kotlin kit, and a format-1 index built
/// fresh from the surviving passages in row order. A passage is one or more rows, its chunks
/// (docs/index-format.md, "Passages and chunks"): `add(_:text:)` stores every chunk of a long
/// text, `search` ranks passages by their best chunk (`chunks: true`: the rows themselves).
///
/// Every write is one SQLite transaction (WAL): a killed app loses at most the write in flight.
/// Writers in other processes are serialised by SQLite's lock (waiting up to INDEX_DB_BUSY_MS,
/// then `.indexBusy`); each call first checks `PRAGMA data_version` and reloads what another
/// connection committed. Thread-safe (one lock); blocking: call it off the main thread.
nonisolated public final class EdgeM3WritableIndex: @unchecked Sendable {  // mutable state only under `lock`
    public typealias PassageID = EdgeM3Index.PassageID

    /// One search result: the logical row (surviving base rows in base order, then the added
    /// passages' chunks in the order they were added), the passage's id, the row's chunk number
    /// in its passage, its exact score. A passage search's hit is the passage's best chunk.
    public struct Hit: Hashable, Sendable {
        public let row: Int
        public let id: PassageID
        public let chunk: Int
        public let score: Double
    }

    public let folder: URL
    /// Vector width: the bundle's hidden size.
    public let dim: Int
    /// `float32` or `int8`.
    public let denseStore: String
    /// `fp16`, `int8` or `none`.
    public let colbertStore: String
    /// The identity of the model that embeds the passages (index.json's `bundle`), nil: none recorded.
    public let bundle: [String: String]?

    private let bundleJSON: Any  // meta `bundle` parsed (NSNull or a dictionary), compared with a base's
    private let embedder: EdgeM3Embedder?
    private let verifySHA256: Bool
    private let durable: Bool
    private let lock = NSLock()

    // ---- state, under `lock`
    private var db: SQLiteDB?
    private var dataVersion: Int64 = 0
    private var baseName = ""  // "" no base, "." the folder itself, "base-<n>"
    private var baseSha = ""
    private var generation = 0
    private var base: EdgeM3Index?
    private var baseRowOf: [PassageID: Int] = [:]  // base id -> its first row (chunk 0)
    private var baseMore: [PassageID: [Int]] = [:]  // a base id of several chunks -> its other rows
    private var baseAlive = 0  // base passages not removed
    private var removed = Set<Int>()
    private var survivors: [Int] = []  // base rows not removed, ascending
    private var passages: [StoredPassage] = []  // the database's chunks, by seq
    private var seqsOf: [PassageID: [Int64]] = [:]  // an added passage's chunks' seqs, in chunk order
    private var collected = false  // garbage removed by this connection's first write

    private var dbURL: URL { folder.appendingPathComponent(EdgeM3Contract.indexDb) }

    // ------------------------------------------------------------------ opening

    /// Opens an index folder: its `index.sqlite` (and the base it names), or a format-1 folder
    /// alone (its first write creates the database on top of it). With `embedder`, refuses an
    /// index built by another bundle and enables `add(_:text:)`. `durable`: synchronous=FULL
    /// (a power cut keeps every commit) instead of NORMAL. Any problem: one EdgeM3Error.
    public init(folder: URL, embedder: EdgeM3Embedder? = nil, verifySHA256: Bool = true, durable: Bool = false) throws {
        self.folder = folder
        self.embedder = embedder
        self.verifySHA256 = verifySHA256
        self.durable = durable
        let dbPath = folder.appendingPathComponent(EdgeM3Contract.indexDb).path
        if FileManager.default.fileExists(atPath: dbPath) {
            let db = try EdgeM3WritableIndex.connect(dbPath, durable: durable)
            if verifySHA256 {  // the database's pages, as the base's files are checked by their sha256
                let check = try db.prepare("PRAGMA quick_check")
                let verdict = try check.step() ? check.text(0) : "no answer"
                guard verdict == "ok" else {  // SQLite's verdict spans lines: one line (issue 38)
                    let line = verdict.split(whereSeparator: \.isNewline).joined(separator: "; ")
                    throw EdgeM3Error("\(dbPath): damaged (\(line.prefix(200))); refusing a corrupt index database", kind: .corruptIndex)
                }
            }
            let loaded = try EdgeM3WritableIndex.reread(db, folder: folder, verifySHA256: verifySHA256, reuse: nil)
            (dim, denseStore, colbertStore, bundleJSON) = (loaded.meta.dim, loaded.meta.dense, loaded.meta.colbert, loaded.meta.bundle)
            bundle = (loaded.meta.bundle as? [String: Any])?.compactMapValues { $0 as? String }
            self.db = db
            install(loaded)
        } else {
            let manifest = folder.appendingPathComponent(EdgeM3Contract.indexManifest)
            guard FileManager.default.fileExists(atPath: manifest.path) else {
                throw EdgeM3Error("\(folder.path): not an index (no \(EdgeM3Contract.indexDb), no \(EdgeM3Contract.indexManifest))",
                                  kind: .corruptIndex)
            }
            let (sha, tree) = try EdgeM3WritableIndex.readManifest(folder)
            let b = try EdgeM3Index(folder: folder, verifySHA256: verifySHA256)
            let bundleTree = tree["bundle"] ?? NSNull()
            (dim, denseStore, colbertStore, bundleJSON) = (b.dim, b.denseStore, b.colbertStore, bundleTree)
            bundle = (bundleTree as? [String: Any])?.compactMapValues { $0 as? String }
            install(Loaded(meta: Meta(dim: b.dim, dense: b.denseStore, colbert: b.colbertStore, bundle: bundleTree, base: ".",
                                      baseSha: sha, generation: 0), base: b, removed: [], passages: [], dataVersion: 0))
        }
        if let embedder { try checkBundle(embedder) }
    }

    private init(created folder: URL, dim: Int, dense: String, colbert: String, bundleJSON: Any, db: SQLiteDB,
                 embedder: EdgeM3Embedder?, durable: Bool) throws {
        self.folder = folder
        self.embedder = embedder
        self.verifySHA256 = true
        self.durable = durable
        (self.dim, denseStore, colbertStore, self.bundleJSON) = (dim, dense, colbert, bundleJSON)
        bundle = (bundleJSON as? [String: Any])?.compactMapValues { $0 as? String }
        self.db = db
        install(try EdgeM3WritableIndex.read(db, folder: folder, verifySHA256: true, reuse: nil))
        if let embedder { try checkBundle(embedder) }
    }

    /// A new index with no base in `folder` (created if missing; it must not hold an index):
    /// `dense` `float32` or `int8`, `colbert` `fp16`, `int8` or `none`, `bundle` the embedding
    /// model's identity (`bundleIdentity(of:)`; index.json's `bundle`), nil for none.
    public static func create(folder: URL, dim: Int, dense: String = "float32", colbert: String = "fp16",
                              bundle: [String: String]? = nil, embedder: EdgeM3Embedder? = nil,
                              durable: Bool = false) throws -> EdgeM3WritableIndex {
        guard dim >= 1, dim <= EdgeM3Contract.indexMaxDim else {
            throw EdgeM3Error("dim: must be from 1 to \(EdgeM3Contract.indexMaxDim), got \(dim)")
        }
        guard EdgeM3Contract.denseStores.contains(dense) else {
            throw EdgeM3Error("dense: \(dense) unknown (choose from \(EdgeM3Contract.denseStores.joined(separator: ", ")))")
        }
        guard EdgeM3Contract.colbertStores.contains(colbert) else {
            throw EdgeM3Error("colbert: \(colbert) unknown (choose from \(EdgeM3Contract.colbertStores.joined(separator: ", ")))")
        }
        let fm = FileManager.default
        for name in [EdgeM3Contract.indexDb, EdgeM3Contract.indexManifest] where fm.fileExists(atPath: folder.appendingPathComponent(name).path) {
            throw EdgeM3Error("\(folder.path): already holds an index (\(name))")
        }
        do {
            try fm.createDirectory(at: folder, withIntermediateDirectories: true)
        } catch {
            throw EdgeM3Error("\(folder.path): cannot create the folder (\(error.localizedDescription))", kind: .writeFailed)
        }
        let meta = Meta(dim: dim, dense: dense, colbert: colbert, bundle: bundle.map { $0 as Any } ?? NSNull(), base: "",
                        baseSha: "", generation: 0)
        guard try createDatabase(folder, meta) else {
            throw EdgeM3Error("\(folder.path): already holds an index (\(EdgeM3Contract.indexDb))")
        }
        let db = try connect(folder.appendingPathComponent(EdgeM3Contract.indexDb).path, durable: durable)
        return try EdgeM3WritableIndex(created: folder, dim: dim, dense: dense, colbert: colbert, bundleJSON: meta.bundle,
                                       db: db, embedder: embedder, durable: durable)
    }

    /// index.json's `bundle` for the embedder's model file and tokenizer (as Python's BundleIdentity.of).
    public static func bundleIdentity(of embedder: EdgeM3Embedder) -> [String: String] {
        let m = embedder.manifest
        let model = embedder.pipeline.model.file, tokenizer = m.tokenizer.file
        return ["model_file": model, "model_sha256": m.files[model]?.sha256 ?? "", "tokenizer_file": tokenizer,
                "tokenizer_sha256": m.files[tokenizer]?.sha256 ?? "", "quant": m.quant, "path": ""]
    }

    private func checkBundle(_ embedder: EdgeM3Embedder) throws {
        guard let bundle else { throw EdgeM3Error("\(folder.path): records no bundle, so queries cannot be checked against it") }
        let files = embedder.manifest.files
        for key in ["model", "tokenizer"] {
            let file = bundle["\(key)_file"] ?? "", sha = bundle["\(key)_sha256"] ?? ""
            guard files[file]?.sha256 == sha else {
                throw EdgeM3Error("\(folder.path): index built by another bundle (\(file) sha256 \(sha.prefix(12))..., "
                    + "the bundle's is \(files[file].map { String($0.sha256.prefix(12)) } ?? "absent"))")
            }
        }
    }

    // ------------------------------------------------------------------ reading

    /// Passages (not rows: a passage of several chunks counts once).
    public var count: Int {
        get throws {
            try locked {
                try refresh()
                return baseAlive + seqsOf.count
            }
        }
    }

    /// Logical rows: every surviving passage's chunks (what a search's `Hit.row` indexes).
    public var rows: Int {
        get throws {
            try locked {
                try refresh()
                return survivors.count + passages.count
            }
        }
    }

    public func contains(_ id: PassageID) throws -> Bool {
        try locked {
            try refresh()
            return place(of: id) != nil
        }
    }

    /// Search with a query embedded by the same bundle (`EdgeM3Embedder.embed`).
    public func search(_ query: Embedding, k: Int, mode: String, weights: [Double] = Retrieval.defaultWeights,
                       chunks: Bool = false) throws -> [Hit] {
        try search(try Retrieval.Vectors(query), k: k, mode: mode, weights: weights, chunks: chunks)
    }

    /// A text embedded by the index's embedder, then searched.
    public func search(text: String, k: Int, mode: String, weights: [Double] = Retrieval.defaultWeights,
                       chunks: Bool = false) throws -> [Hit] {
        try search(try Retrieval.Vectors(try needEmbedder().embed(text)), k: k, mode: mode, weights: weights, chunks: chunks)
    }

    /// The best `k` passages for `mode`, best first, each hit its passage's best chunk; `chunks`:
    /// the best `k` logical rows themselves. Exactly EdgeM3Index.search's rules
    /// (docs/index-format.md "Search", "Passages and chunks") over the logical rows, the largest
    /// number of chunks taken over the surviving passages.
    public func search(_ query: Retrieval.Vectors, k: Int, mode: String, weights: [Double] = Retrieval.defaultWeights,
                       chunks: Bool = false) throws -> [Hit] {
        try locked {
            try refresh()
            let rows = try rowSearch(query, k: chunks ? k : rowsFor(k, passagesOf: maxChunks()), mode: mode, weights: weights)
            return (chunks ? rows : firstOfEachPassage(rows, k) { idOf($0) }).map {
                Hit(row: $0.0, id: idOf($0.0), chunk: chunkOf($0.0), score: $0.1)
            }
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

    private func rowSearch(_ query: Retrieval.Vectors, k: Int, mode: String, weights: [Double]) throws -> [(Int, Double)] {
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
        let s0 = survivors.count, n = s0 + passages.count
        if n == 0 { return [] }
        let q = query.dense ?? []
        let cq = query.colbert ?? []
        func denseAll() -> [Double] {
            var out = [Double](repeating: 0, count: n)
            if let base {
                let all = base.denseAll(q)
                for (i, r) in survivors.enumerated() { out[i] = all[r] }
            }
            for (j, p) in passages.enumerated() { out[s0 + j] = p.dense(q) }
            return out
        }
        func colbert(_ row: Int) -> Double {
            row < s0 ? base!.colbertScore(cq, survivors[row]) : passages[row - s0].colbert(cq, dim)
        }
        /// Every logical row's sparse score and the rows sharing a token with the query, ascending.
        func sparseAll() -> (acc: [Double], rows: [Int]) {
            let lex = query.lexical!
            var acc = [Double](repeating: 0, count: n)
            var rows: [Int] = []
            if let base {
                let s = base.sparseScores(lex)
                for (i, r) in survivors.enumerated() where s.touched[r] {
                    acc[i] = s.acc[r]
                    rows.append(i)
                }
            }
            for (j, p) in passages.enumerated() {
                if let v = p.sparse(lex) {
                    acc[s0 + j] = v
                    rows.append(s0 + j)
                }
            }
            return (acc, rows)
        }
        if used.count == 1 {
            switch used[0] {
            case nd:
                let d = denseAll()
                return bestOf(k, n) { d[$0] }
            case nc: return bestOf(k, n) { colbert($0) }
            default:
                let s = sparseAll()
                return bestOf(k, s.rows.count) { s.acc[s.rows[$0]] }.map { (s.rows[$0.0], $0.1) }
            }
        }
        let c = max(k, EdgeM3Contract.hybridCandidates)
        let s = sparseAll()
        let dAll = denseAll()
        var candidates = Set<Int>()
        for h in bestOf(c, n, { dAll[$0] }) { candidates.insert(h.0) }
        for h in bestOf(c, s.rows.count, { s.acc[s.rows[$0]] }) { candidates.insert(s.rows[h.0]) }
        let rows = candidates.sorted()
        let withColbert = used.contains(nc)
        var scores = [Double](repeating: 0, count: rows.count)
        for (i, r) in rows.enumerated() {
            scores[i] = try Retrieval.hybrid(mode, dense: dAll[r], sparse: s.acc[r], colbert: withColbert ? colbert(r) : 0,
                                             weights: weights)
        }
        return bestOf(k, rows.count) { scores[$0] }.map { (rows[$0.0], $0.1) }
    }

    private func idOf(_ row: Int) -> PassageID {
        row < survivors.count ? base!.ids[survivors[row]] : passages[row - survivors.count].id
    }

    private func chunkOf(_ row: Int) -> Int {
        row < survivors.count ? base!.chunks[survivors[row]] : passages[row - survivors.count].chunk
    }

    /// Where a passage's chunks are: its base rows (none removed: a removal tombstones them all)
    /// or its database seqs.
    private enum Place { case base([Int]), db([Int64]) }

    private func place(of id: PassageID) -> Place? {
        if let seqs = seqsOf[id] { return .db(seqs) }
        if let r = baseRowOf[id], !removed.contains(r) { return .base([r] + (baseMore[id] ?? [])) }
        return nil
    }

    // ------------------------------------------------------------------ writing

    /// Appends one passage of one chunk (precomputed pipeline outputs) as the last logical row.
    /// An id already in the index: `.duplicateId`, nothing written.
    public func add(_ id: PassageID, _ vectors: Retrieval.Vectors) throws {
        try addAll(passages: [(id, [vectors])])
    }

    /// Appends one passage of precomputed chunks (chunk 0 first) as the last logical rows. No
    /// chunk: `.invalidInput`; an id already in the index: `.duplicateId`; nothing written.
    public func add(_ id: PassageID, chunks: [Retrieval.Vectors]) throws {
        try addAll(passages: [(id, chunks)])
    }

    /// Every chunk of `text` (`EdgeM3Embedder.embedChunks`, by the index's embedder: open it with
    /// `init(folder:embedder:)`), added as one passage.
    public func add(_ id: PassageID, text: String) throws {
        try add(id, chunks: try embedChunks(text))
    }

    /// Appends passages of one chunk each in one transaction: all or nothing.
    public func addAll(_ items: [(PassageID, Retrieval.Vectors)]) throws {
        try addAll(passages: items.map { ($0.0, [$0.1]) })
    }

    /// Appends passages, each its chunks, in one transaction: all or nothing.
    public func addAll(passages items: [(PassageID, [Retrieval.Vectors])]) throws {
        let all = try items.map { try stored($0.0, $0.1) }
        var seen = Set<PassageID>()
        for (id, _) in items where !seen.insert(id).inserted {
            throw EdgeM3Error("\(describe(id)): given twice in one batch", kind: .duplicateId)
        }
        try write { db in
            for (id, _) in items where place(of: id) != nil {
                throw EdgeM3Error("\(describe(id)): already in the index (update it, or remove it first)", kind: .duplicateId)
            }
            let added = try all.joined().map { try insert(db, $0) }
            return { for p in added { self.append(p) } }
        }
    }

    /// Replaces a passage by one chunk: removed (every chunk) and appended again in one
    /// transaction (it becomes the last logical row). A missing id: `.unknownId`, nothing written.
    public func update(_ id: PassageID, _ vectors: Retrieval.Vectors) throws {
        try update(id, chunks: [vectors])
    }

    /// Replaces a passage by these chunks (the last logical rows). No chunk: `.invalidInput`; a
    /// missing id: `.unknownId`; nothing written.
    public func update(_ id: PassageID, chunks: [Retrieval.Vectors]) throws {
        let ps = try stored(id, chunks)
        try write { db in
            let drop = try delete(db, id)
            let added = try ps.map { try insert(db, $0) }
            return {
                drop()
                for p in added { self.append(p) }
            }
        }
    }

    /// Replaces a passage by every chunk of `text`, embedded by the index's embedder.
    public func update(_ id: PassageID, text: String) throws {
        try update(id, chunks: try embedChunks(text))
    }

    /// A passage's chunks in stored form (quantized here, once); no chunk is refused.
    private func stored(_ id: PassageID, _ chunks: [Retrieval.Vectors]) throws -> [StoredPassage] {
        guard !chunks.isEmpty else { throw EdgeM3Error("\(describe(id)): no chunks (a passage has at least one)") }
        return try chunks.enumerated().map {
            try StoredPassage(id: id, chunk: $0.offset, $0.element, dim: dim, dense: denseStore, colbert: colbertStore)
        }
    }

    private func embedChunks(_ text: String) throws -> [Retrieval.Vectors] {
        try needEmbedder().embedChunks(text).map { try Retrieval.Vectors($0) }
    }

    /// Removes a passage, every chunk (a base passage's rows get tombstones). A missing id:
    /// `.unknownId`, nothing changed.
    public func remove(_ id: PassageID) throws {
        try write { db in try delete(db, id) }
    }

    /// Writes the surviving passages, in logical-row order and stored form, as a new format-1
    /// base (`base-<generation+1>/`, an atomic folder write), then in one transaction empties the
    /// database's passages and tombstones and points it at the new base; then deletes the old base.
    public func compact() throws {
        let written = try locked {
            try refresh()
            return db != nil
        }
        guard written else { return }  // no database yet: the format-1 base is already compact
        try write { db in
            let next = generation + 1
            let name = EdgeM3Contract.indexBasePrefix + String(next)
            let target = folder.appendingPathComponent(name)
            let fm = FileManager.default
            if fm.fileExists(atPath: target.path) { try? fm.removeItem(at: target) }  // garbage of a killed compaction
            let tmp = folder.appendingPathComponent(".\(name).building-\(UUID().uuidString.prefix(8))")
            do {
                try fm.createDirectory(at: tmp, withIntermediateDirectories: false)
                try writeBase(tmp)
                guard rename(tmp.path, target.path) == 0 else {
                    throw EdgeM3Error("\(target.path): cannot rename the new base into place (\(String(cString: strerror(errno))))",
                                      kind: .writeFailed)
                }
                syncFolder(folder)
            } catch {
                try? fm.removeItem(at: tmp)
                throw (error as? EdgeM3Error) ?? EdgeM3Error("\(tmp.path): \(error.localizedDescription)", kind: .writeFailed)
            }
            let newBase: EdgeM3Index
            let sha: String
            do {
                sha = try EdgeM3WritableIndex.readManifest(target).0
                newBase = try EdgeM3Index(folder: target, verifySHA256: false)
                let set = try db.prepare("UPDATE meta SET value = ? WHERE key = ?", writing: true)
                for (key, value) in [("base", name), ("base_sha256", sha), ("generation", String(next))] {
                    try set.bind(1, text: value)
                    try set.bind(2, text: key)
                    try set.run()
                }
                try db.exec("DELETE FROM passages; DELETE FROM removed")
            } catch {
                try? fm.removeItem(at: target)
                throw error
            }
            let old = baseName
            return {
                self.deleteBase(old)
                self.install(Loaded(meta: Meta(dim: self.dim, dense: self.denseStore, colbert: self.colbertStore, bundle: self.bundleJSON,
                                               base: name, baseSha: sha, generation: next),
                                    base: newBase, removed: [], passages: [], dataVersion: self.dataVersion))
                self.collectGarbage()
            }
        }
    }

    private func needEmbedder() throws -> EdgeM3Embedder {
        guard let embedder else { throw EdgeM3Error("no embedder: open the index with init(folder:embedder:) to add or search text") }
        return embedder
    }

    private func describe(_ id: PassageID) -> String {
        switch id {
        case .int(let v): return "id \(v)"
        case .string(let s): return "id \"\(s)\""
        }
    }

    private func insert(_ db: SQLiteDB, _ p: StoredPassage) throws -> StoredPassage {
        let s = try db.prepare("INSERT INTO passages (id, chunk, dense, dense_scale, lex_tokens, lex_weights, colbert, colbert_scale) "
                               + "VALUES (?, ?, ?, ?, ?, ?, ?, ?)", writing: true)
        try s.bind(1, id: p.id)
        try s.bind(2, Int64(p.chunk))
        try s.bind(3, blob: p.denseBlob)
        try s.bind(4, blob: p.denseScaleBlob)
        try s.bind(5, blob: bytes(p.tokens))
        try s.bind(6, blob: bytes(p.weights))
        try s.bind(7, blob: p.colbertBlob)
        try s.bind(8, blob: p.colbertScaleBlob)
        try s.run()
        var out = p
        out.seq = db.lastInsertRowID
        return out
    }

    /// Removes `id` in the transaction; returns what to change in memory after the commit.
    private func delete(_ db: SQLiteDB, _ id: PassageID) throws -> () -> Void {
        switch place(of: id) {
        case nil:
            throw EdgeM3Error("\(describe(id)): not in the index", kind: .unknownId)
        case .base(let rows):
            let s = try db.prepare("INSERT INTO removed (row) VALUES (?)", writing: true)
            for r in rows {
                try s.bind(1, Int64(r))
                try s.run()
            }
            return {
                for r in rows {
                    self.removed.insert(r)
                    self.survivors.remove(at: lowerBound(self.survivors, r))
                }
                self.baseAlive -= 1
            }
        case .db(let seqs):
            let s = try db.prepare("DELETE FROM passages WHERE seq = ?", writing: true)
            for seq in seqs {
                try s.bind(1, seq)
                try s.run()
            }
            return {
                self.seqsOf[id] = nil
                for seq in seqs { self.passages.remove(at: lowerBound(self.passages.lazy.map { $0.seq }, seq)) }
            }
        }
    }

    private func append(_ p: StoredPassage) {
        passages.append(p)
        seqsOf[p.id, default: []].append(p.seq)
    }

    /// One write transaction (BEGIN IMMEDIATE: SQLite's writer lock): `body` runs after a reload
    /// of what others committed and returns the in-memory change, applied only after COMMIT.
    private func write(_ body: (SQLiteDB) throws -> (() -> Void)) throws {
        try locked {
            try refresh()
            let db = try database()
            guard !db.isReadOnly else {
                throw EdgeM3Error("\(db.path): read-only; nothing was written", kind: .writeFailed)
            }
            try db.exec("BEGIN IMMEDIATE")
            let apply: () -> Void
            do {
                try refresh()
                if !collected {
                    collectGarbage()
                    collected = true
                }
                apply = try body(db)
                try db.exec("COMMIT")
            } catch {
                try? db.exec("ROLLBACK")
                throw error
            }
            apply()
        }
    }

    /// The connection, creating the database over a format-1 folder on its first write.
    private func database() throws -> SQLiteDB {
        if let db { return db }
        let meta = Meta(dim: dim, dense: denseStore, colbert: colbertStore, bundle: bundleJSON, base: ".", baseSha: baseSha,
                        generation: 0)
        _ = try EdgeM3WritableIndex.createDatabase(folder, meta)  // false: another process just made it
        let db = try EdgeM3WritableIndex.connect(dbURL.path, durable: durable)
        self.db = db
        dataVersion = -1  // read it all at the next refresh
        try refresh()
        return db
    }

    private func locked<T>(_ body: () throws -> T) throws -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body()
    }

    // ------------------------------------------------------------------ the database's content

    private struct Meta {
        var dim: Int
        var dense: String
        var colbert: String
        var bundle: Any  // NSNull or [String: Any]
        var base: String
        var baseSha: String
        var generation: Int
    }

    private struct Loaded {
        var meta: Meta
        var base: EdgeM3Index?
        var removed: Set<Int>
        var passages: [StoredPassage]
        var dataVersion: Int64
    }

    private func install(_ l: Loaded) {
        if base !== l.base {
            base = l.base
            baseRowOf = [:]
            baseMore = [:]
            if let b = l.base {
                baseRowOf.reserveCapacity(b.count)
                for (r, id) in b.ids.enumerated() {
                    if b.chunks[r] == 0 { baseRowOf[id] = r } else { baseMore[id, default: []].append(r) }
                }
            }
        }
        (baseName, baseSha, generation) = (l.meta.base, l.meta.baseSha, l.meta.generation)
        removed = l.removed
        survivors = (0..<(base?.count ?? 0)).filter { !removed.contains($0) }
        baseAlive = baseRowOf.values.reduce(0) { $0 + (removed.contains($1) ? 0 : 1) }
        passages = l.passages
        seqsOf = [:]
        for p in passages { seqsOf[p.id, default: []].append(p.seq) }
        dataVersion = l.dataVersion
    }

    /// Reloads when another connection committed (PRAGMA data_version), or created the database.
    private func refresh() throws {
        guard let db else {
            if FileManager.default.fileExists(atPath: dbURL.path) {
                let db = try EdgeM3WritableIndex.connect(dbURL.path, durable: durable)
                self.db = db
                dataVersion = -1
                try refresh()
            }
            return
        }
        let v = try db.int("PRAGMA data_version") ?? 0
        guard v != dataVersion else { return }
        let l = try EdgeM3WritableIndex.reread(db, folder: folder, verifySHA256: verifySHA256,
                                              reuse: base.map { (baseName, baseSha, $0) })
        guard l.meta.dim == dim, l.meta.dense == denseStore, l.meta.colbert == colbertStore,
              sameJSON(l.meta.bundle, bundleJSON) else {
            throw EdgeM3Error("\(db.path): dim, stores or bundle changed under this index", kind: .corruptIndex)
        }
        install(l)
    }

    private static func connect(_ path: String, durable: Bool) throws -> SQLiteDB {
        func probe(_ db: SQLiteDB) throws -> SQLiteDB {
            try db.exec("PRAGMA synchronous = \(durable ? "FULL" : "NORMAL")", writing: false)
            _ = try db.int("PRAGMA application_id")  // the first read: a file that is not SQLite fails here
            return db
        }
        do {
            return try probe(try SQLiteDB(path: path))
        } catch let first as EdgeM3Error where first.kind != .indexBusy {
            // A read-only folder: WAL cannot make its -shm beside the file, so read it read-only
            // (SQLite then keeps the WAL index in memory); anything else fails with the first error.
            if let db = try? probe(try SQLiteDB(path: path, readOnly: true)) { return db }
            // Neither -shm nor -wal exists and none can be made: nothing can be writing it.
            let fm = FileManager.default
            guard !fm.fileExists(atPath: path + "-wal"), !fm.fileExists(atPath: path + "-shm"),
                  let db = try? probe(try SQLiteDB(path: path, immutable: true)) else { throw first }
            return db
        }
    }

    /// `read` as one committed state (EdgeM3Contract.indexDbReloads): when another connection commits
    /// while it reads (a compaction deletes the base it replaced right after its commit), it reads
    /// again; a corrupt index is reported only when nothing was committed meanwhile. A writer that
    /// keeps committing is waited for, and the state read under its lock.
    private static func reread(_ db: SQLiteDB, folder: URL, verifySHA256: Bool,
                               reuse: (String, String, EdgeM3Index)?) throws -> Loaded {
        for _ in 0..<EdgeM3Contract.indexDbReloads {
            let before = try db.int("PRAGMA data_version") ?? 0
            do {
                return try read(db, folder: folder, verifySHA256: verifySHA256, reuse: reuse)
            } catch let e as EdgeM3Error where e.kind == .corruptIndex {
                guard !db.inTransaction, try db.int("PRAGMA data_version") ?? 0 != before else { throw e }  // nothing committed: corrupt
            }
        }
        do {
            try db.exec("BEGIN IMMEDIATE")  // no commit, no compaction while it reads
        } catch let e as EdgeM3Error {
            throw EdgeM3Error("\(db.path): another writer kept committing while it was read (\(e.message))", kind: .indexBusy)
        }
        defer { try? db.exec("ROLLBACK") }
        return try read(db, folder: folder, verifySHA256: verifySHA256, reuse: reuse)
    }

    /// The database's meta, tombstones and passages in one read transaction, checked, and the base it names.
    private static func read(_ db: SQLiteDB, folder: URL, verifySHA256: Bool,
                             reuse: (String, String, EdgeM3Index)?) throws -> Loaded {
        let at = db.path
        func bad(_ what: String) -> EdgeM3Error { EdgeM3Error("\(at): \(what); refusing the index database", kind: .corruptIndex) }
        let own = !db.inTransaction  // a write's reload runs inside its transaction
        if own { try db.exec("BEGIN", writing: false) }
        defer { if own { try? db.exec("COMMIT", writing: false) } }
        let version = try db.int("PRAGMA data_version") ?? 0
        let app = try db.int("PRAGMA application_id") ?? 0
        guard app == Int64(EdgeM3Contract.indexDbApplicationId) else {
            throw bad("not an \(EdgeM3Contract.indexDbFormat) database (application_id \(app))")
        }
        let user = try db.int("PRAGMA user_version") ?? 0
        guard user <= Int64(EdgeM3Contract.indexDbVersion) else {
            throw bad("written by a newer edge-m3 (user_version \(user), this kit reads \(EdgeM3Contract.indexDbVersion))")
        }
        guard user == Int64(EdgeM3Contract.indexDbVersion) else {
            throw bad("written by an older edge-m3 (user_version \(user), this kit reads \(EdgeM3Contract.indexDbVersion))")
        }
        var meta: [String: String] = [:]
        let m = try db.prepare("SELECT key, value FROM meta")
        while try m.step() {
            guard m.isText(0), m.isText(1) else { throw bad("meta holds a key or value that is not text") }
            guard let key = m.utf8Text(0), let value = m.utf8Text(1) else { throw bad("meta holds text that is not UTF-8") }
            meta[key] = value
        }
        guard meta["format"] == EdgeM3Contract.indexDbFormat else { throw bad("meta format \(meta["format"] ?? "missing")") }
        guard let fv = meta["format_version"].flatMap(metaInt) else { throw bad("meta format_version missing or malformed") }
        guard fv <= EdgeM3Contract.indexDbVersion else {
            throw bad("written by a newer edge-m3 (format_version \(fv), this kit reads \(EdgeM3Contract.indexDbVersion))")
        }
        guard fv == EdgeM3Contract.indexDbVersion else {
            throw bad("written by an older edge-m3 (format_version \(fv), this kit reads \(EdgeM3Contract.indexDbVersion))")
        }
        for key in EdgeM3Contract.indexDbMetaKeys where meta[key] == nil { throw bad("meta \(key) missing") }
        guard let dim = metaInt(meta["dim"]!), dim >= 1, dim <= EdgeM3Contract.indexMaxDim else { throw bad("meta dim malformed") }
        let dense = meta["dense"]!, colbert = meta["colbert"]!
        guard EdgeM3Contract.denseStores.contains(dense), EdgeM3Contract.colbertStores.contains(colbert) else {
            throw bad("meta dense or colbert store unknown")
        }
        guard let bundle = try? JSONSerialization.jsonObject(with: Data(meta["bundle"]!.utf8), options: [.fragmentsAllowed]),
              bundle is NSNull || bundle is [String: Any] else { throw bad("meta bundle is not a JSON object or null") }
        if let b = bundle as? [String: Any], !EdgeM3Contract.indexBundleKeys.allSatisfy({ b[$0] is String }) {
            throw bad("meta bundle: needs \(EdgeM3Contract.indexBundleKeys.joined(separator: ", ")) (strings)")
        }
        guard let generation = metaInt(meta["generation"]!) else { throw bad("meta generation malformed") }
        let baseName = meta["base"]!, baseSha = meta["base_sha256"]!
        let prefix = EdgeM3Contract.indexBasePrefix
        guard baseName == "" || baseName == "." || (baseName.hasPrefix(prefix) && metaInt(String(baseName.dropFirst(prefix.count))) != nil) else {
            throw bad("meta base \"\(baseName)\" malformed")
        }
        var base: EdgeM3Index?
        if baseName == "" {  // (a base with an empty sha256 is refused below: no manifest's sha256 is "")
            guard baseSha == "" else { throw bad("meta base_sha256 set without a base") }
        } else if let reuse, reuse.0 == baseName, reuse.1 == baseSha {
            base = reuse.2
        } else {
            let baseFolder = baseName == "." ? folder : folder.appendingPathComponent(baseName)
            let (sha, tree) = try readManifest(baseFolder)
            guard sha == baseSha else {
                throw bad("written for another base (\(baseFolder.path)/\(EdgeM3Contract.indexManifest) sha256 \(sha.prefix(12))..., "
                          + "the database's \(baseSha.prefix(12))...)")
            }
            guard sameModel(tree["bundle"] ?? NSNull(), bundle) else { throw bad("its bundle differs from its base's") }
            let b = try EdgeM3Index(folder: baseFolder, verifySHA256: verifySHA256)
            guard b.dim == dim, b.denseStore == dense, b.colbertStore == colbert else {
                throw bad("dim, dense or colbert differs from its base's")
            }
            base = b
        }
        var removed = Set<Int>()
        let r = try db.prepare("SELECT row FROM removed")
        while try r.step() {
            let row = r.int64(0)
            guard r.isInteger(0), row >= 0, row < Int64(base?.count ?? 0) else { throw bad("a removed row is out of range") }
            removed.insert(Int(row))
        }
        if let base, !removed.isEmpty {  // a passage is removed whole: every chunk's row or none
            var parts: [PassageID: (rows: Int, removed: Int)] = [:]
            for (r, id) in base.ids.enumerated() {
                parts[id, default: (0, 0)].rows += 1
                if removed.contains(r) { parts[id, default: (0, 0)].removed += 1 }
            }
            if parts.values.contains(where: { $0.removed > 0 && $0.removed < $0.rows }) {
                throw bad("a base passage is removed in part (some of its chunks' rows)")
            }
        }
        var passages: [StoredPassage] = []
        let p = try db.prepare("SELECT seq, id, chunk, dense, dense_scale, lex_tokens, lex_weights, colbert, colbert_scale "
                               + "FROM passages ORDER BY seq")
        // A passage's chunks are 0, 1, ... in consecutive seqs (one transaction wrote them).
        var last: (id: PassageID, chunks: Int64)?
        var seen = Set<PassageID>()
        while try p.step() {
            let id: PassageID
            if p.isInteger(1) {
                id = .int(p.int64(1))
            } else if p.isText(1) {
                guard let text = p.utf8Text(1) else { throw bad("passage seq \(p.int64(0)): an id that is not UTF-8") }
                id = .string(text)
            } else {
                throw bad("a passage id is neither an integer nor a string")
            }
            let chunk = p.int64(2)
            let next = last.map { $0.id == id ? $0.chunks : 0 } ?? 0
            guard p.isInteger(2), chunk == next, chunk > 0 || seen.insert(id).inserted else {
                throw bad("id \(id) has chunk \(p.isInteger(2) ? String(chunk) : "(not an integer)") out of order "
                          + "(a passage's chunks are 0, 1, ... in consecutive seqs)")
            }
            last = (id, chunk + 1)
            func blob(_ c: Int32) throws -> [UInt8]? {  // a cell of another type (text, a number) is not read as bytes
                if p.isNull(c) { return nil }
                guard p.isBlob(c) else { throw bad("passage seq \(p.int64(0)): a vector column that is not a blob") }
                return p.blob(c)
            }
            guard let s = StoredPassage(seq: p.int64(0), id: id, chunk: Int(chunk), dense: try blob(3), denseScale: try blob(4),
                                        tokens: try blob(5), weights: try blob(6), colbert: try blob(7),
                                        colbertScale: try blob(8), dim: dim, denseStore: dense, colbertStore: colbert) else {
                throw bad("passage seq \(p.int64(0)) has blobs of the wrong length, bad lexical weights, or a value not finite "
                          + "(or a scale not > 0)")
            }
            passages.append(s)
        }
        if let base {
            var alive = Set<PassageID>()  // a base passage is alive while its first row (chunk 0) is
            for (r, id) in base.ids.enumerated() where base.chunks[r] == 0 && !removed.contains(r) { alive.insert(id) }
            if let clash = passages.first(where: { alive.contains($0.id) }) {
                throw bad("id \(clash.id) is both in the base and added")
            }
        }
        return Loaded(meta: Meta(dim: dim, dense: dense, colbert: colbert, bundle: bundle, base: baseName, baseSha: baseSha,
                                 generation: generation),
                      base: base, removed: removed, passages: passages, dataVersion: version)
    }

    /// A base's index.json: its sha256 and its JSON object.
    private static func readManifest(_ baseFolder: URL) throws -> (String, [String: Any]) {
        let url = baseFolder.appendingPathComponent(EdgeM3Contract.indexManifest)
        guard let data = FileManager.default.contents(atPath: url.path) else {
            throw EdgeM3Error("\(url.path): missing; the index's base is gone", kind: .corruptIndex)
        }
        guard let tree = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] else {
            throw EdgeM3Error("\(url.path): corrupt (not a JSON object)", kind: .corruptIndex)
        }
        var h = StreamingSHA256()
        data.withUnsafeBytes { h.update($0) }
        return (h.hexDigest(), tree)
    }

    /// Writes a new database fully under a temporary name, then links it into place (never
    /// replacing one): false when `folder` already had one.
    private static func createDatabase(_ folder: URL, _ meta: Meta) throws -> Bool {
        let final = folder.appendingPathComponent(EdgeM3Contract.indexDb).path
        let tmp = folder.appendingPathComponent(".\(EdgeM3Contract.indexDb).tmp-\(UUID().uuidString.prefix(8))").path
        defer { unlink(tmp) }
        do {
            let db = try SQLiteDB(path: tmp, create: true)
            let bundle: String
            if let b = meta.bundle as? [String: Any] {
                bundle = String(decoding: try JSONSerialization.data(withJSONObject: b, options: [.sortedKeys]), as: UTF8.self)
            } else {
                bundle = "null"
            }
            try db.exec("PRAGMA application_id = \(EdgeM3Contract.indexDbApplicationId); PRAGMA user_version = \(EdgeM3Contract.indexDbVersion)")
            try db.exec("BEGIN")
            for sql in EdgeM3Contract.indexDbSchema { try db.exec(sql) }
            let values = ["format": EdgeM3Contract.indexDbFormat, "format_version": String(EdgeM3Contract.indexDbVersion),
                          "dim": String(meta.dim), "dense": meta.dense, "colbert": meta.colbert, "bundle": bundle,
                          "base": meta.base, "base_sha256": meta.baseSha, "generation": String(meta.generation)]
            let s = try db.prepare("INSERT INTO meta (key, value) VALUES (?, ?)", writing: true)
            for key in EdgeM3Contract.indexDbMetaKeys {
                try s.bind(1, text: key)
                try s.bind(2, text: values[key]!)
                try s.run()
            }
            try db.exec("COMMIT")
            try db.exec("PRAGMA journal_mode = WAL")
        } catch let e as EdgeM3Error {
            throw EdgeM3Error(e.message, kind: .writeFailed)
        }
        if link(tmp, final) != 0 {
            let err = errno
            // EEXIST: another process made it first. ENOENT with a database in place: that
            // process's garbage collection took this temporary (it deletes database temporaries).
            if err == EEXIST || (err == ENOENT && access(final, F_OK) == 0) { return false }
            throw EdgeM3Error("\(final): cannot create the index database (\(String(cString: strerror(err))))", kind: .writeFailed)
        }
        syncFolder(folder)
        return true
    }

    // ------------------------------------------------------------------ garbage, compaction

    /// Deletes what no database references (the caller holds the writer lock): `base-<n>` folders
    /// other than this one's (a kill's leftovers, written but never swapped in) and their
    /// half-written temporaries (`.base-<n>.building-*`, `.base-<n>.old-*`), generations up to
    /// this one only (a later one may be another process's compaction in progress, or its base
    /// just committed), database temporaries, and a root base once the database has moved on
    /// (its index.json first, then its files).
    private func collectGarbage() {
        let fm = FileManager.default
        guard let names = try? fm.contentsOfDirectory(atPath: folder.path) else { return }
        let prefix = EdgeM3Contract.indexBasePrefix
        for name in names {
            let url = folder.appendingPathComponent(name)
            if name.hasPrefix(".\(EdgeM3Contract.indexDb).tmp-") {
                try? fm.removeItem(at: url)
                continue
            }
            let temporary = name.hasPrefix(".") && (name.contains(".building-") || name.contains(".old-"))
            let base = temporary ? String(name.dropFirst().prefix { $0 != "." }) : name
            var isDir: ObjCBool = false
            guard base.hasPrefix(prefix), name != baseName, fm.fileExists(atPath: url.path, isDirectory: &isDir), isDir.boolValue,
                  let g = metaInt(String(base.dropFirst(prefix.count))), g <= generation else { continue }
            try? fm.removeItem(at: url)
        }
        if baseName != "." { deleteBase(".") }
    }

    private func deleteBase(_ name: String) {
        let fm = FileManager.default
        if name == "" { return }
        if name != "." {
            try? fm.removeItem(at: folder.appendingPathComponent(name))
            return
        }
        let manifest = folder.appendingPathComponent(EdgeM3Contract.indexManifest)
        var listed = [EdgeM3Contract.indexIds] + EdgeM3Contract.indexArrays.values.sorted()
        if let data = fm.contents(atPath: manifest.path),
           let files = ((try? JSONSerialization.jsonObject(with: data)) as? [String: Any])?["files"] as? [String: Any] {
            listed += files.keys.filter { !$0.contains("/") && $0 != ".." && $0 != EdgeM3Contract.indexDb }
        }
        try? fm.removeItem(at: manifest)
        for f in Set(listed) { try? fm.removeItem(at: folder.appendingPathComponent(f)) }
    }

    /// The surviving passages as a format-1 folder in `out` (docs/index-format.md "The index
    /// folder"), their stored bytes copied (never quantized again), index.json last.
    private func writeBase(_ out: URL) throws {
        let d = dim, s0 = survivors.count, n = s0 + passages.count
        let int8Dense = denseStore == "int8"
        var arrays: [(String, String, [Int])] = []  // name, dtype, shape, in Index.save's order
        var sizes: [String: (String, Int)] = [:]  // file -> sha256, size
        func file(_ name: String, _ fill: (inout BinWriter) throws -> Void) throws {
            var w = try BinWriter(out.appendingPathComponent(name))
            try fill(&w)
            sizes[name] = try w.close()
        }
        // dense
        try file(EdgeM3Contract.indexArrays["dense"]!) { w in
            for r in survivors {
                try w.write(UnsafeRawBufferPointer(start: base!.dense! + r * d * (int8Dense ? 1 : 4), count: d * (int8Dense ? 1 : 4)))
            }
            for p in passages { try w.write(p.denseBlob) }
        }
        arrays.append(("dense", int8Dense ? "int8" : "float32", [n, d]))
        if int8Dense {
            try file(EdgeM3Contract.indexArrays["dense_scale"]!) { w in
                for r in survivors { try w.write(value: base!.denseScale![r]) }
                for p in passages { try w.write(value: p.denseScale) }
            }
            arrays.append(("dense_scale", "float32", [n]))
        }
        // sparse: the postings by token ascending, rows ascending within a token
        var dbPostings: [Int32: [(Int32, Float)]] = [:]
        for (j, p) in passages.enumerated() {
            for (t, w) in zip(p.tokens, p.weights) { dbPostings[t, default: []].append((Int32(s0 + j), w)) }
        }
        var newRow = [Int32](repeating: -1, count: base?.count ?? 0)
        for (i, r) in survivors.enumerated() { newRow[r] = Int32(i) }
        var tokens: [Int32] = [], offsets: [Int64] = [0], rows: [Int32] = [], weights: [Float] = []
        let dbTokens = dbPostings.keys.sorted()
        var bt = 0, dt = 0
        let baseTokens = base?.tokenCount ?? 0
        while bt < baseTokens || dt < dbTokens.count {
            let tb = bt < baseTokens ? base!.sparseTokens![bt] : Int32.max
            let td = dt < dbTokens.count ? dbTokens[dt] : Int32.max
            let t = min(tb, td)
            let before = rows.count
            if bt < baseTokens && tb == t {
                let b = base!
                for q in Int(b.sparseOffsets[bt])..<Int(b.sparseOffsets[bt + 1]) {
                    let nr = newRow[Int(b.sparseRows![q])]
                    if nr >= 0 {
                        rows.append(nr)
                        weights.append(b.sparseWeights![q])
                    }
                }
                bt += 1
            }
            if dt < dbTokens.count && td == t {
                for (r, w) in dbPostings[t]! {
                    rows.append(r)
                    weights.append(w)
                }
                dt += 1
            }
            if rows.count > before {
                tokens.append(t)
                offsets.append(Int64(rows.count))
            }
        }
        try file(EdgeM3Contract.indexArrays["sparse_tokens"]!) { try $0.write(array: tokens) }
        try file(EdgeM3Contract.indexArrays["sparse_offsets"]!) { try $0.write(array: offsets) }
        try file(EdgeM3Contract.indexArrays["sparse_rows"]!) { try $0.write(array: rows) }
        try file(EdgeM3Contract.indexArrays[EdgeM3Contract.indexPostingWeights]!) { try $0.write(array: weights) }
        arrays += [("sparse_tokens", "int32", [tokens.count]), ("sparse_offsets", "int64", [offsets.count]),
                   ("sparse_rows", "int32", [rows.count]), (EdgeM3Contract.indexPostingWeights, "float32", [weights.count])]
        // colbert
        if colbertStore != "none" {
            let int8 = colbertStore == "int8"
            var colOffsets: [Int64] = [0]
            for r in survivors {
                let o = base!.colbertOffsets!
                colOffsets.append(colOffsets.last! + (o[r + 1] - o[r]))
            }
            for p in passages { colOffsets.append(colOffsets.last! + Int64(p.colbertRows)) }
            let v = Int(colOffsets.last!)
            try file(EdgeM3Contract.indexArrays["colbert_offsets"]!) { try $0.write(array: colOffsets) }
            try file(EdgeM3Contract.indexArrays["colbert"]!) { w in
                let item = int8 ? 1 : 2
                for r in survivors {
                    let o = base!.colbertOffsets!
                    let from = Int(o[r]), to = Int(o[r + 1])
                    if to == from { continue }  // no vectors (an empty colbert.bin maps no pointer)
                    try w.write(UnsafeRawBufferPointer(start: base!.colbert! + from * d * item, count: (to - from) * d * item))
                }
                for p in passages { try w.write(p.colbertBlob ?? []) }
            }
            arrays += [("colbert_offsets", "int64", [n + 1]), ("colbert", int8 ? "int8" : "float16", [v, d])]
            if int8 {
                try file(EdgeM3Contract.indexArrays["colbert_scale"]!) { w in
                    for r in survivors {
                        let o = base!.colbertOffsets!
                        if o[r + 1] == o[r] { continue }
                        try w.write(UnsafeRawBufferPointer(start: base!.colbertScale! + Int(o[r]), count: Int(o[r + 1] - o[r]) * 4))
                    }
                    for p in passages { try w.write(p.colbertScaleBlob ?? []) }
                }
                arrays.append(("colbert_scale", "float32", [v]))
            }
        }
        // ids.json (json.dumps(ids, ensure_ascii=False)), then index.json (json.dumps(manifest, indent=1))
        try file(EdgeM3Contract.indexIds) { w in
            var text = "["
            for i in 0..<n {
                if i > 0 { text += ", " }
                switch idOf(i) {
                case .int(let v): text += String(v)
                case .string(let s): text += jsonString(s, asciiOnly: false)
                }
                if text.utf8.count > 1 << 16 {
                    try w.write(Array(text.utf8))
                    text = ""
                }
            }
            try w.write(Array((text + "]").utf8))
        }
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime]
        var bundleValue: JSONValue = .null
        if let b = bundleJSON as? [String: Any] {
            let order = EdgeM3Contract.indexBundleKeys + ["quant", "path"]
            let keys = order.filter { b[$0] != nil } + b.keys.filter { !order.contains($0) }.sorted()
            bundleValue = .object(keys.map { ($0, .string(b[$0] as? String ?? "\(b[$0]!)")) })
        }
        let manifest: JSONValue = .object([
            ("format", .string(EdgeM3Contract.indexFormat)), ("format_version", .int(EdgeM3Contract.indexFormatVersion)),
            ("edge_m3_version", .string(EdgeM3WritableIndex.writerVersion)),
            ("created", .string(formatter.string(from: Date()))), ("bundle", bundleValue),
            ("count", .int(n)), ("dim", .int(d)), ("dense", .string(denseStore)), ("colbert", .string(colbertStore)),
            ("arrays", .object(arrays.map { name, dtype, shape in
                (name, .object([("file", .string(EdgeM3Contract.indexArrays[name]!)), ("dtype", .string(dtype)),
                                ("shape", .array(shape.map { .int($0) }))]))
            })),
            ("files", .object(sizes.keys.sorted().map { ($0, .object([("sha256", .string(sizes[$0]!.0)), ("size", .int(sizes[$0]!.1))])) })),
        ])
        try file(EdgeM3Contract.indexManifest) { try $0.write(Array((manifest.text(indent: 1, level: 0) + "\n").utf8)) }
    }

    /// index.json's `edge_m3_version` in a base this kit writes.
    static let writerVersion = "0.1.0"
}

// ---------------------------------------------------------------------- a passage as stored

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

/// int8 codes and a Float scale as Python's `_quantize_rows`: scale = max|x| / 127 in Float
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

nonisolated private func posixWrite(_ fd: Int32, _ p: UnsafeRawPointer, _ n: Int) -> Int { write(fd, p, n) }

nonisolated private func posixClose(_ fd: Int32) { close(fd) }

/// A meta integer (spec.INDEX_DB_INT_MAX): ASCII digits only (Int(_:) alone takes a sign), at
/// most 2^63 - 1 (Int's range on 64-bit platforms); else nil.
nonisolated func metaInt(_ v: String) -> Int? {
    guard !v.isEmpty, v.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
    return Int(v)
}

/// Two `bundle` entries (NSNull or objects) naming the same model and tokenizer files and sha256s
/// (`quant` and `path` are informational).
nonisolated func sameModel(_ a: Any, _ b: Any) -> Bool {
    let keys = EdgeM3Contract.indexBundleKeys
    switch (a as? [String: Any], b as? [String: Any]) {
    case (nil, nil): return a is NSNull && b is NSNull
    case let (x?, y?): return keys.allSatisfy { (x[$0] as? String) != nil && (x[$0] as? String) == (y[$0] as? String) }
    default: return false
    }
}

/// Two JSON values (NSNull, dictionaries, strings, numbers) equal as JSON.
nonisolated func sameJSON(_ a: Any, _ b: Any) -> Bool {
    func canonical(_ x: Any) -> Data? { try? JSONSerialization.data(withJSONObject: x, options: [.sortedKeys, .fragmentsAllowed]) }
    guard let x = canonical(a), let y = canonical(b) else { return false }
    return x == y
}

/// fsync of a folder, so a rename or link in it survives a power cut.
nonisolated func syncFolder(_ folder: URL) {
    let fd = open(folder.path, O_RDONLY)
    if fd >= 0 {
        fsync(fd)
        close(fd)
    }
}

/// A file written through a buffer, hashed on the way, fsynced on close.
nonisolated struct BinWriter {
    private let url: URL
    private let fd: Int32
    private var buffer: [UInt8] = []
    private var hasher = StreamingSHA256()
    private var size = 0

    init(_ url: URL) throws {
        self.url = url
        fd = open(url.path, O_WRONLY | O_CREAT | O_EXCL, 0o644)
        guard fd >= 0 else { throw EdgeM3Error("\(url.path): cannot create (\(String(cString: strerror(errno))))", kind: .writeFailed) }
        buffer.reserveCapacity(1 << 20)
    }

    mutating func write(_ b: UnsafeRawBufferPointer) throws {
        buffer.append(contentsOf: b)
        if buffer.count >= 1 << 20 { try flush() }
    }

    mutating func write(_ b: [UInt8]) throws { try b.withUnsafeBytes { try write($0) } }

    mutating func write<T>(value: T) throws { try withUnsafeBytes(of: value) { try write($0) } }

    mutating func write<T>(array: [T]) throws { try array.withUnsafeBytes { try write($0) } }

    private mutating func flush() throws {
        try buffer.withUnsafeBytes { b in
            hasher.update(b)
            var at = 0
            while at < b.count {
                let n = posixWrite(fd, b.baseAddress! + at, b.count - at)
                guard n > 0 else {
                    throw EdgeM3Error("\(url.path): cannot write (\(String(cString: strerror(errno))))", kind: .writeFailed)
                }
                at += n
            }
        }
        size += buffer.count
        buffer.removeAll(keepingCapacity: true)
    }

    /// Flushes, fsyncs and closes: the file's sha256 and size.
    mutating func close() throws -> (String, Int) {
        defer { posixClose(fd) }
        try flush()
        guard fsync(fd) == 0 else { throw EdgeM3Error("\(url.path): cannot sync (\(String(cString: strerror(errno))))", kind: .writeFailed) }
        return (hasher.hexDigest(), size)
    }
}

/// Just enough JSON to write index.json as Python's `json.dumps(manifest, indent=1)` does.
nonisolated indirect enum JSONValue {
    case null
    case int(Int)
    case string(String)
    case array([JSONValue])
    case object([(String, JSONValue)])

    func text(indent: Int, level: Int) -> String {
        let pad = String(repeating: " ", count: indent * (level + 1)), end = String(repeating: " ", count: indent * level)
        switch self {
        case .null: return "null"
        case .int(let v): return String(v)
        case .string(let s): return jsonString(s, asciiOnly: true)
        case .array(let a):
            if a.isEmpty { return "[]" }
            return "[\n" + a.map { pad + $0.text(indent: indent, level: level + 1) }.joined(separator: ",\n") + "\n\(end)]"
        case .object(let o):
            if o.isEmpty { return "{}" }
            return "{\n" + o.map { pad + jsonString($0.0, asciiOnly: true) + ": " + $0.1.text(indent: indent, level: level + 1) }
                .joined(separator: ",\n") + "\n\(end)}"
        }
    }
}

/// A JSON string as Python's json.dumps writes it (`ensure_ascii` = `asciiOnly`).
nonisolated func jsonString(_ s: String, asciiOnly: Bool) -> String {
    var out = "\""
    func u(_ v: UInt16) -> String {
        let h = String(v, radix: 16)
        return "\\u" + String(repeating: "0", count: 4 - h.count) + h
    }
    for scalar in s.unicodeScalars {
        switch scalar {
        case "\"": out += "\\\""
        case "\\": out += "\\\\"
        case "\n": out += "\\n"
        case "\r": out += "\\r"
        case "\t": out += "\\t"
        case "\u{08}": out += "\\b"
        case "\u{0C}": out += "\\f"
        default:
            if scalar.value < 0x20 || (asciiOnly && scalar.value > 0x7e) {
                if asciiOnly && scalar.value == 0x7f {
                    out.unicodeScalars.append(scalar)
                } else {
                    for unit in String(scalar).utf16 { out += u(unit) }
                }
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
    }
    return out + "\""
}
