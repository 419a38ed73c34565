package dev.edgem3

import java.io.Closeable
import java.io.File
import java.io.FileOutputStream
import java.io.IOException
import java.nio.ByteBuffer
import java.nio.ByteOrder
import java.nio.charset.CharacterCodingException
import java.nio.charset.CodingErrorAction
import java.security.MessageDigest
import java.text.SimpleDateFormat
import java.util.Date
import java.util.Locale
import java.util.TimeZone

/**
 * An index the app writes (docs/index-format.md, "The writable index"): a format-1 base folder,
 * memory-mapped by EdgeM3Index and never written in place, plus `index.sqlite`, which holds the
 * passages added since (in stored form, one row per chunk) and the base rows removed. `search`
 * returns the hits and float64 score bits a fresh format-1 build of the surviving passages in
 * logical-row order would (the base's surviving rows in order, then the database's rows by seq;
 * rows sharing an id are one passage's chunks: docs/index-format.md, "Passages and chunks"), as Python's
 * `edge_m3.retrieval.writable.WritableIndex` and the Swift kit do.
 *
 * Every write is one SQLite transaction (WAL); a second writer waits INDEX_DB_BUSY_MS then gets
 * EdgeM3IndexBusyException. Each call first checks `PRAGMA data_version` and reloads when another
 * connection committed. Thread-safe (calls are serialised); blocking: call it off the main thread.
 * `driver` is the SQLite binding: AndroidIndexDbDriver in an app, JdbcIndexDbDriver on a desktop JVM.
 */
