package dev.edgem3

import java.io.File
import java.nio.ByteBuffer
import java.nio.ByteOrder

/** `index.sqlite`'s meta, checked: the store's shape and where its base is. */
internal class DbMeta(
    val dim: Int,
    val dense: String,
    val colbert: String,
    /** The bundle identity (index.json's `bundle`), or null. */
    val bundle: Map<String, Any?>?,
    /** `""` (no base), `"."` (the folder's own format-1 files) or INDEX_BASE_PREFIX + n. */
    val base: String,
    val baseSha: String,
    val generation: Long
)

/**
 * The validation rules of `index.sqlite` (docs/index-format.md, "The writable index"), one
 * function per rule group, in the order the store applies them: the header, the meta table, the
 * bundle, the base against the meta, the removed rows, each passages row, the chunk order. Only
 * values in, a checked value or a refusal out: the store (IndexStore) does every read. Every
 * refusal of the database's contents is [EdgeM3CorruptIndexException] naming `dbFile`.
 */
internal class IndexDbRules(private val dbFile: File) {
    /** A refusal of the database's contents: corrupt_index. */
    fun bad(what: String) = EdgeM3CorruptIndexException("$dbFile: $what; not a valid edge-m3 index database")

    /** Rule group `header`: PRAGMA application_id and user_version. */
    fun header(app: Long, version: Long) {
        if (app != EdgeM3Contract.INDEX_DB_APPLICATION_ID.toLong()) {
            throw EdgeM3CorruptIndexException("$dbFile: not an edge-m3 index database (application_id $app)")
        }
        if (version > EdgeM3Contract.INDEX_DB_VERSION) throw newer(version.toString())
        if (version < EdgeM3Contract.INDEX_DB_VERSION) throw older(version.toString())
    }

    private fun newer(v: String) = EdgeM3CorruptIndexException("$dbFile: format_version $v, written by a newer edge-m3 " +
        "(this kit reads ${EdgeM3Contract.INDEX_DB_VERSION})")

    /** Format 1 (a pre-release with no `chunk` column, never in a release): refused, not migrated. */
    private fun older(v: String) = EdgeM3CorruptIndexException("$dbFile: format_version $v, written by an older edge-m3 " +
        "(this kit reads ${EdgeM3Contract.INDEX_DB_VERSION}); rebuild the index")

    /** Rule group `meta`, one row (key, value, CAST(key AS BLOB), CAST(value AS BLOB)): text, strictly
     *  UTF-8 (never read with replacement characters: the platforms' decoders differ; Python refuses it). */
    fun metaEntry(row: Array<Any?>): Pair<String, String> {
        if (row[0] !is String) throw bad("meta: a key that is not text")
        val k = utf8(row[2]) ?: throw bad("meta: a key that is not UTF-8")
        if (row[1] !is String) throw bad("meta: $k is not text")
        return Pair(k, utf8(row[3]) ?: throw bad("meta: $k is not UTF-8"))
    }

    /** Rule group `meta`: every key present and well-formed. */
    fun meta(meta: Map<String, String>): DbMeta {
        fun need(k: String) = meta[k] ?: throw bad("meta: no $k")
        if (need("format") != EdgeM3Contract.INDEX_DB_FORMAT) throw bad("meta: format ${meta["format"]}, not ${EdgeM3Contract.INDEX_DB_FORMAT}")
        val fv = metaInt(need("format_version")) ?: throw bad("meta: format_version ${meta["format_version"]}")
        if (fv > EdgeM3Contract.INDEX_DB_VERSION) throw newer(fv.toString())
        if (fv < EdgeM3Contract.INDEX_DB_VERSION) throw older(fv.toString())
        val dim = metaInt(need("dim"))?.takeIf { it in 1L..EdgeM3Contract.INDEX_MAX_DIM.toLong() }?.toInt() ?: throw bad("meta: dim ${meta["dim"]}")
        val dense = need("dense").takeIf { it in EdgeM3Contract.DENSE_STORES } ?: throw bad("meta: dense ${meta["dense"]}")
        val colbert = need("colbert").takeIf { it in EdgeM3Contract.COLBERT_STORES } ?: throw bad("meta: colbert ${meta["colbert"]}")
        val bundleJson = try { MiniJson.parse(need("bundle")) } catch (e: EdgeM3Exception) { throw bad("meta: bundle is not JSON") }
        if (bundleJson != null && (bundleJson !is Map<*, *> || EdgeM3Contract.INDEX_BUNDLE_KEYS.any { bundleJson[it] !is String })) {
            throw bad("meta: bundle: needs ${EdgeM3Contract.INDEX_BUNDLE_KEYS.joinToString(", ")} (strings)")
        }
        val bundle = if (bundleJson == null) null else corruptIndex { JsonTree.obj(bundleJson, "$dbFile: meta: bundle") }
        val base = need("base")
        if (base != "" && base != "." && !isBaseName(base)) throw bad("meta: base \"$base\"")
        val sha = need("base_sha256")
        if ((base == "") != (sha == "")) throw bad("meta: base_sha256 \"$sha\" for base \"$base\"")
        val gen = metaInt(need("generation")) ?: throw bad("meta: generation ${meta["generation"]}")
        return DbMeta(dim, dense, colbert, bundle, base, sha, gen)
    }

