package dev.edgem3

import java.io.File
import java.nio.ByteBuffer
import java.nio.ByteOrder
import java.nio.FloatBuffer
import java.nio.IntBuffer
import java.nio.LongBuffer
import java.nio.ShortBuffer
import java.security.MessageDigest

/**
 * A passage index written by `edge-m3 index` (docs/index-format.md), memory-mapped in place: the
 * arrays are read straight from the page cache, nothing is copied or parsed but `index.json` and
 * `ids.json`. `search` returns the same hits and float64 scores as Python's `edge_m3.retrieval`
 * on the same index and query (docs/index-format.md "Search"), because both follow one text.
 *
 * Thread-safe after `open` (read-only buffers, absolute reads only). Blocking: open it off the
 * main thread (the SHA-256 of every file is read once unless `verifySha256 = false`).
 */
class EdgeM3Index private constructor(
    /** The index folder. */
    val dir: File,
    /** Rows (chunks; a passage of n chunks is n rows sharing its id: docs/index-format.md, "Passages and chunks"). */
    val count: Int,
    /** Vector width: the bundle's hidden size. */
    val dim: Int,
    /** `float32` or `int8`. */
    val denseStore: String,
    /** `fp16`, `int8` or `none`. */
    val colbertStore: String,
    /** Passage id per row, from ids.json. */
    val ids: List<PassageId>,
    /** index.json's `bundle` entry (`model_file`, `model_sha256`, `tokenizer_file`, ...); empty when it records none. */
    val bundle: Map<String, Any?>,
    internal val dense: ByteBuffer,
    internal val denseScale: FloatBuffer?,
    internal val sparseTokens: IntBuffer,
    internal val sparseOffsets: LongBuffer,
    internal val sparseRows: IntBuffer,
    internal val sparseWeights: FloatBuffer,
    internal val colbertOffsets: LongBuffer?,
    internal val colbert: ByteBuffer?,
    internal val colbertScale: FloatBuffer?
) {
    /**
     * One search result: the row (see `ids`), its passage's id, the row's chunk number in its
     * passage (0 for a passage of one chunk) and its score. A passage search's hit is the
     * passage's best chunk. The same fields as EdgeM3WritableIndex.Hit.
     */
    class Hit(val row: Int, val id: PassageId, val chunk: Int, val score: Double) {
        override fun toString(): String = "Hit(row=$row, id=$id, chunk=$chunk, score=$score)"
    }

    /** Each row's chunk number: the occurrence index of its id among the rows before it. */
    private val chunkOf: IntArray
    /** The largest number of chunks of one passage (P; 0 for an empty index). */
    val maxChunks: Int
    /** Passages: distinct ids. */
    val passages: Int

    init {
        val seen = HashMap<PassageId, Int>()
        var most = 0
        chunkOf = IntArray(count)
        for (r in 0 until count) {
            val c = seen[ids[r]] ?: 0
            chunkOf[r] = c
            seen[ids[r]] = c + 1
            if (c + 1 > most) most = c + 1
        }
        maxChunks = most
        passages = seen.size
    }

    private val denseF32: FloatBuffer? = if (denseStore == "float32") dense.asFloatBuffer() else null
    private val colbertF16: ShortBuffer? = if (colbertStore == "fp16") colbert?.asShortBuffer() else null

    /** The passage id of a hit's row. */
    fun id(row: Int): PassageId = ids[row]

    /** A row's chunk number in its passage. */
    fun chunk(row: Int): Int = chunkOf[row]

    /** Search with a query embedded by the same bundle (`EdgeM3Embedder.embed`). */
    fun search(query: Embedding, k: Int, mode: String, weights: DoubleArray = Retrieval.DEFAULT_WEIGHTS,
               chunks: Boolean = false): List<Hit> =
        search(Retrieval.Vectors.of(query), k, mode, weights, chunks)

    /**
     * The best `k` passages for `mode`, each by its best chunk (`chunks = true`: the best `k`
     * rows), best first (score descending, then row ascending); docs/index-format.md "Search" and
     * "Passages and chunks". `sparse` hits only rows sharing a token with the query (none: no
     * hits); the hybrid modes re-score the union of the best `max(k', HYBRID_CANDIDATES)` rows by
     * dense and by sparse (`k' = k * maxChunks` for passages, `k` for chunks).
     */
    fun search(query: Retrieval.Vectors, k: Int, mode: String, weights: DoubleArray = Retrieval.DEFAULT_WEIGHTS,
               chunks: Boolean = false): List<Hit> =
        Ranking.passageRows(k, maxChunks, chunks, { rowSearch(query, it, mode, weights) }, ::id)
            .map { Hit(it.row, id(it.row), chunk(it.row), it.score) }

    /** The best `k` rows. */
    private fun rowSearch(query: Retrieval.Vectors, k: Int, mode: String, weights: DoubleArray): List<Ranking.Scored> {
        val qc = Ranking.checkQuery(query, k, mode, weights, dim, colbert != null)
        if (count == 0) return emptyList()
        return Ranking.byMode(k, count, mode, weights, qc.used, { denseScores(qc.dense!!) },
                              { sparseScores(qc.lexical!!) }) { r -> colbertScore(qc.colbert!!, r) }
    }

    /**
     * `emit(r, dot(q, row r))` for the stored rows `from until to` (row r's k-th value is
     * `value(r * dim + k)`), in row order. Four rows at a time: each dot is still one sequential
     * float64 sum (Score arithmetic), the same bits, but four independent chains keep the CPU's
     * adders busy. Inline, so each store's `value` is compiled into the loop.
     */
    private inline fun rowDots(q: FloatArray, from: Int, to: Int, value: (Int) -> Double, emit: (Int, Double) -> Unit) {
        val d = dim
        var r = from
        while (r + 4 <= to) {
            val b0 = r * d
            val b1 = b0 + d
            val b2 = b1 + d
            val b3 = b2 + d
            var a0 = 0.0
            var a1 = 0.0
            var a2 = 0.0
            var a3 = 0.0
            for (k in 0 until d) {
                val x = q[k].toDouble()
                a0 += x * value(b0 + k)
                a1 += x * value(b1 + k)
                a2 += x * value(b2 + k)
                a3 += x * value(b3 + k)
            }
            emit(r, a0)
            emit(r + 1, a1)
            emit(r + 2, a2)
            emit(r + 3, a3)
            r += 4
        }
        while (r < to) {
            val b = r * d
            var acc = 0.0
            for (k in 0 until d) acc += q[k].toDouble() * value(b + k)
            emit(r, acc)
            r++
        }
    }

    /**
     * Every row's dense score by Score arithmetic (float32 values, or int8 codes then * scale):
     * what `search` ranks, for a caller that ranks rows of its own beside these (the writable
     * index's base segment).
     */
    fun denseScores(q: FloatArray): DoubleArray {
        if (q.size != dim) throw EdgeM3Exception("query dense_vecs: ${q.size} values, the index has $dim")
        val out = DoubleArray(count)
        val f = denseF32
        if (f != null) {
            rowDots(q, 0, count, { f.get(it).toDouble() }) { r, s -> out[r] = s }
        } else {
            val codes = dense
            val scale = denseScale!!
            rowDots(q, 0, count, { codes.get(it).toDouble() }) { r, s -> out[r] = s * scale.get(r).toDouble() }
        }
        return out
    }

    /** `colbert(Q, row)`: stored vectors fp16 (widened exactly) or int8 codes (dot then * scale). */
    fun colbertScore(qs: Array<FloatArray>, row: Int): Double {
        if (colbertOffsets == null) throw EdgeM3Exception("the index has no ColBERT vectors (built with --colbert none)")
        if (row < 0 || row >= count) throw EdgeM3Exception("row $row: the index has $count")
        val from = colbertOffsets!!.get(row).toInt()
        val to = colbertOffsets.get(row + 1).toInt()
        if (qs.isEmpty() || from == to) return 0.0
        var total = 0.0
        val f16 = colbertF16
        val codes = colbert!!
        for (q in qs) {
            var best = Double.NEGATIVE_INFINITY
            if (f16 != null) {
                rowDots(q, from, to, { HALF[f16.get(it).toInt() and 0xffff].toDouble() }) { _, s -> if (s > best) best = s }
            } else {
                val sc = colbertScale!!
                rowDots(q, from, to, { codes.get(it).toDouble() }) { v, s ->
                    val x = s * sc.get(v).toDouble()
                    if (x > best) best = x
                }
            }
            total += best
        }
        return total / qs.size
    }

    /** Lexical scores: `acc[r]` row r's score, `touched[r]` whether it shares a token with the query, `rows` those rows ascending. */
    class SparseScores(val acc: DoubleArray, val touched: BooleanArray, val rows: IntArray)

    /** Every row's lexical score through the postings, query tokens in ascending id (the pairwise order). */
    fun sparseScores(q: Retrieval.Lexical): SparseScores {
        val acc = DoubleArray(count)
        val touched = BooleanArray(count)
        var n = 0
        val tokens = sparseTokens.limit()
        var t = 0
        for (i in 0 until q.size) {
            val id = q.ids[i]
            // Both ascending: advance through the index's tokens (binary search from t).
            var lo = t
            var hi = tokens
            while (lo < hi) {
                val mid = (lo + hi) ushr 1
                if (sparseTokens.get(mid) < id) lo = mid + 1 else hi = mid
            }
            t = lo
            if (t >= tokens || sparseTokens.get(t) != id) continue
            val w = q.weights[i].toDouble()
            for (p in sparseOffsets.get(t).toInt() until sparseOffsets.get(t + 1).toInt()) {
                val r = sparseRows.get(p)
                if (!touched[r]) { touched[r] = true; n++ }
                acc[r] += w * sparseWeights.get(p).toDouble()
            }
        }
        val rows = IntArray(n)
        var j = 0
        for (r in 0 until count) if (touched[r]) rows[j++] = r
        return SparseScores(acc, touched, rows)
    }

    companion object {
        /** float16 bits -> float32 (exact), a table so the ColBERT loop stays one load per value. */
        internal val HALF: FloatArray = FloatArray(65536) { halfToFloat(it) }

        private fun halfToFloat(h: Int): Float {
            val sign = if (h and 0x8000 != 0) -1f else 1f
            val exp = (h ushr 10) and 0x1f
            val mant = h and 0x3ff
            return when (exp) {
                0 -> sign * mant * Math.scalb(1f, -24)
                31 -> if (mant == 0) sign * Float.POSITIVE_INFINITY else Float.NaN
                else -> sign * Math.scalb(1f + mant / 1024f, exp - 15)
            }
        }

        private val ITEM_SIZE = mapOf("float32" to 4, "float16" to 2, "int8" to 1, "int32" to 4, "int64" to 8)

        /**
         * Opens and checks an index folder: format and version, every file's size and (unless
         * `verifySha256` is false, e.g. after a first successful open) SHA-256, the arrays' shapes,
         * and with `bundleFiles` (the bundle's manifest.json `files`: name -> sha256) that the
         * index was built by that bundle's model and tokenizer. Any problem: one exception naming the
         * index file, an [EdgeM3CorruptIndexException] (kind corrupt_index) for every refusal of the
         * index's files, a plain [EdgeM3Exception] for an index built by another bundle.
         */
        fun open(dir: File, bundleFiles: Map<String, String>? = null, verifySha256: Boolean = true): EdgeM3Index {
            val head = corruptIndex { readHead(dir) }
            if (bundleFiles != null) head.checkBundle(dir, bundleFiles)
            return corruptIndex { openFiles(dir, head, verifySha256) }
        }

        /** index.json's fields that the bundle check and the files' checks read. */
        private data class Head(val tree: Map<String, Any?>, val w: String, val count: Int, val dim: Int,
                                val denseStore: String, val colbertStore: String, val bundle: Map<String, Any?>) {
            /** With the bundle's manifest.json `files` (name -> sha256): the index was built by its model and tokenizer. */
            fun checkBundle(dir: File, bundleFiles: Map<String, String>) {
                if (tree["bundle"] == null) throw EdgeM3Exception("$w: records no bundle, so queries cannot be checked against it")
                for (key in listOf("model", "tokenizer")) {
                    val file = JsonTree.str(JsonTree.field(bundle, "${key}_file", "$w: bundle"), "$w: bundle.${key}_file")
                    val sha = JsonTree.str(JsonTree.field(bundle, "${key}_sha256", "$w: bundle"), "$w: bundle.${key}_sha256")
                    if (bundleFiles[file] != sha) {
                        throw EdgeM3Exception("$dir: index built by another bundle ($file sha256 ${sha.take(12)}..., " +
                            "the bundle's is ${bundleFiles[file]?.take(12) ?: "absent"}); rebuild it with edge-m3 index")
                    }
                }
            }
        }

        /** index.json read and checked field by field. */
        private fun readHead(dir: File): Head {
            val manifestFile = File(dir, EdgeM3Contract.INDEX_MANIFEST)
            val w = manifestFile.path
            if (!manifestFile.isFile) throw EdgeM3Exception("$dir: not an index (no ${EdgeM3Contract.INDEX_MANIFEST})")
            val tree = try {
                JsonTree.obj(MiniJson.parse(strictUtf8(manifestFile.readBytes(), w)), w)
            } catch (e: EdgeM3Exception) {
                throw EdgeM3Exception("$w: corrupt (${e.message})")
            }
            val format = JsonTree.field(tree, "format", w)
            if (format != EdgeM3Contract.INDEX_FORMAT) throw EdgeM3Exception("$w: format $format, not ${EdgeM3Contract.INDEX_FORMAT}")
            val version = JsonTree.int(JsonTree.field(tree, "format_version", w), "$w: format_version")
            if (version != EdgeM3Contract.INDEX_FORMAT_VERSION) {
                throw EdgeM3Exception("$w: format_version $version, this kit reads ${EdgeM3Contract.INDEX_FORMAT_VERSION}")
            }
            val count = JsonTree.int(JsonTree.field(tree, "count", w), "$w: count")
            val dim = JsonTree.int(JsonTree.field(tree, "dim", w), "$w: dim")
            if (count < 0 || dim < 1 || dim > EdgeM3Contract.INDEX_MAX_DIM) throw EdgeM3Exception("$w: count $count, dim $dim")
            val denseStore = JsonTree.str(JsonTree.field(tree, "dense", w), "$w: dense")
            val colbertStore = JsonTree.str(JsonTree.field(tree, "colbert", w), "$w: colbert")
            if (denseStore !in EdgeM3Contract.DENSE_STORES) throw EdgeM3Exception("$w: dense store $denseStore unknown")
            if (colbertStore !in EdgeM3Contract.COLBERT_STORES) throw EdgeM3Exception("$w: colbert store $colbertStore unknown")
            // null: built without a bundle (Python's Index), so queries cannot be checked against one.
            // Present, it names the model and tokenizer by strings (edge_m3.retrieval.index_folder.BundleIdentity).
            val bundle = tree["bundle"]?.let { b ->
                if (b !is Map<*, *> || EdgeM3Contract.INDEX_BUNDLE_KEYS.any { b[it] !is String }) {
                    throw EdgeM3Exception("$dir: bundle: needs ${EdgeM3Contract.INDEX_BUNDLE_KEYS.joinToString(", ")} (strings)")
                }
                JsonTree.obj(b, "$w: bundle")
            } ?: emptyMap()
            return Head(tree, w, count, dim, denseStore, colbertStore, bundle)
        }

        /** The files index.json lists (sizes, SHA-256) and the arrays' layout, checked. */
        private fun openFiles(dir: File, head: Head, verifySha256: Boolean): EdgeM3Index {
            val (tree, w, count, dim, denseStore, colbertStore, bundle) = head
            // Every listed file: present, its size, its SHA-256 (mapped, so hashing reads the page cache).
            val files = JsonTree.obj(JsonTree.field(tree, "files", w), "$w: files")
            val mapped = HashMap<String, ByteBuffer>()
            for ((name, entry) in files) {
                // A control character refused too: every message below names the file (issue 38:
                // "colbert_sca\ne.bin" made a two-line refusal).
                if (name.contains('/') || name.contains('\\') || name == ".." || name == EdgeM3Contract.INDEX_MANIFEST ||
                    quoted(name) != "\"$name\"") {
                    throw EdgeM3Exception("$w: bad file name ${quoted(name)}")
                }
                val e = JsonTree.obj(entry, "$w: files.$name")
                val size = JsonTree.field(e, "size", "$w: files.$name").let { (it as? Long) ?: -1L }
                val sha = JsonTree.str(JsonTree.field(e, "sha256", "$w: files.$name"), "$w: files.$name.sha256")
                val f = File(dir, name)
                if (!f.isFile) throw EdgeM3Exception("$f: missing; the index is corrupt")
                if (f.length() != size) throw EdgeM3Exception("$f: ${f.length()} bytes, ${EdgeM3Contract.INDEX_MANIFEST} says $size; the index is corrupt")
                val buf = mapFile(f)
                if (verifySha256) {
                    val digest = MessageDigest.getInstance("SHA-256")
                    digest.update(buf.duplicate())
                    val actual = ModelCheck.hex(digest)
                    if (actual != sha) throw EdgeM3Exception("$f: sha256 $actual, ${EdgeM3Contract.INDEX_MANIFEST} says ${quoted(sha)}; the index is corrupt")
                }
                mapped[name] = buf
            }
            val arrays = JsonTree.obj(JsonTree.field(tree, "arrays", w), "$w: arrays")

            fun array(name: String, dtype: String, shape: LongArray): ByteBuffer? {
                val a = arrays[name] ?: return null
                val aw = "$w: arrays.$name"
                val o = JsonTree.obj(a, aw)
                val file = JsonTree.str(JsonTree.field(o, "file", aw), "$aw.file")
                val got = JsonTree.str(JsonTree.field(o, "dtype", aw), "$aw.dtype")
                val gotShape = JsonTree.list(JsonTree.field(o, "shape", aw), "$aw.shape").map { (it as? Long) ?: -1L }
                if (got != dtype || gotShape != shape.toList()) {
                    throw EdgeM3Exception("$aw: $got $gotShape, expected $dtype ${shape.toList()}")
                }
                val buf = mapped[file] ?: throw EdgeM3Exception("$aw: $file is not among the files with a sha256")
                val bytes = shape.fold(1L) { x, y -> x * y } * ITEM_SIZE.getValue(dtype)
                if (buf.capacity().toLong() != bytes) throw EdgeM3Exception("$dir/$file: ${buf.capacity()} bytes, shape $gotShape needs $bytes")
                return buf.duplicate().order(ByteOrder.LITTLE_ENDIAN)
            }

            fun required(name: String, dtype: String, shape: LongArray): ByteBuffer =
                array(name, dtype, shape) ?: throw EdgeM3Exception("$w: arrays.$name missing")

            fun arrayLength(name: String): Long {
                val o = JsonTree.obj(arrays[name] ?: throw EdgeM3Exception("$w: arrays.$name missing"), "$w: arrays.$name")
                val shape = JsonTree.list(JsonTree.field(o, "shape", "$w: arrays.$name"), "$w: arrays.$name.shape")
                return (shape.firstOrNull() as? Long) ?: throw EdgeM3Exception("$w: arrays.$name.shape")
            }

            val n = count.toLong()
            val int8Dense = denseStore == "int8"
            // Only the arrays the stores use (docs/index-format.md): a stray one would be read by one
            // reader and not another (issue 38).
            val used = listOf("dense", "sparse_tokens", "sparse_offsets", "sparse_rows", EdgeM3Contract.INDEX_POSTING_WEIGHTS) +
                (if (int8Dense) listOf("dense_scale") else emptyList()) +
                (if (colbertStore != "none") listOf("colbert_offsets", "colbert") else emptyList()) +
                (if (colbertStore == "int8") listOf("colbert_scale") else emptyList())
            arrays.keys.firstOrNull { it !in used }?.let {
                throw EdgeM3Exception("$w: arrays.${quoted(it)} is not used by the $denseStore/$colbertStore stores; refusing a corrupt index")
            }
            val dense = required("dense", if (int8Dense) "int8" else "float32", longArrayOf(n, dim.toLong()))
            val denseScale = if (int8Dense) required("dense_scale", "float32", longArrayOf(n)).asFloatBuffer() else null
            val t = arrayLength("sparse_tokens")
            val p = arrayLength("sparse_rows")
            val tokens = required("sparse_tokens", "int32", longArrayOf(t)).asIntBuffer()
            val offsets = required("sparse_offsets", "int64", longArrayOf(t + 1)).asLongBuffer()
            val rows = required("sparse_rows", "int32", longArrayOf(p)).asIntBuffer()
            val weights = required(EdgeM3Contract.INDEX_POSTING_WEIGHTS, "float32", longArrayOf(p)).asFloatBuffer()
            checkOffsets(offsets, p, "$dir/sparse_offsets")
            for (i in 1 until t.toInt()) if (tokens.get(i - 1) >= tokens.get(i)) throw EdgeM3Exception("$dir: sparse_tokens not ascending; the index is corrupt")
            for (i in 0 until p.toInt()) if (rows.get(i) !in 0 until count) throw EdgeM3Exception("$dir: sparse_rows out of range; the index is corrupt")
            for (k in 0 until t.toInt()) {  // a posting's rows strictly ascending, as Python's `postings` writes them
                for (i in offsets.get(k).toInt() + 1 until offsets.get(k + 1).toInt()) {
                    if (rows.get(i - 1) >= rows.get(i)) throw EdgeM3Exception("$dir: sparse_rows not ascending within a token; the index is corrupt")
                }
            }
            var colbertOffsets: LongBuffer? = null
            var colbert: ByteBuffer? = null
            var colbertScale: FloatBuffer? = null
            if (colbertStore != "none") {
                val v = arrayLength("colbert")
                colbertOffsets = required("colbert_offsets", "int64", longArrayOf(n + 1)).asLongBuffer()
                checkOffsets(colbertOffsets, v, "$dir/colbert_offsets")
                val int8 = colbertStore == "int8"
                colbert = required("colbert", if (int8) "int8" else "float16", longArrayOf(v, dim.toLong()))
                if (int8) colbertScale = required("colbert_scale", "float32", longArrayOf(v)).asFloatBuffer()
            }
            // Scales are max|x| / 127 (> 0) and weights > 0: anything else is not an index's (issue 38:
            // a negative scale made an error bound negative and a row vanish from Python's hits only).
            // Read in place from the mappings, at every open, as Python's check_layout (retrieval/index_folder.py).
            val bad = listOf("dense_scale" to denseScale, "colbert_scale" to colbertScale,
                EdgeM3Contract.INDEX_POSTING_WEIGHTS to weights).filter { (_, x) -> x != null && !allPositive(x) }.map { it.first }
            if (bad.isNotEmpty()) throw EdgeM3Exception("$dir: inconsistent arrays (${bad.joinToString(", ")}); refusing a corrupt index")
            // float32 dense and fp16 ColBERT values finite: checked with the SHA-256 (which read every
            // byte already); an index opened unverified is trusted to hold what a builder writes.
            if (verifySha256 && (!int8Dense && !allFinite(dense.asIntBuffer()) || colbertStore == "fp16" && !allFinite(colbert!!.asShortBuffer()))) {
                throw EdgeM3Exception("$dir: a stored vector is not finite; refusing a corrupt index")
            }
            val idsName = EdgeM3Contract.INDEX_IDS
            val idsBuf = mapped[idsName] ?: throw EdgeM3Exception("$w: files has no $idsName")
            val idsText = Charsets.UTF_8.decode(idsBuf.duplicate()).toString()
            val ids = try {
                JsonTree.list(MiniJson.parse(idsText), idsName).map { PassageId.ofValue(it) ?: throw EdgeM3Exception("ids must be strings or integers") }
            } catch (e: EdgeM3Exception) {
                throw EdgeM3Exception("$dir/$idsName: corrupt (${e.message})")
            }
            if (ids.size != count) throw EdgeM3Exception("$dir/$idsName: ${ids.size} ids, ${EdgeM3Contract.INDEX_MANIFEST} says $count")
            return EdgeM3Index(dir, count, dim, denseStore, colbertStore, ids, bundle, dense, denseScale,
                tokens, offsets, rows, weights, colbertOffsets, colbert, colbertScale)
        }
    }
}
