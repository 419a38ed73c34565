package dev.edgem3

import java.io.Closeable
import java.io.File

/**
 * An index the app writes (docs/index-format.md, "The writable index"): a format-1 base folder,
 * memory-mapped by EdgeM3Index and never written in place, plus `index.sqlite`, which holds the
 * passages added since (in stored form, one row per chunk) and the base rows removed. `search`
 * returns the hits and float64 score bits a fresh format-1 build of the surviving passages in
 * logical-row order would (the base's surviving rows in order, then the database's rows by seq;
 * rows sharing an id are one passage's chunks: docs/index-format.md, "Passages and chunks"), as Python's
 * `edge_m3.retrieval.writable.WritableIndex` and the Swift kit do.
 *
 * Three parts: IndexStore (the SQLite file through `driver`, validated by IndexDbRules),
 * IndexSegments (the base plus the delta, searched through EdgeM3Index's public API) and
 * IndexCompaction (a new base folder). This class is the public API, the same operations as
 * Python's and Swift's: open, create, close, count, rows, contains, ids, add, addAll, update,
 * remove, removeAll, compact, search (vectors or a text).
 *
 * Every write is one SQLite transaction (WAL); a second writer waits INDEX_DB_BUSY_MS then gets
 * EdgeM3IndexBusyException. Each call first checks `PRAGMA data_version` and reloads when another
 * connection committed. Thread-safe (calls are serialised); blocking: call it off the main thread.
 * `driver` is the SQLite binding: AndroidIndexDbDriver in an app, JdbcIndexDbDriver on a desktop JVM.
 */