    /** Rule group `bundle`: the index's bundle identity is the app's bundle (`bundleFiles`: its
     *  manifest.json `files`, name -> sha256); another bundle's index is a plain EdgeM3Exception. */
    fun bundle(b: Map<String, Any?>, bundleFiles: Map<String, String>, dir: File) {
        for (key in listOf("model", "tokenizer")) {
            val file = b["${key}_file"] as? String ?: throw bad("meta: bundle has no ${key}_file")
            val sha = b["${key}_sha256"] as? String ?: throw bad("meta: bundle has no ${key}_sha256")
            if (bundleFiles[file] != sha) {
                throw EdgeM3Exception("$dir: index built by another bundle ($file sha256 ${sha.take(12)}..., " +
                    "the bundle's is ${bundleFiles[file]?.take(12) ?: "absent"})")
            }
        }
    }

    /** Rule group `base`: the base folder's shape and bundle are the meta's. */
    fun base(b: EdgeM3Index, meta: DbMeta) {
        if (b.dim != meta.dim || b.denseStore != meta.dense || b.colbertStore != meta.colbert) {
            throw EdgeM3CorruptIndexException("$dbFile: dim/dense/colbert ${meta.dim}/${meta.dense}/${meta.colbert}, its base's are ${b.dim}/${b.denseStore}/${b.colbertStore}")
        }
        val bb = if (b.bundle.isEmpty()) null else b.bundle
        if (!sameModel(bb, meta.bundle)) throw EdgeM3CorruptIndexException("$dbFile: written for another bundle than its base ${b.dir}")
    }

    /** Rule group `removed`: rows of the base (none without one), each passage's rows all or none. */
    fun removed(rows: List<Array<Any?>>, b: EdgeM3Index?): BooleanArray {
        val rem = BooleanArray(b?.count ?: 0)
        for (row in rows) {
            val r = IndexStore.longOf(row[0], "removed.row")
            if (r < 0 || r >= rem.size) throw bad("removed: row $r outside the base's ${rem.size}")
            rem[r.toInt()] = true
        }
        if (b != null && rem.any { it }) {  // a passage is removed whole: every chunk's row or none
            val parts = HashMap<PassageId, IntArray>()  // id -> (rows, removed rows)
            for (r in 0 until b.count) parts.getOrPut(b.ids[r]) { IntArray(2) }.let { it[0]++; if (rem[r]) it[1]++ }
            if (parts.values.any { it[1] in 1 until it[0] }) {
                throw bad("removed: a base passage is removed in part (some of its chunks' rows)")
            }
        }
        return rem
    }

    /** Rule group `passages`, a text id: its bytes (`CAST(id AS BLOB)`) strictly UTF-8. */
    fun passageId(seq: Any?, raw: Any?): String = utf8(raw) ?: throw bad("passages: seq $seq: an id that is not UTF-8")

