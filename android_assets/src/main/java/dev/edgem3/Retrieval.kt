package dev.edgem3

/**
 * BGE-M3's three scores and `BGEM3FlagModel.compute_score`'s weighted hybrid, as FlagEmbedding
 * defines them, computed by docs/index-format.md's "Score arithmetic" so that Python
 * (`edge_m3.retrieval`), this kit and the Swift kit return the same float64 bits: float32 inputs
 * widened exactly, exact products, float64 sums one term at a time in a fixed order. That is why
 * nothing here is vectorised or reordered: a faster sum would rank ties differently on a device.
 */
object Retrieval {

    /** A text's lexical weights as parallel arrays in ascending token id: the order every sum uses. */
    class Lexical(val ids: IntArray, val weights: FloatArray) {
        init {
            if (ids.size != weights.size) throw EdgeM3Exception("lexical ids and weights differ in length")
            for (i in 1 until ids.size) {
                if (ids[i - 1] >= ids[i]) throw EdgeM3Exception("lexical ids must be strictly ascending")
            }
        }

        val size: Int get() = ids.size

        companion object {
            /** From FlagEmbedding's dict (token id as a string -> weight), as `Embedding.lexicalWeights`. */
            fun of(weights: Map<String, Float>): Lexical {
                val ids = IntArray(weights.size)
                var i = 0
                for (k in weights.keys) {
                    ids[i++] = k.toIntOrNull() ?: throw EdgeM3Exception("lexical weight key \"$k\" is not a token id")
                }
                ids.sort()
                return Lexical(ids, FloatArray(ids.size) { weights.getValue(ids[it].toString()) })
            }
        }
    }

    /** One text's outputs as the scores use them; a head the bundle leaves out is `null`. */
    class Vectors(val dense: FloatArray?, val lexical: Lexical?, val colbert: Array<FloatArray>?) {
        companion object {
            fun of(e: Embedding): Vectors = Vectors(e.denseVecs, e.lexicalWeights?.let { Lexical.of(it) }, e.colbertVecs)
        }
    }

    /** `compute_score`'s modes. */
    val MODES: List<String> = EdgeM3Contract.SCORE_MODES

    /** The signals, in `weights_for_different_modes` order (dense, sparse, colbert). */
    val SIGNALS: List<String> = EdgeM3Contract.SCORE_SIGNALS

    /** `compute_score`'s default weights (dense, sparse, colbert). */
    val DEFAULT_WEIGHTS: DoubleArray get() = EdgeM3Contract.DEFAULT_MODE_WEIGHTS.toDoubleArray()

    /** float64 sum from +0.0 of exact float32 products, one at a time in index order. */
    fun dot(a: FloatArray, b: FloatArray): Double {
        if (a.size != b.size) throw EdgeM3Exception("vectors differ in length: ${a.size} != ${b.size}")
        var acc = 0.0
        for (k in a.indices) acc += a[k].toDouble() * b[k].toDouble()
        return acc
    }

    /** Dense score: the inner product of the unit `dense_vecs` (FlagEmbedding: `q @ p.T`). */
    fun dense(q: FloatArray, p: FloatArray): Double = dot(q, p)

    /** `compute_lexical_matching_score`: over the tokens both keep, in ascending id, the sum of products. */
    fun sparse(q: Lexical, p: Lexical): Double = sharedSparse(q, p) ?: 0.0

    /** [sparse]'s sum, or null when the two share no token (an index hits only rows that share one). */
    fun sharedSparse(q: Lexical, p: Lexical): Double? {
        var acc = 0.0
        var shared = false
        var i = 0
        var j = 0
        while (i < q.size && j < p.size) {
            val a = q.ids[i]
            val b = p.ids[j]
            when {
                a < b -> i++
                a > b -> j++
                else -> { acc += q.weights[i].toDouble() * p.weights[j].toDouble(); shared = true; i++; j++ }
            }
        }
        return if (shared) acc else null
    }

    fun sparse(q: Map<String, Float>, p: Map<String, Float>): Double = sparse(Lexical.of(q), Lexical.of(p))

    /** `colbert_score`: the mean over query vectors of the best dot with a passage vector; none: 0.0. */
    fun colbert(q: Array<FloatArray>, p: Array<FloatArray>): Double {
        if (q.isEmpty() || p.isEmpty()) return 0.0
        var total = 0.0
        for (qv in q) {
            var best = Double.NEGATIVE_INFINITY
            for (pv in p) {
                val d = dot(qv, pv)
                if (d > best) best = d
            }
            total += best
        }
        return total / q.size
    }

    /** The signals a mode adds, in the order `compute_score` adds them (colbert, sparse, dense). */
    fun signals(mode: String): List<String> {
        if (mode !in MODES) throw EdgeM3Exception("mode \"$mode\": choose from ${MODES.joinToString(", ")}")
        val parts = mode.split("+")
        return SIGNALS.reversed().filter { it in parts }
    }

    /** `weights_for_different_modes` checked: three finite numbers >= 0 (dense, sparse, colbert). */
    fun checkWeights(weights: DoubleArray): DoubleArray {
        if (weights.size != SIGNALS.size || weights.any { !(it >= 0.0) || it == Double.POSITIVE_INFINITY }) {
            throw EdgeM3Exception("weights: must be three finite numbers >= 0 (dense, sparse, colbert), " +
                "got ${weights.joinToString(", ", "[", "]")}")
        }
        return weights
    }

    /**
     * `compute_score`'s value for `mode` from the three scores: one signal is its score as is;
     * `sparse+dense` = (sparse*w_s + dense*w_d) / (w_s + w_d); `colbert+sparse+dense` =
     * ((colbert*w_c + sparse*w_s) + dense*w_d) / ((w_d + w_s) + w_c), each operation rounded.
     */
    fun hybrid(mode: String, dense: Double, sparse: Double, colbert: Double, weights: DoubleArray = DEFAULT_WEIGHTS): Double {
        val used = signals(mode)
        val value = doubleArrayOf(dense, sparse, colbert)
        if (used.size == 1) return value[SIGNALS.indexOf(used[0])]
        val w = checkWeights(weights)
        var num = 0.0
        var den = 0.0
        for ((i, s) in used.withIndex()) {
            val h = SIGNALS.indexOf(s)
            num = if (i == 0) value[h] * w[h] else num + value[h] * w[h]
        }
        var first = true
        for ((h, s) in SIGNALS.withIndex()) {
            if (s !in used) continue
            den = if (first) w[h] else den + w[h]
            first = false
        }
        if (den == 0.0) throw EdgeM3Exception("weights: the weights $mode uses sum to 0")
        return num / den
    }

    /** `compute_score(...)[mode]` for one query and passage, the same float64 in Python, Kotlin and Swift. */
    fun score(q: Vectors, p: Vectors, mode: String, weights: DoubleArray = DEFAULT_WEIGHTS): Double {
        val used = signals(mode)
        val (nd, ns, nc) = SIGNALS
        val d = if (nd in used) dense(need(q.dense, nd), need(p.dense, nd)) else 0.0
        val s = if (ns in used) sparse(need(q.lexical, ns), need(p.lexical, ns)) else 0.0
        val c = if (nc in used) colbert(need(q.colbert, nc), need(p.colbert, nc)) else 0.0
        return hybrid(mode, d, s, c, weights)
    }

    private fun <T> need(x: T?, signal: String): T = x ?: throw EdgeM3Exception("no $signal output: the bundle leaves that head out")
}
