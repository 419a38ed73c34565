package dev.edgem3

/**
 * The writable index's logical rows (docs/index-format.md, "The writable index"): the base's
 * surviving rows in order (a format-1 folder, EdgeM3Index, read through its public API only),
 * then the database's rows (the delta, in stored form) by seq. Rows sharing an id are one
 * passage's chunks. In memory only: IndexStore fills it from the database and the writes change
 * it after their commit. Not thread-safe: EdgeM3WritableIndex serialises every call.
 */
internal class IndexSegments {
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
    /** The base, or null (an index created empty, never compacted). */
    var base: EdgeM3Index? = null
        private set
    private var removed = BooleanArray(0)
    /** The database's rows (chunks) by seq. */
    val passages = ArrayList<Stored>()
    /** Each surviving base passage's rows, in row order (its chunks). */
    private val baseRowsOf = HashMap<PassageId, ArrayList<Int>>()
    /** Each database passage's rows, in chunk order. */
    private val storedOf = HashMap<PassageId, ArrayList<Stored>>()
    /** The surviving base rows, ascending: logical row i < survivors.size is base row survivors[i]. */
    var survivors = IntArray(0)
        private set

    /** Everything at once (a load, a compaction, a format-1 folder's open); `clash` refuses an id
     *  both in the base and in `passages`. */
    fun install(dim: Int, denseStore: String, colbertStore: String, bundle: Map<String, Any?>?, base: EdgeM3Index?,
                removed: BooleanArray, passages: List<Stored>, clash: (PassageId) -> EdgeM3Exception) {
        this.dim = dim; this.denseStore = denseStore; this.colbertStore = colbertStore; this.bundle = bundle
        this.base = base; this.removed = removed
        this.passages.clear(); this.passages.addAll(passages)
        baseRowsOf.clear()
        storedOf.clear()
        if (base != null) {
            for (r in 0 until base.count) if (!removed[r]) baseRowsOf.getOrPut(base.ids[r]) { ArrayList() }.add(r)
        }
        for (p in passages) {
            if (baseRowsOf.containsKey(p.id)) throw clash(p.id)
            storedOf.getOrPut(p.id) { ArrayList() }.add(p)
        }
        survivors = survivorsOf()
    }

    // ------------------------------------------------------------------ reading

    /** Passages (ids). */
    val count: Int get() = baseRowsOf.size + storedOf.size

    /** Logical rows (chunks). */
    val rows: Int get() = survivors.size + passages.size

    fun present(id: PassageId): Boolean = baseRowsOf.containsKey(id) || storedOf.containsKey(id)

    /** A surviving base passage's rows, or null. */
    fun baseRows(id: PassageId): List<Int>? = baseRowsOf[id]

    /** A database passage's chunks, or null. */
    fun stored(id: PassageId): List<Stored>? = storedOf[id]

    /** Every passage's id once, in logical row order (Python's `WritableIndex.ids`). */
    fun ids(): List<PassageId> {
        val out = ArrayList<PassageId>(count)
        val b = base
        if (b != null) for (r in survivors) if (b.chunk(r) == 0) out.add(b.id(r))
        for (p in passages) if (p.chunk == 0) out.add(p.id)
        return out
    }

    fun id(row: Int): PassageId {
        checkRow(row)
        val s = survivors.size
        return if (row < s) base!!.id(survivors[row]) else passages[row - s].id
    }

    fun chunk(row: Int): Int {
        checkRow(row)
        val s = survivors.size
        return if (row < s) base!!.chunk(survivors[row]) else passages[row - s].chunk
    }

    private fun checkRow(row: Int) {
        val n = survivors.size + passages.size
        if (row < 0 || row >= n) throw EdgeM3Exception("row $row: the index has $n")
    }

    /** P: the most chunks of one surviving passage (a passage is removed whole, so its surviving
     *  base rows are chunks 0..n-1). */
    fun maxChunks(): Int {
        var most = 0
        val b = base
        if (b != null) for (r in survivors) most = maxOf(most, b.chunk(r) + 1)
        for (r in storedOf.values) most = maxOf(most, r.size)
        return most
    }

    // ------------------------------------------------------------------ changing (after a commit)

    fun append(p: Stored) {
        passages.add(p)
        storedOf.getOrPut(p.id) { ArrayList() }.add(p)
    }

    /** A base passage's rows tombstoned. */
    fun removeBase(id: PassageId) {
        val rows = baseRowsOf.remove(id) ?: return
        for (r in rows) removed[r] = true
        survivors = survivorsOf()
    }

    /** A database passage's rows deleted. */
    fun removeStored(id: PassageId) {
        val ps = storedOf.remove(id) ?: return
        val gone = HashSet<Stored>(ps)  // identity: Stored has no equals of its own
        passages.removeAll { it in gone }
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

    // ------------------------------------------------------------------ search

    /** The best `k` logical rows (EdgeM3Index's rules over the base's survivors and the delta). */
    fun rowSearch(query: Retrieval.Vectors, k: Int, mode: String, weights: DoubleArray): List<Ranking.Scored> {
        val qc = Ranking.checkQuery(query, k, mode, weights, dim, colbertStore != "none")
        val s = survivors.size
        val n = s + passages.size
        if (n == 0) return emptyList()
        val b = base
        return Ranking.byMode(k, n, mode, weights, qc.used, { denseAll(qc.dense!!) }, { sparseAll(qc.lexical!!) }) { row ->
            if (row < s) b!!.colbertScore(qc.colbert!!, survivors[row]) else passages[row - s].colbert(qc.colbert!!, dim)
        }
    }

    /** Every logical row's dense score: the base's (its own loop) for survivors, then the passages'. */
    private fun denseAll(q: FloatArray): DoubleArray {
        val s = survivors.size
        val out = DoubleArray(s + passages.size)
        if (s > 0) {
            val all = base!!.denseScores(q)
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
            Retrieval.sharedSparse(lex, passages[j].lexical)?.let { touched[s + j] = true; acc[s + j] = it }
        }
        var m = 0
        for (t in touched) if (t) m++
        val rows = IntArray(m)
        var i = 0
        for (r in 0 until n) if (touched[r]) rows[i++] = r
        return EdgeM3Index.SparseScores(acc, touched, rows)
    }
}
