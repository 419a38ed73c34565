package dev.edgem3

import java.io.BufferedInputStream
import java.io.DataInputStream
import java.io.EOFException
import java.io.File
import java.security.MessageDigest

// Issue 38: the Android kit's readers of untrusted files, driven by tools/fuzz/kits (the seeded,
// structure-aware mutational loop, kits.py, and the differential fuzzing of the SentencePiece and
// index readers, differential.py). No coverage-guided JVM fuzzer installs here (Jazzer is on Maven
// Central only), so the loop lives in Python and streams inputs to this process:
//
//   java -Xmx512m -cp KIT_JAR:SQLITE_JDBC_JAR dev.edgem3.KitFuzzKt FUZZ_DIR
//
// stdin: per input a line "TARGET LENGTH" then LENGTH bytes. stdout: one line per input,
// "accepted CONTENT" (CONTENT: what the reader read, for the differential targets), "refused KIND
// MESSAGE" (an EdgeM3Exception: the contract; of an index's files, INDEX_TARGETS, corrupt_index) or
// "violation CLASS: MESSAGE" (anything else: another exception, another kind refusing an index's
// files, an OutOfMemoryError past -Xmx, an assert). A hang is the driver's to time.
// FUZZ_DIR: tools/fuzz (the seeds some targets swap one file into).

val fuzzTexts = listOf("Hello wörld, ＡＢＣ ﬁ 123 <mask> [MASK] </s>", "日本語のテキスト 👍🏽 e\u0301", "x".repeat(120), "")

class FuzzAssert(message: String) : RuntimeException(message)

/** Targets whose input is all an index's files: every refusal must be corrupt_index. */
val INDEX_TARGETS = setOf("index", "index-diff", "writable")

fun require2(ok: Boolean, what: () -> String) {
    if (!ok) throw FuzzAssert(what())
}

class KitFuzz(private val fuzzDir: File) {
    private val scratch: File = File(if (File("/dev/shm").isDirectory) "/dev/shm" else System.getProperty("java.io.tmpdir"),
                                     "edge-m3-kit-fuzz-jvm-${System.nanoTime()}").also { it.mkdirs(); it.deleteOnExit() }

    private fun base(kind: String, seed: String): Map<String, ByteArray> = unpack(File(fuzzDir, "seeds/$kind/$seed").readBytes())
    private val tinySpec: TokenizerSpec by lazy {
        TokenizerSpec.fromJson((MiniJson.parse(String(base("bundle", "tiny").getValue(EdgeM3Contract.MANIFEST), Charsets.UTF_8)) as Map<*, *>)["tokenizer"])
    }
    private val trimmed by lazy { base("bundle", "tiny-trimmed") }
    private val wordpiece by lazy { base("bundle", "tiny-wordpiece") }

    fun run(target: String, data: ByteArray): String = when (target) {
        "spmodel" -> spmodel(data)
        "manifest" -> { manifest(data); "" }
        "bundle" -> { bundle(unpack(data)); "" }
        "golden" -> { bundle(trimmed + (EdgeM3Contract.GOLDEN to data)); "" }
        "vocab_map" -> { bundle(trimmed + (EdgeM3Contract.VOCAB_MAP to data)); "" }
        EdgeM3Contract.WORDPIECE -> { bundle(wordpiece + (EdgeM3Contract.WORDPIECE_VOCAB to data)); "" }  // target "wordpiece"
        "bpe" -> { bpe(unpack(data)); "" }
        "index" -> index(unpack(data), rehash = true)
        "index-diff" -> index(unpack(data), rehash = false)  // loop.py rehashed it once for all three
        "writable" -> writable(data, every = false)
        "writable-diff" -> writable(data, every = true)  // loop.py's differential: every passage
        else -> throw IllegalArgumentException("unknown target $target")
    }

    private fun exercise(tok: EdgeM3Tokenizer, spec: TokenizerSpec, rows: Int): List<IntArray> = fuzzTexts.map { text ->
        val ids = tok.encode(text)
        require2(ids.first() == spec.special.bos && ids.last() == spec.special.eos) { "bos/eos: ${ids.take(8)}" }
        require2(ids.all { it in 0 until spec.vocabSize }) { "ids past vocab_size ${spec.vocabSize}" }
        require2(tok.encode(text, 5).size <= 5) { "maxLength 5" }
        require2(tok.modelRows(ids).all { it in 0 until rows }) { "rows past the table ($rows)" }
        ids
    }