class EdgeM3WritableIndex private constructor(
    /** The index folder. */
    val dir: File,
    private val driver: IndexDbDriver,
    /** A bundle's manifest.json files (name -> sha256): the index must have been built by it. */
    private val bundleFiles: Map<String, String>?
) : Closeable {
    /**
     * One search result: the logical row, its passage's id and chunk number, the exact score. The id
     * is read with the row under one lock: a later call reloads what another writer (a thread, or
     * another process) committed and renumbers the rows, so `id(row)` after it may name another passage.
     */
    class Hit(val row: Int, val id: Any, val chunk: Int, val score: Double) {
        override fun toString(): String = "Hit(row=$row, id=$id, chunk=$chunk, score=$score)"
    }

    /** Vector width: the bundle's hidden size. */
    var dim: Int = 0
        private set
    /** `float32` or `int8`. */
    var denseStore: String = "float32"
        private set
    /** `fp16`, `int8` or `none`. */
    var colbertStore: String = "none"
        private set
    /** The bundle identity the index records (index.json's `bundle`), or null. */
    var bundle: Map<String, Any?>? = null
        private set
    /** Embeds `add(id, text)` and `update(id, text)`: the bundle's own embedder. */
    var embedder: EdgeM3Embedder? = null

    private val dbFile = File(dir, EdgeM3Contract.INDEX_DB)
    private var db: IndexDb? = null
    private var dataVersion: Long? = null
    private var baseName = ""
    private var baseSha = ""
    private var generation = 0L
    private var base: EdgeM3Index? = null
    private var removed = BooleanArray(0)
    /** The database's rows (chunks) by seq. */
    private val passages = ArrayList<Stored>()
    /** Each surviving base passage's rows, in row order (its chunks). */
    private val baseRowsOf = HashMap<Any, ArrayList<Int>>()
    /** Each database passage's rows, in chunk order. */
    private val storedOf = HashMap<Any, ArrayList<Stored>>()
    private var survivors = IntArray(0)
    private var closed = false

    // ------------------------------------------------------------------ reading

    /** Passages (ids; a passage of n chunks is n logical rows). */
    val count: Int
        @Synchronized get() {
            refresh()
            return baseRowsOf.size + storedOf.size
        }

    /** Logical rows (chunks): what a hit's `row` counts. */
    val rows: Int
        @Synchronized get() {
            refresh()
            return survivors.size + passages.size
        }

    @Synchronized
    fun contains(id: Any): Boolean {
        refresh()
        return present(key(id))
    }

    private fun present(key: Any): Boolean = baseRowsOf.containsKey(key) || storedOf.containsKey(key)

    /** The passage id of a logical row (a hit's `row`): a Long or a String. */
    @Synchronized
    fun id(row: Int): Any {
        checkRow(row)
        val s = survivors.size
        return if (row < s) base!!.ids[survivors[row]] else passages[row - s].id
    }

    /** A logical row's chunk number in its passage. */
    @Synchronized
    fun chunk(row: Int): Int {
        checkRow(row)
        val s = survivors.size
        return if (row < s) base!!.chunk(survivors[row]) else passages[row - s].chunk
    }

    private fun checkRow(row: Int) {
        val n = survivors.size + passages.size
        if (row < 0 || row >= n) throw EdgeM3Exception("row $row: the index has $n")
    }

    fun search(query: Embedding, k: Int, mode: String, weights: DoubleArray = Retrieval.DEFAULT_WEIGHTS,
               chunks: Boolean = false): List<Hit> =
        search(Retrieval.Vectors.of(query), k, mode, weights, chunks)

    /**
     * EdgeM3Index.search over the logical rows: the best `k` passages for `mode`, each by its best
     * chunk (`chunks = true`: the best `k` rows), score descending then row ascending; `P` is the
     * most chunks of one surviving passage; `sparse` hits only rows sharing a token; the hybrid
     * modes re-score the union of the best `max(k', HYBRID_CANDIDATES)` rows by dense and by sparse.
     */
    @Synchronized
    fun search(query: Retrieval.Vectors, k: Int, mode: String, weights: DoubleArray = Retrieval.DEFAULT_WEIGHTS,
               chunks: Boolean = false): List<Hit> {
        refresh()
        // A passage is removed whole, so its surviving base rows are chunks 0..n-1.
        var most = 0
        val b = base
        if (b != null) for (r in survivors) most = maxOf(most, b.chunk(r) + 1)
        for (r in storedOf.values) most = maxOf(most, r.size)
        return EdgeM3Index.passageHits(k, most, chunks, { rowSearch(query, it, mode, weights) }, ::id, ::chunk)
            .map { Hit(it.row, id(it.row), it.chunk, it.score) }
    }

    /** The best `k` logical rows (chunk numbers not filled in: `passageHits` does). */
    private fun rowSearch(query: Retrieval.Vectors, k: Int, mode: String, weights: DoubleArray): List<EdgeM3Index.Hit> {
        if (k < 1) throw EdgeM3Exception("k: must be at least 1, got $k")
        val used = Retrieval.signals(mode)
        Retrieval.checkWeights(weights)
        val (nd, ns, nc) = Retrieval.SIGNALS
        val q = query.dense?.also { if (it.size != dim) throw EdgeM3Exception("query dense_vecs: ${it.size} values, the index has $dim") }
        val lex = query.lexical
        val cq = query.colbert?.also { m ->
            if (m.any { it.size != dim }) throw EdgeM3Exception("query colbert_vecs: rows must have $dim values, the index has $dim")
        }
        if (nd in used && q == null) throw EdgeM3Exception("mode $mode: the query has no dense_vecs")
        if (ns in used && lex == null) throw EdgeM3Exception("mode $mode: the query has no lexical_weights")
        if (nc in used) {
            if (cq == null) throw EdgeM3Exception("mode $mode: the query has no colbert_vecs")
            if (colbertStore == "none") throw EdgeM3Exception("mode $mode: the index has no ColBERT vectors (built with --colbert none)")
        }
        val s = survivors.size
        val n = s + passages.size
        if (n == 0) return emptyList()
        val b = base
        fun colbertOf(row: Int): Double = if (row < s) b!!.colbertScore(cq!!, survivors[row]) else passages[row - s].colbert(cq!!, dim)
        if (used.size == 1) {
            return when (used[0]) {
                nd -> denseAll(q!!).let { d -> EdgeM3Index.top(k, n) { r -> d[r] } }
                nc -> EdgeM3Index.top(k, n) { r -> colbertOf(r) }
                else -> {
                    val sp = sparseAll(lex!!)
                    EdgeM3Index.top(k, sp.rows.size) { i -> sp.acc[sp.rows[i]] }.map { EdgeM3Index.Hit(sp.rows[it.row], it.score) }
                }
            }
        }
        val c = maxOf(k, EdgeM3Contract.HYBRID_CANDIDATES)
        val sp = sparseAll(lex!!)
        val candidates = java.util.TreeSet<Int>()
        val dAll = denseAll(q!!)
        for (h in EdgeM3Index.top(c, n) { r -> dAll[r] }) candidates.add(h.row)
        for (h in EdgeM3Index.top(c, sp.rows.size) { i -> sp.acc[sp.rows[i]] }) candidates.add(sp.rows[h.row])
        val rows = candidates.toIntArray()
        return EdgeM3Index.top(k, rows.size) { i ->
            val r = rows[i]
            val sc = if (sp.touched[r]) sp.acc[r] else 0.0
            val cb = if (nc in used) colbertOf(r) else 0.0
            Retrieval.hybrid(mode, dAll[r], sc, cb, weights)
        }.map { EdgeM3Index.Hit(rows[it.row], it.score) }
    }

    /** Every logical row's dense score: the base's (its own loop) for survivors, then the passages'. */
    private fun denseAll(q: FloatArray): DoubleArray {
        val s = survivors.size
        val out = DoubleArray(s + passages.size)
        if (s > 0) {
            val all = base!!.denseAll(q)
            for (i in 0 until s) out[i] = all[survivors[i]]
        }
        for (j in passages.indices) out[s + j] = passages[j].dense(q)
        return out
    }

    private fun sparseAll(lex: Retrieval.Lexical): EdgeM3Index.SparseScores {
        val s = survivors.size
        val n = s + passages.size
        val acc = DoubleArray(n)
        val touched = BooleanArray(n)
        if (s > 0) {
            val bs = base!!.sparseScores(lex)
            for (i in 0 until s) {
                val r = survivors[i]
                if (bs.touched[r]) { touched[i] = true; acc[i] = bs.acc[r] }
            }
        }
        for (j in passages.indices) {
            val p = passages[j].lexical
            // Retrieval.sparse's loop (ascending ids, one product at a time), noting a shared token.
            var sum = 0.0
            var shared = false
            var a = 0
            var b = 0
            while (a < lex.size && b < p.size) {
                val x = lex.ids[a]
                val y = p.ids[b]
                when {
                    x < y -> a++
                    x > y -> b++
                    else -> { sum += lex.weights[a].toDouble() * p.weights[b].toDouble(); shared = true; a++; b++ }
                }
            }
            if (shared) { touched[s + j] = true; acc[s + j] = sum }
        }
        var m = 0
        for (t in touched) if (t) m++
        val rows = IntArray(m)
        var i = 0
        for (r in 0 until n) if (touched[r]) rows[i++] = r
        return EdgeM3Index.SparseScores(acc, touched, rows)
    }

    // ------------------------------------------------------------------ writing

    /**
     * Appends the passage `text`, split into chunks (`EdgeM3Tokenizer.encodeChunks`: windows of
     * the largest signature, overlapping by CHUNK_OVERLAP_PERCENT) each embedded by `embedder`:
     * the last logical rows. An id already present: EdgeM3DuplicateIdException.
     */
    fun add(id: Any, text: String) = add(id, embedChunks(text))

    /** Appends one passage of one chunk (the last logical row). */
    fun add(id: Any, outputs: Retrieval.Vectors) = add(id, listOf(outputs))

    /** Appends one passage of `chunks.size` chunks, in chunk order (an empty list is refused). */
    fun add(id: Any, chunks: List<Retrieval.Vectors>) = addAll(listOf(Pair(id, chunks)))

    /** Appends passages of one chunk each, in one transaction: all or nothing. */
    fun addAll(items: List<Pair<Any, Retrieval.Vectors>>) = addAll(items.map { Pair(it.first, listOf(it.second)) })

    /** Appends passages (each its list of chunks) in one transaction: all or nothing. */
    @JvmName("addAllChunks")
    @Synchronized
    fun addAll(items: List<Pair<Any, List<Retrieval.Vectors>>>) {
        val prepared = items.map { Pair(key(it.first), it.second) }
        val seen = HashSet<Any>()
        for ((id, _) in prepared) if (!seen.add(id)) throw EdgeM3DuplicateIdException("id ${show(id)}: given twice in one batch")
        // Checked before anything is written (a format-1 folder gets no database for a refused
        // write), and again under the write lock, after any other writer's commit.
        fun stage(): List<Stored> {
            val stored = prepared.flatMap { (id, chunks) -> stored(id, chunks) }
            for ((id, _) in prepared) {
                if (present(id)) throw EdgeM3DuplicateIdException("id ${show(id)}: already in the index (update it, or remove it first)")
            }
            return stored
        }
        refresh()
        stage()
        write {
            val stored = stage()
            for (p in stored) insert(p)
            val apply: () -> Unit = { for (p in stored) append(p) }
            apply
        }
    }

    /** Replaces the passage of `id` by the chunks of `text` (as `add(id, text)`), in one transaction. */
    fun update(id: Any, text: String) = update(id, embedChunks(text))

    /** Replaces the passage of `id` by one chunk. */
    fun update(id: Any, outputs: Retrieval.Vectors) = update(id, listOf(outputs))

    /** Replaces every chunk of `id` by `chunks` (they become the last logical rows), in one transaction. */
    @Synchronized
    fun update(id: Any, chunks: List<Retrieval.Vectors>) {
        val key = key(id)
        refresh()
        stored(key, chunks)
        if (!present(key)) throw EdgeM3UnknownIdException("id ${show(key)}: not in the index")
        write {
            val ps = stored(key, chunks)
            val undo = delete(key)
            for (p in ps) insert(p)
            val apply: () -> Unit = { undo(); for (p in ps) append(p) }
            apply
        }
    }

    /** Removes the passage of `id`, every chunk: its base rows get tombstones, its database rows are deleted. */
    @Synchronized
    fun remove(id: Any) {
        val key = key(id)
        refresh()
        if (!present(key)) throw EdgeM3UnknownIdException("id ${show(key)}: not in the index")
        write { delete(key) }
    }

    /** A passage's chunks checked and in stored form, numbered 0, 1, ... */
    private fun stored(id: Any, chunks: List<Retrieval.Vectors>): List<Stored> {
        if (chunks.isEmpty()) throw EdgeM3Exception("id ${show(id)}: no chunks (a passage needs at least one)")
        return chunks.mapIndexed { c, v -> Stored.of(id, c, v, dim, denseStore, colbertStore) }
    }

    private fun append(p: Stored) {
        passages.add(p)
        storedOf.getOrPut(p.id) { ArrayList() }.add(p)
    }

    /**
     * Folds the database into a new format-1 base, `base-<generation+1>/` (written whole, then
     * renamed), then in one transaction empties `passages` and `removed` and points `meta` at it;
     * only then is the old base deleted. A kill leaves the old state or the new one.
     */
    @Synchronized
    fun compact() {
        refresh()
        if (db == null) return  // never written: the format-1 base is already compact
        write {
            val g = generation + 1
            val name = EdgeM3Contract.INDEX_BASE_PREFIX + g
            val target = File(dir, name)
            writeBase(target)
            val sha = sha256(File(target, EdgeM3Contract.INDEX_MANIFEST))
            val d = db!!
            d.execute("DELETE FROM passages", emptyList())
            d.execute("DELETE FROM removed", emptyList())
            setMeta(d, "base", name)
            setMeta(d, "base_sha256", sha)
            setMeta(d, "generation", g.toString())
            val apply: () -> Unit = {
                val oldName = baseName
                baseName = name
                baseSha = sha
                generation = g
                base = EdgeM3Index.open(target, verifySha256 = false)
                passages.clear()
                removed = BooleanArray(base!!.count)
                rebuildMaps()
                deleteBase(oldName)
                collectGarbage()
            }
            apply
        }
    }

    @Synchronized
    override fun close() {
        if (closed) return
        closed = true
        db?.close()
        db = null
    }

    // ------------------------------------------------------------------ internals

    /** The chunks of `text` (the tokenizer's `encodeChunks`), each embedded by `embedder`. */
    private fun embedChunks(text: String): List<Retrieval.Vectors> {
        val e = embedder ?: throw EdgeM3Exception("add(id, text): set `embedder` (the index's bundle) first")
        return e.embedChunksBlocking(text).map { Retrieval.Vectors.of(it) }
    }

    /** Stages `id`'s deletion (every chunk) in the open transaction; returns the in-memory change for after the commit. */
    private fun delete(id: Any): () -> Unit {
        val d = db!!
        val rows = baseRowsOf[id]
        if (rows != null) {
            for (r in rows) d.execute("INSERT INTO removed (row) VALUES (?)", listOf(r.toLong()))
            return { for (r in rows) removed[r] = true; baseRowsOf.remove(id); survivors = survivorsOf() }
        }
        val ps = storedOf[id] ?: throw EdgeM3UnknownIdException("id ${show(id)}: not in the index")
        d.execute("DELETE FROM passages WHERE id = ?", listOf(id))
        return {
            val gone = HashSet<Stored>(ps)  // identity: Stored has no equals of its own
            passages.removeAll { it in gone }
            storedOf.remove(id)
        }
    }

    private fun insert(p: Stored) {
        db!!.execute("INSERT INTO passages (id, chunk, dense, dense_scale, lex_tokens, lex_weights, colbert, colbert_scale) " +
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)", p.columns())
    }

    /**
     * One write: the database created if the folder has none, `BEGIN IMMEDIATE`, a reload when
     * another connection committed, `stage` (SQL only; it returns the in-memory change), `COMMIT`,
     * then that change. Any failure: rolled back, nothing changed.
     */
    private fun write(stage: () -> (() -> Unit)) {
        check()
        if (db == null) createOnBase()
        val d = db!!
        val apply = try {
            d.transaction {
                if (readDataVersion(d) != dataVersion) reload(d)
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

    /** A failed read of the database: busy, else corrupt_index (as Python refuses any SQLite error there). */
    private fun readError(e: IndexDbException): EdgeM3Exception = when (e.code) {
        IndexDbException.BUSY, IndexDbException.LOCKED ->
            EdgeM3IndexBusyException("$dbFile: another writer holds the index (waited ${EdgeM3Contract.INDEX_DB_BUSY_MS} ms)")
        IndexDbException.CORRUPT, IndexDbException.NOTADB ->
            EdgeM3CorruptIndexException("$dbFile: not an edge-m3 index database, or corrupt (${e.message})")
        else -> EdgeM3CorruptIndexException("$dbFile: cannot read (${e.message})")
    }

    private fun check() {
        if (closed) throw EdgeM3ClosedException("EdgeM3WritableIndex is closed")
    }

    /** Every call's first step: a database another process created, or a commit by another connection. */
    private fun refresh() {
        check()
        try {
            val d = db
            if (d == null) {
                if (dbFile.isFile) {
                    val opened = openDb(dbFile)
                    db = opened
                    reload(opened)
                }
                return
            }
            if (readDataVersion(d) != dataVersion) reload(d)
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
    private fun reload(d: IndexDb) {
        dataVersion = null  // until a load succeeds: the next call reads again
        repeat(EdgeM3Contract.INDEX_DB_RELOADS) {
            val before = readDataVersion(d)
            try {
                load(d)
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
                load(d)
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
        if (app != EdgeM3Contract.INDEX_DB_APPLICATION_ID.toLong()) {
            throw EdgeM3CorruptIndexException("$dbFile: not an edge-m3 index database (application_id $app)")
        }
        val version = longOf(d.query("PRAGMA user_version").firstOrNull()?.get(0), "user_version")
        if (version > EdgeM3Contract.INDEX_DB_VERSION) throw newer(version.toString())
        if (version < EdgeM3Contract.INDEX_DB_VERSION) throw older(version.toString())
    }

    private fun newer(v: String) = EdgeM3CorruptIndexException("$dbFile: format_version $v, written by a newer edge-m3 " +
        "(this kit reads ${EdgeM3Contract.INDEX_DB_VERSION})")

    /** Format 1 (a pre-release with no `chunk` column, never in a release): refused, not migrated. */
    private fun older(v: String) = EdgeM3CorruptIndexException("$dbFile: format_version $v, written by an older edge-m3 " +
        "(this kit reads ${EdgeM3Contract.INDEX_DB_VERSION}); rebuild the index")

    /** The whole state from the database (its meta, its base, tombstones, passages), checked. */
    private fun load(d: IndexDb) {
        checkHeader(d)
        val meta = HashMap<String, String>()
        // The text as stored (CAST AS BLOB): text that is not UTF-8 is refused, never read with
        // replacement characters (the platform's decoders differ; Python's sqlite3 refuses it).
        for (row in d.query("SELECT key, value, CAST(key AS BLOB), CAST(value AS BLOB) FROM meta")) {
            if (row[0] !is String) throw bad("meta: a key that is not text")
            val k = utf8(row[2]) ?: throw bad("meta: a key that is not UTF-8")
            if (row[1] !is String) throw bad("meta: $k is not text")
            meta[k] = utf8(row[3]) ?: throw bad("meta: $k is not UTF-8")
        }
        fun need(k: String) = meta[k] ?: throw bad("meta: no $k")
        if (need("format") != EdgeM3Contract.INDEX_DB_FORMAT) throw bad("meta: format ${meta["format"]}, not ${EdgeM3Contract.INDEX_DB_FORMAT}")
        val fv = metaInt(need("format_version")) ?: throw bad("meta: format_version ${meta["format_version"]}")
        if (fv > EdgeM3Contract.INDEX_DB_VERSION) throw newer(fv.toString())
        if (fv < EdgeM3Contract.INDEX_DB_VERSION) throw older(fv.toString())
        val newDim = metaInt(need("dim"))?.takeIf { it in 1L..EdgeM3Contract.INDEX_MAX_DIM.toLong() }?.toInt() ?: throw bad("meta: dim ${meta["dim"]}")
        val newDense = need("dense").takeIf { it in EdgeM3Contract.DENSE_STORES } ?: throw bad("meta: dense ${meta["dense"]}")
        val newColbert = need("colbert").takeIf { it in EdgeM3Contract.COLBERT_STORES } ?: throw bad("meta: colbert ${meta["colbert"]}")
        val bundleJson = try { MiniJson.parse(need("bundle")) } catch (e: EdgeM3Exception) { throw bad("meta: bundle is not JSON") }
        if (bundleJson != null && (bundleJson !is Map<*, *> || EdgeM3Contract.INDEX_BUNDLE_KEYS.any { bundleJson[it] !is String })) {
            throw bad("meta: bundle: needs ${EdgeM3Contract.INDEX_BUNDLE_KEYS.joinToString(", ")} (strings)")
        }
        val newBundle = if (bundleJson == null) null else corruptIndex { JsonTree.obj(bundleJson, "$dbFile: meta: bundle") }
        val newBase = need("base")
        if (newBase != "" && newBase != "." && !isBaseName(newBase)) throw bad("meta: base \"$newBase\"")
        val sha = need("base_sha256")
        if ((newBase == "") != (sha == "")) throw bad("meta: base_sha256 \"$sha\" for base \"$newBase\"")
        val gen = metaInt(need("generation")) ?: throw bad("meta: generation ${meta["generation"]}")
        if (newBundle != null && bundleFiles != null) checkBundle(newBundle)
        // The base: kept when the same one is already mapped.
        val b = if (newBase == "") null else if (newBase == baseName && sha == baseSha && base != null) base else {
            val folder = if (newBase == ".") dir else File(dir, newBase)
            val manifest = File(folder, EdgeM3Contract.INDEX_MANIFEST)
            if (!manifest.isFile) throw EdgeM3CorruptIndexException("$dbFile: its base $folder has no ${EdgeM3Contract.INDEX_MANIFEST}")
            try {
                val got = sha256(manifest)
                if (got != sha) throw EdgeM3CorruptIndexException("$dbFile: written for another base ($manifest sha256 ${got.take(12)}..., the database's is ${sha.take(12)}...)")
                EdgeM3Index.open(folder)
            } catch (e: java.io.IOException) {  // a file deleted since: another process's compaction
                throw EdgeM3CorruptIndexException("$folder: unreadable (${e.message})")
            }
        }
        if (b != null) {
            if (b.dim != newDim || b.denseStore != newDense || b.colbertStore != newColbert) {
                throw EdgeM3CorruptIndexException("$dbFile: dim/dense/colbert $newDim/$newDense/$newColbert, its base's are ${b.dim}/${b.denseStore}/${b.colbertStore}")
            }
            val bb = if (b.bundle.isEmpty()) null else b.bundle
            if (!sameModel(bb, newBundle)) throw EdgeM3CorruptIndexException("$dbFile: written for another bundle than its base ${b.dir}")
        }
        val rem = BooleanArray(b?.count ?: 0)
        for (row in d.query("SELECT row FROM removed")) {
            val r = longOf(row[0], "removed.row")
            if (r < 0 || r >= rem.size) throw bad("removed: row $r outside the base's ${rem.size}")
            rem[r.toInt()] = true
        }
        if (b != null && rem.any { it }) {  // a passage is removed whole: every chunk's row or none
            val parts = HashMap<Any, IntArray>()  // id -> (rows, removed rows)
            for (r in 0 until b.count) parts.getOrPut(b.ids[r]) { IntArray(2) }.let { it[0]++; if (rem[r]) it[1]++ }
            if (parts.values.any { it[1] in 1 until it[0] }) {
                throw bad("removed: a base passage is removed in part (some of its chunks' rows)")
            }
        }
        val ps = ArrayList<Stored>()
        // A passage's chunks are 0, 1, ... in consecutive seqs (one transaction wrote them).
        val seen = HashSet<Any>()
        for (row in d.query("SELECT seq, id, chunk, dense, dense_scale, lex_tokens, lex_weights, colbert, colbert_scale, " +
                "CAST(id AS BLOB) FROM passages ORDER BY seq")) {
            if (row[1] is String) row[1] = utf8(row[9]) ?: throw bad("passages: seq ${row[0]}: an id that is not UTF-8")
            val p = Stored.read(row, newDim, newDense, newColbert) { bad(it) }
            val last = ps.lastOrNull()
            val inOrder = if (p.chunk == 0) seen.add(p.id) else last != null && last.id == p.id && last.chunk + 1 == p.chunk
            if (!inOrder) throw bad("passages: id ${show(p.id)} has chunk ${p.chunk} out of order (chunks 0, 1, ... in consecutive seqs)")
            ps.add(p)
        }
        dim = newDim; denseStore = newDense; colbertStore = newColbert; bundle = newBundle
        baseName = newBase; baseSha = sha; generation = gen; base = b; removed = rem
        passages.clear(); passages.addAll(ps)
        rebuildMaps()
    }

    /** A text cell's bytes (`CAST(x AS BLOB)`) as UTF-8, strictly; null when they are not UTF-8. */
    private fun utf8(raw: Any?): String? = try {
        Charsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT).onUnmappableCharacter(CodingErrorAction.REPORT)
            .decode(ByteBuffer.wrap(raw as? ByteArray ?: ByteArray(0))).toString()
    } catch (e: CharacterCodingException) {
        null
    }

    /** A refusal of the database's contents: corrupt_index. */
    private fun bad(what: String) = EdgeM3CorruptIndexException("$dbFile: $what; not a valid edge-m3 index database")

    private fun checkBundle(b: Map<String, Any?>) {
        val files = bundleFiles ?: return
        for (key in listOf("model", "tokenizer")) {
            val file = b["${key}_file"] as? String ?: throw bad("meta: bundle has no ${key}_file")
            val sha = b["${key}_sha256"] as? String ?: throw bad("meta: bundle has no ${key}_sha256")
            if (files[file] != sha) {
                throw EdgeM3Exception("$dir: index built by another bundle ($file sha256 ${sha.take(12)}..., " +
                    "the bundle's is ${files[file]?.take(12) ?: "absent"})")
            }
        }
    }

    /** The id maps and chunk numbers from `base`, `removed` and `passages`. */
    private fun rebuildMaps() {
        baseRowsOf.clear()
        storedOf.clear()
        val b = base
        if (b != null) {
            for (r in 0 until b.count) if (!removed[r]) baseRowsOf.getOrPut(b.ids[r]) { ArrayList() }.add(r)
        }
        for (p in passages) {
            if (baseRowsOf.containsKey(p.id)) throw bad("id ${show(p.id)} is both in the base and added")
            storedOf.getOrPut(p.id) { ArrayList() }.add(p)
        }
        survivors = survivorsOf()
    }

    private fun survivorsOf(): IntArray {
        val b = base ?: return IntArray(0)
        var n = 0
        for (r in 0 until b.count) if (!removed[r]) n++
        val out = IntArray(n)
        var i = 0
        for (r in 0 until b.count) if (!removed[r]) out[i++] = r
        return out
    }

    /** A format-1 folder's first write: its database, base ".", written whole under a temporary name. */
    private fun createOnBase() {
        val b = base ?: throw EdgeM3Exception("$dir: no index here")
        val sha = sha256(File(dir, EdgeM3Contract.INDEX_MANIFEST))
        createDb(dir, driver, b.dim, b.denseStore, b.colbertStore, if (b.bundle.isEmpty()) null else b.bundle, ".", sha)
        try {
            val d = openDb(dbFile)
            db = d
            reload(d)
        } catch (e: IndexDbException) {
            throw readError(e)
        }
    }

    /**
     * After a compaction: `base-*` folders no database names (a kill's leftovers, written but never
     * swapped in) and their half-written temporaries (`.base-<n>.building-*`, `.base-<n>.old-*`),
     * generations up to this one only (a later one may be another process's compaction in
     * progress), and a root base that is no longer the base.
     */
    private fun collectGarbage() {
        val names = dir.list() ?: return
        for (name in names) {
            val f = File(dir, name)
            val temporary = name.startsWith(".") && (name.contains(".building-") || name.contains(".old-"))
            val base = if (temporary) name.substring(1).substringBefore('.') else name
            if (!f.isDirectory || !isBaseName(base) || name == baseName) continue
            val g = metaInt(base.substring(EdgeM3Contract.INDEX_BASE_PREFIX.length)) ?: continue
            if (g <= generation) deleteTree(f)
        }
        if (baseName != ".") deleteRootBase()
    }

    private fun deleteBase(name: String) {
        if (name == ".") deleteRootBase() else if (name != "") deleteTree(File(dir, name))
    }

    /** A root base's files: its index.json first (so it is no longer an index), then what it listed. */
    private fun deleteRootBase() {
        val manifest = File(dir, EdgeM3Contract.INDEX_MANIFEST)
        val listed = HashSet<String>()
        listed.add(EdgeM3Contract.INDEX_IDS)
        listed.addAll(EdgeM3Contract.INDEX_ARRAYS.values)
        if (manifest.isFile) {
            try {
                val files = JsonTree.obj(MiniJson.parse(manifest.readText(Charsets.UTF_8)), EdgeM3Contract.INDEX_MANIFEST)["files"]
                if (files is Map<*, *>) {
                    for (k in files.keys) {
                        if (k is String && !k.contains('/') && k != ".." && !k.startsWith(EdgeM3Contract.INDEX_DB) &&
                            !k.startsWith(EdgeM3Contract.INDEX_BASE_PREFIX)) listed.add(k)
                    }
                }
            } catch (e: EdgeM3Exception) {
                // unreadable: the well-known names below are still removed
            }
            if (!manifest.delete()) throw EdgeM3WriteFailedException("$manifest: cannot delete the old base")
        }
        for (name in listed) File(dir, name).delete()
    }

    private fun deleteTree(f: File) {
        if (f.isDirectory) f.listFiles()?.forEach { deleteTree(it) }
        f.delete()
    }

    // ------------------------------------------------------------------ compaction's folder

    /** The logical rows as a format-1 folder (docs/index-format.md), as Python's Index.save writes it. */
    private fun writeBase(target: File) {
        val b = base
        val s = survivors.size
        val n = s + passages.size
        val dim = dim
        val tmp = File(dir, "." + target.name + ".building-" + java.lang.Long.toHexString(System.nanoTime()))
        try {
            if (target.exists()) deleteTree(target)
            if (!tmp.mkdir()) throw IOException("cannot create $tmp")
            val arrays = LinkedHashMap<String, Any?>()
            val files = java.util.TreeMap<String, Any?>()
            fun put(name: String, dtype: String, shape: List<Long>, fill: (ByteBuffer) -> Unit, bytes: Long) {
                val file = EdgeM3Contract.INDEX_ARRAYS.getValue(name)
                if (bytes > Int.MAX_VALUE) throw EdgeM3Exception("$name: over 2 GiB, more than one mapping holds")
                val buf = ByteBuffer.allocate(bytes.toInt()).order(ByteOrder.LITTLE_ENDIAN)
                fill(buf)
                files[file] = writeFile(File(tmp, file), buf.array())
                arrays[name] = linkedMapOf<String, Any?>("file" to file, "dtype" to dtype, "shape" to shape)
            }
            val int8Dense = denseStore == "int8"
            put("dense", if (int8Dense) "int8" else "float32", listOf(n.toLong(), dim.toLong()), { out ->
                for (i in 0 until s) {
                    val r = survivors[i]
                    if (int8Dense) for (k in 0 until dim) out.put(b!!.dense.get(r * dim + k))
                    else for (k in 0 until dim) out.putFloat(b!!.dense.getFloat((r * dim + k) * 4))
                }
                for (p in passages) {
                    if (int8Dense) out.put(p.denseCodes!!) else for (x in p.denseF32!!) out.putFloat(x)
                }
            }, n.toLong() * dim * (if (int8Dense) 1 else 4))
            if (int8Dense) {
                put("dense_scale", "float32", listOf(n.toLong()), { out ->
                    for (i in 0 until s) out.putFloat(b!!.denseScale!!.get(survivors[i]))
                    for (p in passages) out.putFloat(p.denseScale)
                }, n * 4L)
            }
            // Postings: every logical row's (token, weight) in ascending token, rows ascending within a token.
            val rowTokens = arrayOfNulls<IntArray>(n)
            val rowWeights = arrayOfNulls<FloatArray>(n)
            if (s > 0) {
                val logical = IntArray(b!!.count) { -1 }
                for (i in 0 until s) logical[survivors[i]] = i
                val counts = IntArray(s)
                val t = b.sparseTokens.limit()
                for (p in 0 until b.sparseRows.limit()) { val l = logical[b.sparseRows.get(p)]; if (l >= 0) counts[l]++ }
                for (i in 0 until s) { rowTokens[i] = IntArray(counts[i]); rowWeights[i] = FloatArray(counts[i]) }
                val fill = IntArray(s)
                for (ti in 0 until t) {
                    val tok = b.sparseTokens.get(ti)
                    for (p in b.sparseOffsets.get(ti).toInt() until b.sparseOffsets.get(ti + 1).toInt()) {
                        val l = logical[b.sparseRows.get(p)]
                        if (l < 0) continue
                        rowTokens[l]!![fill[l]] = tok
                        rowWeights[l]!![fill[l]++] = b.sparseWeights.get(p)
                    }
                }
            }
            for ((j, p) in passages.withIndex()) { rowTokens[s + j] = p.lexical.ids; rowWeights[s + j] = p.lexical.weights }
            var total = 0
            for (r in 0 until n) total += rowTokens[r]!!.size
            val all = IntArray(total)
            var at = 0
            for (r in 0 until n) for (x in rowTokens[r]!!) all[at++] = x
            all.sort()
            var distinct = 0
            for (i in 0 until total) if (i == 0 || all[i] != all[i - 1]) all[distinct++] = all[i]
            val tokens = all.copyOf(distinct)
            val tokenCounts = IntArray(distinct)
            for (r in 0 until n) for (x in rowTokens[r]!!) tokenCounts[java.util.Arrays.binarySearch(tokens, x)]++
            val offsets = LongArray(distinct + 1)
            for (i in 0 until distinct) offsets[i + 1] = offsets[i] + tokenCounts[i]
            val postRows = IntArray(total)
            val postWeights = FloatArray(total)
            val next = LongArray(distinct) { offsets[it] }
            for (r in 0 until n) {
                val ts = rowTokens[r]!!
                val ws = rowWeights[r]!!
                for (i in ts.indices) {
                    val ti = java.util.Arrays.binarySearch(tokens, ts[i])
                    val slot = next[ti]++.toInt()
                    postRows[slot] = r
                    postWeights[slot] = ws[i]
                }
            }
            put("sparse_tokens", "int32", listOf(distinct.toLong()), { out -> for (x in tokens) out.putInt(x) }, distinct * 4L)
            put("sparse_offsets", "int64", listOf(distinct + 1L), { out -> for (x in offsets) out.putLong(x) }, (distinct + 1) * 8L)
            put("sparse_rows", "int32", listOf(total.toLong()), { out -> for (x in postRows) out.putInt(x) }, total * 4L)
            put(EdgeM3Contract.INDEX_POSTING_WEIGHTS, "float32", listOf(total.toLong()), { out -> for (x in postWeights) out.putFloat(x) }, total * 4L)
            if (colbertStore != "none") {
                val int8 = colbertStore == "int8"
                val co = LongArray(n + 1)
                for (i in 0 until n) {
                    val m = if (i < s) {
                        val r = survivors[i]
                        val bo = b!!.colbertOffsets!!
                        bo.get(r + 1) - bo.get(r)
                    } else passages[i - s].colbertRows.toLong()
                    co[i + 1] = co[i] + m
                }
                val v = co[n]
                put("colbert_offsets", "int64", listOf(n + 1L), { out -> for (x in co) out.putLong(x) }, (n + 1) * 8L)
                put("colbert", if (int8) "int8" else "float16", listOf(v, dim.toLong()), { out ->
                    for (i in 0 until s) {
                        val r = survivors[i]
                        val bo = b!!.colbertOffsets!!
                        val from = bo.get(r).toInt() * dim
                        val to = bo.get(r + 1).toInt() * dim
                        if (int8) for (x in from until to) out.put(b.colbert!!.get(x))
                        else for (x in from until to) out.putShort(b.colbert!!.getShort(x * 2))
                    }
                    for (p in passages) if (int8) out.put(p.colbertCodes!!) else for (x in p.colbertHalf!!) out.putShort(x)
                }, v * dim * (if (int8) 1 else 2))
                if (int8) {
                    put("colbert_scale", "float32", listOf(v), { out ->
                        for (i in 0 until s) {
                            val r = survivors[i]
                            val bo = b!!.colbertOffsets!!
                            for (x in bo.get(r).toInt() until bo.get(r + 1).toInt()) out.putFloat(b.colbertScale!!.get(x))
                        }
                        for (p in passages) for (x in p.colbertScale!!) out.putFloat(x)
                    }, v * 4)
                }
            }
            val ids = ArrayList<Any>(n)
            for (i in 0 until s) ids.add(b!!.ids[survivors[i]])
            for (p in passages) ids.add(p.id)
            files[EdgeM3Contract.INDEX_IDS] = writeFile(File(tmp, EdgeM3Contract.INDEX_IDS),
                PyJson.dumps(ids, indent = -1, asciiOnly = false).toByteArray(Charsets.UTF_8))
            val fmt = SimpleDateFormat("yyyy-MM-dd'T'HH:mm:ss'Z'", Locale.ROOT)
            fmt.timeZone = TimeZone.getTimeZone("UTC")
            val manifest = linkedMapOf<String, Any?>(
                "format" to EdgeM3Contract.INDEX_FORMAT,
                "format_version" to EdgeM3Contract.INDEX_FORMAT_VERSION.toLong(),
                "edge_m3_version" to EDGE_M3_VERSION,
                "created" to fmt.format(Date()),
                "bundle" to bundle?.let { identity(it) },
                "count" to n.toLong(),
                "dim" to dim.toLong(),
                "dense" to denseStore,
                "colbert" to colbertStore,
                "arrays" to arrays,
                "files" to files
            )
            writeFile(File(tmp, EdgeM3Contract.INDEX_MANIFEST), (PyJson.dumps(manifest, indent = 1, asciiOnly = true) + "\n").toByteArray(Charsets.UTF_8))
            if (!tmp.renameTo(target)) throw IOException("cannot rename $tmp to $target")
        } catch (e: IOException) {
            deleteTree(tmp)
            throw EdgeM3WriteFailedException("$target: cannot write the compacted base (${e.message}); nothing was changed")
        } catch (e: RuntimeException) {
            deleteTree(tmp)
            throw e
        }
    }

    companion object {
        /** The edge-m3 release this kit belongs to (index.json's `edge_m3_version`). */
        const val EDGE_M3_VERSION = "0.1.0"

        /**
         * Opens an index folder: its `index.sqlite` over its base, or a format-1 folder (its first
         * write creates the database). With `bundleFiles` (the bundle's manifest.json `files`:
         * name -> sha256) an index built by another bundle is refused.
         */
        fun open(dir: File, driver: IndexDbDriver, bundleFiles: Map<String, String>? = null): EdgeM3WritableIndex {
            val index = EdgeM3WritableIndex(dir, driver, bundleFiles)
            try {
                if (index.dbFile.isFile) {
                    index.refresh()
                } else {
                    val b = EdgeM3Index.open(dir, bundleFiles)
                    index.base = b
                    index.baseName = "."
                    index.dim = b.dim
                    index.denseStore = b.denseStore
                    index.colbertStore = b.colbertStore
                    index.bundle = if (b.bundle.isEmpty()) null else b.bundle
                    index.removed = BooleanArray(b.count)
                    index.rebuildMaps()
                }
            } catch (e: Exception) {
                index.close()
                throw e
            }
            return index
        }

        /** A new index with no base in `dir` (created if missing; it must hold no index). */
        fun create(dir: File, dim: Int, dense: String, colbert: String, bundle: Map<String, Any?>?,
                   driver: IndexDbDriver): EdgeM3WritableIndex {
            if (dim < 1 || dim > EdgeM3Contract.INDEX_MAX_DIM) throw EdgeM3Exception("dim: must be from 1 to ${EdgeM3Contract.INDEX_MAX_DIM}, got $dim")
            if (dense !in EdgeM3Contract.DENSE_STORES) throw EdgeM3Exception("dense store $dense unknown")
            if (colbert !in EdgeM3Contract.COLBERT_STORES) throw EdgeM3Exception("colbert store $colbert unknown")
            if (File(dir, EdgeM3Contract.INDEX_DB).exists() || File(dir, EdgeM3Contract.INDEX_MANIFEST).exists()) {
                throw EdgeM3Exception("$dir: already holds an index")
            }
            if (!dir.isDirectory && !dir.mkdirs()) throw EdgeM3WriteFailedException("$dir: cannot create the folder")
            createDb(dir, driver, dim, dense, colbert, bundle?.let { identity(it) }, "", "")
            return open(dir, driver)
        }

        /** index.json's `bundle` as Python's BundleIdentity.to_json writes it. */
        private fun identity(b: Map<String, Any?>): Map<String, Any?> {
            val out = LinkedHashMap<String, Any?>()
            for (k in EdgeM3Contract.INDEX_BUNDLE_KEYS) {
                out[k] = b[k] as? String ?: throw EdgeM3Exception("bundle: needs $k (a string)")
            }
            out["quant"] = (b["quant"] ?: "").toString()
            out["path"] = (b["path"] ?: "").toString()
            return out
        }

        /** The database file written whole under a temporary name, then renamed into place. */
        private fun createDb(dir: File, driver: IndexDbDriver, dim: Int, dense: String, colbert: String,
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

        /** Two bundle identities (index.json's `bundle`) name the same model and tokenizer files and sha256s. */
        private fun sameModel(a: Map<String, Any?>?, b: Map<String, Any?>?): Boolean {
            if (a == null || b == null) return a == null && b == null
            return EdgeM3Contract.INDEX_BUNDLE_KEYS.all { a[it] == b[it] && a[it] is String }
        }

        private fun setMeta(d: IndexDb, key: String, value: String) =
            d.execute("UPDATE meta SET value = ? WHERE key = ?", listOf(value, key))

        /** A meta integer (spec.INDEX_DB_INT_MAX): ASCII digits only (toLongOrNull alone takes a sign
         *  and other scripts' digits), at most 2^63 - 1; else null. */
        private fun metaInt(v: String): Long? = if (v.isNotEmpty() && v.all { it in '0'..'9' }) v.toLongOrNull() else null

        /** A base folder's name: INDEX_BASE_PREFIX + n, n a meta integer. */
        private fun isBaseName(name: String): Boolean {
            val p = EdgeM3Contract.INDEX_BASE_PREFIX
            return name.startsWith(p) && metaInt(name.substring(p.length)) != null
        }

        /** An id as the index keys it: a Long (Int widened) or a String. */
        internal fun key(id: Any): Any = when (id) {
            is String -> id
            is Long -> id
            is Int -> id.toLong()
            is Short -> id.toLong()
            is Byte -> id.toLong()
            else -> throw EdgeM3Exception("id $id: must be an integer or a string")
        }

        internal fun show(id: Any): String = if (id is String) "\"$id\"" else id.toString()

        internal fun longOf(x: Any?, what: String): Long = when (x) {
            is Long -> x
            is Int -> x.toLong()
            else -> throw IndexDbException(IndexDbException.CORRUPT, "$what: not an integer")
        }

        /** Writes `bytes` to `f`, synced; its `{sha256, size}` entry. */
        private fun writeFile(f: File, bytes: ByteArray): Map<String, Any?> {
            FileOutputStream(f).use { out ->
                out.write(bytes)
                out.fd.sync()
            }
            val digest = MessageDigest.getInstance("SHA-256")
            digest.update(bytes)
            return linkedMapOf("sha256" to ModelCheck.hex(digest), "size" to bytes.size.toLong())
        }

        private fun sha256(f: File): String {
            val digest = MessageDigest.getInstance("SHA-256")
            digest.update(f.readBytes())
            return ModelCheck.hex(digest)
        }
    }
}

/**
 * A passage as the database (and a format-1 base) stores it: dense float32 or int8 codes with a
 * float32 scale, lexical tokens ascending with float32 weights, ColBERT float16 or int8 codes with
 * per-vector scales. Quantized once, when added (as Python's `_quantize_rows`), never again.
 */
internal class Stored(
    val id: Any,
    /** The chunk number in its passage (the `chunk` column). */
    val chunk: Int,
    val denseF32: FloatArray?,
    val denseCodes: ByteArray?,
    val denseScale: Float,
    val lexical: Retrieval.Lexical,
    val colbertRows: Int,
    val colbertHalf: ShortArray?,
    val colbertCodes: ByteArray?,
    val colbertScale: FloatArray?
) {
    /** dense(q, this) by Score arithmetic: float32 values, or int8 codes then * scale. */
    fun dense(q: FloatArray): Double {
        var acc = 0.0
        val f = denseF32
        if (f != null) {
            for (k in q.indices) acc += q[k].toDouble() * f[k].toDouble()
            return acc
        }
        val c = denseCodes!!
        for (k in q.indices) acc += q[k].toDouble() * c[k].toDouble()
        return acc * denseScale.toDouble()
    }

    /** colbert(Q, this): stored fp16 widened exactly, or int8 codes (dot then * scale). */
    fun colbert(qs: Array<FloatArray>, dim: Int): Double {
        if (qs.isEmpty() || colbertRows == 0) return 0.0
        var total = 0.0
        val half = colbertHalf
        for (q in qs) {
            var best = Double.NEGATIVE_INFINITY
            for (v in 0 until colbertRows) {
                var acc = 0.0
                val b = v * dim
                if (half != null) {
                    for (k in 0 until dim) acc += q[k].toDouble() * EdgeM3Index.HALF[half[b + k].toInt() and 0xffff].toDouble()
                } else {
                    val c = colbertCodes!!
                    for (k in 0 until dim) acc += q[k].toDouble() * c[b + k].toDouble()
                    acc *= colbertScale!![v].toDouble()
                }
                if (acc > best) best = acc
            }
            total += best
        }
        return total / qs.size
    }

    /** The `passages` columns after `seq`, little-endian blobs (spec.INDEX_DB_SCHEMA). */
    fun columns(): List<Any?> {
        val dense = if (denseF32 != null) floats(denseF32) else denseCodes!!.copyOf()
        val denseScaleBlob = if (denseF32 != null) null else floats(floatArrayOf(denseScale))
        val tokens = ByteBuffer.allocate(lexical.size * 4).order(ByteOrder.LITTLE_ENDIAN)
        for (t in lexical.ids) tokens.putInt(t)
        val colbert: ByteArray? = when {
            colbertHalf != null -> ByteBuffer.allocate(colbertHalf.size * 2).order(ByteOrder.LITTLE_ENDIAN).also { b ->
                for (x in colbertHalf) b.putShort(x)
            }.array()
            colbertCodes != null -> colbertCodes.copyOf()
            else -> null
        }
        return listOf(id, chunk.toLong(), dense, denseScaleBlob, tokens.array(), floats(lexical.weights), colbert, colbertScale?.let { floats(it) })
    }

    companion object {
        private fun floats(x: FloatArray): ByteArray {
            val b = ByteBuffer.allocate(x.size * 4).order(ByteOrder.LITTLE_ENDIAN)
            for (v in x) b.putFloat(v)
            return b.array()
        }

        private fun finite(x: Float) = !x.isNaN() && !x.isInfinite()

        /** A passage's pipeline outputs checked (as Python's Index.add) and put in stored form. */
        fun of(id: Any, chunk: Int, v: Retrieval.Vectors, dim: Int, denseStore: String, colbertStore: String): Stored {
            val dense = v.dense ?: throw EdgeM3Exception("id ${EdgeM3WritableIndex.show(id)}: no dense_vecs")
            if (dense.size != dim || !dense.all { finite(it) }) {
                throw EdgeM3Exception("id ${EdgeM3WritableIndex.show(id)}: dense_vecs of ${dense.size} values (want $dim, finite)")
            }
            val lex = v.lexical ?: Retrieval.Lexical(IntArray(0), FloatArray(0))
            if (lex.weights.any { !(it > 0f) || !finite(it) }) {
                throw EdgeM3Exception("id ${EdgeM3WritableIndex.show(id)}: lexical weights must be finite and > 0")
            }
            val lexical = Retrieval.Lexical(lex.ids.copyOf(), lex.weights.copyOf())
            var rows = 0
            var half: ShortArray? = null
            var codes: ByteArray? = null
            var scales: FloatArray? = null
            if (colbertStore != "none") {
                val col = v.colbert ?: throw EdgeM3Exception("id ${EdgeM3WritableIndex.show(id)}: no colbert_vecs (the index stores ColBERT)")
                if (col.any { it.size != dim || !it.all { x -> finite(x) } }) {
                    throw EdgeM3Exception("id ${EdgeM3WritableIndex.show(id)}: colbert_vecs rows must have $dim finite values")
                }
                rows = col.size
                if (colbertStore == "int8") {
                    codes = ByteArray(rows * dim)
                    scales = FloatArray(rows)
                    for (r in 0 until rows) scales[r] = quantize(col[r], codes, r * dim)
                } else {
                    half = ShortArray(rows * dim)
                    for (r in 0 until rows) for (k in 0 until dim) half[r * dim + k] = Half.fromFloat(col[r][k])
                }
            }
            return if (denseStore == "int8") {
                val c = ByteArray(dim)
                val s = quantize(dense, c, 0)
                Stored(id, chunk, null, c, s, lexical, rows, half, codes, scales)
            } else {
                Stored(id, chunk, dense.copyOf(), null, 0f, lexical, rows, half, codes, scales)
            }
        }

        /** edge_m3/retrieval/index.py `_quantize_rows` for one row: scale = max|x| / 127 (float32;
         *  1.0 for a zero row), code = round-half-even(x / scale) (float32) clipped to [-127, 127]. */
        fun quantize(x: FloatArray, out: ByteArray, at: Int): Float {
            var peak = 0f
            for (v in x) { val a = Math.abs(v); if (a > peak) peak = a }
            val scale = if (peak > 0f) peak / 127f else 1f
            for (k in x.indices) {
                val c = Math.rint((x[k] / scale).toDouble())
                out[at + k] = Math.max(-127.0, Math.min(127.0, c)).toInt().toByte()
            }
            return scale
        }

        /** A `passages` row (seq, id, chunk, dense, dense_scale, lex_tokens, lex_weights, colbert, colbert_scale), checked. */
        fun read(row: Array<Any?>, dim: Int, denseStore: String, colbertStore: String, bad: (String) -> EdgeM3Exception): Stored {
            val id: Any = when (val x = row[1]) {
                is String -> x
                is Long -> x
                is Int -> x.toLong()
                else -> throw bad("passages: an id that is neither an integer nor text")
            }
            val w = "passages: id ${EdgeM3WritableIndex.show(id)}"
            val chunk = (row[2] as? Long)?.takeIf { it >= 0 && it <= Int.MAX_VALUE }?.toInt()
                ?: throw bad("$w: chunk ${row[2]} is not an integer from 0")
            fun blob(i: Int, name: String): ByteArray? = when (val x = row[i]) {
                null -> null
                is ByteArray -> x
                else -> throw bad("$w: $name is not a blob")
            }
            fun le(b: ByteArray) = ByteBuffer.wrap(b).order(ByteOrder.LITTLE_ENDIAN)
            val dense = blob(3, "dense") ?: ByteArray(0)
            val denseScale = blob(4, "dense_scale")
            var denseF32: FloatArray? = null
            var denseCodes: ByteArray? = null
            var scale = 0f
            if (denseStore == "int8") {
                if (dense.size != dim || denseScale == null || denseScale.size != 4) throw bad("$w: dense of ${dense.size} bytes (want $dim int8 and a 4-byte scale)")
                denseCodes = dense
                scale = le(denseScale).getFloat(0)
                if (!(scale > 0f) || !finite(scale)) throw bad("$w: dense_scale $scale (want finite and > 0)")
            } else {
                if (denseScale != null) throw bad("$w: a dense_scale in a float32 index")
                if (dense.size != dim * 4) throw bad("$w: dense of ${dense.size} bytes (want ${dim * 4})")
                val f = le(dense).asFloatBuffer()
                denseF32 = FloatArray(dim) { f.get(it) }
                if (!denseF32.all { finite(it) }) throw bad("$w: a dense value that is not finite")
            }
            val tokens = blob(5, "lex_tokens") ?: ByteArray(0)
            val weights = blob(6, "lex_weights") ?: ByteArray(0)
            if (tokens.size % 4 != 0 || tokens.size != weights.size) throw bad("$w: lex_tokens/lex_weights lengths")
            val tb = le(tokens).asIntBuffer()
            val wb = le(weights).asFloatBuffer()
            val ids = IntArray(tokens.size / 4) { tb.get(it) }
            val ws = FloatArray(ids.size) { wb.get(it) }
            for (i in ids.indices) {
                if ((i > 0 && ids[i - 1] >= ids[i]) || !(ws[i] > 0f) || !finite(ws[i])) throw bad("$w: lexical tokens not ascending or weights not finite and > 0")
            }
            val lexical = Retrieval.Lexical(ids, ws)
            val col = blob(7, "colbert")
            val colScale = blob(8, "colbert_scale")
            var rows = 0
            var half: ShortArray? = null
            var codes: ByteArray? = null
            var scales: FloatArray? = null
            when (colbertStore) {
                "none" -> if (col != null || colScale != null) throw bad("$w: ColBERT vectors in an index without them")
                "fp16" -> {
                    val c = col ?: throw bad("$w: no colbert in an fp16 ColBERT index")
                    if (colScale != null) throw bad("$w: a colbert_scale in an fp16 ColBERT index")
                    if (c.size % (2 * dim) != 0) throw bad("$w: colbert of ${c.size} bytes (fp16, dim $dim)")
                    rows = c.size / (2 * dim)
                    val sb = le(c).asShortBuffer()
                    half = ShortArray(rows * dim) { sb.get(it) }
                    if (half.any { (it.toInt() and 0x7c00) == 0x7c00 }) throw bad("$w: a colbert value that is not finite")
                }
                else -> {
                    val c = col ?: throw bad("$w: no colbert in an int8 ColBERT index")
                    val sc = colScale ?: throw bad("$w: no colbert_scale in an int8 ColBERT index")
                    if (c.size % dim != 0 || sc.size != c.size / dim * 4) throw bad("$w: colbert of ${c.size} bytes, scales of ${sc.size} (int8, dim $dim)")
                    rows = c.size / dim
                    codes = c
                    val fb = le(sc).asFloatBuffer()
                    scales = FloatArray(rows) { fb.get(it) }
                    if (scales.any { !(it > 0f) || !finite(it) }) throw bad("$w: a colbert_scale not finite and > 0")
                }
            }
            return Stored(id, chunk, denseF32, denseCodes, scale, lexical, rows, half, codes, scales)
        }
    }
}

/** float32 -> float16 bits, round to nearest even (as numpy's astype(float16)); no Float16 API in Kotlin 1.3. */
internal object Half {
    fun fromFloat(f: Float): Short {
        val bits = java.lang.Float.floatToRawIntBits(f)
        val sign = (bits ushr 16) and 0x8000
        val abs = bits and 0x7fffffff
        if (abs >= 0x7f800000) return (sign or (if (abs > 0x7f800000) 0x7e00 else 0x7c00)).toShort()  // NaN, inf
        if (abs >= 0x477ff000) return (sign or 0x7c00).toShort()  // >= 65520: rounds to inf
        if (abs < 0x38800000) {  // below 2^-14: a subnormal half, value * 2^24 rounded half-even (exact in double)
            val m = Math.rint(java.lang.Float.intBitsToFloat(abs).toDouble() * 16777216.0).toInt()
            return (sign or m).toShort()
        }
        val e = (abs ushr 23) - 127 + 15
        val mant = abs and 0x7fffff
        var h = (e shl 10) or (mant ushr 13)
        val rest = mant and 0x1fff
        if (rest > 0x1000 || (rest == 0x1000 && (h and 1) == 1)) h++  // a carry into the exponent is right
        return (sign or h).toShort()
    }
}

/** JSON as Python's json.dumps writes it (indent >= 0: json.dumps(x, indent=n); -1: one line, ", " and ": "). */
internal object PyJson {
    fun dumps(x: Any?, indent: Int, asciiOnly: Boolean): String {
        val sb = StringBuilder()
        write(sb, x, indent, 0, asciiOnly)
        return sb.toString()
    }

    private fun write(sb: StringBuilder, x: Any?, indent: Int, level: Int, ascii: Boolean) {
        when (x) {
            null -> sb.append("null")
            is Boolean -> sb.append(if (x) "true" else "false")
            is Long, is Int -> sb.append(x.toString())
            is String -> string(sb, x, ascii)
            is Map<*, *> -> {
                if (x.isEmpty()) { sb.append("{}"); return }
                sb.append('{')
                var first = true
                for ((k, v) in x) {
                    if (!first) sb.append(',')
                    first = false
                    newline(sb, indent, level + 1)
                    string(sb, k as String, ascii)
                    sb.append(": ")
                    write(sb, v, indent, level + 1, ascii)
                }
                newline(sb, indent, level)
                sb.append('}')
            }
            is List<*> -> {
                if (x.isEmpty()) { sb.append("[]"); return }
                sb.append('[')
                var first = true
                for (v in x) {
                    if (!first) sb.append(',')
                    first = false
                    newline(sb, indent, level + 1)
                    write(sb, v, indent, level + 1, ascii)
                }
                newline(sb, indent, level)
                sb.append(']')
            }
            else -> throw EdgeM3Exception("JSON: cannot write a ${x.javaClass.simpleName}")
        }
    }

    private fun newline(sb: StringBuilder, indent: Int, level: Int) {
        if (indent < 0) {
            if (sb.last() == ',') sb.append(' ')
            return
        }
        sb.append('\n')
        for (i in 0 until indent * level) sb.append(' ')
    }

    private fun string(sb: StringBuilder, s: String, ascii: Boolean) {
        sb.append('"')
        for (c in s) {
            when {
                c == '"' -> sb.append("\\\"")
                c == '\\' -> sb.append("\\\\")
                c == '\n' -> sb.append("\\n")
                c == '\r' -> sb.append("\\r")
                c == '\t' -> sb.append("\\t")
                c == '\b' -> sb.append("\\b")
                c == '\u000c' -> sb.append("\\f")
                c.code < 0x20 || (ascii && c.code > 0x7e) -> sb.append(String.format("\\u%04x", c.code))
                else -> sb.append(c)
            }
        }
        sb.append('"')
    }
}
