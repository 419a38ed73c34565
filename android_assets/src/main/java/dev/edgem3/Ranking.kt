package dev.edgem3

/**
 * The ranking rules of docs/index-format.md ("Search", "Passages and chunks") that EdgeM3Index
 * and EdgeM3WritableIndex's segments share: the query checks, the best `k` of scored rows by a
 * mode, and passages from rows.
 */
object Ranking {
    /** One scored row (or item): the ranking's unit before ids and chunk numbers. */
    class Scored(val row: Int, val score: Double)

    /** The best `k` of items 0..n-1 by `score`: score descending, then item ascending. */
    inline fun top(k: Int, n: Int, score: (Int) -> Double): List<Scored> {
        val m = minOf(k, n)
        val rows = IntArray(m)
        val scores = DoubleArray(m)
        var size = 0
        for (i in 0 until n) {
            val s = score(i)
            // Items come in ascending order, so an equal score never displaces an earlier item.
            if (size == m && !(s > scores[m - 1])) continue
            var at = if (size == m) m - 1 else size
            while (at > 0 && s > scores[at - 1]) {
                scores[at] = scores[at - 1]
                rows[at] = rows[at - 1]
                at--
            }
            scores[at] = s
            rows[at] = i
            if (size < m) size++
        }
        return List(size) { Scored(rows[it], scores[it]) }
    }

    /**
     * With `chunks`, the best `k` rows; else the row search with `k' = k * perPassage` (P, the most
     * chunks of one passage), the first hit of each id in ranked order, the first `k` of those.
     */
    fun passageRows(k: Int, perPassage: Int, chunks: Boolean, rows: (Int) -> List<Scored>,
                    id: (Int) -> PassageId): List<Scored> {
        if (chunks || k < 1) return rows(k)
        val wide = minOf(k.toLong() * maxOf(perPassage, 1), Int.MAX_VALUE.toLong()).toInt()
        val seen = HashSet<PassageId>()
        val out = ArrayList<Scored>(minOf(k, 64))
        for (h in rows(wide)) {
            if (out.size == k) break
            if (seen.add(id(h.row))) out.add(h)
        }
        return out
    }

    /** A search's query after the checks both indexes make: the signals `mode` uses and the vectors. */
    class Query(val used: List<String>, val dense: FloatArray?, val lexical: Retrieval.Lexical?,
                val colbert: Array<FloatArray>?)

    /** The checks of a search before any scoring, in Python's order and words (search_args, as_query). */
    fun checkQuery(query: Retrieval.Vectors, k: Int, mode: String, weights: DoubleArray, dim: Int,
                   hasColbert: Boolean): Query {
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
            if (!hasColbert) throw EdgeM3Exception("mode $mode: the index has no ColBERT vectors (built with --colbert none)")
        }
        return Query(used, q, lex, cq)
    }

    /**
     * The best `k` of rows 0..n-1 under `mode` (docs/index-format.md, "Search"): one signal ranks
     * every row by it; a hybrid mode ranks the union of the dense and the sparse top
     * max(k, HYBRID_CANDIDATES) by Retrieval.hybrid. `dense` and `sparse` score every row at once,
     * `colbert` one row.
     */
    fun byMode(k: Int, n: Int, mode: String, weights: DoubleArray, used: List<String>, dense: () -> DoubleArray,
               sparse: () -> EdgeM3Index.SparseScores, colbert: (Int) -> Double): List<Scored> {
        val (nd, _, nc) = Retrieval.SIGNALS
        if (used.size == 1) {
            return when (used[0]) {
                nd -> dense().let { d -> top(k, n) { r -> d[r] } }
                nc -> top(k, n) { r -> colbert(r) }
                else -> {
                    val s = sparse()
                    top(k, s.rows.size) { i -> s.acc[s.rows[i]] }.map { Scored(s.rows[it.row], it.score) }
                }
            }
        }
        val c = maxOf(k, EdgeM3Contract.HYBRID_CANDIDATES)
        val s = sparse()
        val candidates = java.util.TreeSet<Int>()
        val dAll = dense()
        for (h in top(c, n) { r -> dAll[r] }) candidates.add(h.row)
        for (h in top(c, s.rows.size) { i -> s.acc[s.rows[i]] }) candidates.add(s.rows[h.row])
        val rows = candidates.toIntArray()
        return top(k, rows.size) { i ->
            val r = rows[i]
            val sp = if (s.touched[r]) s.acc[r] else 0.0
            val cb = if (nc in used) colbert(r) else 0.0
            Retrieval.hybrid(mode, dAll[r], sp, cb, weights)
        }.map { Scored(rows[it.row], it.score) }
    }
}
