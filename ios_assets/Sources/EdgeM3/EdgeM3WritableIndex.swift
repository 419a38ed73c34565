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
///
/// Three parts: the store (IndexStore.swift: SQLite I/O and the database's rules), the segments
/// (IndexSegments.swift: base plus added chunks, searched) and compaction (IndexCompaction.swift);
/// this class holds them under its lock and runs each write as one transaction.
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
    private var segments: IndexSegments
    private var collected = false  // garbage removed by this connection's first write
    private var closed = false

    private var dbURL: URL { folder.appendingPathComponent(EdgeM3Contract.indexDb) }
    private var compaction: IndexCompaction {
        IndexCompaction(folder: folder, dim: dim, denseStore: denseStore, colbertStore: colbertStore, bundleJSON: bundleJSON)
    }

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
        let loaded: IndexStore.Loaded
        if FileManager.default.fileExists(atPath: dbPath) {
            let db = try IndexStore.connect(dbPath, durable: durable)
            if verifySHA256 { try IndexStore.quickCheck(db) }
            loaded = try IndexStore.reread(db, folder: folder, verifySHA256: verifySHA256, reuse: nil)
            self.db = db
        } else {
            let manifest = folder.appendingPathComponent(EdgeM3Contract.indexManifest)
            guard FileManager.default.fileExists(atPath: manifest.path) else {
                throw EdgeM3Error("\(folder.path): not an index (no \(EdgeM3Contract.indexDb), no \(EdgeM3Contract.indexManifest))",
                                  kind: .corruptIndex)
            }
            let (sha, tree) = try IndexStore.readManifest(folder)
            let b = try EdgeM3Index(folder: folder, verifySHA256: verifySHA256)
            loaded = IndexStore.Loaded(meta: IndexStore.Meta(dim: b.dim, dense: b.denseStore, colbert: b.colbertStore,
                                                             bundle: tree["bundle"] ?? NSNull(), base: ".", baseSha: sha, generation: 0),
                                       base: b, removed: [], passages: [], dataVersion: 0)
        }
        (dim, denseStore, colbertStore, bundleJSON) = (loaded.meta.dim, loaded.meta.dense, loaded.meta.colbert, loaded.meta.bundle)
        bundle = (loaded.meta.bundle as? [String: Any])?.compactMapValues { $0 as? String }
        segments = IndexSegments(dim: dim, colbertStore: colbertStore)
        install(loaded)
        if let embedder { try checkBundle(embedder) }
    }

    private init(created folder: URL, meta: IndexStore.Meta, db: SQLiteDB, embedder: EdgeM3Embedder?, durable: Bool) throws {
        self.folder = folder
        self.embedder = embedder
        self.verifySHA256 = true
        self.durable = durable
        (dim, denseStore, colbertStore, bundleJSON) = (meta.dim, meta.dense, meta.colbert, meta.bundle)
        bundle = (meta.bundle as? [String: Any])?.compactMapValues { $0 as? String }
        segments = IndexSegments(dim: dim, colbertStore: colbertStore)
        self.db = db
        install(try IndexStore.read(db, folder: folder, verifySHA256: true, reuse: nil))
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
        let meta = IndexStore.Meta(dim: dim, dense: dense, colbert: colbert, bundle: bundle.map { $0 as Any } ?? NSNull(),
                                   base: "", baseSha: "", generation: 0)
        guard try IndexStore.createDatabase(folder, meta) else {
            throw EdgeM3Error("\(folder.path): already holds an index (\(EdgeM3Contract.indexDb))")
        }
        let db = try IndexStore.connect(folder.appendingPathComponent(EdgeM3Contract.indexDb).path, durable: durable)
        return try EdgeM3WritableIndex(created: folder, meta: meta, db: db, embedder: embedder, durable: durable)
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

    /// Releases the database and the base (as Python's `WritableIndex.close`): every call after
    /// this is refused. Closing twice is harmless.
    public func close() {
        lock.lock()
        defer { lock.unlock() }
        db = nil
        segments = IndexSegments(dim: dim, colbertStore: colbertStore)
        closed = true
    }

    // ------------------------------------------------------------------ reading

    /// Passages (not rows: a passage of several chunks counts once).
    public var count: Int { get throws { try reading { $0.count } } }

    /// Logical rows: every surviving passage's chunks (what a search's `Hit.row` indexes).
    public var rows: Int { get throws { try reading { $0.rows } } }

    public func contains(_ id: PassageID) throws -> Bool { try reading { $0.place(of: id) != nil } }

    /// Every passage's id once, in logical row order (as Python's `WritableIndex.ids`).
    public func ids() throws -> [PassageID] { try reading { $0.ids() } }

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
    /// the best `k` logical rows themselves (IndexSegments.search: EdgeM3Index.search's rules
    /// over the logical rows).
    public func search(_ query: Retrieval.Vectors, k: Int, mode: String, weights: [Double] = Retrieval.defaultWeights,
                       chunks: Bool = false) throws -> [Hit] {
        try reading { try $0.search(query, k: k, mode: mode, weights: weights, chunks: chunks) }
    }

    /// `body` on the segments, under the lock, after a reload of what others committed.
    private func reading<T>(_ body: (IndexSegments) throws -> T) throws -> T {
        try locked {
            try refresh()
            return try body(segments)
        }
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
            for (id, _) in items where segments.place(of: id) != nil {
                throw EdgeM3Error("\(describe(id)): already in the index (update it, or remove it first)", kind: .duplicateId)
            }
            let added = try all.joined().map { try IndexStore.insert(db, $0) }
            return { for p in added { self.segments.append(p) } }
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
            let added = try ps.map { try IndexStore.insert(db, $0) }
            return {
                drop()
                for p in added { self.segments.append(p) }
            }
        }
    }

    /// Replaces a passage by every chunk of `text`, embedded by the index's embedder.
    public func update(_ id: PassageID, text: String) throws {
        try update(id, chunks: try embedChunks(text))
    }

    /// Removes a passage, every chunk (a base passage's rows get tombstones). A missing id:
    /// `.unknownId`, nothing changed.
    public func remove(_ id: PassageID) throws {
        try write { db in try delete(db, id) }
    }

    /// Removes passages in one transaction: all or nothing (as Python's `remove_many`). A missing
    /// id, or an id given twice: `.unknownId`, nothing changed.
    public func removeAll(_ ids: [PassageID]) throws {
        try write { db in
            for id in ids where segments.place(of: id) == nil {
                throw EdgeM3Error("\(describe(id)): not in the index", kind: .unknownId)
            }
            guard Set(ids).count == ids.count else { throw EdgeM3Error("an id is removed twice in one batch", kind: .unknownId) }
            let drops = try ids.map { try delete(db, $0) }
            return { for drop in drops { drop() } }
        }
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
            let target = try compaction.build(segments, generation: next)
            let name = target.lastPathComponent
            let newBase: EdgeM3Index
            let sha: String
            do {
                sha = try IndexStore.readManifest(target).0
                newBase = try EdgeM3Index(folder: target, verifySHA256: false)
                try IndexStore.pointAt(db, base: name, sha: sha, generation: next)
            } catch {
                try? FileManager.default.removeItem(at: target)
                throw error
            }
            let old = baseName
            return {
                self.compaction.deleteBase(old)
                self.install(IndexStore.Loaded(meta: IndexStore.Meta(dim: self.dim, dense: self.denseStore, colbert: self.colbertStore,
                                                                     bundle: self.bundleJSON, base: name, baseSha: sha, generation: next),
                                               base: newBase, removed: [], passages: [], dataVersion: self.dataVersion))
                self.compaction.collectGarbage(baseName: self.baseName, generation: self.generation)
            }
        }
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

    /// Removes `id` in the transaction; returns what to change in memory after the commit.
    private func delete(_ db: SQLiteDB, _ id: PassageID) throws -> () -> Void {
        switch segments.place(of: id) {
        case nil:
            throw EdgeM3Error("\(describe(id)): not in the index", kind: .unknownId)
        case .base(let rows):
            try IndexStore.tombstone(db, rows)
            return { self.segments.tombstone(rows) }
        case .db(let seqs):
            try IndexStore.deleteSeqs(db, seqs)
            return { self.segments.drop(id, seqs) }
        }
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
                    compaction.collectGarbage(baseName: baseName, generation: generation)
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
        let meta = IndexStore.Meta(dim: dim, dense: denseStore, colbert: colbertStore, bundle: bundleJSON, base: ".",
                                   baseSha: baseSha, generation: 0)
        _ = try IndexStore.createDatabase(folder, meta)  // false: another process just made it
        let db = try IndexStore.connect(dbURL.path, durable: durable)
        self.db = db
        dataVersion = -1  // read it all at the next refresh
        try refresh()
        return db
    }

    private func locked<T>(_ body: () throws -> T) throws -> T {
        lock.lock()
        defer { lock.unlock() }
        guard !closed else { throw EdgeM3Error("\(folder.path): the index was closed") }
        return try body()
    }

    // ------------------------------------------------------------------ the database's content

    private func install(_ l: IndexStore.Loaded) {
        (baseName, baseSha, generation) = (l.meta.base, l.meta.baseSha, l.meta.generation)
        segments.install(base: l.base, removed: l.removed, passages: l.passages)
        dataVersion = l.dataVersion
    }

    /// Reloads when another connection committed (PRAGMA data_version), or created the database.
    private func refresh() throws {
        guard let db else {
            if FileManager.default.fileExists(atPath: dbURL.path) {
                let db = try IndexStore.connect(dbURL.path, durable: durable)
                self.db = db
                dataVersion = -1
                try refresh()
            }
            return
        }
        let v = try db.int("PRAGMA data_version") ?? 0
        guard v != dataVersion else { return }
        let l = try IndexStore.reread(db, folder: folder, verifySHA256: verifySHA256,
                                      reuse: segments.base.map { (baseName, baseSha, $0) })
        guard l.meta.dim == dim, l.meta.dense == denseStore, l.meta.colbert == colbertStore,
              sameJSON(l.meta.bundle, bundleJSON) else {
            throw EdgeM3Error("\(db.path): dim, stores or bundle changed under this index", kind: .corruptIndex)
        }
        install(l)
    }
}
