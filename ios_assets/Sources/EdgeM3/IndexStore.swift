import Foundation

/// The writable index's store: `index.sqlite` (docs/index-format.md, "The writable index") read,
/// checked and written through the platform's SQLite. Reading is one committed state (`reread`);
/// every rule a database must keep is one function of the "validation" section below, one per rule
/// group, in the order the refusals are reported. Writes run inside EdgeM3WritableIndex's
/// transaction (`insert`, `tombstone`, `deleteSeqs`, `pointAt`); `createDatabase` makes a new one.
nonisolated enum IndexStore {
    typealias PassageID = EdgeM3Index.PassageID

    /// The database's meta table.
    struct Meta {
        var dim: Int
        var dense: String
        var colbert: String
        var bundle: Any  // NSNull or [String: Any]
        var base: String  // "" no base, "." the folder itself, "base-<n>"
        var baseSha: String
        var generation: Int
    }

    /// One committed state: the meta, the base it names, the tombstones and the added chunks by seq.
    struct Loaded {
        var meta: Meta
        var base: EdgeM3Index?
        var removed: Set<Int>
        var passages: [StoredPassage]
        var dataVersion: Int64
    }

    /// A base already open, reused when the database still names it: its name, sha256 and index.
    typealias Reuse = (name: String, sha: String, index: EdgeM3Index)

    // ------------------------------------------------------------------ connecting

    static func connect(_ path: String, durable: Bool) throws -> SQLiteDB {
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

    /// The database's pages, as a base's files are checked by their sha256.
    static func quickCheck(_ db: SQLiteDB) throws {
        let check = try db.prepare("PRAGMA quick_check")
        let verdict = try check.step() ? check.text(0) : "no answer"
        guard verdict == "ok" else {  // SQLite's verdict spans lines: one line (issue 38)
            let line = verdict.split(whereSeparator: \.isNewline).joined(separator: "; ")
            throw EdgeM3Error("\(db.path): damaged (\(line.prefix(200))); refusing a corrupt index database", kind: .corruptIndex)
        }
    }

    // ------------------------------------------------------------------ reading

    /// `read` as one committed state (EdgeM3Contract.indexDbReloads): when another connection commits
    /// while it reads (a compaction deletes the base it replaced right after its commit), it reads
    /// again; a corrupt index is reported only when nothing was committed meanwhile. A writer that
    /// keeps committing is waited for, and the state read under its lock.
    static func reread(_ db: SQLiteDB, folder: URL, verifySHA256: Bool, reuse: Reuse?) throws -> Loaded {
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
    static func read(_ db: SQLiteDB, folder: URL, verifySHA256: Bool, reuse: Reuse?) throws -> Loaded {
        let own = !db.inTransaction  // a write's reload runs inside its transaction
        if own { try db.exec("BEGIN", writing: false) }
        defer { if own { try? db.exec("COMMIT", writing: false) } }
        let version = try db.int("PRAGMA data_version") ?? 0
        try checkHeader(db)
        let meta = try checkMeta(db, try readMeta(db))
        let base = try openBase(db, meta, folder: folder, verifySHA256: verifySHA256, reuse: reuse)
        let removed = try readRemoved(db, base: base)
        let passages = try readPassages(db, meta)
        try checkNoClash(db, base: base, removed: removed, passages: passages)
        return Loaded(meta: meta, base: base, removed: removed, passages: passages, dataVersion: version)
    }

    /// A base's index.json: its sha256 and its JSON object.
    static func readManifest(_ baseFolder: URL) throws -> (String, [String: Any]) {
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

    // ------------------------------------------------------------------ writing

    /// Writes a new database fully under a temporary name, then links it into place (never
    /// replacing one): false when `folder` already had one.
    static func createDatabase(_ folder: URL, _ meta: Meta) throws -> Bool {
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

    /// Inserts one chunk (in the caller's transaction): it, with its new seq.
    static func insert(_ db: SQLiteDB, _ p: StoredPassage) throws -> StoredPassage {
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

    /// Tombstones for base rows.
    static func tombstone(_ db: SQLiteDB, _ rows: [Int]) throws {
        let s = try db.prepare("INSERT INTO removed (row) VALUES (?)", writing: true)
        for r in rows {
            try s.bind(1, Int64(r))
            try s.run()
        }
    }

    /// Deletes added chunks by seq.
    static func deleteSeqs(_ db: SQLiteDB, _ seqs: [Int64]) throws {
        let s = try db.prepare("DELETE FROM passages WHERE seq = ?", writing: true)
        for seq in seqs {
            try s.bind(1, seq)
            try s.run()
        }
    }

    /// A compaction's commit: the database points at the new base and holds no passage and no tombstone.
    static func pointAt(_ db: SQLiteDB, base name: String, sha: String, generation: Int) throws {
        let set = try db.prepare("UPDATE meta SET value = ? WHERE key = ?", writing: true)
        for (key, value) in [("base", name), ("base_sha256", sha), ("generation", String(generation))] {
            try set.bind(1, text: value)
            try set.bind(2, text: key)
            try set.run()
        }
        try db.exec("DELETE FROM passages; DELETE FROM removed")
    }
}

// ---------------------------------------------------------------------- validation
// The rules an index database keeps, one function per group, run by `read` in this order (the
// first broken rule is the refusal reported). Each refusal: `.corruptIndex`, naming the database.

nonisolated extension IndexStore {
    static func bad(_ db: SQLiteDB, _ what: String) -> EdgeM3Error {
        EdgeM3Error("\(db.path): \(what); refusing the index database", kind: .corruptIndex)
    }

    /// SQLite's header: this format's application_id, this version's user_version.
    static func checkHeader(_ db: SQLiteDB) throws {
        let app = try db.int("PRAGMA application_id") ?? 0
        guard app == Int64(EdgeM3Contract.indexDbApplicationId) else {
            throw bad(db, "not an \(EdgeM3Contract.indexDbFormat) database (application_id \(app))")
        }
        let user = try db.int("PRAGMA user_version") ?? 0
        guard user <= Int64(EdgeM3Contract.indexDbVersion) else {
            throw bad(db, "written by a newer edge-m3 (user_version \(user), this kit reads \(EdgeM3Contract.indexDbVersion))")
        }
        guard user == Int64(EdgeM3Contract.indexDbVersion) else {
            throw bad(db, "written by an older edge-m3 (user_version \(user), this kit reads \(EdgeM3Contract.indexDbVersion))")
        }
    }

    /// The meta table's rows: text keys and values, UTF-8.
    static func readMeta(_ db: SQLiteDB) throws -> [String: String] {
        var meta: [String: String] = [:]
        let m = try db.prepare("SELECT key, value FROM meta")
        while try m.step() {
            guard m.isText(0), m.isText(1) else { throw bad(db, "meta holds a key or value that is not text") }
            guard let key = m.utf8Text(0), let value = m.utf8Text(1) else { throw bad(db, "meta holds text that is not UTF-8") }
            meta[key] = value
        }
        return meta
    }

    /// The meta values: format and version, every key, dim, stores, bundle, generation, base name.
    static func checkMeta(_ db: SQLiteDB, _ meta: [String: String]) throws -> Meta {
        let version = EdgeM3Contract.indexDbVersion
        guard meta["format"] == EdgeM3Contract.indexDbFormat else { throw bad(db, "meta format \(meta["format"] ?? "missing")") }
        guard let fv = meta["format_version"].flatMap(metaInt) else { throw bad(db, "meta format_version missing or malformed") }
        guard fv <= version else { throw bad(db, "written by a newer edge-m3 (format_version \(fv), this kit reads \(version))") }
        guard fv == version else { throw bad(db, "written by an older edge-m3 (format_version \(fv), this kit reads \(version))") }
        for key in EdgeM3Contract.indexDbMetaKeys where meta[key] == nil { throw bad(db, "meta \(key) missing") }
        guard let dim = metaInt(meta["dim"]!), dim >= 1, dim <= EdgeM3Contract.indexMaxDim else { throw bad(db, "meta dim malformed") }
        let dense = meta["dense"]!, colbert = meta["colbert"]!
        guard EdgeM3Contract.denseStores.contains(dense), EdgeM3Contract.colbertStores.contains(colbert) else {
            throw bad(db, "meta dense or colbert store unknown")
        }
        guard let bundle = try? JSONSerialization.jsonObject(with: Data(meta["bundle"]!.utf8), options: [.fragmentsAllowed]),
              bundle is NSNull || bundle is [String: Any] else { throw bad(db, "meta bundle is not a JSON object or null") }
        if let b = bundle as? [String: Any], !EdgeM3Contract.indexBundleKeys.allSatisfy({ b[$0] is String }) {
            throw bad(db, "meta bundle: needs \(EdgeM3Contract.indexBundleKeys.joined(separator: ", ")) (strings)")
        }
        guard let generation = metaInt(meta["generation"]!) else { throw bad(db, "meta generation malformed") }
        let baseName = meta["base"]!, prefix = EdgeM3Contract.indexBasePrefix
        guard baseName == "" || baseName == "." || (baseName.hasPrefix(prefix) && metaInt(String(baseName.dropFirst(prefix.count))) != nil) else {
            throw bad(db, "meta base \"\(baseName)\" malformed")
        }
        return Meta(dim: dim, dense: dense, colbert: colbert, bundle: bundle, base: baseName, baseSha: meta["base_sha256"]!,
                    generation: generation)
    }

    /// The base the meta names (none for ""): its index.json's sha256, model, dim and stores the database's.
    static func openBase(_ db: SQLiteDB, _ meta: Meta, folder: URL, verifySHA256: Bool, reuse: Reuse?) throws -> EdgeM3Index? {
        let baseName = meta.base, baseSha = meta.baseSha
        if baseName == "" {  // (a base with an empty sha256 is refused below: no manifest's sha256 is "")
            guard baseSha == "" else { throw bad(db, "meta base_sha256 set without a base") }
            return nil
        }
        if let reuse, reuse.name == baseName, reuse.sha == baseSha { return reuse.index }
        let baseFolder = baseName == "." ? folder : folder.appendingPathComponent(baseName)
        let (sha, tree) = try readManifest(baseFolder)
        guard sha == baseSha else {
            throw bad(db, "written for another base (\(baseFolder.path)/\(EdgeM3Contract.indexManifest) sha256 \(sha.prefix(12))..., "
                      + "the database's \(baseSha.prefix(12))...)")
        }
        guard sameModel(tree["bundle"] ?? NSNull(), meta.bundle) else { throw bad(db, "its bundle differs from its base's") }
        let b = try EdgeM3Index(folder: baseFolder, verifySHA256: verifySHA256)
        guard b.dim == meta.dim, b.denseStore == meta.dense, b.colbertStore == meta.colbert else {
            throw bad(db, "dim, dense or colbert differs from its base's")
        }
        return b
    }

    /// The tombstones: base rows in range, and a passage removed whole (every chunk's row or none).
    static func readRemoved(_ db: SQLiteDB, base: EdgeM3Index?) throws -> Set<Int> {
        var removed = Set<Int>()
        let r = try db.prepare("SELECT row FROM removed")
        while try r.step() {
            let row = r.int64(0)
            guard r.isInteger(0), row >= 0, row < Int64(base?.count ?? 0) else { throw bad(db, "a removed row is out of range") }
            removed.insert(Int(row))
        }
        if let base, !removed.isEmpty {
            var parts: [PassageID: (rows: Int, removed: Int)] = [:]
            for (r, id) in base.ids.enumerated() {
                parts[id, default: (0, 0)].rows += 1
                if removed.contains(r) { parts[id, default: (0, 0)].removed += 1 }
            }
            if parts.values.contains(where: { $0.removed > 0 && $0.removed < $0.rows }) {
                throw bad(db, "a base passage is removed in part (some of its chunks' rows)")
            }
        }
        return removed
    }

    /// The added chunks by seq: ids integers or UTF-8 text, a passage's chunks 0, 1, ... in
    /// consecutive seqs (one transaction wrote them), vector blobs as StoredPassage checks them.
    static func readPassages(_ db: SQLiteDB, _ meta: Meta) throws -> [StoredPassage] {
        var passages: [StoredPassage] = []
        let p = try db.prepare("SELECT seq, id, chunk, dense, dense_scale, lex_tokens, lex_weights, colbert, colbert_scale "
                               + "FROM passages ORDER BY seq")
        var last: (id: PassageID, chunks: Int64)?
        var seen = Set<PassageID>()
        while try p.step() {
            let id: PassageID
            if p.isInteger(1) {
                id = .int(p.int64(1))
            } else if p.isText(1) {
                guard let text = p.utf8Text(1) else { throw bad(db, "passage seq \(p.int64(0)): an id that is not UTF-8") }
                id = .string(text)
            } else {
                throw bad(db, "a passage id is neither an integer nor a string")
            }
            let chunk = p.int64(2)
            let next = last.map { $0.id == id ? $0.chunks : 0 } ?? 0
            guard p.isInteger(2), chunk == next, chunk > 0 || seen.insert(id).inserted else {
                throw bad(db, "id \(id) has chunk \(p.isInteger(2) ? String(chunk) : "(not an integer)") out of order "
                          + "(a passage's chunks are 0, 1, ... in consecutive seqs)")
            }
            last = (id, chunk + 1)
            func blob(_ c: Int32) throws -> [UInt8]? {  // a cell of another type (text, a number) is not read as bytes
                if p.isNull(c) { return nil }
                guard p.isBlob(c) else { throw bad(db, "passage seq \(p.int64(0)): a vector column that is not a blob") }
                return p.blob(c)
            }
            guard let s = StoredPassage(seq: p.int64(0), id: id, chunk: Int(chunk), dense: try blob(3), denseScale: try blob(4),
                                        tokens: try blob(5), weights: try blob(6), colbert: try blob(7),
                                        colbertScale: try blob(8), dim: meta.dim, denseStore: meta.dense,
                                        colbertStore: meta.colbert) else {
                throw bad(db, "passage seq \(p.int64(0)) has blobs of the wrong length, bad lexical weights, or a value not finite "
                          + "(or a scale not > 0)")
            }
            passages.append(s)
        }
        return passages
    }

    /// No id both alive in the base (its first row, chunk 0, not removed) and added.
    static func checkNoClash(_ db: SQLiteDB, base: EdgeM3Index?, removed: Set<Int>, passages: [StoredPassage]) throws {
        guard let base else { return }
        var alive = Set<PassageID>()
        for (r, id) in base.ids.enumerated() where base.chunks[r] == 0 && !removed.contains(r) { alive.insert(id) }
        if let clash = passages.first(where: { alive.contains($0.id) }) {
            throw bad(db, "id \(clash.id) is both in the base and added")
        }
    }
}

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
