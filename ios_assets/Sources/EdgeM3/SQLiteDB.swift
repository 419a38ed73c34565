import Foundation
#if canImport(SQLite3)
import SQLite3  // Apple platforms: the SDK's libsqlite3
#else
import CSQLite  // Linux: the system's libsqlite3 (Sources/CSQLite/module.modulemap)
#endif

/// A thin wrapper of one SQLite connection (the platform's libsqlite3, its C API) for
/// EdgeM3WritableIndex: used under that index's lock only, so it is not thread-safe itself.
nonisolated final class SQLiteDB {
    let path: String
    private let handle: OpaquePointer

    /// `sqlite3_open_v2`: `readOnly` opens with SQLITE_OPEN_READONLY; otherwise READWRITE (and
    /// `create` CREATE), which SQLite itself downgrades to read-only for a write-protected file.
    /// `immutable`: read-only, and SQLite assumes nobody changes the file (no locks, no -shm):
    /// the only way to read a WAL database in a folder where its -shm cannot be created.
    init(path: String, readOnly: Bool = false, create: Bool = false, immutable: Bool = false,
         busyMs: Int32 = Int32(EdgeM3Contract.indexDbBusyMs)) throws {
        self.path = path
        var h: OpaquePointer?
        var flags = readOnly || immutable ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE
        if create && !readOnly { flags |= SQLITE_OPEN_CREATE }
        flags |= SQLITE_OPEN_NOMUTEX  // one connection per index object, used under its lock
        var name = path
        if immutable {
            flags |= SQLITE_OPEN_URI
            let plain = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~/".utf8)
            name = "file:" + path.utf8.map { plain.contains($0) ? String(UnicodeScalar($0)) : String(format: "%%%02X", $0) }.joined()
                + "?immutable=1"
        }
        let rc = sqlite3_open_v2(name, &h, flags, nil)
        guard rc == SQLITE_OK, let h else {
            let message = h.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            sqlite3_close_v2(h)  // a handle is returned even on failure (NULL is harmless)
            throw EdgeM3Error("\(path): cannot open the index database (\(message))",
                              kind: create ? .writeFailed : .corruptIndex)
        }
        handle = h
        sqlite3_extended_result_codes(h, 1)
        sqlite3_busy_timeout(h, busyMs)
    }

    deinit { sqlite3_close_v2(handle) }

    /// The database file is read-only for this connection (a write-protected file, or READONLY).
    var isReadOnly: Bool { sqlite3_db_readonly(handle, "main") == 1 }

    /// Inside an explicit transaction (not autocommit).
    var inTransaction: Bool { sqlite3_get_autocommit(handle) == 0 }

    var lastInsertRowID: Int64 { sqlite3_last_insert_rowid(handle) }

    var message: String { String(cString: sqlite3_errmsg(handle)) }

    /// The typed error of a failed call: busy (another writer), a write that could not be made
    /// (read-only, full disk, I/O), or else a bad database (not SQLite, corrupt: corrupt_index, as
    /// Python and Kotlin refuse any failed read of it).
    func error(_ rc: Int32, _ what: String, writing: Bool) -> EdgeM3Error {
        let primary = rc & 0xff
        let kind: EdgeM3ErrorKind
        switch primary {
        case SQLITE_BUSY, SQLITE_LOCKED: kind = .indexBusy
        case SQLITE_NOTADB, SQLITE_CORRUPT, SQLITE_FORMAT, SQLITE_SCHEMA, SQLITE_MISMATCH: kind = .corruptIndex
        case SQLITE_READONLY, SQLITE_FULL, SQLITE_IOERR, SQLITE_CANTOPEN, SQLITE_PERM, SQLITE_NOLFS:
            kind = writing ? .writeFailed : .corruptIndex
        case SQLITE_CONSTRAINT: kind = .duplicateId
        default: kind = writing ? .writeFailed : .corruptIndex
        }
        let text = kind == .indexBusy
            ? "another writer holds the index (waited \(EdgeM3Contract.indexDbBusyMs) ms)"
            : String(cString: sqlite3_errstr(rc)) + (message.isEmpty ? "" : ": \(message)")
        return EdgeM3Error("\(path): \(what): \(text)", kind: kind)
    }

    /// Runs SQL without results (several statements allowed).
    func exec(_ sql: String, writing: Bool = true) throws {
        let rc = sqlite3_exec(handle, sql, nil, nil, nil)
        guard rc == SQLITE_OK else { throw error(rc, sql.split(separator: " ").prefix(3).joined(separator: " "), writing: writing) }
    }

    func prepare(_ sql: String, writing: Bool = false) throws -> Statement {
        var s: OpaquePointer?
        let rc = sqlite3_prepare_v2(handle, sql, -1, &s, nil)
        guard rc == SQLITE_OK, let s else { throw error(rc, "prepare", writing: writing) }
        return Statement(db: self, handle: s, writing: writing)
    }

    /// The single integer a query returns (a PRAGMA), nil when it returns no row.
    func int(_ sql: String) throws -> Int64? {
        let s = try prepare(sql)
        return try s.step() ? s.int64(0) : nil
    }
}