    /** The model's pieces, scores (float32 bits), types and charsmap: the differential's canonical form. */
    private fun spmodel(data: ByteArray): String {
        val m = SentencePieceModel.parse(data, EdgeM3Contract.SENTENCEPIECE)
        val sb = StringBuilder()
        for (i in 0 until m.size) {
            val cps = m.piece(i).codePoints().toArray().joinToString(",") { Integer.toHexString(it) }
            // NaN as "nan", as Python and Swift write it (Python's float64 round trip need not keep its payload)
            val bits = if (m.scores[i].isNaN()) "nan" else String.format("%08x", java.lang.Float.floatToRawIntBits(m.scores[i]))
            sb.append(cps).append(' ').append(bits)
              .append(' ').append(m.types[i]).append('\n')
        }
        sb.append("charsmap ").append(hex(m.charsmap)).append('\n')
        val digest = hex(MessageDigest.getInstance("SHA-256").digest(sb.toString().toByteArray())).substring(0, 16)
        val tok = try {
            EdgeM3Tokenizer.open(tinySpec) { data }
        } catch (e: EdgeM3Exception) {
            return "$digest tokenizer-refused"
        }
        return digest + " " + exercise(tok, tinySpec, tinySpec.vocabSize).joinToString(";") { it.joinToString(",") }
    }

    private fun manifest(data: ByteArray) {
        val m = Manifest.fromJson(MiniJson.parse(String(data, Charsets.UTF_8)))
        m.model("tflite")
    }

    private fun bundle(files: Map<String, ByteArray>) {
        val dir = writeFolder(files, EdgeM3Contract.MANIFEST)
        val b = LocalBundle.open(dir)
        val rows = b.tokenizer.vocab?.keptIds?.size ?: b.manifest.tokenizer.vocabSize
        exercise(b.tokenizer, b.manifest.tokenizer, rows)
        val golden = File(dir, EdgeM3Contract.GOLDEN)
        if (golden.isFile) {
            for (c in Golden.parse(LocalBundle.readJsonFile(golden)).cases) {
                EdgeM3Core.chooseSignature(c.expected.inputIds.size, b.model.signatures)
            }
        }
    }

    private fun bpe(files: Map<String, ByteArray>) {
        val raw = files[EdgeM3Contract.MANIFEST] ?: throw EdgeM3Exception("manifest.json: missing")
        val tree = JsonTree.obj(MiniJson.parse(String(raw, Charsets.UTF_8)), EdgeM3Contract.MANIFEST)
        val spec = TokenizerSpec.fromJson(JsonTree.field(tree, "tokenizer", EdgeM3Contract.MANIFEST))
        val tok = EdgeM3Tokenizer.open(spec) { name -> files[name] ?: throw EdgeM3Exception("$name: not found") }
        exercise(tok, spec, spec.vocabSize)
    }

    private fun query(dim: Int, tokens: IntArray): Retrieval.Vectors {
        val lex = LinkedHashMap<String, Float>()
        for (t in tokens) lex[t.toString()] = 0.5f
        lex["7"] = 0.25f
        return Retrieval.Vectors(FloatArray(dim) { 0.25f }, Retrieval.Lexical.of(lex), Array(2) { FloatArray(dim) { 0.25f } })
    }

    /** Every search mode the index supports: "MODE row:id:scorebits ..." joined by ";" (the differential's form). */
    private fun answers(count: Int, colbert: String, search: (String) -> List<EdgeM3Index.Hit>, id: (Int) -> PassageId): String =
        EdgeM3Contract.SCORE_MODES.filter { colbert != "none" || !it.contains("colbert") }.joinToString(";") { mode ->
            val hits = search(mode)
            require2(hits.size <= minOf(3, count)) { "$mode: ${hits.size} hits" }
            require2(hits.all { it.row in 0 until count }) { "$mode: row out of range" }
            mode + " " + hits.joinToString(" ") { h ->
                "${h.row}:${idText(id(h.row))}:${scoreBits(h.score)}"
            }
        }

    private fun scoreBits(score: Double): String =
        if (score.isNaN()) "nan" else String.format("%016x", java.lang.Double.doubleToRawLongBits(score))

    private fun idText(id: PassageId): String = if (id is PassageId.Str) "s" + hex(id.value.toByteArray()) else "i$id"

    private fun index(files: Map<String, ByteArray>, rehash: Boolean): String {
        val dir = writeFolder(files, if (rehash) EdgeM3Contract.INDEX_MANIFEST else null)
        val idx = EdgeM3Index.open(dir)
        require2(idx.ids.size == idx.count) { "ids" }
        val t = idx.sparseTokens
        val tokens = IntArray(minOf(3, t.limit())) { t.get(it) }
        val q = query(idx.dim, tokens)
        return "${idx.count} ${idx.dim} " + answers(idx.count, idx.colbertStore, { idx.search(q, 3, it) }, { idx.ids[it] })
    }