    /** Rule group `passages`, one row (seq, id, chunk, dense, dense_scale, lex_tokens, lex_weights,
     *  colbert, colbert_scale; a text id already read strictly as UTF-8): its cells in stored form. */
    fun passage(row: Array<Any?>, meta: DbMeta): Stored {
        val dim = meta.dim
        val denseStore = meta.dense
        val colbertStore = meta.colbert
        val id = PassageId.ofValue(row[1]) ?: throw bad("passages: an id that is neither an integer nor text")
        val w = "passages: id ${id.show()}"
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
            if (!(scale > 0f) || !Stored.finite(scale)) throw bad("$w: dense_scale $scale (want finite and > 0)")
        } else {
            if (denseScale != null) throw bad("$w: a dense_scale in a float32 index")
            if (dense.size != dim * 4) throw bad("$w: dense of ${dense.size} bytes (want ${dim * 4})")
            val f = le(dense).asFloatBuffer()
            denseF32 = FloatArray(dim) { f.get(it) }
            if (!denseF32.all { Stored.finite(it) }) throw bad("$w: a dense value that is not finite")
        }
        val tokens = blob(5, "lex_tokens") ?: ByteArray(0)
        val weights = blob(6, "lex_weights") ?: ByteArray(0)
        if (tokens.size % 4 != 0 || tokens.size != weights.size) throw bad("$w: lex_tokens/lex_weights lengths")
        val tb = le(tokens).asIntBuffer()
        val wb = le(weights).asFloatBuffer()
        val ids = IntArray(tokens.size / 4) { tb.get(it) }
        val ws = FloatArray(ids.size) { wb.get(it) }
        for (i in ids.indices) {
            if ((i > 0 && ids[i - 1] >= ids[i]) || !(ws[i] > 0f) || !Stored.finite(ws[i])) throw bad("$w: lexical tokens not ascending or weights not finite and > 0")
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
                if (scales.any { !(it > 0f) || !Stored.finite(it) }) throw bad("$w: a colbert_scale not finite and > 0")
            }
        }
        return Stored(id, chunk, denseF32, denseCodes, scale, lexical, rows, half, codes, scales)
    }

    /** Rule group `chunk order`: a passage's chunks are 0, 1, ... in consecutive seqs (one
     *  transaction wrote them); `seen` holds the ids whose chunk 0 came before. */
    fun chunkOrder(last: Stored?, p: Stored, seen: HashSet<PassageId>) {
        val inOrder = if (p.chunk == 0) seen.add(p.id) else last != null && last.id == p.id && last.chunk + 1 == p.chunk
        if (!inOrder) throw bad("passages: id ${p.id.show()} has chunk ${p.chunk} out of order (chunks 0, 1, ... in consecutive seqs)")
    }

    /** Rule group `passages`, all rows: no id both in the base and added. */
    fun disjoint(id: PassageId): EdgeM3CorruptIndexException = bad("id ${id.show()} is both in the base and added")

    companion object {
        /** A text cell's bytes (`CAST(x AS BLOB)`) as UTF-8, strictly; null when they are not UTF-8. */
        fun utf8(raw: Any?): String? = try {
            Charsets.UTF_8.newDecoder().onMalformedInput(java.nio.charset.CodingErrorAction.REPORT)
                .onUnmappableCharacter(java.nio.charset.CodingErrorAction.REPORT)
                .decode(ByteBuffer.wrap(raw as? ByteArray ?: ByteArray(0))).toString()
        } catch (e: java.nio.charset.CharacterCodingException) {
            null
        }

        /** A meta integer (spec.INDEX_DB_INT_MAX): ASCII digits only (toLongOrNull alone takes a sign
         *  and other scripts' digits), at most 2^63 - 1; else null. */
        fun metaInt(v: String): Long? = if (v.isNotEmpty() && v.all { it in '0'..'9' }) v.toLongOrNull() else null

        /** A base folder's name: INDEX_BASE_PREFIX + n, n a meta integer. */
        fun isBaseName(name: String): Boolean {
            val p = EdgeM3Contract.INDEX_BASE_PREFIX
            return name.startsWith(p) && metaInt(name.substring(p.length)) != null
        }

        /** Two bundle identities (index.json's `bundle`) name the same model and tokenizer files and sha256s. */
        fun sameModel(a: Map<String, Any?>?, b: Map<String, Any?>?): Boolean {
            if (a == null || b == null) return a == null && b == null
            return EdgeM3Contract.INDEX_BUNDLE_KEYS.all { a[it] == b[it] && a[it] is String }
        }
    }
}