/// One prepared statement; finalized when released.
nonisolated final class Statement {
    private let db: SQLiteDB
    private let handle: OpaquePointer
    private let writing: Bool

    fileprivate init(db: SQLiteDB, handle: OpaquePointer, writing: Bool) {
        self.db = db
        self.handle = handle
        self.writing = writing
    }

    deinit { sqlite3_finalize(handle) }

    /// SQLITE_TRANSIENT: SQLite copies the bound bytes before the call returns.
    private static var transient: sqlite3_destructor_type { unsafeBitCast(-1, to: sqlite3_destructor_type.self) }

    private func check(_ rc: Int32) throws {
        guard rc == SQLITE_OK else { throw db.error(rc, "bind", writing: writing) }
    }

    func bind(_ i: Int32, _ v: Int64) throws { try check(sqlite3_bind_int64(handle, i, v)) }

    func bind(_ i: Int32, text: String) throws {
        let bytes = Array(text.utf8)
        if bytes.isEmpty {
            try check(sqlite3_bind_text(handle, i, "", 0, Statement.transient))  // "" (not NULL)
        } else {
            try check(bytes.withUnsafeBufferPointer {
                $0.withMemoryRebound(to: CChar.self) { sqlite3_bind_text(handle, i, $0.baseAddress, Int32($0.count), Statement.transient) }
            })
        }
    }

    /// A blob (an empty one stays an empty blob, not NULL); nil binds NULL.
    func bind(_ i: Int32, blob: [UInt8]?) throws {
        guard let blob else { return try check(sqlite3_bind_null(handle, i)) }
        if blob.isEmpty { return try check(sqlite3_bind_zeroblob(handle, i, 0)) }
        try check(blob.withUnsafeBytes { sqlite3_bind_blob(handle, i, $0.baseAddress, Int32($0.count), Statement.transient) })
    }

    func bind(_ i: Int32, id: EdgeM3Index.PassageID) throws {
        switch id {
        case .int(let v): try bind(i, v)
        case .string(let s): try bind(i, text: s)
        }
    }

    /// Next row: true while there is one; false when done (the statement is then reset).
    func step() throws -> Bool {
        let rc = sqlite3_step(handle)
        if rc == SQLITE_ROW { return true }
        sqlite3_reset(handle)
        guard rc == SQLITE_DONE else { throw db.error(rc, writing ? "write" : "read", writing: writing) }
        return false
    }

    /// Runs a statement that returns no row, then clears its bindings for the next use.
    func run() throws {
        while try step() {}
        sqlite3_clear_bindings(handle)
    }

    func isNull(_ c: Int32) -> Bool { sqlite3_column_type(handle, c) == SQLITE_NULL }
    func isInteger(_ c: Int32) -> Bool { sqlite3_column_type(handle, c) == SQLITE_INTEGER }
    func isText(_ c: Int32) -> Bool { sqlite3_column_type(handle, c) == SQLITE_TEXT }
    func isBlob(_ c: Int32) -> Bool { sqlite3_column_type(handle, c) == SQLITE_BLOB }

    func int64(_ c: Int32) -> Int64 { sqlite3_column_int64(handle, c) }

    func text(_ c: Int32) -> String {
        guard let p = sqlite3_column_text(handle, c) else { return "" }
        let n = Int(sqlite3_column_bytes(handle, c))  // after sqlite3_column_text: its UTF-8 length
        return String(decoding: UnsafeBufferPointer(start: p, count: n), as: UTF8.self)
    }

    /// A blob column's bytes (empty for NULL or an empty blob).
    /// A text cell as UTF-8, strictly: nil when its bytes are not UTF-8 (never read with
    /// replacement characters, which the platforms' decoders place differently; Python's sqlite3
    /// refuses such text too). Valid exactly when decoding and encoding again gives the same bytes.
    func utf8Text(_ c: Int32) -> String? {
        let s = text(c)
        guard let p = sqlite3_column_text(handle, c) else { return s }
        let n = Int(sqlite3_column_bytes(handle, c))
        return s.utf8.elementsEqual(UnsafeBufferPointer(start: p, count: n)) ? s : nil
    }

    func blob(_ c: Int32) -> [UInt8] {
        guard let p = sqlite3_column_blob(handle, c) else { return [] }
        let n = Int(sqlite3_column_bytes(handle, c))
        return Array(UnsafeRawBufferPointer(start: p, count: n))
    }
}