    /** The passage and row counts, the width, then every search mode per passage and per chunk:
     *  "MODE[/chunks] row:id:chunk:scorebits ..." joined by ";" (the differential's form, as loop.py writes it).
     *  The top 3, or with `every` k = the row count: every passage and chunk in the answer. */
    private fun writable(data: ByteArray, every: Boolean): String {
        val dir = writeFolder(mapOf(EdgeM3Contract.INDEX_DB to data), null)
        val idx = EdgeM3WritableIndex.open(dir, JdbcIndexDbDriver)
        try {
            val q = query(idx.dim, intArrayOf(5, 6, 9))
            val n = idx.count
            val rows = idx.rows
            val k = if (every) maxOf(rows, 1) else 3
            val parts = EdgeM3Contract.SCORE_MODES.filter { idx.colbertStore != "none" || !it.contains("colbert") }.flatMap { mode ->
                listOf(false, true).map { chunks ->
                    val hits = idx.search(q, k, mode, chunks = chunks)
                    require2(hits.size <= minOf(k, if (chunks) rows else n)) { "$mode: ${hits.size} hits" }
                    require2(hits.all { it.row in 0 until rows }) { "$mode: row out of range" }
                    require2(hits.all { it.id == idx.id(it.row) }) { "$mode: a hit's id is not its row's" }
                    require2(chunks || hits.map { it.id }.toSet().size == hits.size) { "$mode: a passage twice" }
                    (listOf(if (chunks) "$mode/chunks" else mode) + hits.map { h ->
                        "${h.row}:${idText(h.id)}:${h.chunk}:${scoreBits(h.score)}"
                    }).joinToString(" ")
                }
            }
            return "$n $rows ${idx.dim} " + parts.joinToString(";")
        } finally {
            idx.close()
        }
    }

    /** harness.write_folder + harness.rehash: the manifest's files entries rewritten to match. */
    private fun writeFolder(input: Map<String, ByteArray>, manifest: String?): File {
        val root = File(scratch, "in")
        root.deleteRecursively()
        root.mkdirs()
        val files = LinkedHashMap(input)
        if (manifest != null) rehash(files, manifest)
        for (name in files.keys.sortedByDescending { n -> n.count { it == '/' } }) {
            val f = File(root, name)
            if (f.exists()) continue
            f.parentFile.mkdirs()
            f.writeBytes(files.getValue(name))
        }
        return root
    }

    /** harness.rehash: each changed entry's sha256 and size edited in the manifest's own text
     *  (`splicedEntry`), an entry that matches left as it is; the whole manifest is written again
     *  only when an old value is not found once, so its own mutations reach the reader as made. */
    private fun rehash(files: MutableMap<String, ByteArray>, manifest: String) {
        val raw = files[manifest] ?: return
        @Suppress("UNCHECKED_CAST")
        val m = (try { MiniJson.parse(String(raw, Charsets.UTF_8)) } catch (e: EdgeM3Exception) { null }) as? Map<String, Any?> ?: return
        @Suppress("UNCHECKED_CAST")
        val entries = m["files"] as? Map<String, Any?> ?: return
        var text: ByteArray? = raw  // null once an edit could not be made in place
        var changed = false
        val out = LinkedHashMap<String, Any?>(m)
        out["files"] = entries.mapValues { (name, e) ->
            val data = files[name]
            if (e is Map<*, *> && data != null) {
                val sha = hex(MessageDigest.getInstance("SHA-256").digest(data))
                val size = data.size.toLong()
                val oldSha = e["sha256"] as? String
                val oldSize = e["size"] as? Long
                if (oldSha == sha && oldSize == size) {
                    e
                } else {
                    val t = text
                    text = if (t != null && oldSha != null && oldSize != null) splicedEntry(t, oldSha, oldSize, sha, size) else null
                    changed = true
                    LinkedHashMap<Any?, Any?>(e).also {
                        it["sha256"] = sha
                        it["size"] = size
                    }
                }
            } else e
        }
        files[manifest] = text ?: if (changed) toJson(out).toByteArray() else raw
    }

