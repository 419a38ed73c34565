package dev.edgem3

/**
 * The ranking rules of docs/index-format.md ("Search", "Passages and chunks") that EdgeM3Index
 * and EdgeM3WritableIndex's segments share: the best `k` of scored rows, and passages from rows.
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
}
