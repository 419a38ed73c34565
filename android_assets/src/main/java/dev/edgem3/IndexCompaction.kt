package dev.edgem3

import java.io.File
import java.io.FileOutputStream
import java.io.IOException
import java.nio.ByteBuffer
import java.nio.ByteOrder
import java.security.MessageDigest
import java.text.SimpleDateFormat
import java.util.Date
import java.util.Locale
import java.util.TimeZone

/**
 * Compaction's files (docs/index-format.md, "The writable index"): the logical rows written whole
 * as a new format-1 base folder (a temporary name, then renamed), and after the database points
 * at it, the old base and a kill's leftovers deleted. The transaction that swaps the base in is
 * EdgeM3WritableIndex.compact's (IndexStore.swapBase); nothing here touches the database.
 */
internal class IndexCompaction(private val dir: File) {
    /** The logical rows as a format-1 folder (docs/index-format.md), as Python's Index.save writes it. */
    fun writeBase(target: File, seg: IndexSegments) {
        val b = seg.base
        val survivors = seg.survivors
        val passages = seg.passages
        val s = survivors.size
        val n = s + passages.size
        val dim = seg.dim
        val denseStore = seg.denseStore
        val colbertStore = seg.colbertStore
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
            val ids = ArrayList<Any>(n)  // ids.json: numbers as numbers, strings as strings
            for (i in 0 until s) ids.add(b!!.ids[survivors[i]].value)
            for (p in passages) ids.add(p.id.value)
            files[EdgeM3Contract.INDEX_IDS] = writeFile(File(tmp, EdgeM3Contract.INDEX_IDS),
                PyJson.dumps(ids, indent = -1, asciiOnly = false).toByteArray(Charsets.UTF_8))
            val fmt = SimpleDateFormat("yyyy-MM-dd'T'HH:mm:ss'Z'", Locale.ROOT)
            fmt.timeZone = TimeZone.getTimeZone("UTC")
            val manifest = linkedMapOf<String, Any?>(
                "format" to EdgeM3Contract.INDEX_FORMAT,
                "format_version" to EdgeM3Contract.INDEX_FORMAT_VERSION.toLong(),
                "edge_m3_version" to EdgeM3WritableIndex.EDGE_M3_VERSION,
                "created" to fmt.format(Date()),
                "bundle" to seg.bundle?.let { identity(it) },
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

    /**
     * After a compaction: `base-*` folders no database names (a kill's leftovers, written but never
     * swapped in) and their half-written temporaries (`.base-<n>.building-*`, `.base-<n>.old-*`),
     * generations up to this one only (a later one may be another process's compaction in
     * progress), and a root base that is no longer the base.
     */
    fun collectGarbage(baseName: String, generation: Long) {
        val names = dir.list() ?: return
        for (name in names) {
            val f = File(dir, name)
            val temporary = name.startsWith(".") && (name.contains(".building-") || name.contains(".old-"))
            val base = if (temporary) name.substring(1).substringBefore('.') else name
            if (!f.isDirectory || !IndexDbRules.isBaseName(base) || name == baseName) continue
            val g = IndexDbRules.metaInt(base.substring(EdgeM3Contract.INDEX_BASE_PREFIX.length)) ?: continue
            if (g <= generation) deleteTree(f)
        }
        if (baseName != ".") deleteRootBase()
    }

    fun deleteBase(name: String) {
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

    companion object {
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

        fun sha256(f: File): String {
            val digest = MessageDigest.getInstance("SHA-256")
            digest.update(f.readBytes())
            return ModelCheck.hex(digest)
        }

        /** index.json's `bundle` as Python's BundleIdentity.to_json writes it. */
        fun identity(b: Map<String, Any?>): Map<String, Any?> {
            val out = LinkedHashMap<String, Any?>()
            for (k in EdgeM3Contract.INDEX_BUNDLE_KEYS) {
                out[k] = b[k] as? String ?: throw EdgeM3Exception("bundle: needs $k (a string)")
            }
            out["quant"] = (b["quant"] ?: "").toString()
            out["path"] = (b["path"] ?: "").toString()
            return out
        }
    }
}