    companion object {
        /** harness._splice_entry: `raw` with one entry's digest and size replaced in place (the old
         *  digest's one occurrence, quoted, then the first `"size": N` after it before a `}`); null
         *  when either is not found so. */
        private fun splicedEntry(raw: ByteArray, oldSha: String, oldSize: Long, sha: String, size: Long): ByteArray? {
            val quoted = "\"$oldSha\"".toByteArray()
            val i = indexOf(raw, quoted, 0)
            if (i < 0 || indexOf(raw, quoted, i + 1) >= 0) return null
            val out = raw.copyOfRange(0, i) + "\"$sha\"".toByteArray() + raw.copyOfRange(i + quoted.size, raw.size)
            val key = "\"size\": $oldSize".toByteArray()
            val close = indexOf(out, "}".toByteArray(), i).let { if (it < 0) out.size else it }
            var j = indexOf(out, key, i)
            while (j in 0 until close) {
                val end = j + key.size
                if (end == out.size || out[end].toInt().toChar() !in "0123456789.eE") {
                    return out.copyOfRange(0, j) + "\"size\": $size".toByteArray() + out.copyOfRange(end, out.size)
                }
                j = indexOf(out, key, j + 1)
            }
            return null
        }

        private fun indexOf(hay: ByteArray, needle: ByteArray, from: Int): Int {
            var i = from
            while (i + needle.size <= hay.size) {
                var k = 0
                while (k < needle.size && hay[i + k] == needle[k]) k++
                if (k == needle.size) return i
                i++
            }
            return -1
        }

        fun hex(b: ByteArray): String = b.joinToString("") { String.format("%02x", it) }

        /** harness.unpack: `\n==> NAME <==\n` then the bytes, per file; unsafe names dropped. */
        fun unpack(data: ByteArray): Map<String, ByteArray> {
            val s = String(data, Charsets.ISO_8859_1)  // one char per byte
            val chunks = ("\n" + s).split("\n==> ").drop(1)
            val files = LinkedHashMap<String, ByteArray>()
            val part = Regex("[A-Za-z0-9_.-]{1,100}")
            for (chunk in chunks) {
                val e = chunk.indexOf(" <==\n")
                if (e < 0) continue
                val nameBytes = chunk.substring(0, e).toByteArray(Charsets.ISO_8859_1)
                val name = try {
                    Charsets.UTF_8.newDecoder().decode(java.nio.ByteBuffer.wrap(nameBytes)).toString()
                } catch (x: java.nio.charset.CharacterCodingException) { continue }
                val parts = name.split("/")
                if (parts.size <= 2 && parts.all { part.matches(it) && it != "." && it != ".." }) {
                    files.remove(name)
                    files[name] = chunk.substring(e + 5).toByteArray(Charsets.ISO_8859_1)
                }
            }
            return files
        }

        fun toJson(x: Any?): String = when (x) {
            null -> "null"
            is String -> "\"" + x.flatMap { c ->
                when {
                    c == '"' -> listOf('\\', '"')
                    c == '\\' -> listOf('\\', '\\')
                    c < ' ' -> String.format("\\u%04x", c.code).toList()
                    else -> listOf(c)
                }
            }.joinToString("") + "\""
            is Map<*, *> -> x.entries.joinToString(",", "{", "}") { toJson(it.key as String) + ":" + toJson(it.value) }
            is List<*> -> x.joinToString(",", "[", "]") { toJson(it) }
            is Double -> if (x.isFinite() && x == Math.rint(x) && Math.abs(x) < 1e15) x.toLong().toString() else x.toString()
            else -> x.toString()
        }
    }
}

fun main(args: Array<String>) {
    val fuzz = KitFuzz(File(args.getOrNull(0) ?: "tools/fuzz"))
    val input = DataInputStream(BufferedInputStream(System.`in`, 1 shl 16))
    val out = System.out.bufferedWriter()
    while (true) {
        val header = StringBuilder()
        while (true) {
            val c = input.read()
            if (c < 0) { out.flush(); return }
            if (c == '\n'.code) break
            header.append(c.toChar())
        }
        val (target, length) = header.split(" ").let { it[0] to it[1].toInt() }
        val data = ByteArray(length)
        try { input.readFully(data) } catch (e: EOFException) { return }
        val line = try {
            "accepted " + fuzz.run(target, data)
        } catch (e: EdgeM3Exception) {
            val msg = e.message ?: ""
            if (msg.isBlank() || msg.any { it in EdgeM3Contract.LINE_BREAK_ESCAPES }) "violation the refusal is not one line: ${msg.take(300).replace("\n", "\\n")}"
            else if (target in INDEX_TARGETS && e.kind != EdgeM3ErrorKind.CORRUPT_INDEX) "violation the refusal is not corrupt_index: ${e.kind.wire} ${msg.take(300)}"
            else "refused ${e.kind.wire} ${msg.take(200)}"
        } catch (e: Throwable) {  // the contract: nothing but an EdgeM3Exception may escape a reader
            "violation ${e.javaClass.name}: ${(e.message ?: "").take(300).replace("\n", "\\n")} at ${e.stackTrace.take(4).joinToString(" < ")}"
        }
        out.write(line.replace("\n", "\\n").replace("\r", "\\r"))
        out.newLine()
        out.flush()
    }
}
