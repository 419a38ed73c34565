package dev.edgem3

import java.io.File
import java.io.IOException

/**
 * The writable index's `index.sqlite` (docs/index-format.md, "The writable index"): every SQLite
 * read and write, through the kit's IndexDbDriver. Reads go through IndexDbRules (the format's
 * validation, one function per rule group) into IndexSegments; a write is one transaction whose
 * in-memory change is applied only after its commit. Not thread-safe: EdgeM3WritableIndex
 * serialises every call.
 */
internal class IndexStore(
    private val dir: File,
    private val driver: IndexDbDriver,
    /** A bundle's manifest.json files (name -> sha256): the index must have been built by it. */
    private val bundleFiles: Map<String, String>?
) {
    val dbFile = File(dir, EdgeM3Contract.INDEX_DB)
    private val rules = IndexDbRules(dbFile)
    private var db: IndexDb? = null
    private var dataVersion: Long? = null
    /** meta's `base` (`"."` for a format-1 folder not yet written to), `base_sha256`, `generation`. */
    var baseName = ""
        private set
    private var baseSha = ""
    var generation = 0L
        private set

    /** Whether the folder has its database yet (a format-1 folder gets one at its first write). */
    val hasDb: Boolean get() = db != null

    /** A format-1 folder opened before its first write: its own files are the base. */
    fun onRootBase() {
        baseName = "."
    }

    fun close() {
        db?.close()
        db = null
    }

    // ------------------------------------------------------------------ reading

    /** Every call's first step: a database another process created, or a commit by another connection. */
    fun refresh(seg: IndexSegments) {
        try {
            val d = db
            if (d == null) {
                if (dbFile.isFile) {
                    val opened = openDb(dbFile)
                    db = opened
                    reload(opened, seg)
                }
                return
            }
            if (readDataVersion(d) != dataVersion) reload(d, seg)
        } catch (e: IndexDbException) {
            throw readError(e)
        }
    }

    /**
     * `load` as one committed state (EdgeM3Contract.INDEX_DB_RELOADS): PRAGMA data_version before
     * and after it, and when another connection committed in between (a compaction deletes the base
     * it replaced right after its commit; Android's cursors run a query again for each window), it
     * reads again: never a mix of two commits, never a base deleted under it reported as corrupt.
     * A writer that keeps committing is waited for, and the state read under its lock.
     */
    private fun reload(d: IndexDb, seg: IndexSegments) {
        dataVersion = null  // until a load succeeds: the next call reads again
        repeat(EdgeM3Contract.INDEX_DB_RELOADS) {
            val before = readDataVersion(d)
            try {
                load(d, seg)
            } catch (e: EdgeM3CorruptIndexException) {
                if (readDataVersion(d) == before) throw e  // nothing committed meanwhile: corrupt
                return@repeat
            }
            if (readDataVersion(d) == before) {
                dataVersion = before
                return
            }
        }
        val version = try {
            d.transaction {  // BEGIN IMMEDIATE: no commit, no compaction while it reads
                val v = readDataVersion(d)
                load(d, seg)
                v
            }
        } catch (e: IndexDbException) {
            throw EdgeM3IndexBusyException("$dbFile: another writer kept committing while it was read (${e.message})")
        }
        dataVersion = version
    }

    private fun readDataVersion(d: IndexDb): Long = longOf(d.query("PRAGMA data_version").firstOrNull()?.get(0), "data_version")

    private fun openDb(file: File): IndexDb {
        val d = driver.open(file, false)
        try {
            d.query("PRAGMA busy_timeout = ${EdgeM3Contract.INDEX_DB_BUSY_MS}")
            checkHeader(d)
            // WAL is persistent in the file; setting it again is a no-op (and harmless when read-only).
            try {
                d.query("PRAGMA journal_mode = WAL")
            } catch (e: IndexDbException) {
                if (e.code == IndexDbException.CORRUPT || e.code == IndexDbException.NOTADB) throw e
            }
            d.execute("PRAGMA synchronous = NORMAL", emptyList())
            val check = d.query("PRAGMA quick_check").firstOrNull()?.get(0)
            if (check != "ok") {  // SQLite's verdict spans lines: one line (issue 38)
                throw EdgeM3CorruptIndexException("$dbFile: damaged (${check.toString().lines().joinToString("; ").take(200)}); refusing a corrupt index database")
            }
            return d
        } catch (e: Exception) {
            d.close()
            throw e
        }
    }

    private fun checkHeader(d: IndexDb) {
        val app = longOf(d.query("PRAGMA application_id").firstOrNull()?.get(0), "application_id")
        val version = longOf(d.query("PRAGMA user_version").firstOrNull()?.get(0), "user_version")
        rules.header(app, version)
    }

    /** The whole state from the database (its meta, its base, tombstones, passages), checked. */
    private fun load(d: IndexDb, seg: IndexSegments) {
        checkHeader(d)
        val raw = HashMap<String, String>()
        // The text as stored (CAST AS BLOB): text that is not UTF-8 is refused.
        for (row in d.query("SELECT key, value, CAST(key AS BLOB), CAST(value AS BLOB) FROM meta")) {
            val (k, v) = rules.metaEntry(row)
            raw[k] = v
        }
        val meta = rules.meta(raw)
        if (meta.bundle != null && bundleFiles != null) rules.bundle(meta.bundle, bundleFiles, dir)
        // The base: kept when the same one is already mapped.
        val kept = seg.base
        val b = if (meta.base == "") null else if (meta.base == baseName && meta.baseSha == baseSha && kept != null) kept else openBase(meta)
        if (b != null) rules.base(b, meta)
        val rem = rules.removed(d.query("SELECT row FROM removed"), b)
        val ps = ArrayList<Stored>()
        val seen = HashSet<PassageId>()
        for (row in d.query("SELECT seq, id, chunk, dense, dense_scale, lex_tokens, lex_weights, colbert, colbert_scale, " +
                "CAST(id AS BLOB) FROM passages ORDER BY seq")) {
            if (row[1] is String) row[1] = rules.passageId(row[0], row[9])
            val p = rules.passage(row, meta)
            rules.chunkOrder(ps.lastOrNull(), p, seen)
            ps.add(p)
        }
        baseName = meta.base; baseSha = meta.baseSha; generation = meta.generation
        seg.install(meta.dim, meta.dense, meta.colbert, meta.bundle, b, rem, ps) { rules.disjoint(it) }
    }

    /** The base folder meta names, its index.json's SHA-256 the meta's, opened (and verified). */
    private fun openBase(meta: DbMeta): EdgeM3Index {
        val folder = if (meta.base == ".") dir else File(dir, meta.base)
        val manifest = File(folder, EdgeM3Contract.INDEX_MANIFEST)
        if (!manifest.isFile) throw EdgeM3CorruptIndexException("$dbFile: its base $folder has no ${EdgeM3Contract.INDEX_MANIFEST}")
        val sha = meta.baseSha
        try {
            val got = IndexCompaction.sha256(manifest)
            if (got != sha) throw EdgeM3CorruptIndexException("$dbFile: written for another base ($manifest sha256 ${got.take(12)}..., the database's is ${sha.take(12)}...)")
            return EdgeM3Index.open(folder)
        } catch (e: IOException) {  // a file deleted since: another process's compaction
            throw EdgeM3CorruptIndexException("$folder: unreadable (${e.message})")
        }
    }

    /** A failed read of the database: busy, else corrupt_index (as Python refuses any SQLite error there). */
    private fun readError(e: IndexDbException): EdgeM3Exception = when (e.code) {
        IndexDbException.BUSY, IndexDbException.LOCKED ->
            EdgeM3IndexBusyException("$dbFile: another writer holds the index (waited ${EdgeM3Contract.INDEX_DB_BUSY_MS} ms)")
        IndexDbException.CORRUPT, IndexDbException.NOTADB ->
            EdgeM3CorruptIndexException("$dbFile: not an edge-m3 index database, or corrupt (${e.message})")
        else -> EdgeM3CorruptIndexException("$dbFile: cannot read (${e.message})")
    }

    // ------------------------------------------------------------------ writing

    /**
     * One write: the database created if the folder has none, `BEGIN IMMEDIATE`, a reload when
     * another connection committed, `stage` (SQL only; it returns the in-memory change), `COMMIT`,
     * then that change. Any failure: rolled back, nothing changed.
     */
    fun write(seg: IndexSegments, stage: () -> (() -> Unit)) {
        if (db == null) createOnBase(seg)
        val d = db!!
        val apply = try {
            d.transaction {
                if (readDataVersion(d) != dataVersion) reload(d, seg)
                stage()
            }
        } catch (e: IndexDbException) {
            throw writeError(e)
        }
        apply()
    }

    private fun writeError(e: IndexDbException): EdgeM3Exception = when (e.code) {
        IndexDbException.BUSY, IndexDbException.LOCKED ->
            EdgeM3IndexBusyException("$dbFile: another writer holds the index (waited ${EdgeM3Contract.INDEX_DB_BUSY_MS} ms)")
        IndexDbException.CORRUPT, IndexDbException.NOTADB -> EdgeM3CorruptIndexException("$dbFile: corrupt (${e.message})")
        IndexDbException.ERROR -> EdgeM3CorruptIndexException("$dbFile: ${e.message}")
        else -> EdgeM3WriteFailedException("$dbFile: cannot write (${e.message}); nothing was written")
    }

    /** A format-1 folder's first write: its database, base ".", written whole under a temporary name. */
    private fun createOnBase(seg: IndexSegments) {
        val b = seg.base ?: throw EdgeM3Exception("$dir: no index here")
        val sha = IndexCompaction.sha256(File(dir, EdgeM3Contract.INDEX_MANIFEST))
        createDb(dir, driver, b.dim, b.denseStore, b.colbertStore, if (b.bundle.isEmpty()) null else b.bundle, ".", sha)
        try {
            val d = openDb(dbFile)
            db = d
            reload(d, seg)
        } catch (e: IndexDbException) {
            throw readError(e)
        }
    }

    /** In a write's transaction: a passage's chunk appended to `passages`. */
    fun insert(p: Stored) {
        db!!.execute("INSERT INTO passages (id, chunk, dense, dense_scale, lex_tokens, lex_weights, colbert, colbert_scale) " +
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)", p.columns())
    }

    /** In a write's transaction: base rows tombstoned. */
    fun tombstone(rows: List<Int>) {
        val d = db!!
        for (r in rows) d.execute("INSERT INTO removed (row) VALUES (?)", listOf(r.toLong()))
    }

    /** In a write's transaction: a database passage's rows (every chunk) deleted. */
    fun deletePassage(id: PassageId) {
        db!!.execute("DELETE FROM passages WHERE id = ?", listOf(id.value))
    }

    /** In compaction's transaction: `passages` and `removed` emptied, meta pointed at the new base. */
    fun swapBase(name: String, sha: String, g: Long) {
        val d = db!!
        d.execute("DELETE FROM passages", emptyList())
        d.execute("DELETE FROM removed", emptyList())
        setMeta(d, "base", name)
        setMeta(d, "base_sha256", sha)
        setMeta(d, "generation", g.toString())
    }

    /** After compaction's commit: the base it swapped in. */
    fun adoptBase(name: String, sha: String, g: Long) {
        baseName = name
        baseSha = sha
        generation = g
    }

    companion object {
        fun createDb(dir: File, driver: IndexDbDriver, dim: Int, dense: String, colbert: String,
                             bundle: Map<String, Any?>?, base: String, baseSha: String) {
            val target = File(dir, EdgeM3Contract.INDEX_DB)
            val tmp = File(dir, ".${EdgeM3Contract.INDEX_DB}.part-" + java.lang.Long.toHexString(System.nanoTime()))
            fun cleanup() {
                for (suffix in listOf("", "-wal", "-shm", "-journal")) File(tmp.path + suffix).delete()
            }
            try {
                val d = driver.open(tmp, true)
                try {
                    d.query("PRAGMA journal_mode = WAL")
                    d.transaction {
                        for (sql in EdgeM3Contract.INDEX_DB_SCHEMA) d.execute(sql, emptyList())
                        val meta = linkedMapOf(
                            "format" to EdgeM3Contract.INDEX_DB_FORMAT,
                            "format_version" to EdgeM3Contract.INDEX_DB_VERSION.toString(),
                            "dim" to dim.toString(),
                            "dense" to dense,
                            "colbert" to colbert,
                            "bundle" to if (bundle == null) "null" else PyJson.dumps(bundle.toSortedMap(), indent = -1, asciiOnly = true),
                            "base" to base,
                            "base_sha256" to baseSha,
                            "generation" to "0"
                        )
                        for ((k, v) in meta) d.execute("INSERT INTO meta (key, value) VALUES (?, ?)", listOf(k, v))
                        d.execute("PRAGMA application_id = ${EdgeM3Contract.INDEX_DB_APPLICATION_ID}", emptyList())
                        d.execute("PRAGMA user_version = ${EdgeM3Contract.INDEX_DB_VERSION}", emptyList())
                    }
                } finally {
                    d.close()
                }
                if (target.exists()) { cleanup(); return }  // another writer was first: use its database
                if (!tmp.renameTo(target)) throw IOException("cannot rename $tmp to $target")
                cleanup()
            } catch (e: IndexDbException) {
                cleanup()
                throw EdgeM3WriteFailedException("$target: cannot create the database (${e.message}); nothing was written")
            } catch (e: IOException) {
                cleanup()
                throw EdgeM3WriteFailedException("$target: cannot create the database (${e.message}); nothing was written")
            }
        }

        private fun setMeta(d: IndexDb, key: String, value: String) =
            d.execute("UPDATE meta SET value = ? WHERE key = ?", listOf(value, key))

        fun longOf(x: Any?, what: String): Long = when (x) {
            is Long -> x
            is Int -> x.toLong()
            else -> throw IndexDbException(IndexDbException.CORRUPT, "$what: not an integer")
        }
    }
}
