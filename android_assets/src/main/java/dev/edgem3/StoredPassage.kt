package dev.edgem3

import java.nio.ByteBuffer
import java.nio.ByteOrder

/**
 * A passage as the database (and a format-1 base) stores it: dense float32 or int8 codes with a
 * float32 scale, lexical tokens ascending with float32 weights, ColBERT float16 or int8 codes with
 * per-vector scales. Quantized once, when added (as Python's `quantize_rows`), never again.
 */
internal class Stored(
    val id: PassageId,
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
        return listOf(id.value, chunk.toLong(), dense, denseScaleBlob, tokens.array(), floats(lexical.weights), colbert, colbertScale?.let { floats(it) })
    }

    companion object {
        internal fun floats(x: FloatArray): ByteArray {
            val b = ByteBuffer.allocate(x.size * 4).order(ByteOrder.LITTLE_ENDIAN)
            for (v in x) b.putFloat(v)
            return b.array()
        }

        internal fun finite(x: Float) = !x.isNaN() && !x.isInfinite()

        /** A passage's pipeline outputs checked (as Python's Index.add) and put in stored form. */
        fun of(id: PassageId, chunk: Int, v: Retrieval.Vectors, dim: Int, denseStore: String, colbertStore: String): Stored {
            val dense = v.dense ?: throw EdgeM3Exception("id ${id.show()}: no dense_vecs")
            if (dense.size != dim || !dense.all { finite(it) }) {
                throw EdgeM3Exception("id ${id.show()}: dense_vecs of ${dense.size} values (want $dim, finite)")
            }
            val lex = v.lexical ?: Retrieval.Lexical(IntArray(0), FloatArray(0))
            if (lex.weights.any { !(it > 0f) || !finite(it) }) {
                throw EdgeM3Exception("id ${id.show()}: lexical weights must be finite and > 0")
            }
            val lexical = Retrieval.Lexical(lex.ids.copyOf(), lex.weights.copyOf())
            var rows = 0
            var half: ShortArray? = null
            var codes: ByteArray? = null
            var scales: FloatArray? = null
            if (colbertStore != "none") {
                val col = v.colbert ?: throw EdgeM3Exception("id ${id.show()}: no colbert_vecs (the index stores ColBERT)")
                if (col.any { it.size != dim || !it.all { x -> finite(x) } }) {
                    throw EdgeM3Exception("id ${id.show()}: colbert_vecs rows must have $dim finite values")
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

        /** edge_m3/retrieval/index.py `quantize_rows` for one row: scale = max|x| / 127 (float32;
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