class EdgeM3WritableIndex private constructor(
    /** The index folder. */
    val dir: File,
    driver: IndexDbDriver,
    bundleFiles: Map<String, String>?
) : Closeable {
    /**
     * One search result: the logical row, its passage's id and chunk number, the exact score. The id
     * is read with the row under one lock: a later call reloads what another writer (a thread, or
     * another process) committed and renumbers the rows, so `id(row)` after it may name another passage.
     */
    class Hit(val row: Int, val id: PassageId, val chunk: Int, val score: Double) {
        override fun toString(): String = "Hit(row=$row, id=$id, chunk=$chunk, score=$score)"
    }

    private val store = IndexStore(dir, driver, bundleFiles)
    private val segments = IndexSegments()
    private val compaction = IndexCompaction(dir)
    private var closed = false

    /** Vector width: the bundle's hidden size. */
    val dim: Int get() = segments.dim
    /** `float32` or `int8`. */
    val denseStore: String get() = segments.denseStore
    /** `fp16`, `int8` or `none`. */
    val colbertStore: String get() = segments.colbertStore
    /** The bundle identity the index records (index.json's `bundle`), or null. */
    val bundle: Map<String, Any?>? get() = segments.bundle
    /** Embeds `add(id, text)`, `update(id, text)` and `search(text, ...)`: the bundle's own embedder. */
    var embedder: EdgeM3Embedder? = null

    // ------------------------------------------------------------------ reading

    /** Passages (ids; a passage of n chunks is n logical rows). */
    val count: Int
        @Synchronized get() {
            refresh()
            return segments.count
        }

    /** Logical rows (chunks): what a hit's `row` counts. */
    val rows: Int
        @Synchronized get() {
            refresh()
            return segments.rows
        }

    @Synchronized
    fun contains(id: PassageId): Boolean {
        refresh()
        return segments.present(id)
    }

    /** Every passage's id once, in logical row order (Python's `ids()`). */
    @Synchronized
    fun ids(): List<PassageId> {
        refresh()
        return segments.ids()
    }

    /** The passage id of a logical row (a hit's `row`). */
    @Synchronized
    fun id(row: Int): PassageId = segments.id(row)

    /** A logical row's chunk number in its passage. */
    @Synchronized
    fun chunk(row: Int): Int = segments.chunk(row)

    fun search(query: Embedding, k: Int, mode: String, weights: DoubleArray = Retrieval.DEFAULT_WEIGHTS,
               chunks: Boolean = false): List<Hit> =
        search(Retrieval.Vectors.of(query), k, mode, weights, chunks)

    /** `text` embedded by `embedder` (one query, as `EdgeM3Embedder.embedBlocking`), then searched;
     *  no embedder: EdgeM3Exception, nothing searched. */
    fun search(text: String, k: Int, mode: String, weights: DoubleArray = Retrieval.DEFAULT_WEIGHTS,
               chunks: Boolean = false): List<Hit> {
        val e = embedder ?: throw EdgeM3Exception("search(text): set `embedder` (the index's bundle) first")
        return search(Retrieval.Vectors.of(e.embedBlocking(text)), k, mode, weights, chunks)
    }

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
        return Ranking.passageRows(k, segments.maxChunks(), chunks, { segments.rowSearch(query, it, mode, weights) }, ::id)
            .map { Hit(it.row, id(it.row), chunk(it.row), it.score) }
    }

    // ------------------------------------------------------------------ writing

    /**
     * Appends the passage `text`, split into chunks (`EdgeM3Tokenizer.encodeChunks`: windows of
     * the largest signature, overlapping by CHUNK_OVERLAP_PERCENT) each embedded by `embedder`:
     * the last logical rows. An id already present: EdgeM3DuplicateIdException.
     */
    fun add(id: PassageId, text: String) = add(id, embedChunks(text))

    /** Appends one passage of one chunk (the last logical row). */
    fun add(id: PassageId, outputs: Retrieval.Vectors) = add(id, listOf(outputs))

    /** Appends one passage of `chunks.size` chunks, in chunk order (an empty list is refused). */
    fun add(id: PassageId, chunks: List<Retrieval.Vectors>) = addAll(listOf(Pair(id, chunks)))

    /** Appends passages of one chunk each, in one transaction: all or nothing. */
    fun addAll(items: List<Pair<PassageId, Retrieval.Vectors>>) = addAll(items.map { Pair(it.first, listOf(it.second)) })

    /** Appends passages (each its list of chunks) in one transaction: all or nothing. */
    @JvmName("addAllChunks")
    @Synchronized
    fun addAll(items: List<Pair<PassageId, List<Retrieval.Vectors>>>) {
        val seen = HashSet<PassageId>()
        for ((id, _) in items) if (!seen.add(id)) throw EdgeM3DuplicateIdException("id ${id.show()}: given twice in one batch")
        // Checked before anything is written (a format-1 folder gets no database for a refused
        // write), and again under the write lock, after any other writer's commit.
        fun stage(): List<Stored> {
            val stored = items.flatMap { (id, chunks) -> stored(id, chunks) }
            for ((id, _) in items) {
                if (segments.present(id)) throw EdgeM3DuplicateIdException("id ${id.show()}: already in the index (update it, or remove it first)")
            }
            return stored
        }
        refresh()
        stage()
        write {
            val stored = stage()
            for (p in stored) store.insert(p)
            val apply: () -> Unit = { for (p in stored) segments.append(p) }
            apply
        }
    }

    /** Replaces the passage of `id` by the chunks of `text` (as `add(id, text)`), in one transaction. */
    fun update(id: PassageId, text: String) = update(id, embedChunks(text))

    /** Replaces the passage of `id` by one chunk. */
    fun update(id: PassageId, outputs: Retrieval.Vectors) = update(id, listOf(outputs))

    /** Replaces every chunk of `id` by `chunks` (they become the last logical rows), in one transaction. */
    @Synchronized
    fun update(id: PassageId, chunks: List<Retrieval.Vectors>) {
        refresh()
        stored(id, chunks)
        if (!segments.present(id)) throw EdgeM3UnknownIdException("id ${id.show()}: not in the index")
        write {
            val ps = stored(id, chunks)
            val undo = delete(id)
            for (p in ps) store.insert(p)
            val apply: () -> Unit = { undo(); for (p in ps) segments.append(p) }
            apply
        }
    }

    /** Removes the passage of `id`, every chunk: its base rows get tombstones, its database rows are deleted. */
    @Synchronized
    fun remove(id: PassageId) {
        refresh()
        if (!segments.present(id)) throw EdgeM3UnknownIdException("id ${id.show()}: not in the index")
        write { delete(id) }
    }

    /**
     * Removes passages in one transaction, all or nothing (Python's `remove_many`): an id not in
     * the index, or one given twice, is refused (EdgeM3UnknownIdException) and nothing is removed.
     */
    @Synchronized
    fun removeAll(ids: List<PassageId>) {
        refresh()
        for (id in ids) if (!segments.present(id)) throw EdgeM3UnknownIdException("id ${id.show()}: not in the index")
        if (ids.toSet().size != ids.size) throw EdgeM3UnknownIdException("an id is removed twice in one batch")
        write {
            val undo = ids.map { delete(it) }
            val apply: () -> Unit = { for (u in undo) u() }
            apply
        }
    }

    /** A passage's chunks checked and in stored form, numbered 0, 1, ... */
    private fun stored(id: PassageId, chunks: List<Retrieval.Vectors>): List<Stored> {
        if (chunks.isEmpty()) throw EdgeM3Exception("id ${id.show()}: no chunks (a passage needs at least one)")
        return chunks.mapIndexed { c, v -> Stored.of(id, c, v, dim, denseStore, colbertStore) }
    }

    /** Stages `id`'s deletion (every chunk) in the open transaction; returns the in-memory change for after the commit. */
    private fun delete(id: PassageId): () -> Unit {
        val rows = segments.baseRows(id)
        if (rows != null) {
            store.tombstone(rows)
            return { segments.removeBase(id) }
        }
        if (segments.stored(id) == null) throw EdgeM3UnknownIdException("id ${id.show()}: not in the index")
        store.deletePassage(id)
        return { segments.removeStored(id) }
    }

    /**
     * Folds the database into a new format-1 base, `base-<generation+1>/` (written whole, then
     * renamed), then in one transaction empties `passages` and `removed` and points `meta` at it;
     * only then is the old base deleted. A kill leaves the old state or the new one.
     */
    @Synchronized
    fun compact() {
        refresh()
        if (!store.hasDb) return  // never written: the format-1 base is already compact
        write {
            val g = store.generation + 1
            val name = EdgeM3Contract.INDEX_BASE_PREFIX + g
            val target = File(dir, name)
            compaction.writeBase(target, segments)
            val sha = IndexCompaction.sha256(File(target, EdgeM3Contract.INDEX_MANIFEST))
            store.swapBase(name, sha, g)
            val apply: () -> Unit = {
                val oldName = store.baseName
                store.adoptBase(name, sha, g)
                val b = EdgeM3Index.open(target, verifySha256 = false)
                segments.install(dim, denseStore, colbertStore, bundle, b, BooleanArray(b.count), emptyList()) {
                    EdgeM3CorruptIndexException("id ${it.show()} is both in the base and added")
                }
                compaction.deleteBase(oldName)
                compaction.collectGarbage(store.baseName, store.generation)
            }
            apply
        }
    }

    @Synchronized
    override fun close() {
        if (closed) return
        closed = true
        store.close()
    }

    // ------------------------------------------------------------------ internals

    /** The chunks of `text` (the tokenizer's `encodeChunks`), each embedded by `embedder`. */
    private fun embedChunks(text: String): List<Retrieval.Vectors> {
        val e = embedder ?: throw EdgeM3Exception("add(id, text): set `embedder` (the index's bundle) first")
        return e.embedChunksBlocking(text).map { Retrieval.Vectors.of(it) }
    }

    private fun write(stage: () -> (() -> Unit)) {
        check()
        store.write(segments, stage)
    }

    private fun check() {
        if (closed) throw EdgeM3ClosedException("EdgeM3WritableIndex is closed")
    }

    /** Every call's first step: a database another process created, or a commit by another connection. */
    private fun refresh() {
        check()
        store.refresh(segments)
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
                if (index.store.dbFile.isFile) {
                    index.refresh()
                } else {
                    val b = EdgeM3Index.open(dir, bundleFiles)
                    index.store.onRootBase()
                    index.segments.install(b.dim, b.denseStore, b.colbertStore, if (b.bundle.isEmpty()) null else b.bundle,
                        b, BooleanArray(b.count), emptyList()) { EdgeM3CorruptIndexException("id ${it.show()} is both in the base and added") }
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
            IndexStore.createDb(dir, driver, dim, dense, colbert, bundle?.let { IndexCompaction.identity(it) }, "", "")
            return open(dir, driver)
        }
    }
}
